"""The `ruler` result: results.json (scores per model, task and length; effective lengths;
agreement of the two scorings), results.md and the score plot, beside the run's samples."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq

from ctxeval.results.base import Result
from ctxeval.results.io import Figure, Json, Text, Value, folder, loaded, rows, written
from ctxeval.results.manifest import Manifest, read_manifest
from ctxeval.results.rows import frame, interval_columns, json_rows
from ctxeval.stats.verdict import in_the_fields_order

SAMPLES_FILE = "samples.parquet"  # the run's records, one row per sample (the engine writes them)
MEAN_TASK = "mean"  # the row of every length that averages a model's tasks
RESULTS_JSON = "results.json"
RESULTS_MD = "results.md"
PLOT_FILE = "ruler_scores.png"
OLD_CONFIDENCE = 0.95  # the level every interval of results.json and ppi.json before version 4 held (an --until run's own: its config's)
# the methods of version 3's intervals
MOVER, SIMULTANEOUS, PPI_METHOD = "MOVER", "Tango's score interval, Bonferroni over the pairs", "PPI++ stratified (t)"
RANKS = "simultaneous rank interval from Holm-adjusted score tests"
SEQUENCE_METHOD = "betting confidence sequence (Waudby-Smith & Ramdas 2024)"
PPI_JSON = "ppi.json"  # a --generate-share run's prediction-powered scores and paired differences
PPI_DEFINITIONS = {
    "estimate": "PPI++ estimate (percent) of the score every sample's generation would give: settled samples exact, a seeded share of the others generated, "
                "the rest predicted from their likelihood numbers by a cross-fitted calibration, corrected by the generated ones (power-tuned, ppi_py)",
    "score/diff": "each an interval object (estimate, low, high, se, n, confidence, method, reason): the mean over the population the samples are "
                  "drawn from (normal, the strata's variances and the spread between them), at its confidence (an --until run: its looks'); a "
                  "difference adds its verdict (outcome, delta, margin: the smallest δ it lies within, samples_needed)",
    "differences": "variant minus the first model on the same samples (points), the pairs' strata as for a score; labelled_pairs, the pairs whose "
                   "two generated scores are known (settled or generated on each side), and on them flips_lost / flips_gained (right in the "
                   "reference and wrong in the variant, the reverse), flips_partial (differing partial-credit pairs), mcnemar_p / mcnemar_midp "
                   "(McNemar's exact p and mid-p where every score is 0 or 1, else None with mcnemar_reason)",
    "exact/generated/predicted": "samples labelled at no cost (settled by likelihood), by generation, and neither",
}


def definitions(threshold: float) -> dict[str, str]:
    """What results.json's numbers mean."""
    return {
        "score": "RULER's string_match_all in percent: per sample the share of answers found in the generated text (case-insensitive), averaged; "
                 "by likelihood where the backend does not generate (scored_by)",
        "likelihood": "share of answers inside the greedy prefix of the teacher-forced reference, averaged (percent)",
        "intervals": "every interval is an object (estimate, low, high, se, n, confidence, method, reason); a score's: the mean with two pseudo-labels "
                     "at 0 and two at 1 (Agresti-Coull), Student's t with n - 1 df; the mean over tasks by MOVER from the tasks' intervals; partial credit "
                     "counts as a fraction of a success; a verdict's adds outcome, delta, margin (the smallest δ it lies within) and samples_needed",
        "mean": "the task 'mean': the mean of the run's task scores per length, over the tasks the run has (of RULER's 13; its two QA tasks are not offered)",
        "effective length": f"the longest length whose score, and every shorter length's, is at least the threshold ({threshold:g})",
        "paired": "each model after the first against the first, on the same prompts (sample k of a cell the same text for both): score_diff, candidate "
                  "minus reference in points, with Tango's score interval for paired 0/1 outcomes (partial credit as a fraction of a sample); logp_diff, "
                  "the difference of the mean answer log p per token in nats, with a paired BCa interval over samples; each with its verdict "
                  "(within δ, hurts, gains, too few samples to tell; stats/verdict.py) against score_delta / logp_delta and the samples that would settle an undecided one; "
                  "flips_lost / flips_gained, samples right (1) in the reference and wrong (0) in the candidate and the reverse, flips_partial, pairs that "
                  "differ where a score is partial credit; mcnemar_p / mcnemar_midp, McNemar's exact two-sided p and its mid-p where every score is 0 or 1 "
                  "(None elsewhere, mcnemar_reason says why)",
        "ranking": "with three or more models sharing the first's prompts, per length and task (and the mean over tasks: every task's samples pooled) the "
                   "models in order of score: to_best (points, the model minus the top model) with Tango's interval at 1 − 0.05/pairs (Bonferroni: all pairs' "
                   "intervals simultaneous at 95 %), rank (the model's place, with its simultaneous rank interval) and groups (letters: two models sharing a letter "
                   "are not told apart), both from Holm-adjusted score tests over all pairs; ranked False: left out, note says why",
        "ranking_pairs": "every pair of ranked models: diff (lower minus higher, points) with its simultaneous interval, p (Tango's score test of no "
                         "difference), p_holm (Holm-adjusted over the pairs), apart (p_holm ≤ 0.05)",
    }


