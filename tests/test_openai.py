"""openai backend against a real llama-cpp-python server (embedded Gemma), a fault-injecting
proxy in front of it, and a scripted server for the thesis reuse rule. All on 127.0.0.1."""

from __future__ import annotations

import json
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np
import pandas as pd
import pytest

from ctxeval import api
from ctxeval.backends.api_client import _retry_after
from ctxeval.backends.openai import OpenAIScorer, _compare
from ctxeval.backends.openai_options import OpenAIOptions, RetryPolicy
from ctxeval.run import IncompleteRun
from tests.conftest import run_cli
from tests.servers.fault_proxy import FaultProxy
from tests.servers.scripted import ScriptedServer

LAUNCHER = Path(__file__).parent / "servers" / "llama_server.py"
# float32 log-softmax on the server vs float64 log-sum-exp over the same float32 logits in
# ctxeval: they differ by float32 rounding of values of magnitude <= ~20, i.e. < 2e-6
TOLERANCE = 1e-5
# generation path vs prompt scoring on the same context: llama.cpp evaluates them in other batch
# shapes, whose kernels round differently. Measured max |Δ logprob| on this test: 0.0035 (Intel,
# AMX), 0.0272 (AMD EPYC AVX-512, and AMD EPYC AVX2); docs/numerics.md has the wider picture
GENERATION_TOLERANCE = 0.1
SWEEP = dict(texts=["demo"], lengths=[4], n_compare=4, context_mode="approx")  # one 8-token request


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server():
    """llama-cpp-python's server with the embedded Gemma, flash attention off like the backend."""
    from ctxeval.backends.registry import embedded_model_path

    port = _free_port()
    cmd = [sys.executable, str(LAUNCHER), "--model", str(embedded_model_path()), "--host", "127.0.0.1", "--port", str(port),
           "--n_ctx", "128", "--n_threads", "1", "--n_threads_batch", "1", "--flash_attn", "false", "--verbose", "false"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"server exited: {proc.stderr.read().decode()[-2000:]}")
        try:
            if httpx.get(url + "/v1/models", timeout=1).status_code == 200:
                break
        except httpx.TransportError:
            time.sleep(0.3)
    yield url
    proc.terminate()
    proc.wait(timeout=30)


def _options(url: str, tmp: Path, **kw) -> OpenAIOptions:
    kw.setdefault("mode", "prompt")
    kw.setdefault("retry", RetryPolicy(max_attempts=6, base_delay=0.05, timeout=600))  # a loaded CI machine is slow
    return OpenAIOptions(base_url=url, tokenizer="gemma-3-270m", cache=str(tmp / "cache.sqlite"), concurrency=2, **kw)


@pytest.fixture(scope="module")
def direct(server, tmp_path_factory):
    """The reference openai run (prompt scoring, no proxy) and the llamacpp run of the same windows."""
    tmp = tmp_path_factory.mktemp("direct")
    via_api = api.sweep(models=["openai:gemma"], openai=_options(server, tmp), out=tmp / "api", **SWEEP)
    local = api.sweep(out=tmp / "local", **SWEEP)
    return via_api, local


@pytest.mark.model
def test_prompt_scoring_matches_llamacpp(direct):
    via_api, local = direct
    a, b = via_api.records, local.records
    assert list(a.target_pos) == list(b.target_pos) and list(a.target_id) == list(b.target_id)
    assert list(a.char_start) == list(b.char_start) and list(a.n_bytes) == list(b.n_bytes)
    np.testing.assert_allclose(a.logprob, b.logprob, atol=TOLERANCE, rtol=0)
    np.testing.assert_allclose(np.stack(a.topk_logprobs), np.stack(b.topk_logprobs), atol=TOLERANCE, rtol=0)
    inside = b["rank"] <= 20
    assert list(a["rank"][inside]) == list(b["rank"][inside])
    assert a["rank"][~inside].isna().all()  # beyond the API's top-20: unknown, stored as null
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
    assert gen.logprob.isna().tolist() == ref["rank"].isna().tolist()
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
        _completion([(ref[3], {ref[3]: -0.3, " in": -1.5}), (ref[4], {" a": -0.2, ref[4]: -0.9})]),
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
    from ctxeval.backends.api_client import ApiClient

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


def test_rank_from_top_k():
    assert _compare(-1.0, [-0.5, -1.0, -2.0], 3, 0, 0).rank == 2
    assert _compare(-1.0, [-1.0, -1.0, -2.0], 3, 0, 0).rank == 1  # ties count for the target
    assert _compare(-3.0, [-0.5, -1.0, -2.0, -3.0], 3, 0, 0).rank is None  # beyond the top-3
    assert _compare(-3.0, [-0.5, -1.0, -2.0, -3.0], 3, 0, 0).topk == [-0.5, -1.0, -2.0]


def test_retry_after_header():
    assert _retry_after("2") == 2.0 and _retry_after(None) is None and _retry_after("garbage") is None
    assert _retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # a date in the past: no wait


def test_cache_never_holds_the_api_key(tmp_path, monkeypatch):
    from ctxeval.backends.api_client import ApiClient
    from ctxeval.backends.request_cache import RequestCache

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
        assert not server.requests
    finally:
        server.close()
