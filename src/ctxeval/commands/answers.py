"""pplqa, meta-eval, leval, leval-corr and judge: the quality of answers, by likelihood, by
reference metrics and by an LLM judge, and how each agrees with people."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ctxeval.backends.openai_options import OpenAIOptions
from ctxeval.commands import common
from ctxeval.commands.base import Command
from ctxeval.commands.diff import QuietDisplay, quiet_progress
from ctxeval.errors import UserError
from ctxeval.options import argument, group, one_of, option
from ctxeval.pipeline.executors import ExecutorOptions, ScorerSpec
from ctxeval.render.kinds import RENDERING
from ctxeval.qa.methods import QA_SCOPES, MethodConfig, parse_methods
from ctxeval.results.judge import JudgeResult
from ctxeval.results.correlations import Correlations
from ctxeval.results.leval import LevalResult
from ctxeval.results.meta_eval import MetaEvalResult
from ctxeval.results.pplqa import PplqaResult
from ctxeval.stats.agreement import TAU_VARIANTS

def _qa_scope() -> Any:
    return option("--qa-scope", "PPL(q+a) over all tokens, or over the answer tokens only.", "all", check=one_of(QA_SCOPES))


@dataclass(frozen=True)
class PplqaSpec:
    """PPLqa = |PPL(question + answer) - PPL(answer)| (lower is better); ranks each question's answers."""

    answers: str = argument("mt-bench (shared turn-1 answers of 6 models) or a JSONL file of {question_id, question, model, answer}.", "mt-bench")
    methods: str | tuple[str, ...] = option("--methods", "Comma-separated: pplqa, gptscore, geval (integer 1-5), geval_weighted.", "pplqa", cli_type=str)
    out: Path | None = common.out()
    model: str = common.model()
    limit: int | None = common.limit()
    qa_scope: str = _qa_scope()
    aspect: str | None = option("--aspect", "Score inside this aspect prompt (the paper's 'with prompt' variant), e.g. coherence.", None)
    reference: str | None = option("--reference", "auto (MT-Bench: LLMBar human votes), none, or a CSV question_id,model,score.", "auto")
    seed: int = common.seed()
    tau: str = option("--tau", "Per-question Kendall tau: a (the paper's eq. 4; a constant ranking counts 0) or b (tau-b; constant rankings skipped).", "a", check=one_of(TAU_VARIANTS))
    n_threads: int | None = common.threads()
    progress: bool = common.progress()
    executor: ExecutorOptions = common.executor()


@dataclass(frozen=True)
class MetaEvalSpec:
    """Which answer-quality method agrees with human pairwise labels (PPLqa paper, Table 3)."""

    dataset: str = option("--dataset", "llmbar:NAME (e.g. llmbar:MT-Bench) or pandalm (from the folder CTXEVAL_SHARED_DATA names), or the path of an LLMBar, PandaLM or MT-Bench human-judgment file (.json, .jsonl, .parquet).")
    methods: str | tuple[str, ...] = option("--methods", "Comma-separated: pplqa, gptscore, geval (integer 1-5), geval_weighted, pplqa+prompt, gptscore+prompt.", "pplqa,gptscore,geval,geval_weighted", cli_type=str)
    out: Path | None = common.out()
    model: str = common.model()
    limit: int | None = common.limit()
    qa_scope: str = _qa_scope()
    aspect: str = option("--aspect", "Aspect prompt for G-Eval and the +prompt variants.", "coherence")
    ties: str | None = option("--ties", "Human ties: drop, or keep as label 0 (a third class). Default: keep for MT-Bench human judgments (as the PPLqa paper's Table 3), drop for PandaLM.", None)
    replicates: int = common.replicates()
    seed: int = common.seed()
    n_threads: int | None = common.threads()
    progress: bool = common.progress()
    executor: ExecutorOptions = common.executor()


@dataclass(frozen=True)
class LevalSpec:
    """L-Eval metrics of model answers: exact match (exam tasks), F1 or ROUGE-1/2/L, and ΔL."""

    predictions: Path = option("--predictions", "A prediction file or a folder of <model>/<task>.pred.jsonl (L-Eval layout).")
    out: Path = common.out("Where to write scores.json and scores.md.", Path("runs/leval"))
    variant: str = option("--variant", "leval: L-Eval's F1 and rouge-score ROUGE; longbench: LongBench's (rouge package; jieba for Chinese with --tokenize unicode).", "leval")
    tokenize: str = option("--tokenize", "plain: every row by the variant's English tokenizer, as L-Eval's f1.py/rouge.py (reproduces its numbers); unicode: rows mainly in Chinese or another non-Latin script by characters/Unicode words (leval) or jieba (longbench).", "plain")
    progress: bool = common.progress()


