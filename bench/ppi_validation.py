"""Does `ruler --generate-share` keep its promise? Coverage and width of the PPI++ interval,
simulated from full-generation RULER runs (docs/agreement.md, "Prediction-powered RULER").

Input: finished `ruler` folders in which every sample was generated or settled (no
`--generate-share`, no `--likelihood-only`), so each sample carries both its likelihood numbers
and its generated score. Each folder's samples are the *population*. One simulated run draws,
per (task, length), as many samples as the folder has, with replacement, the same draw for every
model (the variants stay paired); each unsettled sample is generated with probability P (one
uniform per drawn sample, shared by the models, as `ruler` draws), the others keep only their
likelihood numbers; then `ctxeval.ruler.ppi` scores the run as `ruler` does (`ppi_tables`).
Per share P and folder, over the simulated runs:

- coverage: how often a cell's interval (and each variant's paired difference's) holds the
  population's mean generated score (the folder's, not the drawn samples', which would flatter it);
- width against generation alone at equal measured compute: the cell's run costs N likelihood
  passes plus its generated samples' generation; generation alone buys m = that / (likelihood +
  unsettled share × generation) fully generated samples, whose t interval on the population's
  spread has width 2 t(m-1) sd / sqrt(m); the ratio PPI width ÷ that width;
- the correlation of the cross-fitted prediction with the label on the generated samples;
- how the variants rank (Spearman ρ over the folder's models, per length, mean over tasks): the
  PPI estimates against the population's generated scores; generation alone at the same compute
  (m samples per cell as above, one draw for every model) against them; and RULER's own
  split-half ρ, two independent generation-only runs of that compute against each other, the
  test-retest reliability r. A perfect cheap measure, correlated against one such noisy run,
  reaches about √r: the yardstick for a cheap measure's ρ (`ctxeval agreement`).

Costs per sample come from the folders' recorded seconds: `--likelihood RUN` (the same samples
scored `--likelihood-only`, one per folder, in order) gives the likelihood seconds per sample,
the rest of the full run's seconds are generation's, spread over its unsettled samples; or
`--cost-ratio R` states a generation's seconds per unsettled sample as R likelihood passes.

    python bench/ppi_validation.py RUN [RUN ...] (--likelihood RUN ... | --cost-ratio R)
        [--shares 0.1,0.2,0.3,0.5] [--replicates 1000] [--seed 0] --out DIR
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from ctxeval.errors import UserError
from ctxeval.ruler.ppi import GENERATED, PREDICTED, SETTLED, tables_of_predicted, with_predictions
from ctxeval.results.manifest import read_manifest
from ctxeval.results.ruler import MEAN_TASK, read_samples
from ctxeval.results.rows import bare

SHARES = (0.1, 0.2, 0.3, 0.5)
KEYS = ["model", "task", "length"]


@dataclass(frozen=True)
class Costs:
    """Seconds (or relative units) of one sample's likelihood pass and of one unsettled sample's generation."""

    likelihood: float
    generation: float


def population(run_dir: Path) -> pd.DataFrame:
    """A full-generation folder's samples; refused where a sample was not generated nor settled."""
    samples = read_samples(run_dir)
    if samples["generation_score"].isna().any() or not set(samples["method"]) <= {GENERATED, SETTLED}:
        raise SystemExit(f"{run_dir}: not a full-generation run (a sample was not generated): run ruler without --generate-share and --likelihood-only")
    return samples


def _seconds(run_dir: Path) -> float:
    timing = read_manifest(run_dir).timing or {}
    return float(timing.get("seconds_all_sessions", timing.get("seconds_this_session")))


def costs(run_dir: Path, samples: pd.DataFrame, likelihood: Path | None, ratio: float | None) -> Costs:
    """Per-sample costs: measured from the full and likelihood-only runs' seconds, or by the ratio."""
    if likelihood is None:
        return Costs(1.0, float(ratio))
    per_likelihood = _seconds(likelihood) / len(samples)
    unsettled = int((samples["method"] == GENERATED).sum())
    return Costs(per_likelihood, max(0.0, _seconds(run_dir) - _seconds(likelihood)) / max(1, unsettled))


