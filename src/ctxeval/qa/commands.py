"""Python entry points of the answer-quality commands (`ctxeval meta-eval`, `ctxeval pplqa`)."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from ctxeval.backends.registry import refuse_api_models
from ctxeval.config import DEFAULT_MODEL
from ctxeval.data.pairwise import load_dataset
from ctxeval.errors import UserError
from ctxeval.pipeline.executors import ExecutorOptions, ScorerSpec
from ctxeval.qa.meta_eval import run_meta_eval
from ctxeval.qa.methods import MethodConfig
from ctxeval.results.meta_eval import MetaEvalResult
from ctxeval.results.pplqa import PplqaResult
from ctxeval.stats.agreement import TAU_VARIANTS
from ctxeval.stats.defaults import DEFAULT_REPLICATES, DEFAULT_SEED


def meta_eval(
    dataset: str,
    methods: tuple[str, ...] = ("pplqa", "gptscore", "geval", "geval_weighted"),
    out: str | Path | None = None,
    model: str = DEFAULT_MODEL,
    limit: int | None = None,
    qa_scope: str = "all",
    aspect: str = "coherence",
    ties: str | None = None,
    replicates: int = DEFAULT_REPLICATES,
    seed: int = DEFAULT_SEED,
    progress: bool = False,
    n_threads: int | None = None,
    executor: ExecutorOptions | None = None,
) -> MetaEvalResult:
    """Meta-evaluate answer-quality methods against the human labels of a pairwise dataset."""
    config = MethodConfig(tuple(methods), qa_scope, aspect)
    data = load_dataset(dataset, ties)
    if limit is not None:
        if limit < 1:
            raise UserError("--limit must be a positive number of items")
        data = replace(data, items=data.items[:limit])
    out_dir = Path(out) if out is not None else Path("runs") / f"meta-eval-{re.sub(r'[^A-Za-z0-9_.-]+', '_', data.name)}"
    return run_meta_eval(_evaluator_spec(model, n_threads), data, config, out_dir, replicates, seed, progress, executor)


def pplqa(
    answers: str = "mt-bench",
    methods: tuple[str, ...] = ("pplqa",),
    out: str | Path | None = None,
    model: str = DEFAULT_MODEL,
    limit: int | None = None,
    qa_scope: str = "all",
    aspect: str | None = None,
    reference: str | None = "auto",
    seed: int = DEFAULT_SEED,
    progress: bool = False,
    n_threads: int | None = None,
    tau: str = "a",
    executor: ExecutorOptions | None = None,
) -> PplqaResult:
    """Rank each question's answers by PPLqa (and optionally the baselines).

    `answers`: `mt-bench` (the shared turn-1 answers of six models) or a JSONL file of
    {question_id, question, model, answer}. `aspect` switches PPLqa/GPTScore to the aspect
    prompt. `reference="auto"` compares MT-Bench rankings with LLMBar's human votes (see
    data/mt_bench.py); a path reads a CSV `question_id,model,score` (higher = better); None: no reference.
    `tau`: "a" (the paper's eq. 4, constant rankings count 0) or "b" (constant rankings skipped).
    """
    from ctxeval.data.mt_bench import human_net_wins, load_answer_file, load_mt_bench
    from ctxeval.qa.ranking import rank_answers

    if tau not in TAU_VARIANTS:
        raise UserError(f"--tau must be one of {', '.join(TAU_VARIANTS)}, got {tau!r}")
    method_list = tuple(f"{m}+prompt" if aspect and m in ("pplqa", "gptscore") else m for m in methods)
    config = MethodConfig(method_list, qa_scope, aspect or "coherence")
    questions = load_mt_bench() if answers == "mt-bench" else load_answer_file(Path(answers))
    if limit is not None:
        if limit < 1:
            raise UserError("--limit must be a positive number of questions")
        questions = questions[:limit]
    if not questions:
        raise UserError("no questions with answers to rank")
    ref, note = None, None
    if reference == "auto" and answers == "mt-bench":
        ref, note = human_net_wins(questions)
        note["description"] = ("net human wins (wins - losses) per model and question from LLMBar's MT-Bench pairwise votes whose answers "
                               "match a pre-generated answer exactly; a sparse partial ranking, not a human ranking of all six models")
    elif reference not in (None, "auto", "none"):
        ref, note = _read_reference(Path(reference)), {"description": f"scores from {reference} (higher = better)"}
    out_dir = Path(out) if out is not None else Path("runs") / "pplqa"
    return rank_answers(_evaluator_spec(model, n_threads), questions, config, out_dir, ref, note, seed, progress, tau, executor)


def _evaluator_spec(model: str, n_threads: int | None) -> ScorerSpec:
    """The evaluator to load, refused up front when it cannot compute the methods as defined."""
    refuse_api_models([model], "answer-quality evaluation",
                      "the log-probability of an answer's first token given only BOS (for PPL(a)) and of every score token (for G-Eval)")
    return ScorerSpec(model, n_threads)


def _read_reference(path: Path) -> dict[str, dict[str, float]]:
    import csv

    try:
        with path.open(newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
        table: dict[str, dict[str, float]] = {}
        for row in rows:
            table.setdefault(str(row["question_id"]), {})[row["model"]] = float(row["score"])
    except FileNotFoundError:
        raise UserError(f"reference file not found: {path}") from None
    except (KeyError, ValueError, TypeError):
        raise UserError(f"{path}: expected a CSV with columns question_id, model, score (a number)") from None
    return table
