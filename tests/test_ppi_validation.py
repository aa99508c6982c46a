"""bench/ppi_validation.py on a small constructed full-generation folder: the population's
truths, paired simulated runs, coverage and width ratios, and its refusals."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytest.importorskip("ppi_py")

from ctxeval.errors import UserError  # noqa: E402
from ctxeval.ruler.merge import join_runs  # noqa: E402
from ctxeval.ruler.ppi import GENERATED, PREDICTED, SETTLED  # noqa: E402
from ctxeval.ruler.run import SAMPLE_SCHEMA  # noqa: E402
from ctxeval.results.manifest import Manifest, write_manifest  # noqa: E402
from ctxeval.results.ruler import SAMPLES_FILE  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import ppi_validation  # noqa: E402


def _folder(path: Path, samples: int = 40, seconds: float = 100.0, generated: bool = True, shifts: tuple[float, ...] = (0.0, -0.8)) -> Path:
    """A full-generation folder: variants (two by default: full and pressed), one task; the label
    follows the answer log p, which each variant shifts."""
    rng = np.random.default_rng(5)
    rows, index = [], 0
    logps = rng.normal(-1, 1.2, samples)
    names = ["full", "pressed"] + [f"pressed-{i}" for i in range(2, len(shifts))]
    for model, shift in zip(names, shifts):
        for k in range(samples):
            logp = logps[k] + shift + rng.normal(0, 0.3)
            settled = logp > 0.5
            y = 1.0 if settled else float(rng.random() < 1 / (1 + math.exp(-3 * (logp + 1))))
            method = SETTLED if settled else GENERATED if generated else PREDICTED
            rows.append({"sample_index": index, "model": model, "task": "niah_single_1", "length": 1024, "sample": k, "haystack": 10, "prompt_tokens": 900,
                         "depth": 0.5, "answers": ["1"], "prompt_sha256": f"p{k}", "prediction": "", "method": method,
                         "generation_score": y if method != PREDICTED else None, "likelihood_score": float(settled), "answer_logprob": logp,
                         "answer_tokens": 1, "mean_logprob": logp, "first_rank": 1 if logp > -1 else 5, "mean_log2_rank": 0.0,
                         "greedy_prefix": 1, "reference_tokens": 2, "min_margin": 1.0})
            index += 1
    path.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=SAMPLE_SCHEMA), path / SAMPLES_FILE)
    write_manifest(path, Manifest(command="ruler", run_id="synthetic", config={"seed": 42}, models=[{"name": n} for n in names[:len(shifts)]],
                                  status="complete", timing={"seconds_all_sessions": seconds}))
    return path


def test_truths_are_the_populations_means_and_paired_differences(tmp_path):
    samples = ppi_validation.population(_folder(tmp_path / "run"))
    scores, diffs = ppi_validation.truths(samples)
    wide = samples.pivot_table(index="sample", columns="model", values="generation_score")
    full = scores[(scores["model"] == "full") & (scores["task"] == "niah_single_1")].iloc[0]
    assert full["truth"] == pytest.approx(100 * wide["full"].mean())
    assert full["unsettled"] == pytest.approx((samples[samples["model"] == "full"]["method"] == GENERATED).mean())
    assert diffs.iloc[0]["truth"] == pytest.approx(100 * (wide["pressed"] - wide["full"]).mean())


def test_a_simulated_run_is_paired_and_generates_only_drawn_unsettled_samples(tmp_path):
    samples = ppi_validation.population(_folder(tmp_path / "run"))
    run = ppi_validation.simulated_run(samples, 0.5, np.random.default_rng(0))
    assert len(run) == len(samples)
    a, b = (run[run["model"] == m].reset_index(drop=True) for m in ("full", "pressed"))
    assert (a["prompt_sha256"] == b["prompt_sha256"]).all()
    # a drawn sample keeps its population label; a predicted one has none; settled ones stay settled
    assert run.loc[run["method"] == PREDICTED, "generation_score"].isna().all()
    assert run.loc[run["method"] != PREDICTED, "generation_score"].notna().all()
    share = (run["method"] == GENERATED).sum() / (run["method"] != SETTLED).sum()
    assert 0.3 < share < 0.7


def test_the_script_reports_coverage_and_width_at_equal_compute(tmp_path):
    run = _folder(tmp_path / "run", samples=60, seconds=100.0)
    likelihood = _folder(tmp_path / "lik", samples=60, seconds=20.0, generated=False)
    table = ppi_validation.main([str(run), "--likelihood", str(likelihood), "--shares", "0.5", "--replicates", "40", "--out", str(tmp_path / "out")])
    row = table.iloc[0]
    assert row["share"] == 0.5 and row["replicates"] == 40 and row["intervals"] > 0
    assert 0.7 <= row["coverage"] <= 1.0 and 0.7 <= row["difference_coverage"] <= 1.0
    assert row["likelihood_seconds"] == pytest.approx(20.0 / 120)
    assert row["generation_seconds"] > 0 and math.isfinite(row["width_ratio"]) and row["prediction_label_corr"] > 0
    saved = json.loads((tmp_path / "out" / "ppi_validation.json").read_text())
    assert saved[0]["coverage"] == pytest.approx(row["coverage"])


def test_a_run_that_did_not_generate_every_sample_is_refused(tmp_path):
    lik = _folder(tmp_path / "lik", generated=False)
    with pytest.raises(SystemExit, match="not a full-generation run"):
        ppi_validation.main([str(lik), "--cost-ratio", "3", "--out", str(tmp_path / "out")])


def test_variants_ranks_ppi_generation_alone_and_split_half(tmp_path):
    """Four well-separated variants: with a budget far above the folder's size, two
    generation-only runs rank them as the population does (split-half ρ 1); the simulated
    runs' ρ values are reported and lie in [-1, 1]."""
    samples = ppi_validation.population(_folder(tmp_path / "run", samples=60, shifts=(0.0, -1.0, -2.0, -3.0)))
    scores_truth, _ = ppi_validation.truths(samples)
    big = pd.Series(20000.0, index=pd.MultiIndex.from_tuples([("niah_single_1", 1024)], names=["task", "length"]))
    rng = np.random.default_rng(3)
    first = ppi_validation.generation_only_scores(samples, big, rng).set_index("model")["score"]
    truth = scores_truth[scores_truth["task"] == "mean"].set_index("model")["truth"]
    assert first.to_numpy() == pytest.approx(truth.loc[first.index].to_numpy(), abs=1.5)
    assert ppi_validation._spearman(first, truth) == 1.0
    table = ppi_validation.main([str(tmp_path / "run"), "--cost-ratio", "3", "--shares", "0.5", "--replicates", "20", "--out", str(tmp_path / "out")])
    row = table.iloc[0]
    for key in ("rho_ppi", "rho_generation_only", "rho_split_half"):
        assert -1.0 <= row[key] <= 1.0, key


