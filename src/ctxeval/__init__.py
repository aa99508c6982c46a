"""ctxeval: measure how well language models use long contexts.

The public functions live in `ctxeval.api` and are imported from it on first use, so a process
that only needs a backend (a Ray worker, `ctxeval serve`) does not import pandas, scipy and
matplotlib (about a second here).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["sweep", "score", "diff", "summary", "compare", "trends", "context_gain", "effective_length", "retrieval", "ruler", "agreement", "probe_report", "report", "models", "leval",
           "leval_corr", "judge", "meta_eval", "pplqa", "serve", "run_metrics", "Result", "read_result", "RunResult", "Comparison", "Trends", "DiffResult",
           "JudgeResult", "PplqaResult", "MetaEvalResult", "LevalResult", "Correlations", "MetricConfig", "Bootstrap", "NoiseFloor", "floor_line",
           "CorpusOptions", "ExecutorOptions", "OpenAIOptions", "DEFAULT_CACHE", "dry_run_table",
           "ContextGainResult", "EffectiveLengthResult", "RetrievalResult", "RulerResult", "AgreementResult", "ProbeReport"]

if TYPE_CHECKING:
    from ctxeval.api import *  # noqa: F403


def __getattr__(name: str) -> Any:
    if name in __all__:
        from ctxeval import api

        return getattr(api, name)
    raise AttributeError(f"module 'ctxeval' has no attribute {name!r}")
