"""The `judge` result of `ctxeval judge`: judge.json (every verdict and the win rates) and judge.md.

The verdict records (verdicts.parquet) and the manifest are the engine's, not part of it. Its
Markdown is kept as the text render/judge.py renders, so this module imports no task.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from ctxeval.results.base import Result

# L-Eval's judge question sets: the `evaluation` values of the rows each takes (None: every row)
QUESTION_SETS: dict[str, tuple[str, ...] | None] = {"gpt4": ("LLM",), "turbo": ("LLM", "human"), "file": None}
JUDGE_JSON = "judge.json"
JUDGE_MD = "judge.md"


@dataclass
class JudgeResult(Result):
    """A judged pair of prediction files: the report (judge.json's content), where it was
    written, and judge.md."""

    KIND: ClassVar[str] = "judge"
    VERSION: ClassVar[int] = 1
    FILES: ClassVar[tuple[str, ...]] = (JUDGE_JSON, JUDGE_MD)

    report: dict
    out: Path
    markdown: str = ""  # what judge.md holds (render/judge.py renders it when the result is written)

    def paths(self) -> tuple[Path, ...]:
        """judge.json and judge.md in the folder (what the CLI lists)."""
        return tuple(self.out / name for name in self.FILES)

    def to_json(self) -> dict[str, Any]:
        return self.report

    @classmethod
    def from_json(cls, data: dict[str, Any], out: Path, markdown: str) -> JudgeResult:
        return cls(data, Path(out), markdown)

    def write_files(self, out: Path) -> None:
        (out / JUDGE_JSON).write_text(json.dumps(self.to_json(), indent=2, ensure_ascii=False))
        (out / JUDGE_MD).write_text(self.markdown)

    @classmethod
    def read_files(cls, out: Path, version: int) -> JudgeResult:
        return cls.from_json(json.loads((out / JUDGE_JSON).read_text()), out, (out / JUDGE_MD).read_text())



def describe_questions(questions: str) -> str:
    """A question set as the report names it, with the rows it takes."""
    kinds = QUESTION_SETS[questions]
    rows = "rows as L-Eval's llm_eval.py reads the file" if kinds is None else f"evaluation {' or '.join(kinds)}"
    return f"{questions} ({rows})"
