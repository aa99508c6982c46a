"""Per-token comparison of two next-token distributions from their logits, over the full
vocabulary, one block of rows at a time.

For each row (one scored target) of REF logits z and CAND logits w: KL(P_ref || P_cand) (and
optionally the reverse), each model's top-1 token, the target's rank and log-probability under
each, each model's top-k ids with their log-probabilities (what the HTML report's card shows),
and the overlap of the two top-k sets. No [positions x vocab] array is ever built for both
models: the caller hands over one block of rows of each (a view of a backend's buffer), and the
work is split in small row groups over threads (NumPy releases the GIL).

KL is summed term by term in the form  p_i * (expm1(d_i) - d_i),  d_i = log q_i - log p_i,
which equals p_i log(p_i / q_i) summed (the expm1 terms sum to sum q - sum p = 0), and every
term is >= 0 mathematically (e^d - 1 >= d), so rounding cannot make a KL negative; identical
logits give d = 0 exactly and a KL of exactly 0. Exponentials run in float32 (SIMD), sums and
log-normalisers in float64: a constant error in a normaliser changes the KL only to second order
(d KL / d c = sum (q - p) = 0), which keeps it within 1e-6 of a float64 full-softmax reference.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from ctxeval.backends.logits import _pool, _top_k

_ROWS_PER_TASK = 8  # float32 temporaries of 8 x vocab per thread
_LINEAR_ABOVE = 20.0  # log-ratios above this take the overflow-free split of a KL term


@dataclass
class DiffScores:
    """Per-target comparison of two models on a block of rows (row order of the input)."""

    kl: np.ndarray  # float64 [n], KL(P_ref || P_cand) in nats
    kl_reverse: np.ndarray  # float64 [n], KL(P_cand || P_ref); NaN when not computed
    ref_top1: np.ndarray  # int32 [n], argmax of REF (ties: lowest id)
    cand_top1: np.ndarray  # int32 [n]
    ref_rank: np.ndarray  # int64 [n], 1 + tokens with a strictly larger REF logit than the target
    cand_rank: np.ndarray  # int64 [n]
    ref_logprob: np.ndarray  # float64 [n], log P_ref(target)
    cand_logprob: np.ndarray  # float64 [n]
    topk_overlap: np.ndarray  # float64 [n], |top-k(REF) & top-k(CAND)| / k
    ref_topk_ids: np.ndarray  # int32 [n, k], REF's k most likely ids, most likely first (ties: lowest id)
    ref_topk_logprobs: np.ndarray  # float32 [n, k], their log-probabilities under REF
    cand_topk_ids: np.ndarray  # int32 [n, k]
    cand_topk_logprobs: np.ndarray  # float32 [n, k]

    @staticmethod
    def concat(parts: list[DiffScores]) -> DiffScores:
        return DiffScores(*(np.concatenate([getattr(p, f.name) for p in parts]) for f in fields(DiffScores)))

    def __len__(self) -> int:
        return len(self.kl)


def compare_block(ref: np.ndarray, cand: np.ndarray, targets: np.ndarray, top_k: int, reverse: bool = False) -> DiffScores:
    """Compare REF and CAND logits (float32 [n, vocab] each, read only) row by row."""
    if ref.ndim != 2 or ref.shape != cand.shape or ref.shape[0] != len(targets):
        raise ValueError(f"logits {ref.shape} / {cand.shape} and targets ({len(targets)}) disagree")
    if top_k < 1 or top_k > ref.shape[1]:
        raise ValueError(f"top_k must be within 1..{ref.shape[1]}, got {top_k}")
    n = ref.shape[0]
    tasks = [(lo, min(lo + _ROWS_PER_TASK, n)) for lo in range(0, n, _ROWS_PER_TASK)]
    if len(tasks) <= 1:
        return _compare_rows(ref, cand, targets, top_k, reverse)
    parts = list(_pool().map(lambda t: _compare_rows(ref[t[0] : t[1]], cand[t[0] : t[1]], targets[t[0] : t[1]], top_k, reverse), tasks))
    return DiffScores.concat(parts)


@dataclass
class _Normalised:
    """One model's rows: exp(z - max) in float32, its float64 row sums and log-normalisers."""

    exp: np.ndarray
    total: np.ndarray
    lse: np.ndarray


