"""Pairwise meta-evaluation: each method picks the better of two answers, and its picks are
compared with the human labels (the PPLqa paper's Table 3: precision/recall/F1 per label,
accuracy, MCC), with percentile bootstrap intervals over items.

Its result (results/meta_eval.py): `meta_eval.json`, `meta_eval.md` and `items.csv` (scores
and picks per item); the run also holds `passes.parquet` (the evaluator passes as records; a
re-run with the same model resumes, see qa/passes.py) and `manifest.json`.
"""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path

import pandas as pd

from ctxeval.data.pairwise import PairDataset
from ctxeval.metrics.qa import pick_winner
from ctxeval.qa.methods import HIGHER_IS_BETTER, MethodConfig, answer_passes, score_answer
from ctxeval.qa.passes import PassRecords, PassSettings, run_passes
from ctxeval.results.manifest import Manifest
from ctxeval.results.meta_eval import MetaEvalResult
from ctxeval.stats.bootstrap import bootstrap_classification, classification_metrics
from ctxeval.stats.defaults import DEFAULT_CONFIDENCE, DEFAULT_REPLICATES, DEFAULT_SEED

def score_items(records: PassRecords, dataset: PairDataset, config: MethodConfig) -> list[dict]:
    """Scores of both answers of every item under every method, from the pass records."""
    rows = []
    for item in dataset.items:
        s1 = score_answer(records, item.question, item.answer_1, config)
        s2 = score_answer(records, item.question, item.answer_2, config)
        row = {"item_id": item.item_id, "label": item.label}
        for method in config.methods:
            row[f"{method}_1"], row[f"{method}_2"] = s1[method], s2[method]
            row[f"{method}_pick"] = pick_winner(s1[method], s2[method], HIGHER_IS_BETTER[method])
        for extra in sorted(set(s1) - set(config.methods)):
            row[f"{extra}_1"], row[f"{extra}_2"] = s1[extra], s2[extra]
        rows.append(row)
    return rows


def evaluate_picks(rows: list[dict], methods: tuple[str, ...], replicates: int, seed: int) -> dict[str, dict]:
    """Table 3 metrics and their intervals (each the row every interval writes) per method. A tie pick (equal scores) is a third class:
    it is wrong for accuracy, lowers recall of the true label, and enters MCC's confusion matrix."""
    y_true = [r["label"] for r in rows]
    labels = [1, 2]
    results = {}
    for method in methods:
        y_pred = [r[f"{method}_pick"] for r in rows]
        all_labels = labels + ([0] if 0 in y_true or 0 in y_pred else [])
        point = classification_metrics(y_true, y_pred, labels, all_labels)
        ci = bootstrap_classification(y_true, y_pred, labels, all_labels, replicates, seed)
        results[method] = {
            "metrics": point,
            "intervals": {k: v.to_row() for k, v in ci.items()},
            "n": len(rows),
            "tie_picks": sum(p == 0 for p in y_pred),
            "picks": {str(l): sum(p == l for p in y_pred) for l in all_labels},
            "higher_is_better": HIGHER_IS_BETTER[method],
        }
    return results


def run_meta_eval(
    settings: PassSettings,
    dataset: PairDataset,
    config: MethodConfig,
    replicates: int = DEFAULT_REPLICATES,
    seed: int = DEFAULT_SEED,
) -> MetaEvalResult:
    """Score, pick and compare with the human labels; the result (written by the engine) has the
    metrics, their Markdown table (`settings.render`'s) and the items."""
    started = time.time()
    requests = [r for it in dataset.items for a in (it.answer_1, it.answer_2) for r in answer_passes(it.question, a, config)]
    run_config = {"dataset": dataset.name, "items": len(dataset.items), "method_config": asdict(config), "model": settings.evaluator.model.text}

    def build(records: PassRecords, manifest: Manifest) -> MetaEvalResult:
        rows = score_items(records, dataset, config)
        return _meta_eval_result(_report(records, dataset, config, rows, replicates, seed, started), pd.DataFrame(rows), manifest, settings.out_dir)

    return run_passes(settings, requests, "meta-eval", run_config, build)


def _report(records: PassRecords, dataset: PairDataset, config: MethodConfig, rows: list[dict], replicates: int, seed: int, started: float) -> dict:
    """meta_eval.json's content."""
    scoring_seconds = time.time() - started
    return {
        "dataset": {"name": dataset.name, "source": dataset.source, "items": len(rows), "tie_policy": dataset.tie_policy, "ties_dropped": dataset.ties_dropped, **dataset.notes,
                    "labels": {str(l): sum(r["label"] == l for r in rows) for l in sorted({r["label"] for r in rows})}},
        "evaluator": {"name": records.info.name, "backend": records.info.backend, "sha256": records.info.sha256},
        "config": asdict(config),
        "bootstrap": {"method": "percentile", "replicates": replicates, "seed": seed, "confidence": DEFAULT_CONFIDENCE, "unit": "item"},
        "methods": evaluate_picks(rows, config.methods, replicates, seed),
        "timing": {"scoring_seconds": round(scoring_seconds, 1), "passes_run_this_session": records.run_now, "total_seconds": round(time.time() - started, 1)},
    }


def _meta_eval_result(report: dict, items: pd.DataFrame, manifest: Manifest, out: Path) -> MetaEvalResult:
    return MetaEvalResult(report, items, manifest, Path(out))
