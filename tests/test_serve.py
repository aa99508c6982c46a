"""`ctxeval serve` (src/ctxeval/server/): the real server on 127.0.0.1 over the embedded Gemma,
against `ctxeval score` records of the same token windows."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import pytest

from ctxeval import api
from ctxeval.server.launch import serve_in_thread
from ctxeval.server.settings import ServerSettings
from ctxeval.server.worker import CallJob
from tests.conftest import run_cli
from tests.numeric_paths import FLOAT32_PATHS, assert_rank_within_rounding

# the server's pass and `ctxeval score`'s pass are the same llama.cpp decode of the same tokens;
# docs/numerics.md: equal inputs in equal batch shapes give bit-equal logits
TOLERANCE = 1e-4
KEY = "test-key-123"
WINDOW = 48


@pytest.fixture(scope="module")
def served(gemma):
    settings = ServerSettings(n_ctx=512, api_key=KEY, max_queue=8, max_body_bytes=64 << 10, served_names=("gemma-3-270m", "gemma"))
    with serve_in_thread(settings, gemma) as (url, model):
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {KEY}"}, timeout=600) as client:
            yield client, model


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """`ctxeval score demo --window 48` over the first 240 tokens: records and each window's ids."""
    result = api.score("demo", window=WINDOW, max_tokens=5 * WINDOW, out=tmp_path_factory.mktemp("score"))
    records = result.records
    windows = [group for _, group in records.groupby("window_id", sort=False)]
    return records, windows


def _window_prompt(group, bos: int) -> list[int]:
    """The token ids of one chunked window as a prompt: BOS, then the window's tokens."""
    return [bos, *map(int, group.target_id)]


@pytest.mark.model
def test_echo_logprobs_and_prompt_ranks_equal_ctxeval_score(served, reference, gemma):
    client, _ = served
    _, windows = reference
    prompts = [_window_prompt(g, gemma.info.bos_id) for g in windows]
    body = client.post("/v1/completions", json={"model": "gemma", "prompt": prompts, "max_tokens": 0, "echo": True, "logprobs": 5, "prompt_logprobs": 5}).json()
    assert [c["index"] for c in body["choices"]] == list(range(len(windows)))
    beyond_20 = 0
    for choice, group, prompt in zip(body["choices"], windows, prompts):
        lp = choice["logprobs"]
        assert lp["token_logprobs"][0] is None and lp["top_logprobs"][0] is None and choice["prompt_logprobs"][0] is None
        assert lp["tokens"] == [gemma.token_bytes(t).decode("utf-8", errors="ignore") for t in prompt]
        np.testing.assert_allclose(lp["token_logprobs"][1:], group.logprob, atol=TOLERANCE, rtol=0)
        ranks = [entry[str(t)]["rank"] for entry, t in zip(choice["prompt_logprobs"][1:], prompt[1:])]
        assert ranks == group["rank"].tolist()
        beyond_20 += sum(r > 20 for r in ranks)
        # alternatives: the record's top-5, in order, with their log-probabilities
        for entry, ids, values in zip(choice["prompt_logprobs"][1:], group.topk_ids, group.topk_logprobs):
            ids, values = ids[:5], values[:5]
            top = [(int(k), v["logprob"]) for k, v in entry.items() if v["rank"] <= 5 and int(k) in ids]
            assert sorted(int(k) for k, _ in top) == sorted(int(i) for i in ids)
            np.testing.assert_allclose([dict(top)[int(i)] for i in ids], values, atol=TOLERANCE, rtol=0)
        assert lp["text_offset"][1:] == [int(c) - int(group.char_start.iloc[0]) for c in group.char_start]
    assert beyond_20 > 20  # the check above covered ranks no top-20 API returns
    assert body["usage"]["prompt_tokens"] == sum(map(len, prompts)) and body["usage"]["completion_tokens"] == 0


