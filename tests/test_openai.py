"""openai backend against a real server (`ctxeval serve`, embedded Gemma), a fault-injecting
proxy in front of it, and a scripted server for the thesis reuse rule. All on 127.0.0.1."""

from __future__ import annotations

import json
import math
import re
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ctxeval import api
from ctxeval.backends.api_client import ApiClient, _retry_after
from ctxeval.backends.openai import OpenAIScorer, ServerTokenizer, Step, _compare, _compare_step, _ranking
from ctxeval.backends.openai_options import OpenAIOptions, RetryPolicy
from ctxeval.backends.request_cache import RequestCache
from ctxeval.data.texts import load_text
from ctxeval.errors import UserError
from ctxeval.errors import IncompleteRun
from ctxeval.server.launch import spawn_server
from tests.conftest import FIXTURES, run_cli
from tests.numeric_paths import FLOAT32_PATHS, assert_rank_within_rounding
from tests.servers.fault_proxy import FaultProxy
from tests.servers.scripted import ScriptedServer

# the server's echo pass (all 8 rows of the 9-token prompt) vs the sweep's pass (its 4 scored
# rows): another batch shape for the last layer, and the server's float32 log-softmax; they agree
# to float32 rounding relative to the values (FLOAT32_PATHS)
# generation path vs prompt scoring on the same context: llama.cpp evaluates them in other batch
# shapes, whose kernels round differently. Measured max |Δ logprob| on this test: 0.0035 (Intel,
# AMX), 0.0272 (AMD EPYC AVX-512, and AMD EPYC AVX2); docs/numerics.md has the wider picture
GENERATION_TOLERANCE = 0.1
SWEEP = dict(texts=["demo"], lengths=[4], n_compare=4, context_mode="approx")  # one 8-token request


@pytest.fixture(scope="module")
def server():
    """`ctxeval serve`: the embedded Gemma behind ctxeval's own server (Gemma 3's chat turns as its template)."""
    proc, url = spawn_server(n_ctx=128, n_threads=1, wait_s=600, args=("--served-model-name", "gemma", "--chat-template", str(FIXTURES / "gemma3-chat-template.jinja")))
    yield url
    proc.terminate()
    proc.wait(timeout=30)


def _options(url: str, tmp: Path, **kw) -> OpenAIOptions:
    kw.setdefault("mode", "prompt")
    kw.setdefault("retry", RetryPolicy(max_attempts=6, base_delay=0.05, timeout=600))  # a loaded CI machine is slow
    kw.setdefault("tokenizer", "gemma-3-270m")
    return OpenAIOptions(base_url=url, cache=str(tmp / "cache.sqlite"), concurrency=2, **kw)


@pytest.fixture(scope="module")
def direct(server, tmp_path_factory):
    """The reference openai run (prompt scoring, no proxy) and the llamacpp run of the same windows."""
    tmp = tmp_path_factory.mktemp("direct")
    via_api = api.sweep(models=["openai:gemma"], openai=_options(server, tmp), out=tmp / "api", **SWEEP)
    local = api.sweep(out=tmp / "local", **SWEEP)
    return via_api, local


@pytest.mark.model
def test_prompt_scoring_matches_llamacpp(direct, gemma):
    via_api, local = direct
    a, b = via_api.records, local.records
    assert list(a.target_pos) == list(b.target_pos) and list(a.target_id) == list(b.target_id)
    assert list(a.char_start) == list(b.char_start) and list(a.n_bytes) == list(b.n_bytes)
    np.testing.assert_allclose(a.logprob, b.logprob, **FLOAT32_PATHS)
    np.testing.assert_allclose(np.stack(a.topk_logprobs), np.stack(b.topk_logprobs), **FLOAT32_PATHS)
    # ranks from the server's prompt_logprobs (vLLM's extension), beyond the top-20 too, against
    # the sweep pass's own logits: exact where no other logit is within rounding of the target's
    start = int(b.target_pos.iloc[0] - b.context_len.iloc[0])
    ids = gemma.tokenize(load_text("demo").content)[start : int(b.target_pos.iloc[-1]) + 1]
    positions = (b.target_pos - start).to_numpy()
    rows = np.concatenate(list(gemma.logit_blocks(np.asarray([gemma.info.bos_id, *ids], dtype=np.int32), positions, 512)))
    assert_rank_within_rounding(a["rank"].to_numpy(), rows, b.target_id.to_numpy())
    np.testing.assert_array_equal(b["rank"], 1 + (rows > rows[np.arange(len(rows)), b.target_id.to_numpy()][:, None]).sum(axis=1))
    assert (b["rank"] > 20).any()
    # bits per byte agree because bytes come from the same exact token spans
    assert via_api.summary.bpb[0] == pytest.approx(local.summary.bpb[0], abs=1e-5)
    manifest = json.loads((via_api.run_dir / "manifest.json").read_text())
    usage = manifest["api_usage"]["openai:gemma"]
    assert usage["requests"] - usage["retries"] == 1 and usage["prompt_tokens"] == 9 and usage["failed"] == 0
    assert manifest["models"][0]["capabilities"] == {"full_logits": False, "max_top_k": 20, "temperatures": False, "generation": False}


