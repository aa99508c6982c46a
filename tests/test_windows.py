"""Window strategies: what is scored, with how much context."""

import numpy as np
import pytest

from ctxeval import api
from ctxeval.pipeline import windows
from ctxeval.errors import UserError


def scored_positions(passes):
    return np.concatenate([np.arange(p.target_start, p.target_end) for p in passes])


def test_chunked_scores_every_token_once_with_context_inside_its_chunk():
    passes = windows.chunked(10, 4)
    assert [(p.context_start, p.target_start, p.target_end) for p in passes] == [(0, 0, 4), (4, 4, 8), (8, 8, 10)]
    assert scored_positions(passes).tolist() == list(range(10))
    assert passes[1].context_lens().tolist() == [0, 1, 2, 3]


@pytest.mark.parametrize("n,w", [(10, 4), (4096, 1024), (1000, 1000), (999, 7)])
def test_sliding_with_stride_equal_to_window_is_chunked(n, w):
    a = windows.sliding(n, w, w)
    b = windows.chunked(n, w)
    assert [(p.context_start, p.target_start, p.target_end) for p in a] == [(p.context_start, p.target_start, p.target_end) for p in b]


@pytest.mark.parametrize("n,w,s", [(8192, 1024, 512), (1000, 100, 30), (50, 10, 1), (10, 20, 5)])
def test_sliding_scores_every_token_exactly_once(n, w, s):
    passes = windows.sliding(n, w, s)
    assert scored_positions(passes).tolist() == list(range(n))
    for p in passes[1:]:
        lens = p.context_lens()
        assert lens.min() >= w - s and lens.max() <= w - 1
        assert p.target_end - p.context_start <= w


def test_sliding_stride_above_window_is_refused():
    with pytest.raises(UserError):
        windows.sliding(100, 10, 11)


def naive_p2_context_lens(n, w):
    """Paper 002, A.1 eq. 3-4, written as a loop: x_i is predicted from x_max(0, i-w) .. x_(i-1)."""
    out = {}
    for i in range(n):
        out[i] = i - max(0, i - w)
    return out


@pytest.mark.parametrize("n,w", [(50, 8), (8, 8), (5, 8), (9, 8), (100, 1), (1000, 64)])
def test_fixed_default_is_paper_p2_and_covers_the_chunked_tokens(n, w):
    passes = windows.fixed(n, w)
    lens = {int(t): int(c) for p in passes for t, c in zip(range(p.target_start, p.target_end), p.context_lens())}
    assert lens == naive_p2_context_lens(n, w)
    assert scored_positions(passes).tolist() == scored_positions(windows.chunked(n, w)).tolist() == list(range(n))
    # every context is the tokens right before the target; the model decodes the whole window
    assert all(p.target_end - p.context_start == p.n_input for p in passes)


def test_fixed_head_is_the_first_chunk_and_later_targets_see_exactly_l_tokens():
    passes = windows.fixed(50, 8)
    head, first_single, chunk = passes[0], passes[1], windows.chunked(50, 8)[0]
    assert (head.context_start, head.target_start, head.target_end) == (chunk.context_start, chunk.target_start, chunk.target_end) == (0, 0, 8)
    assert head.context_lens().tolist() == list(range(8))
    assert (first_single.context_start, first_single.target_start, first_single.target_end) == (0, 8, 9)
    assert all(p.context_lens().tolist() == [8] for p in passes[1:])
    assert len(passes) == 1 + 42
    assert {p.context_mode for p in passes} == {"capped"}


def test_fixed_windows_hold_the_same_targets_as_the_chunks():
    def by_window(passes):
        out = {}
        for p in passes:
            out.setdefault(p.window_id[1:], []).extend(range(p.target_start, p.target_end))
        return out

    assert by_window(windows.fixed(50, 8)) == by_window(windows.chunked(50, 8))
    assert sorted(by_window(windows.fixed(50, 8))) == [f"8-{k}" for k in range(7)]


def test_fixed_skip_head_gives_every_target_exactly_l_tokens():
    passes = windows.fixed(50, 8, head="skip")
    assert scored_positions(passes).tolist() == list(range(8, 50))
    assert all(p.context_lens().tolist() == [8] for p in passes)
    assert {p.context_mode for p in passes} == {"exact"}
    assert passes[0].window_id == "F8-1" and passes[8].window_id == "F8-2"


