"""`ruler --generate-share P --until TARGET --max-samples N`: add samples in rounds (at P = 1,
batches read by a confidence sequence) until each (task, length) is answered or the budget is
spent.

A round is an ordinary `ruler --generate-share` run of `--samples` new samples per open (task,
length) for every model (folder `round-K` of the run's folder, resumable as any run; round K
holds samples (K-1)·S … K·S-1, so no round repeats a sample and every model scores the same
ones). After each round the tables (PPI++, or at P = 1 the confidence sequences) are computed
on all rounds' samples so far, and a (task, length) closes when it is answered:

- a half-width target (points): every model's score interval there is at most that wide on
  each side;
- `verdict` (or `verdict:D`, δ = D points, default the run's `--delta`): every variant's paired difference
  against the first model has a final verdict (within δ, hurts, gains; stats/verdict.py), not
  "too few samples to tell": one that the look at the budget would reach too, except by chance
  (`is_final`). *Within δ* is final; *hurts* or *gains* is final where the interval lies wholly
  beyond δ − h, h the half-width the budget's interval would have, so the budget could not put
  it within δ (an interval that excludes 0 but reaches nearer 0, a loss the budget might call
  within δ, is sampled on). A variant is closed at the look that gives it a final verdict: later
  rounds leave it out there (a press that clearly hurts stops costing samples while a close
  one is still sampled), and the first model runs until the (task, length) is answered. Its
  difference is computed on the samples both ran. A variant the budget is unlikely to decide is
  closed too (futility, by stochastic curtailment): if the true difference were today's
  estimate, the look at the budget would give a verdict with a chance below 10 % (5 % at share 1). It ends "too
  few samples to tell", which claims nothing, so closing it early costs no coverage, only the
  chance that later samples would have moved it into a verdict.

How the looks keep their coverage depends on the share:

- `--generate-share 1` (looks "sequence"): every sample is labelled (settled or generated), so
  a cell's scores are bounded values in [0, 1] and a variant's paired differences values in
  [−1, 1]. The looks split α between two kinds (Haybittle and Peto's design: a strict bound
  early, the fixed-n test at the end). Early looks, after every batch of `--samples` (e.g. 2)
  before the budget, read a betting confidence sequence (stats/confseq.py; Waudby-Smith and
  Ramdas 2024) at 1 − EARLY_ALPHA (97.5 %), valid at every sample count at once, its bets
  tuned for a quarter of the budget, where early stops happen: a variant stops at the first
  batch whose sequence decides it. The look at the budget reads full generation's own interval
  at 95 % on the same samples (Tango's for a difference, the pseudo-label t interval for a
  score: `ruler.paired`, `ruler.report`), so a variant the early looks leave open ends with
  exactly the verdict the fixed-n run of the budget gives on those samples. The chance that
  the interval a run stops on misses is at most 2.5 % + 5 % (a union bound: the sequence
  misses at some look, or the last interval misses); simulated on the populations of
  bench/until_sequence_simulation.py it covered at least 0.96 at 40 samples a cell and 0.927
  at 500, within that bound (docs/agreement.md). Spending
  5 % at the end rather than 2.5 % buys agreement with full generation: a last look at 97.5 %
  would undo verdicts the 95 % run gives. The mean over tasks (reported, not stopped on) reads
  each task's sequence at 1 − 0.05 / T (T tasks) and averages the bounds (a union bound: 95 %
  at every look), and at the budget reads full generation's (MOVER; the pooled pairs). Futility asks whether the last look, Tango's z·se
  wide, would decide (conditional power below SEQUENCE_FUTILITY_POWER), from a quarter of the
  budget on.
- a share below 1 (looks "rounds"): the PPI++ interval, whose calibration is refitted on every
  look (not a predictable bet, so no betting sequence applies); Bonferroni over the looks: with
  at most R = ⌈N / S⌉ rounds, every look's interval is at confidence 1 − 0.05 / R, so the chance
  that any look's interval misses, the one the run stops on included, is at most 0.05 whatever
  the rule stops on (simulated in tests/test_ruler_until.py). The run's folder then holds every round's samples
and the result computed on them at that confidence; which rounds ran, and which cells each
closed, follow from the records alone, so a resumed run retraces an uninterrupted one.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from ctxeval.config import config_id
from ctxeval.errors import FieldError
from ctxeval.ruler.generation import Generation
from ctxeval.ruler.paired import DEFAULT_SCORE_DELTA
from ctxeval.ruler.ppi import GENERATED, SETTLED, difference_verdict, ppi_tables
from ctxeval.ruler.merge import write_run
from ctxeval.ruler.run import RulerConfig
from ctxeval.results.manifest import Manifest
from ctxeval.results.ruler import MEAN_TASK, RulerResult
from ctxeval.stats.defaults import DEFAULT_CONFIDENCE
from ctxeval.stats.ppi import MIN_GENERATED
from ctxeval.stats.confseq import betting_bounds, regularised_sd
from ctxeval.stats.interval import Interval, quantile
from ctxeval.stats.paired_binary import paired_proportions
from ctxeval.stats.pseudo_labels import mover_mean, pseudo_label_interval
from ctxeval.stats.sequential import conditional_power
from ctxeval.stats.verdict import UNDECIDED, WITHIN

VERDICT = "verdict"
ROUNDS, SEQUENCE = "rounds", "sequence"  # how the looks keep their coverage: Bonferroni over rounds (PPI++), or a confidence sequence (share 1)
SEQUENCE_METHOD = "betting confidence sequence (Waudby-Smith & Ramdas 2024)"
FUTILITY_FROM = 0.25  # a confidence sequence's futility looks start at this share of the budget (the first of today's rounds of 10 in 40): its spread rests on a pseudo-value at each end until then
FUTILITY_POWER = 0.10  # close a variant the budget decides with less than this chance (group-sequential futility's usual bound)
SEQUENCE_FUTILITY_POWER = 0.05  # at share 1: lower, since a variant closed as futile ends undecided where full generation's last look might decide it
EARLY_ALPHA = (1 - DEFAULT_CONFIDENCE) / 2  # at share 1: what the early looks' confidence sequence spends (2.5 %); the look at the budget spends DEFAULT_CONFIDENCE's own 5 %
EARLY_HORIZON = 0.25  # at share 1: the share of the budget the sequence's bets are tuned for (its early looks; the last look reads no sequence)

Cell = tuple[str, int]
Variant = tuple[str, str, int]  # (model, task, length)
RunRound = Callable[[RulerConfig, Path], RulerResult]


@dataclass(frozen=True)
class Until:
    """When a (task, length) is answered, and the budget."""

    half_width: float | None  # points; None in verdict mode
    delta: float | None  # verdict mode's δ in points
    max_samples: int
    round_size: int
    looks: str = ROUNDS  # SEQUENCE at --generate-share 1
    cells: int = 1  # the (variant, task, length) verdicts (a half-width target: the (model, task, length) scores) the run stops on
    simultaneous: bool = False  # --until-simultaneous: the error split over the cells (Bonferroni), so all hold at once

    @property
    def rounds(self) -> int:
        return math.ceil(self.max_samples / self.round_size)

    @property
    def family(self) -> int:
        """How many cells the run's error is split over: all of them where simultaneous, else 1
        (each verdict at the level on its own)."""
        return self.cells if self.simultaneous else 1

    @property
    def confidence(self) -> float:
        """Each look's confidence in rounds (Bonferroni over them); at share 1, the look at the
        budget's (full generation's own); either split over the `family`."""
        alpha = (1 - DEFAULT_CONFIDENCE) / self.family
        return 1 - alpha if self.looks == SEQUENCE else 1 - alpha / self.rounds

    @property
    def early_confidence(self) -> float:
        """The confidence of the looks before the budget: at share 1 the sequence's 1 − EARLY_ALPHA
        (split over the `family`)."""
        return 1 - EARLY_ALPHA / self.family if self.looks == SEQUENCE else self.confidence

    @property
    def horizon(self) -> int:
        """The sample count the sequence's bets are tuned for."""
        return max(1, round(self.max_samples * EARLY_HORIZON))

    @property
    def verdict_delta(self) -> float:
        """The δ its looks' verdicts are read at (a half-width target reads the run's default)."""
        return DEFAULT_SCORE_DELTA if self.delta is None else self.delta

    def as_dict(self) -> dict:
        return asdict(self) | {"rounds": self.rounds, "confidence": self.confidence, "early_confidence": self.early_confidence}

    @classmethod
    def from_config(cls, config: dict) -> Until | None:
        """The target a run's manifest config records; None for a run without `--until`."""
        until = config.get("until")
        return None if until is None else cls(until["half_width"], until["delta"], int(until["max_samples"]), int(until["round_size"]),
                                              until.get("looks", ROUNDS), int(until.get("cells", 1)), bool(until.get("simultaneous", False)))

    @classmethod
    def of(cls, target: str, max_samples: int, round_size: int, delta: float, generation: Generation, models: int, cells_per_model: int = 1,
           simultaneous: bool = False) -> Until:
        """The target `--until` asks for with its budget; a FieldError where they cannot be met
        (`delta`: the run's --delta; `models`: how many distinct models the run compares;
        `cells_per_model`: its tasks × lengths; `simultaneous`: the level for all verdicts at once)."""
        half_width, verdict_delta = parse_until(target, delta)
        if generation.mode != "share":
            raise FieldError("until", "needs {generate_share} (its rounds are prediction-powered)"
                             + (": {generate_count} is a count per run" if generation.mode == "count" else ""))
        share = float(generation.share or 0.0)
        if max_samples < round_size:
            raise FieldError("max_samples", f"must be at least {{samples}} ({round_size}), the size of a round")
        if max_samples * share < MIN_GENERATED:
            raise FieldError("max_samples", f"at {{generate_share}} {share:g} draws about {max_samples * share:.0f} generations "
                                            f"per task and length, fewer than the {MIN_GENERATED} an interval needs where a sample is unsettled, "
                                            f"so {{until}} could not be met: give at least {math.ceil(MIN_GENERATED / share)} samples or a larger share")
        if half_width is None and models < 2:
            raise FieldError("until", "verdict compares variants against the first {models}: give at least two")
        cells = (models if half_width is not None else models - 1) * cells_per_model
        return cls(half_width, verdict_delta, max_samples, round_size, SEQUENCE if share == 1 else ROUNDS, cells, simultaneous)


