"""The Markdown of a paired comparison (compare.md), from the report compare.json holds."""

from __future__ import annotations

from dataclasses import replace

from ctxeval.render import intervals
from ctxeval.render.compare_samples import render_samples_markdown
from ctxeval.render.numerics import markdown_lines
from ctxeval.render.renderer import Renderer
from ctxeval.render.views import compare_view
from ctxeval.results.comparison import Comparison, window_label
from ctxeval.stats.interval import Interval


def _level(row: dict) -> str:
    """'95 % BCa interval ' before an interval row's bounds; nothing before 'no interval'."""
    return "" if row["low"] is None else f"{intervals.rows_header([row])} interval "


def render_markdown(report: dict) -> str:
    pm = report["primary_metric"]
    ratio, log = pm["ratio"], pm["delta_log_nll"]
    halves = {name: h for name, h in pm["drift"].items() if h}
    st = report["dataset"]["windows"]["stats"]
    bs = st["bootstrap"]
    unit = {"text": "documents", "window": "windows"}[bs["resampling_unit"]]
    scheme = {"windows": "drawn uniformly, ratio of sums", "tokens": "drawn with probability ∝ tokens, plain mean of Δ"}[bs["resample"]]
    lines = [
        "# ctxeval paired comparison",
        "",
        f"A: `{report['runs']['a']}`  ",
        f"B: `{report['runs']['b']}`",
        "",
        f"**Perplexity ratio B/A = {ratio['estimate']:.4f}**, {_level(ratio)}{intervals.bounds(ratio, '.4f')} "
        f"(PPL A {pm['preview']:.3f}, B {pm['final']:.3f}; Δ log-NLL {intervals.numbers(Interval.from_row(log), 5, signed=True)})",
        "",
        "| arm | run windows | run tokens | compared windows | compared tokens | PPL | minima (windows / tokens) |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for arm, label in (("preview", "A (preview)"), ("final", "B (final)")):
        cov = st["coverage"][arm]
        minima = "none set" if cov["minima_met"] is None else f"{cov['min_windows']} / {cov['min_tokens']}: {'met' if cov['minima_met'] else 'NOT met'}"
        lines.append(f"| {label} | {cov['windows']} | {cov['tokens']} | {cov['compared_windows']} | {cov['compared_tokens']} | {pm[arm]:.3f} | {minima} |")
    lines += ["", f"| drift: half of A's run order | windows | ratio B/A | {intervals.rows_header(h['ratio'] for h in halves.values())} interval |", "|---|---:|---:|---|"]
    for name, h in halves.items():
        lines.append(f"| {name.replace('_', ' ')} | {h['windows']} | {h['ratio']['estimate']:.4f} | {intervals.bounds(h['ratio'], '.4f')} |")
    scores = report["secondary_metrics"]
    lines += ["", f"| rank score | B − A | {intervals.rows_header(m['difference'] for m in scores.values())} interval |", "|---|---:|---|"]
    for name, m in scores.items():
        lines.append(f"| {name} | {m['difference']['estimate']:+.4f} | {intervals.bounds(m['difference'], '+.4f')} |")
    lines += [
        "",
        f"Pairing: {st['paired_documents']} documents paired (A {st['documents_a']}, B {st['documents_b']}); "
        f"{st['paired_windows']} windows paired (A {st['windows_a']}, B {st['windows_b']}), {st['compared_windows']} compared; match fraction {st['window_match_fraction']:.3f}, "
        f"overlap fraction {st['window_overlap_fraction']:.3f}, token-count mismatches {st['token_count_mismatches']}.",
        f"Bootstrap: {bs['method']} over {bs['resampling_units']} {unit} ({scheme}; --resample {bs['resample']}), {bs['replicates']} replicates, seed {bs['seed']}, z0 {bs['z0']}, acceleration {bs['acceleration']}.",
        f"Resampling unit: {bs['unit_reason']}.",
    ]
    if bs["warning"]:
        lines.append(f"**Warning:** {bs['warning']}.")
    inv = report["invariants"]
    if inv["violations"]:
        lines.append("**Contract violations** (paper 001: match fraction 1.0, overlap fraction 0.0): " + "; ".join(inv["violations"]) + ".")
    else:
        lines.append("Contract (paper 001): match fraction 1.0, overlap fraction 0.0: holds.")
    excluded = st["excluded_windows"]
    if excluded["count"]:
        ids = ", ".join(f"{window_label(w)} (NaN in {w['nan_in']})" for w in excluded["windows"])
        lines.append(f"Excluded: {excluded['count']} paired windows whose {excluded['reason']}: {ids}.")
    if st["paired_delta_summary"]["reason"]:
        label = "Degenerate: " if st["paired_delta_summary"]["degenerate"] else ""
        lines.append(f"{label}{st['paired_delta_summary']['reason']}.")
    lines += markdown_lines(report.get("numerics"))
    return "\n".join(lines) + "\n"


def texts(r: Comparison) -> Comparison:
    """compare.md, from the report (of two ctxeval scoring runs, or of per-sample runs)."""
    if r.report.get("kind") == "samples":
        return replace(r, markdown=render_samples_markdown(r.report))
    return replace(r, markdown=render_markdown(r.report))


RENDERER = Renderer(texts, compare_view)
