"""Render the `ctxeval report` page of a set of runs: their views and pairs, drawn with render/'s
page parts and charts (`report.html.j2`, `explorer.js`)."""

from __future__ import annotations

import math
import os
from pathlib import Path

from markupsafe import Markup

from ctxeval.explorer.data import DEFAULT_TOP_K_SHOWN, arm_payload, load_runs
from ctxeval.explorer.pairs import ArmPair, Compare, all_pairs
from ctxeval.render.views import Arm, RunView, TokenPair
from ctxeval.render import charts, intervals
from ctxeval.results.effective_length import describe_length
from ctxeval.render.page import b64, environment, page_js, script_json, static
from ctxeval.results.base import make_folder


def write_atomic(out: Path, html: str) -> Path:
    """Write a page through a temporary file and a rename: never a half-written report."""
    make_folder(out.parent)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(html, encoding="utf-8")
    os.replace(tmp, out)
    return out


def _lm_charts(views: list[RunView]) -> list[Markup]:
    out = []
    for metric, name in (("ppl", "PPL (exact)"), ("avg", "AVG rank score")):
        series, kinds = [], []
        for view in views:
            if view.summary is None or view.summary.empty:
                continue
            kinds += intervals.kinds(view.summary, metric)
            for key, g in view.summary.groupby(["model", "text_id", "method", "context_mode"], sort=False):
                g = g.sort_values("nominal_len")
                series.append(charts.Series(f"{view.label} · {key[0]} · {key[1]} · {key[3]}", g["nominal_len"].tolist(), g[metric].tolist(),
                                            g[f"{metric}.low"].tolist(), g[f"{metric}.high"].tolist()))
        if series:
            out.append(Markup(charts.line_chart(f"{name} vs context length ({intervals.header(dict.fromkeys(kinds))})", "context length (tokens)", name, series)))
    return out


def _gain_charts(views: list[RunView]) -> list[Markup]:
    out = []
    for view in views:
        if view.gain_by_distance is None:
            continue
        series = []
        for label, g in view.gain_by_distance.groupby("series", sort=False):
            mid = ((g["context_from"].clip(lower=1) * g["context_to"]) ** 0.5).tolist()
            series.append(charts.Series(label, mid, g["mean_gain"].tolist(), g["mean_gain.low"].astype(float).tolist(), g["mean_gain.high"].astype(float).tolist()))
        title = f"{view.label}: gain by distance ({intervals.table_header(view.gain_by_distance, 'mean_gain')})"
        out.append(Markup(charts.line_chart(title, "long context of the target (bin centre)", "mean gain (nats)", series, zero_line=True)))
    return out


def _effective_charts(views: list[RunView]) -> list[Markup]:
    """Per effective-length run: the gain over the shortest length with its paired band, and
    the key tokens' mean log-probability; each series names its model's L*."""
    out = []
    for view in views:
        if view.effective is None:
            continue
        gains, keys = [], []
        for model, s in view.effective["models"].items():
            label = f"{model} · L* {describe_length(s['effective_length'])}"
            xs = [p["length"] for p in s["curve"]]
            points = [p["gain"] or {"estimate": 0.0, "low": 0.0, "high": 0.0} for p in s["curve"]]
            gains.append(charts.Series(label, xs, [g["estimate"] for g in points],
                                       [math.nan if g["low"] is None else g["low"] for g in points], [math.nan if g["high"] is None else g["high"] for g in points]))
            if s["n_key"]:
                keys.append(charts.Series(f"{model} · {s['n_key']} key tokens", xs, [p["key_logprob"] for p in s["curve"]]))
        band = intervals.rows_header(p["gain"] for s in view.effective["models"].values() for p in s["curve"] if p["gain"])
        out.append(Markup(charts.line_chart(f"{view.label}: log p gain over the shortest length ({band})", "context length L (tokens)", "mean gain (nats/token)", gains, zero_line=True)))
        if keys:
            out.append(Markup(charts.line_chart(f"{view.label}: key tokens", "context length L (tokens)", "mean log p of key tokens", keys)))
    return out


