"""The `leval` result of `ctxeval leval`: scores.json (the numbers) and scores.md (tables and notes)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from ctxeval.results.base import Result

SCORES_JSON = "scores.json"
SCORES_MD = "scores.md"
_TITLE = re.compile(r"^# L-Eval scores \(variant: (?P<variant>[^,]+), tokenize: (?P<tokenize>[^)]+)\)$", re.M)
_NOTES = "\n## Notes\n\n"


@dataclass
class LevalResult(Result):
    """L-Eval metrics per model × task (×100, with n and ΔL), how they were computed, and the
    rows that needed care, in words."""

    KIND: ClassVar[str] = "leval"
    VERSION: ClassVar[int] = 1
    FILES: ClassVar[tuple[str, ...]] = (SCORES_JSON, SCORES_MD)

    scores: dict[str, dict[str, dict[str, float | int]]]  # model -> task -> {n, metric: value, delta_len}
    variant: str
    tokenize: str
    notes: tuple[str, ...]
    out: Path
    markdown: str = ""  # what scores.md holds

    def to_json(self) -> dict[str, Any]:
        return self.scores

    def write_files(self, out: Path) -> None:
        (out / SCORES_JSON).write_text(json.dumps(self.to_json(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
        (out / SCORES_MD).write_text(self.markdown, encoding="utf-8")

    @classmethod
    def read_files(cls, out: Path, version: int) -> LevalResult:
        """scores.json holds the numbers; the settings and notes are read from scores.md, which states them."""
        text = (out / SCORES_MD).read_text(encoding="utf-8")
        title = _TITLE.search(text)
        if title is None:
            raise ValueError(f"{out / SCORES_MD} has no L-Eval title line")
        notes = tuple(line[2:] for line in text.partition(_NOTES)[2].splitlines() if line.startswith("- "))
        return cls(json.loads((out / SCORES_JSON).read_text(encoding="utf-8")), title["variant"], title["tokenize"], notes, out, text)
