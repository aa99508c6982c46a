"""`logits.score_block` on an accelerator: the same per-target facts, computed where the logits are.

Only the per-row results (a few numbers and the top-k, through pinned host buffers) leave the
device, never the [rows x vocab] block (1 GiB per 1,024 rows of a 262K vocabulary). Conventions
are `logits.py`'s: rank = 1 + number of strictly larger logits, top-k by value descending then id
ascending (ties at the k-th value resolved exactly), log-probabilities as target logit minus
log-sum-exp, the exp-sum in float32 and its log in float64. The top-k comes from the tiles with
the largest maxima (`_top_k`), the rest from one reduction (`_row_reduction`, `torch.compile`d on
CUDA, eager elsewhere, which is how the tests check it on a CPU). Why each is exact, and what it
costs against the alternatives on an H200: docs/gpu.md.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ctxeval.backends.logits import BlockScores


def score_block_device(logits, targets, top_k: int, temperatures: tuple[float, ...] = ()) -> BlockScores:
    """Score `targets[i]` (a long tensor on the logits' device) against `logits[i]` (float32 [n, vocab])."""
    import torch

    n, vocab = logits.shape
    k_eff = min(max(top_k, 1), vocab)
    vals, ids = _top_k(logits, k_eff)
    reduction = _compiled_row_reduction() if logits.device.type == "cuda" else _row_reduction
    target_logit, n_above, n_at_least_kth, sums = reduction(logits, targets, vals[:, :1], vals[:, -1:], tuple(1.0 / t for t in (1.0, *temperatures)))
    small = {
        "vals": vals,
        "ids": ids,
        "row_max": vals[:, 0],
        "target": target_logit,
        "rank": 1 + n_above,
        "n_ge": n_at_least_kth,
        "sums": sums,
    }
    host = _to_host(small, logits.device)
    for row in np.nonzero(host["n_ge"] > k_eff)[0]:  # a tie at the k-th value: every tied id competes
        cand = torch.nonzero(logits[row] >= logits[row, ids[row, -1]]).flatten()
        host["ids"][row], host["vals"][row] = _first_k(cand.cpu().numpy(), logits[row, cand].cpu().numpy(), k_eff)
    order = np.lexsort((host["ids"], -host["vals"]), axis=1)  # ties inside the top-k: id ascending
    topk_ids = np.take_along_axis(host["ids"], order, axis=1)
    topk_vals = np.take_along_axis(host["vals"], order, axis=1)
    row_max64 = host["row_max"].astype(np.float64)
    target64 = host["target"].astype(np.float64)
    log_sums = np.log(host["sums"].astype(np.float64))
    lse = row_max64 + log_sums[:, 0]
    temp_logprobs = np.stack([target64 / t - (row_max64 / t + log_sums[:, j + 1]) for j, t in enumerate(temperatures)], axis=1) if temperatures else np.empty((n, 0))
    return BlockScores(
        logprob=target64 - lse,
        rank=host["rank"].astype(np.int64),
        greedy_id=topk_ids[:, 0].astype(np.int32),
        topk_ids=topk_ids[:, :top_k].astype(np.int32),
        topk_logprobs=(topk_vals[:, :top_k] - lse[:, None]).astype(np.float32),
        temp_logprobs=temp_logprobs,
        listed=np.full(n, -1, dtype=np.int32),
    )


_TILE = 256


def _top_k(logits, k: int):
    """Values (descending) and ids of a top k of each row: the exact values; among logits tied
    at the k-th value, any of them (the caller resolves those ties by id)."""
    import torch

    n, vocab = logits.shape
    n_full = vocab // _TILE
    if n_full + (vocab % _TILE > 0) < k:  # fewer tiles than k
        return torch.topk(logits, k, dim=1, sorted=True)
    maxima = logits[:, : n_full * _TILE].view(n, n_full, _TILE).amax(dim=2)
    if vocab % _TILE:  # the ragged last tile
        maxima = torch.cat([maxima, logits[:, n_full * _TILE :].amax(dim=1, keepdim=True)], dim=1)
    tiles = torch.topk(maxima, k, dim=1, sorted=False).indices
    cols = (tiles[:, :, None] * _TILE + torch.arange(_TILE, device=logits.device)).view(n, k * _TILE)
    inside = cols < vocab
    cand = torch.where(inside, logits.gather(1, cols.clamp(max=vocab - 1)), float("-inf"))
    vals, where = torch.topk(cand, k, dim=1, sorted=True)
    return vals, cols.gather(1, where)


def _row_reduction(logits, targets, row_max, kth, inv_temperatures: tuple[float, ...]):
    """Per row of `logits` [n, vocab]: the target's logit, the count of logits strictly above it,
    the count at or above `kth` [n, 1], and sum exp((z - row_max) * s) for each s of `inv_temperatures`."""
    import torch

    target = logits.gather(1, targets[:, None])
    n_above = (logits > target).sum(dim=1)
    n_ge = (logits >= kth).sum(dim=1)
    shifted = logits - row_max
    sums = torch.stack([torch.exp(shifted * s).sum(dim=1) for s in inv_temperatures], dim=1)
    return target[:, 0], n_above, n_ge, sums


@lru_cache(maxsize=1)
def _compiled_row_reduction():
    """`_row_reduction` fused into one kernel per block; dynamic in the row count, so a short last
    block does not recompile. Compiled once per process, on the first CUDA block."""
    import torch

    return torch.compile(_row_reduction, dynamic=True)


def _to_host(tensors: dict, device) -> dict[str, np.ndarray]:
    """Copy small device tensors to host numpy arrays; on CUDA through pinned buffers with
    non-blocking copies and a single synchronisation for all of them."""
    import torch

    if device.type != "cuda":
        return {name: t.cpu().numpy() for name, t in tensors.items()}
    pinned = {name: torch.empty(t.shape, dtype=t.dtype, pin_memory=True) for name, t in tensors.items()}
    for name, t in tensors.items():
        pinned[name].copy_(t, non_blocking=True)
    torch.cuda.current_stream(device).synchronize()
    return {name: p.numpy() for name, p in pinned.items()}


def _first_k(ids: np.ndarray, vals: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    order = np.lexsort((ids, -vals))[:k]
    return ids[order], vals[order]
