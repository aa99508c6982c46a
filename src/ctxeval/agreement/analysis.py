"""Which cheap measure orders models as a task measure does: rank correlations across models
for every (cheap, task) pair of measures, with intervals from resampling models, and the plots."""

from __future__ import annotations

import pandas as pd

from ctxeval.errors import UserError
from ctxeval.agreement.measures import CHEAP, TASK, Measure
from ctxeval.stats.rank_correlation import rank_correlation


def measure_table(measures: list[Measure]) -> pd.DataFrame:
    """One row per (model, measure); a measure given twice for a model (two runs) is refused."""
    table = pd.DataFrame([m.__dict__ for m in measures])
    twice = table[table.duplicated(["model", "measure"], keep=False)]
    if not twice.empty:
        row = twice.iloc[0]
        raise UserError(f"{row['model']} has '{row['measure']}' from two runs ({', '.join(twice[(twice['model'] == row['model']) & (twice['measure'] == row['measure'])]['run'])}); give one")
    return table


def constant_note(both: pd.DataFrame, cheap: str, task: str) -> str:
    """Why a pair has no coefficient when a measure is the same for every model that has both
    ("" when neither is): which measure, and its value."""
    constant = [m for m in (task, cheap) if both[m].nunique() == 1]
    if not constant:
        return ""
    which = " and the ".join(f"{'task' if m == task else 'cheap'} measure" for m in constant)
    return f"no coefficient: the {which} {'is' if len(constant) == 1 else 'are'} the same for all {len(both)} models (a constant measure orders nothing)"


def correlations(table: pd.DataFrame, replicates: int, seed: int) -> pd.DataFrame:
    """Spearman and Kendall (tau-b) between every cheap and every task measure over the models
    that have both, on values oriented so that higher is better."""
    models = list(dict.fromkeys(table["model"]))
    if len(models) < 2:
        raise UserError(f"agreement ranks models against each other and the runs give measures of one model only ({models[0]}): "
                        "give runs of several models or variants (one ruler run of several models is enough)")
    oriented = table.assign(oriented=table["value"] * table["direction"])
    wide = oriented.pivot(index="model", columns="measure", values="oriented")
    kinds = dict(zip(table["measure"], table["kind"]))
    cheap = [m for m in dict.fromkeys(table["measure"]) if kinds[m] == CHEAP]
    task = [m for m in dict.fromkeys(table["measure"]) if kinds[m] == TASK]
    if not cheap or not task:
        missing = "cheap (effective-length, diff, RULER likelihood)" if not cheap else "task (RULER with generation, retrieval)"
        raise UserError(f"the runs give no {missing} measure: agreement needs runs of both kinds")
    rows = []
    for t in task:
        for c in cheap:
            both = wide[[c, t]].dropna()
            if len(both) < 2:
                continue
            row = {"cheap": c, "task": t, "models": len(both)}
            for name in ("spearman", "kendall"):
                r = rank_correlation(both[c].to_numpy(), both[t].to_numpy(), name, replicates=replicates, seed=seed)
                row |= r.columns(name) | {f"{name}_p": r.p_value}
                row["note"] = constant_note(both, c, t) or r.reason
            rows.append(row)
    if not rows:
        raise UserError("no model has both a cheap and a task measure: the runs' models do not overlap (agreement matches models by name)")
    return pd.DataFrame(rows).astype({f"{name}{part}": "float64" for name in ("spearman", "kendall") for part in ("", ".low", ".high", ".se", "_p")})
