"""effective-length without a model: truncation caps, the paired plan, and the estimator on
curves whose effective length is known by construction."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ctxeval.backends.base import ModelInfo
from ctxeval.backends.model_options import pop_max_context
from ctxeval.metrics.config import MetricConfig
from ctxeval.data.texts import Text
from ctxeval.errors import UserError
from ctxeval.pipeline import windows
from ctxeval.pipeline.tokens import tokenized_from_pieces
from ctxeval.probes.effective_length import EstimatorSettings, add_avg, knee_index, mark_key_tokens, summarize, target_table, units
from ctxeval.render.effective_length import render_markdown
from ctxeval.scoring.planning import EffectiveLengthPlanner
from ctxeval.stats.interval import ROW_KEYS

from .conftest import run_cli

LENGTHS = (16, 32, 64, 128, 256)
SETTINGS = EstimatorSettings(replicates=400, seed=3, evaluator="m")


# --- truncation: windows.cap_context -----------------------------------------------------------

def _contexts(passes: list[windows.Pass]) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for p in passes:
        for target, context in zip(range(p.target_start, p.target_end), p.context_lens()):
            out.setdefault(target, []).append(int(context))
    return out


@pytest.mark.parametrize("cap", [1, 5, 8, 40])
def test_capping_gives_every_target_at_most_n_tokens_and_keeps_the_rest(cap):
    passes = windows.chunked(100, 32) + windows.sweep(np.arange(200), (8, 24), 10, {(8, 0): 50, (24, 0): 120}, "approx")
    capped = windows.cap_context(passes, cap)
    before, after = _contexts(passes), _contexts(capped)
    assert before.keys() == after.keys()
    for target in before:
        assert sorted(after[target]) == sorted(min(c, cap) for c in before[target])
    originals = {p.window_id: p for p in passes}
    for p in capped:  # a capped target has its own pass of exactly N tokens, in its window
        original = originals[p.window_id]
        if p.context_start != original.context_start:
            assert p.n_targets == 1 and p.target_start - p.context_start == cap
    assert windows.cap_context(capped, cap) == capped  # idempotent
    assert windows.cap_context(passes, None) == passes


def test_unique_capping_scores_a_target_with_its_last_n_tokens_once():
    span = [windows.Pass(f"E0-L{L}", "effective-length", "approx", L, 0, 300 - L, 300, 308) for L in (4, 8, 16, 32)]
    capped = windows.cap_context(span, 8, unique=True)
    seen = [(t, c) for p in capped for t, c in zip(range(p.target_start, p.target_end), p.context_lens())]
    assert len(seen) == len(set(seen))
    # every (target, min(L + j, 8)) the lengths need is scored
    assert set(seen) == {(300 + j, min(L + j, 8)) for L in (4, 8, 16, 32) for j in range(8)}


def test_max_context_is_parsed_apart_from_backend_options():
    assert pop_max_context("gemma-3-270m?type_k=q8_0&max_context=64&flash_attn=1") == ("gemma-3-270m?type_k=q8_0&flash_attn=1", 64)
    assert pop_max_context("x.gguf?max_context=5") == ("x.gguf", 5)
    assert pop_max_context("x.gguf") == ("x.gguf", None)
    for bad in ("0", "-3", "a"):
        with pytest.raises(UserError, match="must be a positive integer"):
            pop_max_context(f"x.gguf?max_context={bad}")


# --- the paired plan ---------------------------------------------------------------------------

TEXT = Text("t", "t", " ".join(f"w{i % 97}" for i in range(3000)), "cd" * 32)


def _info(name: str, n_ctx: int = 10_000, max_context: int | None = None) -> ModelInfo:
    return ModelInfo(name, "test", "-", "-", 100, n_ctx, 2, max_context=max_context)


def _words():
    words = TEXT.content.split(" ")
    return tokenized_from_pieces(TEXT, np.arange(len(words), dtype=np.int32), [w.encode() if i == 0 else (" " + w).encode() for i, w in enumerate(words)])


def _pairs():  # a second tokenizer: two words per token where it can
    words = TEXT.content.split(" ")
    pieces = [" ".join(words[i:i + 2]) for i in range(0, len(words), 2)]
    return tokenized_from_pieces(TEXT, np.arange(len(pieces), dtype=np.int32), [p.encode() if i == 0 else (" " + p).encode() for i, p in enumerate(pieces)])


def test_every_length_scores_the_same_targets_of_non_overlapping_spans():
    planner = EffectiveLengthPlanner((64, 256, 1024), spans=4, targets=16, seed=1)
    tt = _words()
    plan, facts = planner([_info("m")], [[tt]])
    passes = plan[0][0]
    assert len(passes) == 4 * 3
    by_span: dict[int, set] = {}
    for p in passes:
        assert p.n_targets == 16 and p.target_start - p.context_start == p.nominal_len and p.context_start >= 0
        by_span.setdefault(p.repeat, set()).add((p.target_start, p.target_end))
    assert all(len(v) == 1 for v in by_span.values())  # one target span per start, at every length
    firsts = sorted(next(iter(v))[0] for v in by_span.values())
    assert firsts[0] >= 1024 and all(b - a >= 16 for a, b in zip(firsts, firsts[1:]))
    assert facts["span_start_chars"]["t"] == [int(tt.char_starts[f]) for f in firsts]
    # the same seed places the same spans; another moves them
    assert planner([_info("m")], [[tt]])[0] == plan
    assert EffectiveLengthPlanner((64, 256, 1024), 4, 16, seed=2)([_info("m")], [[tt]])[0] != plan


def test_models_with_different_tokenizers_start_each_span_at_the_same_character():
    planner = EffectiveLengthPlanner((32, 128), spans=3, targets=8, seed=0)
    words, pairs = _words(), _pairs()
    plan, facts = planner([_info("w"), _info("p")], [[words], [pairs]])
    chars = facts["span_start_chars"]["t"]
    for per_model, tt in ((plan[0][0], words), (plan[1][0], pairs)):
        assert sorted({int(tt.char_starts[p.target_start]) for p in per_model}) == chars


def test_a_truncated_model_plans_each_capped_target_once():
    planner = EffectiveLengthPlanner((16, 32, 64, 128), spans=2, targets=8, seed=0, caps=(None, 32))  # the models' specs' max_context
    plain, capped = planner([_info("m"), _info("m?max_context=32")], [[_words()], [_words()]])[0]
    need = {(t, min(p.nominal_len + t - p.target_start, 32)) for p in plain[0] for t in range(p.target_start, p.target_end)}
    seen = [(t, int(c)) for p in capped[0] for t, c in zip(range(p.target_start, p.target_end), p.context_lens())]
    assert sorted(seen) == sorted(need)


def test_a_text_too_short_for_the_design_is_refused_in_one_line():
    planner = EffectiveLengthPlanner((1024, 2048), spans=8, targets=200, seed=0)
    with pytest.raises(UserError, match=r"text t has 3000 tokens; 8 spans of 200 targets after 2048 tokens of context need at least 3648"):
        planner([_info("m")], [[_words()]])
    with pytest.raises(UserError, match="beyond m's training context of 1000"):
        EffectiveLengthPlanner((512, 1024), 2, 8, 0)([_info("m", n_ctx=1000)], [[_words()]])


# --- the estimator on curves with a known answer -----------------------------------------------

def _records(model: str, curve, docs: int, spans: int, targets: int, noise: float, seed: int, cap: int | None = None) -> pd.DataFrame:
    """Records of the paired design for a model whose mean log-probability at context c is
    curve(c) (plus a fixed per-target difficulty and per-(target, context) noise): a truncated
    model sees min(c, cap)."""
    rng = np.random.default_rng(seed)
    rows = []
    for d in range(docs):
        for s in range(spans):
            base = 10_000 * s + 5000
            difficulty = rng.normal(0, 1.5, size=targets)
            for j in range(targets):
                for c in sorted({min(L + j, cap) if cap else L + j for L in LENGTHS}):
                    noise_rng = np.random.default_rng([seed, d, s, j, c])
                    lp = min(-0.01, curve(c) + difficulty[j] + noise * noise_rng.normal())
                    rows.append({"model": model, "text_id": f"doc{d}", "repeat": s, "target_pos": base + j, "context_len": c, "logprob": lp,
                                 "rank": int(1 + 30 * (-lp)), "char_start": 4 * (base + j), "char_end": 4 * (base + j) + 4, "n_bytes": 4})
    return pd.DataFrame(rows)


def _knee_curve(knee: int):  # rises log-linearly until `knee` tokens, flat after
    return lambda c: -4.0 + 0.25 * np.log2(min(c, knee))


def _tables(records: pd.DataFrame, caps: dict[str, int | None]) -> dict[str, pd.DataFrame]:
    tables = {m: add_avg(target_table(records, m, LENGTHS, caps[m]), MetricConfig(), 1000) for m in caps}
    return mark_key_tokens(tables, next(iter(caps)), 2.0, -2.0)


def test_truncation_controls_are_recovered_and_ordered():
    caps = {"m": None, "m?max_context=32": 32, "m?max_context=64": 64}
    records = pd.concat([_records(name, _knee_curve(10_000), docs=6, spans=4, targets=24, noise=0.05, seed=5, cap=cap) for name, cap in caps.items()])
    summary = summarize(_tables(records, caps), LENGTHS, SETTINGS, caps)
    stars = {m: summary["models"][m]["effective_length"] for m in caps}
    assert stars["m?max_context=32"]["value"] == 32 and stars["m?max_context=64"]["value"] == 64
    for name in ("m?max_context=32", "m?max_context=64"):
        s = stars[name]
        assert s["interval"] == "percentile" and s["low"] <= caps[name] <= s["high"] and not s["at_least"]
    # the untruncated model still gains at the longest length: at least that
    assert stars["m"]["value"] == 256 and stars["m"]["at_least"]
    # a truncated model gains exactly nothing past its cap: every doubling past it is zero
    for d in summary["models"]["m?max_context=32"]["doublings"]:
        if d["from"] >= 32 + 24:
            assert d["logprob_gain"]["estimate"] == 0.0
    # the paired comparison: the control gains less than the model
    (c32, c64) = summary["comparisons"]
    assert c32["gain_difference"]["high"] < 0 and c64["gain_difference"]["estimate"] > c32["gain_difference"]["estimate"]
    assert "≥ 256" in render_markdown(summary)


@pytest.mark.parametrize("knee", [32, 64, 128])
def test_a_curve_that_flattens_puts_l_star_at_its_knee(knee):
    records = _records("m", _knee_curve(knee), docs=5, spans=3, targets=32, noise=0.02, seed=knee)
    star = summarize(_tables(records, {"m": None}), LENGTHS, SETTINGS, {"m": None})["models"]["m"]["effective_length"]
    assert star["value"] == knee and star["low"] <= knee <= star["high"]


def test_one_document_gives_no_interval_never_a_zero_width_one():
    records = _records("m", _knee_curve(64), docs=1, spans=4, targets=16, noise=0.05, seed=0)
    summary = summarize(_tables(records, {"m": None}), LENGTHS, SETTINGS, {"m": None})
    star = summary["models"]["m"]["effective_length"]
    assert star["interval"] == "none" and star["low"] is None and "one document" in star["reason"]
    for d in summary["models"]["m"]["doublings"]:
        assert d["logprob_gain"]["interval"] == "none" and d["logprob_gain"]["low"] is None
    assert "no interval" in render_markdown(summary)
    # spans of that one document as units do give an interval
    by_span = summarize(_tables(records, {"m": None}), LENGTHS, EstimatorSettings(unit="span", replicates=400, evaluator="m"), {"m": None})
    assert by_span["models"]["m"]["effective_length"]["interval"] == "percentile"


def test_l_star_and_the_share_kept_name_their_level_and_method_in_their_rows():
    """L* (a length of the grid, its bounds lengths too) and the share kept carry the level and
    method of their percentile bootstrap beside their bounds, as every interval row does; the
    share kept is a whole interval row; effective_length.md names both from the rows."""
    caps = {"m": None, "m?max_context=32": 32}
    records = pd.concat([_records(name, _knee_curve(10_000), docs=4, spans=3, targets=8, noise=0.05, seed=5, cap=cap) for name, cap in caps.items()])
    settings = EstimatorSettings(unit="span", replicates=300, evaluator="m", confidence=0.9)
    summary = summarize(_tables(records, caps), LENGTHS, settings, caps)
    for s in summary["models"].values():
        assert (s["effective_length"]["confidence"], s["effective_length"]["method"]) == (0.9, "percentile bootstrap over spans")
    kept = summary["comparisons"][0]["share_kept"]
    assert set(ROW_KEYS) <= set(kept) and (kept["confidence"], kept["method"], kept["n"]) == (0.9, "percentile bootstrap over spans", 12)
    text = render_markdown(summary)
    assert "(interval: 90 % percentile bootstrap over spans; ≥ 256" in text and "(interval: 90 % percentile bootstrap over spans, the same resamples)" in text
    assert "95 %" not in text


def test_a_flat_curve_has_no_gain_and_l_star_at_the_shortest_length():
    records = _records("m", lambda c: -3.0, docs=4, spans=2, targets=8, noise=0.0, seed=0)
    star = summarize(_tables(records, {"m": None}), LENGTHS, SETTINGS, {"m": None})["models"]["m"]["effective_length"]
    assert star["no_gain"] and star["value"] == 16 and star["total_gain"] == 0.0


def test_a_curve_that_rises_then_falls_below_its_start_says_so():
    records = _records("m", lambda c: -3.0 + (0.5 if c in range(64, 128) else -0.1 if c >= 256 else 0.0), docs=4, spans=2, targets=8, noise=0.0, seed=0)
    summary = summarize(_tables(records, {"m": None}), LENGTHS, SETTINGS, {"m": None})
    star = summary["models"]["m"]["effective_length"]
    assert star["no_gain"] and star["no_gain_seen"].startswith("the curve rises to +0.") and star["no_gain_seen"].endswith("nats at 64 tokens, then falls back to -0.100 at 256")
    assert "no gain at the longest length (the curve rises" in render_markdown(summary)
    flat = summarize(_tables(_records("m", lambda c: -3.0, docs=4, spans=2, targets=8, noise=0.0, seed=0), {"m": None}), LENGTHS, SETTINGS, {"m": None})
    assert flat["models"]["m"]["effective_length"]["no_gain_seen"] == "the curve never rises above its shortest length"


@pytest.mark.parametrize("docs, warned", [(3, True), (6, True), (7, False)])
def test_intervals_over_fewer_than_seven_documents_carry_the_coverage_warning(docs, warned):
    records = _records("m", _knee_curve(64), docs=docs, spans=2, targets=8, noise=0.05, seed=1)
    summary = summarize(_tables(records, {"m": None}), LENGTHS, SETTINGS, {"m": None})
    star = summary["models"]["m"]["effective_length"]
    assert (star["warning"] is not None) == warned
    assert ("covered less than 85 % in simulation" in render_markdown(summary)) == warned


def test_the_knee_rule_by_hand():
    curves = np.array([[0.0, 0.5, 0.96, 1.0], [0.0, 1.0, 0.2, 1.0], [0.0, -0.1, -0.2, -0.3], [0.0, 0.1, 0.2, 1.0]])
    # 95 % of the gain: reached at 0.96 (index 2); at once (index 1); never gains (0); only at the end (3)
    assert knee_index(curves, 0.95).tolist() == [2, 1, 0, 3]


def test_unit_sums_are_token_weighted_means_per_document():
    records = _records("m", _knee_curve(64), docs=2, spans=3, targets=4, noise=0.1, seed=1)
    table = _tables(records, {"m": None})["m"]
    u = units(table, "logprob", LENGTHS, "document")
    assert u.sums.shape == (2, len(LENGTHS)) and u.counts.tolist() == [12.0, 12.0]
    expected = table.groupby("length")["logprob"].mean().reindex(LENGTHS).to_numpy()
    np.testing.assert_allclose(u.curve(), expected, rtol=1e-12)


def test_key_tokens_are_the_evaluators_long_over_short_gains():
    records = _records("m", _knee_curve(10_000), docs=2, spans=2, targets=8, noise=0.0, seed=0)
    # make one target per span gain 3 nats from 16 to 256 tokens and end well predicted
    lift = (records["target_pos"] % 10_000 == 5003) & (records["context_len"] >= 256)
    records.loc[lift, "logprob"] = -0.5
    low = (records["target_pos"] % 10_000 == 5003) & (records["context_len"] < 32)
    records.loc[low, "logprob"] = -4.0
    table = _tables(records, {"m": None})["m"]
    assert set(table.loc[table["key"], "target_pos"] % 10_000) == {5003}


@pytest.mark.parametrize("args, message", [
    (["--lengths", "64"], "--lengths must name at least two different context lengths"),
    (["--lengths", "64,0"], "--lengths must be a positive integer, got 0"),
    (["--share", "1.5"], "--share must lie strictly between 0 and 1"),
    (["--unit", "token"], "--unit"),
    (["--model", "gemma-3-270m?max_context=0"], "max_context of 'gemma-3-270m?max_context=0' must be a positive integer, got '0'"),
    (["--evaluator", "other.gguf"], "--evaluator must be one of the models"),
])
def test_bad_options_are_one_line_and_exit_code_2(args, message, tmp_path):
    result = run_cli("effective-length", "demo", *args, "--out", str(tmp_path / "out"))
    assert result.returncode == 2 and message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_max_context_is_refused_where_no_planner_honours_it(tmp_path):
    result = run_cli("retrieval", "--model", "gemma-3-270m?max_context=64", "--lines", "5", "--out", str(tmp_path / "r"))
    assert result.returncode == 2 and "applies to sweep, score, context-gain, effective-length and ruler only" in result.stderr


# --- the verdict per variant, and when L* is measurable at all ----------------------------------

def test_each_variant_gets_one_of_three_verdicts_against_the_reference():
    caps = {"m": None, "m?max_context=32": 32, "m again": None}
    records = pd.concat([_records(name, _knee_curve(10_000), docs=6, spans=4, targets=24, noise=0.05, seed=5, cap=cap) for name, cap in caps.items()])
    summary = summarize(_tables(records, caps), LENGTHS, SETTINGS, caps)
    control, same = summary["comparisons"]
    # the control loses gain beyond doubt; the same model scored again loses exactly none
    assert control["verdict"]["outcome"] == "hurts" and control["verdict"]["high"] < 0
    assert same["verdict"]["outcome"] == "within δ" and same["verdict"]["estimate"] == 0.0 and same["verdict"]["delta"] == SETTINGS.delta
    text = render_markdown(summary)
    assert f"| m?max_context=32 | hurts, by more than δ (within ±{-control['verdict']['low']:.3g}) |" in text and "| m again | within δ (within ±0) |" in text
    assert "| m | reference |" in text and control["verdict"]["high"] < -SETTINGS.delta


def test_a_small_noisy_run_is_too_few_samples_to_tell_and_its_l_star_not_measurable():
    """Three documents whose curve barely rises under noise: the reference's own gain interval
    spans 0, so no L* is shown, and a variant's verdict says how many documents would settle it."""
    caps = {"m": None, "v": None}
    records = pd.concat([_records("m", lambda c: -3.0 + 0.002 * np.log2(c), docs=3, spans=2, targets=8, noise=0.6, seed=11),
                         _records("v", lambda c: -3.0, docs=3, spans=2, targets=8, noise=0.6, seed=12)])
    summary = summarize(_tables(records, caps), LENGTHS, SETTINGS, caps)
    gain = summary["models"]["m"]["curve"][-1]["gain"]
    assert gain["low"] < 0 < gain["high"]
    star = summary["models"]["v"]["effective_length"]
    assert star["measurable"] is False and star["not_measurable"].startswith("not measurable at this size: the reference's gain 16→256")
    verdict = summary["comparisons"][0]["verdict"]
    assert verdict["outcome"] == "too few samples to tell" and verdict["samples_needed"] > verdict["n"] == 3 and verdict["unit"] == "document"
    text = render_markdown(summary)
    margin = max(abs(verdict["low"]), abs(verdict["high"]))
    assert f"| v | too few samples to tell (within ±{margin:.3g}; about {verdict['samples_needed']} documents would settle it) | not measurable at this size |" in text
    assert "L* not measurable at this size: the reference's gain" in text


def test_a_share_kept_without_an_interval_says_why():
    from ctxeval.render.effective_length import _share

    assert _share({"estimate": 0.47, "interval": "none", "reason": "no interval: the reference gains nothing in 12.0 % of the bootstrap resamples"}) == \
        "47 % (no interval: the reference gains nothing in 12.0 % of the bootstrap resamples)"
