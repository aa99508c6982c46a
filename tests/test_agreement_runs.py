"""What `agreement` says about the runs it is given: one model's runs are refused with the reason,
a RULER effective length below the shortest length is shown as such, and a measure only one
model has is named as left out (synthetic finished runs, no model)."""

from __future__ import annotations

import math

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


def test_rulers_split_half_reliability_and_ceiling_by_hand(tmp_path):
    """Two samples of one task, three models: every split puts one sample in each half, so the
    halves are m0 0, m1 1, m2 1 against 0, 0, 1 (or swapped): ranks (1, 2.5, 2.5) and
    (1.5, 1.5, 3), Spearman 0.75 / 1.5 = 0.5; Spearman-Brown 2(0.5)/1.5 = 2/3; ceiling √(2/3)."""
    scores = {"m0": ([0.0, 0.0], [0.0, 0.0], [-3.0, -3.0]), "m1": ([1.0, 0.0], [1.0, 0.0], [-1.0, -2.0]), "m2": ([1.0, 1.0], [1.0, 1.0], [-0.5, -0.5])}
    result = api.agreement([_ruler_folder(tmp_path / "ruler", scores)], out=tmp_path / "agreement", replicates=100)
    row = result.correlations[result.correlations["task"] == "RULER score at 1024"].iloc[0]
    assert row["task_reliability"] == pytest.approx(2 / 3) and row["ceiling"] == pytest.approx((2 / 3) ** 0.5)
    assert "RULER score at 1024: split-half reliability r = 0.67 over its models" in result.markdown and "about ρ = 0.82" in result.markdown
    assert math.isnan(result.correlations[result.correlations["task"] == "RULER effective length"]["ceiling"].iloc[0])  # not a score of samples
    again = api.read_result(tmp_path / "agreement")
    assert again.correlations["ceiling"].tolist() == pytest.approx(result.correlations["ceiling"].tolist(), nan_ok=True)


def test_split_half_is_near_zero_for_models_that_differ_by_noise_and_near_one_for_separated_ones():
    """Thirty models drawing from one distribution: the halves' orders are unrelated; ten models
    whose success rates are spread from 0.1 to 0.9: the halves order them alike."""
    import numpy as np
    import pandas as pd

    from ctxeval.agreement.reliability import split_half

    rng = np.random.default_rng(1)
    noise = pd.DataFrame([{"model": f"m{m}", "task": t, "sample": k, "generation_score": float(rng.random() < 0.5)}
                          for m in range(30) for t in ("x", "y") for k in range(40)])
    assert abs(split_half(noise, splits=100)["split_half"]) < 0.2
    rates = np.linspace(0.1, 0.9, 10)
    spread = pd.DataFrame([{"model": f"m{m}", "task": t, "sample": k, "generation_score": float(rng.random() < rates[m])}
                           for m in range(10) for t in ("x", "y") for k in range(40)])
    assert split_half(spread, splits=100)["reliability"] > 0.9
    assert split_half(noise[noise["model"].isin(["m0", "m1"])]) is None  # two models order nothing