@pytest.mark.model
def test_faults_retried_failures_reported_and_cache_free(server, direct, tmp_path):
    proxy = FaultProxy(server, slow_seconds=1.0)  # slow, within the timeout (a timeout is tested below)
    options = _options(proxy.url, tmp_path)
    try:
        proxy.always_fail = True  # a permanent failure: reported, nothing scored
        with pytest.raises(IncompleteRun, match="1 of 1 passes failed"):
            api.sweep(models=["openai:gemma"], openai=options, out=tmp_path / "run", **SWEEP)
        manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
        assert manifest["status"] == "incomplete" and len(manifest["failed_passes"]) == 1
        assert manifest["api_usage"]["openai:gemma"]["failed"] == 1
        assert not (tmp_path / "run" / "records.parquet").exists()

        proxy.always_fail = False  # the same command again, through every kind of fault
        proxy.faults.extend(["429", "500", "drop", "malformed", "slow"])
        received = proxy.received
        result = api.sweep(models=["openai:gemma"], openai=options, out=tmp_path / "run", **SWEEP)
        usage = json.loads((tmp_path / "run" / "manifest.json").read_text())["api_usage"]["openai:gemma"]
        assert usage["retries"] == 4 and usage["requests"] == 5 and proxy.received - received == 5
        total = json.loads((tmp_path / "run" / "manifest.json").read_text())["api_usage_total"]["openai:gemma"]
        assert total["requests"] == 6 + 5 and total["failed"] == 1  # both sessions of this run directory
        cols = ["target_pos", "logprob", "rank"]
        pd.testing.assert_frame_equal(result.records[cols], direct[0].records[cols])

        received = proxy.received  # an identical run in a new directory: all from the cache
        again = api.sweep(models=["openai:gemma"], openai=options, out=tmp_path / "again", **SWEEP)
        assert proxy.received == received
        usage = json.loads((tmp_path / "again" / "manifest.json").read_text())["api_usage"]["openai:gemma"]
        assert usage["requests"] == 0 and usage["cache_hits"] == 1 and usage["cached_prompt_tokens"] == 9
        pd.testing.assert_frame_equal(again.records[cols], direct[0].records[cols])
    finally:
        proxy.close()


@pytest.mark.model
def test_generation_path_first_step_equals_prompt_scoring(server, direct, tmp_path):
    """Generation (completions without echo) at temperature 0: the first target of the window is
    scored from the same context as in prompt scoring; later targets only while sampled == text."""
    options = _options(server, tmp_path, mode="generate", gen_tokens=4, temperature=0.0)
    result = api.sweep(models=["openai:gemma"], openai=options, out=tmp_path / "gen", **SWEEP)
    gen, ref = result.records, direct[0].records
    assert len(gen) == 4 and list(gen.context_len) == [4, 5, 6, 7]
    # a reference outside the returned top-20 has no log-probability on this path
    assert gen.logprob.isna().tolist() == (ref["rank"] > 20).tolist()
    # the same contexts, but evaluated in other batch shapes (a 5-7 token prompt batch, or a
    # one-token decode for a reused step) than the 9-token echo batch: llama.cpp's CPU kernels for
    # such tiny batches round differently, hence GENERATION_TOLERANCE
    known = gen.logprob.notna()
    np.testing.assert_allclose(gen.logprob[known], ref.logprob[known], atol=GENERATION_TOLERANCE, rtol=0)
    protocol = json.loads((tmp_path / "gen" / "manifest.json").read_text())["api_usage"]["openai:gemma"]["protocol"]
    # at temperature 0 the sampled token is the greedy one: a request is reused exactly while the text's token is rank 1
    expected_requests = 1 + int((ref["rank"][:3] != 1).sum())
    assert protocol == {"requests": expected_requests, "comparisons": 4}


