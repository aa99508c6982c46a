"""How many target rows the output head may score at once, from the memory that is free.

A fixed row count is wrong at both ends: 64 rows waste an 80 GB GPU, and on a small machine
a 262K vocabulary makes even modest blocks large. The head block's working set is its float32
logits plus the temporaries of scoring them (the shifted exponentials, the comparison mask of
the rank, top-k scratch), all proportional to rows x vocab, so the row count follows from free
memory divided by that per-row cost. On CUDA the block is also bounded by what a bare forward
of the same tokens would hold (`cuda_head_block_rows`), so scoring never needs more memory than
the log-probabilities alone would.
"""

from __future__ import annotations

# bytes per logit while a block is scored: float32 logits (4), float32 exp(z - max) (4),
# the boolean mask of the rank comparison (1), top-k / group-maxima scratch and the
# matmul's own output before the cast (up to 7) -- a deliberate over-estimate
BYTES_PER_LOGIT = 16
# share of the free memory a head block may take (the rest stays for the allocator's slack,
# other processes on the machine and the next forward's activations)
FREE_FRACTION = 0.25
CPU_MAX_ROWS = 256  # numpy scores 16-row tasks on a few threads: more rows gain nothing
ACCELERATOR_MAX_ROWS = 8192


def head_block_rows(free_bytes: int, vocab: int, hidden: int, hidden_bytes: int, max_rows: int) -> int:
    """Rows per head block: as many as fit in FREE_FRACTION of `free_bytes`, between 1 and `max_rows`.

    Each row costs `vocab * BYTES_PER_LOGIT` for its logits and their scoring, plus its hidden
    state upcast to float32 (`hidden * 4`) next to the original (`hidden * hidden_bytes`).
    """
    if vocab <= 0 or hidden <= 0 or max_rows < 1:
        raise ValueError(f"vocab ({vocab}), hidden ({hidden}) and max_rows ({max_rows}) must be positive")
    per_row = vocab * BYTES_PER_LOGIT + hidden * (4 + hidden_bytes)
    return int(min(max_rows, max(1, int(free_bytes * FREE_FRACTION) // per_row)))


# On CUDA a block costs less per logit: its float32 logits (4) and at most as much again for
# torch.topk's scratch and the GEMM's workspace (4); the rank count and exp-sums are one fused
# reduction with no temporaries of the block's size (logits_torch._row_reduction)
CUDA_BYTES_PER_LOGIT = 8
# a bare forward (what lm-eval runs) holds half-precision logits for every token of the forward,
# 2 bytes each, and then their log-softmax (2 more; not counted here: a margin)
BARE_BYTES_PER_LOGIT = 2


def cuda_head_block_rows(tokens: int, free_bytes: int, vocab: int, hidden: int, hidden_bytes: int, max_rows: int) -> int:
    """Rows per head block on CUDA, so that the head never holds more than a bare forward of the
    same `tokens` would: a block's working set (`vocab * CUDA_BYTES_PER_LOGIT` per row plus its
    hidden state) stays within the bare forward's half-precision logits, `tokens * vocab *
    BARE_BYTES_PER_LOGIT`; also within FREE_FRACTION of `free_bytes`; between 1 and `max_rows`.

    Both sides share the body's peak, and at the head a bare forward holds its logits *and* their
    log-softmax, so ctxeval's peak above the weights is at most the bare forward's (docs/gpu.md).
    """
    if tokens < 1 or vocab <= 0 or hidden <= 0 or max_rows < 1:
        raise ValueError(f"tokens ({tokens}), vocab ({vocab}), hidden ({hidden}) and max_rows ({max_rows}) must be positive")
    per_row = vocab * CUDA_BYTES_PER_LOGIT + hidden * hidden_bytes
    by_bare_forward = tokens * vocab * BARE_BYTES_PER_LOGIT // per_row
    by_free = int(free_bytes * FREE_FRACTION) // per_row
    return int(min(max_rows, max(1, min(by_bare_forward, by_free))))


def free_bytes(device) -> int:
    """Memory a new allocation on `device` (a torch.device) can use now.

    CUDA: the driver's free memory plus what torch's caching allocator holds reserved but
    unused. CPU (and MPS, which shares system memory): the operating system's available RAM.
    """
    if device.type == "cuda":
        import torch

        free, _total = torch.cuda.mem_get_info(device)
        return int(free + torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device))
    import psutil

    return int(psutil.virtual_memory().available)


def max_rows(device) -> int:
    return CPU_MAX_ROWS if device.type == "cpu" else ACCELERATOR_MAX_ROWS
