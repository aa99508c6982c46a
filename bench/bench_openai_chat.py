"""Requests per 30 comparisons for the generation-only paths (thesis protocol), with and without
reuse, on a local llama-cpp-python server serving the embedded Gemma 3 270M.

    PYTHONPATH=src python bench/bench_openai_chat.py [--lengths 32] [--n-compare 30] [--gen-tokens 4]

For each path (chat: /v1/chat/completions with the thesis's system prompt; generate:
/v1/completions without echo, like the thesis's legacy models) and each start:
- no reuse: one request per comparison (gen_tokens = 1);
- reuse, non-exhaustive: stop after n_c comparisons;
- reuse, exhaustive: stop after n_c requests (comparisons may exceed n_c).
Contexts slide as in the thesis: a request at target t sends the L tokens before t; a reused
step j then had L + j tokens of context. Nothing is cached. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np

from ctxeval.backends.openai import OpenAIScorer
from ctxeval.backends.openai_options import OpenAIOptions
from ctxeval.backends.registry import embedded_model_path
from ctxeval.data.texts import load_text

LAUNCHER = Path(__file__).resolve().parents[1] / "tests" / "servers" / "llama_server.py"


def start_server() -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, str(LAUNCHER), "--model", str(embedded_model_path()), "--host", "127.0.0.1", "--port", str(port),
           "--n_ctx", "512", "--n_threads", "2", "--n_threads_batch", "2", "--flash_attn", "false", "--verbose", "false"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            if httpx.get(url + "/v1/models", timeout=1).status_code == 200:
                return proc, url
        except httpx.TransportError:
            time.sleep(0.2)
    proc.terminate()
    raise RuntimeError("server did not start")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lengths", default="32")
    parser.add_argument("--n-compare", type=int, default=30)
    parser.add_argument("--gen-tokens", type=int, default=4)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--modes", default="chat,generate")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # `kill` still stops the server (finally)
    proc, url = start_server()
    print(f"temperature {args.temperature}, gen_tokens {args.gen_tokens}, n_c {args.n_compare}")
    print("| path | L | protocol | requests | comparisons | requests per 30 comparisons | reference in top-20 | seconds |")
    print("|---|---:|---|---:|---:|---:|---:|---:|", flush=True)
    try:
        text = load_text("demo")
        for mode in args.modes.split(","):
            options = OpenAIOptions(base_url=url, mode=mode, tokenizer="gemma-3-270m", cache=None, gen_tokens=args.gen_tokens, temperature=args.temperature, concurrency=1)
            scorer = OpenAIScorer("gemma", options)
            ids = np.asarray(scorer.tokenize(text.content))
            for length in (int(x) for x in args.lengths.split(",")):
                start = 1000 + length  # a fixed start; contexts slide: [t - L, t)
                ctx = lambda t, L=length: t - L  # noqa: E731
                n = args.n_compare
                configs = [
                    ("no reuse", dict(max_comparisons=n, gen_tokens=1)),
                    ("reuse, non-exhaustive", dict(max_comparisons=n)),
                    ("reuse, exhaustive", dict(max_requests=n)),
                ]
                for name, kw in configs:
                    t0 = time.perf_counter()
                    comparisons, requests = scorer.scan(ids, start, len(ids), ctx, top_k=20, **kw)
                    seconds = time.perf_counter() - t0
                    known = sum(not np.isnan(c.logprob) for c in comparisons)
                    per30 = 30 * requests / len(comparisons)
                    print(f"| {mode} | {length} | {name} | {requests} | {len(comparisons)} | {per30:.1f} | {known} | {seconds:.0f} |", flush=True)
            scorer.close()
    finally:
        proc.terminate()
        proc.wait()


if __name__ == "__main__":
    main()
