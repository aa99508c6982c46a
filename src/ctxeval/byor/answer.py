"""The paired answer over runs read from other tools, from the code that answers for ctxeval's
own RULER runs: per measure, the samples every run scored (the others counted, a sample whose
prompt differs between runs named and left out), then

- with three or more runs, the runs ordered with simultaneous intervals, rank intervals and tie
  groups (ruler/ranking.py `rank_cell`: Holm over the pairs, Tango at 1 − α/m);
- each run against the first, per task and over all tasks (samples pooled): Δ in points with
  Tango's interval (stats/paired_binary.py), its verdict against ±δ (stats/verdict.py), the
  flips with McNemar's exact and mid-p (ruler/paired.py `flip_columns`), the samples that would
  settle an undecided verdict; where every paired sample has the right answer's log-probability
  among its choices (lm-eval multiple choice), its paired difference with a BCa interval beside;
- with `cluster` set (samples sharing a document), Δ's interval is a cluster bootstrap (BCa over
  whole clusters, stats/paired.py) instead of Tango's, which assumes independent samples.

Scores must lie in [0, 1] (accuracy, exact match, RULER's share of references): a measure with
other values is listed as left out.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from ctxeval.errors import UserError
from ctxeval.results.ruler import MEAN_TASK
from ctxeval.results.rows import nested
from ctxeval.ruler.paired import DEFAULT_LOGP_DELTA, DEFAULT_SCORE_DELTA, flip_columns
from ctxeval.ruler.ranking import MIN_RANKED, rank_cell
from ctxeval.stats.defaults import DEFAULT_CONFIDENCE, DEFAULT_REPLICATES, DEFAULT_SEED
from ctxeval.stats.interval import Interval
from ctxeval.stats.paired import paired_bca
from ctxeval.stats.paired_binary import paired_proportions
from ctxeval.stats.verdict import UNDECIDED, verdict

FAIL_ON = ("hurts", "undecided")
MIN_PAIRED = 2


@dataclass(frozen=True)
class AnswerSettings:
    """Margins (δ in points of score, nats of answer log p), confidence, the bootstrap's
    replicates and seed, and whether samples are resampled by cluster."""

    delta: float = DEFAULT_SCORE_DELTA
    logp_delta: float = DEFAULT_LOGP_DELTA
    confidence: float = DEFAULT_CONFIDENCE
    replicates: int = DEFAULT_REPLICATES
    seed: int = DEFAULT_SEED
    cluster: bool = False


@dataclass(frozen=True)
class Paired:
    """One measure's samples paired over every run: `scores` (sample × run, rows ordered by
    task and sample), the left-out counts and the prompt conflicts."""

    keys: pd.DataFrame  # task, sample, cluster
    scores: pd.DataFrame
    logp: pd.DataFrame
    left_out: dict[str, int]
    conflicts: list[dict]


def pair(table: pd.DataFrame, runs: list[str], measure: str) -> Paired:
    """The samples of `measure` every run scored with the same prompt (UserError when fewer than
    two remain): keyed by (task, sample)."""
    part = table[table["measure"] == measure]
    dup = part.duplicated(["run", "task", "sample"])
    if dup.any():
        row = part[dup].iloc[0]
        raise UserError(f"run {row['run']} scores sample {row['sample']} of task {row['task']} twice ({measure})")
    wide = part.pivot(index=["task", "sample"], columns="run", values=["score", "prompt_hash", "answer_logp", "cluster"])
    counts = part.groupby("run").size()
    complete = wide["score"].reindex(columns=runs).notna().all(axis=1)
    common = wide[complete]
    hashes = common["prompt_hash"].reindex(columns=runs)
    known = hashes.ne("") & hashes.notna()
    first = hashes[runs[0]]
    differs = (known & known[[runs[0]]].to_numpy() & hashes.ne(first, axis=0)).any(axis=1)
    conflicts = [{"task": task, "sample": sample, "runs": [r for r in runs[1:] if known.loc[(task, sample), r] and hashes.loc[(task, sample), r] != first.loc[(task, sample)]]}
                 for task, sample in common.index[differs]]
    kept = common[~differs]
    left_out = {r: int(counts.get(r, 0)) - len(common) for r in runs}
    if len(kept) < MIN_PAIRED:
        held = ", ".join(f"{r} {int(counts.get(r, 0))}" for r in runs)
        why = f"; {len(conflicts)} more have another prompt in some run" if conflicts else ""
        raise UserError(f"{measure}: the runs share {len(kept)} samples with the same prompt (they hold {held}{why}): at least {MIN_PAIRED} are needed to pair")
    kept = kept.iloc[sorted(range(len(kept)), key=lambda i: (kept.index[i][0], _natural(kept.index[i][1])))]
    keys = kept.index.to_frame(index=False)
    keys["cluster"] = kept["cluster"][runs[0]].to_numpy()
    return Paired(keys, kept["score"][runs].astype(float).reset_index(drop=True), kept["answer_logp"][runs].astype(float).reset_index(drop=True),
                  left_out, conflicts)


def _natural(sample: str) -> tuple:
    """Sample ids in their natural order: numbers by value, before text."""
    return (0, float(sample), "") if _is_number(sample) else (1, 0.0, sample)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def difference(reference: np.ndarray, candidate: np.ndarray, clusters: np.ndarray | None, settings: AnswerSettings) -> Interval:
    """candidate − reference in points: Tango's score interval, or a cluster bootstrap (BCa over
    whole clusters) where samples share clusters."""
    if clusters is None:
        return paired_proportions(reference, candidate, settings.confidence).scaled(100)
    est = paired_bca(candidate - reference, np.ones(len(reference)), settings.replicates, settings.seed, settings.confidence, clusters=clusters, unit="cluster")
    return est.scaled(100)


def against(reference: np.ndarray, candidate: np.ndarray, logp_ref: np.ndarray, logp_cand: np.ndarray, clusters: np.ndarray | None,
            settings: AnswerSettings) -> dict:
    """One paired row: Δ with its interval and verdict, the flips and McNemar's p, and the answer
    log p difference where both runs have it for every sample."""
    diff = difference(reference, candidate, clusters, settings)
    decided = verdict(diff, settings.delta, worse="lower")
    row = {"n": len(reference), "reference_score": 100 * float(reference.mean()), "score": 100 * float(candidate.mean()),
           "difference": diff.to_row(), "verdict": decided.to_row(), **flip_columns(reference, candidate), "answer_logp": None}
    logp = logp_cand - logp_ref
    if len(logp) and np.isfinite(logp).all():
        est = paired_bca(logp, np.ones(len(logp)), settings.replicates, settings.seed, settings.confidence, clusters=clusters,
                         unit="sample" if clusters is None else "cluster")
        logp_verdict = verdict(est if est.interval == "none" else replace(est, reason=""), settings.logp_delta, worse="lower")
        row["answer_logp"] = {"difference": est.to_row(), "verdict": logp_verdict.to_row()}
    return row


def _cells(paired: Paired) -> list[tuple[str, np.ndarray]]:
    """(task, row mask): all tasks pooled where there are several, then each task."""
    tasks = list(dict.fromkeys(paired.keys["task"]))
    whole = np.ones(len(paired.keys), dtype=bool)
    return ([(MEAN_TASK, whole)] if len(tasks) > 1 else []) + [(t, (paired.keys["task"] == t).to_numpy()) for t in tasks]


def answer_measure(table: pd.DataFrame, runs: list[str], measure: str, settings: AnswerSettings) -> dict:
    """Everything `compare` says of one measure."""
    paired = pair(table, runs, measure)
    values = paired.scores.to_numpy()
    if values.min() < 0 or values.max() > 1:
        return {"measure": measure, "left_out_reason": f"scores outside [0, 1] (from {values.min():g} to {values.max():g})"}
    clusters = paired.keys["cluster"].astype(str).to_numpy() if settings.cluster else None
    ranking = []
    rows = []
    for task, mask in _cells(paired):
        if len(runs) >= MIN_RANKED:
            variants, pairs = rank_cell({r: paired.scores[r].to_numpy()[mask] for r in runs}, settings.confidence)
            ranking.append({"task": task, "variants": [nested(v) for v in variants], "pairs": [nested(p) for p in pairs]})
        ref = paired.scores[runs[0]].to_numpy()[mask]
        for run in runs[1:]:
            rows.append({"run": run, "reference": runs[0], "task": task,
                         **against(ref, paired.scores[run].to_numpy()[mask], paired.logp[runs[0]].to_numpy()[mask], paired.logp[run].to_numpy()[mask],
                                   clusters[mask] if clusters is not None else None, settings)})
    return {"measure": measure, "paired_samples": len(paired.keys), "tasks": list(dict.fromkeys(paired.keys["task"])),
            "left_out": paired.left_out, "prompt_conflicts": paired.conflicts, "ranking": ranking, "against_first": rows,
            "samples": _sample_rows(paired, runs)}


def _sample_rows(paired: Paired, runs: list[str]) -> list[dict]:
    """Per paired sample its task, id and every run's score (the report's sample explorer)."""
    frame = pd.concat([paired.keys[["task", "sample"]], paired.scores[runs]], axis=1)
    return frame.to_dict("records")


def gate(measures: list[dict], fail_on: str | None) -> list[str]:
    """Why `--fail-on` fails the comparison: each run whose overall verdict (all tasks, or its
    one task) on a measure is *hurts* (`hurts`), or anything but a gain or within δ (`undecided`)."""
    if fail_on is None:
        return []
    bad = ("hurts",) if fail_on == "hurts" else ("hurts", UNDECIDED)
    failures = []
    for m in measures:
        for row in m.get("against_first", []):
            if row["task"] == (MEAN_TASK if len(m["tasks"]) > 1 else m["tasks"][0]) and row["verdict"]["outcome"] in bad:
                v = row["verdict"]
                failures.append(f"{row['run']} against {row['reference']} on {m['measure']}: {v['outcome']} (Δ {v['estimate']:+.1f} points, "
                                f"[{v['low']:+.1f}, {v['high']:+.1f}])")
    return failures


def answer(table: pd.DataFrame, runs: list[dict], settings: AnswerSettings, fail_on: str | None = None) -> dict:
    """The compare report of runs read from other tools (`runs`: their label, path and format,
    the first the reference)."""
    labels = [r["run"] for r in runs]
    if len(labels) < 2:
        raise UserError(f"compare needs at least two runs; {runs[0]['path']} holds one: give another")
    held = {r: set(table.loc[table["run"] == r, "measure"]) for r in labels}
    measures = [m for m in dict.fromkeys(table["measure"]) if all(m in h for h in held.values())]
    if not measures:
        raise UserError("the runs share no measure: " + "; ".join(f"{r} has {', '.join(sorted(h))}" for r, h in held.items()))
    answered = [answer_measure(table, labels, m, settings) for m in measures]
    failures = gate(answered, fail_on)
    for r in runs:
        part = table[table["run"] == r["run"]]
        r |= {"samples": int(part[["task", "sample"]].drop_duplicates().shape[0]), "tasks": list(dict.fromkeys(part["task"]))}
    return {"kind": "samples", "runs": runs, "measures": answered,
            "settings": {"delta": settings.delta, "logp_delta": settings.logp_delta, "confidence": settings.confidence,
                         "replicates": settings.replicates, "seed": settings.seed, "cluster": settings.cluster},
            "gates": {"fail_on": fail_on, "passed": not failures, "failures": failures}}
