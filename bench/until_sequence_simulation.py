"""`ruler --generate-share 1 --until verdict`: the split rule (a 97.5 % confidence sequence at
the looks before the budget, full generation's 95 % interval at it) against the Bonferroni rule
in rounds, simulated on paired populations built from the measured ones (docs/agreement.md,
"Looks without rounds").

The three full-generation folders of the last validation (SmolLM2 135M at 1,024 and 4,096
tokens, Gemma 3 270M at 1,024) are gone; their published per-variant scores, settled counts and
measured cost of a generation (in likelihood passes) are rebuilt here as synthetic populations
of the same size: per task, the first model right on its published count of samples, each
variant right on a nested subset of those plus `reverse` samples the first model got wrong (a
variant that wins a few pairs, as real presses do), the settled samples among the right ones.
A fourth population has a variant within δ of the full cache. Each population is a sample
table in `ruler`'s record shape, so full generation's verdict is `ruler`'s own (Tango's paired
interval at 95 %, `ppi_until_simulation.full_paired`).

One simulated run draws, per (task, length), a sequence of N samples with replacement (paired
across models; N the fixed-n run's budget: the population's per-cell size, or `--budget N`, which
prices the same rates at another budget, as RULER's own 500 samples a cell). Its verdicts are compared
with full generation's on the same drawn samples (the fixed-n run of the budget on them: what a
user who ran that instead would have read) and with the population's (which the drawn samples'
own fixed-n verdict does not always reach: its column says how often it does). The split rule,
looking after every batch of S samples (`ctxeval.ruler.until`'s own functions:
`sequence_path` before the budget, `look_difference` at it, the verdict, the futility bound),
is evaluated on whole paths (one sequence per variant and cell, each look a prefix: the
sequence's bounds at t depend only on the first t values), which `--check K` verifies against
`run_until` itself on K runs. The rounds rule is `run_until` at a share of 1 below the
`sequence` switch: PPI++ tables at the Bonferroni confidence in rounds of 10
(bench/ppi_until_simulation.py's path), on fewer replicates (it refits the calibration at every
look). Per run: every variant's verdict equal; compute (likelihood passes + generations × the
measured cost ratio) against the fixed-n run's; and whether each interval the run stops on
(every variant's difference, every model's cell score) covers the population's value. A floor
row (`--oracle-replicates`) prices a floor for these budgets (an interval valid at every look is no narrower than the fixed-n one): each variant
stopped at the first batch whose fixed-n 95 % interval already gives the verdict full
generation reaches on the drawn samples, as if it were known in advance.

A planned row (`--planned-replicates`) prices the fixed-n run a user would budget who knew the
population in advance: per task the smallest n whose fixed-n verdicts are the population's in
95 % of draws (or as often as the budget's are, where those reach less), the design that the
literature's savings of sequential tests over fixed-n designs are measured against.

    python bench/until_sequence_simulation.py [--replicates 1000] [--old-replicates 200] [--oracle-replicates 200] [--planned-replicates 400] [--batch 2] [--check 3] [--budget N] [--seed 0] [--out DIR]
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).parent))
from ppi_until_simulation import full_paired  # noqa: E402
from ppi_validation import Costs, compute_units  # noqa: E402

from ctxeval.ruler.generation import Generation  # noqa: E402
from ctxeval.ruler.ppi import GENERATED, SETTLED, difference_verdict  # noqa: E402
from ctxeval.ruler.run import RulerConfig  # noqa: E402
from ctxeval.ruler.until import ROUNDS, SEQUENCE, Until, is_final, is_futile, look_difference, look_interval, run_until, sequence_path, sequence_tables  # noqa: E402
from ctxeval.results.manifest import Manifest  # noqa: E402
from ctxeval.results.ruler import MEAN_TASK  # noqa: E402
from ctxeval.results.rows import bare  # noqa: E402
from ctxeval.stats.defaults import DEFAULT_CONFIDENCE  # noqa: E402
from ctxeval.stats.paired_binary import paired_proportions  # noqa: E402

TASKS = ("niah_single_2", "niah_multikey_1")


@dataclasses.dataclass(frozen=True)
class Variant:
    name: str
    right: tuple[int, int]  # samples right per task (of `size`)
    settled: tuple[int, int]  # of those, settled by the likelihood pass
    reverse: tuple[int, int] = (0, 0)  # right where the first model is wrong


@dataclasses.dataclass(frozen=True)
class Population:
    name: str
    size: int  # samples per (task, length): the fixed-n run's
    length: int
    cost_ratio: float  # a generation's cost in likelihood passes (measured, docs/agreement.md)
    delta: float
    models: tuple[Variant, ...]


POPULATIONS = (
    # docs/agreement.md, "The validation on SmolLM2 135M at 1,024 tokens": 100/80, 100/77.5, 57.5/35, 57.5/35; settled 20, 24, 7, 7 of 80, none on niah_single_2
    Population("SmolLM2 135M, 1,024 tokens", 40, 1024, 0.79, 5.0, (
        Variant("full cache", (40, 32), (0, 20)), Variant("TOVA 512", (40, 31), (0, 24), (0, 1)),
        Variant("StreamingLLM 512", (23, 14), (0, 7), (0, 1)), Variant("max_context=512", (23, 14), (0, 7), (0, 1)))),
    # "... Gemma 3 270M at 1,024 tokens": 100/67.5, 62.5/12.5, 57.5/37.5, 57.5/30; settled 64, 29, 35, 32 of 80
    Population("Gemma 3 270M, 1,024 tokens", 40, 1024, 4.1, 5.0, (
        Variant("full cache", (40, 27), (40, 24)), Variant("TOVA 512", (25, 5), (25, 4), (0, 1)),
        Variant("StreamingLLM 512", (23, 15), (22, 13), (0, 1)), Variant("max_context=512", (23, 12), (22, 10), (0, 1)))),
    # "... SmolLM2 135M at 4,096 tokens": 100/65, 40/27.5; settled 26, 5 of 80
    Population("SmolLM2 135M, 4,096 tokens", 40, 4096, 0.78, 5.0, (
        Variant("full cache", (40, 26), (0, 26)), Variant("StreamingLLM 1024", (16, 11), (0, 5), (0, 1)))),
    # a variant within δ = 10 points of the full cache (one pair of 80 lost on niah_multikey_1), 80 samples a cell
    Population("within δ: SmolLM2-like, 80 samples, δ = 10", 80, 1024, 0.79, 10.0, (
        Variant("full cache", (80, 64), (0, 40)), Variant("near-lossless press", (80, 63), (0, 40)))),
)


def population_table(pop: Population) -> pd.DataFrame:
    """The population as `ruler` records it: one row per (model, task, sample)."""
    rows = []
    reference = pop.models[0]
    for k, task in enumerate(TASKS):
        ref_right = np.arange(pop.size) < reference.right[k]
        for v in pop.models:
            if v is reference:
                right = ref_right
            else:
                right = np.zeros(pop.size, bool)
                right[: v.right[k] - v.reverse[k]] = True  # nested in the first model's right samples
                right[reference.right[k]: reference.right[k] + v.reverse[k]] = True  # and a few it got wrong
            settled = np.zeros(pop.size, bool)
            settled[np.flatnonzero(right)[: v.settled[k]]] = True
            for s in range(pop.size):
                rows.append({"model": v.name, "task": task, "length": pop.length, "sample": s, "prompt_sha256": f"{task}/{s}",
                             "method": SETTLED if settled[s] else GENERATED, "generation_score": float(right[s]),
                             "likelihood_score": float(settled[s]), "mean_logprob": -0.2 if right[s] else -1.5, "first_rank": 1 if right[s] else 3})
    table = pd.DataFrame(rows)
    for v in pop.models:
        got = table[table["model"] == v.name].groupby("task", sort=False)["generation_score"].sum().to_numpy()
        assert tuple(int(g) for g in got) == v.right, (v, got)
    return table


def truths(table: pd.DataFrame) -> tuple[dict, dict]:
    """The population's values, shares: per (model, task) score; per (variant, task) paired difference."""
    models = list(dict.fromkeys(table["model"]))
    wide = table.pivot_table(index=["task", "sample"], columns="model", values="generation_score")
    scores = {(m, t): float(wide.loc[t, m].mean()) for m in models for t in TASKS}
    diffs = {(m, t): float((wide.loc[t, m] - wide.loc[t, models[0]]).mean()) for m in models[1:] for t in TASKS}
    return scores, diffs


