"""lm-evaluation-harness's `local-completions` against `ctxeval serve` (both real, on 127.0.0.1):
a local perplexity task (`loglikelihood_rolling`) and a local multiple-choice task
(`loglikelihood`), with token-id requests (lm-eval's default) and with text requests.
Every per-request log-likelihood is compared with ctxeval's scorer on the same token window,
and the one-window documents with `ctxeval score` records."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from ctxeval import api
from ctxeval.data.texts import load_text
from ctxeval.server.launch import serve_in_thread
from ctxeval.server.settings import ServerSettings
from tests.numeric_paths import FLOAT32_FORWARD

TOLERANCE = 1e-4  # nats, per request (a sum over its tokens)
MAX_LENGTH = 120  # lm-eval's max_length: windows of 118 predicted tokens
QUESTIONS = [
    {"question": "The capital of France is", "choices": ["Paris", "Berlin", "a banana"], "answer": 0},
    {"question": "Water freezes at a temperature of zero degrees", "choices": ["Celsius", "Kelvin", "happiness"], "answer": 0},
    {"question": "The opposite of hot is", "choices": ["cold", "warm", "seven"], "answer": 0},
]


def _documents() -> list[str]:
    demo = load_text("demo").content
    paragraphs = [p.strip() for p in demo.split("\n\n") if len(p.strip()) > 80]
    return [paragraphs[0][:300], paragraphs[1][:200], paragraphs[2][:1200]]  # the last needs several windows


def _write_tasks(root: Path) -> Path:
    docs = root / "docs.jsonl"
    docs.write_text("".join(json.dumps({"text": t}) + "\n" for t in _documents()))
    mc = root / "mc.jsonl"
    mc.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    tasks = root / "tasks"
    tasks.mkdir()
    (tasks / "ctx_rolling.yaml").write_text(
        f"task: ctx_rolling\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: {docs}\n"
        "output_type: loglikelihood_rolling\ntest_split: test\ndoc_to_text: ''\ndoc_to_target: '{{text}}'\n"
        "metric_list:\n  - metric: word_perplexity\n  - metric: bits_per_byte\n"
    )
    (tasks / "ctx_mc.yaml").write_text(
        f"task: ctx_mc\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: {mc}\n"
        "output_type: multiple_choice\ntest_split: test\ndoc_to_text: '{{question}}'\ndoc_to_choice: '{{choices}}'\n"
        "doc_to_target: '{{answer}}'\nmetric_list:\n  - metric: acc\n"
    )
    return tasks


def _run_lm_eval(url: str, tasks: Path, tokenized: bool) -> dict:
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager

    args = {"base_url": f"{url}/v1/completions", "model": "gemma-3-270m", "tokenizer_backend": "remote",
            "tokenized_requests": tokenized, "max_length": MAX_LENGTH, "batch_size": 4, "num_concurrent": 1}
    return simple_evaluate(model="local-completions", model_args=args, tasks=["ctx_rolling", "ctx_mc"],
                           task_manager=TaskManager(include_path=str(tasks)), log_samples=True, bootstrap_iters=0)


def _sum_logprob(scorer, ids: list[int], n_context: int) -> float:
    """ctxeval's scorer on one window: log-probability of ids[n_context:] after ids[:n_context],
    from the pass the server runs for an echoed prompt (every token decoded, every row but the
    last scored), so that both sides are the same computation."""
    ids_arr = np.asarray(ids, dtype=np.int64)
    scores = scorer.score(ids_arr, np.arange(len(ids) - 1), ids_arr[1:], 1, (1.0,))
    return float(scores.logprob[n_context - 1 :].sum())


def _rolling_reference(scorer, text: str) -> float:
    """lm-eval's rolling windows of `text` (BOS the prefix token), each scored by ctxeval."""
    from lm_eval.utils import get_rolling_token_windows, make_disjoint_window

    tokens = scorer.tokenize_with_specials(text)
    windows = map(make_disjoint_window, get_rolling_token_windows(tokens, scorer.info.bos_id, MAX_LENGTH - 2, 1))
    return sum(_sum_logprob(scorer, context + continuation, len(context)) for context, continuation in windows)


def _mc_reference(scorer, context: str, continuation: str) -> float:
    """lm-eval's `_encode_pair`: the whole string's tokens split after the context's (no BOS)."""
    whole = scorer.tokenize_with_specials(context + continuation)
    n_context = len(scorer.tokenize_with_specials(context))
    return _sum_logprob(scorer, whole, n_context)


@pytest.fixture(scope="module")
def lm_eval_env(tmp_path_factory):
    pytest.importorskip("lm_eval")
    saved = {k: os.environ.get(k) for k in ("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE", "HF_DATASETS_CACHE")}
    root = tmp_path_factory.mktemp("lmeval")
    os.environ.update(HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1", HF_DATASETS_CACHE=str(root / "hf-datasets"))
    yield _write_tasks(root)
    for k, v in saved.items():
        os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)