@dataclass(frozen=True)
class LevalCorrSpec:
    """Kendall τ-b between each metric's model ranking and the human ranking (L-Eval Figure 2)."""

    metrics: tuple[str, ...] = argument("[LABEL=]PATH: a scores.json of `ctxeval leval` (or its folder), or a CSV/JSON model × metric table (e.g. judge win rates).", cli_type=list[str], to_value=tuple)
    human: Path = option("--human", "Human scores per model: CSV with a 'model' column, or JSON {model: score}.")
    column: str | None = option("--column", "Score column of the human table when it has several.", None)
    out: Path | None = common.out("Also write corr.json and corr.md here.")


@dataclass(frozen=True)
class JudgeSpec:
    """Pairwise LLM judge (L-Eval's prompt, both answer orders): win rate of a model's answers over a base model's."""

    predictions: Path = argument("The judged model's L-Eval predictions (*.pred.jsonl: query, gt, <model>_pred).")
    base_predictions: Path = argument("The base model's predictions for the same questions.")
    judge_model: str = option("--judge-model", "Judge as openai:MODEL (chat completions).", "openai:gpt-4")
    openai: OpenAIOptions = group(OpenAIOptions, only=("base_url", "api_key_env", "concurrency", "cache"))
    max_tokens: int = option("--max-tokens", "Judge answer length (L-Eval: 2048).", 2048)
    limit: int | None = common.limit()
    questions: str = option("--questions", "Rows judged: auto (L-Eval's set for the judge: turbo for GPT-3.5, else gpt4), gpt4 (96 'LLM' rows), turbo (181 'LLM' and 'human' rows) or file (as L-Eval's llm_eval.py reads the file).", "auto")
    out: Path = common.out("Directory for judge.json, judge.md and the verdict records (a re-run resumes).", Path("runs/judge"))
    executor: ExecutorOptions = group(ExecutorOptions, only=("kind", "workers", "address", "placement_timeout"))


def _methods(methods: str | Sequence[str]) -> tuple[str, ...]:
    return parse_methods(methods) if isinstance(methods, str) else tuple(methods)


def run_pplqa(spec: PplqaSpec) -> PplqaResult:
    """Rank each question's answers by PPLqa (and optionally the baselines).

    `answers`: `mt-bench` (the shared turn-1 answers of six models) or a JSONL file of
    {question_id, question, model, answer}. `aspect` switches PPLqa/GPTScore to the aspect
    prompt. `reference="auto"` compares MT-Bench rankings with LLMBar's human votes (see
    data/mt_bench.py); a path reads a CSV `question_id,model,score` (higher = better); None: no reference.
    `tau`: "a" (the paper's eq. 4, constant rankings count 0) or "b" (constant rankings skipped)."""
    from ctxeval.data.mt_bench import human_net_wins, load_answer_file, load_mt_bench, read_reference
    from ctxeval.qa.passes import PassSettings
    from ctxeval.qa.ranking import rank_answers

    methods = tuple(f"{m}+prompt" if spec.aspect and m in ("pplqa", "gptscore") else m for m in _methods(spec.methods))
    config = MethodConfig(methods, spec.qa_scope, spec.aspect or "coherence")
    evaluator = _evaluator_spec(spec.model, spec.n_threads)
    questions = load_mt_bench() if spec.answers == "mt-bench" else load_answer_file(Path(spec.answers))
    questions = questions[:spec.limit] if spec.limit is not None else questions
    if not questions:
        raise UserError("no questions with answers to rank")
    reference, note = None, None
    if spec.reference == "auto" and spec.answers == "mt-bench":
        reference, note = human_net_wins(questions)
        note["description"] = ("net human wins (wins - losses) per model and question from LLMBar's MT-Bench pairwise votes whose answers "
                               "match a pre-generated answer exactly; a sparse partial ranking, not a human ranking of all six models")
    elif spec.reference not in (None, "auto", "none"):
        reference, note = read_reference(Path(spec.reference)), {"description": f"scores from {spec.reference} (higher = better)"}
    out = Path(spec.out) if spec.out is not None else Path("runs") / "pplqa"
    return rank_answers(PassSettings(evaluator, out, RENDERING, spec.executor, spec.progress), questions, config, reference, note, spec.seed, spec.tau)