def _retrieval_charts(views: list[RunView]) -> list[Markup]:
    out = []
    for view in views:
        if view.retrieval_cells is None:
            continue
        for model, cells in view.retrieval_cells.groupby("model", sort=False):
            out.append(Markup(charts.heatmap(f"{view.label} · {model}: retrieval accuracy (lines × depth)", cells)))
    return out


def _ruler_charts(views: list[RunView]) -> list[Markup]:
    """Per RULER run: each model's score by length with its interval, as its view gives it."""
    out = []
    for view in views:
        if view.curves is None or view.curves.empty:
            continue
        series = [charts.Series(str(model), g["length"].tolist(), g["score"].tolist(), g["low"].tolist(), g["high"].tolist())
                  for model, g in view.curves.sort_values("length").groupby("series", sort=False)]
        out.append(Markup(charts.line_chart(view.curves_title, "length (tokens)", "score (%)", series)))
    return out


def _compare_charts(pairs: list[ArmPair]) -> list[Markup]:
    series = [
        charts.Series(f"{p.b.run} · {p.b.model} / {p.a.run} · {p.a.model}", p.by_length["nominal_len"].tolist(), p.by_length["ratio"].tolist(), p.by_length["lo"].tolist(), p.by_length["hi"].tolist())
        for p in pairs
        if not p.by_length.empty
    ]
    found = intervals.rows_header(r["ratio"] for p in pairs for r in p.comparison.report["by_length"])
    return [Markup(charts.line_chart(f"PPL ratio B/A per context length ({found} interval)", "context length (tokens)", "PPL ratio B/A", series))] if series else []


def payload(arms: list[Arm], pairs: list[TokenPair], top_k_shown: int) -> dict:
    """The explorer's data: every arm's columns and, per pair (of two runs, or a run's own), Δ
    aligned to arm A's tokens."""
    return {
        "arms": [arm_payload(arm, top_k_shown) for arm in arms],
        "pairs": [{"a": p.a.index, "b": p.b.index, "label": f"A {p.a.run} · {p.a.model} − B {p.b.run} · {p.b.model}", "delta": b64(p.delta, "f4")} for p in pairs],
    }


def render_report(run_dirs: list[Path], compare: Compare, top_k_shown: int = DEFAULT_TOP_K_SHOWN) -> str:
    """The whole report as one HTML string; `compare` compares its language-modelling arms."""
    views, arms = load_runs(run_dirs)
    pairs = all_pairs(arms, compare)
    counts = {f"{a.run} · {a.model}": charts.rank_bucket_counts(a.records["rank"].to_numpy(dtype=float)) for a in arms}
    chart_list = _lm_charts(views) + ([Markup(charts.rank_histogram("rank of the target (GLTR buckets)", counts))] if counts else [])
    chart_list += _gain_charts(views) + _effective_charts(views) + _retrieval_charts(views) + _ruler_charts(views) + _compare_charts(pairs)
    samples = [{"run": view.label, **entry} for view in views for entry in (view.samples or [])]
    ratios = [p.comparison.report["primary_metric"]["ratio"] for p in pairs]
    compare_rows = [
        {"label": f"B {p.b.run} · {p.b.model} vs A {p.a.run} · {p.a.model}", "ratio": f"{ratio['estimate']:.4f}", "interval": intervals.bounds(ratio, ".4f"),
         "windows": p.comparison.report["dataset"]["windows"]["stats"]["compared_windows"]}
        for p, ratio in zip(pairs, ratios)
    ]
    template = environment().get_template("report.html.j2")
    return template.render(
        views=views,
        charts=chart_list,
        compare_rows=compare_rows,
        compare_header=intervals.rows_header(ratios),
        n_tokens=sum(len(a.records) for a in arms),
        n_samples=len(samples),
        data=script_json(payload(arms, [*pairs, *(p for view in views for p in view.pairs)], top_k_shown)) if arms else None,
        samples=script_json({"samples": samples}) if samples else None,
        css=Markup(static("report.css")),
        js=page_js("explorer.js") if arms else None,
        samples_js=Markup(static("samples.js")) if samples else None,
    )