def test_rows_run_in_parallel_equal_the_serial_ones(tmp_path):
    run = _folder(tmp_path / "run", samples=40)
    common = [str(run), "--cost-ratio", "2", "--shares", "0.3,0.5", "--replicates", "8"]
    serial = ppi_validation.main([*common, "--out", str(tmp_path / "a")])
    parallel = ppi_validation.main([*common, "--jobs", "2", "--out", str(tmp_path / "b")])
    pd.testing.assert_frame_equal(serial, parallel)


def test_simulated_until_runs_follow_rulers_rounds_and_count_their_compute(tmp_path):
    """bench/ppi_until_simulation.py: each simulated `--until verdict` run samples in rounds of
    10 up to 40, the first model at least as far as every variant and a closed variant no
    further; its verdicts sit beside the full run's (Tango's paired interval on every generated
    sample), and its compute is its likelihood passes and generations in cost units over the
    full run's; the same seed gives the same runs."""
    import ppi_until_simulation

    from ctxeval.ruler.until import Until

    run = _folder(tmp_path / "run", samples=40, shifts=(0.0, -3.0, -0.05))
    samples = ppi_validation.population(run)
    full = ppi_until_simulation.full_verdicts(samples, 5.0)
    assert full.set_index("model")["full"].to_dict()["pressed"] == "hurts"
    until = Until(None, 5.0, 40, 10)
    drawn, rounds = ppi_until_simulation.simulated_until(samples, ("full", "pressed", "pressed-2"), 0.5, until, 42, np.random.default_rng(1))
    counts = drawn.groupby("model")["sample"].count()
    assert set(counts % 10) == {0} and counts["full"] == max(counts) <= 40
    closed = {v[0]: r["round"] for r in rounds for v in r["decided"] + r["futile"]}
    for model in ("pressed", "pressed-2"):
        assert counts[model] == 10 * closed.get(model, len(rounds))
    assert set(drawn["method"]) <= {GENERATED, PREDICTED, SETTLED}
    per_variant, per_run = ppi_until_simulation.simulate(run, None, 2.0, 0.5, until, 3, 7)
    again_variant, again_run = ppi_until_simulation.simulate(run, None, 2.0, 0.5, until, 3, 7)
    pd.testing.assert_frame_equal(per_run, again_run)
    pd.testing.assert_frame_equal(per_variant, again_variant)
    full_units = len(samples) + 2.0 * int((samples["method"] == GENERATED).sum())
    assert np.allclose(per_run["compute"], (per_run["samples"] + 2.0 * per_run["generated"]) / full_units, rtol=1e-12)
    assert set(per_variant["until"]) <= {"hurts", "gains", "within δ", "too few samples to tell"}


