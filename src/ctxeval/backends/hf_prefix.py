"""Prefix reuse on transformers: a prompt that begins as the previous one did starts from its cache.

The scorer holds the KV cache of its last stepwise sequence (a prompt and the tokens scored or
generated after it) and those tokens. The next prompt keeps the cache's positions of their
longest common prefix, cut back with `DynamicCache.crop` (leaving at least the prompt's last
token to run: the first step returns its logits), and runs only the rest. RULER's needle tasks
repeat one haystack, so their samples share everything before the first needle, and `ruler`'s
likelihood pass and generation of one sample share the whole prompt.

Only a cache whose every layer keeps every position can be cut back: not Gemma 3's
sliding-window layers, not a press's compressed cache (the scorer then holds nothing). The
rest of a prompt runs as a shorter forward, which torch may round differently: on SmolLM2 135M
in float32 on the CPU, 1 of 12 RULER samples' answer log p moved by 1.8e-6 nats, the generated
text equal (docs/long_context.md); tests/test_hf_prefix.py compares within 1e-5.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ctxeval.backends.prefixes import common_prefix


class HeldPrefix:
    """The last stepwise sequence's cache and tokens, and where a new prompt can resume."""

    def __init__(self) -> None:
        self._cache: Any = None
        self._tokens = np.zeros(0, dtype=np.int64)  # the tokens whose positions the cache holds, from 0
        self.reused = 0  # prompt tokens not run again, summed over prompts (what reuse saved)

    def resume(self, prompt: np.ndarray, fresh: Any) -> tuple[Any, int]:
        """The cache to run `prompt` on and the first position to run: the held cache cut back
        to the longest common prefix, or `fresh` (an empty cache) when nothing is shared."""
        common = common_prefix(self._tokens, prompt)
        if self._cache is None or common == 0:
            self._cache, self._tokens = fresh, np.zeros(0, dtype=np.int64)
            return fresh, 0
        self._cache.crop(common)
        self._tokens = self._tokens[:common]
        self.reused += common
        return self._cache, common

    def fed(self, tokens: np.ndarray) -> None:
        """`tokens` ran on the held cache after what it holds."""
        self._tokens = np.concatenate([self._tokens, tokens])

    def forget(self) -> None:
        """Hold nothing (a forward failed part-way, or the scorer is closed)."""
        self._cache, self._tokens = None, np.zeros(0, dtype=np.int64)
