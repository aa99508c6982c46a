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
