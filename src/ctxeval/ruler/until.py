"""`ruler --generate-share P --until TARGET --max-samples N`: add samples in rounds until each
(task, length) is answered or the budget is spent.

A round is an ordinary `ruler --generate-share` run of `--samples` new samples per open (task,
length) for every model (folder `round-K` of the run's folder, resumable as any run; round K
holds samples (K-1)·S … K·S-1, so no round repeats a sample and every model scores the same
ones). After each round the PPI++ tables are computed on all rounds' samples so far, and a
(task, length) closes when it is answered:

- a half-width target (points): every model's score interval there is at most that wide on
  each side;
- `verdict` (or `verdict:D`, δ = D points, default the run's `--delta`): every variant's paired difference
  against the first model has a verdict (hurts, gains, within δ; stats/verdict.py), not "too
  few samples to tell". A variant is closed at the look that gives it a verdict: later rounds
  leave it out there (a press that clearly hurts stops costing samples while one within δ is
  still sampled), and the first model runs until the (task, length) is answered. Its
  difference is computed on the samples both ran. A variant the budget is unlikely to decide is
  closed too (futility, by stochastic curtailment): if the true difference were today's
  estimate, the look at the budget would give a verdict with a chance below 10 %. It ends "too
  few samples to tell", which claims nothing, so closing it early costs no coverage, only the
  chance that later samples would have moved it into a verdict.

The stopping rule keeps the coverage by Bonferroni over the looks: with at most R = ⌈N / S⌉
rounds, every look's interval is at confidence 1 − 0.05 / R, so the chance that any look's
interval misses, the one the run stops on included, is at most 0.05 whatever the rule stops on
(simulated in tests/test_ruler_until.py). The run's folder then holds every round's samples
and the result computed on them at that confidence; which rounds ran, and which cells each
closed, follow from the records alone, so a resumed run retraces an uninterrupted one.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import pandas as pd

from ctxeval.config import config_id
from ctxeval.errors import FieldError
from ctxeval.ruler.generation import Generation
from ctxeval.ruler.paired import DEFAULT_SCORE_DELTA
from ctxeval.ruler.ppi import ppi_tables
from ctxeval.ruler.merge import write_run
from ctxeval.ruler.run import RulerConfig
from ctxeval.results.manifest import Manifest
from ctxeval.results.ruler import RulerResult
from ctxeval.stats.defaults import DEFAULT_CONFIDENCE
from ctxeval.stats.ppi import MIN_GENERATED
from ctxeval.stats.sequential import conditional_power
from ctxeval.stats.verdict import UNDECIDED

VERDICT = "verdict"
FUTILITY_POWER = 0.10  # close a variant the budget decides with less than this chance (group-sequential futility's usual bound)

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

    @property
    def rounds(self) -> int:
        return math.ceil(self.max_samples / self.round_size)

    @property
    def confidence(self) -> float:
        """Each look's confidence: Bonferroni over the rounds."""
        return 1 - (1 - DEFAULT_CONFIDENCE) / self.rounds

    @property
    def verdict_delta(self) -> float:
        """The δ its looks' verdicts are read at (a half-width target reads the run's default)."""
        return DEFAULT_SCORE_DELTA if self.delta is None else self.delta

    def as_dict(self) -> dict:
        return asdict(self) | {"rounds": self.rounds, "confidence": self.confidence}

    @classmethod
    def from_config(cls, config: dict) -> Until | None:
        """The target a run's manifest config records; None for a run without `--until`."""
        until = config.get("until")
        return None if until is None else cls(until["half_width"], until["delta"], int(until["max_samples"]), int(until["round_size"]))

    @classmethod
    def of(cls, target: str, max_samples: int, round_size: int, delta: float, generation: Generation, models: int) -> Until:
        """The target `--until` asks for with its budget; a FieldError where they cannot be met
        (`delta`: the run's --delta; `models`: how many distinct models the run compares)."""
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
        return cls(half_width, verdict_delta, max_samples, round_size)


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


