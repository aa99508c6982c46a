"""Corpus-level summaries: every document of a run pooled, with document-resampling intervals.

`summary.json` holds one row per document (text id) and setting; this adds one row per model
× setting × length over all documents together: each metric over all their tokens
(token-weighted, so a long document counts by its tokens) and the intervals of the plotted
metrics from a cluster bootstrap over documents (stats/cluster.py), because windows of one
document are correlated and resampling them gives intervals that are too narrow.
"""

from __future__ import annotations

import pandas as pd

from ctxeval.metrics.config import MetricConfig
from ctxeval.metrics import registry
from ctxeval.report.summary import group_metrics, n_short_lists, on_scale, token_values
from ctxeval.stats.cluster import cluster_bootstrap
from ctxeval.stats.defaults import DEFAULT_REPLICATES, DEFAULT_SEED

CORPUS_KEYS = ["model", "method", "context_mode", "nominal_len"]


def corpus_summary(
    records: pd.DataFrame,
    metrics: MetricConfig,
    vocab_sizes: dict[str, int],
    temperatures: tuple[float, ...],
    replicates: int = DEFAULT_REPLICATES,
    seed: int = DEFAULT_SEED,
) -> pd.DataFrame:
    """One row per model × method × context mode × length over all documents: tokens,
    documents, windows, targets scored from short top-k lists, token-weighted metrics and each
    plotted metric's interval by document bootstrap (`Interval.columns`: `ppl.low`, ...,
    `ppl.n` the documents resampled, `ppl.method`)."""
    rows = []
    log_scale = {m.key for m in registry.panel_metrics(metrics) if m.log_scale}
    for key, group in records.groupby(CORPUS_KEYS, sort=True):
        row = dict(zip(CORPUS_KEYS, key))
        documents = group["text_id"].to_numpy()
        row["n"] = len(group)
        row["n_documents"] = int(group["text_id"].nunique())
        row["n_windows"] = int(group.groupby(["text_id", "repeat", "window_id"]).ngroups)
        row["n_short_list"] = n_short_lists(group, metrics, vocab_sizes[key[0]])
        overall = group_metrics(group, metrics, vocab_sizes[key[0]], temperatures)
        shown = {name: on_scale(cluster_bootstrap(values, documents, replicates, seed), overall[name], name in log_scale)
                 for name, values in token_values(group, metrics, vocab_sizes[key[0]]).items()}
        for name, value in overall.items():
            row |= shown[name].columns(name) if name in shown else {name: value}
        rows.append(row)
    return pd.DataFrame(rows)
