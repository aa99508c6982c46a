"""How every table, chart and page writes an interval: its numbers, and the level and method it
holds at, read from the rows (`Interval.to_row`, flat as `stats.interval.column`), never from a
constant of render/. A table whose rows hold at several levels (an `--until` run's looks) names
each of them."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from ctxeval.stats.interval import ROW_KEYS, Interval, column


def level(confidence: float) -> str:
    """A confidence as a page writes it: 0.95 → '95 %', 0.975 → '97.5 %', 0.98333 → '98.33 %'."""
    return f"{100 * confidence:.2f}".rstrip("0").rstrip(".") + " %"


def numbers(interval: Interval, digits: int, signed: bool = False, bound_digits: int | None = None) -> str:
    """'+1.2 [-0.3, +2.4]' (signed) or '1.2 [0, 2]' (`bound_digits` 0); the estimate alone with
    '(no interval)' where there are no bounds, 'unknown' where there is no estimate."""
    sign = "+" if signed else ""
    bound = digits if bound_digits is None else bound_digits
    if math.isnan(interval.estimate):
        return "unknown"
    if not interval.has_interval:
        return f"{interval.estimate:{sign}.{digits}f} (no interval)"
    return f"{interval.estimate:{sign}.{digits}f} [{interval.low:{sign}.{bound}f}, {interval.high:{sign}.{bound}f}]"


def cell(row: Mapping[str, Any], name: str, digits: int, signed: bool = False, bound_digits: int | None = None) -> str:
    """The interval `name` of a flat row, as `numbers` writes it."""
    return numbers(Interval.from_columns(row, name), digits, signed, bound_digits)


def collapsed(table: pd.DataFrame, digits: int) -> pd.DataFrame:
    """`table` with each interval's columns (`stats.interval.column`) as one column of cells, headed
    by its name and the levels and methods its rows hold at: for a table printed as it is."""
    names = [name for name in table.columns if column(name, "confidence") in table.columns]
    if not names:
        return table
    keys = [column(name, key) for name in names for key in ROW_KEYS if key != "estimate"]
    rows = table.to_dict(orient="records")
    out = table.drop(columns=[c for c in keys if c in table.columns])
    for name in names:
        out[name] = [cell(row, name, digits) for row in rows]
    return out.rename(columns={name: f"{name} [{table_header(table, name)}]" for name in names})


def kinds(table: pd.DataFrame, name: str) -> list[tuple[float, str]]:
    """The (confidence, method) pairs the rows of `table` hold interval `name` at, in row order."""
    if table.empty or column(name, "confidence") not in table:
        return []
    pairs = zip(table[column(name, "confidence")], table[column(name, "method")].fillna(""))
    return list(dict.fromkeys((float(c), str(m)) for c, m in pairs if c == c))


def header(found: Iterable[tuple[float, str]], with_method: bool = True) -> str:
    """'95 % Tango's score interval' for one kind; several joined by '; ' (each level once)."""
    found = list(found)
    if not with_method:
        return "/".join(dict.fromkeys(level(c) for c, _ in found))
    return "; ".join(f"{level(c)} {m}".rstrip() for c, m in found)


def table_header(table: pd.DataFrame, name: str, with_method: bool = True) -> str:
    """The header of interval `name` over every row of `table` (`header` of its `kinds`)."""
    return header(kinds(table, name), with_method)


def rows_header(rows: Iterable[Mapping[str, Any]], with_method: bool = True) -> str:
    """The header of a JSON report's interval rows (`Interval.to_row`): `header` of the
    (confidence, method) pairs they hold, in order."""
    return header(dict.fromkeys((float(row["confidence"]), str(row["method"])) for row in rows), with_method)


def bounds(row: Mapping[str, Any], fmt: str) -> str:
    """An interval row's bounds, '[low, high]' in `fmt`, or 'no interval' where it has none."""
    return "no interval" if row["low"] is None else f"[{row['low']:{fmt}}, {row['high']:{fmt}}]"


def labelled(row: Mapping[str, Any], fmt: str) -> str:
    """An interval row's bounds with the level and method it holds at ('[0.91, 1.02] 95 % BCa'),
    for a table whose rows hold intervals of several kinds; 'no interval' (and why) where it has none."""
    if row["low"] is None:
        return f"no interval: {row['reason']}" if row.get("reason") else "no interval"
    return f"{bounds(row, fmt)} {header([(float(row['confidence']), str(row['method']))])}"
