"""`ctxeval pplqa`: score every answer of every question, rank answers per question, and
(optionally) compare the rankings with a reference by per-question Kendall tau averaged over
questions (the PPLqa paper's eq. 3; tau-a of eq. 4 by default, tau-b on request), its p-values,
and the paper's random baseline.

Its result (results/pplqa.py): `scores.csv` (one row per question x answer: scores and
per-question ranks, 1 = best), `pplqa.json` and `pplqa.md`; the run also holds `passes.parquet`
(the evaluator passes as records; a re-run resumes, see qa/passes.py) and `manifest.json`.
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pandas as pd

from ctxeval.data.mt_bench import RankingQuestion
from ctxeval.metrics.qa import rank_scores
from ctxeval.qa.methods import HIGHER_IS_BETTER, MethodConfig, answer_passes, score_answer
from ctxeval.results.manifest import Manifest
from ctxeval.qa.passes import PassRecords, PassSettings, run_passes
from ctxeval.results.pplqa import PplqaResult
from ctxeval.stats.agreement import BASELINE_DRAWS, EXACT_BASELINE_MAX_ITEMS, per_item_tau, random_ranking_baseline
from ctxeval.stats.defaults import DEFAULT_SEED


def _goodness(method: str, value: float) -> float:
    """Score turned so that higher is better for every method (for tau against references)."""
    return value if HIGHER_IS_BETTER[method] else -value


def tau_summary(items: list[tuple[list[float], list[float]]], variant: str = "a", seed: int = DEFAULT_SEED) -> dict:
    """Mean per-item tau, per-item p-values, a one-sample t-test of the taus against 0, and
    the paper's random baseline averaged over the used items' ranking sizes (a sparse
    reference ranks fewer answers, and the baseline depends strongly on that number)."""
    from scipy import stats  # imported when used: scipy is a third of the CLI's start-up
    result = per_item_tau(items, variant)
    baselines = {n: random_ranking_baseline(n, seed=seed) for n in set(result.sizes)}
    taus = np.asarray(result.taus)
    t_p = float(stats.ttest_1samp(taus, 0.0).pvalue) if len(taus) >= 2 and np.ptp(taus) > 0 else math.nan
    return {
        "tau_variant": variant,
        "mean_tau": result.mean_tau,
        "items_used": result.items_used,
        "items_skipped": result.items_skipped,
        "items_constant": result.items_constant,
        "p_mean_tau_ttest": t_p,
        "items_p_below_0.05": int(sum(p < 0.05 for p in result.p_values)),
        "taus": result.taus,
        "p_values": result.p_values,
        "ranking_sizes": result.sizes,
        "random_baseline_nonnegative": float(np.mean([baselines[n] for n in result.sizes])) if result.sizes else math.nan,
        "random_baseline_method": _baseline_method(result.sizes, seed),
    }


def _baseline_method(sizes: list[int], seed: int) -> str:
    if all(n <= EXACT_BASELINE_MAX_ITEMS for n in sizes):
        return "exact (all rankings enumerated)"
    return f"Monte Carlo above {EXACT_BASELINE_MAX_ITEMS} answers ({BASELINE_DRAWS} draws, seed {seed})"


def rank_answers(
    settings: PassSettings,
    questions: list[RankingQuestion],
    config: MethodConfig,
    reference: dict[str, dict[str, float]] | None = None,
    reference_note: dict | None = None,
    seed: int = DEFAULT_SEED,
    tau: str = "a",
) -> PplqaResult:
    """Score and rank all answers; the result (written by the engine) has scores.csv, pplqa.json and pplqa.md (`settings.render`'s)."""
    started = time.time()
    requests = [r for q in questions for a in q.answers.values() for r in answer_passes(q.question, a, config)]
    run_config = {"questions": [q.question_id for q in questions], "method_config": asdict(config), "model": settings.evaluator.model.text}

    def build(records: PassRecords, manifest: Manifest) -> PplqaResult:
        report, rows = _ranked(records, questions, config, reference, reference_note, seed, tau, started)
        return PplqaResult(report, pd.DataFrame(rows), manifest, Path(settings.out_dir))

    return run_passes(settings, requests, "pplqa", run_config, build)


def _ranked(records: PassRecords, questions: list[RankingQuestion], config: MethodConfig, reference: dict[str, dict[str, float]] | None,
            reference_note: dict | None, seed: int, tau: str, started: float) -> tuple[dict, list[dict]]:
    """pplqa.json's content and the rows of scores.csv, from the records of every pass."""
    rows: list[dict] = []
    for q in questions:
        q_rows = [{"question_id": q.question_id, "model": model, **score_answer(records, q.question, answer, config)} for model, answer in q.answers.items()]
        for method in config.methods:
            ranks = rank_scores([r[method] for r in q_rows], HIGHER_IS_BETTER[method])
            for r, rank in zip(q_rows, ranks):
                r[f"{method}_rank"] = float(rank)
        rows.extend(q_rows)
    by_q: dict[str, list[dict]] = {}
    for r in rows:
        by_q.setdefault(r["question_id"], []).append(r)
    agreement: dict[str, dict] = {}
    if reference:
        for method in config.methods:
            items = []
            for qid, q_rows in by_q.items():
                ref = reference.get(qid, {})
                shared = [r for r in q_rows if r["model"] in ref]
                items.append(([_goodness(method, r[method]) for r in shared], [ref[r["model"]] for r in shared]))
            agreement[f"{method} vs reference"] = tau_summary(items, tau, seed)
    for a, b in itertools.combinations(config.methods, 2):
        items = [([_goodness(a, r[a]) for r in q_rows], [_goodness(b, r[b]) for r in q_rows]) for q_rows in by_q.values()]
        agreement[f"{a} vs {b}"] = tau_summary(items, tau, seed)
    mean_rank = {m: {model: float(np.mean([r[f"{m}_rank"] for r in rows if r["model"] == model])) for model in dict.fromkeys(r["model"] for r in rows)} for m in config.methods}
    result = {
        "evaluator": {"name": records.info.name, "backend": records.info.backend, "sha256": records.info.sha256},
        "config": asdict(config),
        "questions": len(by_q),
        "answers": len(rows),
        "mean_rank_per_model": mean_rank,
        "reference": reference_note,
        "tau_variant": tau,
        "agreement": agreement,
        "timing": {"seconds": round(time.time() - started, 1), "passes_run_this_session": records.run_now},
    }
    return result, rows

