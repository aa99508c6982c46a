"""Does an automatic metric rank models as humans do? Kendall τ-b between each metric's model
ranking and a human ranking (L-Eval's Figure 2: ROUGE-L, F1 and LLM judges against the average
human score, with and without length instructions).

Inputs are small tables. Human: CSV with a ``model`` column and a score column, or JSON
``{model: score}``. Metrics: results of ``ctxeval leval`` (a folder or its ``scores.json``; each metric is
averaged per model over the tasks that every compared model has), or CSV/JSON tables
``model × metric`` (e.g. judge win rates). A ``LABEL=`` before a path prefixes its metric names,
so "origin=..." and "lie=..." can sit side by side as in the figure. Higher is better on every
input; τ is computed on the scores (ties handled by τ-b).
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

from ctxeval.errors import FieldError, UserError
from ctxeval.results.base import read_result
from ctxeval.results.correlations import Correlation, Correlations
from ctxeval.results.leval import SCORES_JSON, LevalResult
from ctxeval.stats.agreement import kendall_tau_b


def _number(value, where: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise UserError(f"{where}: {value!r} is not a number") from None
    if math.isnan(number):
        raise UserError(f"{where}: score is NaN")
    return number


def _read_table(path: Path) -> dict[str, dict[str, float]]:
    """model -> {column: value} from a CSV (``model`` column) or JSON {model: {..} | number}."""
    if not path.is_file():
        raise UserError(f"{path}: no such file")
    if path.suffix.lower() == ".json":
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise UserError(f"{path}: not valid JSON ({exc.msg})") from None
        if not isinstance(data, dict) or not data:
            raise UserError(f"{path}: expected a JSON object {{model: score}} or {{model: {{metric: score}}}}")
        table = {}
        for model, value in data.items():
            row = value if isinstance(value, dict) else {"score": value}
            table[model] = {k: _number(v, f"{path}: {model}.{k}") for k, v in row.items()}
        return table
    with open(path, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        if not reader.fieldnames or "model" not in reader.fieldnames:
            raise UserError(f"{path}: a CSV table needs a 'model' column (got {reader.fieldnames})")
        table = {}
        for number, row in enumerate(reader, start=2):
            model = (row.pop("model") or "").strip()
            if not model:
                raise UserError(f"{path}:{number}: empty model name")
            table[model] = {k: _number(v, f"{path}:{number} column {k}") for k, v in row.items() if k}
    if not table:
        raise UserError(f"{path}: no rows")
    return table


def read_human(path: Path, column: str | None = None) -> dict[str, float]:
    """Human score per model: the table's only score column, or `column`."""
    table = _read_table(path)
    columns = sorted({k for row in table.values() for k in row})
    if column is None:
        if len(columns) != 1:
            raise FieldError("column", f"{path}: several score columns {columns}; choose one with {{name}}")
        column = columns[0]
    missing = [m for m, row in table.items() if column not in row]
    if missing:
        raise UserError(f"{path}: no {column!r} score for {', '.join(missing)}")
    return {model: row[column] for model, row in table.items()}


def _from_scores_json(data: dict, models: list[str]) -> dict[str, tuple[dict[str, float], int]]:
    """metric -> ({model: mean over common tasks}, number of tasks), for the given models."""
    present = [m for m in models if m in data]
    metrics = sorted({k for m in present for t in data[m].values() for k in t if k not in ("n", "delta_len")})
    out = {}
    for metric in metrics:
        common = set.intersection(*({t for t, v in data[m].items() if metric in v} for m in present))
        if not common:
            continue
        out[metric] = ({m: sum(data[m][t][metric] for t in common) / len(common) for m in present}, len(common))
    return out


def metric_tables(source: str, models: list[str]) -> dict[str, tuple[dict[str, float], int | None]]:
    """Parse one ``[LABEL=]PATH`` metric source into metric -> ({model: value}, tasks)."""
    label, sep, raw = source.partition("=")
    if not sep or Path(source).exists():
        label, raw = "", source
    path = Path(raw)
    prefix = f"{label}:" if label else ""
    if path.is_dir() or path.name == SCORES_JSON:
        scores = read_result(path if path.is_dir() else path.parent, reader="leval-corr", kinds=(LevalResult,)).scores
        return {prefix + k: v for k, v in _from_scores_json(scores, models).items()}
    table = _read_table(path)
    columns = sorted({k for row in table.values() for k in row})
    return {prefix + c: ({m: row[c] for m, row in table.items() if c in row}, None) for c in columns}


def correlate(human: dict[str, float], sources: list[str]) -> list[Correlation]:
    """Kendall τ-b of each metric's model scores against the human scores, over the models
    both have (at least 2 needed)."""
    if not sources:
        raise UserError("give at least one metric source (a scores.json or a model × metric table)")
    models = sorted(human)
    results = []
    for source in sources:
        for metric, (values, tasks) in metric_tables(source, models).items():
            shared = tuple(m for m in models if m in values)
            if len(shared) < 2:
                continue
            tau, p = kendall_tau_b([values[m] for m in shared], [human[m] for m in shared])
            results.append(Correlation(metric, tau, p, shared, tasks))
    if not results:
        raise UserError(f"no metric covers two or more of the human-rated models ({', '.join(models)})")
    return results


def correlations_result(human: dict[str, float], correlations: list[Correlation]) -> Correlations:
    """The `correlations` result of `leval-corr` (render/ adds its Markdown table)."""
    return Correlations(human, correlations)