def _normalise(logits: np.ndarray) -> _Normalised:
    row_max = logits.max(axis=1)
    if not np.all(np.isfinite(row_max)):
        raise FloatingPointError("non-finite logits from the model")
    shifted = logits - row_max[:, None]
    np.exp(shifted, out=shifted)
    total = shifted.sum(axis=1, dtype=np.float64)
    return _Normalised(shifted, total, row_max.astype(np.float64) + np.log(total))


def _kl(log_ratio: np.ndarray, p: _Normalised, q: _Normalised) -> np.ndarray:
    """KL(P || Q) per row from d = log q - log p: the sum of p_i (expm1(d_i) - d_i).

    Where d_i > _LINEAR_ABOVE (P puts almost nothing where Q does not), expm1 would overflow
    float32 and p_i may have underflowed to 0, so the term is split as
    p_i (e^T - 1 - d_i) + (q_i - p_i e^T), the second part taken from Q's own normalised
    exponentials. Each term is clipped at 0 against a last-ulp error of a vectorised expm1
    (no exact term is negative)."""
    big_rows = np.flatnonzero(log_ratio.max(axis=1) > _LINEAR_ABOVE)
    term = np.expm1(np.minimum(log_ratio, _LINEAR_ABOVE) if len(big_rows) else log_ratio)
    term -= log_ratio
    np.maximum(term, 0.0, out=term)
    term *= p.exp
    kl = term.sum(axis=1, dtype=np.float64) / p.total
    for row in big_rows:
        cols = np.flatnonzero(log_ratio[row] > _LINEAR_ABOVE)
        rest = q.exp[row, cols] / q.total[row] - p.exp[row, cols] * np.exp(_LINEAR_ABOVE) / p.total[row]
        kl[row] += np.maximum(rest, 0.0).sum()
    if not np.all(np.isfinite(kl)):
        raise FloatingPointError("non-finite logits from the model")
    return kl


def _compare_rows(ref: np.ndarray, cand: np.ndarray, targets: np.ndarray, top_k: int, reverse: bool) -> DiffScores:
    n = ref.shape[0]
    rows = np.arange(n)
    p, q = _normalise(ref), _normalise(cand)
    # d_i = log q_i - log p_i = (w_i - z_i) - (lse_w - lse_z)
    log_ratio = cand - ref
    log_ratio -= (q.lse - p.lse).astype(np.float32)[:, None]
    kl = _kl(log_ratio, p, q)
    if reverse:
        np.negative(log_ratio, out=log_ratio)
        kl_reverse = _kl(log_ratio, q, p)
    else:
        kl_reverse = np.full(n, np.nan)
    ref_target = ref[rows, targets]
    cand_target = cand[rows, targets]
    ref_ids, ref_vals = _top_k(ref, top_k)
    cand_ids, cand_vals = _top_k(cand, top_k)
    overlap = np.array([len(np.intersect1d(a, b, assume_unique=True)) for a, b in zip(ref_ids, cand_ids)], dtype=np.float64) / top_k
    return DiffScores(
        kl=kl,
        kl_reverse=kl_reverse,
        ref_top1=ref_ids[:, 0].astype(np.int32),
        cand_top1=cand_ids[:, 0].astype(np.int32),
        ref_rank=1 + np.count_nonzero(ref > ref_target[:, None], axis=1).astype(np.int64),
        cand_rank=1 + np.count_nonzero(cand > cand_target[:, None], axis=1).astype(np.int64),
        ref_logprob=ref_target.astype(np.float64) - p.lse,
        cand_logprob=cand_target.astype(np.float64) - q.lse,
        topk_overlap=overlap,
        ref_topk_ids=ref_ids.astype(np.int32),
        ref_topk_logprobs=(ref_vals.astype(np.float64) - p.lse[:, None]).astype(np.float32),
        cand_topk_ids=cand_ids.astype(np.int32),
        cand_topk_logprobs=(cand_vals.astype(np.float64) - q.lse[:, None]).astype(np.float32),
    )
