"""The one writer and reader (results/io.py): every file kind a Result declares is written with
the bytes json, pandas and the csv module give by hand, and read back into the same fields."""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from ctxeval.results.base import Result
from ctxeval.results.io import Csv, Figure, Json, Parquet, Text, Value, derived, folder, kept, loaded, read_files, rows, write_files, written

CALLS: list[str] = []


def _total(found: dict) -> tuple[int, int]:
    CALLS.append("total")  # computed once per read, however many fields pick from it
    return sum(found["counts"].values()), len(found["counts"])


@dataclass
class Sample(Result):
    KIND = "sample"
    FILES = (Json("a.json", {"name": "name", "size": written(lambda r: len(r.table)), "table": rows("table"), "counts": kept("counts", dict, dict),
                             **{k: Value("parts", lambda r, k=k: r.parts[k], item=k, missing=-1) for k in ("x", "y")}}),
             Json("b.json", "report", default=float, ensure_ascii=False, sort_keys=True, newline=True),
             Text("c.md", "markdown", prefix="# title\n\n"),
             Csv("d.csv", "cells"), Csv("e.csv", "items", text=("id",)), Csv("f.csv", written(lambda r: r.table.head(1))),
             Parquet("g.parquet", "targets"), Figure("h.png"),
             Json("i.json", "extra", when="extra"))

    out: Path = folder()
    where: str = loaded(lambda out: out.name)
    name: str
    table: pd.DataFrame
    counts: dict[str, int]
    parts: dict[str, int]
    report: dict
    cells: pd.DataFrame
    items: pd.DataFrame
    targets: pd.DataFrame
    markdown: str = ""
    total: int = derived(_total, 0, default=0)
    kinds: int = derived(_total, 1, default=0)
    extra: dict | None = None


TABLE = pd.DataFrame({"k": [1, 2], "v": [0.5, math.nan], "s": ["a", "b"]})
ITEMS = pd.DataFrame({"id": ["007", "NA"], "score": [1.25, 2.0]})


def _sample(out: Path, extra: dict | None = None) -> Sample:
    import numpy as np

    return Sample(out, out.name, "n", TABLE, {"p": 2, "q": 3}, {"x": 1, "y": 2}, {"z": np.float32(0.5), "é": [1]}, TABLE, ITEMS, TABLE, "text\n", 5, 2, extra)


def test_every_file_is_written_as_by_hand(tmp_path):
    result = _sample(tmp_path)
    write_files(result, tmp_path)
    assert (tmp_path / "a.json").read_text() == json.dumps({"name": "n", "size": 2, "table": [{"k": 1, "v": 0.5, "s": "a"}, {"k": 2, "v": None, "s": "b"}],
                                                             "counts": {"p": 2, "q": 3}, "x": 1, "y": 2}, indent=2)
    assert (tmp_path / "b.json").read_text(encoding="utf-8") == '{\n  "z": 0.5,\n  "é": [\n    1\n  ]\n}\n'
    assert (tmp_path / "c.md").read_text() == "# title\n\ntext\n"
    assert (tmp_path / "d.csv").read_text() == "k,v,s\n1,0.5,a\n2,,b\n"
    with (tmp_path / "e.csv").open(newline="") as f:
        assert list(csv.reader(f)) == [["id", "score"], ["007", "1.25"], ["NA", "2.0"]]
    assert (tmp_path / "f.csv").read_text() == "k,v,s\n1,0.5,a\n"
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "g.parquet"), TABLE)
    assert not (tmp_path / "h.png").exists() and not (tmp_path / "i.json").exists()  # a figure is draw's; an unset optional file is not written
    assert result.files() == ("a.json", "b.json", "c.md", "d.csv", "e.csv", "f.csv", "g.parquet", "h.png")
    assert not list(tmp_path.glob("*.tmp"))


def test_every_field_reads_back(tmp_path):
    out = tmp_path / "s"
    out.mkdir()
    result = _sample(out, extra={"e": 1})
    write_files(result, out)
    assert result.files()[-1] == "i.json"
    CALLS.clear()
    again = read_files(Sample, out, list(result.files()))
    assert CALLS == ["total"]
    assert (again.out, again.where, again.name, again.counts, again.parts, again.markdown, again.extra) == (out, "s", "n", {"p": 2, "q": 3}, {"x": 1, "y": 2}, "text\n", {"e": 1})
    assert (again.total, again.kinds) == (5, 2) and again.report == {"z": 0.5, "é": [1]}
    for frame in (again.table, again.cells, again.targets):
        pd.testing.assert_frame_equal(frame, TABLE)
    pd.testing.assert_frame_equal(again.items, ITEMS)
    assert again.to_json() == json.loads((out / "a.json").read_text())


def test_an_optional_file_the_header_does_not_list_reads_as_its_default_and_a_missing_key_as_declared(tmp_path):
    result = _sample(tmp_path, extra={"e": 1})
    write_files(result, tmp_path)
    data = json.loads((tmp_path / "a.json").read_text())
    del data["y"]  # as an older version wrote it
    (tmp_path / "a.json").write_text(json.dumps(data))
    again = read_files(Sample, tmp_path, [n for n in result.files() if n != "i.json"])
    assert again.extra is None and again.parts == {"x": 1, "y": -1}


@dataclass
class Open(Result):
    KIND = "open"
    FILES = (Json("o.json", {"x": Value("parts", lambda r: r.parts["x"], item="x")}, more=Value("parts", lambda r: {k: v for k, v in r.parts.items() if k != "x"})),)

    out: Path = folder()
    parts: dict[str, int]


def test_the_keys_a_result_adds_follow_the_declared_ones_and_read_back_as_entries(tmp_path):
    write_files(Open(tmp_path, {"x": 1, "z": 3, "y": 2}), tmp_path)
    assert (tmp_path / "o.json").read_text() == json.dumps({"x": 1, "z": 3, "y": 2}, indent=2)
    again = read_files(Open, tmp_path, ["o.json"])
    assert again.parts == {"x": 1, "z": 3, "y": 2} and list(again.parts) == ["x", "z", "y"]
    write_files(Open(tmp_path, {"x": 1}), tmp_path)  # nothing added: the declared keys alone
    assert read_files(Open, tmp_path, ["o.json"]).parts == {"x": 1}
