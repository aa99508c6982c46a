"""ctxeval: measure how well language models use long contexts."""

from ctxeval.api import Comparison, MetricConfig, RunResult, compare, models, report, score, summary, sweep

__all__ = ["sweep", "score", "summary", "compare", "models", "report", "RunResult", "Comparison", "MetricConfig"]
