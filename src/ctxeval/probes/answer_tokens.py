"""Where an answer sits among the tokens of a teacher-forced continuation, and how decided the
greedy choice was along it: what the retrieval and RULER probes both read from a scored answer."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ctxeval.backends.base import Scorer
from ctxeval.backends.logits import BlockScores


def answer_cover(scorer: Scorer, ids: Sequence[int], text: str, answers: Sequence[str]) -> list[np.ndarray]:
    """Per answer, which of the continuation's tokens (`ids`, whose text is `text`) overlap its
    bytes; answers are found in order, each after the previous one."""
    data = text.encode("utf-8")
    lengths = np.array([len(scorer.token_bytes(int(t))) for t in ids])
    ends = np.cumsum(lengths)
    starts = ends - lengths
    out, search = [], 0
    for answer in answers:
        start = data.index(answer.encode("utf-8"), search)
        search = start + len(answer.encode("utf-8"))
        out.append((starts < search) & (ends > start))
    return out


def min_margin(scores: BlockScores) -> float:
    """How close the nearest runner-up came to the top token over the scored rows (nats)."""
    return float(np.min(scores.topk_logprobs[:, 0].astype(np.float64) - scores.topk_logprobs[:, 1]))