def truths(samples: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The population's means (percent): per cell and mean over tasks; and each variant's paired
    difference against the first model."""
    cells = samples.groupby(KEYS, sort=False)["generation_score"].agg(["mean", "std", "size"]).reset_index()
    cells["unsettled"] = samples.groupby(KEYS, sort=False)["method"].apply(lambda m: float((m == GENERATED).mean())).to_numpy()
    cells["truth"] = 100 * cells["mean"]
    means = cells.groupby(["model", "length"], sort=False)["truth"].mean().reset_index().assign(task=MEAN_TASK)
    scores = pd.concat([cells, means], ignore_index=True)
    models = list(dict.fromkeys(samples["model"]))
    wide = samples.pivot_table(index=["task", "length", "sample"], columns="model", values="generation_score")
    diffs = []
    for model in models[1:]:
        d = (100 * (wide[model] - wide[models[0]])).groupby(["task", "length"]).mean()
        diffs += [{"model": model, "task": t, "length": n, "truth": v} for (t, n), v in d.items()]
        diffs += [{"model": model, "task": MEAN_TASK, "length": n, "truth": v} for n, v in d.groupby(level="length").mean().items()]
    return scores, pd.DataFrame(diffs)


def compute_units(samples: pd.DataFrame, cost: Costs) -> float:
    """What a run's samples cost: a likelihood pass each, and a generation for each generated one."""
    return len(samples) * cost.likelihood + int((samples["method"] == GENERATED).sum()) * cost.generation


def labelled_draw(rows: pd.DataFrame, drawn: np.ndarray, uniform: np.ndarray, share: float, task: str, length: int, first: int = 0) -> pd.DataFrame:
    """One model's population `rows` of a (task, length), indexed by sample, at the `drawn`
    sample ids, labelled as a `--generate-share` run labels them: a settled sample stays settled,
    an unsettled one is generated where its uniform falls below `share` and predicted (no label)
    otherwise; numbered `first`, `first` + 1, ... with prompts that tell the draws apart."""
    picked = rows.loc[drawn].reset_index()
    generated = (picked["method"] == GENERATED).to_numpy() & (uniform < share)
    method = np.where(picked["method"] == SETTLED, SETTLED, np.where(generated, GENERATED, PREDICTED))
    k = np.arange(first, first + len(drawn))
    return picked.assign(sample=k, method=method, prompt_sha256=[f"{task}/{length}/{i}" for i in k],
                         generation_score=np.where(method == PREDICTED, np.nan, picked["generation_score"]))


def simulated_run(samples: pd.DataFrame, share: float, rng: np.random.Generator) -> pd.DataFrame:
    """One run drawn from the population: per (task, length) its sample count drawn with
    replacement, the same draw and the same generation uniforms for every model."""
    parts = []
    for (task, length), cell in samples.groupby(["task", "length"], sort=False):
        ids = np.array(sorted(set(cell["sample"])))
        drawn = rng.choice(ids, size=len(ids), replace=True)
        uniform = rng.random(len(ids))
        for _, rows in cell.groupby("model", sort=False):
            parts.append(labelled_draw(rows.set_index("sample"), drawn, uniform, share, task, length))
    return pd.concat(parts, ignore_index=True)


def _generation_only_width(row: pd.Series, spent: float, cost: Costs) -> float:
    """The t interval's width (points) of generation alone on the samples `spent` buys."""
    m = spent / (cost.likelihood + row["unsettled"] * cost.generation)
    if m < 2 or not np.isfinite(row["std"]):
        return math.nan
    return 2 * stats.t.ppf(0.975, m - 1) * 100 * row["std"] / math.sqrt(m)


def _spearman(x: pd.Series, y: pd.Series) -> float:
    """Spearman's ρ of two per-model series; NaN where either is constant or fewer than 3."""
    x, y = x.align(y, join="inner")
    if len(x) < 3 or x.nunique() < 2 or y.nunique() < 2:
        return math.nan
    return float(stats.spearmanr(x, y).statistic)


def generation_only_scores(samples: pd.DataFrame, budget: pd.Series, rng: np.random.Generator) -> pd.DataFrame:
    """A generation-only run: per (task, length) `budget` samples drawn with replacement, the same
    draw for every model, every one generated; per model and length the mean over tasks (percent)."""
    parts = []
    for (task, length), cell in samples.groupby(["task", "length"], sort=False):
        ids = np.array(sorted(set(cell["sample"])))
        drawn_ids = rng.choice(ids, size=max(1, int(round(budget[(task, length)]))), replace=True)
        for model, rows in cell.groupby("model", sort=False):
            parts.append({"model": model, "task": task, "length": length, "score": 100 * rows.set_index("sample").loc[drawn_ids, "generation_score"].mean()})
    return pd.DataFrame(parts).groupby(["length", "model"], sort=False)["score"].mean().reset_index()


def rank_agreement(samples: pd.DataFrame, scores: pd.DataFrame, scores_truth: pd.DataFrame, budget: pd.Series, rng: np.random.Generator) -> dict:
    """Per length, averaged: ρ of the PPI estimates with the population's scores, of a
    generation-only run at equal compute with them, and of two such runs with each other."""
    truth = scores_truth[scores_truth["task"] == MEAN_TASK]
    estimate = scores[scores["task"] == MEAN_TASK] if (scores["task"] == MEAN_TASK).any() else scores  # one task: no mean row
    first, second = generation_only_scores(samples, budget, rng), generation_only_scores(samples, budget, rng)
    out: dict[str, list[float]] = {"rho_ppi": [], "rho_generation_only": [], "rho_split_half": []}
    for length in sorted(set(truth["length"])):
        t = truth[truth["length"] == length].set_index("model")["truth"]
        a = first[first["length"] == length].set_index("model")["score"]
        b = second[second["length"] == length].set_index("model")["score"]
        out["rho_ppi"].append(_spearman(estimate[estimate["length"] == length].set_index("model")["estimate"], t))
        out["rho_generation_only"].append(_spearman(a, t))
        out["rho_split_half"].append(_spearman(a, b))
    return {k: _mean_defined(v) for k, v in out.items()}


def _mean_defined(values: list[float]) -> float:
    """The mean of the defined values (a ρ is undefined where a side is constant); NaN if none."""
    defined = [v for v in values if np.isfinite(v)]
    return float(np.mean(defined)) if defined else math.nan


def replicate(samples: pd.DataFrame, share: float, rng: np.random.Generator, seed: int, cost: Costs,
              scores_truth: pd.DataFrame, diffs_truth: pd.DataFrame) -> dict:
    """One simulated run: per cell covered or not and its width ratio; per difference covered;
    how the variants rank."""
    run = simulated_run(samples, share, rng)
    predicted = with_predictions(run, seed)
    scores, diffs = tables_of_predicted(predicted)
    scores, diffs = bare(scores, "score"), bare(diffs, "diff")
    cells = scores.merge(scores_truth, on=KEYS, suffixes=("", "_population"))
    shown = cells[cells["low"].notna()]
    covered = ((shown["low"] <= shown["truth"]) & (shown["truth"] <= shown["high"])).tolist()
    per_cell = shown[shown["task"] != MEAN_TASK]
    widths = [(r.high - r.low, _generation_only_width(r, r.samples * cost.likelihood + r.generated * cost.generation, cost)) for _, r in per_cell.iterrows()]
    ratios = [ours / alone for ours, alone in widths if alone > 0]  # a cell whose population never varies has no width to compare
    cell_costs = scores[scores["task"] != MEAN_TASK].merge(scores_truth[KEYS + ["unsettled"]], on=KEYS)
    equal_compute = ((cell_costs["samples"] * cost.likelihood + cell_costs["generated"] * cost.generation)
                     / (cost.likelihood + cell_costs["unsettled"] * cost.generation))
    budget = equal_compute.groupby([cell_costs["task"], cell_costs["length"]]).mean()
    d = diffs.merge(diffs_truth, on=KEYS) if len(diffs) else pd.DataFrame(columns=["low", "high", "truth"])
    d = d[d["low"].notna()]
    labelled = predicted[predicted["generated"]]
    corr = float(np.corrcoef(labelled["prediction"], labelled["generation_score"])[0, 1]) if len(labelled) > 2 and labelled["generation_score"].std() > 0 else math.nan
    return {"covered": covered, "no_interval": int(cells["low"].isna().sum()), "cells": len(cells), "ratios": [x for x in ratios if np.isfinite(x)],
            "diff_covered": ((d["low"] <= d["truth"]) & (d["truth"] <= d["high"])).tolist(), "corr": corr,
            "generated": int((run["method"] == GENERATED).sum()), "samples": len(run),
            **rank_agreement(samples, scores, scores_truth, budget, rng)}


def validate_share(run_dir: Path, cost: Costs, share: float, replicates: int, seed: int) -> dict:
    """One share's row: coverage, no-interval share, width ratio at equal compute,
    prediction-label correlation, the variants' rank agreement."""
    samples = population(run_dir)
    scores_truth, diffs_truth = truths(samples)
    rng = np.random.default_rng([seed, int(round(share * 1000))])
    reps = [replicate(samples, share, rng, seed + b, cost, scores_truth, diffs_truth) for b in range(replicates)]
    covered = [c for r in reps for c in r["covered"]]
    diff_covered = [c for r in reps for c in r["diff_covered"]]
    ratios = [x for r in reps for x in r["ratios"]]
    return {"run": str(run_dir), "share": share, "replicates": replicates,
            "coverage": float(np.mean(covered)) if covered else math.nan, "intervals": len(covered),
            "no_interval": sum(r["no_interval"] for r in reps) / sum(r["cells"] for r in reps),
            "difference_coverage": float(np.mean(diff_covered)) if diff_covered else math.nan,
            "width_ratio": float(np.median(ratios)) if ratios else math.nan,
            "prediction_label_corr": _mean_defined([r["corr"] for r in reps]),
            "generated_share": sum(r["generated"] for r in reps) / sum(r["samples"] for r in reps),
            **{k: _mean_defined([r[k] for r in reps]) for k in ("rho_ppi", "rho_generation_only", "rho_split_half")},
            "likelihood_seconds": cost.likelihood, "generation_seconds": cost.generation}


def main(argv: list[str] | None = None) -> pd.DataFrame:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="finished full-generation ruler folders")
    parser.add_argument("--likelihood", nargs="*", type=Path, default=None, help="the same samples scored --likelihood-only, one per run, in order")
    parser.add_argument("--cost-ratio", type=float, default=None, help="without --likelihood: a generation's cost per unsettled sample in likelihood passes")
    parser.add_argument("--shares", default=",".join(map(str, SHARES)))
    parser.add_argument("--replicates", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=1, help="processes: (folder, share) rows run in parallel, each on its own seeded stream")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if (args.likelihood is None) == (args.cost_ratio is None) or (args.likelihood is not None and len(args.likelihood) != len(args.runs)):
        parser.error("give --likelihood (one run per full run) or --cost-ratio")
    shares = tuple(float(s) for s in args.shares.split(","))
    jobs = [(run, costs(run, population(run), args.likelihood[i] if args.likelihood else None, args.cost_ratio), share, args.replicates, args.seed)
            for i, run in enumerate(args.runs) for share in shares]
    if args.jobs > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        # spawned, never forked: a fork copies the caller's locks held by its other threads
        # (a test runner's, a thread pool's) and the child can wait on them for ever
        with ProcessPoolExecutor(args.jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            rows = list(pool.map(validate_share, *zip(*jobs)))
    else:
        rows = [validate_share(*job) for job in jobs]
    table = pd.DataFrame(rows)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "ppi_validation.json").write_text(json.dumps(rows, indent=2))
    (args.out / "ppi_validation.md").write_text(table.to_markdown(index=False, floatfmt=".3f") + "\n")
    print(table.to_markdown(index=False, floatfmt=".3f"))
    return table


if __name__ == "__main__":
    try:
        main()
    except UserError as exc:  # a folder that is not a (finished) run: one line, no traceback
        raise SystemExit(f"error: {exc}") from None
