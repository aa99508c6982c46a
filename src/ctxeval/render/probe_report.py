"""probe_report.md: the at-a-glance table and one section per probe, each headed by the title the
kinds adding rows to it declare (`Result.PROBE`)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pandas as pd

from ctxeval import catalog
from ctxeval.render import figures
from ctxeval.render.intervals import collapsed
from ctxeval.render.renderer import Renderer
from ctxeval.results.base import result_class
from ctxeval.results.probe_report import PLOT_FILE, ProbeReport


def render(glance: pd.DataFrame, sections: dict[str, pd.DataFrame], run_dirs: list[Path]) -> str:
    """The runs read, the at-a-glance table, then one section per probe."""
    parts = ["# Long-context probe report", "", "Runs: " + ", ".join(f"`{d}`" for d in run_dirs), "", "## At a glance", "",
             _table(glance), "",
             "Reading it: a model that uses distant context has a clearly positive mean gain (nats per token from tokens beyond the short context), "
             "a LongPPL well below its short-context value, and retrieval accuracy that holds up as records grow. Similar perplexities with "
             "different gains or retrieval scores mean perplexity is reflecting local modelling (paper 002). The effective length L* is the shortest context "
             "that brings 95 % of the likelihood gain of the longest one (same targets at every length); the retrieval effective length is the longest "
             "prompt whose retrieval accuracy stays above the threshold.", ""]
    titles = {s.key: s.title for kind in catalog.RESULTS for s in result_class(kind).PROBE}
    for key, rows in sections.items():
        if not rows.empty:
            parts += [f"## {titles[key]}", "", _table(rows), ""]
    return "\n".join(parts)


def _table(frame: pd.DataFrame) -> str:
    """A section's rows, each interval one cell (`intervals.collapsed`)."""
    return collapsed(frame, 4).to_markdown(index=False, floatfmt=".4g") if not frame.empty else "(nothing)"


def texts(r: ProbeReport) -> ProbeReport:
    """probe_report.md, from the at-a-glance table and the sections."""
    return replace(r, markdown=render(r.at_a_glance, r.sections, r.runs))


def draw(r: ProbeReport, out: Path) -> None:
    figures.plot_report(r.sections, out / PLOT_FILE)


RENDERER = Renderer(texts, draw=draw)
