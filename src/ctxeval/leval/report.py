"""The result of `ctxeval leval` from its scores."""

from __future__ import annotations

from pathlib import Path

from ctxeval.leval.score import LevalScores
from ctxeval.results.leval import LevalResult


def leval_result(scores: LevalScores, out: Path) -> LevalResult:
    """What `ctxeval leval` writes into `out`: the numbers, the settings, the notes and the tables."""
    data, notes = scores.as_json(), tuple(scores.notes())
    return LevalResult(data, scores.variant, scores.tokenize, notes, Path(out))
