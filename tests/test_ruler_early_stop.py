"""Generation that stops once RULER's score is decided: the stop rule against RULER's own
scoring (tests/ruler_evaluate.py) on every cut of adversarial texts, a character a later token
completes, the flag's run id and refusal; each backend's generation (llama.cpp, hf, hf with a
press) stopped where told, and a real run with and without the stop scoring alike."""

from __future__ import annotations

import random

import numpy as np
import pytest

from ctxeval import api
from ctxeval.data.texts import load_text
from ctxeval.errors import UserError
from ctxeval.metrics.ruler import score_decided
from ctxeval.ruler.score import stop_when_decided
from ctxeval.ruler.generation import Generation
from ctxeval.ruler.run import RulerConfig
from tests.ruler_evaluate import postprocess_pred, rescored, string_match_all, string_match_part

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
    assert RulerConfig(*settings, generation=Generation("none")).run_id() == "0e34f534d3c16cd5"
    assert RulerConfig(*settings).run_id() not in ("4b4735ddbb3ddd86", "0e34f534d3c16cd5")  # stopping once decided: an id of its own
    with pytest.raises(UserError, match=r"^full_generation= sets how far generations run; --likelihood-only generates none: choose one$"):
        api.ruler(tasks=("vt",), lengths=(1024,), samples=1, models=("gemma-3-270m",), full_generation=True, likelihood_only=True, out=tmp_path / "x")


# --- on the backends and a real run ---------------------------------------------------------

def _stops_at(scorer, prompt: np.ndarray, n: int, **kwargs) -> None:
    """`generate` with a stop returns the full generation up to the token where the stop first
    says so: after k tokens, and at the first repeat of a token (a stop that reads the tokens)."""
    full = scorer.generate(prompt, n, **kwargs)
    assert len(full) == n  # no end-of-text token cut it short, so every k below is a real stop
    for k in (1, 5, n - 1):
        assert scorer.generate(prompt, n, stop=lambda ids, k=k: len(ids) >= k, **kwargs) == full[:k]
    first_repeat = next((i for i, t in enumerate(full) if t in full[:i]), n - 1)
    assert scorer.generate(prompt, n, stop=lambda ids: ids[-1] in ids[:-1], **kwargs) == full[: first_repeat + 1]


@pytest.mark.model
def test_llamacpp_stops_generating_where_told_also_inside_the_scored_continuation(gemma):
    prompt = np.asarray([gemma.info.bos_id, *gemma.tokenize(load_text("demo").content[:600])], dtype=np.int32)
    _stops_at(gemma, prompt, 16)
    full = gemma.generate(prompt, 16)
    other = next(t for t in range(100, 200) if t != full[3])
    continuation = np.asarray([*full[:3], other], dtype=np.int32)  # the greedy chain leaves it at step 3
    for k in (2, 4, 9):  # inside the shared tokens, at the one that leaves, in the generation after
        scores, generated = gemma.score_then_generate(prompt, continuation, 16, 2, (1.0,), stop=lambda ids, k=k: len(ids) >= k)
        assert generated == full[:k]
    assert gemma.score_then_generate(prompt, continuation, 16, 2, (1.0,))[1] == full


def test_hf_stops_generating_where_told_with_and_without_a_press(tmp_path):
    pytest.importorskip("kvpress")
    from ctxeval.backends.registry import load_scorer, parse_model_spec
    from tests.hf_tiny import tiny_llama_dir

    model = f"hf:{tiny_llama_dir(tmp_path / 'llama', load_text('demo').content[:20000], vocab_size=512)}"
    plain = load_scorer(parse_model_spec(model))
    prompt = np.asarray(plain.tokenize(load_text("demo").content)[:96], dtype=np.int64)
    _stops_at(plain, prompt, 16)
    pressed = load_scorer(parse_model_spec(f"{model}?press=StreamingLLMPress&budget=40"))
    _stops_at(pressed, prompt, 16, context_end=80)
    # through the default score_then_generate (hf's): a continuation the greedy chain leaves at once
    full = pressed.generate(prompt, 16, context_end=80)
    continuation = np.asarray([next(t for t in range(10, 20) if t != full[0])], dtype=np.int64)
    assert pressed.score_then_generate(prompt, continuation, 16, 2, (1.0,), context_end=80, stop=lambda ids: len(ids) >= 3)[1] == full[:3]


@pytest.mark.model
def test_a_run_that_stops_once_decided_scores_every_sample_as_full_generation(tmp_path):
    """The same samples with and without the stop: equal scores per sample, each re-scored by
    RULER's own functions to the reported cells; a stopped prediction is the start of the full
    one; right answers the likelihood pass left to generation stop early, the rest run alike."""
    settings = dict(tasks=("niah_multivalue", "cwe"), lengths=(1024,), samples=3, models=("gemma-3-270m",), n_threads=1)
    runs = {full: api.ruler(**settings, full_generation=full, out=tmp_path / str(full)) for full in (True, False)}
    full, stop = (runs[f].samples.sort_values(["task", "sample"]).reset_index(drop=True) for f in (True, False))
    assert full["generation_score"].tolist() == stop["generation_score"].tolist()
    for result in runs.values():
        table = result.table.set_index(["model", "task", "length"])
        for key, score in rescored(result.samples).items():
            assert score == round(table.loc[key, "score"], 2)
    assert all(f.startswith(s) for f, s in zip(full["prediction"], stop["prediction"]))
    shorter = stop["generated_tokens"] < full["generated_tokens"]
    assert shorter.any() and (stop.loc[shorter, "generation_score"] == 1.0).all()
    assert (stop.loc[~shorter, "generated_tokens"] == full.loc[~shorter, "generated_tokens"]).all()
    assert (full.loc[full["method"] == "greedy generation", "generated_tokens"] == full["task"].map({"niah_multivalue": 128, "cwe": 120})).all()
    assert runs[True].manifest.plan["generation"] == {"gemma-3-270m": "to the limit"}
    assert runs[False].manifest.plan["generation"] == {"gemma-3-270m": "until the score is decided"}
    assert runs[True].manifest.config["full_generation"] is True and runs[False].manifest.config["full_generation"] is False