@pytest.mark.model
def test_chat_path_runs_thesis_protocol(server, tmp_path):
    options = _options(server, tmp_path, mode="chat", gen_tokens=2, top_logprobs=5)
    result = api.sweep(models=["openai:gemma"], openai=options, out=tmp_path / "chat", texts=["demo"], lengths=[4], n_compare=2, context_mode="approx")
    recs = result.records
    assert len(recs) == 2 and recs["rank"].dropna().between(1, 5).all()
    usage = json.loads((tmp_path / "chat" / "manifest.json").read_text())["api_usage"]["openai:gemma"]
    assert usage["mode"] == "chat" and 1 <= usage["protocol"]["requests"] <= 2 and usage["protocol"]["comparisons"] == 2
    assert usage["completion_tokens"] >= 2


@pytest.mark.model
def test_thesis_mode_on_the_real_server(server, tmp_path):
    """At temperature 0 the sampled token is the greedy one, so a step is reused exactly when the
    text's token was ranked first; every request sends exactly L tokens."""
    options = _options(server, tmp_path, mode="generate", temperature=0.0)
    for exhaustive in (False, True):
        out = tmp_path / f"thesis-{exhaustive}"
        result = api.sweep(models=["openai:gemma"], openai=options, out=out, texts=["demo"], lengths=[4], n_compare=4, context_mode="thesis", exhaustive=exhaustive)
        lens, ranks = result.records.context_len.tolist(), result.records["rank"].tolist()
        assert lens[0] == 4
        assert all(lens[i] == (lens[i - 1] + 1 if ranks[i - 1] == 1 else 4) for i in range(1, len(lens)))
        protocol = result.manifest["api_usage"]["openai:gemma"]["protocol"]
        assert protocol == {"requests": lens.count(4), "comparisons": len(lens)}
        # non-exhaustive: n_c comparisons; exhaustive: n_c requests
        assert (len(lens) == 4) if not exhaustive else (protocol["requests"] == 4 and len(lens) >= 4)


