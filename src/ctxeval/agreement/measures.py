"""The measures `ctxeval agreement` compares, read from finished runs, one value per model.

Cheap measures come from likelihood alone: an effective-length run's L*, its gain from the
shortest to the longest length, key-token gain and L*, and log p at the longest length; a
diff's mean KL against its reference; a RULER run's likelihood score, answer log-probability
and answer rank per length. Task measures are what users judge by: RULER's generated score per
length and its effective length, and retrieval accuracy. Every measure carries its direction
(+1: higher is better; -1: lower is better, as KL and rank), so that a correlation of oriented
values is positive when the two measures order the models alike.

RULER runs of one model made with different seeds draw different samples. The first such run
given is the model's task run; a later run's cheap measures are kept apart as "held out" (scored on
samples generation did not see, e.g. "RULER answer log p at 1024 (held out)") and its task
measures are dropped, so a cheap measure is correlated with generation on other samples.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from ctxeval.results.ruler import MEAN_TASK, RulerResult
from ctxeval.results.manifest import Manifest
from ctxeval.results.diff import DiffResult
from ctxeval.results.effective_length import EffectiveLengthResult
from ctxeval.results.retrieval import RetrievalResult

READS = (EffectiveLengthResult, RulerResult, RetrievalResult, DiffResult)
CHEAP, TASK = "cheap", "task"


@dataclass(frozen=True)
class Measure:
    """One value of one measure for one model, and where it came from."""

    model: str
    measure: str
    kind: str  # CHEAP or TASK
    direction: int  # +1 higher is better, -1 lower is better
    value: float
    run: str  # the run folder it was read from
    seconds_per_model: float | None  # the run's recorded time over its models (a run scores its models in turn)
    shown: str | None = None  # how tables show a value that stands for a text (a length below the shortest)


def measures_of(result: EffectiveLengthResult | RulerResult | RetrievalResult | DiffResult, run: str) -> list[Measure]:
    """Every measure a finished run gives, per model."""
    seconds = _seconds_per_model(result.manifest)
    if isinstance(result, EffectiveLengthResult):
        return _effective_length(result, run, seconds)
    if isinstance(result, RulerResult):
        return _ruler(result, run, seconds)
    if isinstance(result, RetrievalResult):
        return [Measure(m, "retrieval accuracy", TASK, 1, float(part["correct"].mean()), run, seconds) for m, part in result.cases.groupby("model", sort=False)]
    if isinstance(result, DiffResult):
        kl = result.report["summary"]["all"]["kl"]["estimate"]
        return [Measure(result.report["cand"]["name"], f"mean KL vs {result.report['ref']['name']}", CHEAP, -1, float(kl), run, seconds)]
    raise TypeError(f"agreement does not read {type(result).__name__}")


HELD_OUT = " (held out)"


def hold_out(measures: list[Measure], seeds: dict[str, int]) -> list[Measure]:
    """`measures` with a model's RULER runs of a seed other than its first run's kept apart:
    their cheap measures renamed with HELD_OUT, their task measures dropped. `seeds` gives each
    RULER run's seed by run folder; measures of other runs pass unchanged."""
    first: dict[str, int] = {}
    out = []
    for m in measures:
        if m.run not in seeds:
            out.append(m)
            continue
        seed = first.setdefault(m.model, seeds[m.run])
        if seeds[m.run] == seed:
            out.append(m)
        elif m.kind == CHEAP:
            out.append(dataclasses.replace(m, measure=m.measure + HELD_OUT))
    return out


def _seconds_per_model(manifest: Manifest) -> float | None:
    timing = manifest.timing or {}
    total = timing.get("seconds_all_sessions", timing.get("seconds_this_session"))
    return None if total is None or not manifest.models else round(float(total) / len(manifest.models), 1)


def _effective_length(result: EffectiveLengthResult, run: str, seconds: float | None) -> list[Measure]:
    out = []
    for model, summary in result.summary["models"].items():
        longest = summary["curve"][-1]
        found = [("L*", summary["effective_length"]["value"]), ("gain to the longest length", summary["effective_length"]["total_gain"]),
                 (f"log p at {longest['length']}", longest["logprob"])]
        key = summary.get("key_effective_length")
        if key is not None and key.get("value") is not None:
            found += [("key-token L*", key["value"]), ("key-token gain", key["total_gain"])]
        out += [Measure(model, name, CHEAP, 1, float(value), run, seconds) for name, value in found if value is not None]
    return out


def _ruler(result: RulerResult, run: str, seconds: float | None) -> list[Measure]:
    out = []
    means = result.table[result.table["task"] == MEAN_TASK]
    for row in means.itertuples():
        n = int(row.length)
        if row.scored_by == "generation":
            out.append(Measure(row.model, f"RULER score at {n}", TASK, 1, float(row.score), run, seconds))
        out += [Measure(row.model, f"RULER likelihood score at {n}", CHEAP, 1, float(row.likelihood), run, seconds),
                Measure(row.model, f"RULER answer log p at {n}", CHEAP, 1, float(row.mean_logprob), run, seconds),
                Measure(row.model, f"RULER answer log2 rank at {n}", CHEAP, -1, float(row.mean_log2_rank), run, seconds)]
    shortest = int(np.min(means["length"]))
    generated = set(means.loc[means["scored_by"] == "generation", "model"])
    for model, lengths in result.effective_lengths.items():
        if model in generated:
            value = lengths[MEAN_TASK]["value"]
            if value is None:  # below the shortest length: ranked under every measured length
                out.append(Measure(model, "RULER effective length", TASK, 1, shortest / 2, run, seconds, f"below the shortest (< {shortest})"))
            else:
                out.append(Measure(model, "RULER effective length", TASK, 1, float(value), run, seconds))
    return out