def answered(cell: Cell, scores: pd.DataFrame, differences: pd.DataFrame, until: Until, decided: list[Variant]) -> bool:
    """Whether (task, length) meets the target: every model's interval narrow enough on the
    samples so far, or every variant decided (or found futile) at this look or an earlier one."""
    task, length = cell
    if until.half_width is not None:
        rows = scores[(scores["task"] == task) & (scores["length"] == length)]
        half = (rows["high"] - rows["low"]) / 2
        return bool(len(rows)) and bool(half.notna().all()) and bool((half <= until.half_width).all())
    rows = differences[(differences["task"] == task) & (differences["length"] == length)] if len(differences) else differences
    return bool(len(rows)) and all((str(r.model), task, length) in decided for r in rows.itertuples())


def decided_variants(cells: list[Cell], differences: pd.DataFrame, until: Until) -> list[Variant]:
    """The (variant, task, length) of `cells` whose paired difference has a verdict (verdict
    mode; the tables' own, computed at the look's δ)."""
    if until.delta is None or not len(differences):
        return []
    return [(str(r.model), str(r.task), int(r.length)) for r in differences.itertuples()
            if (r.task, r.length) in cells and r.outcome != UNDECIDED]


def futile_variants(cells: list[Cell], differences: pd.DataFrame, until: Until, closed: list[Variant]) -> list[Variant]:
    """The open (variant, task, length) of `cells` (verdict mode) that the budget is unlikely to
    decide: conditional power below FUTILITY_POWER."""
    if until.delta is None or not len(differences):
        return []
    futile = []
    for r in differences.itertuples():
        variant = (str(r.model), str(r.task), int(r.length))
        if (r.task, r.length) not in cells or variant in closed or int(r.samples) >= until.max_samples or pd.isna(r.low) or pd.isna(r.high):
            continue
        power = conditional_power(float(r.estimate), (float(r.high) - float(r.low)) / 2, int(r.samples), until.max_samples, until.delta, until.confidence)
        if power < FUTILITY_POWER:
            futile.append(variant)
    return futile


def run_until(config: RulerConfig, until: Until, out: Path, run_round: RunRound) -> tuple[pd.DataFrame, Manifest, list[dict]]:
    """Run the rounds into `out/round-K` and return every round's samples, the last round's
    manifest and what each round did (its cells, the variants it decided, the cells it closed)."""
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
        result = run_round(replace(config, samples=size, first_sample=first, cells=None if every else tuple(open_cells), skip=skip), out / f"round-{k + 1}")
        frames.append(result.samples)
        manifest = result.manifest
        scores, differences = ppi_tables(pd.concat(frames, ignore_index=True), config.seed, confidence=until.confidence, delta=until.verdict_delta)
        newly = [v for v in decided_variants(open_cells, differences, until) if v not in decided]
        decided += newly
        futile = futile_variants(open_cells, differences, until, decided)
        decided += futile
        closed = [c for c in open_cells if answered(c, scores, differences, until, decided)]
        rounds.append({"round": k + 1, "first_sample": first, "samples": size, "cells": [list(c) for c in open_cells],
                       "skipped": [list(v) for v in skip or ()], "decided": [list(v) for v in newly], "futile": [list(v) for v in futile],
                       "closed": [list(c) for c in closed],
                       "seconds": (manifest.timing or {}).get("seconds_all_sessions")})
        open_cells = [c for c in open_cells if c not in closed]
    return pd.concat(frames, ignore_index=True), manifest, rounds


def write_merged(out: Path, samples: pd.DataFrame, last: Manifest, whole: UntilConfig, rounds: list[dict]) -> Manifest:
    """The run's folder as one RULER run over every round's samples: its records and manifest
    (the config with `until`, the rounds in the plan, the rounds' seconds summed)."""
    seconds = [r["seconds"] for r in rounds]
    timing = {"seconds_all_sessions": sum(seconds)} if all(s is not None for s in seconds) else None
    return write_run(out, samples, replace(last, run_id=whole.run_id(), config=whole.as_dict(), status="complete",
                                           plan={**(last.plan or {}), "samples": len(samples), "rounds": rounds}, timing=timing, fingerprints=None))
