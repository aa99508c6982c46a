"""Tables shaped like the thesis's: Table 1 (AVG), Table 2 (approx. PPL), Appendix A (all scores)."""

from __future__ import annotations

import pandas as pd

from ctxeval.config import MetricConfig
from ctxeval.metrics.rank import alpha_key


def score_columns(metrics: MetricConfig) -> list[tuple[str, str]]:
    """(summary column, thesis label) of every per-length score, in the thesis's order."""
    labels = [("ppl", "PPL"), ("approx_ppl", f"PPL~(k={metrics.approx_k})"), ("lin", "LIN"), ("rp", "RP")]
    labels += [(alpha_key(a), f"A{a:g}") for a in metrics.alphas]
    labels += [("avg", "AVG"), ("top1", "TOP1"), ("bpb", "BPB")]
    return labels


def _setting(row_keys: tuple) -> str:
    method, mode = row_keys
    return method if method != "sweep" else f"sweep ({mode})"


def pivot(summary: pd.DataFrame, column: str) -> dict[tuple, pd.DataFrame]:
    """Per (text, setting): rows = context length, columns = models, values = `column`."""
    out: dict[tuple, pd.DataFrame] = {}
    for (text_id, method, mode), group in summary.groupby(["text_id", "method", "context_mode"], sort=False):
        table = group.pivot_table(index="nominal_len", columns="model", values=column, sort=False)
        table.index.name = "length"
        out[(text_id, _setting((method, mode)))] = table
    return out


def appendix(summary: pd.DataFrame, metrics: MetricConfig) -> dict[tuple, pd.DataFrame]:
    """Per (text, setting): rows = (length, metric), columns = models (thesis Appendix A)."""
    out: dict[tuple, pd.DataFrame] = {}
    columns = score_columns(metrics)
    for (text_id, method, mode), group in summary.groupby(["text_id", "method", "context_mode"], sort=False):
        rows = []
        for length, by_len in group.groupby("nominal_len", sort=True):
            for column, label in columns:
                row = {"length": length, "metric": label}
                row.update({m: v for m, v in zip(by_len["model"], by_len[column])})
                rows.append(row)
        out[(text_id, _setting((method, mode)))] = pd.DataFrame(rows).set_index(["length", "metric"])
    return out


def markdown_tables(summary: pd.DataFrame, metrics: MetricConfig, approx_vs_exact: pd.DataFrame) -> str:
    """All tables of a run as Markdown."""
    cutoff = "full vocabulary" if metrics.cutoff is None else str(metrics.cutoff)
    parts = [
        "# ctxeval summary\n",
        f"Rank scores with cutoff l = {cutoff}, alphas {', '.join(f'{a:g}' for a in metrics.alphas)}; "
        f"approximate PPL from the top-{metrics.approx_k} with penalty {metrics.penalty:g}.\n",
    ]
    for title, column in (("Average rank-based score (thesis Table 1)", "avg"), ("Approximate PPL (thesis Table 2)", "approx_ppl"), ("Perplexity", "ppl")):
        for (text_id, setting), table in pivot(summary, column).items():
            parts.append(f"## {title} — {text_id}, {setting}\n\n{table.to_markdown(floatfmt='.3f')}\n")
    for (text_id, setting), table in appendix(summary, metrics).items():
        parts.append(f"## All scores (thesis Appendix A) — {text_id}, {setting}\n\n{table.reset_index().to_markdown(index=False, floatfmt='.3f')}\n")
    if not approx_vs_exact.empty:
        parts.append(f"## approx vs exact context\n\n{approx_vs_exact.to_markdown(index=False, floatfmt='.4f')}\n")
    return "\n".join(parts)
