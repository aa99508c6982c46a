"""`logits.score_block` on an accelerator: the same per-target facts, computed where the logits are.

Copying a [rows x vocab] float32 block to the host to score it there would move 1 GiB per
1,024 rows of a 262K vocabulary; here only the per-row results (a few numbers and the top-k)
leave the device, through pinned host buffers with non-blocking copies and one
synchronisation per block. Conventions are those of `logits.py`: rank = 1 + number of
strictly larger logits, top-k by value descending then id ascending (ties at the k-th value
are resolved exactly, by gathering every tied candidate of that row), log-probabilities as
target logit minus log-sum-exp, the sum of exp(z - max) accumulated in float32 by torch's
tree reduction and its log taken in float64.
"""

from __future__ import annotations

import numpy as np

from ctxeval.backends.logits import BlockScores


def score_block_device(logits, targets, top_k: int, temperatures: tuple[float, ...] = ()) -> BlockScores:
    """Score `targets[i]` (a long tensor on the logits' device) against `logits[i]` (float32 [n, vocab])."""
    import torch

    n, vocab = logits.shape
    k_eff = min(max(top_k, 1), vocab)
    vals, ids = torch.topk(logits, k_eff, dim=1, sorted=True)
    row_max = vals[:, :1]
    target_logit = logits.gather(1, targets[:, None])
    rank = 1 + (logits > target_logit).sum(dim=1)
    n_at_least_kth = (logits >= vals[:, -1:]).sum(dim=1)
    sums = [torch.exp((logits - row_max) * (1.0 / t)).sum(dim=1) for t in (1.0, *temperatures)]
    small = {
        "vals": vals,
        "ids": ids,
        "row_max": row_max[:, 0],
        "target": target_logit[:, 0],
        "rank": rank,
        "n_ge": n_at_least_kth,
        "sums": torch.stack(sums, dim=1),
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
