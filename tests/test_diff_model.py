"""`ctxeval diff` with the embedded model: identity, a requantized candidate and the same GGUF
in transformers against a float64 full-softmax reference computed from the same logits, a
KV-cache candidate that is killed and resumed, and the refusals (two vocabularies, a window
beyond the context, a bad option)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from scipy.special import log_softmax

from ctxeval import api
from ctxeval.backends.model_files import embedded_model_path
from ctxeval.backends.quantize import requantize
from ctxeval.backends.registry import load_scorer, parse_model_spec
from ctxeval.data.texts import DEMO_TEXT_NAME, load_text
from ctxeval.modeldiff.run import DIFF_FILE
from ctxeval.results.records import STOP_AFTER_PASSES_ENV
from tests.conftest import run_cli

pytestmark = pytest.mark.model
KV_Q8 = "gemma-3-270m?type_k=q8_0&type_v=q8_0&flash_attn=1"


@pytest.fixture(scope="module")
def q8_gguf(tmp_path_factory):
    """The embedded Q4_K_M model requantized to Q8_0 by llama.cpp's quantizer."""
    return requantize(embedded_model_path(), tmp_path_factory.mktemp("quant") / "gemma-q8_0.gguf", "q8_0")


def _records(run_dir) -> pd.DataFrame:
    return pq.read_table(run_dir / DIFF_FILE).to_pandas()


def test_the_same_model_as_ref_and_cand_gives_exactly_zero_kl_and_full_agreement(tmp_path):
    r = run_cli("diff", "gemma-3-270m", "gemma-3-270m", "demo", "--window", "64", "--max-tokens", "128", "--reverse-kl", "--replicates", "200", "--quiet", "--out", str(tmp_path / "d"))
    assert r.returncode == 0, r.stderr
    rec = _records(tmp_path / "d")
    assert len(rec) == 128 and rec.target_pos.tolist() == list(range(128))
    assert (rec.kl == 0.0).all() and (rec.kl_reverse == 0.0).all()
    assert rec.same_top1.all() and (rec.ref_logprob == rec.cand_logprob).all() and (rec.topk_overlap == 1.0).all()
    for column in ("topk_ids", "topk_logprobs"):
        assert all((x == y).all() for x, y in zip(rec[f"ref_{column}"], rec[f"cand_{column}"]))
    report = json.loads((tmp_path / "d" / "diff.json").read_text())["summary"]["all"]
    assert report["same_top1"]["estimate"] == 100.0 and report["kl"]["max"] == 0.0
    assert [report["ppl_ratio"]["ratio"]["low"], report["ppl_ratio"]["ratio"]["high"]] == [1.0, 1.0]


def test_a_requantized_candidate_matches_a_float64_reference_from_the_same_logits(tmp_path, q8_gguf):
    result = api.diff("gemma-3-270m", str(q8_gguf), [DEMO_TEXT_NAME], window=40, max_tokens=80, reverse=True, top_k=5,
                      block_rows=16, out=tmp_path / "d", bootstrap=api.Bootstrap(replicates=200))
    rec = _records(result.run_dir)
    assert len(rec) == 80 and (rec.kl >= 0).all() and (rec.kl_reverse >= 0).all()
    assert rec.kl.max() > 0  # the quantization changes the distribution
    with _loaded("gemma-3-270m", str(q8_gguf)) as (ref, cand):
        ref_scores = _matches_a_float64_reference(rec[rec.pass_index == 0], ref, cand, 40)
    # decode batches of 16 and of 512: bit-equal on Intel AMX, AMD AVX-512 and AMD AVX2
    # (docs/numerics.md, test_llamacpp.py::test_scores_do_not_depend_on_the_batch_size)
    np.testing.assert_allclose(rec[rec.pass_index == 0].ref_logprob, ref_scores.logprob, rtol=0, atol=1e-6)
    np.testing.assert_array_equal(rec[rec.pass_index == 0].ref_rank, ref_scores.rank)