@pytest.mark.model
def test_string_prompt_gets_bos_and_equals_the_token_id_prompt(served, reference, gemma):
    client, _ = served
    records, windows = reference
    first = windows[0]
    text = "".join(first.target_text)
    by_text = client.post("/v1/completions", json={"prompt": text, "max_tokens": 0, "echo": True, "logprobs": 0}).json()["choices"][0]
    by_ids = client.post("/v1/completions", json={"prompt": _window_prompt(first, gemma.info.bos_id), "max_tokens": 0, "echo": True, "logprobs": 0}).json()["choices"][0]
    assert by_text["text"] == text and by_text["logprobs"] == by_ids["logprobs"]
    tokenized = client.post("/tokenize", json={"prompt": text}).json()
    assert tokenized["tokens"] == _window_prompt(first, gemma.info.bos_id)
    assert client.post("/tokenize", json={"prompt": text, "add_special_tokens": False}).json()["tokens"] == tokenized["tokens"][1:]
    assert client.post("/detokenize", json={"tokens": tokenized["tokens"]}).json() == {"prompt": "<bos>" + text}
    assert client.post("/tokenize", json={"prompt": "<bos>" + text}).json()["tokens"] == tokenized["tokens"]  # no second BOS
    assert client.post("/extras/detokenize", json={"tokens": tokenized["tokens"]}).json() == {"text": text}
    info = client.get("/tokenizer_info").json()
    assert (info["bos_token"], info["eos_token"]) == ("<bos>", "<eos>")


@pytest.mark.model
def test_one_greedy_token_and_generation(served, gemma):
    """max_tokens 1 at temperature 0 (lm-eval's loglikelihood request) reads the argmax from the
    row at the prompt's last token, inside the prompt's one decode, whose scores stay `score`'s;
    longer completions are the backend's own greedy generation."""
    client, _ = served
    ids = [gemma.info.bos_id, *gemma.tokenize("The capital of France is")]
    one = client.post("/v1/completions", json={"prompt": ids, "max_tokens": 1, "temperature": 0, "echo": True, "logprobs": 3}).json()["choices"][0]
    arr = np.asarray(ids)
    with_greedy = gemma.score(arr, np.arange(len(ids)), np.append(arr[1:], 0), 3, (1.0,))
    scores, after = with_greedy.logprob[:-1], with_greedy.rows(len(ids) - 1, len(ids))
    alone = gemma.score(arr, np.arange(len(ids) - 1), arr[1:], 3, (1.0,))
    # one more output row (another batch shape for the last layer) leaves the decode as it was,
    # up to float32 rounding; the server's pass is `with_greedy`'s
    np.testing.assert_allclose(scores, alone.logprob, **FLOAT32_PATHS)
    np.testing.assert_allclose(one["logprobs"]["token_logprobs"][1:-1], scores, atol=TOLERANCE, rtol=0)
    assert one["logprobs"]["tokens"][-1] == gemma.token_bytes(int(after.greedy_id[0])).decode()
    assert one["logprobs"]["token_logprobs"][-1] == pytest.approx(float(after.topk_logprobs[0, 0]), abs=TOLERANCE)
    greedy = client.post("/v1/completions", json={"prompt": ids, "max_tokens": 6, "temperature": 0, "logprobs": 1}).json()["choices"][0]
    expected = gemma.generate(np.asarray(ids), 6)
    assert greedy["text"] == b"".join(gemma.token_bytes(t) for t in expected).decode()
    assert all(lp == max(top.values()) for lp, top in zip(greedy["logprobs"]["token_logprobs"], greedy["logprobs"]["top_logprobs"]))
    sampled = [client.post("/v1/completions", json={"prompt": "Once upon a time", "max_tokens": 8, "temperature": 1.0, "seed": seed}).json()["choices"][0]["text"] for seed in (1, 1, 2)]
    assert sampled[0] == sampled[1]  # the same seed draws the same tokens
    stop = client.post("/v1/completions", json={"prompt": ids, "max_tokens": 6, "temperature": 0, "stop": [greedy["text"][3:6]]}).json()["choices"][0]
    assert stop["finish_reason"] == "stop" and greedy["text"].startswith(stop["text"]) and greedy["text"][3:6] not in stop["text"]


