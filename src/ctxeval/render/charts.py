"""Inline SVG charts of the numbers the JSON outputs hold, built with ElementTree so every label
(model names, text ids) is escaped by the XML writer, never pasted into markup."""

from __future__ import annotations

import math
import textwrap
import xml.etree.ElementTree as ET
from dataclasses import dataclass

import numpy as np
import pandas as pd

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2")
RANK_BUCKETS = ("1", "≤10", "≤100", "≤1000", ">1000")
W, PLOT_H, MARGIN = 460, 188, 8  # width, the plotting area's height, the space around the drawing
# report.css draws chart text at 10 px and titles at 12 px bold; a character is estimated
# generously (wider than sans-serif's average), so a label placed by its estimated box never
# overlaps another or runs out of the figure when drawn
FONT_CHAR, TITLE_CHAR = 6.2, 8.0  # px per character
LINE, TITLE_LINE = 13, 15  # px per line of text
SWATCH = 13  # a legend entry's colour square and its gap


@dataclass
class Series:
    label: str
    x: list[float]
    y: list[float]
    lo: list[float] | None = None
    hi: list[float] | None = None


def width(text: str, char: float = FONT_CHAR) -> float:
    """The estimated width of `text` in px."""
    return len(text) * char


def wrap(text: str, room: float, char: float = FONT_CHAR) -> list[str]:
    """`text` in lines no wider than `room` px (estimated), broken at spaces (a word longer than
    a line inside it): a long model name is wrapped, never cut."""
    return textwrap.wrap(text, max(1, int(room // char)), break_on_hyphens=False) or [""]


def _svg(title: str, height: float) -> ET.Element:
    """A figure `height` tall with its title, wrapped to the figure's width (`title_height`)."""
    svg = ET.Element("svg", {"xmlns": "http://www.w3.org/2000/svg", "viewBox": f"0 0 {W} {height:g}", "width": str(W), "height": f"{height:g}", "role": "img", "class": "chart"})
    ET.SubElement(svg, "title").text = title
    for i, line in enumerate(wrap(title, W - 2 * MARGIN, TITLE_CHAR)):
        ET.SubElement(svg, "text", {"x": str(W / 2), "y": str(MARGIN + 11 + TITLE_LINE * i), "text-anchor": "middle", "class": "chart-title"}).text = line
    return svg


def title_height(title: str) -> float:
    """Where the drawing below the title may begin."""
    return MARGIN + TITLE_LINE * len(wrap(title, W - 2 * MARGIN, TITLE_CHAR)) + MARGIN + 4


def legend_height(labels: list[str]) -> float:
    """The height of `_legend`'s entries."""
    return sum(LINE * len(wrap(label, W - 2 * MARGIN - SWATCH)) for label in labels)


def _legend(svg: ET.Element, labels: list[str], top: float) -> None:
    """One entry per label below the plot, each whole: its colour and its text, wrapped."""
    g = ET.SubElement(svg, "g", {"class": "legend"})
    y = top
    for i, label in enumerate(labels):
        entry = ET.SubElement(g, "g", {"class": "legend-entry"})
        ET.SubElement(entry, "rect", {"x": str(MARGIN), "y": f"{y + 1:g}", "width": "9", "height": "9", "fill": PALETTE[i % len(PALETTE)]})
        for line in wrap(label, W - 2 * MARGIN - SWATCH):
            ET.SubElement(entry, "text", {"x": str(MARGIN + SWATCH), "y": f"{y + 9:g}"}).text = line
            y += LINE


def _ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    if hi <= lo:
        return [lo]
    step = 10 ** math.floor(math.log10((hi - lo) / n))
    for m in (1, 2, 5, 10):
        if (hi - lo) / (step * m) <= n:
            step *= m
            break
    return [v for v in np.arange(math.ceil(lo / step) * step, hi + step / 2, step).tolist() if v <= hi]


def _x_labels(axes: ET.Element, places: list[tuple[float, str]], y: float) -> None:
    """Tick labels centred under their x, left out where one would touch the label before it."""
    end = -math.inf
    for x, text in places:
        half = width(text) / 2
        if x - half >= end + 4:
            ET.SubElement(axes, "text", {"x": f"{x:.1f}", "y": f"{y:g}", "text-anchor": "middle"}).text = text
            end = x + half


def line_chart(title: str, xlabel: str, ylabel: str, series: list[Series], log2_x: bool = True, zero_line: bool = False,
               x_labels: dict[float, str] | None = None) -> str:
    """Points joined by lines, with vertical interval bars where `lo`/`hi` are given; x ticks
    at the points' x, labelled with the value or `x_labels[x]`; the legend below. The margins
    follow the labels, so no text overlaps another or leaves the figure."""
    xs = [x for s in series for x in s.x]
    ys = [v for s in series for v in (s.y + (s.lo or []) + (s.hi or [])) if v is not None and math.isfinite(v)]
    if not xs or not ys:
        svg = _svg(title, title_height(title))
        return ET.tostring(svg, encoding="unicode")
    fx = (lambda v: math.log2(max(v, 1e-9))) if log2_x else (lambda v: v)
    x0, x1 = min(map(fx, xs)), max(map(fx, xs))
    y0, y1 = min(ys + ([0.0] if zero_line else [])), max(ys + ([0.0] if zero_line else []))
    if x1 == x0:
        x0, x1 = x0 - 1, x1 + 1
    pad = (y1 - y0) * 0.08 or abs(y0) * 0.1 or 1.0
    y0, y1 = y0 - pad, y1 + pad
    y_ticks = [(v, f"{v:.4g}") for v in _ticks(y0, y1)]
    x_ticks = [(v, (x_labels or {}).get(v, f"{v:g}")) for v in sorted(set(xs))]
    top = title_height(title)
    plot_h = max(PLOT_H, width(ylabel) + 8)  # the rotated y label fits beside the plot
    bottom = top + plot_h
    # room for the y label and tick labels, and for half of the first x label
    left = max(MARGIN + LINE + 4 + max(width(t) for _, t in y_ticks) + 4, width(x_ticks[0][1]) / 2 + MARGIN)
    right = W - max(MARGIN + 4, width(x_ticks[-1][1]) / 2 + MARGIN)  # the last x label whole
    height = bottom + 2 * LINE + 10 + legend_height([s.label for s in series]) + MARGIN
    svg = _svg(title, height)

    def px(v: float) -> float:
        return left + (fx(v) - x0) / (x1 - x0) * (right - left)

    def py(v: float) -> float:
        return top + (y1 - v) / (y1 - y0) * plot_h

    axes = ET.SubElement(svg, "g", {"class": "axes"})
    for v, text in y_ticks:
        ET.SubElement(axes, "line", {"x1": f"{left:.1f}", "x2": f"{right:.1f}", "y1": f"{py(v):.1f}", "y2": f"{py(v):.1f}", "class": "grid"})
        ET.SubElement(axes, "text", {"x": f"{left - 4:.1f}", "y": f"{py(v) + 3:.1f}", "text-anchor": "end"}).text = text
    _x_labels(axes, [(px(v), text) for v, text in x_ticks], bottom + LINE)
    if zero_line and y0 < 0 < y1:
        ET.SubElement(axes, "line", {"x1": f"{left:.1f}", "x2": f"{right:.1f}", "y1": f"{py(0):.1f}", "y2": f"{py(0):.1f}", "class": "zero"})
    ET.SubElement(axes, "text", {"x": f"{(left + right) / 2:.1f}", "y": f"{bottom + 2 * LINE + 2:g}", "text-anchor": "middle"}).text = xlabel
    middle = top + plot_h / 2
    ET.SubElement(axes, "text", {"x": str(MARGIN + 9), "y": f"{middle:.1f}", "text-anchor": "middle", "transform": f"rotate(-90 {MARGIN + 9} {middle:.1f})"}).text = ylabel
    for i, s in enumerate(series):
        colour = PALETTE[i % len(PALETTE)]
        g = ET.SubElement(svg, "g", {"class": "series", "stroke": colour, "fill": colour})
        ET.SubElement(g, "title").text = s.label
        points = [(px(x), py(y)) for x, y in zip(s.x, s.y) if y is not None and math.isfinite(y)]
        ET.SubElement(g, "polyline", {"points": " ".join(f"{a:.1f},{b:.1f}" for a, b in points), "fill": "none"})
        for j, (x, y) in enumerate(zip(s.x, s.y)):
            if s.lo is not None and s.hi is not None and math.isfinite(s.lo[j]) and math.isfinite(s.hi[j]):
                ET.SubElement(g, "line", {"x1": f"{px(x):.1f}", "x2": f"{px(x):.1f}", "y1": f"{py(s.lo[j]):.1f}", "y2": f"{py(s.hi[j]):.1f}", "class": "interval"})
            if math.isfinite(y):
                ET.SubElement(g, "circle", {"cx": f"{px(x):.1f}", "cy": f"{py(y):.1f}", "r": "3"})
    _legend(svg, [s.label for s in series], bottom + 2 * LINE + 10)
    return ET.tostring(svg, encoding="unicode")


def rank_bucket_counts(ranks: np.ndarray) -> list[int]:
    """Targets per GLTR bucket (rank 1, ≤10, ≤100, ≤1000, more); unknown ranks (<1) left out."""
    r = ranks[ranks >= 1]
    edges = [(1, 1), (2, 10), (11, 100), (101, 1000), (1001, np.inf)]
    return [int(((r >= lo) & (r <= hi)).sum()) for lo, hi in edges]


def rank_histogram(title: str, counts: dict[str, list[int]]) -> str:
    """Share of targets per rank bucket, one bar group per bucket, one bar per arm; the legend below."""
    left, right, top = MARGIN + 34, W - MARGIN - 4, title_height(title)
    bottom = top + PLOT_H
    svg = _svg(title, bottom + 2 * LINE + 10 + legend_height(list(counts)) + MARGIN)
    n_groups, n_bars = len(RANK_BUCKETS), max(1, len(counts))
    group_w = (right - left) / n_groups
    bar_w = group_w * 0.8 / n_bars

    def py(v: float) -> float:
        return top + (1 - v) * PLOT_H

    for v in (0, 0.25, 0.5, 0.75, 1.0):
        ET.SubElement(svg, "line", {"x1": str(left), "x2": str(right), "y1": f"{py(v):.1f}", "y2": f"{py(v):.1f}", "class": "grid"})
        ET.SubElement(svg, "text", {"x": str(left - 4), "y": f"{py(v) + 3:.1f}", "text-anchor": "end"}).text = f"{v:.2f}"
    for gi, bucket in enumerate(RANK_BUCKETS):
        ET.SubElement(svg, "text", {"x": f"{left + group_w * (gi + 0.5):.1f}", "y": f"{bottom + LINE:g}", "text-anchor": "middle"}).text = bucket
    for bi, (label, c) in enumerate(counts.items()):
        total = sum(c) or 1
        for gi, value in enumerate(c):
            x = left + group_w * gi + group_w * 0.1 + bar_w * bi
            rect = ET.SubElement(svg, "rect", {"x": f"{x:.1f}", "y": f"{py(value / total):.1f}", "width": f"{bar_w:.1f}", "height": f"{py(0) - py(value / total):.1f}", "fill": PALETTE[bi % len(PALETTE)]})
            ET.SubElement(rect, "title").text = f"{label}: {value} targets ({value / total:.3f}) at rank {RANK_BUCKETS[gi]}"
    ET.SubElement(svg, "text", {"x": f"{(left + right) / 2:.1f}", "y": f"{bottom + 2 * LINE + 2:g}", "text-anchor": "middle"}).text = "rank of the target (share of targets)"
    _legend(svg, list(counts), bottom + 2 * LINE + 10)
    return ET.tostring(svg, encoding="unicode")


def heatmap(title: str, cells: pd.DataFrame, column: str = "accuracy") -> str:
    """Retrieval accuracy over (lines or token target) × depth, one cell per grid point."""
    size = "tokens_target" if "tokens_target" in cells else "lines"
    pivot = cells.pivot(index="depth", columns=size, values=column).sort_index()
    rows, cols = pivot.shape
    depths = [f"{d:g}" for d in pivot.index]
    left, right, top = MARGIN + max(width(d) for d in depths) + 6, W - MARGIN, title_height(title)
    height = top + 22 * rows + 2 * LINE + 4 + MARGIN
    svg = _svg(title, height)
    cw = (right - left) / max(cols, 1)
    for i, depth in enumerate(depths):
        y = top + 22 * (rows - 1 - i)
        ET.SubElement(svg, "text", {"x": f"{left - 4:.1f}", "y": f"{y + 15:g}", "text-anchor": "end"}).text = depth
        for j, value in enumerate(pivot.iloc[i].to_numpy(dtype=float)):
            shade = 0.0 if not math.isfinite(value) else value
            fill = f"rgb({round(255 - 200 * shade)},{round(255 - 80 * shade)},{round(255 - 200 * shade)})"
            ET.SubElement(svg, "rect", {"x": f"{left + cw * j:.1f}", "y": f"{y:g}", "width": f"{cw - 1:.1f}", "height": "21", "fill": fill})
            ET.SubElement(svg, "text", {"x": f"{left + cw * (j + 0.5):.1f}", "y": f"{y + 15:g}", "text-anchor": "middle"}).text = "—" if not math.isfinite(value) else f"{value:.2f}"
    _x_labels(svg, [(left + cw * (j + 0.5), f"{c:g}") for j, c in enumerate(pivot.columns)], top + 22 * rows + LINE)
    ET.SubElement(svg, "text", {"x": f"{(left + right) / 2:.1f}", "y": f"{height - MARGIN:g}", "text-anchor": "middle"}).text = "prompt tokens (target)" if size == "tokens_target" else "lines in the record (rows: depth)"
    return ET.tostring(svg, encoding="unicode")
