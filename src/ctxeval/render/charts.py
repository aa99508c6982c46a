"""Inline SVG charts of the numbers the JSON outputs hold, built with ElementTree so every label
(model names, text ids) is escaped by the XML writer, never pasted into markup."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass

import numpy as np
import pandas as pd

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2")
RANK_BUCKETS = ("1", "≤10", "≤100", "≤1000", ">1000")
W, H, LEFT, RIGHT, TOP, BOTTOM = 460, 260, 56, 12, 28, 44


@dataclass
class Series:
    label: str
    x: list[float]
    y: list[float]
    lo: list[float] | None = None
    hi: list[float] | None = None


def _svg(title: str, height: int = H) -> ET.Element:
    svg = ET.Element("svg", {"xmlns": "http://www.w3.org/2000/svg", "viewBox": f"0 0 {W} {height}", "width": str(W), "height": str(height), "role": "img", "class": "chart"})
    ET.SubElement(svg, "title").text = title
    ET.SubElement(svg, "text", {"x": str(W / 2), "y": "16", "text-anchor": "middle", "class": "chart-title"}).text = title
    return svg


def _ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    if hi <= lo:
        return [lo]
    step = 10 ** math.floor(math.log10((hi - lo) / n))
    for m in (1, 2, 5, 10):
        if (hi - lo) / (step * m) <= n:
            step *= m
            break
    return [v for v in np.arange(math.ceil(lo / step) * step, hi + step / 2, step).tolist()]


def line_chart(title: str, xlabel: str, ylabel: str, series: list[Series], log2_x: bool = True, zero_line: bool = False,
               x_labels: dict[float, str] | None = None) -> str:
    """Points joined by lines, with vertical interval bars where `lo`/`hi` are given; x ticks
    at the points' x, labelled with the value or `x_labels[x]`."""
    svg = _svg(title)
    xs = [x for s in series for x in s.x]
    ys = [v for s in series for v in (s.y + (s.lo or []) + (s.hi or [])) if v is not None and math.isfinite(v)]
    if not xs or not ys:
        return ET.tostring(svg, encoding="unicode")
    fx = (lambda v: math.log2(max(v, 1e-9))) if log2_x else (lambda v: v)
    x0, x1 = min(map(fx, xs)), max(map(fx, xs))
    y0, y1 = min(ys + ([0.0] if zero_line else [])), max(ys + ([0.0] if zero_line else []))
    if x1 == x0:
        x0, x1 = x0 - 1, x1 + 1
    pad = (y1 - y0) * 0.08 or abs(y0) * 0.1 or 1.0
    y0, y1 = y0 - pad, y1 + pad

    def px(v: float) -> float:
        return LEFT + (fx(v) - x0) / (x1 - x0) * (W - LEFT - RIGHT)

    def py(v: float) -> float:
        return TOP + (y1 - v) / (y1 - y0) * (H - TOP - BOTTOM)

    axes = ET.SubElement(svg, "g", {"class": "axes"})
    for v in _ticks(y0, y1):
        ET.SubElement(axes, "line", {"x1": str(LEFT), "x2": str(W - RIGHT), "y1": f"{py(v):.1f}", "y2": f"{py(v):.1f}", "class": "grid"})
        ET.SubElement(axes, "text", {"x": str(LEFT - 4), "y": f"{py(v) + 3:.1f}", "text-anchor": "end"}).text = f"{v:.4g}"
    for v in sorted(set(xs)):
        ET.SubElement(axes, "text", {"x": f"{px(v):.1f}", "y": str(H - BOTTOM + 14), "text-anchor": "middle"}).text = (x_labels or {}).get(v, f"{v:g}")
    if zero_line and y0 < 0 < y1:
        ET.SubElement(axes, "line", {"x1": str(LEFT), "x2": str(W - RIGHT), "y1": f"{py(0):.1f}", "y2": f"{py(0):.1f}", "class": "zero"})
    ET.SubElement(axes, "text", {"x": str((LEFT + W - RIGHT) / 2), "y": str(H - 8), "text-anchor": "middle"}).text = xlabel
    ET.SubElement(axes, "text", {"x": "12", "y": str((TOP + H - BOTTOM) / 2), "text-anchor": "middle", "transform": f"rotate(-90 12 {(TOP + H - BOTTOM) / 2})"}).text = ylabel
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
    _legend(svg, [s.label for s in series])
    return ET.tostring(svg, encoding="unicode")


def _legend(svg: ET.Element, labels: list[str]) -> None:
    g = ET.SubElement(svg, "g", {"class": "legend"})
    for i, label in enumerate(labels[:6]):
        y = TOP + 4 + 13 * i
        ET.SubElement(g, "rect", {"x": str(LEFT + 8), "y": str(y), "width": "9", "height": "9", "fill": PALETTE[i % len(PALETTE)]})
        ET.SubElement(g, "text", {"x": str(LEFT + 21), "y": str(y + 8)}).text = label


