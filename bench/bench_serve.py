"""Tokens/s of one perplexity task three ways, in one run: `ctxeval score` locally, lm-eval's
`local-completions` through `ctxeval serve` (token-id requests), and lm-eval through
llama-cpp-python's server (the path `ctxeval serve` replaced; text requests, as token ids are
refused there, with the GGUF's tokenizer converted by transformers), and whether the
log-likelihoods agree.

Documents: the paragraphs of the WikiText-2 test head in tests/fixtures (lm-eval task
`loglikelihood_rolling`, written to a temporary folder with its JSON-lines data; offline).
Every side scores each document token once. Servers are started before the clock; the local
side's clock includes loading the model (about a second). llama-cpp-python's server sorts the
whole 262K vocabulary in Python for every echoed token, so it gets only the first documents
(--old-tokens), and its tokens/s is measured on those.

    PYTHONPATH=src python bench/bench_serve.py [--max-length 512] [--threads 2] [--old-tokens 150]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from ctxeval import api
from ctxeval.backends.registry import load_scorer, parse_model_spec
from ctxeval.server.launch import free_port, spawn_server

FIXTURE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "wikitext2-test-head.txt"


def documents() -> list[str]:
    text = FIXTURE.read_text(encoding="utf-8").replace("\r\n", "\n")
    return [p.strip() for p in text.split("\n") if len(p.strip()) > 40 and not p.strip().startswith("=")]


def write_task(root: Path, name: str, docs: list[str]) -> None:
    data = root / f"{name}.jsonl"
    data.write_text("".join(json.dumps({"text": d}) + "\n" for d in docs))
    (root / f"{name}.yaml").write_text(
        f"task: {name}\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: {data}\noutput_type: loglikelihood_rolling\n"
        "test_split: test\ndoc_to_text: ''\ndoc_to_target: '{{text}}'\nmetric_list:\n  - metric: word_perplexity\n  - metric: bits_per_byte\n"
    )


def gguf_tokenizer(root: Path) -> Path:
    """The embedded GGUF's tokenizer as a Hugging Face tokenizer folder (transformers reads GGUF
    offline), for lm-eval's text requests to a server with no /tokenize route."""
    from transformers import AutoTokenizer

    from ctxeval.backends.model_files import embedded_model_path

    path = embedded_model_path()
    AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name).save_pretrained(root / "tokenizer")
    return root / "tokenizer"


def lm_eval(url: str, task: str, root: Path, max_length: int, tokenizer: dict) -> tuple[float, list[float]]:
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager

    args = {"base_url": f"{url}/v1/completions", "model": "gemma-3-270m", "max_length": max_length,
            "batch_size": 8, "num_concurrent": 1, "timeout": 3600, **tokenizer}
    start = time.perf_counter()
    result = simple_evaluate(model="local-completions", model_args=args, tasks=[task], task_manager=TaskManager(include_path=str(root)),
                             log_samples=True, bootstrap_iters=0)
    seconds = time.perf_counter() - start
    lls = [float(s["resps"][0][0]) for s in sorted(result["samples"][task], key=lambda s: s["doc_id"])]
    return seconds, lls


def start_llama_cpp_server(threads: int, n_ctx: int) -> tuple[subprocess.Popen, str]:
    """llama-cpp-python's own server on the embedded GGUF (AMX buffers off as in the backend)."""
    from ctxeval.backends.model_files import embedded_model_path

    port = free_port()
    argv = ["--model", str(embedded_model_path()), "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx),
            "--n_threads", str(threads), "--n_batch", "512", "--model_alias", "gemma-3-270m"]
    code = ("import sys, llama_cpp; from ctxeval.backends.llamacpp import load_llama_without_amx_buffers; "
            "load_llama_without_amx_buffers(llama_cpp); from llama_cpp.server.__main__ import main; "
            f"sys.argv = ['llama_cpp.server', *{argv!r}]; main()")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            with urllib.request.urlopen(url + "/v1/models", timeout=1):
                return proc, url
        except OSError:
            time.sleep(0.5)
    proc.terminate()
    raise RuntimeError("llama-cpp-python's server did not start")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--max-length", type=int, default=512, help="lm-eval's max_length (ctxeval score: --window max_length - 2)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--old-tokens", type=int, default=150, help="tokens given to llama-cpp-python's server (slow)")
    args = parser.parse_args()
    os.environ.update(HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1")
    docs = documents()
    vocab = load_scorer(parse_model_spec("gemma-3-270m"))
    counts = [len(vocab.tokenize(d)) for d in docs]
    old_docs, total = [], 0
    for d, n in zip(docs, counts):
        if total >= args.old_tokens:
            break
        old_docs.append(d)
        total += n
    n_tokens, n_old = sum(counts), total

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        os.environ["HF_DATASETS_CACHE"] = str(root / "hf")
        write_task(root, "bench_rolling", docs)
        write_task(root, "bench_rolling_old", old_docs)
        corpus = root / "docs.jsonl"
        corpus.write_text("".join(json.dumps({"text": d}) + "\n" for d in docs))

        start = time.perf_counter()
        records = api.score(corpus, window=args.max_length - 2, out=root / "score", n_threads=args.threads).records
        local_s = time.perf_counter() - start
        local_ll = records.groupby("text_id", sort=False).logprob.sum().tolist()

        proc, url = spawn_server(n_ctx=args.max_length + 8, n_threads=args.threads, wait_s=600)
        try:
            serve_s, serve_ll = lm_eval(url, "bench_rolling", root, args.max_length, {"tokenizer_backend": "remote"})
        finally:
            proc.terminate()
            proc.wait(timeout=60)
        proc, url = start_llama_cpp_server(args.threads, args.max_length + 8)
        try:
            hf_tokenizer = {"tokenizer_backend": "huggingface", "tokenizer": str(gguf_tokenizer(root)), "tokenized_requests": False}
            old_s, old_ll = lm_eval(url, "bench_rolling_old", root, args.max_length, hf_tokenizer)
        finally:
            proc.terminate()
            proc.wait(timeout=60)

    local_tps = n_tokens / local_s
    delta = max(abs(a - b) for a, b in zip(serve_ll, local_ll))
    old_delta = max(abs(a - b) for a, b in zip(old_ll, local_ll))
    print(f"{len(docs)} documents, {n_tokens} tokens (llama-cpp-python's server: first {len(old_docs)}, {n_old} tokens); "
          f"lm-eval max_length {args.max_length}; {args.threads} threads; load average {os.getloadavg()[0]:.1f}\n")
    print("| path | tokens | wall (s) | tokens/s | vs ctxeval score | max abs Δ log-likelihood per document vs ctxeval score (nats) |")
    print("|---|---:|---:|---:|---:|---:|")
    print(f"| ctxeval score (local) | {n_tokens} | {local_s:.1f} | {local_tps:.1f} | 1.00x | 0 |")
    print(f"| lm-eval local-completions -> ctxeval serve (token ids) | {n_tokens} | {serve_s:.1f} | {n_tokens / serve_s:.1f} | {n_tokens / serve_s / local_tps:.2f}x | {delta:.1e} |")
    print(f"| lm-eval local-completions -> llama-cpp-python server (text) | {n_old} | {old_s:.1f} | {n_old / old_s:.1f} | {n_old / old_s / local_tps:.2f}x | {old_delta:.2f} |")


if __name__ == "__main__":
    main()
