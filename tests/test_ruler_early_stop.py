"""Generation that stops once RULER's score is decided, without a model: the stop rule against
RULER's own scoring (tests/ruler_evaluate.py) on every cut of adversarial texts, a character a
later token completes, and the flag's run id and refusal."""

from __future__ import annotations

import random

import pytest

from ctxeval import api
from ctxeval.errors import UserError
from ctxeval.metrics.ruler import score_decided
from ctxeval.probes.ruler import stop_when_decided
from ctxeval.probes.ruler_run import RulerConfig
from tests.ruler_evaluate import postprocess_pred, string_match_all, string_match_part

# what RULER's cleaning and lowercasing treat specially: control characters (\x1c-\x1f are also
# white space to str.strip), other white space, the capital sigma lowercased by what follows,
# a letter whose lowercase is two characters, case-ignorable punctuation
ALPHABET = ["a", "B", "7", " ", "\n", "\t", "\x00", "\x07", "\x1c", "\x1f", "\xa0", "\u2003", "Σ", "Α", "İ", "'", ".", ":"]


def _texts(n: int, seed: int = 7) -> list[tuple[str, list[str]]]:
    """Random texts with references cut from them (and one from elsewhere), so that cuts find some."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        text = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 14)))
        refs = []
        for _ in range(rng.randint(1, 3)):
            i = rng.randint(0, len(text) - 1)
            refs.append(text[i : i + rng.randint(1, 4)])
        if rng.random() < 0.3:
            refs.append("".join(rng.choice(ALPHABET) for _ in range(2)))
        out.append((text, refs))
    return out


@pytest.mark.parametrize("part", [False, True])
def test_a_decided_cut_scores_as_every_longer_text_by_rulers_own_functions(part):
    metric = string_match_part if part else string_match_all
    decided = full_at_cut = 0
    for text, refs in _texts(3000):
        for k in range(len(text) + 1):
            cut = text[:k]
            at_cut = metric([postprocess_pred(cut)], [refs])
            if score_decided(cut, refs, part=part):
                decided += 1
                assert at_cut == 100.0, (cut, refs)
                for end in range(k, len(text) + 1):  # every longer text scores the same
                    assert metric([postprocess_pred(text[:end])], [refs]) == 100.0, (cut, text[:end], refs)
            elif at_cut == 100.0:
                full_at_cut += 1
                # not decided though found: only where a capital sigma ends the cleaned text (with
                # case-ignorable characters after it), whose lowercase waits for what follows
                assert postprocess_pred(cut).rstrip("'.:").endswith("Σ"), (cut, refs)
    assert decided > 1000 and full_at_cut > 10, (decided, full_at_cut)  # the rule decides often, and the sigma case occurs


def test_a_trailing_capital_sigma_is_not_decided_because_rulers_lowercase_changes_with_what_follows():
    assert string_match_all([postprocess_pred("xΑΣ")], [["ας"]]) == 100.0
    assert string_match_all([postprocess_pred("xΑΣa")], [["ας"]]) == 0.0
    assert not score_decided("xΑΣ", ["ας"])
    assert not score_decided("xΑΣ ", ["ας"])  # the cleaned text still ends in Σ
    assert not score_decided("xΑΣ.", ["ας"])  # "." is case-ignorable: a letter after it still decides
    assert string_match_all([postprocess_pred("xΑΣ.a")], [["ας"]]) == 0.0
    assert score_decided("xΑΣ7", ["ας"])  # a digit fixes the final form
    assert string_match_all([postprocess_pred("xΑΣ7anything")], [["ας"]]) == 100.0


class _Pieces:
    """A tokenizer's pieces by id (the stop rule reads only a scorer's token bytes)."""

    def __init__(self, pieces: list[bytes]) -> None:
        self.pieces = pieces

    def token_bytes(self, token_id: int) -> bytes:
        return self.pieces[token_id]


def test_the_stop_waits_for_a_character_that_the_next_token_completes():
    scorer = _Pieces([b"x", b"\xc3", b"\xa9", b"7"])  # "\xc3" "\xa9" is "é" cut in two
    stop = stop_when_decided(scorer, ["x\ufffd"])  # a reference that the cut character would match alone
    assert (b"x" + b"\xc3").decode("utf-8", errors="replace") == "x\ufffd"
    assert not stop([0, 1]) and not stop([0, 1, 2])  # "x" then "xé": never the reference
    assert string_match_all([postprocess_pred("xé")], [["x\ufffd"]]) == 0.0
    answer = stop_when_decided(scorer, ["7", "é"])
    assert not answer([0, 1]) and not answer([0, 1, 2]) and answer([0, 1, 2, 3])  # an answer spanning tokens counts once whole


def test_full_generation_has_the_run_id_runs_had_before_it_and_is_refused_with_likelihood_only(tmp_path):
    settings = (("vt",), (1024,), 5, 42, ("gemma-3-270m",), "essay")
    # the ids ctxeval gave these settings before the flag existed (commit 45dcc8e): generating
    # (which ran in full) and likelihood only
    assert RulerConfig(*settings, full_generation=True).run_id() == "4b4735ddbb3ddd86"
    assert RulerConfig(*settings, likelihood_only=True).run_id() == "0e34f534d3c16cd5"
    assert RulerConfig(*settings).run_id() not in ("4b4735ddbb3ddd86", "0e34f534d3c16cd5")  # stopping once decided: an id of its own
    with pytest.raises(UserError, match=r"^full_generation= sets how far generations run; --likelihood-only generates none: choose one$"):
        api.ruler(tasks=("vt",), lengths=(1024,), samples=1, models=("gemma-3-270m",), full_generation=True, likelihood_only=True, out=tmp_path / "x")