def test_fixed_skip_head_needs_more_than_l_tokens_and_unknown_head_is_refused():
    assert scored_positions(windows.fixed(10, 10)).tolist() == list(range(10))
    with pytest.raises(UserError, match="needs at least 11"):
        windows.fixed(10, 10, head="skip")
    with pytest.raises(UserError, match="unknown head 'partial'"):
        windows.fixed(10, 4, head="partial")


def test_sweep_exact_every_target_has_exactly_l_context_tokens():
    char_starts = np.arange(0, 3000, 3)  # 1000 tokens of 3 chars
    starts = {(32, 0): 300, (64, 0): 301, (64, 1): 0}
    passes = windows.sweep(char_starts, [32, 64], 30, starts, "exact")
    assert len(passes) == 90
    for p in passes:
        assert p.n_targets == 1
        assert p.context_lens().tolist() == [p.nominal_len]
    by_window = {}
    for p in passes:
        by_window.setdefault(p.window_id, []).append(p.target_start)
    assert by_window["E32-r0"] == list(range(100 + 32, 100 + 32 + 30))
    # char 301 is inside token 100; the window starts at the first token starting at or after it
    assert by_window["E64-r0"][0] == 101 + 64
    assert by_window["E64-r1"][0] == 64


def test_sweep_approx_is_one_pass_with_growing_context():
    char_starts = np.arange(1000)
    (p,) = windows.sweep(char_starts, [16], 5, {(16, 0): 10}, "approx")
    assert (p.context_start, p.target_start, p.target_end) == (10, 26, 31)
    assert p.context_lens().tolist() == [16, 17, 18, 19, 20]
    assert p.n_input == 21  # the whole window: 16 tokens of context and the 5 targets


def test_a_sweep_runs_its_longest_length_first_each_lengths_passes_in_plan_order():
    """Longest first: a length the machine cannot hold fails at once, and the time-left estimate
    interpolates between timed lengths rather than extrapolating short passes (docs/outputs.md).
    The plan (and so the pass indices records are kept in) is unchanged; other passes run as planned."""
    starts = {(length, repeat): 10 * repeat for length in (32, 64, 128) for repeat in range(2)}
    passes = windows.sweep(np.arange(1000), [32, 64, 128], 5, starts, "approx") + windows.sweep(np.arange(1000), [32, 64, 128], 2, starts, "exact")
    assert [p.window_id for p in passes[:6]] == ["A32-r0", "A32-r1", "A64-r0", "A64-r1", "A128-r0", "A128-r1"]
    ran = [passes[k] for k in windows.run_order(passes)]
    assert [(p.window_id, p.target_start) for p in ran] == [
        ("A128-r0", 128), ("A128-r1", 138), ("E128-r0", 128), ("E128-r0", 129), ("E128-r1", 138), ("E128-r1", 139),
        ("A64-r0", 64), ("A64-r1", 74), ("E64-r0", 64), ("E64-r0", 65), ("E64-r1", 74), ("E64-r1", 75),
        ("A32-r0", 32), ("A32-r1", 42), ("E32-r0", 32), ("E32-r0", 33), ("E32-r1", 42), ("E32-r1", 43)]
    chunks = windows.chunked(100, 32)
    assert windows.run_order(chunks) == list(range(len(chunks)))  # the last, shorter chunk too


def test_sweep_thesis_pass_bounds_the_targets_the_protocol_may_reach():
    char_starts = np.arange(1000)
    (p,) = windows.sweep(char_starts, [16], 5, {(16, 0): 10}, "thesis")  # non-exhaustive: n_c targets
    assert (p.window_id, p.context_mode, p.nominal_len) == ("T16-r0", "thesis", 16)
    assert (p.context_start, p.target_start, p.target_end) == (10, 26, 31)
    (p,) = windows.sweep(char_starts, [16], 5, {(16, 0): 10}, "thesis", thesis_targets=25)  # exhaustive: n_c x gen_tokens
    assert p.target_end == 26 + 25
    (p,) = windows.sweep(char_starts, [16], 5, {(16, 0): 970}, "thesis", thesis_targets=25)  # cut at the text's end
    assert (p.target_start, p.target_end) == (986, 1000)


