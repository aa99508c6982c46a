"""Tables shaped like the thesis's: Table 1 (AVG), Table 2 (approx. PPL), Appendix A (all scores).

The thesis's rows named "PPL" (Table 2, Appendix A) are its *approximate* perplexity from the
API's top-20 with penalty 3 (eqs. 9-10); ctxeval's `ppl` is the exact one. Every label says
which (`metrics.registry.PPL_LABEL`, `approx_ppl_label`).
"""

from __future__ import annotations

import pandas as pd

from ctxeval.metrics.config import MetricConfig
from ctxeval.metrics.registry import PPL_LABEL, approx_ppl_label, table_metrics


def score_columns(metrics: MetricConfig, thesis: bool = False) -> list[tuple[str, str]]:
    """(summary column, label) of every per-length score, in table order (`registry.table_metrics`);
    `thesis`: only the thesis's Appendix A rows (approx PPL, LIN, RP, A<alpha>, AVG)."""
    return [(m.key, m.label_for(metrics)) for m in table_metrics(metrics, thesis)]


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


def appendix(summary: pd.DataFrame, metrics: MetricConfig, thesis: bool = False) -> dict[tuple, pd.DataFrame]:
    """Per (text, setting): rows = (length, metric), columns = models (thesis Appendix A;
    `thesis`: its rows only)."""
    out: dict[tuple, pd.DataFrame] = {}
    columns = score_columns(metrics, thesis)
    for (text_id, method, mode), group in summary.groupby(["text_id", "method", "context_mode"], sort=False):
        rows = []
        for length, by_len in group.groupby("nominal_len", sort=True):
            for column, label in columns:
                row = {"length": length, "metric": label}
                row.update({m: v for m, v in zip(by_len["model"], by_len[column])})
                rows.append(row)
        out[(text_id, _setting((method, mode)))] = pd.DataFrame(rows).set_index(["length", "metric"])
    return out


def markdown_tables(summary: pd.DataFrame, metrics: MetricConfig, approx_vs_exact: pd.DataFrame, thesis: bool = False) -> str:
    """All tables of a run as Markdown; `thesis`: only the thesis's Table 1, Table 2 and
    Appendix A rows (no exact PPL, TOP1, BPB or approx-vs-exact table)."""
    cutoff = "full vocabulary" if metrics.cutoff is None else str(metrics.cutoff)
    approx = approx_ppl_label(metrics)
    parts = [
        "# ctxeval summary" + (" (the thesis's tables)" if thesis else "") + "\n",
        f"Rank scores with cutoff l = {cutoff}, alphas {', '.join(f'{a:g}' for a in metrics.alphas)}; "
        f"{approx}: the approximate perplexity of thesis eqs. 9-10 (a target outside the top-{metrics.approx_k} "
        f"gets log p_l - {metrics.penalty:g}), which the thesis's tables call \"PPL\"; {PPL_LABEL}: exp of the mean "
        "negative log-likelihood of every target (thesis eq. 2).\n",
    ]
    short = int(summary["n_short_list"].sum()) if "n_short_list" in summary.columns else 0
    if short:
        parts.append(f"{short} of {int(summary['n'].sum())} targets were ranked in a top-k list the server returned shorter "
                     f"than the cutoff; their rank scores use l = the returned length (thesis eq. 4), per row in `n_short_list`.\n")
    tables = [("Average rank-based score AVG (thesis Table 1)", "avg"), (f"Approximate perplexity (thesis Table 2): {approx}", "approx_ppl")]
    if not thesis:
        tables.append((f"Exact perplexity (not in the thesis's tables): {PPL_LABEL}", "ppl"))
    for title, column in tables:
        for (text_id, setting), table in pivot(summary, column).items():
            parts.append(f"## {title} — {text_id}, {setting}\n\n{table.to_markdown(floatfmt='.3f')}\n")
    for (text_id, setting), table in appendix(summary, metrics, thesis).items():
        parts.append(f"## All scores (thesis Appendix A) — {text_id}, {setting}\n\n{table.reset_index().to_markdown(index=False, floatfmt='.3f')}\n")
    if not approx_vs_exact.empty and not thesis:
        parts.append(f"## approx vs exact context\n\n{approx_vs_exact.to_markdown(index=False, floatfmt='.4f')}\n")
    return "\n".join(parts)
