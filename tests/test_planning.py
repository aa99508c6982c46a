"""Planners: the passes each command scores, built from tokenizations alone (no model)."""

from __future__ import annotations

import numpy as np
import pytest

from ctxeval.pipeline import windows
from ctxeval.backends.base import ModelInfo
from ctxeval.data.texts import Text
from ctxeval.errors import UserError
from ctxeval.scoring.planning import ContextGainPlanner, ScorePlanner, SweepPlanner, check_context
from ctxeval.pipeline.tokens import tokenized_from_pieces

TEXT = Text("t", "t", "the cat sat on the mat and then the dog sat on the log", "ab" * 32)


def _info(name: str, n_ctx: int = 100, bos: int | None = 2) -> ModelInfo:
    return ModelInfo(name, "test", "-", "-", 100, n_ctx, bos)


def _words() -> list:
    words = TEXT.content.split(" ")
    return tokenized_from_pieces(TEXT, np.arange(len(words), dtype=np.int32), [w.encode() if i == 0 else (" " + w).encode() for i, w in enumerate(words)])


def _chars() -> list:
    return tokenized_from_pieces(TEXT, np.arange(len(TEXT.content), dtype=np.int32), [c.encode() for c in TEXT.content])


def test_sweep_starts_every_model_at_a_shared_token_boundary():
    planner = SweepPlanner(lengths=(2, 3), n_compare=2, seed=0, repeats=2, modes=("exact",), thesis_targets=2)
    words, chars = _words(), _chars()
    plan, facts = planner([_info("w"), _info("c")], [[words], [chars]])
    starts = facts["start_chars"]["t"]
    assert sorted(starts) == ["L2-r0", "L2-r1", "L3-r0", "L3-r1"]
    word_starts = set(words.char_starts.tolist())
    assert all(c in word_starts for c in starts.values())  # char tokens start everywhere
    # each model's passes are windows.sweep over its own tokens from those characters
    shared = {(int(k[1:].split("-")[0]), int(k.split("-r")[1])): c for k, c in starts.items()}
    assert plan[0][0] == windows.sweep(words.char_starts, (2, 3), 2, shared, "exact", 2)
    assert plan[1][0] == windows.sweep(chars.char_starts, (2, 3), 2, shared, "exact", 2)
    # the first target of each (length, repeat) sees context from the shared character in both
    for per_model, tt in ((plan[0][0], words), (plan[1][0], chars)):
        first = {}
        for p in per_model:
            first.setdefault(p.window_id, p)
        assert {int(tt.char_starts[p.context_start]) for p in first.values()} == set(starts.values())


def test_sweep_refuses_a_length_beyond_the_training_context():
    planner = SweepPlanner(lengths=(8,), n_compare=3, seed=0, repeats=1, modes=("approx",), thesis_targets=3)
    # approx: the whole window, L + n_c = 11 tokens, plus BOS = 12 > 10
    with pytest.raises(UserError, match="needs 12 tokens per pass, beyond w's training context of 10"):
        planner([_info("w", n_ctx=10)], [[_words()]])


def test_score_planner_covers_the_text_once_per_method():
    words = _words()
    n = len(words)
    for method, stride in (("chunked", None), ("sliding", 2), ("fixed", None)):
        plan, facts = ScorePlanner(method, 4, stride, "full", None)([_info("w")], [[words]])
        targets = [i for p in plan[0][0] for i in range(p.target_start, p.target_end)]
        assert sorted(targets) == list(range(n)) and facts == {"n_tokens_scored_from": n}
    plan, facts = ScorePlanner("chunked", 4, max_tokens=6)([_info("w")], [[words]])
    assert plan[0][0] == windows.chunked(6, 4) and facts["n_tokens_scored_from"] == 6


def test_context_gain_plans_long_then_short_passes_per_model_and_text():
    words, chars = _words(), _chars()
    plan, facts = ContextGainPlanner(window=8, short=2, stride=1)([_info("w"), _info("c")], [[words], [chars]])
    for per_model, tt in zip(plan, (words, chars)):
        long_passes = windows.chunked(len(tt), 8)
        assert per_model[0] == long_passes + windows.truncated(long_passes, 2, 1)
    assert facts["short"] == "last 2..2 tokens of the same context"


def test_check_context_counts_the_whole_window_and_bos():
    check_context([_info("a", n_ctx=5, bos=None)], 5, "window", "x")
    with pytest.raises(UserError, match="needs 6 tokens"):
        check_context([_info("a", n_ctx=5)], 5, "window", "x")
    # fixed windows decode W tokens of context and the target
    with pytest.raises(UserError, match="^window 5 needs 7 tokens") as found:
        ScorePlanner("fixed", 5)([_info("a", n_ctx=6)], [[_words()]])
    from ctxeval.commands import COMMANDS
    from ctxeval.options import named

    assert str(named(COMMANDS["score"].spec, found.value)).startswith("--window 5 needs 7 tokens")  # as `ctxeval score` says it
    ScorePlanner("chunked", 5)([_info("a", n_ctx=6)], [[_words()]])


