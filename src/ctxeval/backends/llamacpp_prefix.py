"""Prefix reuse on llama.cpp: a prompt that begins as the previous one did starts from its cache.

The context's sequence 0 keeps the previous prompt's KV cells. The next prompt keeps the cells of
their longest common prefix, rounded down to a multiple of `n_batch`, and decodes the rest in the
batches a fresh decode would use (a fresh decode's batches also start at multiples of `n_batch`),
so no batch changes shape (llama.cpp rounds by batch shape: docs/numerics.md). RULER's needle
tasks repeat one haystack, so their samples share everything before the first needle.

A sliding-window cache (Gemma 3's local layers with `swa_full` off) keeps only the last window
of positions, in a ring of `ring` cells where position p sits in cell p mod `ring`. A prefix that
ends earlier is resumed from a checkpoint: after the prompt batch that ends there, the
sliding-window layers' cells (the last window, llama.cpp's `LLAMA_STATE_SEQ_FLAGS_SWA_ONLY`
state: 7.9 MB on Gemma 3 270M) are saved, and put back when a later prompt resumes there, as
llama.cpp's server does for such models. llama.cpp 0.3.36 puts restored cells in cells 0, 1, ...
and its results depend on the ring's layout (a restore elsewhere moved Gemma's next logits by
0.7-1.5; llama.cpp issue 25295), so checkpoints are taken only where the window starts at a
multiple of `ring` (with n_batch 512: at 512, 1,536, 2,560, ... tokens); there the restored
cells are where a fresh decode has them, and the scores are bit-identical (tested).
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from ctxeval.backends.prefixes import common_prefix


class PrefixCache:
    """What sequence 0 of a context holds from the last prompt, and where a new prompt can resume."""

    def __init__(self, lib: Any, ctx: Any, n_batch: int, window: int, ring: int, enabled: bool) -> None:
        """`window`: the sliding window (0: none); `ring`: the cells of the sliding-window cache
        (`window` + n_batch rounded up to 256 with `swa_full` off; the whole context when it holds it)."""
        self._lib = lib
        self._ctx = ctx  # the raw llama_context pointer
        self._memory = lib.llama_get_memory(ctx)
        self._n_batch = n_batch
        self._sliding = 0 < window and ring < lib.llama_n_ctx(ctx)  # early positions are dropped: resuming needs a checkpoint
        self._window = window
        self._ring = ring
        self._enabled = enabled
        self._tokens = np.zeros(0, dtype=np.int64)  # the prompt whose cells sequence 0 holds from position 0
        self._checkpoints: dict[int, Any] = {}  # position -> sliding-window state after the batch ending there
        self.reused = 0  # prompt tokens not decoded again, summed over prompts (what reuse saved)

    def resume(self, tokens: np.ndarray) -> int:
        """Prepare sequence 0 for `tokens` and return the first position to decode: the cells of the
        longest reusable prefix are kept (its sliding-window cells put back), the rest removed."""
        start = self._resume_point(tokens) if self._enabled else 0
        if start == 0:
            self.forget()
        else:
            self._lib.llama_memory_seq_rm(self._memory, 0, start, -1)
            if self._sliding:
                state = self._checkpoints[start]
                if self._lib.llama_state_seq_set_data_ext(self._ctx, state, len(state), 0, self._lib.LLAMA_STATE_SEQ_FLAGS_SWA_ONLY) == 0:
                    raise RuntimeError("llama.cpp could not restore a sliding-window checkpoint")
            self._checkpoints = {p: s for p, s in self._checkpoints.items() if p <= start}
        self._tokens = np.asarray(tokens, dtype=np.int64).copy()
        self.reused += start
        return start

    def _resume_point(self, tokens: np.ndarray) -> int:
        """The longest common prefix with the cached prompt, rounded down to a batch boundary with a
        checkpoint (on a sliding-window model), leaving at least the last token to decode."""
        common = common_prefix(self._tokens, tokens)
        start = common - common % self._n_batch
        if self._sliding:
            start = max((p for p in self._checkpoints if p <= start), default=0)
        return start

    def decoded(self, end: int) -> None:
        """Called after a prompt batch that ends at position `end`: a checkpoint where the batch
        was full and the window's cells start a turn of the ring."""
        if self._enabled and self._sliding and end % self._n_batch == 0 and max(end - self._window, 0) % self._ring == 0:
            flags = self._lib.LLAMA_STATE_SEQ_FLAGS_SWA_ONLY
            size = self._lib.llama_state_seq_get_size_ext(self._ctx, 0, flags)
            state = (ctypes.c_uint8 * size)()
            self._lib.llama_state_seq_get_data_ext(self._ctx, state, size, 0, flags)
            self._checkpoints[end] = state

    def forget(self) -> None:
        """Clear sequence 0 and what is known of it (the context was cleared or used for other input)."""
        self._lib.llama_memory_clear(self._memory, True)
        self._tokens = np.zeros(0, dtype=np.int64)
        self._checkpoints = {}
