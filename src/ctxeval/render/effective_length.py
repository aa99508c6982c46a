"""effective_length.md: per model its L* (from all targets and from key tokens), the gain to the
longest length, the last doubling that still helped, and the curve."""

from __future__ import annotations


from ctxeval.render.lengths import describe_length


def _ci(e: dict | None, fmt: str = "+.4f") -> str:
    if e is None:
        return "—"
    if e["interval"] == "none":
        return f"{e['estimate']:{fmt}} (no interval)"
    return f"{e['estimate']:{fmt}} [{e['low']:{fmt}}, {e['high']:{fmt}}]"


def render_markdown(summary: dict) -> str:
    """effective_length.md: L* per model, then each model's gains per doubling."""
    est = summary["estimator"]
    lines = [
        "# Effective context length",
        "",
        f"{len(summary['documents'])} document(s), {summary['spans']} spans of {summary['targets_per_span']} targets, the same targets at every length "
        f"({', '.join(str(x) for x in summary['lengths'])} tokens; target j of a span sees L + j).",
        f"{est['rule']} ({100 * est['confidence']:g} %, {est['replicates']} replicates).",
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
    if summary["comparisons"]:
        lines += ["", "| gain B − A | lengths | difference (nats/token) | spans |", "|---|---|---|---|"]
        for c in summary["comparisons"]:
            lines.append(f"| {c['b']} − {c['a']} | {c['lengths'][0]}→{c['lengths'][1]} | {_ci(c['gain_difference'])} | {c['spans']} |")
    for model, s in summary["models"].items():
        lines += ["", f"## {model}", "", "| doubling | log p gain | AVG gain | key-token log p gain |", "|---|---|---|---|"]
        for d in s["doublings"]:
            lines.append(f"| {d['from']}→{d['to']} | {_ci(d['logprob_gain'])} | {_ci(d['avg_gain'])} | {_ci(d['key_logprob_gain'])} |")
    return "\n".join(lines) + "\n"
