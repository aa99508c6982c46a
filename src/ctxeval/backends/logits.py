"""Per-target facts from a block of logits, without ever forming a log-softmax of the block.

For each row (one target position) we keep only: the target's log-probability at each
requested temperature, its exact 1-based rank over the full vocabulary, the top-k
(ids, log-probabilities) and the greedy token. Work is done in row blocks split over threads
(NumPy releases the GIL), so a [positions x vocab] array is never copied or materialised in
float64.

Rank convention: rank = 1 + number of tokens with a strictly larger logit, so a tie with the
target counts in the target's favour.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from ctxeval.backends.cores import usable_cores

# Top-k candidates are found through maxima of vocabulary groups of this size: the k-th
# largest group maximum is a lower bound for the k-th largest logit, so the few logits at or
# above it contain the top-k. Measured faster than np.argpartition on 262K-wide rows.
_GROUP = 256
_ROWS_PER_TASK = 16


@dataclass
class BlockScores:
    """Per-target results for a block of rows; arrays share the row order of the input."""

    logprob: np.ndarray  # float64 [n]
    rank: np.ndarray  # int64 [n]
    greedy_id: np.ndarray  # int32 [n]
    topk_ids: np.ndarray  # int32 [n, k]
    topk_logprobs: np.ndarray  # float32 [n, k]
    temp_logprobs: np.ndarray  # float64 [n, len(temperatures)]
    # int32 [n]: length of the returned top-k list a rank was read from (an API's; thesis eq. 4
    # scores it with l = that length), -1 where the rank is over the full vocabulary
    listed: np.ndarray

    @staticmethod
    def concat(parts: list[BlockScores]) -> BlockScores:
        return BlockScores(*(np.concatenate([getattr(p, f) for p in parts]) for f in BlockScores.__dataclass_fields__))

    def rows(self, start: int, stop: int) -> BlockScores:
        """Rows `start:stop` (one pass of a batch, or the greedy row after a prompt)."""
        return BlockScores(*(getattr(self, f)[start:stop] for f in BlockScores.__dataclass_fields__))


_POOL: ThreadPoolExecutor | None = None


def _pool() -> ThreadPoolExecutor:
    global _POOL
    if _POOL is None:
        _POOL = ThreadPoolExecutor(max_workers=usable_cores(), thread_name_prefix="ctxeval-logits")
    return _POOL


def score_block(
    logits: np.ndarray,
    targets: np.ndarray,
    top_k: int,
    temperatures: tuple[float, ...] = (),
) -> BlockScores:
    """Score `targets[i]` against `logits[i]` for every row; `logits` is float32 [n, vocab].

    `logits` may be a view of a backend's buffer: it is read, never written.
    """
    if logits.ndim != 2 or logits.shape[0] != len(targets):
        raise ValueError(f"logits {logits.shape} and targets ({len(targets)}) disagree")
    n = logits.shape[0]
    tasks = [(lo, min(lo + _ROWS_PER_TASK, n)) for lo in range(0, n, _ROWS_PER_TASK)]
    if len(tasks) <= 1:
        return _score_rows(logits, targets, top_k, temperatures)
    parts = list(_pool().map(lambda t: _score_rows(logits[t[0] : t[1]], targets[t[0] : t[1]], top_k, temperatures), tasks))
    return BlockScores.concat(parts)


def _score_rows(logits: np.ndarray, targets: np.ndarray, top_k: int, temperatures: tuple[float, ...]) -> BlockScores:
    n, vocab = logits.shape
    rows = np.arange(n)
    k_eff = max(top_k, 1)
    topk_ids, topk_vals = _top_k(logits, k_eff)
    row_max = topk_vals[:, 0].astype(np.float64)
    target_logit = logits[rows, targets].astype(np.float64)
    if not np.all(np.isfinite(row_max)) or not np.all(np.isfinite(target_logit)):
        raise FloatingPointError("non-finite logits from the model")
    rank = 1 + np.count_nonzero(logits > target_logit[:, None].astype(np.float32), axis=1)
    lse = _log_sum_exp(logits, row_max, 1.0)
    temp_logprobs = np.empty((n, len(temperatures)))
    for j, temperature in enumerate(temperatures):
        temp_lse = lse if temperature == 1.0 else _log_sum_exp(logits, row_max, temperature)
        temp_logprobs[:, j] = target_logit / temperature - temp_lse
    return BlockScores(
        logprob=target_logit - lse,
        rank=rank.astype(np.int64),
        greedy_id=topk_ids[:, 0].astype(np.int32),
        topk_ids=topk_ids[:, :top_k].astype(np.int32),
        topk_logprobs=(topk_vals[:, :top_k] - lse[:, None]).astype(np.float32),
        temp_logprobs=temp_logprobs,
        listed=np.full(n, -1, dtype=np.int32),
    )


def _log_sum_exp(logits: np.ndarray, row_max: np.ndarray, temperature: float) -> np.ndarray:
    """log sum_j exp(z_j / T) per row, shifted by the row maximum for stability."""
    shifted = logits - row_max[:, None].astype(np.float32)
    if temperature != 1.0:
        shifted *= np.float32(1.0 / temperature)
    np.exp(shifted, out=shifted)
    return row_max / temperature + np.log(shifted.sum(axis=1, dtype=np.float64))


def _top_k(logits: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Ids and logits of the k largest entries per row, by value descending then id ascending.

    The k-th largest group maximum is a lower bound of the k-th largest logit, so only the
    groups whose maximum reaches it (about k of them) and the ragged tail can hold the top-k:
    those few are gathered and sorted instead of scanning a full-width mask.
    """
    n, vocab = logits.shape
    n_full = vocab // _GROUP
    if n_full < k:
        return _top_k_by_sort(logits, k)
    grouped = logits[:, : n_full * _GROUP].reshape(n, n_full, _GROUP)
    group_max = grouped.max(axis=2)
    tail = logits[:, n_full * _GROUP :]
    all_max = np.concatenate([group_max, tail.max(axis=1, keepdims=True)], axis=1) if tail.shape[1] else group_max
    if np.isnan(all_max).any() or np.isposinf(all_max).any():
        raise FloatingPointError("non-finite logits from the model")
    threshold = np.partition(all_max, all_max.shape[1] - k, axis=1)[:, all_max.shape[1] - k]
    group_rows, group_ids = np.nonzero(group_max >= threshold[:, None])
    cand_rows = np.repeat(group_rows, _GROUP)
    cand_ids = (group_ids[:, None] * _GROUP + np.arange(_GROUP)).ravel()
    cand_vals = grouped[group_rows, group_ids].ravel()
    if tail.shape[1]:
        cand_rows = np.concatenate([cand_rows, np.repeat(np.arange(n), tail.shape[1])])
        cand_ids = np.concatenate([cand_ids, np.tile(np.arange(n_full * _GROUP, vocab), n)])
        cand_vals = np.concatenate([cand_vals, tail.ravel()])
    keep = cand_vals >= threshold[cand_rows]
    cand_rows, cand_ids, cand_vals = cand_rows[keep], cand_ids[keep], cand_vals[keep]
    order = np.lexsort((cand_ids, -cand_vals, cand_rows))
    cand_rows, cand_ids, cand_vals = cand_rows[order], cand_ids[order], cand_vals[order]
    row_starts = np.searchsorted(cand_rows, np.arange(n))
    take = (row_starts[:, None] + np.arange(k)[None, :]).ravel()
    return cand_ids[take].reshape(n, k), cand_vals[take].reshape(n, k)


def _top_k_by_sort(logits: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    order = np.lexsort((np.broadcast_to(np.arange(logits.shape[1]), logits.shape), -logits), axis=1)[:, :k]
    return order, np.take_along_axis(logits, order, axis=1)


def pick_token(logits: np.ndarray, temperature: float, rng: np.random.Generator) -> int:
    """The next token of a generation: the argmax at temperature 0 (ties to the lowest id), else a
    draw from softmax(logits / temperature), computed in float64."""
    if temperature <= 0:
        return int(np.argmax(logits))
    z = logits.astype(np.float64) / temperature
    p = np.exp(z - z.max())
    return int(rng.choice(len(p), p=p / p.sum()))
