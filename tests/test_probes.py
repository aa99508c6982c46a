"""Context-gain windows, LongPPL key tokens and span mapping, retrieval records: no model needed."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from ctxeval.pipeline import windows
from ctxeval.data.texts import Text
from ctxeval.errors import UserError
from ctxeval.metrics.gain import gain_table
from ctxeval.probes.context_gain import summarize_text
from ctxeval.render.context_gain import render_markdown as gain_render_markdown
from ctxeval.metrics.keytokens import key_token_mask, merge_spans, tokens_within
from ctxeval.probes.retrieval import extract_value
from ctxeval.probes.retrieval_data import make_case
from ctxeval.results.retrieval import read_cases
from ctxeval.probes.retrieval_run import lines_for_tokens
from ctxeval.pipeline.tokens import tokenized_from_pieces


@pytest.mark.parametrize("k, stride", [(3, 1), (3, 2), (4, 4), (1, 1)])
def test_truncated_passes_rescore_each_far_target_once_with_a_suffix_context(k, stride):
    long_passes = windows.chunked(23, 10)
    short = windows.truncated(long_passes, k, stride)
    seen: dict[int, int] = {}
    for p in short:
        chunk = next(lp for lp in long_passes if lp.target_start <= p.target_start < lp.target_end)
        assert chunk.context_start <= p.context_start  # a suffix of the long context
        assert p.target_end <= chunk.target_end
        for target, ctx in zip(range(p.target_start, p.target_end), p.context_lens()):
            assert k <= ctx <= k + stride - 1
            assert ctx < target - chunk.context_start  # strictly shorter than the long context
            seen[target] = seen.get(target, 0) + 1
    expected = [t for lp in long_passes for t in range(lp.target_start, lp.target_end) if t - lp.context_start >= k + stride]
    assert sorted(seen) == expected
    assert set(seen.values()) <= {1}


def test_truncated_stride_one_gives_exactly_k_and_nothing_when_k_covers_the_window():
    long_passes = windows.chunked(12, 6)
    short = windows.truncated(long_passes, 2, 1)
    # chunk [0, 6): targets 3, 4, 5 with contexts [1, 3), [2, 4), [3, 5); same in chunk [6, 12)
    assert [(p.context_start, p.target_start, p.target_end) for p in short] == [(1, 3, 4), (2, 4, 5), (3, 5, 6), (7, 9, 10), (8, 10, 11), (9, 11, 12)]
    assert all(list(p.context_lens()) == [2] for p in short)
    assert windows.truncated(long_passes, 6, 1) == []
    assert windows.truncated(long_passes, 5, 1) == []  # j = 5 already sees exactly 5 tokens


def test_key_token_mask_is_strict_on_both_thresholds():
    long_ = np.array([-0.5, -0.5, -1.0, -2.0, -2.5, -0.1, -1.999])
    short = np.array([-3.0, -2.5, -3.5, -4.5, -5.0, -2.1, -4.0])
    # gains:          2.5   2.0   2.5   2.5   2.5   2.0   2.001
    assert key_token_mask(long_, short).tolist() == [True, False, True, False, False, False, True]
    assert key_token_mask(long_, short, alpha=1.0, beta=-3.0).tolist() == [True] * 7


def test_merge_spans_joins_touching_and_overlapping_spans():
    spans = merge_spans(np.array([10, 0, 3, 20, 25]), np.array([12, 3, 5, 25, 26]))
    assert spans.tolist() == [[0, 5], [10, 12], [20, 26]]
    assert merge_spans(np.array([]), np.array([])).shape == (0, 2)


def test_tokens_within_uses_containment_on_boundary_cases():
    spans = np.array([[5, 10], [20, 30]])
    starts = np.array([5, 4, 9, 6, 10, 20, 25, 29, 30, 7, 0])
    ends = np.array([10, 6, 11, 8, 12, 30, 31, 30, 32, 7, 3])
    #  exact span | straddles start | straddles end | inside | just after | exact | overhangs | last char | after | empty | before
    assert tokens_within(starts, ends, spans).tolist() == [True, False, False, True, False, True, False, True, False, False, False]
    assert not tokens_within(starts, ends, np.zeros((0, 2), dtype=np.int64)).any()


def _char_tokens(content: str) -> object:
    """A character tokenizer: one token per character (multi-byte characters included)."""
    text = Text("t", "mem", content, "sha-of-t")
    pieces = [c.encode("utf-8") for c in content]
    return tokenized_from_pieces(text, np.arange(len(pieces), dtype=np.int32), pieces)


def test_key_spans_map_between_a_word_tokenizer_and_a_char_tokenizer():
    content = "Der Käse, naïve café — ok."
    words = ["Der", " Käse", ",", " naïve", " café", " —", " ok", "."]
    text = Text("t", "mem", content, "sha-of-t")
    coarse = tokenized_from_pieces(text, np.arange(len(words), dtype=np.int32), [w.encode("utf-8") for w in words])
    fine = _char_tokens(content)
    key = np.array([False, True, False, True, True, False, False, False])
    spans = merge_spans(coarse.char_starts[key], coarse.char_ends[key])
    assert spans.tolist() == [[3, 8], [9, 20]]  # " Käse" and " naïve café" (touching, merged)
    fine_key = tokens_within(fine.char_starts, fine.char_ends, spans)
    assert "".join(c for c, k in zip(content, fine_key) if k) == " Käse naïve café"
    # back: a coarse token is key only when every one of its characters is
    back = tokens_within(coarse.char_starts, coarse.char_ends, merge_spans(fine.char_starts[fine_key], fine.char_ends[fine_key]))
    assert back.tolist() == key.tolist()
    partial = fine_key.copy()
    partial[content.index("é")] = False  # drop the last character of " café"
    back = tokens_within(coarse.char_starts, coarse.char_ends, merge_spans(fine.char_starts[partial], fine.char_ends[partial]))
    assert back.tolist() == [False, True, False, True, False, False, False, False]


def _records(rows: list[tuple]) -> pd.DataFrame:
    cols = ["method", "target_pos", "context_len", "logprob", "rank", "char_start", "char_end", "n_bytes"]
    frame = pd.DataFrame(rows, columns=cols)
    frame["model"], frame["text_id"] = "m", "t"
    return frame


def test_gain_summary_against_hand_computed_values():
    long_rows = [("chunked", i, i, lp, 1, 2 * i, 2 * i + 2, 2) for i, lp in enumerate([-1.0, -2.0, -0.5, -0.2, -3.0, -0.1])]
    short_rows = [("truncated", 3, 2, -2.6, 5, 6, 8, 2), ("truncated", 4, 2, -3.5, 9, 8, 10, 2), ("truncated", 5, 2, -2.5, 7, 10, 12, 2)]
    table = gain_table(_records(long_rows + short_rows), "m", "t")
    assert table["gain"].round(12).tolist() == [0, 0, 0, 2.4, 0.5, 2.4]
    assert table["distant"].tolist() == [False, False, False, True, True, True]
    spans = merge_spans(np.array([6, 10]), np.array([8, 12]))  # targets 3 and 5 are key
    s = summarize_text(table, spans, block=2, replicates=200, seed=0)
    long_lp = np.array([-1.0, -2.0, -0.5, -0.2, -3.0, -0.1])
    short_lp = np.array([-1.0, -2.0, -0.5, -2.6, -3.5, -2.5])
    assert s["ppl_long"] == pytest.approx(math.exp(-long_lp.mean()))
    assert s["ppl_short"] == pytest.approx(math.exp(-short_lp.mean()))
    gain, ratio = s["mean_gain"], s["ppl_ratio_long_over_short"]
    assert gain["estimate"] == pytest.approx(5.3 / 6) and (gain["n"], gain["confidence"], gain["method"]) == (3, 0.95, "BCa")
    assert s["mean_gain_distant"] == pytest.approx(5.3 / 3)
    assert s["bpb_long"] == pytest.approx(-long_lp.sum() / math.log(2) / 12)
    assert s["n_key"] == 2 and s["key_fraction"] == pytest.approx(2 / 6)
    assert s["longppl"] == pytest.approx(math.exp(0.15))
    assert s["longppl_short"] == pytest.approx(math.exp(2.55))
    assert ratio["estimate"] == pytest.approx(math.exp(-5.3 / 6))
    assert gain["low"] <= gain["estimate"] <= gain["high"]
    # the ratio exp(-g): the gain's interval mapped through it, its bounds swapped, at the gain's level and by its method
    assert (ratio["low"], ratio["high"]) == (pytest.approx(math.exp(-gain["high"])), pytest.approx(math.exp(-gain["low"])))
    assert (ratio["confidence"], ratio["method"], ratio["n"], ratio["se"]) == (0.95, "BCa", 3, None)


def test_one_block_of_varying_gains_has_no_interval_and_is_not_degenerate():
    # all 6 targets in one block of 256: per-token gains 0 ... 2.4 differ, one resampling unit
    long_rows = [("chunked", i, i, lp, 1, 2 * i, 2 * i + 2, 2) for i, lp in enumerate([-1.0, -2.0, -0.5, -0.2, -3.0, -0.1])]
    short_rows = [("truncated", 3, 2, -2.6, 5, 6, 8, 2), ("truncated", 4, 2, -3.5, 9, 8, 10, 2), ("truncated", 5, 2, -2.5, 7, 10, 12, 2)]
    table = gain_table(_records(long_rows + short_rows), "m", "t")
    s = summarize_text(table, np.zeros((0, 2), dtype=np.int64), block=256, replicates=200, seed=0)
    gain, ratio = s["mean_gain"], s["ppl_ratio_long_over_short"]
    assert (gain["interval"], gain["degenerate"], gain["units"]) == ("none", False, 1)
    assert gain["reason"] == ratio["reason"] == "no interval (one block of 256 targets): a single resampling unit has no spread to resample"
    assert gain["low"] is gain["high"] is ratio["low"] is ratio["high"] is None
    assert ratio["estimate"] == pytest.approx(math.exp(-5.3 / 6))
    json.dumps(s, allow_nan=False)  # no NaN bounds in summary.json
    summary = {"window": 8, "short": 2, "short_stride": 1, "key_tokens": {"evaluator": "m", "alpha": 2.0, "beta": -2.0},
               "texts": {"t": {"by_model": {"m": s}}}}
    md = gain_render_markdown(summary, pd.DataFrame({"n": [6]}))
    row = next(line for line in md.splitlines() if line.startswith("| t | m |"))
    assert f"| {math.exp(-5.3 / 6):.4f} no interval (one block of 256 targets): a single resampling unit has no spread to resample |" in row
    assert "all paired differences are equal" not in md


def test_retrieval_records_are_deterministic_and_the_answer_occurs_once():
    for variant in ("cat", "register"):
        a, b = make_case(variant, 30, 0.5, 1, seed=7), make_case(variant, 30, 0.5, 1, seed=7)
        assert a == b
        assert make_case(variant, 30, 0.5, 1, seed=8).prompt != a.prompt
        assert make_case(variant, 30, 0.5, 2, seed=7).prompt != a.prompt
        assert a.prompt.count(a.value) == 1
        assert (a.prompt + a.answer).count(a.value) == 2  # its line and the answer
        assert a.answer.startswith(" " + a.value if variant == "cat" else a.value)


@pytest.mark.parametrize("variant", ["cat", "register"])
@pytest.mark.parametrize("depth", [0.0, 0.1, 0.5, 0.9, 1.0])
def test_retrieval_depth_is_where_it_claims(variant, depth):
    n = 60
    case = make_case(variant, n, depth, 0)
    lines = case.prompt[case.record_char_start : case.record_char_end].splitlines()
    assert len(lines) == n
    assert case.line_index == int(np.floor(depth * (n - 1) + 0.5))
    assert case.value in lines[case.line_index] and case.key in lines[case.line_index]
    assert case.prompt[case.line_char_start:].startswith(lines[case.line_index])
    assert abs(case.char_depth - depth) <= 1.5 / n


def test_retrieval_keys_and_values_share_no_word():
    case = make_case("cat", 200, 0.3, 0)
    record = case.prompt[case.record_char_start : case.record_char_end]
    keys = {w for line in record.splitlines() for w in line.split(" has a cat")[0].removeprefix("A person named ").split()}
    values = {line.rsplit(" ", 1)[1].rstrip(".") for line in record.splitlines()}
    assert len(values) == 200 and len(keys) == 400
    assert not keys & values
    registers = make_case("register", 200, 0.3, 0).prompt
    assert len(set(__import__("re").findall(r"<(\d{5})>", registers))) == 200


def test_extract_value_takes_the_first_word_or_number():
    assert extract_value("cat", " Vadove.\n\nI remember") == "Vadove"
    assert extract_value("cat", "\n") == ""
    assert extract_value("register", "14508>\n") == "14508"
    assert extract_value("register", " it is 12 or 13") == "12"


def test_cases_of_a_run_made_before_parquet_records_are_still_read(tmp_path):
    path = tmp_path / "cases.jsonl"
    path.write_text(json.dumps({"model": "m", "lines": 4, "depth": 0.0, "sample": 0}) + "\n" + '{"model": "m", "li')
    cases = read_cases(tmp_path)
    assert cases.to_dict("records") == [{"tokens_target": None, "model": "m", "lines": 4, "depth": 0.0, "sample": 0}]


class _WordScorer:
    """A tokenizer-only stand-in: one token per whitespace-separated word, BOS first."""

    class info:  # noqa: N801 - mirrors ModelInfo's attributes used here
        name = "words"
        uses_bos = True

    @staticmethod
    def tokenize(text: str) -> list[int]:
        return [len(w) for w in text.split()]


@pytest.mark.parametrize("variant", ["cat", "register"])
@pytest.mark.parametrize("target", [300, 1000, 2500])
def test_lines_for_tokens_is_the_most_lines_that_fit(variant, target):
    def size(n: int) -> int:
        return 1 + len(make_case(variant, n, 0.5, 0).prompt.split())

    n = lines_for_tokens(_WordScorer(), variant, target, seed=0)
    assert size(n) <= target < size(n + 1)


def test_lines_for_tokens_refuses_a_target_below_the_smallest_record():
    with pytest.raises(UserError, match="too small"):
        lines_for_tokens(_WordScorer(), "cat", 20, seed=0)