@pytest.mark.model
def test_bad_requests_are_4xx_naming_the_field_and_the_server_goes_on(served):
    client, _ = served
    good = {"prompt": "Hello world", "max_tokens": 0, "echo": True, "logprobs": 1}
    cases = [
        ({"prompt": 5}, 400, "prompt"),
        ({"prompt": [1, "a"]}, 400, "prompt"),
        ({"prompt": []}, 400, "prompt"),
        ({"prompt": "x", "max_tokens": "many"}, 400, "max_tokens"),
        ({"prompt": "x", "max_tokens": -1}, 400, "max_tokens"),
        ({"prompt": "x", "echo": "yes"}, 400, "echo"),
        ({"prompt": "x", "logprobs": 21}, 400, "logprobs"),
        ({"prompt": "x", "temperature": 3}, 400, "temperature"),
        ({"prompt": "x", "n": 2}, 400, "n"),
        ({"prompt": [1, 262144]}, 400, "prompt"),
        ({"prompt": list(range(10, 510)), "max_tokens": 16}, 400, "prompt"),  # 500 + 16 > --n-ctx 512
        ({"prompt": "x", "model": "gpt-4"}, 404, "model"),
        ({}, 400, "prompt"),
    ]
    for body, status, param in cases:
        r = client.post("/v1/completions", json=body)
        assert (r.status_code, r.json()["error"]["param"]) == (status, param), (body, r.text)
        assert client.post("/v1/completions", json=good).status_code == 200
    r = client.post("/v1/completions", content=b"{not json", headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and "error" in r.json()
    r = client.post("/v1/completions", json={"prompt": "x" * (70 << 10)})
    assert r.status_code == 413 and "--max-body-bytes" in r.json()["error"]["message"]
    r = httpx.post(str(client.base_url) + "/v1/completions", json=good)
    assert r.status_code == 401
    r = httpx.post(str(client.base_url) + "/v1/completions", json=good, headers={"Authorization": "Bearer wrong"})
    assert r.status_code == 401
    assert httpx.get(str(client.base_url) + "/health").status_code == 200  # no key needed
    assert client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]}).status_code == 400  # no template
    assert client.post("/v1/completions", json=good).status_code == 200


@pytest.mark.model
def test_eight_concurrent_clients_lose_and_duplicate_nothing(served, reference, gemma):
    client, _ = served
    _, windows = reference
    prompts = [_window_prompt(windows[i % len(windows)], gemma.info.bos_id)[: 20 + 3 * i] for i in range(8)]
    alone = [client.post("/v1/completions", json={"prompt": p, "max_tokens": 0, "echo": True, "logprobs": 1}).json()["choices"][0]["logprobs"] for p in prompts]
    barrier = threading.Barrier(8)

    def ask(i: int) -> list:
        barrier.wait()
        answers = []
        for _ in range(3):
            r = client.post("/v1/completions", json={"prompt": prompts[i], "max_tokens": 0, "echo": True, "logprobs": 1})
            assert r.status_code == 200, r.text
            answers.append(r.json()["choices"][0]["logprobs"])
        return answers

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(ask, range(8)))
    for i, answers in enumerate(results):
        assert len(answers) == 3
        for answer in answers:  # each client got its own prompt back, scored as when alone
            assert answer["tokens"] == alone[i]["tokens"]
            np.testing.assert_allclose(answer["token_logprobs"][1:], alone[i]["token_logprobs"][1:], atol=TOLERANCE, rtol=0)


@pytest.mark.model
def test_a_full_queue_is_429_and_clears(served):
    client, model = served
    started, release = threading.Event(), threading.Event()
    model.worker.submit(CallJob(lambda scorer: started.set() or release.wait(60)))
    assert started.wait(60)  # the worker is busy
    fillers = [model.worker.submit(CallJob(lambda scorer: None)) for _ in range(8)]  # the queue is full
    try:
        r = client.post("/v1/completions", json={"prompt": "Hello", "max_tokens": 0, "echo": True, "logprobs": 1})
        assert r.status_code == 429 and "--max-queue" in r.json()["error"]["message"]
    finally:
        release.set()
    for f in fillers:
        f.result(timeout=60)
    assert client.post("/v1/completions", json={"prompt": "Hello", "max_tokens": 0, "echo": True, "logprobs": 1}).status_code == 200


