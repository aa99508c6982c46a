"""How much of its context does a model use? The effective context length L* from likelihood alone.

The design is paired: the same target tokens (per document, seeded spans of n consecutive
targets) are scored with L = L_1 < L_2 < ... tokens of context (target j of a span sees L + j
tokens; a truncated model `?max_context=N` sees at most N). Text difficulty is then the same at
every length, so the curve m(L) (mean log-probability of the targets) moves only with context.

L* is the shortest length whose gain over the shortest length reaches `share` (default 95 %) of
the gain of the longest: m(L*) - m(L_1) >= share * (m(L_K) - m(L_1)). It is the knee of a curve
that flattens, it is N for a model truncated to N tokens (whose curve is flat from N on), and a
shorter truncation never gets a longer L* on a rising curve. When the last doubling still
carries more than 1 - share of the gain, L* is the longest length tried and is reported as "at
least" it; a curve that never rises puts L* at the shortest length ("no gain"). Its interval is
the percentile interval of L* over bootstrap resamples of documents (or spans): a discrete
statistic on the grid of lengths, for which BCa's smoothness assumptions do not hold.
The gains between neighbouring lengths get paired BCa intervals (stats.paired), clustered by
document. One document has no interval, never a zero-width one.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from ctxeval.metrics.registry import MetricConfig, token_metrics, tokens
from ctxeval.pipeline.windows import capped_context
from ctxeval.metrics.keytokens import DEFAULT_ALPHA, DEFAULT_BETA, key_token_mask, merge_spans, tokens_within
from ctxeval.stats.defaults import DEFAULT_CONFIDENCE, DEFAULT_REPLICATES, DEFAULT_SEED, FEW_CLUSTERS, MIN_CLUSTERS, RELIABLE_CLUSTERS
from ctxeval.results.effective_length import EffectiveLengthResult
from ctxeval.results.manifest import Manifest
from ctxeval.results.records import read_records
from ctxeval.stats.interval import percentile_method
from ctxeval.stats.paired import PairedEstimate, paired_bca, ratio_replicates
from ctxeval.stats.verdict import verdict

DEFAULT_SHARE = 0.95
DEFAULT_DELTA = 0.01  # nats/token of gain a variant may lose against the reference and be "within δ"
NOT_MEASURABLE = "not measurable at this size"
UNITS = ("document", "span")
TABLE_COLUMNS = ("model", "text_id", "span", "j", "length", "context_len", "target_pos", "char_start", "char_end", "n_bytes", "logprob", "rank")


@dataclass(frozen=True)
class EstimatorSettings:
    """How the curve becomes numbers: the share of the gain that defines L*, the resampling unit,
    the bootstrap, and the key-token rule (LongPPL's, with L_K as long and L_1 as short context)."""

    share: float = DEFAULT_SHARE
    unit: str = "document"
    replicates: int = DEFAULT_REPLICATES
    seed: int = DEFAULT_SEED
    confidence: float = DEFAULT_CONFIDENCE
    evaluator: str = ""
    alpha: float = DEFAULT_ALPHA
    beta: float = DEFAULT_BETA
    delta: float = DEFAULT_DELTA


def target_table(records: pd.DataFrame, model: str, lengths: tuple[int, ...], max_context: int | None) -> pd.DataFrame:
    """One row per (text, span, target j, length) of `model`: the record of that target scored with
    the context it had at that length, L + j tokens (at most `max_context`). Spans are the
    records' `repeat`; a span's targets are the positions its records score."""
    rows = records[records["model"] == model]
    if rows.duplicated(["text_id", "repeat", "target_pos", "context_len"]).any():
        raise ValueError(f"{model}: a target was scored twice with the same context")
    needs = []
    for (text_id, span), part in rows.groupby(["text_id", "repeat"], sort=False):
        positions = np.unique(part["target_pos"].to_numpy())
        for length in lengths:
            j = np.arange(len(positions))
            context = capped_context(length + j, max_context)
            needs.append(pd.DataFrame({"text_id": text_id, "span": span, "j": j, "length": length, "target_pos": positions, "context_len": context}))
    need = pd.concat(needs, ignore_index=True)
    found = need.merge(rows.rename(columns={"repeat": "span"}), on=["text_id", "span", "target_pos", "context_len"], how="left", validate="many_to_one")
    if found["logprob"].isna().any():
        missing = found[found["logprob"].isna()].iloc[0]
        raise ValueError(f"{model}: no record of {missing['text_id']} target {missing['target_pos']} with {missing['context_len']} tokens of context")
    return found[list(TABLE_COLUMNS)].assign(model=model).reset_index(drop=True)


def add_avg(table: pd.DataFrame, metrics: MetricConfig, vocab_size: int) -> pd.DataFrame:
    """The thesis's rank-based AVG per target (the mean of its rank scores), beside its log-probability."""
    cutoff = vocab_size if metrics.cutoff is None else metrics.cutoff
    ranks = table["rank"].to_numpy(dtype=np.float64)
    t = tokens(table["logprob"].to_numpy(), ranks, table["n_bytes"].to_numpy(), np.zeros((len(table), 0)), cutoff, metrics)
    avg = next(m for m in token_metrics(metrics) if m.key == "avg")
    return table.assign(avg=avg.per_token(t))


def mark_key_tokens(tables: dict[str, pd.DataFrame], evaluator: str, alpha: float, beta: float) -> dict[str, pd.DataFrame]:
    """Each table with a `key` column: inside a key-token span of the evaluator, which picks a
    target when log p(L_K) - log p(L_1) > alpha and log p(L_K) > beta (LongPPL's rule, with the
    longest and shortest lengths as long and short context). Spans reach other models by
    character, so their tokenizers need not match."""
    ev = tables[evaluator]
    shortest, longest = ev["length"].min(), ev["length"].max()
    short = ev[ev["length"] == shortest].set_index(["text_id", "span", "j"])
    long_ = ev[ev["length"] == longest].set_index(["text_id", "span", "j"])
    mask = key_token_mask(long_["logprob"].to_numpy(), short["logprob"].reindex(long_.index).to_numpy(), alpha, beta)
    spans = {text_id: merge_spans(part["char_start"].to_numpy()[m], part["char_end"].to_numpy()[m])
             for (text_id, part), m in _by_text(long_.reset_index(), mask)}
    out = {}
    for model, table in tables.items():
        key = np.zeros(len(table), dtype=bool)
        for text_id, index in table.groupby("text_id", sort=False).groups.items():
            if text_id in spans:
                rows = table.loc[index]
                key[table.index.get_indexer(index)] = tokens_within(rows["char_start"].to_numpy(), rows["char_end"].to_numpy(), spans[text_id])
        out[model] = table.assign(key=key)
    return out


def _by_text(table: pd.DataFrame, mask: np.ndarray):
    for text_id, index in table.groupby("text_id", sort=False).groups.items():
        positions = table.index.get_indexer(index)
        yield (text_id, table.iloc[positions]), mask[positions]


@dataclass(frozen=True)
class Units:
    """Per resampling unit (document or span) and length: the sum of a value over the unit's
    selected targets and their count; `clusters` labels spans by document."""

    sums: np.ndarray  # [units, lengths]
    counts: np.ndarray  # [units]
    span_sums: np.ndarray  # [spans, lengths]
    span_counts: np.ndarray  # [spans]
    span_docs: np.ndarray  # [spans] document label of each span
    span_keys: list[tuple[str, int]]  # (text_id, span) of each span

    def curve(self) -> np.ndarray:
        return self.sums.sum(axis=0) / self.counts.sum()


def units(table: pd.DataFrame, column: str, lengths: tuple[int, ...], unit: str, selected: str | None = None) -> Units | None:
    """The table's `column` summed per unit and length over the targets (only those flagged in
    `selected`, e.g. `key`); None when no target is selected."""
    rows = table if selected is None else table[table[selected]]
    if rows.empty:
        return None
    wide = rows.pivot_table(index=["text_id", "span", "j"], columns="length", values=column, aggfunc="first").reindex(columns=list(lengths))
    if wide.isna().any().any():
        raise ValueError(f"a target lacks a score at some length ({column})")
    per_span = wide.groupby(level=["text_id", "span"], sort=False)
    span_sums = per_span.sum().to_numpy(dtype=np.float64)
    span_counts = per_span.size().to_numpy(dtype=np.float64)
    keys = [(str(t), int(s)) for t, s in per_span.sum().index]
    docs = np.array([t for t, _ in keys])
    if unit == "span":
        sums, counts = span_sums, span_counts
    else:
        labels, index = np.unique(docs, return_inverse=True)
        sums = np.stack([np.bincount(index, weights=span_sums[:, i], minlength=len(labels)) for i in range(len(lengths))], axis=1)
        counts = np.bincount(index, weights=span_counts, minlength=len(labels))
    return Units(sums, counts, span_sums, span_counts, docs, keys)


def knee_index(curves: np.ndarray, share: float) -> np.ndarray:
    """Per row of mean values over lengths [rows, lengths], the index of the shortest length whose
    gain over the first reaches `share` of the last's (0 when the last gains nothing)."""
    gain = curves - curves[:, :1]
    reached = gain >= share * gain[:, -1:]
    return np.argmax(reached, axis=1)


def effective_length(u: Units, lengths: tuple[int, ...], settings: EstimatorSettings) -> dict:
    """L* with its percentile bootstrap interval over units (see the module docstring), its level
    and method in its row as every interval's (`confidence`, `method`)."""
    curve = u.curve()
    point = int(knee_index(curve[None, :], settings.share)[0])
    total = float(curve[-1] - curve[0])
    out = {
        "value": lengths[point], "at_least": point == len(lengths) - 1 and total > 0, "no_gain": not total > 0,
        "total_gain": total, "share": settings.share, "units": int(len(u.counts)), "unit": settings.unit,
        "confidence": settings.confidence, "method": percentile_method(settings.unit),
        "no_gain_seen": None if total > 0 else _no_gain_seen(curve, lengths),
        "warning": FEW_CLUSTERS if settings.unit == "document" and 2 <= len(u.counts) < RELIABLE_CLUSTERS else None,
    }
    if len(u.counts) < 2:
        return out | {"interval": "none", "low": None, "high": None, "reason": f"no interval (one {settings.unit}): a single resampling unit has no spread to resample"}
    rng = np.random.default_rng(settings.seed)
    draws = rng.integers(0, len(u.counts), size=(settings.replicates, len(u.counts)))
    weights = np.stack([np.bincount(row, minlength=len(u.counts)) for row in draws]).astype(np.float64)
    curves = (weights @ u.sums) / (weights @ u.counts)[:, None]
    index = knee_index(curves, settings.share)
    tail = (1.0 - settings.confidence) / 2.0
    low, high = int(np.quantile(index, tail, method="lower")), int(np.quantile(index, 1.0 - tail, method="higher"))
    return out | {"interval": "percentile", "low": lengths[low], "high": lengths[high], "high_at_least": high == len(lengths) - 1, "reason": None,
                  "replicate_shares": {str(lengths[i]): float(np.mean(index == i)) for i in range(len(lengths)) if np.any(index == i)}}


def _no_gain_seen(curve: np.ndarray, lengths: tuple[int, ...]) -> str:
    """What a curve with no gain at its longest length did: never rose, or rose and fell back."""
    peak = int(np.argmax(curve))
    if curve[peak] <= curve[0]:
        return "the curve never rises above its shortest length"
    return (f"the curve rises to {curve[peak] - curve[0]:+.3f} nats at {lengths[peak]} tokens, then falls back to "
            f"{curve[-1] - curve[0]:+.3f} at {lengths[-1]}")


def paired_gain(u: Units, a: int, b: int, settings: EstimatorSettings) -> PairedEstimate:
    """Mean gain from length index a to b over the selected targets, paired per span, with its
    BCa interval clustered by document (or over spans)."""
    delta = (u.span_sums[:, b] - u.span_sums[:, a]) / u.span_counts
    clusters = u.span_docs if settings.unit == "document" else None
    return paired_bca(delta, u.span_counts, settings.replicates, settings.seed, settings.confidence, clusters=clusters, unit=settings.unit)


def estimate_json(e: PairedEstimate) -> dict:
    """A paired estimate as JSON (no NaN: a missing bound is null)."""
    data = e.as_dict()
    if e.interval == "none":
        data |= {"low": None, "high": None}
    return data


def model_summary(table: pd.DataFrame, lengths: tuple[int, ...], settings: EstimatorSettings, max_context: int | None) -> dict:
    """The curve, the gains per doubling and L* (all targets and key tokens) of one model."""
    lp = units(table, "logprob", lengths, settings.unit)
    avg = units(table, "avg", lengths, settings.unit)
    key = units(table, "logprob", lengths, settings.unit, "key")
    assert lp is not None and avg is not None
    curve_lp, curve_avg = lp.curve(), avg.curve()
    curve = []
    for i, length in enumerate(lengths):
        rows = table[table["length"] == length]
        curve.append({"length": length, "mean_context": float(rows["context_len"].mean()), "logprob": float(curve_lp[i]), "avg": float(curve_avg[i]),
                      "gain": estimate_json(paired_gain(lp, 0, i, settings)) if i else None,
                      "key_logprob": float(key.curve()[i]) if key is not None else None})
    doublings = []
    for i in range(1, len(lengths)):
        doublings.append({"from": lengths[i - 1], "to": lengths[i], "logprob_gain": estimate_json(paired_gain(lp, i - 1, i, settings)),
                          "avg_gain": estimate_json(paired_gain(avg, i - 1, i, settings)),
                          "key_logprob_gain": estimate_json(paired_gain(key, i - 1, i, settings)) if key is not None and len(key.span_counts) else None})
    significant = [d["to"] for d in doublings if d["logprob_gain"]["interval"] == "bca" and d["logprob_gain"]["low"] > 0]
    return {
        "max_context": max_context,
        "n_targets": int(lp.span_counts.sum()),
        "n_key": int(key.span_counts.sum()) if key is not None else 0,
        "effective_length": effective_length(lp, lengths, settings),
        "key_effective_length": effective_length(key, lengths, settings) if key is not None else None,
        "last_significant_doubling": significant[-1] if significant else None,
        "curve": curve,
        "doublings": doublings,
    }


def compare_gains(tables: dict[str, pd.DataFrame], a: str, b: str, lengths: tuple[int, ...], settings: EstimatorSettings) -> dict:
    """Model b's total gain (shortest to longest length) minus model a's, paired per shared span
    (the same characters of the same document), with its BCa interval clustered by document."""
    ua, ub = (units(tables[m], "logprob", lengths, "span") for m in (a, b))
    assert ua is not None and ub is not None
    gain_a = pd.Series((ua.span_sums[:, -1] - ua.span_sums[:, 0]) / ua.span_counts, index=pd.MultiIndex.from_tuples(ua.span_keys))
    gain_b = pd.Series((ub.span_sums[:, -1] - ub.span_sums[:, 0]) / ub.span_counts, index=pd.MultiIndex.from_tuples(ub.span_keys))
    shared = gain_a.index.intersection(gain_b.index)
    counts = pd.Series(ua.span_counts, index=gain_a.index)[shared].to_numpy()
    docs = np.array([t for t, _ in shared])
    clusters = docs if settings.unit == "document" else None
    difference = (gain_b[shared] - gain_a[shared]).to_numpy()
    estimate = paired_bca(difference, counts, settings.replicates, settings.seed, settings.confidence, clusters=clusters, unit=settings.unit)
    share = share_kept(gain_b[shared].to_numpy(), gain_a[shared].to_numpy(), counts, clusters, settings)
    decided = (estimate.without_interval(f"{estimate.units} {settings.unit}(s): fewer than {MIN_CLUSTERS} paired units decide nothing")
               if estimate.units < MIN_CLUSTERS else replace(estimate, reason=""))  # two units' means are no interval to decide on
    judged = verdict(decided, settings.delta, worse="lower").to_row() | {"unit": settings.unit}
    return {"a": a, "b": b, "lengths": [lengths[0], lengths[-1]], "gain_difference": estimate_json(estimate), "share_kept": share, "spans": int(len(shared)),
            "verdict": judged}


def share_kept(gain: np.ndarray, reference_gain: np.ndarray, counts: np.ndarray, clusters: np.ndarray | None, settings: EstimatorSettings) -> dict:
    """The share of the reference's gain a variant keeps: its token-weighted mean gain over the
    spans divided by the reference's on the same spans, Σ t·g_b / Σ t·g_a, with the percentile
    interval of that ratio over bootstrap resamples of the units (documents, or spans). Undefined
    when the reference gains nothing; no interval from one unit, or when some resample's
    reference gain is not positive (the ratio then has no bound)."""
    if clusters is None:
        num, den = counts * gain, counts * reference_gain
    else:
        _, index = np.unique(clusters, return_inverse=True)
        num, den = np.bincount(index, weights=counts * gain), np.bincount(index, weights=counts * reference_gain)
    out = {"estimate": None, "low": None, "high": None, "se": None, "n": int(len(num)), "confidence": settings.confidence, "method": percentile_method(settings.unit),
           "interval": "none", "units": int(len(num))}
    if not den.sum() > 0:
        return out | {"reason": "the reference gains nothing between these lengths, so there is no share to keep"}
    out["estimate"] = float(num.sum() / den.sum())
    if len(num) < 2:
        return out | {"reason": f"no interval (one {settings.unit}): a single resampling unit has no spread to resample"}
    reference = ratio_replicates(den, np.ones_like(den), settings.replicates, settings.seed)  # the same draws as the ratio's
    if np.any(reference <= 0):
        return out | {"reason": f"no interval: the reference gains nothing in {100 * np.mean(reference <= 0):.1f} % of the bootstrap resamples"}
    tail = 100 * (1.0 - settings.confidence) / 2.0
    low, high = np.percentile(ratio_replicates(num, den, settings.replicates, settings.seed), [tail, 100 - tail])
    return out | {"low": float(low), "high": float(high), "interval": "percentile", "reason": None}


def summarize(tables: dict[str, pd.DataFrame], lengths: tuple[int, ...], settings: EstimatorSettings, caps: dict[str, int | None]) -> dict:
    """summary.json: the design, the key-token rule, each model's curve and L*, and every model's
    gain against the reference's: the first model's."""
    first = next(iter(tables.values()))
    models = list(tables)
    summaries = {m: model_summary(tables[m], lengths, settings, caps[m]) for m in models}
    measurable = measurable_reason(summaries[models[0]]["curve"][-1]["gain"], lengths)
    for s in summaries.values():
        s["effective_length"] |= {"measurable": measurable is None, "not_measurable": measurable}
    return {
        "lengths": list(lengths),
        "documents": sorted(set(first["text_id"])),
        "spans": int(first.groupby(["text_id", "span"]).ngroups),
        "targets_per_span": int(first["j"].max()) + 1,
        "estimator": {"share": settings.share, "unit": settings.unit, "replicates": settings.replicates, "seed": settings.seed,
                      "confidence": settings.confidence, "delta": settings.delta,
                      "rule": f"L* = the shortest length whose mean log-probability gain over {lengths[0]} tokens reaches {settings.share:g} of the gain at {lengths[-1]}; "
                              f"percentile interval over bootstrap resamples of {settings.unit}s"},
        "key_tokens": {"evaluator": settings.evaluator, "alpha": settings.alpha, "beta": settings.beta,
                       "rule": f"log p({lengths[-1]}) - log p({lengths[0]}) > alpha and log p({lengths[-1]}) > beta, by the evaluator; other models by character span"},
        "models": summaries,
        "comparisons": [compare_gains(tables, models[0], m, lengths, settings) for m in models[1:]],
    }


def measurable_reason(gain: dict, lengths: tuple[int, ...]) -> str | None:
    """Why L* is not measurable in this run (None: it is): the reference's gain from the
    shortest to the longest length must exceed 0 by its interval, else the curve's knee is noise
    and a variant can come out with any L*, pointing either way."""
    if gain["units"] < MIN_CLUSTERS:
        return f"{NOT_MEASURABLE}: the reference's gain {lengths[0]}→{lengths[-1]} rests on {gain['units']} resampling unit(s), fewer than {MIN_CLUSTERS}"
    if gain["interval"] == "none":
        return f"{NOT_MEASURABLE}: the reference's gain {lengths[0]}→{lengths[-1]} has no interval ({gain['reason']})"
    if not gain["low"] > 0:
        return (f"{NOT_MEASURABLE}: the reference's gain {lengths[0]}→{lengths[-1]}, {gain['estimate']:+.3f} [{gain['low']:+.3f}, {gain['high']:+.3f}] nats/token, "
                "does not exclude 0; more documents or spans would tell")
    return None


def effective_length_result(run_dir: Path, manifest: Manifest, metrics: MetricConfig, settings: EstimatorSettings) -> EffectiveLengthResult:
    """A finished run's result: each model's target table (AVG under `metrics`, key tokens by
    `settings.evaluator`), its curve and L*."""
    records = read_records(run_dir)
    lengths, caps = manifest.lengths, manifest.max_contexts
    vocab = manifest.vocab_sizes
    tables = {name: add_avg(target_table(records, name, lengths, caps[name]), metrics, vocab[name]) for name in manifest.model_names}
    tables = mark_key_tokens(tables, settings.evaluator, settings.alpha, settings.beta)
    summary = summarize(tables, lengths, settings, caps) | {"run_id": manifest.run_id}
    return EffectiveLengthResult(Path(run_dir), manifest, summary, pd.concat(tables.values(), ignore_index=True))
