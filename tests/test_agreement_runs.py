"""What `agreement` says about the runs it is given: one model's runs are refused with the reason,
a RULER effective length below the shortest length is shown as such, and a measure only one
model has is named as left out (synthetic finished runs, no model)."""

from __future__ import annotations

import pytest

from ctxeval import api
from tests.conftest import run_cli
from tests.test_ruler import _retrieval_folder, _ruler_folder

pytestmark = pytest.mark.filterwarnings("error::FutureWarning")  # pandas' deprecations (fillna's downcasting) fail here, with pandas 2 or 3


def test_one_models_runs_are_refused_saying_several_models_are_needed(tmp_path):
    run = _ruler_folder(tmp_path / "ruler", {"solo": ([1.0, 0.0], [1.0, 0.0], [-1.0, -2.0])})
    proc = run_cli("agreement", str(run), "--out", str(tmp_path / "out"))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "measures of one model only (solo)" in proc.stderr and "several models" in proc.stderr, proc.stderr


def test_one_ruler_run_of_several_models_is_enough_and_a_length_below_the_shortest_is_named(tmp_path):
    # m0 never reaches 85.6 at 1024, the shortest (and only) length: its effective length is below it
    scores = {"m0": ([0.0] * 4, [0.0] * 4, [-3.0] * 4), "m1": ([1.0] * 4, [1.0] * 4, [-1.0] * 4), "m2": ([1.0] * 4, [0.0] * 4, [-2.0] * 4)}
    result = api.agreement([_ruler_folder(tmp_path / "ruler", scores)], out=tmp_path / "agreement", replicates=100)
    lengths = result.measures[result.measures["measure"] == "RULER effective length"].set_index("model")
    assert lengths.loc["m0", "value"] == 512 and lengths.loc["m0", "shown"] == "below the shortest (< 1024)"  # ranked under every length
    assert lengths.loc["m1", "value"] == 1024
    table = result.markdown.split("## Models and measures")[1]
    m0 = next(line for line in table.splitlines() if "| m0 " in line)
    assert "below the shortest (< 1024)" in m0 and "| 512 " not in m0
    assert "Left out:" not in result.markdown  # every measure has three models
    assert "below the shortest (< 1024)" in api.read_result(tmp_path / "ruler").markdown  # the RULER run's own results.md says it so too


def test_a_measure_only_one_model_has_is_named_as_left_out(tmp_path):
    ruler = _ruler_folder(tmp_path / "ruler", {f"m{i}": ([float(i > 0)] * 2, [0.5] * 2, [-1.0 - i] * 2) for i in range(3)})
    retrieval = _retrieval_folder(tmp_path / "retrieval", {"m0": [True, False]})
    result = api.agreement([ruler, retrieval], out=tmp_path / "agreement", replicates=100)
    assert "retrieval accuracy" not in set(result.correlations["task"])
    note = "Left out: retrieval accuracy (task): 1 model(s) have it beside a cheap measure; a correlation needs 2."
    assert note in result.markdown and note in (tmp_path / "agreement" / "agreement.md").read_text()


def test_an_undefined_rho_is_not_ranked_and_says_why(tmp_path):
    # both models score 100: the task measure is constant and every ρ against it is undefined
    both_right = {"full": ([1.0] * 4, [1.0] * 4, [-1.0] * 4), "pressed": ([1.0] * 4, [0.0] * 4, [-2.0] * 4)}
    result = api.agreement([_ruler_folder(tmp_path / "ruler", both_right)], out=tmp_path / "agreement", replicates=100)
    lines = result.markdown.splitlines()
    rows = [line.split(" | ") for line in lines if line.startswith("| RULER score at 1024 |")]
    assert rows and all(r[1] == "—" for r in rows), rows
    assert all("not ranked: ρ undefined (the task measure is the same for all 2 models" in r[5] for r in rows)
    from ctxeval.render.agreement import headline
    again = api.read_result(tmp_path / "agreement")  # undefined values read back as nulls
    assert headline(again.measures, again.correlations, 100) == headline(result.measures, result.correlations, 100)


def test_two_models_give_no_ranking(tmp_path):
    scores = {"a": ([1.0] * 4, [1.0] * 4, [-1.0] * 4), "b": ([0.0] * 4, [0.0] * 4, [-2.0] * 4)}
    result = api.agreement([_ruler_folder(tmp_path / "ruler", scores)], out=tmp_path / "agreement", replicates=100)
    rows = [line.split(" | ") for line in result.markdown.splitlines() if line.startswith("| RULER score at 1024 |")]
    assert rows and all(r[1] == "—" and "with 2 models ρ is ±1 whatever the measures" in r[5] for r in rows), rows
