"""The one list of what ctxeval offers: its commands, in the order the CLI lists them, each on
one line (`Entry`: the module that declares it, its line in `ctxeval --help`, and the result kind
it introduces with the class that holds it and the module that renders it). Everything else is
built from this mapping: the command registry, the CLI, the API functions, `ctxeval.__all__`,
`read_result`'s dispatch, each kind's texts, view and figure (render/kinds.py) and the
probe-report's sections. It imports nothing of ctxeval, so the lazy top-level package and a
result reader can use it without loading any task code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Kind:
    """A result kind (the `kind` in a folder's result.json): the module and class that hold it,
    and its renderer module (its texts, view and figure: render/kinds.py; None: nothing to render)."""

    name: str
    module: str
    cls: str
    render: str | None = None


@dataclass(frozen=True)
class Entry:
    """One command: the module whose COMMANDS declares it, its line in `ctxeval --help` (a whole
    sentence; its own --help gives its spec's docstring, so the list is printed without importing
    any command's code), and the result kind it introduces (None: it writes no new kind)."""

    module: str
    summary: str
    kind: Kind | None = None


COMMANDS: dict[str, Entry] = {
    "sweep": Entry("ctxeval.commands.scoring", "Rank-based perplexity over context lengths (the thesis protocol).", Kind("scoring", "ctxeval.results.scoring", "RunResult", "ctxeval.render.scoring")),
    "score": Entry("ctxeval.commands.scoring", "Perplexity and rank scores of whole texts with chunked, sliding or fixed windows."),
    "diff": Entry("ctxeval.commands.diff", "How much CAND's next-token distributions differ from REF's on the same windows.", Kind("diff", "ctxeval.results.diff", "DiffResult", "ctxeval.render.diff_page")),
    "summary": Entry("ctxeval.commands.scoring", "Print a finished run's tables, of any kind and of every version it reads."),
    "compare": Entry("ctxeval.commands.compare", "Paired comparison of runs: perplexity ratio, or per-sample verdicts, flips and tie groups.", Kind("comparison", "ctxeval.results.comparison", "Comparison", "ctxeval.render.compare")),
    "trends": Entry("ctxeval.commands.compare", "Slope of every metric against context length, and the spread across repeated starts.", Kind("trends", "ctxeval.results.trends", "Trends", "ctxeval.render.trends")),
    "context-gain": Entry("ctxeval.commands.probes", "Does the model use distant context? Perplexity with a full and a short context, the gain, and LongPPL.", Kind("context-gain", "ctxeval.results.context_gain", "ContextGainResult", "ctxeval.render.context_gain")),
    "effective-length": Entry("ctxeval.commands.probes", "How much of its context does a model use? The effective context length L* with its interval.", Kind("effective-length", "ctxeval.results.effective_length", "EffectiveLengthResult", "ctxeval.render.effective_length")),
    "retrieval": Entry("ctxeval.commands.probes", "Line retrieval: greedy exact-match accuracy and the answer's rank per size and depth.", Kind("retrieval", "ctxeval.results.retrieval", "RetrievalResult", "ctxeval.render.retrieval")),
    "ruler": Entry("ctxeval.commands.validity", "RULER's synthetic tasks, scored by greedy generation and by likelihood.", Kind("ruler", "ctxeval.results.ruler", "RulerResult", "ctxeval.render.ruler")),
    "agreement": Entry("ctxeval.commands.validity", "Which cheap likelihood measure orders models as task accuracy does (runs of several models).", Kind("agreement", "ctxeval.results.agreement", "AgreementResult", "ctxeval.render.agreement_page")),
    "probe-report": Entry("ctxeval.commands.probes", "Probe runs of several models side by side: perplexity, context gain, L* and retrieval.", Kind("probe-report", "ctxeval.results.probe_report", "ProbeReport", "ctxeval.render.probe_report")),
    "report": Entry("ctxeval.commands.tools", "One offline HTML report of finished runs with a per-token explorer."),
    "models": Entry("ctxeval.commands.tools", "List the models and backends usable here."),
    "leval": Entry("ctxeval.commands.answers", "L-Eval metrics of model answers: exact match, F1 or ROUGE-1/2/L, and ΔL.", Kind("leval", "ctxeval.results.leval", "LevalResult", "ctxeval.render.leval")),
    "leval-corr": Entry("ctxeval.commands.answers", "Kendall τ-b between each metric's model ranking and the human ranking (L-Eval Figure 2).", Kind("correlations", "ctxeval.results.correlations", "Correlations", "ctxeval.render.correlations")),
    "judge": Entry("ctxeval.commands.answers", "Pairwise LLM judge (L-Eval's prompt, both answer orders): win rate over a base model.", Kind("judge", "ctxeval.results.judge", "JudgeResult", "ctxeval.render.judge")),
    "meta-eval": Entry("ctxeval.commands.answers", "Which answer-quality method agrees with human pairwise labels (PPLqa paper, Table 3).", Kind("meta-eval", "ctxeval.results.meta_eval", "MetaEvalResult", "ctxeval.render.meta_eval")),
    "pplqa": Entry("ctxeval.commands.answers", "PPLqa = |PPL(question + answer) - PPL(answer)| (lower is better); ranks each question's answers.", Kind("pplqa", "ctxeval.results.pplqa", "PplqaResult", "ctxeval.render.pplqa")),
    "serve": Entry("ctxeval.commands.tools", "Serve a model behind an OpenAI-compatible API scored by ctxeval's exact scorers."),
}


def kinds() -> dict[str, Kind]:
    """Every result kind, by name, in the order the commands introduce them."""
    return {e.kind.name: e.kind for e in COMMANDS.values() if e.kind is not None}


def __getattr__(name: str) -> Any:
    """What the command lines give, derived on each use (so a command added to `COMMANDS` is
    everywhere at once): `SUMMARIES` (command -> its `--help` line), `RESULTS` (kind ->
    (module, class)), `RENDERERS` (kind -> its renderer module, where it has one)."""
    if name == "SUMMARIES":
        return {command: e.summary for command, e in COMMANDS.items()}
    if name == "RESULTS":
        return {k.name: (k.module, k.cls) for k in kinds().values()}
    if name == "RENDERERS":
        return {k.name: k.render for k in kinds().values() if k.render is not None}
    raise AttributeError(f"module 'ctxeval.catalog' has no attribute {name!r}")

# public names that are neither a command's function nor a result class: name -> module
EXTRAS: dict[str, str] = {
    "run_metrics": "ctxeval.api",
    "Result": "ctxeval.results.base",
    "read_result": "ctxeval.results.base",
    "MetricConfig": "ctxeval.metrics.config",
    "Bootstrap": "ctxeval.modeldiff.summary",
    "NoiseFloor": "ctxeval.modeldiff.noise_floor",
    "floor_line": "ctxeval.render.diff",
    "CorpusOptions": "ctxeval.data.corpus",
    "ExecutorOptions": "ctxeval.pipeline.executors",
    "OpenAIOptions": "ctxeval.backends.openai_options",
    "DEFAULT_CACHE": "ctxeval.backends.openai_options",
    "dry_run_table": "ctxeval.backends.openai_options",
}


def function_name(command: str) -> str:
    """The Python name of a command (`context-gain` is `context_gain`)."""
    return command.replace("-", "_")


def public_names() -> list[str]:
    """`ctxeval.__all__`: one function per command, the result classes, the extras."""
    return [*(function_name(c) for c in COMMANDS), *(k.cls for k in kinds().values()), *EXTRAS]
