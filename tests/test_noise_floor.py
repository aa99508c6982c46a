"""The numerics noise floor: the model against itself on a second numeric path."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from ctxeval.errors import UserError
from ctxeval.modeldiff.noise_floor import NoiseFloor, floor_dir, floor_summary
from ctxeval.results.scoring import NOISE_JSON
from ctxeval.modeldiff.run import sample_windows
from ctxeval.pipeline import windows


def test_second_path_adds_options_to_the_model_or_names_a_whole_spec():
    assert NoiseFloor("?flash_attn=1").second_spec("gemma-3-270m") == "gemma-3-270m?flash_attn=1"
    assert NoiseFloor("?n_batch=7").second_spec("gemma-3-270m?type_k=q8_0") == "gemma-3-270m?type_k=q8_0&n_batch=7"
    assert NoiseFloor("hf:gemma-3-270m").second_spec("gemma-3-270m") == "hf:gemma-3-270m"
    with pytest.raises(UserError, match="same numeric path"):
        NoiseFloor("?flash_attn=1").second_spec("gemma-3-270m?flash_attn=1")
    from ctxeval.options import check_spec

    with pytest.raises(UserError, match="--noise-windows must be a positive integer"):
        check_spec(NoiseFloor("?flash_attn=1", windows=0))
    with pytest.raises(UserError, match="--noise-floor needs a second numeric path"):
        check_spec(NoiseFloor("?"))


def test_window_sample_is_seeded_in_plan_order_and_spans_documents():
    plan = [windows.chunked(100, 10), windows.chunked(55, 10)]  # 10 + 6 windows
    a, b = sample_windows(plan, 5, seed=3), sample_windows(plan, 5, seed=3)
    assert a == b and sum(map(len, a)) == 5
    flat = [p for per in plan for p in per]
    picked = [p for per in a for p in per]
    assert [flat.index(p) for p in picked] == sorted(flat.index(p) for p in picked)
    assert sample_windows(plan, 5, seed=4) != a
    assert sample_windows(plan, 0, seed=3) is plan and sample_windows(plan, 16, seed=3) is plan


def test_floor_summary_against_a_hand_computation():
    records = pd.DataFrame({
        "pass_index": [0, 0, 1, 1],
        "ref_logprob": [-1.0, -2.0, -0.5, -3.0],
        "cand_logprob": [-1.0, -2.5, -0.25, -3.0],
        "ref_rank": [1, 2, 1, 5],
        "cand_rank": [1, 3, 1, 5],
        "same_top1": [True, True, False, True],
        "kl": [0.0, 0.02, 0.06, 0.0],
    })
    kl = {"estimate": 0.02, "low": 0.0, "high": 0.05, "se": 0.01, "n": 2, "confidence": 0.9, "method": "BCa", "reason": "", "p99": 0.06}
    overall = {"kl": kl, "ppl_ratio": {"delta_log_nll": {"estimate": 0.1875}}}
    floor = floor_summary(records, "m", "m?flash_attn=1", {"all": overall, "buckets": []})
    assert floor["kl"] == {key: kl[key] for key in ("estimate", "low", "high", "se", "n", "confidence", "method", "reason")} and floor["delta_log_nll"] == 0.1875
    assert floor["windows"] == 2 and floor["tokens"] == 4
    assert floor["max_abs_logprob_diff"] == 0.5 and floor["mean_abs_logprob_diff"] == pytest.approx(0.75 / 4)
    assert floor["rank_changes_pct"] == 25.0 and floor["top1_flips_pct"] == 25.0
    assert floor["kl_mean"] == pytest.approx(0.02) and floor["kl_max"] == 0.06


@pytest.mark.model
def test_flash_attention_noise_floor_on_the_embedded_model(tmp_path):
    """`score --noise-floor ?flash_attn=1`: the floor's REF side is the run's own numeric path
    (bit-identical to its records on the sampled windows), flash attention moves log-probabilities
    (0.45 nats at most, mean 0.09, on 3 windows of 83 tokens of the demo text; AMD EPYC AVX-512,
    2026-11-25), and a second run resumes the floor to the same numbers."""
    from ctxeval import api

    run = api.score(["demo"], method="chunked", window=83, max_tokens=500, out=tmp_path / "s",
                    noise_floor=NoiseFloor("?flash_attn=1", windows=3, seed=1))
    floor = run.noise_floor
    assert floor is not None and floor["windows"] == 3 and floor["cand"] == "gemma-3-270m?flash_attn=1"
    assert json.loads((run.run_dir / NOISE_JSON).read_text()) == json.loads(json.dumps(floor, default=float))
    assert floor["max_abs_logprob_diff"] > 0 and floor["kl_mean"] > 0
    ref = pd.read_parquet(floor_dir(run.run_dir) / "diff_records.parquet").merge(run.records, on="target_pos")
    assert len(ref) == floor["tokens"]
    np.testing.assert_array_equal(ref["ref_logprob"], ref["logprob"])
    np.testing.assert_array_equal(ref["ref_rank"], ref["rank"])
    again = api.score(["demo"], method="chunked", window=83, max_tokens=500, out=tmp_path / "s",
                      noise_floor=NoiseFloor("?flash_attn=1", windows=3, seed=1))
    assert again.noise_floor == floor


def test_noise_floor_refusals_are_one_line(tmp_path):
    from .conftest import run_cli

    fixed = run_cli("score", "demo", "--method", "fixed", "--window", "16", "--noise-floor", "?flash_attn=1", "--out", str(tmp_path / "f"))
    assert fixed.returncode == 2 and "not --method fixed" in fixed.stderr and "Traceback" not in fixed.stderr
    bad = run_cli("score", "demo", "--window", "16", "--noise-floor", "?n_batch=zero", "--out", str(tmp_path / "b"))
    assert bad.returncode == 2 and "Traceback" not in bad.stderr


@pytest.mark.model
def test_diff_reports_and_draws_the_noise_floor(tmp_path):
    """`diff --noise-floor`: diff.json holds the floor with its by-position cells, diff.md says it,
    and the page draws it as a series of the KL-by-position chart."""
    from ctxeval import api

    result = api.diff("gemma-3-270m", "gemma-3-270m?type_k=q8_0", ["demo"], window=64, max_tokens=256, out=tmp_path / "d",
                      bootstrap=api.Bootstrap(replicates=200), noise_floor=NoiseFloor("?n_batch=7", windows=2))
    floor = result.report["noise_floor"]
    assert floor["cand"] == "gemma-3-270m?n_batch=7" and floor["windows"] == 2 and floor["tokens"] == 128
    assert [c["bucket"] for c in floor["buckets"]] == [c["bucket"] for c in result.report["summary"]["buckets"]]
    assert "Noise floor: noise floor (gemma-3-270m?n_batch=7 vs gemma-3-270m" in result.markdown
    html = (tmp_path / "d" / "report.html").read_text()
    assert "noise floor (gemma-3-270m?n_batch=7)" in html and 'class="noise-floor"' in html


@pytest.mark.model
def test_a_quantized_kv_diff_measures_its_flash_attention_share_by_default(tmp_path):
    """CAND q4_0 KV needs flash_attn=1: the diff measures REF?flash_attn=1 against REF on a
    seeded sample of its windows without being asked, and states the headline both ways; a
    CAND that is REF with flash attention only is all numeric path (no second floor run)."""
    from ctxeval import api

    cand = "gemma-3-270m?type_k=q4_0&type_v=q4_0&flash_attn=1"
    result = api.diff("gemma-3-270m", cand, ["demo"], window=64, max_tokens=256, out=tmp_path / "q4", bootstrap=api.Bootstrap(replicates=200))
    floor = result.report["noise_floor"]
    assert floor["cand"] == "gemma-3-270m?flash_attn=1" and floor["automatic"] == "flash_attn=1" and floor["windows"] == 4
    kl = result.report["summary"]["all"]["kl"]["estimate"]
    assert 0 < floor["kl_mean"] < kl
    assert f"KL {kl:.3g}, of which the numeric path {floor['kl_mean']:.3g}" in result.markdown
    assert "| verdict (δ = ±0.01 nats/token) |" in result.markdown.splitlines()[6]
    only = api.diff("gemma-3-270m", "gemma-3-270m?flash_attn=1", ["demo"], window=64, max_tokens=128, out=tmp_path / "fa", bootstrap=api.Bootstrap(replicates=200))
    assert "noise_floor" not in only.report and not (tmp_path / "fa" / "noise_floor").exists()
    assert "the whole difference is that path's" in only.markdown
    off = api.diff("gemma-3-270m", cand, ["demo"], window=64, max_tokens=128, out=tmp_path / "off", bootstrap=api.Bootstrap(replicates=200),
                   noise_floor=NoiseFloor("off"))
    assert "noise_floor" not in off.report