def test_the_embedded_gguf_in_llamacpp_and_in_transformers_pair_and_match_a_float64_reference(tmp_path):
    """One backend against the other on the same Q4_K_M weights (llama.cpp's quantized kernels,
    transformers' float32 expansion of them): one vocabulary, though llama.cpp gives a control
    token no bytes in running text and transformers its text."""
    result = api.diff("gemma-3-270m", "hf:gemma-3-270m", [DEMO_TEXT_NAME], window=40, max_tokens=40, reverse=True, top_k=5,
                      block_rows=16, out=tmp_path / "d", bootstrap=api.Bootstrap(replicates=200))
    rec = _records(result.run_dir)
    assert len(rec) == 40 and (rec.kl >= 0).all() and (rec.kl_reverse >= 0).all() and rec.kl.max() > 0
    assert rec.same_top1.mean() > 0.8 and (rec.delta_p.abs() < 0.5).all()  # the same model, differently computed
    assert result.report["summary"]["all"]["kl"]["estimate"] < 0.05
    with _loaded("gemma-3-270m", "hf:gemma-3-270m") as (ref, cand):
        _matches_a_float64_reference(rec, ref, cand, 40)
        assert (ref.token_bytes(0), cand.token_bytes(0)) == (b"", b"<pad>")
        assert ref.token_text(0) == cand.token_text(0) == b"<pad>" and ref.info.bos_id == cand.info.bos_id == 2


@contextlib.contextmanager
def _loaded(ref_spec: str, cand_spec: str):
    """Both models of a diff, loaded once for a test's checks and closed after them."""
    ref, cand = load_scorer(parse_model_spec(ref_spec)), load_scorer(parse_model_spec(cand_spec))
    try:
        yield ref, cand
    finally:
        ref.close()
        cand.close()


def _matches_a_float64_reference(first, ref, cand, n: int):
    """Check the records of a diff's first window of `n` tokens of the demo text against a
    float64 full softmax of both models' own logits, from the diff's own computation: the same
    input (BOS + the window's n tokens, as the diff decodes a window) in the same blocks of 16
    rows (an hf model's head in blocks of 512 moves a float32 log-probability by up to 4e-6, a
    decode of one token fewer moves llama.cpp's last rows), so the logits are the same floats and
    a fixed 1e-6 bound holds; returns REF's scoring-path scores (decode batches of 512)."""
    tokens = np.asarray(ref.tokenize(load_text(DEMO_TEXT_NAME).content), dtype=np.int32)[:n]
    input_ids = np.concatenate([[ref.info.bos_id], tokens]).astype(np.int32)
    positions = np.arange(n)
    z = np.concatenate([b.copy() for b in ref.logit_blocks(input_ids, positions, 16)])
    w = np.concatenate([b.copy() for b in cand.logit_blocks(input_ids, positions, 16)])
    ref_scores = ref.score(input_ids, positions, tokens, 1, (1.0,))
    a, b = log_softmax(z.astype(np.float64), axis=1), log_softmax(w.astype(np.float64), axis=1)
    np.testing.assert_allclose(first.kl, (np.exp(a) * (a - b)).sum(axis=1), rtol=0, atol=1e-6)
    np.testing.assert_allclose(first.kl_reverse, (np.exp(b) * (b - a)).sum(axis=1), rtol=0, atol=1e-6)
    np.testing.assert_allclose(first.ref_logprob, a[positions, tokens], rtol=0, atol=1e-6)
    np.testing.assert_allclose(first.cand_logprob, b[positions, tokens], rtol=0, atol=1e-6)
    np.testing.assert_array_equal(first.ref_top1, z.argmax(axis=1))
    np.testing.assert_array_equal(first.cand_top1, w.argmax(axis=1))
    for side, lp in (("ref", a), ("cand", b)):  # a naive top-5 of the float64 softmax (ties: lowest id)
        naive = np.argsort(-lp, axis=1, kind="stable")[:, :5]
        np.testing.assert_array_equal(np.stack(first[f"{side}_topk_ids"].to_numpy()), naive)
        np.testing.assert_allclose(np.stack(first[f"{side}_topk_logprobs"].to_numpy()), np.take_along_axis(lp, naive, axis=1), rtol=0, atol=1e-5)
    return ref_scores


