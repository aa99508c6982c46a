"""The scoring result: written once by its `Result`, read back equal through `read_result`."""

from __future__ import annotations

import json
from dataclasses import fields

import pandas as pd
import pytest

from ctxeval.errors import UserError
from ctxeval.results.manifest import read_manifest
from ctxeval.results.base import RESULT_FILE, read_result
from ctxeval.pipeline.engine import save_result
from ctxeval.render.kinds import RENDERING
from ctxeval.results.scoring import NOISE_JSON, RunResult
from ctxeval.scoring.finish import scoring_result

from .synthetic_runs import write_run


def assert_same_result(a: RunResult, b: RunResult) -> None:
    for f in fields(RunResult):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, pd.DataFrame) or isinstance(y, pd.DataFrame):
            pd.testing.assert_frame_equal(x, y, obj=f.name)
        elif f.name == "manifest":
            assert x.to_json() == y.to_json()
        else:
            assert x == y, f.name


def _written(tmp_path, noise_floor: dict | None = None) -> RunResult:
    run = write_run(tmp_path / "run", "tiny", [8, 16], 6, repeats=2)
    manifest = read_manifest(run)
    result = scoring_result(run, manifest, manifest.metrics)
    result.noise_floor = noise_floor
    return save_result(run, result, "sweep", RENDERING)


def test_a_scoring_result_reads_back_equal(tmp_path):
    result = _written(tmp_path)
    assert_same_result(read_result(result.run_dir, kinds=(RunResult,)), result)
    header = json.loads((result.run_dir / RESULT_FILE).read_text())
    assert header["kind"] == "scoring" and header["files"] == ["summary.json", "summary.csv", "tables.md", "scores_vs_length.png"]


def test_a_noise_floor_is_part_of_the_result(tmp_path):
    floor = {"ref": "a", "cand": "b", "windows": 2, "max_abs_logprob_diff": 0.5}
    result = _written(tmp_path, floor)
    assert NOISE_JSON in result.files() and result.paths()["noise_floor"].is_file()
    assert read_result(result.run_dir).noise_floor == floor


def test_a_run_without_a_header_is_refused_in_one_line(tmp_path):
    run = write_run(tmp_path / "run", "tiny", [8], 6)
    (run / RESULT_FILE).unlink()  # as a ctxeval before output headers left it
    with pytest.raises(UserError, match="no result.json") as error:
        read_result(run, reader="report", kinds=(RunResult,))
    assert "\n" not in str(error.value)