@pytest.mark.model
def test_server_tokenizer_is_batched_cached_and_both_url_forms_share_it(server, direct, gemma, tmp_path):
    """Without --tokenizer: the pieces of the text's distinct ids come in one detokenize request
    (per 4096 ids), every tokenizer request is cached, and a rerun into a new directory, with the
    base URL written the other way, sends nothing."""
    proxy = FaultProxy(server)
    try:
        with_v1 = api.sweep(models=["openai:gemma"], openai=_options(proxy.url + "/v1", tmp_path, tokenizer=None), out=tmp_path / "v1", **SWEEP)
        usage = with_v1.manifest["api_usage"]["openai:gemma"]
        distinct = len(set(gemma.tokenize(load_text("demo").content)))
        # BOS probe, separator (tokenize, detokenize), the text, its distinct ids' pieces; one scoring request
        assert usage["tokenizer"]["requests"] == 4 + -(-distinct // ServerTokenizer.DETOKENIZE_BATCH) and usage["requests"] == 1
        received = proxy.received
        root = api.sweep(models=["openai:gemma"], openai=_options(proxy.url, tmp_path, tokenizer=None), out=tmp_path / "root", **SWEEP)
        assert proxy.received == received  # the same cache keys for both URL forms
    finally:
        proxy.close()
    assert with_v1.manifest["run_id"] == root.manifest["run_id"]
    cols = ["target_pos", "target_id", "target_text", "char_start", "n_bytes", "logprob", "rank"]
    for run in (with_v1, root):
        pd.testing.assert_frame_equal(run.records[cols], direct[0].records[cols])


def _completion(steps: list[tuple[str, dict[str, float]]]) -> dict:
    """A /v1/completions body (no echo) for generated steps (sampled token, top logprobs)."""
    return {"choices": [{"text": "".join(s for s, _ in steps), "logprobs": {
        "tokens": [s for s, _ in steps], "token_logprobs": [top.get(s, -9.0) for s, top in steps],
        "top_logprobs": [top for _, top in steps]}}], "usage": {"prompt_tokens": 5, "completion_tokens": len(steps)}}


@pytest.mark.model
def test_reuse_stops_when_sampled_token_differs_even_if_reference_ranked_first(gemma, tmp_path):
    """The thesis code reused a generation while the reference was ranked first; at T > 0 the
    sampled token can differ, and then the next step was conditioned on a different text."""
    ids = np.asarray(gemma.tokenize("The cat sat on the mat"), dtype=np.int64)
    ref = [gemma.token_bytes(int(t)).decode() for t in ids]  # The, ' cat', ' sat', ...
    server = ScriptedServer({"/v1/completions": [
        # step 0: reference ' sat' ranked first, but ' ran' was sampled -> step 1 must not be used
        _completion([(" ran", {ref[2]: -0.5, " ran": -1.2}), (ref[3], {ref[3]: -0.1})]),
        # the second request (context now ends with the true ' sat') scores ' on'; sampled == reference
        _completion([(ref[3], {ref[3]: -0.3, " in": -1.5}), (ref[4], {" a": -0.6, ref[4]: -0.9})]),
    ]})
    try:
        scorer = OpenAIScorer("scripted", OpenAIOptions(base_url=server.url, mode="generate", tokenizer="gemma-3-270m", cache=None, gen_tokens=2))
        comparisons, requests = scorer.scan(ids, 2, 5, lambda t: 0, top_k=20)
        assert requests == 2
        assert [(c.target, c.logprob, c.rank, c.context_len) for c in comparisons] == [(2, -0.5, 1, 2), (3, -0.3, 1, 3), (4, -0.9, 2, 4)]
        prompts = [r["prompt"] for r in server.requests["/v1/completions"]]
        assert prompts == ["The cat", "The cat sat"]  # the second context holds the reference, not ' ran'
        scorer.close()
    finally:
        server.close()


def test_timeout_is_retried():
    """A response slower than the client's timeout is abandoned and the request sent again."""
    body = _completion([("x", {"x": -0.1})])
    upstream = ScriptedServer({"/v1/completions": [body]})
    proxy = FaultProxy(upstream.url, slow_seconds=4.0)
    proxy.faults.append("slow")  # this one never reaches the upstream before the client gives up
    upstream.responses["/v1/completions"].appendleft(body)
    try:
        client = ApiClient(proxy.url, None, None, retry=RetryPolicy(max_attempts=3, base_delay=0.01, timeout=2.0))
        assert client.post("/v1/completions", {"prompt": "p"}) == body
        assert client.usage.retries == 1 and client.usage.requests == 2
        client.close()
    finally:
        proxy.close()
        upstream.close()


def _echo_rank(own: float, others: list[float], k: int):
    ranking, inside = _ranking(own, others, k)
    return _compare(own, ranking, inside, 0, 0)


def test_rank_from_top_k():
    """`own` is the position's own token, which servers add to the top-k even when outside it."""
    assert _echo_rank(-1.0, [-0.5, -2.0], 3).rank == 2
    assert _echo_rank(-1.0, [-1.0, -2.0], 3).rank == 1  # ties count for the target
    beyond = _echo_rank(-3.0, [-0.5, -1.0, -2.0], 3)  # all k others more probable
    assert beyond.rank is None and beyond.topk == [-0.5, -1.0, -2.0]
    # k - 1 others above the own token: a whole top-k whose k-th is the own token, or k - 1
    # merged entries with the own token added behind them; the response cannot tell, so unknown
    # (the unreturned mass 1 - e^-1 - e^-1.5 - e^-9 = 0.41 could hold a token above e^-9)
    assert _echo_rank(-9.0, [-1.0, -1.5], 3).rank is None


def test_target_appended_behind_19_alternatives_is_unranked_not_20th():
    """k = 20, 19 alternatives -1.0 ... -2.8 and the target added by the server at -10 behind
    them: rank unknown (s_i = 0), not 20 (lin 1/20, rp 1/20 inside the cutoff); the ranking kept
    is the 19 alternatives, so the thesis's l for this position is 19."""
    alternatives = [-1.0 - i / 10 for i in range(19)]
    c = _echo_rank(-10.0, alternatives, 20)
    assert c.rank is None and len(c.topk) == 19 and c.topk[-1] == pytest.approx(-2.8)


def test_fewer_than_k_returned_and_target_below_them_is_unranked():
    """Paper 000 eqs. 4, 6, 8, 10 for a server that merged equal strings: 18 alternatives
    -1.0, -1.1, ..., -2.7 (k = 20), target -10 below them all. Not known to be in the top-20, so
    rank unknown (s_i = 0) and the top-k kept is the 18 alternatives (p_l = -2.7), not the
    target's own added entry. Before: rank 19 (lin 0.1, rp 1/19) and approx log p -10."""
    alternatives = [-1.0 - i / 10 for i in range(18)]
    c = _echo_rank(-10.0, alternatives, 20)
    assert c.rank is None and c.topk == pytest.approx(alternatives)
    # the same list with another alternative at or below the target proves it is in the top-20
    assert _echo_rank(-10.0, [*alternatives, -11.0], 20).rank == 19


def test_fewer_than_k_returned_but_the_unreturned_mass_cannot_outrank():
    """One alternative returned for k = 20. Own log p -1.0: 1 - e^-0.7 - e^-1.0 = 0.136 is
    left for unreturned tokens, less than p = e^-1.0 = 0.368, so none outranks it: rank 2.
    Own log p -4.0: 1 - e^-0.7 - e^-4 = 0.485 > e^-4 = 0.018: unknown. Values summing past 1
    (not probabilities of distinct tokens) prove nothing."""
    assert _echo_rank(-1.0, [-0.7], 20).rank == 2
    assert _echo_rank(-4.0, [-0.7], 20).rank is None
    assert _echo_rank(-0.9, [-0.5], 20).rank is None  # e^-0.5 + e^-0.9 = 1.013


def test_generation_step_with_merged_alternatives_and_sampled_outside():
    """The chat/generate path has the same case: the sampled token (= reference) is added by
    the server below 18 merged alternatives; and a reference among the alternatives keeps its
    rank while the added sampled token is not part of the top-k kept."""
    alternatives = [(f"t{i}".encode(), -1.0 - i / 10) for i in range(18)]
    step = Step(b" c", -10.0, [*alternatives, (b" c", -10.0)])
    c = _compare_step(step, b" c", 20, 0, 0)
    assert c.rank is None and c.logprob == -10.0 and c.topk == pytest.approx([v for _, v in alternatives])
    other = _compare_step(step, b"t3", 20, 0, 0)  # reference = the 4th alternative
    assert other.rank == 4 and other.logprob == pytest.approx(-1.3) and len(other.topk) == 18


def test_echo_hand_case_end_to_end_scores(tmp_path):
    """The hand case through a prompt-path sweep: server response -> records -> rank scores and
    approximate PPL. One target (' c' after 'a b'), 18 alternatives, own entry -10: lin = rp =
    a0.1 = a0.3 = avg = 0, approximate log p = -2.7 - 3 = -5.7 (approx PPL e^5.7 = 298.87),
    exact PPL e^10."""
    text = tmp_path / "three.txt"
    text.write_text("a b c")
    script = _tokenizer_script([1, 2, 3], ["a", " b", " c"])
    top = {f"t{i}": -1.0 - i / 10 for i in range(18)} | {" c": -10.0}
    script["/v1/completions"] = [{"choices": [{"text": "a b c d", "logprobs": {
        "tokens": ["a", " b", " c", " d"], "token_logprobs": [None, -0.5, -10.0, -0.1],
        "top_logprobs": [None, {" b": -0.5}, top, {" d": -0.1}]}}], "usage": {"prompt_tokens": 3, "completion_tokens": 1}}]
    server = ScriptedServer(script)
    try:
        options = OpenAIOptions(base_url=server.url, mode="prompt", cache=None, top_logprobs=20)
        result = api.sweep(texts=[text], models=["openai:s"], openai=options, lengths=[2], n_compare=1, context_mode="approx", out=tmp_path / "run")
    finally:
        server.close()
    rec = result.records.iloc[0]
    assert len(result.records) == 1 and rec.target_text == " c" and pd.isna(rec["rank"]) and rec.logprob == -10.0
    assert np.asarray(rec.topk_logprobs[:18]) == pytest.approx([-1.0 - i / 10 for i in range(18)]) and np.isnan(rec.topk_logprobs[18:]).all()
    row = result.summary.iloc[0]
    for name in ("lin", "rp", "a0.1", "a0.3", "avg", "top1"):
        assert row[name] == 0.0, name
    assert row["approx_ppl"] == pytest.approx(math.exp(5.7)) and row["ppl"] == pytest.approx(math.exp(10.0))


def test_short_lists_end_to_end_score_with_the_returned_length(tmp_path):
    """Two targets through a prompt-path sweep with --top-logprobs 20 and cutoff 20:
    ' c' is 3rd of the 5 entries the server returned (l = 5): lin (5 - 3 + 1) / 5 = 0.6,
    AVG (0.6 + 1/3 + e^-0.2 + e^-0.6) / 4 = 0.57522 (l = 20 gave 0.9 and 0.65022);
    ' d' is added by the server at -10 behind 19 alternatives -1.0 ... -2.8: rank unknown,
    scores 0 (rank 20 gave lin and rp 1/20). Group: lin 0.3, AVG 0.28761; approximate
    log p of ' d' = -2.8 - 3, so approx PPL e^((1.0 + 5.8) / 2) = e^3.4; exact PPL e^5.5.
    Both targets' lists are shorter than the cutoff: n_short_list 2."""
    text = tmp_path / "four.txt"
    text.write_text("a b c d")
    script = _tokenizer_script([1, 2, 3, 4], ["a", " b", " c", " d"])
    top_c = {"t0": -0.5, "t1": -0.8, " c": -1.0, "t3": -1.5, "t4": -2.0}
    top_d = {f"u{i}": -1.0 - i / 10 for i in range(19)} | {" d": -10.0}
    script["/v1/completions"] = [{"choices": [{"text": "a b c d e", "logprobs": {
        "tokens": ["a", " b", " c", " d", " e"], "token_logprobs": [None, -0.5, -1.0, -10.0, -0.1],
        "top_logprobs": [None, {" b": -0.5}, top_c, top_d, {" e": -0.1}]}}], "usage": {"prompt_tokens": 4, "completion_tokens": 1}}]
    server = ScriptedServer(script)
    try:
        options = OpenAIOptions(base_url=server.url, mode="prompt", cache=None, top_logprobs=20)
        result = api.sweep(texts=[text], models=["openai:s"], openai=options, lengths=[2], n_compare=2, context_mode="approx", out=tmp_path / "run")
    finally:
        server.close()
    recs = result.records
    assert recs.target_text.tolist() == [" c", " d"]
    assert recs["rank"].iloc[0] == 3 and pd.isna(recs["rank"].iloc[1])
    assert recs["topk_returned"].tolist() == [5, 19]
    row = result.summary.iloc[0]
    avg_c = (0.6 + 1 / 3 + math.exp(-0.2) + math.exp(-0.6)) / 4
    assert avg_c == pytest.approx(0.57522, abs=1e-5)
    assert row["lin"] == pytest.approx(0.3) and row["rp"] == pytest.approx(1 / 6)
    assert row["avg"] == pytest.approx(avg_c / 2) and row["avg"] == pytest.approx(0.28761, abs=1e-5)
    assert row["approx_ppl"] == pytest.approx(math.exp(3.4)) and row["ppl"] == pytest.approx(math.exp(5.5))
    assert row["n_short_list"] == 2
    tables = (tmp_path / "run" / "tables.md").read_text()
    assert "2 of 2 targets were ranked in a top-k list the server returned shorter than the cutoff" in tables


def test_retry_after_header():
    assert _retry_after("2") == 2.0 and _retry_after(None) is None and _retry_after("garbage") is None
    assert _retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # a date in the past: no wait


def test_cache_never_holds_the_api_key(tmp_path, monkeypatch):
    body = _completion([("x", {"x": -0.1})])
    server = ScriptedServer({"/v1/completions": [body]})
    monkeypatch.setenv("SECRET_KEY_ENV", "sk-test-123456")
    try:
        cache = RequestCache(tmp_path / "c.sqlite")
        client = ApiClient(server.url, "sk-test-123456", cache)
        assert client.post("/v1/completions", {"model": "m", "prompt": "p"}) == body
        assert client.post("/v1/completions", {"model": "m", "prompt": "p"}) == body  # second: cache
        assert client.usage.requests == 1 and client.usage.cache_hits == 1
        client.close()
        cache.close()
    finally:
        server.close()
    raw = (tmp_path / "c.sqlite").read_bytes()
    assert b"sk-test-123456" not in raw
    rows = sqlite3.connect(tmp_path / "c.sqlite").execute("SELECT key, response FROM responses").fetchall()
    assert len(rows) == 1 and "sk-test" not in rows[0][0] + rows[0][1]


@pytest.mark.model
def test_cli_dry_run_sends_nothing():
    server = ScriptedServer({})  # would record any request
    try:
        result = run_cli("sweep", "demo", "--model", "openai:x", "--base-url", server.url, "--api-mode", "prompt", "--tokenizer", "gemma-3-270m",
                         "--lengths", "8,16", "--n-compare", "5", "--dry-run", "--price-in", "2", "--price-out", "8", "--cache", "none")
        assert result.returncode == 0, result.stderr
        # exact mode: one request per target; prompt = BOS + L context + target (5 x 10 + 5 x 18), completion 1 token
        assert "| openai:x | prompt | 10 | 10 | 140 | 10 | 0.0004 |" in result.stdout
        # thesis: at most n_c requests of exactly BOS + L tokens; non-exhaustive completions at most
        # 5 + 4 + 3 + 2 + 1 (each request asks only for the comparisons still missing), exhaustive 5 x gen_tokens (= n_c)
        for flag, completion, price in (("--non-exhaustive", 30, "0.0005"), ("--exhaustive", 50, "0.0007")):
            result = run_cli("sweep", "demo", "--model", "openai:x", "--base-url", server.url, "--api-mode", "generate", "--tokenizer", "gemma-3-270m",
                             "--lengths", "8,16", "--n-compare", "5", "--context-mode", "thesis", flag, "--dry-run", "--price-in", "2", "--price-out", "8", "--cache", "none")
            assert result.returncode == 0, result.stderr
            assert f"| openai:x | generate | 2 | 10 | 130 | {completion} | {price} |" in result.stdout
        assert not server.requests
    finally:
        server.close()


# --- a scripted server tokenizer: "a b c d e f" is the ids 1-6, BOS 100, the separator "\x00" 101 ---
WORDS = ["a", " b", " c", " d", " e", " f"]


def _tokenizer_script(text_ids: list[int], pieces: list[str]) -> dict[str, list]:
    """/extras/* answers for a ServerTokenizer that tokenizes one text: BOS probe, separator
    check (tokenize, detokenize), the text, one batched detokenize of its distinct ids."""
    return {
        "/extras/tokenize": [{"tokens": [100]}, {"tokens": [100, 101]}, {"tokens": [100, *text_ids]}],
        "/extras/detokenize": [{"text": "\x00"}, {"text": "\x00".join(pieces)}],
    }


def test_thesis_context_schedule_slides_back_to_l_after_a_miss(tmp_path):
    """Paper 000, 3.1.2: every request sends exactly the L tokens before its first target; a reused
    step j sees L + j. L = 2, n_c = 4 on a 6-token text (so the start is token 0)."""
    text = tmp_path / "six.txt"
    text.write_text("a b c d e f")
    script = _tokenizer_script([1, 2, 3, 4, 5, 6], WORDS)
    script["/v1/completions"] = [
        # request 1 ("a b"): ' c' sampled = reference -> reused; ' x' sampled next -> ' d' scored, then stop
        _completion([(" c", {" c": -0.2, " x": -1.9}), (" x", {" x": -0.4, " d": -1.1}), (" y", {" y": -0.1}), (" z", {" z": -0.1})]),
        # request 2: exactly the L = 2 tokens before ' e', not the 4 since the start (approx mode's context)
        _completion([(" e", {" e": -0.3}), (" f", {" f": -0.5, " g": -0.7})]),
    ]
    server = ScriptedServer(script)
    try:
        options = OpenAIOptions(base_url=server.url, mode="generate", cache=None)
        result = api.sweep(texts=[text], models=["openai:s"], openai=options, lengths=[2], n_compare=4, context_mode="thesis", out=tmp_path / "run")
        requests = server.requests["/v1/completions"]
    finally:
        server.close()
    assert [r["prompt"] for r in requests] == ["a b", " c d"]
    assert [r["max_tokens"] for r in requests] == [4, 2]  # gen_tokens = n_c, then the 2 comparisons still missing
    recs = result.records
    assert recs.target_pos.tolist() == [2, 3, 4, 5] and recs.context_len.tolist() == [2, 3, 2, 3]
    assert recs.logprob.tolist() == [-0.2, -1.1, -0.3, -0.5] and recs["rank"].tolist() == [1, 2, 1, 1]
    assert set(recs.context_mode) == {"thesis"} and set(recs.nominal_len) == {2}
    assert result.manifest["api_usage"]["openai:s"]["protocol"] == {"requests": 2, "comparisons": 4}
    assert json.loads(result.manifest["config"]["backend_options"])["gen_tokens"] == 4


def test_thesis_exhaustive_stops_after_n_c_requests_not_comparisons():
    script = _tokenizer_script([1, 2, 3, 4, 5, 6], WORDS)
    script["/v1/completions"] = [
        _completion([(" c", {" c": -0.2}), (" d", {" d": -0.3, " x": -0.9})]),  # both steps reused
        _completion([(" x", {" x": -0.1, " e": -0.6})]),  # context back to the 2 tokens before ' e'; a miss
    ]
    server = ScriptedServer(script)
    try:
        scorer = OpenAIScorer("s", OpenAIOptions(base_url=server.url, mode="generate", cache=None, gen_tokens=2))
        ids = np.asarray(scorer.tokenize("a b c d e f"))
        comparisons, requests = scorer.thesis(ids, 2, len(ids), n_compare=2, exhaustive=True, top_k=20)
        scorer.close()
        prompts = [r["prompt"] for r in server.requests["/v1/completions"]]
    finally:
        server.close()
    assert requests == 2 and prompts == ["a b", " c d"]
    # 3 comparisons from n_c = 2 requests (non-exhaustive would stop after the first request's 2)
    assert [(c.target, c.context_len, c.logprob, c.rank) for c in comparisons] == [(2, 2, -0.2, 1), (3, 3, -0.3, 1), (4, 2, -0.6, 2)]


def test_server_tokenizer_fetches_pieces_in_one_request_and_splits_bad_batches():
    """One detokenize request for all distinct ids; a batch whose answer does not split into one
    part per id (here: a piece holding the separator) is halved until single ids."""
    server = ScriptedServer({
        "/extras/tokenize": [{"tokens": [100]}, {"tokens": [100, 101]}, {"tokens": [100, 1, 2, 1, 3]}],
        "/extras/detokenize": [
            {"text": "\x00"},  # separator check
            {"text": "a\x00b\x00\x00c"},  # [1, 101, 2, 101, 3]: 4 parts for 3 ids -> halve
            {"text": "a"},  # [1]
            {"text": "b\x00\x00c"},  # [2, 101, 3]: 3 parts for 2 ids -> halve
            {"text": "b\x00"},  # [2]
            {"text": "c"},  # [3]
        ],
    })
    try:
        tokenizer = ServerTokenizer(ApiClient(server.url, None, None), "m")
        assert tokenizer.tokenize("ab\x00ac") == [1, 2, 1, 3]
        assert [tokenizer.token_bytes(t) for t in (1, 2, 3)] == [b"a", b"b\x00", b"c"]
        sent = [r["tokens"] for r in server.requests["/extras/detokenize"]]
        tokenizer.close()
    finally:
        server.close()
    assert sent == [[101], [1, 101, 2, 101, 3], [1], [2, 101, 3], [2], [3]]


def test_base_url_with_or_without_v1_reaches_the_same_routes_and_cache_key(tmp_path):
    body = _completion([("x", {"x": -0.1})])
    server = ScriptedServer({"/v1/completions": [body]})
    try:
        cache = RequestCache(tmp_path / "c.sqlite")
        with_v1 = ApiClient(server.url + "/v1/", None, cache)
        assert with_v1.post("/v1/completions", {"model": "m", "prompt": "p"}) == body  # not /v1/v1/completions
        root = ApiClient(server.url, None, cache)
        assert root.post("/v1/completions", {"model": "m", "prompt": "p"}) == body
        assert (with_v1.usage.requests, root.usage.requests, root.usage.cache_hits) == (1, 0, 1)
        for client in (with_v1, root):
            client.close()
        cache.close()
    finally:
        server.close()
    assert OpenAIOptions(base_url="http://h:8000/v1/").identity() == OpenAIOptions(base_url="http://h:8000").identity()


def test_missing_tokenize_endpoint_names_the_url_tried():
    server = ScriptedServer({})  # every route answers 404
    try:
        with pytest.raises(UserError, match=re.escape(f"no tokenize endpoint (HTTP 404 from POST {server.url}/extras/tokenize")):
            OpenAIScorer("m", OpenAIOptions(base_url=server.url + "/v1", mode="prompt", cache=None))
    finally:
        server.close()


@pytest.mark.parametrize(
    "args,message",
    [
        (["--context-mode", "thesis"], "not an openai: model"),
        (["--model", "openai:m", "--api-mode", "prompt", "--context-mode", "thesis"], "use --api-mode generate, chat or auto"),
        (["--exhaustive"], "--exhaustive applies to --context-mode thesis only"),
        (["--model", "openai:m", "--base-url", "localhost:8000", "--cache", "none"], "--base-url must be an http"),
    ],
)
def test_thesis_and_url_user_errors(tmp_path, args, message):
    r = run_cli("sweep", "demo", *args, "--quiet", "--out", str(tmp_path / "out"))
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("ctxeval: error:") and message in lines[0], r.stderr
