"""The `judge` result of `ctxeval judge`: judge.json (every verdict and the win rates) and judge.md.

The verdict records (verdicts.parquet) and the manifest are the engine's, not part of it. Its
Markdown is kept as the text render/judge.py renders, so this module imports no task.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ctxeval.results.base import Result
from ctxeval.results.io import Json, Text, folder

# L-Eval's judge question sets: the `evaluation` values of the rows each takes (None: every row)
QUESTION_SETS: dict[str, tuple[str, ...] | None] = {"gpt4": ("LLM",), "turbo": ("LLM", "human"), "file": None}
JUDGE_JSON = "judge.json"
JUDGE_MD = "judge.md"


@dataclass
class JudgeResult(Result):
    """A judged pair of prediction files: the report (judge.json's content), where it was
    written, and judge.md."""

    KIND = "judge"
    FILES = (Json(JUDGE_JSON, "report", ensure_ascii=False), Text(JUDGE_MD, "markdown"))

    report: dict
    out: Path = folder()
    markdown: str = ""  # what judge.md holds (render/judge.py renders it when the result is written)

    def paths(self) -> tuple[Path, ...]:
        """judge.json and judge.md in the folder (what the CLI lists)."""
        return tuple(self.out / name for name in self.files())


def describe_questions(questions: str) -> str:
    """A question set as the report names it, with the rows it takes."""
    kinds = QUESTION_SETS[questions]
    rows = "rows as L-Eval's llm_eval.py reads the file" if kinds is None else f"evaluation {' or '.join(kinds)}"
    return f"{questions} ({rows})"
