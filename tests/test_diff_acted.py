"""A diff never silently reads "no difference" for a variant that did not act: which targets a
press acted on, the numeric path's own floor chosen from CAND's options, the spread behind the
verdict's samples needed, and the verdict on constructed summaries (no model loads)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from ctxeval.backends.kv_press import PressOptions
from ctxeval.commands.common import model_spec
from ctxeval.modeldiff.acted import acted_mask, check_layout, first_acting_context
from ctxeval.modeldiff.finish import NO_EFFECT, diff_verdict
from ctxeval.modeldiff.noise_floor import candidate_path, whole_path
from ctxeval.stats.paired import unit_sd
from ctxeval.errors import FieldError
from ctxeval.render.diff import compressed_line, verdict_row


def test_a_budget_acts_past_its_length_and_a_ratio_by_kvpress_rounding():
    budget = PressOptions("StreamingLLMPress", budget=8)
    assert [budget.acts_on(c) for c in (0, 8, 9)] == [False, False, True]
    half = PressOptions("StreamingLLMPress", compression_ratio=0.5)
    # kvpress keeps max(1, int(c * (1 - r))): 1 of 1, 1 of 2, 1 of 3
    assert [half.acts_on(c) for c in (0, 1, 2, 3)] == [False, False, True, True]
    small = PressOptions("StreamingLLMPress", compression_ratio=0.1)
    assert first_acting_context(small, 64) == 2  # int(2 * 0.9) = 1 kept of 2
    assert first_acting_context(budget, 9) is None and first_acting_context(budget, 10) == 9


def test_acted_mask_reads_each_pass_context_before_its_first_target():
    class Spec:  # a pressed ModelSpec's two fields acted_mask reads
        def __init__(self, press):
            from ctxeval.backends.model_options import HfOptions
            self.options, self.text = HfOptions(press=press), "hf:m?press"
    records = pd.DataFrame({"pass_index": [0, 0, 1, 1, 2], "context_len": [0, 1, 8, 9, 9]})
    mask = acted_mask(records, (Spec(PressOptions("StreamingLLMPress", budget=8)),))
    assert mask.tolist() == [False, False, False, False, True]
    assert acted_mask(records, ()) is None


def test_a_layout_the_press_cannot_act_on_names_what_would():
    class Spec:
        def __init__(self, press):
            from ctxeval.backends.model_options import HfOptions
            self.options, self.text = HfOptions(press=press), "hf:m?press=P"
    pressed = (Spec(PressOptions("StreamingLLMPress", budget=128)),)
    with pytest.raises(FieldError, match=r"S ≤ 383 \(e.g. 256\)") as error:
        check_layout(pressed, 512, None)
    assert error.value.field == "stride"
    with pytest.raises(FieldError, match=r"\(400\) leaves 112 tokens"):
        check_layout(pressed, 512, 400)
    with pytest.raises(FieldError, match="a window of 258 and a stride of 129") as error:
        check_layout(pressed, 128, 64)
    assert error.value.field == "window"
    check_layout(pressed, 512, 256)  # 256 tokens before each later window's targets: acts


@pytest.mark.parametrize("ref, cand, floor, whole", [
    ("gemma-3-270m", "gemma-3-270m?type_k=q4_0&type_v=q4_0&flash_attn=1", "?flash_attn=1", False),
    ("gemma-3-270m?n_batch=64", "gemma-3-270m?type_k=q8_0&n_batch=7", "?n_batch=7", False),
    ("gemma-3-270m", "gemma-3-270m?flash_attn=1", None, True),  # REF on CAND's path is CAND: the whole diff is the path
    ("gemma-3-270m", "gemma-3-270m?type_k=q8_0", None, False),  # the KV type is the variant, not a numeric path
    ("gemma-3-270m", "hf:gemma-3-270m?device=cpu", None, False),  # another backend: no floor of REF's options
    ("hf:smollm2-135m", "hf:smollm2-135m?device=cuda&dtype=bfloat16", "?device=cuda", False),
])
def test_the_automatic_floor_is_ref_on_candidates_numeric_path(ref, cand, floor, whole):
    ref_spec, cand_spec = model_spec(ref), model_spec(cand)
    found = candidate_path(ref_spec, cand_spec, 8, 3)
    assert (found and found.path) == floor and whole_path(ref_spec, cand_spec) is whole
    if found:
        assert (found.windows, found.seed, found.why) == (8, 3, floor[1:].replace("&", ", "))


def test_unit_sd_is_the_spread_of_the_units_influence_on_the_weighted_mean():
    delta, tokens = np.array([0.1, -0.2, 0.4, 0.0]), np.array([10.0, 10.0, 10.0, 10.0])
    assert unit_sd(delta, tokens) == pytest.approx(np.std(delta, ddof=1))  # equal weights: the plain sd
    tokens = np.array([1.0, 2.0, 3.0, 4.0])
    mean = (delta * tokens).sum() / tokens.sum()  # 0.09
    influence = tokens / tokens.mean() * (delta - mean)
    assert unit_sd(delta, tokens) == pytest.approx(np.std(influence, ddof=1))
    # documents as units: windows 0, 1 of document a (sums 0.1 - 0.4 = -0.3 over 3 tokens) and 2, 3 of b (1.2 over 7)
    by_doc = unit_sd(delta, tokens, np.array(["a", "a", "b", "b"]))
    hand = np.std([(-0.3 - mean * 3) / 5, (1.2 - mean * 7) / 5], ddof=1)
    assert by_doc == pytest.approx(hand) and unit_sd(delta[:1], tokens[:1]) is None


def _overall(estimate: float, ci: list[float] | None, units: int = 20, sd: float | None = 0.05) -> dict:
    low, high = ci or (None, None)
    log = {"estimate": estimate, "low": low, "high": high, "se": None, "n": units, "confidence": 0.95, "method": "BCa", "reason": None}
    return {"ppl_ratio": {"delta_log_nll": log, "unit_sd": sd}, "resampling_units": units, "resampling_unit": "window"}


def test_the_diff_verdict_has_three_outcomes_and_names_an_option_without_effect():
    assert diff_verdict(_overall(0.03, [0.01, 0.05]), 0.01, 0.95, {}).outcome == "hurts"
    assert diff_verdict(_overall(0.001, [-0.004, 0.006]), 0.01, 0.95, {}).outcome == "within δ"
    undecided = diff_verdict(_overall(0.004, [-0.01, 0.02], units=4, sd=0.02), 0.01, 0.95, {})
    # the nearer line: 0 at margin 0.004 or δ at 0.006; n = (1.96 * 0.02 / 0.006)^2 = 42.7
    assert undecided.outcome == "too few samples to tell" and undecided.samples_needed == math.ceil((1.959964 * 0.02 / 0.006) ** 2)
    two = diff_verdict(_overall(0.03, [0.01, 0.05], units=2), 0.01, 0.95, {})
    assert two.outcome == "too few samples to tell" and two.reason == "2 window(s): fewer than 3 paired units decide nothing" and two.samples_needed == math.ceil((1.959964 * 0.05 / 0.03) ** 2) == 11
    same = diff_verdict(_overall(0.0, [0.0, 0.0]), 0.01, 0.95, {"bit_identical": True, "differing_fields": []})
    assert same.outcome == "within δ" and same.reason == NO_EFFECT + ": REF and CAND ran on the same numeric path"
    assert diff_verdict(_overall(0.0, [0.0, 0.0]), 0.01, 0.95, {"bit_identical": True, "differing_fields": ["n_batch"]}).reason == NO_EFFECT


def test_the_headline_states_the_verdict_first_and_the_uncompressed_targets_apart():
    report = {"verdict": diff_verdict(_overall(0.004, [-0.01, 0.02], units=4, sd=0.02), 0.01, 0.95, {}).to_row(),
              "summary": {"all": {"resampling_unit": "window"}}}
    label, outcome, text = verdict_row(report)
    assert label == "verdict (δ = ±0.01 nats/token)" and outcome == "too few samples to tell (within ±0.02; about 43 windows would settle it)"
    assert text == "Δ log-loss CAND − REF +0.004 nats/token [-0.01, +0.02], 4 windows"
    rest = {"tokens": 64, "kl": {"estimate": 0.0}, "ppl_ratio": {"ratio": {"estimate": 1.0}}}
    line = compressed_line({"targets": 96, "of": 160, "presses": "StreamingLLMPress budget 8", "uncompressed": rest})
    assert line.startswith("96 of 160 targets scored against a compressed cache (StreamingLLMPress budget 8)")
    assert "The other 64 (windows with no context before their targets to compress) are reported apart: mean KL 0.00000" in line