@pytest.mark.model
@pytest.mark.parametrize("tokenized", [True, False], ids=["token-ids", "text"])
def test_lm_eval_local_completions_equals_ctxeval_scoring(gemma, lm_eval_env, tokenized, tmp_path):
    # text requests: lm-eval counts context tokens without a BOS the server would add, so the
    # server adds none to strings (a window that starts with BOS is sent as "<bos>..." and keeps it)
    settings = ServerSettings(n_ctx=512, string_bos="model" if tokenized else "none")
    with serve_in_thread(settings, gemma) as (url, _):
        results = _run_lm_eval(url, lm_eval_env, tokenized)
    rolling = results["samples"]["ctx_rolling"]
    assert len(rolling) == 3
    for sample in rolling:
        text = sample["arguments"][0][0] if isinstance(sample["arguments"][0], (list, tuple)) else sample["arguments"][0]
        got = float(np.ravel(sample["resps"][0])[0])
        assert got == pytest.approx(_rolling_reference(gemma, text), abs=TOLERANCE)
    mc = results["samples"]["ctx_mc"]
    assert len(mc) == 3
    for sample in mc:
        for (context, continuation), resp in zip(sample["arguments"], sample["resps"]):
            got = float(resp[0][0])
            assert got == pytest.approx(_mc_reference(gemma, context, continuation), abs=TOLERANCE)

    # the documents that fit one window are exactly `ctxeval score` windows: BOS, then the text
    corpus = tmp_path / "docs.jsonl"
    corpus.write_text("".join(json.dumps({"text": t}) + "\n" for t in _documents()[:2]))
    records = api.score(corpus, window=MAX_LENGTH - 2, out=tmp_path / "score").records
    per_document = records.groupby("text_id", sort=False).logprob.sum().tolist()
    assert len(per_document) == 2
    for sample, expected in zip(rolling[:2], per_document):
        assert float(np.ravel(sample["resps"][0])[0]) == pytest.approx(expected, abs=TOLERANCE)


@pytest.fixture(scope="module")
def hf_gemma_module():
    pytest.importorskip("lm_eval")
    from ctxeval.backends.registry import load_scorer, parse_model_spec

    scorer = load_scorer(parse_model_spec("hf:gemma-3-270m"))
    yield scorer
    scorer.close()


# lm-eval's float32 forward of [prefix, text[:-1]] and float32 log-softmax vs ctxeval's forward of
# the whole window and float64 log-softmax: float32 rounding of a sum over ≤ 70 tokens, relative
# to the sum (FLOAT32_FORWARD's rtol): measured 1.7e-3 to 2.7e-3 nats on sums of 290-406 nats,
# relative ≤ 6.6e-6 (AMD EPYC AVX-512, docs/numerics.md)
HF_TOLERANCE = {"rel": FLOAT32_FORWARD["rtol"], "abs": 1e-3}


@pytest.mark.model
def test_lm_eval_hf_rolling_scores_a_second_bos_by_default(hf_gemma_module):
    """lm-eval's `hf` backend on the converted checkpoint: prefix token = BOS, and its default
    tok_encode adds Gemma's BOS too, so the first window reads [BOS, BOS, text] and scores
    [BOS, text]: log p(BOS | BOS) (about −17.8 nats) plus the text after a doubled BOS. With add_bos_token=False it
    scores exactly `ctxeval score`'s window: BOS, then the text, BOS never scored."""
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM
    from lm_eval.utils import get_rolling_token_windows, make_disjoint_window

    scorer = hf_gemma_module
    bos = scorer.info.bos_id
    texts = _documents()[:2]
    requests = [Instance(request_type="loglikelihood_rolling", doc={}, arguments=(t,), idx=0) for t in texts]
    for add_bos_token in (None, False):
        lm = HFLM(pretrained=str(scorer.info.path), device="cpu", dtype="float32", batch_size=2, max_length=MAX_LENGTH, add_bos_token=add_bos_token)
        assert lm.prefix_token_id == bos == 2
        got = lm.loglikelihood_rolling(requests, disable_tqdm=True)
        for text, ll in zip(texts, got):
            tokens = scorer.tokenize(text)
            encoded = lm.tok_encode(text)
            assert encoded == ([bos] + tokens if add_bos_token is None else tokens)
            windows = [make_disjoint_window(w) for w in get_rolling_token_windows(encoded, lm.prefix_token_id, MAX_LENGTH, 1)]
            assert windows == [([bos], encoded)]  # one window: the prefix token, then every encoded token scored
            expected = _sum_logprob(scorer, [bos] + encoded, 1)
            print(f"add_bos_token={add_bos_token}: lm-eval {float(ll):.6f} ctxeval {expected:.6f} |Δ| {abs(float(ll) - expected):.2e}")
            assert float(ll) == pytest.approx(expected, **HF_TOLERANCE)
        del lm