def test_sweep_refuses_a_start_that_runs_past_the_end():
    with pytest.raises(UserError):
        windows.sweep(np.arange(100), [64], 30, {(64, 0): 10}, "exact")


def test_max_start_char_and_too_short_text():
    char_starts = np.arange(0, 200, 2)  # 100 tokens
    assert windows.max_sweep_start_char(char_starts, 32, 30) == char_starts[100 - 62]
    with pytest.raises(UserError, match="needs at least 130"):
        windows.max_sweep_start_char(char_starts, 100, 30)


def test_sweep_start_fraction_is_seeded_and_tokenizer_independent():
    a = windows.sweep_fraction(0, "abc", 128, 0)
    assert a == windows.sweep_fraction(0, "abc", 128, 0)
    assert 0 <= a < 1
    assert a != windows.sweep_fraction(1, "abc", 128, 0)
    assert a != windows.sweep_fraction(0, "abd", 128, 0)
    assert a != windows.sweep_fraction(0, "abc", 128, 1)
    assert windows.sweep_start_char(0.0, 500) == 0
    assert windows.sweep_start_char(0.9999999, 500) == 500


def test_two_tokenizers_start_at_the_same_character():
    # tokenizer A: 2 chars per token; tokenizer B: 5 chars per token
    a = np.arange(0, 10000, 2)
    b = np.arange(0, 10000, 5)
    max_char = min(windows.max_sweep_start_char(a, 64, 30), windows.max_sweep_start_char(b, 64, 30))
    start = windows.sweep_start_char(windows.sweep_fraction(3, "t", 64, 0), max_char)
    start = start - start % 10  # a boundary of both tokenizations
    pa = windows.sweep(a, [64], 30, {(64, 0): start}, "approx")[0]
    pb = windows.sweep(b, [64], 30, {(64, 0): start}, "approx")[0]
    assert a[pa.context_start] == b[pb.context_start] == start


def test_bad_sizes_are_user_errors():
    for call in (lambda: windows.chunked(10, 0), lambda: windows.fixed(10, 0), lambda: windows.sliding(10, 4, 0)):
        with pytest.raises(UserError):
            call()


@pytest.mark.model
def test_chunked_and_fixed_score_the_same_tokens_of_a_real_text(tmp_path):
    w, n = 16, 72
    chunked = api.score("demo", method="chunked", window=w, max_tokens=n, out=tmp_path / "c").records
    fixed = api.score("demo", method="fixed", window=w, max_tokens=n, out=tmp_path / "f").records
    assert set(zip(chunked["text_id"], chunked["target_pos"])) == set(zip(fixed["text_id"], fixed["target_pos"]))
    assert len(fixed) == n
    assert fixed["context_len"].tolist() == [min(i, w) for i in fixed["target_pos"]]
    assert chunked["context_len"].tolist() == [i % w for i in chunked["target_pos"]]
    # the head is the first chunk's pass: the same numbers
    head_c, head_f = chunked[chunked["target_pos"] < w], fixed[fixed["target_pos"] < w]
    np.testing.assert_array_equal(head_c["logprob"].to_numpy(), head_f["logprob"].to_numpy())


def test_a_model_without_bos_keeps_each_windows_opening_token_as_context():
    passes = windows.chunked(10, 4) + windows.sliding(10, 4, 2)
    fitted = windows.for_model(passes, uses_bos=False)
    assert all(p.target_start > p.context_start for p in fitted)
    assert [(p.context_start, p.target_start, p.target_end) for p in fitted[:3]] == [(0, 1, 4), (4, 5, 8), (8, 9, 10)]
    assert sum(p.n_targets for p in fitted) == sum(p.n_targets for p in passes) - sum(p.target_start == p.context_start for p in passes)
    assert windows.for_model(passes, uses_bos=True) == list(passes)
    assert windows.for_model([windows.chunked(1, 4)[0]], uses_bos=False) == []  # a one-token window has nothing left
