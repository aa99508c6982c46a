"""What a context-gain run reports: its summary (per text and model), the Markdown, and the
run's result built from them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ctxeval.metrics.gain import key_tables
from ctxeval.probes.context_gain import gain_by_distance, summarize_text
from ctxeval.results.context_gain import ContextGainResult
from ctxeval.results.manifest import Manifest
from ctxeval.results.records import read_records
from ctxeval.results.rows import json_rows


@dataclass(frozen=True)
class KeyTokenSettings:
    """Post-hoc settings: changing them never needs a new model run."""

    evaluator: str  # model name (as in the manifest) that picks key tokens
    alpha: float
    beta: float
    block: int  # targets per bootstrap unit
    replicates: int
    seed: int


def gain_summary(manifest: Manifest, tables: dict[tuple[str, str], pd.DataFrame], spans: dict[str, np.ndarray], settings: KeyTokenSettings) -> tuple[dict, pd.DataFrame]:
    """summary.json's content and the gain-by-distance table of a run's gain tables (`key_tables`);
    the first model is the primary one."""
    config = manifest.config
    window, short = config["window"], config["short"]
    models = manifest.model_names
    per_text: dict[str, dict] = {}
    distance_rows = []
    for text_id in spans:
        by_model = {}
        for model in models:
            table = tables[model, text_id]
            by_model[model] = summarize_text(table, spans[text_id], settings.block, settings.replicates, settings.seed)
            distance = gain_by_distance(table, short, window)
            distance.insert(0, "text_id", text_id)
            distance.insert(0, "model", model)
            distance_rows.append(distance)
        per_text[text_id] = {k: v for k, v in by_model[models[0]].items()} | {"model": models[0], "by_model": by_model}
    by_distance = pd.concat(distance_rows, ignore_index=True)
    summary = {
        "run_id": manifest.run_id,
        "window": window,
        "short": short,
        "short_stride": config["stride"],
        "key_tokens": {"evaluator": settings.evaluator, "alpha": settings.alpha, "beta": settings.beta,
                       "rule": "g = log p_long - log p_short > alpha and log p_long > beta; mapped to other models by character spans (a token is key when it lies inside a key span)"},
        "models": models,
        "texts": per_text,
        "gain_by_distance": json_rows(by_distance),
    }
    return summary, by_distance


def context_gain_result(run_dir: Path, manifest: Manifest, settings: KeyTokenSettings) -> ContextGainResult:
    """A finished run's result: its records' gain tables, key tokens by `settings.evaluator`,
    summaries with paired intervals, gain by distance and the Markdown."""
    records = read_records(run_dir)
    texts = [t["text_id"] for t in manifest.texts or [] if "skipped" not in t]  # a corpus document too short for the plan has no records
    tables, spans = key_tables(records, manifest.model_names, texts, settings.evaluator, settings.alpha, settings.beta)
    summary, by_distance = gain_summary(manifest, tables, spans, settings)
    return ContextGainResult(Path(run_dir), manifest, records, summary, by_distance, tables, spans)