def test_serve_refuses_bad_settings():
    assert run_cli("serve", "model.bin", "--port", "0").stderr.strip() == "ctxeval: error: --port must be between 1 and 65535, got 0"
    result = run_cli("serve", "--string-bos", "always")
    assert result.returncode == 2 and result.stderr.strip() == "ctxeval: error: --string-bos must be one of model, none, got 'always'"
    result = run_cli("serve", "openai:gpt-4o")
    assert result.returncode == 2 and "scores with a local model" in result.stderr


def test_hf_backend_served_with_concurrent_requests_batched(tmp_path):
    """A tiny transformers model behind the server: 6 clients at once, their equal-length
    prompts grouped into `score_batch` (one forward), each answer equal to scoring it alone."""
    pytest.importorskip("torch")
    from ctxeval.backends.hf import HFScorer
    from ctxeval.data.texts import load_text
    from tests.hf_tiny import tiny_llama_dir

    text = load_text("demo").content
    scorer = HFScorer(tiny_llama_dir(tmp_path / "tiny", text[:20000]), "tiny")
    ids = scorer.tokenize(text[:4000])
    prompts = [[scorer.info.bos_id, *ids[i * 40 : i * 40 + 39]] for i in range(6)]  # 40 tokens each
    batch_sizes = []
    score_batch = scorer.score_batch
    scorer.score_batch = lambda passes, *args: batch_sizes.append(len(passes)) or score_batch(passes, *args)
    with serve_in_thread(ServerSettings(model="tiny", n_ctx=256), scorer) as (url, model):
        started, release = threading.Event(), threading.Event()
        model.worker.submit(CallJob(lambda s: started.set() or release.wait(60)))
        assert started.wait(60)  # the worker is busy while all six requests queue up

        def ask(p: list[int]) -> dict:
            body = {"prompt": p, "max_tokens": 1, "temperature": 0, "echo": True, "logprobs": 1, "prompt_logprobs": 0}
            return httpx.post(url + "/v1/completions", json=body, timeout=600).json()["choices"][0]

        with ThreadPoolExecutor(6) as pool:
            futures = [pool.submit(ask, p) for p in prompts]
            while model.worker.waiting < 6:
                threading.Event().wait(0.05)
            release.set()
            answers = [f.result() for f in futures]
        longer = httpx.post(url + "/v1/completions", json={"prompt": prompts[0], "max_tokens": 4, "temperature": 0}, timeout=60)
    assert batch_sizes[0] == 6  # one call, one [6, 40] forward
    # hf generates (a KV cache, one token per forward): the server's text is the scorer's generation
    generated = scorer.generate(np.asarray(prompts[0]), 4)
    assert longer.status_code == 200 and longer.json()["choices"][0]["text"] == b"".join(scorer.token_bytes(t) for t in generated).decode("utf-8", errors="replace")
    for p, answer in zip(prompts, answers):
        # the same 40 tokens alone: a [1, 40] forward against the batch's [6, 40] one, another
        # numeric path (FLOAT32_PATHS; ranks where no near-tie decides them)
        arr = np.asarray(p)
        alone = scorer.score(arr, np.arange(len(p) - 1), arr[1:], 1, (1.0,))
        np.testing.assert_allclose(answer["logprobs"]["token_logprobs"][1:-1], alone.logprob, **FLOAT32_PATHS)
        rows = np.concatenate(list(scorer.logit_blocks(arr, np.arange(len(p) - 1), 64)))
        assert_rank_within_rounding([e[str(t)]["rank"] for e, t in zip(answer["prompt_logprobs"][1:], p[1:])], rows, arr[1:])