@dataclass
class RulerResult(Result):
    """A finished RULER run: scores per (model, task, length) and their mean, effective lengths."""

    KIND = "ruler"
    VERSION = 4
    READS = (1, 2, 3)  # version 1 had no paired differences, version 2 no flips or ranking; before 4 an interval was its bounds alone (`migrate`)
    FILES = (Json(RESULTS_JSON, {"threshold": "threshold", "models": written(lambda r: r.models), "scores": rows("table"), "effective_lengths": "effective_lengths",
                                 "agreement": "agreement", "paired": Value("paired", lambda r: json_rows(r.paired), frame, missing=[]),
                                 "ranking": Value("ranking", lambda r: json_rows(r.ranking), frame, missing=[]),
                                 "ranking_pairs": Value("ranking_pairs", lambda r: json_rows(r.ranking_pairs), frame, missing=[]),
                                 "paired_settings": Value("paired_settings", lambda r: r.paired_settings, missing={}), "ruler_commit": written(lambda r: r.manifest.config.get("ruler_commit")),
                                 "definitions": written(lambda r: definitions(r.threshold))}),
             Json(PPI_JSON, {"scores": rows("ppi"), "differences": rows("ppi_differences"), "definitions": written(lambda r: PPI_DEFINITIONS)}, when="ppi"),
             Text(RESULTS_MD, "markdown"), Figure(PLOT_FILE))

    run_dir: Path = folder()
    manifest: Manifest = loaded(read_manifest)
    threshold: float
    table: pd.DataFrame  # one row per (model, task or "mean", length)
    effective_lengths: dict[str, dict[str, dict]]
    agreement: dict
    paired: pd.DataFrame  # one row per (variant, task or "mean", length) against the first model (ruler/paired.py); empty with one model
    paired_settings: dict  # the verdicts' margins (score_delta points, logp_delta nats), replicates and seed
    ranking: pd.DataFrame  # one row per (task or "mean", length, model): the models in order, simultaneous intervals, ranks, groups (ruler/ranking.py); empty below three paired models
    ranking_pairs: pd.DataFrame  # one row per (task or "mean", length, pair of ranked models)
    samples: pd.DataFrame = loaded(lambda run_dir: read_samples(run_dir), repr=False)
    markdown: str = ""
    ppi: pd.DataFrame | None = None  # --generate-share: PPI++ scores per (model, task or "mean", length)
    ppi_differences: pd.DataFrame | None = None  # --generate-share: each variant minus the first model, paired

    @classmethod
    def migrate(cls, found: dict[str, Any], version: int, folder: Path) -> dict[str, Any]:
        """Versions 1-3: every interval as its bounds alone, at the level and by the method
        results.json's definitions named; here as the row every interval writes."""
        defined = json.loads((folder / RESULTS_JSON).read_text(encoding="utf-8")).get("definitions", {}).get("low/high", "")
        table = found["table"]
        cell = "Wilson score" if "Wilson" in defined else "pseudo-labels (Agresti-Coull, t)"
        found["table"] = interval_columns(table, "score", {"low": "low", "high": "high"}, confidence=OLD_CONFIDENCE,
                                          method=[MOVER if t == MEAN_TASK else cell for t in table["task"]])
        settings = found.get("paired_settings") or {}
        confidence = float(settings.get("confidence", OLD_CONFIDENCE))
        paired = found.get("paired")
        if paired is not None and not paired.empty and "score_low" in paired:
            paired = interval_columns(paired, "score_diff", {"score_low": "low", "score_high": "high", "score_outcome": "outcome",
                                                             "score_samples_needed": "samples_needed"},
                                      confidence=confidence, method="Tango score", delta=float(settings.get("score_delta", math.nan)))
            found["paired"] = interval_columns(paired, "logp_diff", {"logp_low": "low", "logp_high": "high", "logp_outcome": "outcome",
                                                                     "logp_samples_needed": "samples_needed", "logp_reason": "reason"},
                                               confidence=confidence, method="BCa", delta=float(settings.get("logp_delta", math.nan)))
            for name in ("score_diff", "logp_diff"):
                found["paired"][f"{name}.margin"] = found["paired"][[f"{name}.low", f"{name}.high"]].abs().max(axis=1, skipna=False)
                _in_the_fields_order(found["paired"], name)
        ranking, pairs = found.get("ranking"), found.get("ranking_pairs")
        if ranking is not None and not ranking.empty and "to_best_low" in ranking:
            simultaneous = 1 - (1 - OLD_CONFIDENCE) / ranking["pairs"].astype(float)
            ranking = interval_columns(ranking, "to_best", {"to_best_low": "low", "to_best_high": "high"}, confidence=simultaneous, method=SIMULTANEOUS)
            found["ranking"] = interval_columns(ranking.assign(rank=ranking["order"]), "rank", {"rank_low": "low", "rank_high": "high"},
                                                confidence=OLD_CONFIDENCE, method=RANKS)
            count = pairs.groupby(["task", "length"])["higher"].transform("size").astype(float)
            found["ranking_pairs"] = interval_columns(pairs, "diff", {"low": "low", "high": "high"}, confidence=1 - (1 - OLD_CONFIDENCE) / count, method=SIMULTANEOUS)
        if found.get("ppi") is not None:
            until = read_manifest(folder).config.get("until") or {}
            moved = {"estimate": "estimate", "low": "low", "high": "high", "se": "se", "reason": "reason"}
            found["ppi"] = interval_columns(found["ppi"], "score", moved, n=found["ppi"]["samples"], **_ppi_level(found["ppi"], until, MOVER))
            differences = found.get("ppi_differences")
            if differences is not None and not differences.empty:
                delta = float(until.get("delta") or settings.get("score_delta", math.nan))
                found["ppi_differences"] = interval_columns(differences, "diff", moved | {"outcome": "outcome", "samples_needed": "samples_needed"},
                                                            n=differences["samples"], delta=delta, **_ppi_level(differences, until, "Tango score"))
                found["ppi_differences"]["diff.margin"] = found["ppi_differences"][["diff.low", "diff.high"]].abs().max(axis=1, skipna=False)
                _in_the_fields_order(found["ppi_differences"], "diff")
        return found

    @property
    def models(self) -> list[str]:
        return list(dict.fromkeys(self.table["model"]))

    def paths(self) -> dict[str, Path]:
        d = self.run_dir
        return {"results": d / RESULTS_JSON, "samples": d / SAMPLES_FILE, "plot": d / PLOT_FILE, "report": d / RESULTS_MD, "ppi": d / PPI_JSON}


