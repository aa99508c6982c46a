"""effective_length.md: per model its L* (from all targets and from key tokens), the gain to the
longest length, the last doubling that still helped, and the curve."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pandas as pd

from ctxeval.render import figures
from ctxeval.render import intervals
from ctxeval.render.headline import Headline, percent
from ctxeval.render.renderer import Renderer
from ctxeval.render.views import Arm, RunView, header
from ctxeval.results.effective_length import PLOT_FILE, describe_length, EffectiveLengthResult
from ctxeval.render.verdicts import VERDICT_RULE, verdict_words


def _ci(e: dict | None, fmt: str = "+.4f") -> str:
    if e is None:
        return "—"
    if e["interval"] == "none":
        return f"{e['estimate']:{fmt}} (no interval)"
    return f"{e['estimate']:{fmt}} [{e['low']:{fmt}}, {e['high']:{fmt}}]"


def _negated(e: dict) -> dict:
    """A paired difference b − a as a − b (its interval's ends swapped)."""
    return e | {"estimate": -e["estimate"], "low": None if e["low"] is None else -e["high"], "high": None if e["high"] is None else -e["low"]}


def _share(s: dict) -> str:
    if s["estimate"] is None:
        return "undefined (the reference gains nothing)"
    if s["interval"] == "none":
        return f"{percent(s['estimate'])} ({s['reason']})" if s["reason"].startswith("no interval") else f"{percent(s['estimate'])} (no interval: {s['reason']})"
    return f"{percent(s['estimate'])} [{percent(s['low'])}, {percent(s['high'])}]"


def verdict_text(v: dict) -> str:
    """A variant's verdict against the reference in one cell (a loss of gain: higher is worse)."""
    return verdict_words(v["outcome"], v["low"], v["high"], v["delta"], v["samples_needed"], v["unit"], worse="lower")


def headline(summary: dict) -> Headline:
    """Per variant its verdict against the reference (the first model) first: is its loss of
    gain within δ, does it hurt, or are there too few samples to tell; then per model its L* (where
    the reference's own gain is measurable), its mean log-probability at the longest length and
    its gain from the shortest, the gain it loses and the share of the reference's gain it keeps."""
    lengths = summary["lengths"]
    first, last = lengths[0], lengths[-1]
    reference = next(iter(summary["models"]))
    against = {c["b"]: c for c in summary["comparisons"]}
    conf = intervals.level(summary['estimator']['confidence'])
    rows = []
    for model, s in summary["models"].items():
        c = against.get(model)
        rows.append((model, (verdict_text(c["verdict"]) if "verdict" in c else "—") if c else "reference", describe_length(s["effective_length"]), f"{s['curve'][-1]['logprob']:.3f}", _ci(s["curve"][-1]["gain"], "+.3f"),
                     _ci(_negated(c["gain_difference"]), "+.3f") if c else "reference", _share(c["share_kept"]) if c else "—"))
    notes = [f"Reference: {reference}, the first --model."] if len(rows) > 1 else []
    if len(rows) > 1 and "delta" in summary["estimator"]:
        delta = summary["estimator"]["delta"]
        notes.append(f"Verdict on the gain {first}→{last} each model loses against the reference, paired on the same targets ({conf} interval, "
                     f"δ = {delta:g} nats/token): {VERDICT_RULE}.")
    for c in summary["comparisons"]:
        if c.get("verdict", {}).get("reason"):
            notes.append(f"Verdict on {c['b']}: {c['verdict']['reason']}.")
    reason = next(iter(summary["models"].values()))["effective_length"].get("not_measurable")
    if reason:
        notes.append(f"L* {reason}.")
    stars = [s["effective_length"] for s in summary["models"].values()]
    notes.append(f"L*: the shortest length whose gain over {first} tokens reaches {summary['estimator']['share']:g} of the gain at {last} "
                 f"(interval: {intervals.rows_header(stars)}; ≥ {last}: still gaining at the longest length).")
    if len(rows) > 1:
        lost = summary["comparisons"][0]["gain_difference"]
        notes.append(f"Gain lost: the reference's gain {first}→{last} minus the model's, in nats/token, paired on the same targets "
                     f"({intervals.level(lost['confidence'])} {lost.get('method', '')}); "
                     f"share kept: the model's gain ÷ the reference's (interval: {intervals.rows_header(c['share_kept'] for c in summary['comparisons'])}, the same resamples).")
    return Headline("Effective context length", f"{summary['spans']} spans of {summary['targets_per_span']} targets in {len(summary['documents'])} document(s), "
                    "the same targets at every length; log p: their mean log-probability; gains in nats/token",
                    ("model", "verdict vs reference", f"L* [{conf}]", f"log p at {last}", f"gain {first}→{last} [{conf}]", "gain lost vs reference", "share of reference's gain kept"),
                    tuple(rows), tuple(notes))


def render_markdown(summary: dict) -> str:
    """effective_length.md: the headline (L* per model, each variant against the reference),
    then the design, the key-token L*s and each model's gains per doubling."""
    est = summary["estimator"]
    lines = [
        "# Effective context length",
        "",
        *headline(summary).markdown(),
        "",
        f"{len(summary['documents'])} document(s), {summary['spans']} spans of {summary['targets_per_span']} targets, the same targets at every length "
        f"({', '.join(str(x) for x in summary['lengths'])} tokens; target j of a span sees L + j).",
        f"{est['rule']} ({intervals.level(est['confidence'])}, {est['replicates']} replicates).",
        "",
        "| model | max_context | L* | key-token L* | gain " + f"{summary['lengths'][0]}→{summary['lengths'][-1]} (nats/token) | last significant doubling | key tokens |",
        "|---|---|---|---|---|---|---|",
    ]
    for model, s in summary["models"].items():
        first_gain = s["curve"][-1]["gain"]
        last = s["last_significant_doubling"]
        lines.append(f"| {model} | {s['max_context'] or '—'} | {describe_length(s['effective_length'])} | {describe_length(s['key_effective_length'])} | "
                     f"{_ci(first_gain)} | {last or '—'} | {s['n_key']} of {s['n_targets']} |")
    for model, s in summary["models"].items():
        e = s["effective_length"]
        if e.get("no_gain_seen"):
            lines.append(f"\n{model}: no gain at the longest length ({e['no_gain_seen']}), so L* is the shortest length.")
    warnings = {s["effective_length"].get("warning") for s in summary["models"].values()} - {None}
    lines += [f"\nIntervals over {len(summary['documents'])} documents: {w}; read them as rough." for w in sorted(warnings)]
    for model, s in summary["models"].items():
        lines += ["", f"## {model}", "", "| doubling | log p gain | AVG gain | key-token log p gain |", "|---|---|---|---|"]
        for d in s["doublings"]:
            lines.append(f"| {d['from']}→{d['to']} | {_ci(d['logprob_gain'])} | {_ci(d['avg_gain'])} | {_ci(d['key_logprob_gain'])} |")
    return "\n".join(lines) + "\n"


def texts(r: EffectiveLengthResult) -> EffectiveLengthResult:
    """effective_length.md, from the summary."""
    return replace(r, markdown=render_markdown(r.summary))


def view(result: EffectiveLengthResult, label: str, first_arm: int) -> tuple[RunView, list[Arm]]:
    """An effective-length run: L* per model (all targets and key tokens) and its gain, in the
    headline; the curves with their bands are charts (explorer/render.py's `_effective_charts`);
    each model's records are an arm of the explorer (`arms`)."""
    manifest = result.manifest.to_json()
    view = RunView(label, result.run_dir, "effective-length", manifest, header(manifest, "effective-length"), effective=result.summary,
                   answer=headline(result.summary))
    lengths = result.summary["lengths"]
    for model, s in result.summary["models"].items():
        view.headline.append({"label": f"L* {model}", "value": describe_length(s["effective_length"]), "interval": f"{s['effective_length']['units']} {s['effective_length']['unit']}s"})
        view.headline.append({"label": f"key-token L* {model}", "value": describe_length(s["key_effective_length"]), "interval": f"{s['n_key']} key tokens"})
        gain = s["curve"][-1]["gain"]
        view.headline.append({"label": f"gain {lengths[0]}→{lengths[-1]} {model} (nats/token)", "value": f"{gain['estimate']:+.4f}",
                              "interval": intervals.labelled(gain, "+.4f")})
    return view, arms(result, label, first_arm)


def arms(result: EffectiveLengthResult, label: str, first_arm: int) -> list[Arm]:
    """Each model's records (every target at every length, one window per span and length), with
    per record its gain over the shortest length (its log p minus the same target's log p at L_1)
    and its key-token flag, both from the target table the curve was computed from."""
    if result.records is None:
        return []
    manifest = result.manifest.to_json()
    target = ["text_id", "span", "target_pos"]
    shortest = result.targets[result.targets["length"] == result.summary["lengths"][0]]
    out = []
    for i, (model, part) in enumerate(result.records.groupby("model", sort=False)):
        part = part.reset_index(drop=True)
        first = shortest[shortest["model"] == model].drop_duplicates(target).set_index(target)
        where = pd.MultiIndex.from_frame(part[["text_id", "repeat", "target_pos"]].set_axis(target, axis=1))
        gain = part["logprob"].to_numpy(dtype=float) - first["logprob"].reindex(where).to_numpy(dtype=float)
        key = first["key"].reindex(where).eq(True).to_numpy()  # a target without a row at L_1 is no key token
        out.append(Arm(first_arm + i, label, result.run_dir, "effective-length", model, manifest, part, gain, key))
    return out


def draw(r: EffectiveLengthResult, out: Path) -> None:
    figures.plot_curves(r.summary, out / PLOT_FILE)


RENDERER = Renderer(texts, view, draw)
