"""How often does `ruler --generate-share P --until verdict` reach full generation's verdicts,
and at what share of its compute? Simulated from a full-generation RULER run (docs/agreement.md,
"Prediction-powered RULER").

The full run's samples are the population (as in `ppi_validation.py`). One simulated `--until`
run draws, per (task, length), a sequence of `--max-samples` samples with replacement, one
generation uniform each (the same for every model: the variants stay paired), and runs
`ctxeval.ruler.until.run_until` on it: round K takes samples (K-1)·S … K·S-1 of that
sequence for the open cells and the variants not yet closed, an unsettled sample generated where
its uniform falls below P and predicted otherwise, so the stopping rule, the per-look
confidence, the verdicts and the futility closing are `ruler`'s own. Per variant and task, the
simulated run's verdict (on every round's samples, at its per-look confidence) is set beside the
full run's (its generated scores, paired, 95 %); its compute is counted in measured units
(likelihood passes × a pass's cost + generations × a generation's) against the full run's. Its `Until` reads PPI++ in rounds under Bonferroni at every share, 1 included:
at a share of 1 `ruler` itself now reads a confidence sequence in batches, simulated by
bench/until_sequence_simulation.py, so this script's share-1 numbers are the rule before it.

    python bench/ppi_until_simulation.py FULL (--likelihood LIKELIHOOD | --cost-ratio R) \
        --share P --samples S --max-samples N [--delta 5] [--replicates 200] [--seed 0] [--out DIR]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).parent))
from ppi_validation import compute_units, costs, labelled_draw, population  # noqa: E402

from ctxeval.errors import UserError  # noqa: E402
from ctxeval.ruler.paired import PairedSettings, paired_table  # noqa: E402
from ctxeval.ruler.ppi import GENERATED, ppi_tables  # noqa: E402
from ctxeval.ruler.run import RulerConfig  # noqa: E402
from ctxeval.ruler.until import Until, run_until  # noqa: E402
from ctxeval.results.manifest import Manifest  # noqa: E402
from ctxeval.results.ruler import MEAN_TASK  # noqa: E402
from ctxeval.results.rows import bare  # noqa: E402
from ctxeval.ruler.generation import Generation  # noqa: E402

Round = dataclasses.make_dataclass("Round", ["samples", "manifest"])


def full_paired(samples: pd.DataFrame, delta: float) -> pd.DataFrame:
    """The full run's paired differences per (variant, task, length) as `ruler` reports them:
    its generated scores, paired (Tango's interval), 95 %, δ = `delta`."""
    paired = paired_table(samples, "generation_score", PairedSettings(score_delta=delta))
    return paired[paired["task"] != MEAN_TASK]


def full_verdicts(samples: pd.DataFrame, delta: float) -> pd.DataFrame:
    """The full run's verdict and difference per (variant, task, length)."""
    paired = full_paired(samples, delta)
    return paired[["model", "task", "length", "score_diff.outcome", "score_diff"]].rename(columns={"score_diff.outcome": "full", "score_diff": "full_diff"})


def draw_sequences(samples: pd.DataFrame, budget: int, rng: np.random.Generator) -> dict[tuple[str, int], tuple[np.ndarray, np.ndarray]]:
    """Per (task, length): `budget` sample ids drawn with replacement and one generation uniform each."""
    sequences = {}
    for (task, length), cell in samples.groupby(["task", "length"], sort=False):
        ids = np.array(sorted(set(cell["sample"])))
        sequences[(str(task), int(length))] = (rng.choice(ids, size=budget, replace=True), rng.random(budget))
    return sequences


def simulated_until(samples: pd.DataFrame, models: tuple[str, ...], share: float, until: Until, seed: int,
                    rng: np.random.Generator) -> tuple[pd.DataFrame, list[dict]]:
    """One `--until` run drawn from the population: every round's samples and the rounds."""
    sequences = draw_sequences(samples, until.max_samples, rng)
    by_model = {key: rows.set_index("sample") for key, rows in samples.groupby(["model", "task", "length"], sort=False)}

    def run_round(config: RulerConfig, out: Path) -> Round:
        parts = []
        for task, length in config.cells or [(t, n) for t in config.tasks for n in config.lengths]:
            ids, uniform = sequences[(task, length)]
            span = slice(config.first_sample, config.first_sample + config.samples)
            for model in config.models:
                if config.skip and (model, task, length) in config.skip:
                    continue
                parts.append(labelled_draw(by_model[(model, task, length)], ids[span], uniform[span], share, task, length, config.first_sample))
        return Round(pd.concat(parts, ignore_index=True), Manifest(command="ruler", run_id="simulated", config={}, models=[], status="complete"))

    tasks = tuple(dict.fromkeys(samples["task"]))
    lengths = tuple(int(n) for n in dict.fromkeys(samples["length"]))
    config = RulerConfig(tasks, lengths, until.round_size, seed, models, "population", generation=Generation("share", share=share))
    drawn, _, rounds = run_until(config, until, Path("unused"), run_round)
    return drawn, rounds


def until_verdicts(drawn: pd.DataFrame, seed: int, until: Until) -> pd.DataFrame:
    """The simulated run's verdict per (variant, task, length), as `ruler` reports it."""
    _, differences = ppi_tables(drawn, seed, confidence=until.confidence, delta=until.verdict_delta)
    differences = bare(differences[differences["task"] != MEAN_TASK], "diff")
    rows = [{"model": r.model, "task": r.task, "length": int(r.length), "until": r.outcome, "until_samples": int(r.samples)} for r in differences.itertuples()]
    return pd.DataFrame(rows)


def simulate(full_dir: Path, likelihood_dir: Path | None, cost_ratio: float | None, share: float, until: Until, replicates: int,
             seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per replicate and variant: both verdicts; per replicate: compute ratio and whether every verdict agreed)."""
    samples = population(full_dir)
    cost = costs(full_dir, samples, likelihood_dir, cost_ratio)
    units_full = compute_units(samples, cost)
    models = tuple(dict.fromkeys(samples["model"]))
    full = full_verdicts(samples, until.delta)
    rng = np.random.default_rng(seed)
    per_variant, per_run = [], []
    for replicate in range(replicates):
        drawn, rounds = simulated_until(samples, models, share, until, seed, rng)
        both = full.merge(until_verdicts(drawn, seed, until), on=["model", "task", "length"]).assign(replicate=replicate)
        both["same"] = both["full"] == both["until"]
        per_variant.append(both)
        per_run.append({"replicate": replicate, "compute": compute_units(drawn, cost) / units_full, "all_same": bool(both["same"].all()), "rounds": len(rounds),
                        "samples": len(drawn), "generated": int((drawn["method"] == GENERATED).sum())})
        print(f"\r{replicate + 1}/{replicates} simulated runs", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    return pd.concat(per_variant, ignore_index=True), pd.DataFrame(per_run)


def report(per_variant: pd.DataFrame, per_run: pd.DataFrame, share: float, until: Until) -> str:
    """The table per variant and the summary lines."""
    rows = []
    for (model, task, length), part in per_variant.groupby(["model", "task", "length"], sort=False):
        outcomes = part["until"].value_counts(normalize=True)
        rows.append({"variant": model, "task": task, "length": length, "full generation": part["full"].iloc[0],
                     "full difference": f"{part['full_diff'].iloc[0]:+.1f}", "until: same verdict": f"{part['same'].mean():.2f}",
                     "until verdicts": ", ".join(f"{o} {v:.2f}" for o, v in outcomes.items()), "until samples (median)": int(part["until_samples"].median())})
    compute = per_run["compute"]
    return "\n".join([
        f"{len(per_run)} simulated `--until verdict:{until.delta:g}` runs, share {share:g}, rounds of {until.round_size} up to {until.max_samples} samples "
        f"(each look at {until.confidence:.2%}):", "",
        pd.DataFrame(rows).to_markdown(index=False), "",
        f"every variant's verdict equal to full generation's: {per_run['all_same'].mean():.3f} of the runs",
        f"compute against full generation (measured units): median {compute.median():.2f}x, mean {compute.mean():.2f}x, "
        f"90th percentile {compute.quantile(0.9):.2f}x; rounds run, median {int(per_run['rounds'].median())}", ""])


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("full", type=Path)
    parser.add_argument("--likelihood", type=Path, default=None, help="the full run's samples scored --likelihood-only: its seconds give a pass's cost")
    parser.add_argument("--cost-ratio", type=float, default=None, help="instead: a generation's cost per unsettled sample in likelihood passes")
    parser.add_argument("--share", type=float, required=True)
    parser.add_argument("--samples", type=int, required=True, help="the round size, ruler's --samples")
    parser.add_argument("--max-samples", type=int, required=True)
    parser.add_argument("--delta", type=float, default=5.0)
    parser.add_argument("--replicates", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if (args.likelihood is None) == (args.cost_ratio is None):
        parser.error("give --likelihood or --cost-ratio")
    until = Until(None, args.delta, args.max_samples, args.samples)
    per_variant, per_run = simulate(args.full, args.likelihood, args.cost_ratio, args.share, until, args.replicates, args.seed)
    text = report(per_variant, per_run, args.share, until)
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "until_simulation.md").write_text(text)
        per_variant.to_csv(args.out / "until_simulation_variants.csv", index=False)
        per_run.to_csv(args.out / "until_simulation_runs.csv", index=False)
    return text


if __name__ == "__main__":
    try:
        main()
    except UserError as exc:  # a folder that is not a (finished) run: one line, no traceback
        raise SystemExit(f"error: {exc}") from None
