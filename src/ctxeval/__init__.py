"""ctxeval: measure how well language models use long contexts."""

from ctxeval.api import MetricConfig, RunResult, models, score, summary, sweep

__all__ = ["sweep", "score", "summary", "models", "RunResult", "MetricConfig"]
