"""Does `ruler --generate-share P --until verdict` reach full generation's verdicts, and at what
share of its compute? (docs/agreement.md, "Prediction-powered RULER").

Input: a finished full-generation `ruler` run (every sample generated or settled), the same
command run `--likelihood-only` (its seconds give a likelihood pass's cost; or `--cost-ratio`,
a generation's cost in likelihood passes), and an `--until
verdict` run of the same models, tasks, length and seed (its rounds draw samples 0, 1, ... of
the same sequence, so its samples are the full run's first ones). Per variant and task: the
full run's verdict on its generated scores (paired, the until run's δ) beside the until run's
(PPI++ difference, at its Bonferroni-corrected confidence), and the samples each used. Compute,
two ways: the runs' recorded seconds, and in measured units (likelihood passes times a pass's
seconds plus generations times a generation's seconds, from the full and likelihood-only runs),
which a shared machine's load moves less.

    python bench/ppi_until_check.py FULL UNTIL (--likelihood LIKELIHOOD | --cost-ratio R) [--out DIR]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).parent))
from ppi_until_simulation import full_paired  # noqa: E402
from ppi_validation import _seconds, compute_units, costs, population  # noqa: E402

from ctxeval.errors import UserError  # noqa: E402
from ctxeval.ruler.ppi import GENERATED  # noqa: E402
from ctxeval.results.base import read_result  # noqa: E402
from ctxeval.results.ruler import MEAN_TASK, read_samples  # noqa: E402


def compare(full_dir: Path, likelihood_dir: Path | None, until_dir: Path, cost_ratio: float | None = None) -> tuple[pd.DataFrame, dict]:
    until = read_result(until_dir)
    config = until.manifest.config["until"]
    samples = population(full_dir)  # read from its samples: a folder joined by join_ruler_runs.py has no result.json
    rows = []
    by_cell = full_paired(samples, config["delta"]).set_index(["model", "task", "length"])
    differences = until.ppi_differences[until.ppi_differences["task"] != MEAN_TASK].astype({"estimate": float, "low": float, "high": float})
    for r in differences.itertuples():
        theirs = by_cell.loc[(r.model, r.task, r.length)]
        rows.append({"variant": r.model, "task": r.task, "length": r.length, "full generation": theirs["score_outcome"],
                     "full: difference [95 %]": f"{theirs['score_diff']:+.1f} [{theirs['score_low']:+.1f}, {theirs['score_high']:+.1f}]",
                     "full samples": int(theirs["n"]), "--until verdict": r.outcome,
                     "until: difference [interval]": f"{r.estimate:+.1f} [{r.low:+.1f}, {r.high:+.1f}]", "until samples": int(r.samples),
                     "same": r.outcome == theirs["score_outcome"]})
    cost = costs(full_dir, samples, likelihood_dir, cost_ratio)
    drawn = read_samples(until_dir)
    units_full, units_until = compute_units(samples, cost), compute_units(drawn, cost)
    summary = {"seconds_full": _seconds(full_dir), "seconds_until": _seconds(until_dir), "units_full": units_full, "units_until": units_until,
               "likelihood_seconds": cost.likelihood, "generation_seconds": cost.generation, "samples_full": len(samples), "samples_until": len(drawn),
               "generated_full": int((samples["method"] == GENERATED).sum()), "generated_until": int((drawn["method"] == GENERATED).sum())}
    return pd.DataFrame(rows), summary


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("full", type=Path)
    parser.add_argument("until", type=Path)
    parser.add_argument("--likelihood", type=Path, default=None, help="the full run's samples scored --likelihood-only: its seconds give a pass's cost")
    parser.add_argument("--cost-ratio", type=float, default=None, help="instead: a generation's cost per unsettled sample in likelihood passes")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if (args.likelihood is None) == (args.cost_ratio is None):
        parser.error("give --likelihood or --cost-ratio")
    table, s = compare(args.full, args.likelihood, args.until, args.cost_ratio)
    text = "\n".join([table.to_markdown(index=False), "",
                      f"verdicts equal: {int(table['same'].sum())} of {len(table)}",
                      f"compute, recorded seconds: until {s['seconds_until']:.0f} s / full {s['seconds_full']:.0f} s = {s['seconds_until'] / s['seconds_full']:.2f}x",
                      f"compute, measured units ({s['likelihood_seconds']:.2f} a likelihood pass, {s['generation_seconds']:.2f} a generation): "
                      f"until {s['samples_until']} passes + {s['generated_until']} generations = {s['units_until']:.0f} / "
                      f"full {s['samples_full']} + {s['generated_full']} = {s['units_full']:.0f}: {s['units_until'] / s['units_full']:.2f}x", ""])
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "until_check.md").write_text(text)


if __name__ == "__main__":
    try:
        main()
    except UserError as exc:  # a folder that is not a (finished) run: one line, no traceback
        raise SystemExit(f"error: {exc}") from None
