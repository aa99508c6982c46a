"""Cross-tokenizer alignment: a sweep over models with different tokenizers starts every
context at the same character, and summaries carry bits per byte."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from ctxeval import api
from ctxeval.pipeline import windows
from ctxeval.data.texts import Text, load_text
from ctxeval.pipeline.tokens import tokenize, tokenized_from_pieces


def spans(text: str, pieces: list[str]):
    t = Text("t", "t", text, "0" * 64)
    return tokenized_from_pieces(t, np.arange(len(pieces), dtype=np.int32), [p.encode() for p in pieces])


def test_token_start_chars_skip_tokens_that_begin_inside_a_character():
    # "é" (2 bytes) split by a byte-level tokenizer: the second half starts no character
    text = "aé b"
    raw = text.encode()
    t = Text("t", "t", text, "0" * 64)
    tt = tokenized_from_pieces(t, np.arange(4, dtype=np.int32), [raw[:1], raw[1:2], raw[2:3], raw[3:]])
    assert windows.token_start_chars(tt.char_starts, tt.char_ends).tolist() == [0, 1, 2]


def test_aligned_start_char_is_a_boundary_of_every_tokenization():
    a = spans("the cat sat on the mat", ["the", " cat", " sat", " on", " the", " mat"])
    b = spans("the cat sat on the mat", ["th", "e c", "at", " s", "at on", " the", " m", "at"])
    ba = windows.token_start_chars(a.char_starts, a.char_ends)
    bb = windows.token_start_chars(b.char_starts, b.char_ends)
    common = sorted(set(ba.tolist()) & set(bb.tolist()))
    assert common == [0, 7, 14, 18]
    assert windows.aligned_start_char(1, [ba, bb], 22) == 7  # next common boundary
    assert windows.aligned_start_char(7, [ba, bb], 22) == 7
    assert windows.aligned_start_char(15, [ba, bb], 22) == 18
    assert windows.aligned_start_char(15, [ba, bb], 16) == 14  # none left before the limit: the last one before it
    assert windows.aligned_start_char(3, [ba], 22) == 3  # one model: its own boundaries


@pytest.mark.model
def test_sweep_over_two_tokenizers_starts_at_the_same_character(gemma, tmp_path):
    from tests.hf_tiny import tiny_llama_dir

    from ctxeval.backends.hf import HFScorer
    demo = load_text("demo").content
    tiny = tiny_llama_dir(tmp_path / "tiny-bytes", demo[:20000], vocab_size=400)
    text_file = tmp_path / "text.txt"
    text_file.write_bytes(demo[20000:26000].encode())  # several thousand characters, Unicode quotes included
    result = api.sweep(
        texts=[text_file], models=["gemma-3-270m", f"hf:{tiny}"], lengths=[16, 32], n_compare=4, repeats=2,
        context_mode="exact", out=tmp_path / "run",
    )
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    starts = manifest["plan"]["start_chars"]["text"]
    text = load_text(text_file)
    hf = HFScorer(tiny, "hf:tiny-bytes")
    token_texts = {"gemma-3-270m": tokenize(gemma, text), "hf:tiny-bytes": tokenize(hf, text)}
    records = result.records
    assert set(records["model"]) == set(token_texts)
    n_tokens = {m: len(tt) for m, tt in token_texts.items()}
    assert n_tokens["gemma-3-270m"] != n_tokens["hf:tiny-bytes"]  # really different tokenizers
    distinct_starts = set()
    for (model, window_id), rows in records.groupby(["model", "window_id"]):
        length, repeat = window_id[1:].split("-r")
        first = rows.sort_values("target_pos").iloc[0]
        context_start = int(first["target_pos"]) - int(first["context_len"])
        assert int(first["context_len"]) == int(length)
        char = int(token_texts[model].char_starts[context_start])
        assert char == starts[f"L{length}-r{repeat}"], (model, window_id)
        distinct_starts.add(char)
    assert len(distinct_starts) > 2  # the starts really vary
    # bits per byte: total negative log2-likelihood over total UTF-8 bytes of the scored tokens
    for model, rows in records.groupby("model"):
        row = result.summary[(result.summary["model"] == model) & (result.summary["nominal_len"] == 16)].iloc[0]
        part = rows[rows["nominal_len"] == 16]
        assert row["bpb"] == pytest.approx(-part["logprob"].sum() / math.log(2) / part["n_bytes"].sum(), rel=1e-9)
