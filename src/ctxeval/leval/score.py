"""Score L-Eval prediction files: per model and task, the L-Eval metric ×100 and ΔL.

Which rows and metric, as L-Eval's ``auto_eval.py`` decides from each row's ``evaluation``:
``exam`` → exact match, ``f1`` → token F1, ``rouge`` → ROUGE-1/2/L; rows of other kinds in the
same file are skipped. Files holding only ``LLM``/``human`` rows (L-Eval's 96- and 85-question
subsets, which ``auto_eval.py`` does not score) get both F1 and ROUGE, as L-Eval's Figure 2
computed them for its correlation with human judgement.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from rich.progress import Progress

from ctxeval.errors import UserError
from ctxeval.leval.files import PredictionFile, Row, discover, read_predictions
from ctxeval.leval.length import length_difference
from ctxeval.metrics import exam, ngram

METRIC_KINDS = ("exam", "f1", "rouge")
SUBSET_KINDS = ("LLM", "human")


@dataclass
class TaskScore:
    """One model × task: rows scored, metric values ×100, ΔL, and rows that needed care."""

    n: int
    metrics: dict[str, float]
    delta_len: float | None  # None for exam tasks (no n-gram metric beside it)
    skipped: int = 0
    non_latin: int = 0  # rows mainly in a non-Latin script (see metrics.ngram.row_script)

    def as_json(self) -> dict[str, float | int]:
        out: dict[str, float | int] = {"n": self.n, **self.metrics}
        if self.delta_len is not None:
            out["delta_len"] = self.delta_len
        return out


@dataclass
class LevalScores:
    scores: dict[str, dict[str, TaskScore]] = field(default_factory=dict)
    variant: str = "leval"
    tokenize: str = "plain"

    def as_json(self) -> dict[str, dict[str, dict[str, float | int]]]:
        return {m: {t: s.as_json() for t, s in tasks.items()} for m, tasks in self.scores.items()}

    def notes(self) -> list[str]:
        """Human-readable warnings: skipped rows and rows mainly in a non-Latin script."""
        lines = []
        for model, tasks in self.scores.items():
            for task, s in tasks.items():
                if s.skipped:
                    lines.append(f"{model}/{task}: {s.skipped} rows skipped (evaluation kind not scored with the others)")
                if s.non_latin:
                    lines.append(f"{model}/{task}: {s.non_latin} of {s.n} rows are mainly in a non-Latin script and {self._non_latin_how()}")
        return lines

    def _non_latin_how(self) -> str:
        if self.tokenize == "plain":
            return "scored by the English tokenizer as the reference code does (about 0; --tokenize unicode re-tokenises them)"
        how = "CJK characters / Unicode words" if self.variant == "leval" else "jieba words"
        return f"were tokenised as {how} (the English tokenizer would score them about 0)"


def _rows_to_score(pf: PredictionFile) -> tuple[str, list[Row]]:
    kinds = {row.evaluation for row in pf.rows}
    scored = kinds & set(METRIC_KINDS)
    if len(scored) > 1:
        raise UserError(f"{pf.path}: mixes evaluation kinds {sorted(scored)}; L-Eval scores one kind per file")
    if scored:
        kind = scored.pop()
        return kind, [r for r in pf.rows if r.evaluation == kind]
    if kinds <= set(SUBSET_KINDS):
        return "f1+rouge", list(pf.rows)
    raise UserError(f"{pf.path}: unknown evaluation kind(s) {sorted(kinds - set(SUBSET_KINDS))}; expected exam, f1, rouge, LLM or human")


def _non_latin(row: Row, variant: str) -> bool:
    """Whether `unicode` tokenisation treats the row other than by the variant's English rules."""
    kind = ngram.row_script(row.output, *row.references)
    return kind != "latin" if variant == "leval" else kind == "cjk"


def _check_options(variant: str, tokenize: str) -> None:
    if variant not in ngram.VARIANTS:
        raise UserError(f"unknown variant {variant!r}; choose one of {', '.join(ngram.VARIANTS)}")
    if tokenize not in ngram.TOKENIZE:
        raise UserError(f"unknown tokenize {tokenize!r}; choose one of {', '.join(ngram.TOKENIZE)}")


def score_file(pf: PredictionFile, variant: str = "leval", tokenize: str = "plain") -> TaskScore:
    """The L-Eval score of one prediction file (one model × task)."""
    _check_options(variant, tokenize)
    kind, rows = _rows_to_score(pf)
    skipped = len(pf.rows) - len(rows)
    if kind == "exam":
        value = exam.exam_score(
            pf.task, [r.output for r in rows], [r.references[0] for r in rows], [r.index for r in rows]
        )
        return TaskScore(len(rows), {"exact_match": value}, None, skipped)
    totals: dict[str, float] = {}
    for row in rows:
        per_row: dict[str, float] = {}
        if kind in ("f1", "f1+rouge"):
            per_row["f1"] = max(ngram.f1(row.output, ref, variant, tokenize) for ref in row.references)
        if kind in ("rouge", "f1+rouge"):
            per_row.update(ngram.max_over_references([ngram.rouge(row.output, ref, variant, tokenize) for ref in row.references]))
        for key, value in per_row.items():
            totals[key] = totals.get(key, 0.0) + value
    metrics = {key: 100.0 * value / len(rows) for key, value in totals.items()}
    delta = sum(length_difference(r.output, r.references, tokenize) for r in rows) / len(rows)
    return TaskScore(len(rows), metrics, delta, skipped, sum(_non_latin(r, variant) for r in rows))


def score_predictions(path: Path, variant: str = "leval", progress: bool = True, tokenize: str = "plain") -> LevalScores:
    """Score every prediction file at `path` (a file or a folder of ``<model>/<task>.pred.jsonl``)."""
    _check_options(variant, tokenize)
    files = discover(path)
    result = LevalScores(variant=variant, tokenize=tokenize)
    seen: dict[tuple[str, str], Path] = {}
    with Progress(disable=not progress, transient=True) as bar:
        job = bar.add_task("scoring", total=len(files))
        for file in files:
            pf = read_predictions(file)
            key = (pf.model, pf.task)
            if key in seen:
                raise UserError(f"{file} and {seen[key]} both hold model {pf.model!r}, task {pf.task!r}")
            seen[key] = file
            bar.update(job, description=f"{pf.model}/{pf.task}")
            result.scores.setdefault(pf.model, {})[pf.task] = score_file(pf, variant, tokenize)
            bar.advance(job)
    return result