def rank_bucket_counts(ranks: np.ndarray) -> list[int]:
    """Targets per GLTR bucket (rank 1, ≤10, ≤100, ≤1000, more); unknown ranks (<1) left out."""
    r = ranks[ranks >= 1]
    edges = [(1, 1), (2, 10), (11, 100), (101, 1000), (1001, np.inf)]
    return [int(((r >= lo) & (r <= hi)).sum()) for lo, hi in edges]


def rank_histogram(title: str, counts: dict[str, list[int]]) -> str:
    """Share of targets per rank bucket, one bar group per bucket, one bar per arm."""
    svg = _svg(title)
    n_groups, n_bars = len(RANK_BUCKETS), max(1, len(counts))
    group_w = (W - LEFT - RIGHT) / n_groups
    bar_w = group_w * 0.8 / n_bars
    top = TOP + 14 * min(len(counts), 6)

    def py(v: float) -> float:
        return top + (1 - v) * (H - top - BOTTOM)

    for v in (0, 0.25, 0.5, 0.75, 1.0):
        ET.SubElement(svg, "line", {"x1": str(LEFT), "x2": str(W - RIGHT), "y1": f"{py(v):.1f}", "y2": f"{py(v):.1f}", "class": "grid"})
        ET.SubElement(svg, "text", {"x": str(LEFT - 4), "y": f"{py(v) + 3:.1f}", "text-anchor": "end"}).text = f"{v:.2f}"
    for gi, bucket in enumerate(RANK_BUCKETS):
        ET.SubElement(svg, "text", {"x": f"{LEFT + group_w * (gi + 0.5):.1f}", "y": str(H - BOTTOM + 14), "text-anchor": "middle"}).text = bucket
    for bi, (label, c) in enumerate(counts.items()):
        total = sum(c) or 1
        for gi, value in enumerate(c):
            x = LEFT + group_w * gi + group_w * 0.1 + bar_w * bi
            rect = ET.SubElement(svg, "rect", {"x": f"{x:.1f}", "y": f"{py(value / total):.1f}", "width": f"{bar_w:.1f}", "height": f"{py(0) - py(value / total):.1f}", "fill": PALETTE[bi % len(PALETTE)]})
            ET.SubElement(rect, "title").text = f"{label}: {value} targets ({value / total:.3f}) at rank {RANK_BUCKETS[gi]}"
    ET.SubElement(svg, "text", {"x": str((LEFT + W - RIGHT) / 2), "y": str(H - 8), "text-anchor": "middle"}).text = "rank of the target (share of targets)"
    _legend(svg, list(counts))
    return ET.tostring(svg, encoding="unicode")


def heatmap(title: str, cells: pd.DataFrame, column: str = "accuracy") -> str:
    """Retrieval accuracy over (lines or token target) × depth, one cell per grid point."""
    size = "tokens_target" if "tokens_target" in cells else "lines"
    pivot = cells.pivot(index="depth", columns=size, values=column).sort_index()
    rows, cols = pivot.shape
    height = TOP + 22 * rows + BOTTOM
    svg = _svg(title, height)
    cw = (W - LEFT - RIGHT) / max(cols, 1)
    for i, depth in enumerate(pivot.index):
        y = TOP + 22 * (rows - 1 - i)
        ET.SubElement(svg, "text", {"x": str(LEFT - 4), "y": str(y + 15), "text-anchor": "end"}).text = f"{depth:g}"
        for j, value in enumerate(pivot.iloc[i].to_numpy(dtype=float)):
            shade = 0.0 if not math.isfinite(value) else value
            fill = f"rgb({round(255 - 200 * shade)},{round(255 - 80 * shade)},{round(255 - 200 * shade)})"
            ET.SubElement(svg, "rect", {"x": f"{LEFT + cw * j:.1f}", "y": str(y), "width": f"{cw - 1:.1f}", "height": "21", "fill": fill})
            ET.SubElement(svg, "text", {"x": f"{LEFT + cw * (j + 0.5):.1f}", "y": str(y + 15), "text-anchor": "middle"}).text = "—" if not math.isfinite(value) else f"{value:.2f}"
    for j, c in enumerate(pivot.columns):
        ET.SubElement(svg, "text", {"x": f"{LEFT + cw * (j + 0.5):.1f}", "y": str(TOP + 22 * rows + 14), "text-anchor": "middle"}).text = f"{c:g}"
    ET.SubElement(svg, "text", {"x": str((LEFT + W - RIGHT) / 2), "y": str(height - 8), "text-anchor": "middle"}).text = "prompt tokens (target)" if size == "tokens_target" else "lines in the record (rows: depth)"
    return ET.tostring(svg, encoding="unicode")