@dataclass(frozen=True)
class UntilConfig:
    """The whole run's identity: the rounds' settings (all samples up to the budget) and the target."""

    config: RulerConfig
    until: Until

    def as_dict(self) -> dict:
        return replace(self.config, samples=self.until.max_samples).as_dict() | {"until": self.until.as_dict()}

    def run_id(self) -> str:
        return config_id(self.as_dict())


def parse_until(value: str, delta: float) -> tuple[float | None, float | None]:
    """(half-width, δ) of `--until`: a number of points, `verdict` (δ = `delta`, the run's
    --delta) or `verdict:D`; ValueError otherwise."""
    text = value.strip()
    if text == VERDICT:
        return None, delta
    if text.startswith(VERDICT + ":"):
        delta = float(text[len(VERDICT) + 1 :])
        if not delta > 0:
            raise ValueError("δ must be positive")
        return None, delta
    width = float(text)
    if not width > 0:
        raise ValueError("the half-width must be positive")
    return width, None


def look_tables(samples: pd.DataFrame, seed: int, until: Until) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(scores, differences) of a look, in ppi_tables' shape: the confidence sequence's at share 1,
    else PPI++ at the per-look confidence (both in percent, verdicts at the run's δ)."""
    if until.looks == SEQUENCE:
        return sequence_tables(samples, until)
    return ppi_tables(samples, seed, confidence=until.confidence, delta=until.verdict_delta)


def sequence_interval(values: np.ndarray, low: float, high: float, until: Until, confidence: float) -> Interval:
    """The confidence sequence's interval after `values` (in sample order, shares)."""
    return sequence_path(values, low, high, until, confidence)[-1]


def sequence_path(values: np.ndarray, low: float, high: float, until: Until, confidence: float) -> list[Interval]:
    """The confidence sequence's interval after each of `values` (shares; a look at t reads entry
    t − 1), its se from the bets' regularised spread; bets tuned for `until.horizon`."""
    lows, highs = betting_bounds(values, confidence, low, high, horizon=until.horizon)
    n = np.arange(1, len(values) + 1)
    means, ses = np.cumsum(values) / n, regularised_sd(values, low, high) / np.sqrt(n)
    return [Interval(float(m), float(lo), float(hi), float(se), int(k), confidence, SEQUENCE_METHOD) for m, lo, hi, se, k in zip(means, lows, highs, ses, n)]


def _mean_of(intervals: list[Interval], confidence: float) -> Interval:
    """The mean over tasks: estimates and bounds averaged (each task's at 1 − α / T: a union bound)."""
    k = len(intervals)
    return Interval(sum(i.estimate for i in intervals) / k, sum(i.low for i in intervals) / k, sum(i.high for i in intervals) / k,
                    math.sqrt(sum(i.se**2 for i in intervals)) / k, min(i.n for i in intervals), confidence, SEQUENCE_METHOD)


def _table_row(model: str, task: str, length: int, share: Interval, labels: pd.DataFrame) -> dict:
    """A row of a look's scores, in ppi_tables' shape: the interval `score` (percent) and how its samples were labelled."""
    counts = {"exact": int((labels["method"] == SETTLED).sum()), "generated": int((labels["method"] == GENERATED).sum()), "predicted": 0}
    return {"model": model, "task": task, "length": length, **share.scaled(100).columns("score"), "samples": share.n, **counts, "df": math.nan}


def sequence_tables(samples: pd.DataFrame, until: Until) -> tuple[pd.DataFrame, pd.DataFrame]:
    """ppi_tables' (scores, differences) of a share-1 run's look: per model, task and length its
    generated scores (in [0, 1], in sample order), per variant its paired differences against
    the first model (in [−1, 1], on the samples both ran), and the means over tasks per length.
    Before the budget each reads the confidence sequence at `until.early_confidence` (a mean
    over tasks: each task's at 1 − 0.05 / T, bounds averaged, a union bound that holds the mean
    at 95 % at every look); at the budget, full generation's own intervals at `until.confidence`."""
    if samples["generation_score"].isna().any():
        raise ValueError("a confidence sequence needs every sample labelled (a generate share of 1)")
    tasks = list(dict.fromkeys(samples["task"]))
    joint = 1 - (1 - until.confidence) / len(tasks)  # each task's sequence at 1 − 0.05 / T: the bounds' mean holds the mean at 95 % at every look
    ordered = samples.sort_values("sample", kind="stable")
    rows: list[dict] = []
    for (model, length), part in ordered.groupby(["model", "length"], sort=False):
        shown, joint_intervals = [], []
        for task, cell in part.groupby("task", sort=False):
            y = cell["generation_score"].to_numpy(float)
            interval = look_interval(y, until)
            rows.append(_table_row(str(model), str(task), int(length), interval, cell))
            shown.append(interval)
            joint_intervals.append(sequence_interval(y, 0.0, 1.0, until, joint))
        if len(shown) > 1:
            mean = last_look_mean(shown, until) if all(i.n >= until.max_samples for i in shown) else _mean_of(joint_intervals, until.confidence)
            rows.append(_table_row(str(model), MEAN_TASK, int(length), mean, part))
    models = list(dict.fromkeys(samples["model"]))
    diffs: list[dict] = []
    keys = ["task", "length", "sample"]
    reference = ordered[ordered["model"] == models[0]]
    for model in models[1:]:
        pairs = ordered[ordered["model"] == model].merge(reference, on=keys, suffixes=("_v", "_r")).sort_values("sample", kind="stable")
        for length, at in pairs.groupby("length", sort=False):
            joint_intervals, paired_parts = [], []
            for task, part in at.groupby("task", sort=False):
                if not (part["prompt_sha256_v"] == part["prompt_sha256_r"]).all():
                    continue
                y_v, y_r = part["generation_score_v"].to_numpy(float), part["generation_score_r"].to_numpy(float)
                diffs.append(_difference_row(str(model), str(task), int(length), look_difference(y_r, y_v, until), models[0], until))
                joint_intervals.append(sequence_interval(y_v - y_r, -1.0, 1.0, until, joint))
                paired_parts.append(part)
            if len(joint_intervals) > 1 and len(joint_intervals) == len(tasks):
                pooled = pd.concat(paired_parts)
                mean = (paired_proportions(pooled["generation_score_r"].to_numpy(float), pooled["generation_score_v"].to_numpy(float), until.confidence)
                        if all(len(p) >= until.max_samples for p in paired_parts) else _mean_of(joint_intervals, until.confidence))
                diffs.append(_difference_row(str(model), MEAN_TASK, int(length), mean, models[0], until))
    return pd.DataFrame(rows), pd.DataFrame(diffs)


def look_interval(scores: np.ndarray, until: Until) -> Interval:
    """A cell's score interval at a share-1 look: the sequence's before the budget, full
    generation's at it (the pseudo-label t interval, as `ruler.report.cell_table` gives)."""
    if len(scores) >= until.max_samples:
        return pseudo_label_interval(scores, until.confidence)
    return sequence_interval(scores, 0.0, 1.0, until, until.early_confidence)


def look_difference(reference: np.ndarray, variant: np.ndarray, until: Until) -> Interval:
    """A variant's paired difference at a share-1 look: the sequence's before the budget, full
    generation's at it (Tango's, as `ruler.paired.paired_cell` gives)."""
    if len(variant) >= until.max_samples:
        return paired_proportions(reference, variant, until.confidence)
    return sequence_interval(variant - reference, -1.0, 1.0, until, until.early_confidence)


def last_look_mean(intervals: list[Interval], until: Until) -> Interval:
    """The mean over tasks of cells at the budget, as full generation gives it (MOVER)."""
    return mover_mean([i.estimate for i in intervals], [i.low for i in intervals], [i.high for i in intervals], until.confidence)


def _difference_row(model: str, task: str, length: int, interval: Interval, reference: str, until: Until) -> dict:
    decided = difference_verdict(interval, until.verdict_delta)  # RULER's score difference, decided where the PPI++ one is
    return {"model": model, "task": task, "length": length, "reference": reference, **decided.columns("diff"), "samples": interval.n,
            "exact": 0, "generated": 0, "predicted": 0, "df": math.nan}


def answered(cell: Cell, scores: pd.DataFrame, differences: pd.DataFrame, until: Until, decided: list[Variant]) -> bool:
    """Whether (task, length) meets the target: every model's interval narrow enough on the
    samples so far, or every variant decided (or found futile) at this look or an earlier one."""
    task, length = cell
    if until.half_width is not None:
        rows = scores[(scores["task"] == task) & (scores["length"] == length)]
        half = (rows["score.high"] - rows["score.low"]) / 2
        return bool(len(rows)) and bool(half.notna().all()) and bool((half <= until.half_width).all())
    rows = differences[(differences["task"] == task) & (differences["length"] == length)] if len(differences) else differences
    return bool(len(rows)) and all((str(r.model), task, length) in decided for r in rows.itertuples())


def decided_variants(cells: list[Cell], differences: pd.DataFrame, until: Until) -> list[Variant]:
    """The (variant, task, length) of `cells` whose paired difference has a final verdict
    (verdict mode; the tables' own, computed at the look's δ; `is_final`)."""
    if until.delta is None or not len(differences):
        return []
    return [(str(r["model"]), str(r["task"]), int(r["length"])) for _, r in differences.iterrows()
            if (r["task"], r["length"]) in cells and is_final(str(r["diff.outcome"]), float(r["diff.low"]), float(r["diff.high"]), float(r["diff.se"]), int(r["samples"]), until)]


def budget_half_width(low: float, high: float, se: float, samples: int, until: Until) -> float:
    """The half-width the look at the budget would have, from a look's interval (points) at
    `samples`: it narrows as 1/√n. At share 1 the look at the budget is full generation's
    interval, z·se wide (the early looks' sequence is wider, so its se is read instead of its
    width); in rounds every look's interval is the same z·se wide at the per-look confidence."""
    scale = math.sqrt(samples / until.max_samples)
    if until.looks == SEQUENCE:
        return quantile(until.confidence) * se * scale
    return (high - low) / 2 * scale


def is_final(outcome: str, low: float, high: float, se: float, samples: int, until: Until) -> bool:
    """Whether a look's verdict (points) is one the look at the budget would reach too, except by
    chance, so the variant may stop on it. *Within δ* is final (a later interval is narrower, and
    one inside ±δ stays there unless the estimate moves by chance). *Hurts* or *gains* is final
    only where the interval lies wholly beyond δ − h (h: the budget's half-width,
    `budget_half_width`) on the side it excludes 0: the budget's interval around such a
    difference cannot fit inside ±δ, so it too reads *hurts* or *gains*; an interval that excludes
    0 but reaches nearer 0 than that line (a loss the budget might put within δ) is sampled on.
    Where h ≥ δ (a budget that can put nothing within δ) the line is at or below 0 and excluding
    0 is final. At the budget every verdict is final."""
    if outcome == UNDECIDED:
        return False
    if outcome == WITHIN or samples >= until.max_samples:
        return True
    line = until.verdict_delta - budget_half_width(low, high, se, samples, until)
    return low > line or high < -line


def futile_variants(cells: list[Cell], differences: pd.DataFrame, until: Until, closed: list[Variant]) -> list[Variant]:
    """The open (variant, task, length) of `cells` (verdict mode) that the budget is unlikely to
    decide: conditional power below FUTILITY_POWER."""
    if until.delta is None or not len(differences):
        return []
    futile = []
    for _, r in differences.iterrows():
        variant = (str(r["model"]), str(r["task"]), int(r["length"]))
        interval = Interval.from_columns(r, "diff")
        if (r["task"], r["length"]) not in cells or variant in closed or not interval.has_interval:
            continue
        if is_futile(interval.estimate, interval.low, interval.high, interval.se, int(r["samples"]), until):
            futile.append(variant)
    return futile


def is_futile(estimate: float, low: float, high: float, se: float, samples: int, until: Until) -> bool:
    """Whether a look's difference (points) is one the budget decides with a chance below
    FUTILITY_POWER (stochastic curtailment, stats/sequential.py). PPI++'s interval is z·se wide
    and narrows as 1/√n, so its half-width is scaled to the budget. At share 1 the look at the
    budget is full generation's interval, about z·se wide too, but the early looks' sequence is
    wider, so the half-width is z times the se read from the sequence's regularised spread; those
    futility looks start at FUTILITY_FROM of the budget (before it the spread rests on the
    pseudo-values at each end) and close below SEQUENCE_FUTILITY_POWER."""
    if samples >= until.max_samples:
        return False
    if until.looks != SEQUENCE:
        return conditional_power(estimate, (high - low) / 2, samples, until.max_samples, until.verdict_delta, until.confidence) < FUTILITY_POWER
    if samples < until.max_samples * FUTILITY_FROM:
        return False
    return conditional_power(estimate, quantile(until.confidence) * se, samples, until.max_samples, until.verdict_delta, until.confidence,
                             se=se) < SEQUENCE_FUTILITY_POWER


def run_until(config: RulerConfig, until: Until, out: Path, run_round: RunRound,
              announce: Callable[[str], None] | None = None) -> tuple[pd.DataFrame, Manifest, list[dict]]:
    """Run the rounds into `out/round-K` and return every round's samples, the last round's
    manifest and what each round did (its cells, the variants it decided, the cells it closed).
    `announce` is told where the whole run stands before each round (a round's own progress
    counts only its samples)."""
    open_cells: list[Cell] = [(t, n) for t in config.tasks for n in config.lengths]
    decided: list[Variant] = []  # in verdict mode, variants left out of later rounds: decided or futile
    frames, rounds, manifest = [], [], None
    for k in range(until.rounds):
        if not open_cells:
            break
        first = k * until.round_size
        size = min(until.round_size, until.max_samples - first)
        every = len(open_cells) == len(config.tasks) * len(config.lengths)
        skip = tuple(v for v in decided if v[1:] in open_cells) or None
        if announce is not None:
            announce(f"--until: round {k + 1} of at most {until.rounds}, samples {first}–{first + size - 1} of at most {until.max_samples}; "
                     f"{len(open_cells)} of {len(config.tasks) * len(config.lengths)} task and length cell(s) open"
                     + (f", {len(skip)} variant(s) there closed" if skip else ""))
        result = run_round(replace(config, samples=size, first_sample=first, cells=None if every else tuple(open_cells), skip=skip), out / f"round-{k + 1}")
        frames.append(result.samples)
        manifest = result.manifest
        scores, differences = look_tables(pd.concat(frames, ignore_index=True), config.seed, until)
        newly = [v for v in decided_variants(open_cells, differences, until) if v not in decided]
        decided += newly
        futile = futile_variants(open_cells, differences, until, decided)
        decided += futile
        closed = [c for c in open_cells if answered(c, scores, differences, until, decided)]
        rounds.append({"round": k + 1, "first_sample": first, "samples": size, "cells": [list(c) for c in open_cells],
                       "skipped": [list(v) for v in skip or ()], "decided": [list(v) for v in newly], "futile": [list(v) for v in futile],
                       "closed": [list(c) for c in closed], "compute": compute_against_fixed(pd.concat(frames, ignore_index=True), config, until),
                       "seconds": (manifest.timing or {}).get("seconds_all_sessions")})
        open_cells = [c for c in open_cells if c not in closed]
    return pd.concat(frames, ignore_index=True), manifest, rounds


def compute_against_fixed(samples: pd.DataFrame, config: RulerConfig, until: Until) -> dict:
    """What the run has cost so far beside the fixed-n run of the same budget (`--samples N`
    for every task, length and model, no `--until`): likelihood passes and the prompt tokens
    they read, counted from the records; generations and the tokens they generated, the fixed
    run's estimated from each (model, task, length)'s own so far: its unsettled share times N
    generations, of its mean generated tokens each (a settled sample needs none)."""
    cells = len(config.tasks) * len(config.lengths)
    fixed_passes = until.max_samples * cells * len(config.models)
    grouped = samples.groupby(["model", "task", "length"], sort=False)
    unsettled = grouped["method"].apply(lambda m: float((m != SETTLED).mean()))
    fixed_generations = float(unsettled.sum() * until.max_samples)
    tokens = "prompt_tokens" in samples
    fixed_tokens = float(grouped["prompt_tokens"].mean().sum() * until.max_samples) if tokens else None
    generated = samples[samples["method"] == GENERATED]
    counted = "generated_tokens" in samples and bool(len(generated)) and bool(generated["generated_tokens"].notna().all())
    per_generation = generated.groupby(["model", "task", "length"], sort=False)["generated_tokens"].mean() if counted else None
    fixed_generated = float((unsettled * until.max_samples * per_generation.reindex(unsettled.index).fillna(0.0)).sum()) if counted else None
    return {"passes": len(samples), "generations": int(len(generated)),
            "prompt_tokens": int(samples["prompt_tokens"].sum()) if tokens else None,
            "generated_tokens": int(generated["generated_tokens"].sum()) if counted else None,
            "fixed_passes": fixed_passes, "fixed_generations": round(fixed_generations, 1),
            "fixed_prompt_tokens": round(fixed_tokens) if fixed_tokens is not None else None,
            "fixed_generated_tokens": round(fixed_generated) if fixed_generated is not None else None}


def write_merged(out: Path, samples: pd.DataFrame, last: Manifest, whole: UntilConfig, rounds: list[dict]) -> Manifest:
    """The run's folder as one RULER run over every round's samples: its records and manifest
    (the config with `until`, the rounds in the plan, the rounds' seconds summed)."""
    seconds = [r["seconds"] for r in rounds]
    timing = {"seconds_all_sessions": sum(seconds)} if all(s is not None for s in seconds) else None
    return write_run(out, samples, replace(last, run_id=whole.run_id(), config=whole.as_dict(), status="complete",
                                           plan={**(last.plan or {}), "samples": len(samples), "rounds": rounds}, timing=timing, fingerprints=None))
