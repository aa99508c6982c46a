"""The press study's analysis on synthetic numbers: samples needed against a hand computation of
the paired t interval, correlations and costs against scipy and arithmetic, and the held-out
labelling of a RULER run with another seed."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from ctxeval.agreement.measures import CHEAP, HELD_OUT, TASK, Measure, hold_out
from ctxeval.agreement.press_study import press_study_table, samples_to_separate, separation


def test_samples_to_separate_by_hand():
    # d = -1, 0, -2, -1: mean -1, SD sqrt(2/3) = 0.8165. n = 5: t(0.975, 4) = 2.7764,
    # half width 2.7764 * 0.8165 / sqrt(5) = 1.0138 > 1; n = 6: 2.5706 * 0.8165 / sqrt(6) = 0.8569 < 1
    assert samples_to_separate([-1, 0, -2, -1]) == 6


def test_samples_to_separate_is_the_smallest_n_whose_t_interval_excludes_zero():
    d = np.array([0.3, -0.1, 0.5, 0.2, 0.0, 0.4, -0.2, 0.1])
    n = samples_to_separate(d)
    mean, sd = d.mean(), d.std(ddof=1)
    half = lambda k: stats.t.ppf(0.975, k - 1) * sd / math.sqrt(k)  # noqa: E731
    assert half(n) < abs(mean) <= half(n - 1)


def test_samples_to_separate_edge_cases():
    assert samples_to_separate([1.0, -1.0]) is None  # mean 0: no n separates
    assert samples_to_separate([-0.5, -0.5, -0.5]) == 2  # no spread: two samples suffice
    with pytest.raises(ValueError):
        samples_to_separate([1.0])


def test_separation_pairs_samples_by_key():
    per_sample = pd.DataFrame({
        "measure": ["acc"] * 8,
        "variant": ["full"] * 4 + ["press"] * 4,
        "sample": [0, 1, 2, 3, 3, 2, 1, 0],  # the press's rows in another order: pairing is by key
        "value": [1.0, 1.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0],
    })
    row = separation(per_sample, "full").iloc[0]
    # press − full per sample 0..3: -1, 0, 0, -1 → mean -0.5, SD 0.57735
    assert row["variant"] == "press" and row["samples"] == 4
    assert row["mean_difference"] == pytest.approx(-0.5)
    assert row["sd"] == pytest.approx(math.sqrt(1 / 3))
    assert row["samples_needed"] == samples_to_separate([-1, 0, 0, -1])


def _table(task: list[float], cheap: list[float], cheap_seconds: float, task_seconds: float) -> pd.DataFrame:
    models = [f"v{i}" for i in range(len(task))]
    rows = [Measure(m, "RULER score at 1024", TASK, 1, t, "gen", task_seconds).__dict__ for m, t in zip(models, task)]
    rows += [Measure(m, "RULER answer log p at 1024" + HELD_OUT, CHEAP, 1, c, "held", cheap_seconds).__dict__ for m, c in zip(models, cheap)]
    rows += [Measure(m, "mean KL vs full", CHEAP, -1, -c, "kl", cheap_seconds / 2).__dict__ for m, c in zip(models, cheap)]
    return pd.DataFrame(rows)


def test_press_study_table_matches_scipy_and_costs_by_hand():
    task = [60.0, 40.0, 55.0, 10.0, 30.0, 20.0]
    cheap = [-0.5, -1.0, -0.7, -3.0, -1.1, -2.0]
    out = press_study_table(_table(task, cheap, cheap_seconds=30.0, task_seconds=120.0), "RULER score at 1024", replicates=200, seed=0)
    held = out[out["cheap"] == "RULER answer log p at 1024 (held out)"].iloc[0]
    assert held["spearman"] == pytest.approx(stats.spearmanr(cheap, task).statistic)
    assert held["kendall"] == pytest.approx(stats.kendalltau(cheap, task).statistic)
    assert held["spearman.low"] <= held["spearman"] <= held["spearman.high"]
    assert held["seconds_per_variant"] == 30.0 and held["cost_share"] == pytest.approx(0.25)
    kl = out[out["cheap"] == "mean KL vs full"].iloc[0]
    # KL is lower-is-better: oriented, it orders the variants as log p does
    assert kl["spearman"] == pytest.approx(held["spearman"]) and kl["cost_share"] == pytest.approx(15 / 120)


def test_hold_out_renames_a_later_seeds_cheap_measures_and_drops_its_task_measures():
    ms = [Measure("m", "RULER score at 1024", TASK, 1, 50.0, "a", 1.0), Measure("m", "RULER answer log p at 1024", CHEAP, 1, -1.0, "a", 1.0),
          Measure("m", "RULER score at 1024", TASK, 1, 40.0, "b", 1.0), Measure("m", "RULER answer log p at 1024", CHEAP, 1, -1.2, "b", 1.0),
          Measure("m", "L*", CHEAP, 1, 512.0, "el", 1.0)]
    kept = hold_out(ms, {"a": 42, "b": 43})
    assert [(m.measure, m.value) for m in kept] == [("RULER score at 1024", 50.0), ("RULER answer log p at 1024", -1.0),
                                                  ("RULER answer log p at 1024 (held out)", -1.2), ("L*", 512.0)]
    # the same seed twice is not held out (agreement refuses the duplicate measure as before)
    assert len(hold_out(ms, {"a": 42, "b": 42})) == 5


def _seeded_ruler(path, scores, seed):
    from ctxeval.results.manifest import read_manifest, write_manifest
    from tests.test_ruler import _ruler_folder

    run = _ruler_folder(path, scores)
    manifest = read_manifest(run)
    write_manifest(run, dataclasses.replace(manifest, config=manifest.config | {"seed": seed}))
    return run


def test_agreement_keeps_a_ruler_run_of_another_seed_apart_as_held_out(tmp_path):
    from ctxeval import api

    gen = {f"m{i}": ([float(i > 1)] * 2 + [float(i > 0)] * 2, [0.0] * 4, [-3.0 + i] * 4) for i in range(4)}
    held = {f"m{i}": ([0.0] * 4, [0.0] * 4, [-2.0 + i / 2, -2.5 + i / 2, -2.0 + i / 2, -2.0 + i / 2]) for i in range(4)}
    runs = [_seeded_ruler(tmp_path / "gen", gen, 42), _seeded_ruler(tmp_path / "held", held, 43)]
    result = api.agreement(runs, out=tmp_path / "agreement", replicates=100)
    measures = result.measures.set_index(["model", "measure"])["value"]
    assert measures[("m2", "RULER answer log p at 1024 (held out)")] == pytest.approx(-1.125)  # the held-out run's mean
    assert measures[("m2", "RULER answer log p at 1024")] == pytest.approx(-1.0)  # the generation run's own
    assert measures[("m1", "RULER score at 1024")] == pytest.approx(50.0)  # from the first run only: the held-out run's 0 is not used
    row = result.correlations.set_index(["cheap", "task"]).loc[("RULER answer log p at 1024 (held out)", "RULER score at 1024")]
    assert row["spearman"] == pytest.approx(stats.spearmanr([0, 1, 2, 3], [0, 50, 100, 100]).statistic)


def test_compressed_kl_keeps_the_passes_whose_first_target_follows_the_context():
    from ctxeval.agreement.press_study import compressed_kl

    # sliding windows of 4 moved by 2: pass 0 scores positions 0-3 (contexts 0-3), passes 1 and 2 contexts 2-3
    records = pd.DataFrame({"text_id": ["a"] * 8, "pass_index": [0, 0, 0, 0, 1, 1, 2, 2], "context_len": [0, 1, 2, 3, 2, 3, 2, 3],
                            "kl": [0.0, 0.0, 0.0, 0.0, 0.2, 0.4, 0.1, 0.3]})
    kept = compressed_kl(records, min_context=2)
    assert kept["pass_index"].tolist() == [1, 2] and kept["kl"].tolist() == pytest.approx([0.3, 0.2])
    assert (kept["targets"] * kept["kl"]).sum() / kept["targets"].sum() == pytest.approx(0.25)  # token-weighted mean
