"""Benchmark: ctxeval's llama.cpp scorer vs the loop a user would write today.

Same text, same windows (first 8,192 tokens of WikiText-2 test, window 1024, stride 512, BOS
first, each token scored once), same model (embedded Gemma 3 270M), same llama.cpp settings
(flash attention off, 2 threads). The naive loop is llama-cpp-python's `Llama(logits_all=True)`
plus a NumPy log-softmax, rank and top-20 over all logits of each window. Each side runs in its
own process so peak RSS is its own. Also: peak RSS of ctxeval scoring one 32K-token context.

    .venv/bin/python bench/bench_scoring.py [--tokens 8192] [--skip-32k]
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import subprocess
import sys
import time
from pathlib import Path

WIKITEXT = Path(__file__).resolve().parents[2] / "shared" / "data" / "wikitext2" / "wiki.test.raw"
MOBY = Path(__file__).resolve().parents[2] / "shared" / "data" / "gutenberg" / "melville-moby_dick.txt"
WINDOW, STRIDE, TOP_K = 1024, 512, 20


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_ctxeval(n_tokens: int, out: Path) -> dict:
    import ctxeval
    import ctxeval.backends.llamacpp as backend

    post = {"seconds": 0.0}
    score_block = backend.score_block

    def timed(*args, **kwargs):
        t0 = time.perf_counter()
        result = score_block(*args, **kwargs)
        post["seconds"] += time.perf_counter() - t0
        return result

    backend.score_block = timed
    t0 = time.perf_counter()
    result = ctxeval.score(WIKITEXT, method="sliding", window=WINDOW, stride=STRIDE, max_tokens=n_tokens, out=out)
    seconds = time.perf_counter() - t0
    logprobs = result.records["logprob"].to_numpy()
    return {
        "side": "ctxeval",
        "tokens": len(logprobs),
        "seconds": seconds,
        "post_seconds": post["seconds"],
        "ppl": math.exp(-logprobs.mean()),
        "peak_rss_mb": peak_rss_mb(),
    }


def run_naive(n_tokens: int) -> dict:
    import llama_cpp
    import numpy as np

    from ctxeval.backends.llamacpp import load_llama_without_amx_buffers
    from ctxeval.backends.model_files import embedded_model_path

    load_llama_without_amx_buffers(llama_cpp)  # the same guard ctxeval applies: AMX kernels crash on Gemma 3 in this release
    t0 = time.perf_counter()
    llm = llama_cpp.Llama(model_path=str(embedded_model_path()), n_ctx=WINDOW + 1, n_batch=512, n_ubatch=512, n_threads=2, n_threads_batch=2, logits_all=True, verbose=False)
    text = WIKITEXT.read_bytes()
    ids = llm.tokenize(text, add_bos=False, special=False)[:n_tokens]
    bos = llm.token_bos()
    logprobs, ranks = [], []
    prev_end = 0
    for begin in range(0, len(ids), STRIDE):
        end = min(begin + WINDOW, len(ids))
        trg_len = end - prev_end
        window = ids[begin:end]
        llm.reset()
        llm.eval([bos] + window[:-1])
        logits = np.asarray(llm.scores[: len(window)], dtype=np.float32)  # row i predicts window[i]
        m = logits.max(axis=1, keepdims=True)
        log_softmax = logits - m - np.log(np.exp(logits - m).sum(axis=1, keepdims=True))
        rows = np.arange(len(window) - trg_len, len(window))
        targets = np.asarray(window)[rows]
        logprobs.extend(log_softmax[rows, targets].tolist())
        target_logits = logits[rows, targets]
        ranks.extend((1 + (logits[rows] > target_logits[:, None]).sum(axis=1)).tolist())
        np.argpartition(-logits[rows], TOP_K, axis=1)[:, :TOP_K]  # the top-20 a user would keep
        prev_end = end
        if end == len(ids):
            break
    seconds = time.perf_counter() - t0
    lp = np.asarray(logprobs)
    return {"side": "naive logits_all", "tokens": len(lp), "seconds": seconds, "post_seconds": float("nan"), "ppl": math.exp(-lp.mean()), "peak_rss_mb": peak_rss_mb()}


def run_32k(out: Path) -> dict:
    import ctxeval

    t0 = time.perf_counter()
    result = ctxeval.score(MOBY, method="chunked", window=32767, max_tokens=32767, out=out)
    return {"side": "ctxeval, one 32K context", "tokens": len(result.records), "seconds": time.perf_counter() - t0, "post_seconds": float("nan"), "ppl": math.exp(-result.records["logprob"].mean()), "peak_rss_mb": peak_rss_mb()}


def worker(side: str, n_tokens: int, out: Path) -> None:
    if side == "ctxeval":
        result = run_ctxeval(n_tokens, out)
    elif side == "naive":
        result = run_naive(n_tokens)
    else:
        result = run_32k(out)
    print(json.dumps(result))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=8192)
    parser.add_argument("--skip-32k", action="store_true")
    parser.add_argument("--side", choices=["ctxeval", "naive", "32k"], help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=Path("bench/out"))
    args = parser.parse_args()
    if args.side:
        worker(args.side, args.tokens, args.out)
        return
    import shutil

    shutil.rmtree(args.out, ignore_errors=True)
    sides = ["naive", "ctxeval"] + ([] if args.skip_32k else ["32k"])
    results = []
    for side in sides:
        proc = subprocess.run([sys.executable, __file__, "--side", side, "--tokens", str(args.tokens), "--out", str(args.out / side)], capture_output=True, text=True)
        if proc.returncode != 0:
            sys.exit(f"{side} failed (exit code {proc.returncode}):\n{proc.stderr}")
        results.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    naive, ours = results[0], results[1]
    print(f"\nWikiText-2 test, first {args.tokens} tokens, window {WINDOW}, stride {STRIDE}, Gemma 3 270M Q4_K_M, 2 threads\n")
    print(f"| {'side':<26} | tokens | seconds | tokens/s | post-processing | perplexity | peak RSS MB |")
    print(f"|{'-' * 28}|-------:|--------:|---------:|----------------:|-----------:|------------:|")
    for r in results:
        post = "" if math.isnan(r["post_seconds"]) else f"{100 * r['post_seconds'] / r['seconds']:.1f} %"
        print(f"| {r['side']:<26} | {r['tokens']:>6} | {r['seconds']:>7.1f} | {r['tokens'] / r['seconds']:>8.1f} | {post:>15} | {r['ppl']:>10.4f} | {r['peak_rss_mb']:>11.0f} |")
    speedup = (ours["tokens"] / ours["seconds"]) / (naive["tokens"] / naive["seconds"])
    print(f"\nthroughput ctxeval / naive: {speedup:.2f}x (goal >= 2x)")
    print(f"perplexity difference: {100 * abs(ours['ppl'] / naive['ppl'] - 1):.4f} % (goal <= 0.1 %)")
    print(f"post-processing share of ctxeval time: {100 * ours['post_seconds'] / ours['seconds']:.1f} % (goal <= 15 %)")


if __name__ == "__main__":
    main()