def test_a_killed_kv_cache_diff_resumes_to_identical_records(tmp_path):
    args = ["diff", "gemma-3-270m", KV_Q8, "demo", "--window", "32", "--max-tokens", "128", "--replicates", "200", "--quiet"]
    env = dict(os.environ, **{STOP_AFTER_PASSES_ENV: "2"})
    killed = subprocess.run([sys.executable, "-m", "ctxeval.cli", *args, "--out", str(tmp_path / "k")], capture_output=True, text=True, env=env, timeout=900)
    assert killed.returncode == 130, killed.stderr
    assert sorted(pq.read_table(tmp_path / "k" / "parts", columns=["pass_index"]).column(0).unique().to_pylist()) == [0, 1]
    resumed = run_cli(*args, "--out", str(tmp_path / "k"))
    assert resumed.returncode == 0, resumed.stderr
    clean = run_cli(*(a for a in args if a != "--quiet"), "--out", str(tmp_path / "c"))
    assert clean.returncode == 0, clean.stderr
    # the answer first: the verdict, then KL (with flash attention's own share: CAND sets
    # flash_attn=1, so REF?flash_attn=1 is measured by default), perplexity ratio and same top-1
    # with their intervals, one line each
    head = clean.stdout.splitlines()[:12]
    assert head[6].startswith("| verdict (δ = ±0.01 nats/token) | ") and head[8].startswith("|   of which the numeric path (gemma-3-270m?flash_attn=1 vs REF) | ")
    assert head[0] == "# ctxeval diff" and head[2].startswith(f"**CAND {KV_Q8} against REF gemma-3-270m**: 128 tokens, 4 windows")
    for quantity in ("| mean KL(P_ref ‖ P_cand), nats/token | ", "| perplexity ratio CAND/REF | ", "| same top-1 token | "):
        assert sum(line.startswith(quantity) and line.count("[") == 1 for line in head) == 1, (quantity, head)
    assert not any(line.startswith("| 0–32 |") for line in clean.stdout.splitlines())  # one bucket: no row repeating all
    a, b = _records(tmp_path / "k"), _records(tmp_path / "c")
    pd.testing.assert_frame_equal(a, b)
    assert (a.kl >= 0).all() and a.kl.max() > 0
    assert json.loads((tmp_path / "k" / "diff.json").read_text())["summary"] == json.loads((tmp_path / "c" / "diff.json").read_text())["summary"]
    assert (tmp_path / "k" / "report.html").read_text() == (tmp_path / "c" / "report.html").read_text()
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "k" / "pieces.parquet"), pd.read_parquet(tmp_path / "c" / "pieces.parquet"))
    manifest = json.loads((tmp_path / "k" / "manifest.json").read_text())
    assert manifest["timing"]["resumed"] is True and manifest["models"][1]["details"]["kv_cache_type"] == "q8_0"


def test_gates_fail_with_exit_code_1(tmp_path, q8_gguf):
    r = run_cli("diff", "gemma-3-270m", str(q8_gguf), "demo", "--window", "32", "--max-tokens", "64", "--replicates", "200", "--max-kl", "0", "--quiet", "--out", str(tmp_path / "g"))
    assert r.returncode == 1, r.stderr
    assert "dev gate failed: upper CI bound of the mean KL" in r.stderr


def test_two_vocabularies_are_refused_in_one_line(tmp_path):
    from tests.hf_tiny import tiny_llama_dir

    model = tiny_llama_dir(tmp_path / "tiny", "a small text for a small tokenizer " * 50, vocab_size=300)
    r = run_cli("diff", "gemma-3-270m", f"hf:{model}", "demo", "--window", "32", "--quiet", "--out", str(tmp_path / "v"))
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "different vocabularies" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize(
    ("cand", "window", "message"),
    [("gemma-3-270m", "40000", "beyond gemma-3-270m's training context of 32768"),
     ("gemma-3-270m?colour=red", "32", "unknown model option 'colour'"),
     ("gemma-3-270m?type_v=q4_0", "32", "needs flash attention")],
)
def test_bad_diff_input_is_one_line_and_exit_code_2(tmp_path, cand, window, message):
    r = run_cli("diff", "gemma-3-270m", cand, "demo", "--window", window, "--quiet", "--out", str(tmp_path / "x"))
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and message in r.stderr, r.stderr
