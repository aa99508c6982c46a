"""How far a new prompt matches what a cache holds: the one comparison both backends' prefix
reuse makes (backends/llamacpp_prefix.py, backends/hf_prefix.py)."""

from __future__ import annotations

import numpy as np


def common_prefix(held: np.ndarray, prompt: np.ndarray) -> int:
    """The length of the longest common prefix of the held tokens and `prompt`, at most
    len(prompt) − 1: the prompt's last token always runs, its logits being the first step's."""
    n = min(len(held), len(prompt) - 1)
    differ = np.flatnonzero(held[:n] != np.asarray(prompt[:n]))
    return int(differ[0]) if len(differ) else n
