"""The `ruler` result: results.json (scores per model, task and length; effective lengths;
agreement of the two scorings), results.md and the score plot, beside the run's samples."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

from ctxeval.results.base import Result
from ctxeval.results.io import Figure, Json, Text, Value, folder, loaded, rows, written
from ctxeval.results.manifest import Manifest, read_manifest
from ctxeval.results.rows import frame, json_rows

SAMPLES_FILE = "samples.parquet"  # the run's records, one row per sample (the engine writes them)
MEAN_TASK = "mean"  # the row of every length that averages a model's tasks
RESULTS_JSON = "results.json"
RESULTS_MD = "results.md"
PLOT_FILE = "ruler_scores.png"
PPI_JSON = "ppi.json"  # a --generate-share run's prediction-powered scores and paired differences
PPI_DEFINITIONS = {
    "estimate": "PPI++ estimate (percent) of the score every sample's generation would give: settled samples exact, a seeded share of the others generated, "
                "the rest predicted from their likelihood numbers by a cross-fitted calibration, corrected by the generated ones (power-tuned, ppi_py)",
    "low/high": "95 % interval for the mean over the population the samples are drawn from (normal, the strata's variances and the spread between them)",
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
        "low/high": "95 % interval: the mean with two pseudo-labels at 0 and two at 1 (Agresti-Coull), Student's t with n - 1 df; the mean over tasks by MOVER from the tasks' intervals; partial credit counts as a fraction of a success",
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
                   "intervals simultaneous at 95 %), rank_low..rank_high (simultaneous rank interval) and groups (letters: two models sharing a letter "
                   "are not told apart), both from Holm-adjusted score tests over all pairs; ranked False: left out, note says why",
        "ranking_pairs": "every pair of ranked models: diff (lower minus higher, points) with its simultaneous interval, p (Tango's score test of no "
                         "difference), p_holm (Holm-adjusted over the pairs), apart (p_holm ≤ 0.05)",
    }


@dataclass
class RulerResult(Result):
    """A finished RULER run: scores per (model, task, length) and their mean, effective lengths."""

    KIND = "ruler"
    VERSION = 3
    READS = (1, 2)  # version 1 had no paired differences, version 2 no flips or ranking
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

    @property
    def models(self) -> list[str]:
        return list(dict.fromkeys(self.table["model"]))

    def paths(self) -> dict[str, Path]:
        d = self.run_dir
        return {"results": d / RESULTS_JSON, "samples": d / SAMPLES_FILE, "plot": d / PLOT_FILE, "report": d / RESULTS_MD, "ppi": d / PPI_JSON}


def read_samples(run_dir: Path) -> pd.DataFrame:
    """The run's sample records in plan order."""
    return pq.read_table(Path(run_dir) / SAMPLES_FILE).to_pandas().drop(columns="sample_index")
