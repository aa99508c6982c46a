"""context_gain.md: per text and model, both perplexities, the gain with its paired interval,
LongPPL over the key tokens, and the gain by distance."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pandas as pd

from ctxeval.render import figures
from ctxeval.render.intervals import collapsed, header, numbers
from ctxeval.render.renderer import Renderer
from ctxeval.render.views import gain_view
from ctxeval.results.context_gain import PLOT_FILE, ContextGainResult
from ctxeval.stats.interval import Interval


def render_markdown(summary: dict, by_distance: pd.DataFrame) -> str:
    """Per text and model: both perplexities, the gain with its interval, LongPPL; then gain by distance."""
    lines = [
        f"# Context gain: chunked W={summary['window']} vs last k={summary['short']} tokens (stride {summary['short_stride']})",
        "",
        f"Key tokens by `{summary['key_tokens']['evaluator']}`: g > {summary['key_tokens']['alpha']:g} and log p_long > {summary['key_tokens']['beta']:g}.",
        "",
        f"| text | model | tokens | PPL long | PPL short | PPL ratio long/short [{header(kinds_of(summary, 'ppl_ratio_long_over_short'))}] | "
        "mean gain (nats) | gain, distant targets | key tokens | LongPPL | PPL of key tokens, short |",
        "|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    for text_id, entry in summary["texts"].items():
        for model, s in entry["by_model"].items():
            gain, ratio = s["mean_gain"], Interval.from_row(s["ppl_ratio_long_over_short"])
            # "no interval (one block of N targets): ...", never a zero-width interval
            interval = numbers(ratio, 4) if ratio.has_interval else f"{ratio.estimate:.4f} {ratio.reason}"
            if gain["degenerate"]:
                interval += f" (degenerate: {gain['reason']})"
            lines.append(
                f"| {text_id} | {model} | {s['n_tokens']} | {s['ppl_long']:.3f} | {s['ppl_short']:.3f} | "
                f"{interval} | {gain['estimate']:+.4f} | "
                f"{_fmt(s['mean_gain_distant'], '+.4f')} | {s['n_key']} ({100 * s['key_fraction']:.2f} %) | {_fmt(s['longppl'], '.3f')} | {_fmt(s['longppl_short'], '.3f')} |"
            )
    lines += ["", "## Gain by long-context length", "", collapsed(by_distance, 4).to_markdown(index=False, floatfmt=".4f"), ""]
    return "\n".join(lines)


def kinds_of(summary: dict, name: str) -> list[tuple[float, str]]:
    """The (confidence, method) pairs interval `name` holds at over every text and model."""
    return list(dict.fromkeys((s[name]["confidence"], s[name]["method"]) for entry in summary["texts"].values() for s in entry["by_model"].values()))


def _fmt(value: float | None, spec: str) -> str:
    return "—" if value is None else format(value, spec)


def texts(r: ContextGainResult) -> ContextGainResult:
    """context_gain.md, from the summary and the gain by distance."""
    return replace(r, markdown=render_markdown(r.summary, r.by_distance))


def draw(r: ContextGainResult, out: Path) -> None:
    figures.plot_gain(r.tables, r.by_distance, out / PLOT_FILE)


RENDERER = Renderer(texts, gain_view, draw)