def _split(run: Path, parts: list[list[str]], out: Path) -> list[Path]:
    """The folder's variants as separate ruler folders, as processes that ran a share each write them."""
    samples = pq.read_table(run / SAMPLES_FILE).to_pandas()
    folders = []
    for i, models in enumerate(parts):
        path = out / f"part-{i}"
        path.mkdir(parents=True)
        part = samples[samples["model"].isin(models)].copy()
        part["sample_index"] = range(len(part))
        pq.write_table(pa.Table.from_pandas(part, schema=SAMPLE_SCHEMA, preserve_index=False), path / SAMPLES_FILE)
        write_manifest(path, Manifest(command="ruler", run_id=f"part-{i}", config={"seed": 42, "samples": 40, "models": models},
                                      models=[{"name": n} for n in models], status="complete", timing={"seconds_all_sessions": 100.0 + i}))
        folders.append(path)
    return folders


def test_variants_run_in_two_processes_join_into_the_one_folder_they_split(tmp_path):
    """bench/join_ruler_runs.py: a four-variant folder split in two by variant and joined again
    reads as the same population (the first model first), with the two runs' seconds summed;
    folders whose prompts differ, or whose configs do, and unfinished ones are refused."""
    import join_ruler_runs

    whole = _folder(tmp_path / "whole", shifts=(0.0, -0.8, -0.3, -1.5))
    parts = _split(whole, [["full", "pressed"], ["pressed-2", "pressed-3"]], tmp_path / "split")
    join_ruler_runs.main([*map(str, parts), "--out", str(tmp_path / "joined")])
    pd.testing.assert_frame_equal(ppi_validation.population(tmp_path / "joined"), ppi_validation.population(whole))
    assert ppi_validation._seconds(tmp_path / "joined") == 201.0
    manifest = json.loads((tmp_path / "joined" / "manifest.json").read_text())
    assert manifest["config"]["models"] == ["full", "pressed", "pressed-2", "pressed-3"]

    other = _split(whole, [["pressed-2"]], tmp_path / "other")[0]
    table = pq.read_table(other / SAMPLES_FILE).to_pandas()
    table["prompt_sha256"] = "another prompt"
    pq.write_table(pa.Table.from_pandas(table, schema=SAMPLE_SCHEMA, preserve_index=False), other / SAMPLES_FILE)
    with pytest.raises(UserError, match="prompts differ"):
        join_runs([parts[0], other], tmp_path / "refused")
    config = json.loads((parts[1] / "manifest.json").read_text())
    config["config"]["samples"] = 30
    (parts[1] / "manifest.json").write_text(json.dumps(config))
    with pytest.raises(UserError, match="differs .* in samples"):
        join_runs(parts, tmp_path / "refused")
    (parts[1] / SAMPLES_FILE).unlink()  # a run still going: its samples are still in parts/
    with pytest.raises(UserError, match="not a finished ruler run"):
        join_runs(parts, tmp_path / "refused")
    assert not (tmp_path / "refused").exists()  # a refused join writes nothing