def run_meta_eval(spec: MetaEvalSpec) -> MetaEvalResult:
    """Meta-evaluate answer-quality methods against a pairwise dataset's human labels.
    `ties`: drop or keep human ties; None keeps the dataset layout's own policy (data/pairwise.py)."""
    from ctxeval.data.pairwise import load_dataset
    from ctxeval.qa.meta_eval import run_meta_eval as meta_evaluate
    from ctxeval.qa.passes import PassSettings

    config = MethodConfig(_methods(spec.methods), spec.qa_scope, spec.aspect)
    evaluator = _evaluator_spec(spec.model, spec.n_threads)
    data = load_dataset(spec.dataset, spec.ties)
    data = replace(data, items=data.items[:spec.limit]) if spec.limit is not None else data
    out = Path(spec.out) if spec.out is not None else Path("runs") / f"meta-eval-{re.sub(r'[^A-Za-z0-9_.-]+', '_', data.name)}"
    return meta_evaluate(PassSettings(evaluator, out, RENDERING, spec.executor, spec.progress), data, config, spec.replicates, spec.seed)


def _evaluator_spec(text: str, n_threads: int | None) -> ScorerSpec:
    """The evaluator to load, refused up front when it cannot compute the methods as defined."""
    model = common.model_spec(text)
    common.refuse_truncation(model, truncates=False)
    common.refuse_api_models([model], "answer-quality evaluation",
                             "the log-probability of an answer's first token given only BOS (for PPL(a)) and of every score token (for G-Eval)")
    return ScorerSpec(model, n_threads)


def run_leval(spec: LevalSpec) -> LevalResult:
    """L-Eval metrics of prediction files (exact match, F1 or ROUGE, ΔL); writes scores.json/.md."""
    from ctxeval.leval.report import leval_result
    from ctxeval.leval.score import score_predictions

    return leval_result(score_predictions(Path(spec.predictions), spec.variant, spec.progress, spec.tokenize), Path(spec.out))


def run_leval_corr(spec: LevalCorrSpec) -> Correlations:
    """Kendall τ-b between each metric's model ranking and the human ranking; with `out`, writes corr.json/.md."""
    from ctxeval.leval.corr import correlate, correlations_result, read_human

    human = read_human(Path(spec.human), spec.column)
    return correlations_result(human, correlate(human, list(spec.metrics)))


def run_judge(spec: JudgeSpec) -> JudgeResult:
    """Pairwise LLM judge (L-Eval's prompt, both answer orders). Verdicts are records in `out`:
    a re-run of the same command resumes."""
    from ctxeval.judge import JudgedFiles, run_api_judge

    judged = JudgedFiles(Path(spec.predictions), Path(spec.base_predictions), spec.questions, spec.limit)
    return run_api_judge(judged, spec.judge_model, spec.openai, spec.max_tokens, Path(spec.out), spec.executor, render=RENDERING)


def _echo_markdown(result: PplqaResult | MetaEvalResult, spec: Any, display: QuietDisplay | None) -> str:
    return "" if display is not None and display.quiet else result.markdown


def _echo_leval(result: LevalResult, spec: LevalSpec, display: QuietDisplay) -> str:
    import sys

    for note in result.notes:
        print(f"ctxeval: note: {note}", file=sys.stderr)
    return display.echo(result.markdown, f"scores: {', '.join(str(result.out / f) for f in result.files())}")


COMMANDS = (
    Command("pplqa", PplqaSpec, run_pplqa, _echo_markdown, QuietDisplay, quiet_progress, inputs=("answers",)),
    Command("meta-eval", MetaEvalSpec, run_meta_eval, _echo_markdown, QuietDisplay, quiet_progress),
    Command("leval", LevalSpec, run_leval, _echo_leval, QuietDisplay, quiet_progress, inputs=("predictions",),
            posthoc=lambda spec: (spec.out, (spec.predictions,))),
    Command("leval-corr", LevalCorrSpec, run_leval_corr, lambda result, spec, display: result.markdown, inputs=("metrics", "human"),
            posthoc=lambda spec: (spec.out, (*spec.metrics, spec.human))),
    Command("judge", JudgeSpec, run_judge, lambda result, spec, display: result.markdown + f"report: {', '.join(str(f) for f in result.paths())}",
            inputs=("predictions", "base_predictions")),
)
