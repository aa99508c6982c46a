"""The `leval` result of `ctxeval leval`: scores.json (the numbers) and scores.md (tables and notes)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ctxeval.results.base import Result
from ctxeval.results.io import Json, Text, derived, folder

SCORES_JSON = "scores.json"
SCORES_MD = "scores.md"
_TITLE = re.compile(r"^# L-Eval scores \(variant: (?P<variant>[^,]+), tokenize: (?P<tokenize>[^)]+)\)$", re.M)
_NOTES = "\n## Notes\n\n"


def _title(found: dict) -> re.Match:
    """scores.md's title line, which states the variant and the tokenizer."""
    title = _TITLE.search(found["markdown"])
    if title is None:
        raise ValueError(f"{found['out'] / SCORES_MD} has no L-Eval title line")
    return title


def _notes(found: dict) -> tuple[str, ...]:
    """scores.md's notes, one bullet each."""
    return tuple(line[2:] for line in found["markdown"].partition(_NOTES)[2].splitlines() if line.startswith("- "))


@dataclass
class LevalResult(Result):
    """L-Eval metrics per model × task (×100, with n and ΔL), how they were computed, and the
    rows that needed care, in words (scores.json holds the numbers; the settings and notes are
    read from scores.md, which states them)."""

    KIND = "leval"
    FILES = (Json(SCORES_JSON, "scores", sort_keys=True, newline=True), Text(SCORES_MD, "markdown"))

    scores: dict[str, dict[str, dict[str, float | int]]]  # model -> task -> {n, metric: value, delta_len}
    variant: str = derived(lambda found: _title(found)["variant"])
    tokenize: str = derived(lambda found: _title(found)["tokenize"])
    notes: tuple[str, ...] = derived(_notes)
    out: Path = folder()
    markdown: str = ""  # what scores.md holds