def _in_the_fields_order(table: pd.DataFrame, name: str) -> None:
    """Versions 1-3 read an interval that excludes 0 first (*hurts*/*gains* even inside ±δ); the
    verdict's order now reads one inside ±δ as *within δ* first, so an older run's verdicts are
    read again in that order (`stats.verdict.in_the_fields_order`)."""
    table[f"{name}.outcome"] = [in_the_fields_order(*row) for row in zip(table[f"{name}.outcome"], table[f"{name}.low"], table[f"{name}.high"], table[f"{name}.delta"])]


def _ppi_level(table: pd.DataFrame, until: dict[str, Any], pooled: str) -> dict[str, Any]:
    """The confidence and method of an older ppi.json's rows: PPI++ at the run's level (an --until
    run's per look); at share 1 (looks "sequence") a cell's betting sequence at the early looks'
    level before the budget and full generation's interval at it (a task's pseudo-label t, or
    Tango's for a difference; the mean over tasks `pooled`), a mean over tasks' sequence at the
    run's level."""
    level = float(until.get("confidence", OLD_CONFIDENCE))
    if until.get("looks") != "sequence":
        return {"confidence": level, "method": PPI_METHOD}
    mean = table["task"] == MEAN_TASK
    reached = (table["samples"] >= int(until["max_samples"])) | mean
    budget = reached.groupby([table["model"], table["length"]]).transform("all")  # a mean over tasks: where every task reached it
    budget = budget.where(mean, table["samples"] >= int(until["max_samples"]))
    own = "Tango score" if pooled != MOVER else "pseudo-labels (Agresti-Coull, t)"
    early = float(until.get("early_confidence", level))
    return {"confidence": [level if b or m else early for b, m in zip(budget, mean)],
            "method": [(pooled if m else own) if b else SEQUENCE_METHOD for b, m in zip(budget, mean)]}


def read_samples(run_dir: Path) -> pd.DataFrame:
    """The run's sample records in plan order."""
    return pq.read_table(Path(run_dir) / SAMPLES_FILE).to_pandas().drop(columns="sample_index")
