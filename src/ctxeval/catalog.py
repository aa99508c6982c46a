"""The one list of what ctxeval offers: its commands (in the order the CLI lists them, each with
the module that declares it) and its result kinds (each with the module and class that write and
read it). Everything else is built from these two mappings: the command registry, the CLI, the
API functions, `ctxeval.__all__`, and `read_result`'s dispatch. It imports nothing, so the lazy
top-level package and a result reader can use it without loading any task code.
"""

from __future__ import annotations

# command name -> the module whose COMMANDS declares it
COMMANDS: dict[str, str] = {
    "sweep": "ctxeval.commands.scoring",
    "score": "ctxeval.commands.scoring",
    "diff": "ctxeval.commands.diff",
    "summary": "ctxeval.commands.scoring",
    "compare": "ctxeval.commands.compare",
    "trends": "ctxeval.commands.compare",
    "context-gain": "ctxeval.commands.probes",
    "effective-length": "ctxeval.commands.probes",
    "retrieval": "ctxeval.commands.probes",
    "ruler": "ctxeval.commands.validity",
    "agreement": "ctxeval.commands.validity",
    "probe-report": "ctxeval.commands.probes",
    "report": "ctxeval.commands.tools",
    "models": "ctxeval.commands.tools",
    "leval": "ctxeval.commands.answers",
    "leval-corr": "ctxeval.commands.answers",
    "judge": "ctxeval.commands.answers",
    "meta-eval": "ctxeval.commands.answers",
    "pplqa": "ctxeval.commands.answers",
    "serve": "ctxeval.commands.tools",
}

# command name -> its line in `ctxeval --help` (a whole sentence; the command's own --help gives
# its spec's docstring), so the list is printed without importing any command's code
SUMMARIES: dict[str, str] = {
    "sweep": "Rank-based perplexity over context lengths (the thesis protocol).",
    "score": "Perplexity and rank scores of whole texts with chunked, sliding or fixed windows.",
    "diff": "How much CAND's next-token distributions differ from REF's on the same windows.",
    "summary": "Print a finished run's tables, recomputed from its records.",
    "compare": "Paired comparison of two runs over the same windows: perplexity ratio B/A with a BCa interval.",
    "trends": "Slope of every metric against context length, and the spread across repeated starts.",
    "context-gain": "Does the model use distant context? Perplexity with a full and a short context, the gain, and LongPPL.",
    "effective-length": "How much of its context does a model use? The effective context length L* with its interval.",
    "retrieval": "Line retrieval: greedy exact-match accuracy and the answer's rank per size and depth.",
    "ruler": "RULER's synthetic tasks, scored by greedy generation and by likelihood.",
    "agreement": "Which cheap likelihood measure orders models as task accuracy does (runs of several models).",
    "probe-report": "Probe runs of several models side by side: perplexity, context gain, L* and retrieval.",
    "report": "One offline HTML report of finished runs with a per-token explorer.",
    "models": "List the models and backends usable here.",
    "leval": "L-Eval metrics of model answers: exact match, F1 or ROUGE-1/2/L, and ΔL.",
    "leval-corr": "Kendall τ-b between each metric's model ranking and the human ranking (L-Eval Figure 2).",
    "judge": "Pairwise LLM judge (L-Eval's prompt, both answer orders): win rate over a base model.",
    "meta-eval": "Which answer-quality method agrees with human pairwise labels (PPLqa paper, Table 3).",
    "pplqa": "PPLqa = |PPL(question + answer) - PPL(answer)| (lower is better); ranks each question's answers.",
    "serve": "Serve a model behind an OpenAI-compatible API scored by ctxeval's exact scorers.",
}

# result kind (the `kind` in a folder's result.json) -> (module, class)
RESULTS: dict[str, tuple[str, str]] = {
    "scoring": ("ctxeval.results.scoring", "RunResult"),
    "comparison": ("ctxeval.results.comparison", "Comparison"),
    "trends": ("ctxeval.results.trends", "Trends"),
    "diff": ("ctxeval.results.diff", "DiffResult"),
    "judge": ("ctxeval.results.judge", "JudgeResult"),
    "pplqa": ("ctxeval.results.pplqa", "PplqaResult"),
    "meta-eval": ("ctxeval.results.meta_eval", "MetaEvalResult"),
    "leval": ("ctxeval.results.leval", "LevalResult"),
    "correlations": ("ctxeval.results.correlations", "Correlations"),
    "context-gain": ("ctxeval.results.context_gain", "ContextGainResult"),
    "effective-length": ("ctxeval.results.effective_length", "EffectiveLengthResult"),
    "retrieval": ("ctxeval.results.retrieval", "RetrievalResult"),
    "ruler": ("ctxeval.results.ruler", "RulerResult"),
    "agreement": ("ctxeval.results.agreement", "AgreementResult"),
    "probe-report": ("ctxeval.results.probe_report", "ProbeReport"),
}

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
    return [*(function_name(c) for c in COMMANDS), *(cls for _, cls in RESULTS.values()), *EXTRAS]
