"""Requests per 30 comparisons for the generation-only paths (thesis protocol), with and without
reuse, on a local llama-cpp-python server serving the embedded Gemma 3 270M.

    PYTHONPATH=src python bench/bench_openai_chat.py [--lengths 32] [--n-compare 30] [--gen-tokens 4]

Each row is one `api.sweep(..., context_mode="thesis")` of the library (seeded start, as in any
sweep), per path (chat: /v1/chat/completions with the thesis's system prompt; generate:
/v1/completions without echo, like the thesis's legacy models):
- no reuse: one request per comparison (gen_tokens = 1);
- reuse, non-exhaustive: stop after n_c comparisons;
- reuse, exhaustive: stop after n_c requests (comparisons may exceed n_c).
Every request sends exactly L tokens; a reused step j had L + j. Nothing is cached.
Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import time
from pathlib import Path


from ctxeval import api
from ctxeval.server.launch import spawn_server
from ctxeval.backends.openai_options import OpenAIOptions



def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lengths", default="32")
    parser.add_argument("--n-compare", type=int, default=30)
    parser.add_argument("--gen-tokens", type=int, default=None, help="default: n_c, as in the thesis")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--modes", default="chat,generate")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # `kill` still stops the server (finally)
    template = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "gemma3-chat-template.jinja"
    proc, url = spawn_server(n_ctx=512, n_threads=2, args=("--served-model-name", "gemma", "--chat-template", str(template)))
    print(f"temperature {args.temperature}, gen_tokens {args.gen_tokens or args.n_compare}, n_c {args.n_compare}")
    print("| path | L | protocol | requests | comparisons | requests per 30 comparisons | reference in top-20 | seconds |")
    print("|---|---:|---|---:|---:|---:|---:|---:|", flush=True)
    configs = [
        ("no reuse", dict(gen_tokens=1), False),
        ("reuse, non-exhaustive", dict(gen_tokens=args.gen_tokens), False),
        ("reuse, exhaustive", dict(gen_tokens=args.gen_tokens), True),
    ]
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for mode in args.modes.split(","):
                for length in (int(x) for x in args.lengths.split(",")):
                    for name, options, exhaustive in configs:
                        openai = OpenAIOptions(base_url=url, mode=mode, tokenizer="gemma-3-270m", cache=None, temperature=args.temperature, concurrency=1, **options)
                        out = Path(tmp) / f"{mode}-{length}-{name}"
                        t0 = time.perf_counter()
                        result = api.sweep(models=["openai:gemma"], openai=openai, lengths=[length], n_compare=args.n_compare, seed=args.seed,
                                           context_mode="thesis", exhaustive=exhaustive, out=out)
                        seconds = time.perf_counter() - t0
                        protocol = result.manifest["api_usage"]["openai:gemma"]["protocol"]
                        requests, comparisons = protocol["requests"], protocol["comparisons"]
                        known = int(result.records.logprob.notna().sum())
                        print(f"| {mode} | {length} | {name} | {requests} | {comparisons} | {30 * requests / comparisons:.1f} | {known} | {seconds:.0f} |", flush=True)
    finally:
        proc.terminate()
        proc.wait()


if __name__ == "__main__":
    main()