def _arrays(table: pd.DataFrame) -> dict:
    """Per (model, task): scores and generated flags by sample id."""
    out = {}
    for (model, task), part in table.groupby(["model", "task"], sort=False):
        part = part.sort_values("sample")
        out[(model, task)] = (part["generation_score"].to_numpy(float), (part["method"] == GENERATED).to_numpy())
    return out


def draw(pop: Population, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """One run's samples: per task, n sample ids drawn with replacement, the same for every model
    (paired)."""
    return {t: rng.integers(0, pop.size, n) for t in TASKS}


def look_sizes(until: Until) -> list[int]:
    """The sample counts at which a run looks: after every batch, the budget last."""
    return [min((k + 1) * until.round_size, until.max_samples) for k in range(until.rounds)]


def fixed_outcome(reference: np.ndarray, variant: np.ndarray, delta: float) -> str:
    """Full generation's verdict on these paired samples: Tango's interval at 95 %, as `ruler.paired`."""
    return difference_verdict(paired_proportions(reference, variant, DEFAULT_CONFIDENCE), delta).outcome


def stop_units(pop: Population, arrays: dict, task: str, drawn: np.ndarray, stop_at: dict[str, int]) -> float:
    """What a task's models cost, each stopped at its sample count: a likelihood pass per sample
    and a generation per unsettled one."""
    return sum(n + pop.cost_ratio * float(arrays[(model, task)][1][drawn[:n]].sum()) for model, n in stop_at.items())


def sequence_run(pop: Population, arrays: dict, ids: dict, until: Until, full: dict) -> dict:
    """One run of the new rule on whole paths: per variant and task its stop, verdict and
    interval, and full generation's verdict on the same drawn samples (the fixed-n run of them)."""
    models = [v.name for v in pop.models]
    looks = look_sizes(until)
    result = {"stops": {}, "verdicts": {}, "fixed": {}, "covered": [], "units": 0.0}
    for task in TASKS:
        drawn = ids[task]
        ref_y, _ = arrays[(models[0], task)]
        stop_at = {}
        for model in models[1:]:
            y, _ = arrays[(model, task)]
            d = y[drawn] - ref_y[drawn]
            path = sequence_path(d, -1.0, 1.0, until, until.early_confidence)  # a look at n reads the first n values only
            for n in looks:
                share = path[n - 1] if n < until.max_samples else look_difference(ref_y[drawn], y[drawn], until)
                interval = share.scaled(100)
                decided = difference_verdict(share, until.verdict_delta)
                if is_final(decided.outcome, interval.low, interval.high, interval.se, n, until):
                    break
                if is_futile(interval.estimate, interval.low, interval.high, interval.se, n, until):
                    break
            stop_at[model] = n
            result["verdicts"][(model, task)] = decided.outcome
            result["covered"].append(interval.low <= 100 * full["diffs"][(model, task)] <= interval.high)
        stop_at[models[0]] = max(stop_at.values())
        result["units"] += stop_units(pop, arrays, task, drawn, stop_at)
        for model, n in stop_at.items():
            cell = look_interval(arrays[(model, task)][0][drawn[:n]], until).scaled(100)
            result["covered"].append(cell.low <= 100 * full["scores"][(model, task)] <= cell.high)
        result["stops"][task] = stop_at
    return result | {"fixed": fixed_verdicts(pop, arrays, ids)}


def fixed_verdicts(pop: Population, arrays: dict, ids: dict) -> dict:
    """Full generation's verdict per (variant, task) on the run's drawn samples: the fixed-n run
    of the budget on the same samples (Tango's paired interval at 95 %, as `ruler.paired`)."""
    models = [v.name for v in pop.models]
    out = {}
    for task in TASKS:
        ref_y = arrays[(models[0], task)][0][ids[task]]
        for model in models[1:]:
            out[(model, task)] = fixed_outcome(ref_y, arrays[(model, task)][0][ids[task]], pop.delta)
    return out


def oracle_run(pop: Population, arrays: dict, ids: dict, until: Until) -> dict:
    """A floor, not a rule: each variant stops at the first batch whose fixed-n 95 % interval
    (Tango's, on the samples so far) already gives full generation's verdict on the drawn
    samples, as if that verdict were known in advance (read at many looks, these intervals hold
    no coverage). The first model runs to its slowest variant, as in the rules."""
    models = [v.name for v in pop.models]
    fixed = fixed_verdicts(pop, arrays, ids)
    looks = look_sizes(until)
    units = 0.0
    for task in TASKS:
        drawn = ids[task]
        ref_y = arrays[(models[0], task)][0][drawn]
        stop_at = {}
        for model in models[1:]:
            y = arrays[(model, task)][0][drawn]
            stop_at[model] = next(n for n in looks if n == until.max_samples or fixed_outcome(ref_y[:n], y[:n], pop.delta) == fixed[(model, task)])
        stop_at[models[0]] = max(stop_at.values())
        units += stop_units(pop, arrays, task, drawn, stop_at)
    return {"units": units}


def planned_fixed_n(pop: Population, table: pd.DataFrame, arrays: dict, full_verdict: dict, until: Until, rng: np.random.Generator, replicates: int) -> dict:
    """A comparator, not a rule: the fixed-n run a user would plan who knew the population in
    advance. Per task, the smallest n (in batches) at which the fixed-n verdicts of every variant
    equal the population's as often as the budget's own do (at most 95 % of runs: a design
    powered to 95 %), on `replicates` draws of n samples; its compute is n / N of that task's."""
    models = [v.name for v in pop.models]
    looks = look_sizes(until)
    units, per_task = 0.0, {}
    for task in TASKS:
        ref = arrays[(models[0], task)][0]

        def rate(n: int) -> float:
            hits = 0
            for _ in range(replicates):
                ids = rng.integers(0, pop.size, n)
                hits += all(fixed_outcome(ref[ids], arrays[(m, task)][0][ids], pop.delta) == full_verdict[(m, task)] for m in models[1:])
            return hits / replicates

        target = min(DEFAULT_CONFIDENCE, rate(until.max_samples))
        n = next(n for n in looks if n == until.max_samples or rate(n) >= target)
        per_task[task] = n
        units += n / pop.size * full_units(table[table["task"] == task], pop)  # n draws at the population's mean cost
    return {"units": units, "samples": per_task}


Round = dataclasses.make_dataclass("Round", ["samples", "manifest"])


def run_until_on(table: pd.DataFrame, pop: Population, ids: dict, until: Until) -> tuple[pd.DataFrame, list[dict]]:
    """`run_until` itself on the drawn sequences (every unsettled sample generated)."""
    by_model = {key: rows.set_index("sample") for key, rows in table.groupby(["model", "task"], sort=False)}

    def run_round(config: RulerConfig, out: Path) -> Round:
        parts = []
        for task, length in config.cells or [(t, n) for t in config.tasks for n in config.lengths]:
            span = ids[task][config.first_sample: config.first_sample + config.samples]
            for model in config.models:
                if config.skip and (model, task, length) in config.skip:
                    continue
                picked = by_model[(model, task)].loc[span].reset_index()
                k = np.arange(config.first_sample, config.first_sample + len(span))
                parts.append(picked.assign(sample=k, prompt_sha256=[f"{task}/{length}/{i}" for i in k]))
        return Round(pd.concat(parts, ignore_index=True), Manifest(command="ruler", run_id="simulated", config={}, models=[], status="complete"))

    config = RulerConfig(TASKS, (pop.length,), until.round_size, 0, tuple(v.name for v in pop.models), "population", generation=Generation("share", share=1.0))
    drawn, _, rounds = run_until(config, until, Path("unused"), run_round)
    return drawn, rounds


def old_run(table: pd.DataFrame, pop: Population, arrays: dict, ids: dict, until: Until, full: dict) -> dict:
    """One run of the rounds rule: `run_until` with PPI++ in rounds under Bonferroni."""
    from ctxeval.ruler.ppi import ppi_tables

    drawn, _ = run_until_on(table, pop, ids, until)
    scores, differences = ppi_tables(drawn, 0, confidence=until.confidence, delta=until.verdict_delta)
    differences = bare(differences[differences["task"] != MEAN_TASK], "diff")
    scores = bare(scores[scores["task"] != MEAN_TASK], "score")
    covered = [_covers(r, 100 * full["diffs"][(r.model, r.task)]) for r in differences.itertuples()]
    covered += [_covers(r, 100 * full["scores"][(r.model, r.task)]) for r in scores.itertuples()]
    units = full_units(drawn, pop)
    return {"verdicts": {(r.model, r.task): r.outcome for r in differences.itertuples()}, "covered": covered, "units": units,
            "fixed": fixed_verdicts(pop, arrays, ids)}


def _covers(row: object, truth: float) -> float:
    """1 where the interval holds the value, 0 where it misses, NaN where there is none (a PPI++
    cell with fewer than 10 generated: the reference's cells, half settled, at 10 or 20 samples)."""
    return math.nan if pd.isna(row.low) or pd.isna(row.high) else float(row.low <= truth <= row.high)


def full_units(table: pd.DataFrame, pop: Population) -> float:
    """What a run's samples cost, in likelihood passes (ppi_validation's units)."""
    return compute_units(table, Costs(1.0, pop.cost_ratio))


def check_against_run_until(table: pd.DataFrame, pop: Population, arrays: dict, until: Until, full: dict, rng: np.random.Generator, runs: int) -> None:
    """The whole-path evaluation stops where `run_until` does, with the same verdicts."""
    for _ in range(runs):
        ids = draw(pop, until.max_samples, rng)
        fast = sequence_run(pop, arrays, ids, until, full)
        drawn, _ = run_until_on(table, pop, ids, until)
        _, differences = sequence_tables(drawn, until)
        for r in bare(differences[differences["task"] != MEAN_TASK], "diff").itertuples():
            assert r.outcome == fast["verdicts"][(r.model, r.task)], (pop.name, r.model, r.task, r.outcome, fast["verdicts"])
            assert int(r.samples) == fast["stops"][r.task][r.model], (pop.name, r.model, r.task, int(r.samples), fast["stops"])
        ran = drawn.groupby(["model", "task"]).size()
        for task, stops in fast["stops"].items():
            for model, n in stops.items():
                assert int(ran[(model, task)]) == n, (pop.name, model, task, int(ran[(model, task)]), n)


def summarise(pop: Population, runs: list[dict], full_verdict: dict, units: float, rule: str) -> dict:
    same = [all(r["verdicts"][k] == r["fixed"][k] for k in full_verdict) for r in runs]
    as_population = [all(r["verdicts"][k] == v for k, v in full_verdict.items()) for r in runs]
    ceiling = [all(r["fixed"][k] == v for k, v in full_verdict.items()) for r in runs]
    ratio = np.array([r["units"] / units for r in runs])
    cover = np.array([r["covered"] for r in runs], dtype=float)  # runs × intervals (same order every run), NaN where none
    shown = ~np.isnan(cover)
    return {"population": pop.name, "rule": rule, "runs": len(runs), "every verdict as full generation's on the same samples": f"{np.mean(same):.3f}",
            "... as the population's": f"{np.mean(as_population):.3f}", "full generation on the drawn samples as the population's": f"{np.mean(ceiling):.3f}",
            "compute, median": f"{np.median(ratio):.2f}x", "compute, 90th pct": f"{np.quantile(ratio, 0.9):.2f}x",
            "runs at <= 0.35x": f"{np.mean(ratio <= 0.35):.1%}", "min coverage (intervals stopped on)": f"{np.nanmean(cover, axis=0).min():.3f}",
            "intervals missing": f"{1 - shown.mean():.1%}"}


def per_variant(pop: Population, runs: list[dict], full_verdict: dict, rule: str) -> list[dict]:
    rows = []
    for (model, task), truth in full_verdict.items():
        got = pd.Series([r["verdicts"][(model, task)] for r in runs]).value_counts(normalize=True)
        same_draws = np.mean([r["verdicts"][(model, task)] == r["fixed"][(model, task)] for r in runs])
        stops = [r["stops"][task][model] for r in runs] if "stops" in runs[0] else []
        rows.append({"population": pop.name, "rule": rule, "variant": model, "task": task, "population's verdict": truth,
                     "as full generation on the same samples": f"{same_draws:.3f}", "as the population's": f"{got.get(truth, 0.0):.3f}", "verdicts": ", ".join(f"{o} {v:.2f}" for o, v in got.items()),
                     "samples at stop, median": int(np.median(stops)) if stops else ""})
    return rows


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=1000)
    parser.add_argument("--old-replicates", type=int, default=200, help="runs of the rounds rule (PPI++ refitted at every look: slower)")
    parser.add_argument("--batch", type=int, default=2, help="the new rule's batch (ruler's --samples)")
    parser.add_argument("--old-round", type=int, default=10, help="the rounds rule's round (ruler's --samples)")
    parser.add_argument("--oracle-replicates", type=int, default=200, help="runs of the floor (a fixed-n interval at every look, told the verdict to reach)")
    parser.add_argument("--planned-replicates", type=int, default=400, help="draws per sample count for the planned fixed n (0: no such row)")
    parser.add_argument("--check", type=int, default=3, help="runs per population compared with run_until itself")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", default=None, help="populations whose name contains this")
    parser.add_argument("--budget", type=int, default=None, help="samples per cell of the fixed-n run (default: each population's size), drawn with replacement")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    summary, variants = [], []
    started = time.time()
    for pop in POPULATIONS:
        if args.only and args.only not in pop.name:
            continue
        table = population_table(pop)
        scores, diffs = truths(table)
        full = {"scores": scores, "diffs": diffs}
        paired = full_paired(table, pop.delta)
        full_verdict = {(r["model"], r["task"]): r["score_diff.outcome"] for _, r in paired.iterrows()}
        arrays = _arrays(table)
        budget = args.budget or pop.size
        if args.budget:
            pop = dataclasses.replace(pop, name=f"{pop.name}; budget {budget} a cell")
        units = full_units(table, pop) * budget / pop.size  # the fixed-n run's expected cost: budget draws at the population's mean
        new = Until(None, pop.delta, budget, args.batch, SEQUENCE)
        old = Until(None, pop.delta, budget, args.old_round, ROUNDS)
        rng = np.random.default_rng(args.seed)
        check_against_run_until(table, pop, arrays, new, full, np.random.default_rng(args.seed + 1), args.check)
        runs_new = [sequence_run(pop, arrays, draw(pop, budget, rng), new, full) for _ in range(args.replicates)]
        summary.append(summarise(pop, runs_new, full_verdict, units, f"split: 97.5 % sequence, then full generation's interval; batches of {args.batch}"))
        variants += per_variant(pop, runs_new, full_verdict, "sequence")
        if args.oracle_replicates:
            rng = np.random.default_rng(args.seed)  # the same draws
            ratios = [oracle_run(pop, arrays, draw(pop, budget, rng), new)["units"] / units for _ in range(args.oracle_replicates)]
            summary.append({"population": pop.name, "rule": "floor: each variant stops once a fixed-n interval gives full generation's verdict (no coverage)",
                            "runs": len(ratios), "compute, median": f"{np.median(ratios):.2f}x", "compute, 90th pct": f"{np.quantile(ratios, 0.9):.2f}x",
                            "runs at <= 0.35x": f"{np.mean(np.array(ratios) <= 0.35):.1%}"})
        if args.planned_replicates:
            planned = planned_fixed_n(pop, table, arrays, full_verdict, new, np.random.default_rng(args.seed), args.planned_replicates)
            summary.append({"population": pop.name, "rule": "planned fixed n, told the population: per task the smallest n whose verdicts are the population's as often as the budget's (<= 95 %): "
                            + ", ".join(f"{n} on {t}" for t, n in planned["samples"].items()),
                            "runs": args.planned_replicates, "compute, median": f"{planned['units'] / units:.2f}x"})
        if args.old_replicates:
            rng = np.random.default_rng(args.seed)  # the same draws as the new rule's first runs
            runs_old = [old_run(table, pop, arrays, draw(pop, budget, rng), old, full) for _ in range(args.old_replicates)]
            summary.append(summarise(pop, runs_old, full_verdict, units, f"rounds of {args.old_round}, Bonferroni (the rule below a share of 1)"))
            variants += per_variant(pop, runs_old, full_verdict, "Bonferroni")
        print(f"{pop.name}: done at {time.time() - started:.0f} s ({time.process_time():.0f} s of CPU)", file=sys.stderr, flush=True)
        text = "\n".join([pd.DataFrame(summary).to_markdown(index=False), "", pd.DataFrame(variants).to_markdown(index=False), ""])
        if args.out:
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / "until_sequence_simulation.md").write_text(text)
    print(text)
    return text


if __name__ == "__main__":
    main()
