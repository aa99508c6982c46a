"""ctxeval's hf backend vs lm-eval's HFLM.loglikelihood_rolling on the same weights, text and windows.

Both run the embedded Gemma 3 270M as converted by ctxeval (float32 safetensors in
~/.cache/ctxeval/hf/gemma-3-270m) on CPU, in one process with the same torch threads.

Windows: lm-eval's rolling windows (max_length M, prefix token = BOS) are: first window
BOS + tokens[0:M-1] scoring tokens[0:M]; every later window is the M tokens *before* its
targets' end, scoring M targets, so its first target sees exactly one token of context and no
BOS. ctxeval runs exactly those windows for the side-by-side perplexity ("identical windows"),
and also its own `chunked` convention (every chunk starts with BOS, its first target sees
only BOS), which gives a slightly different perplexity for a different reason: BOS vs one
real token at the start of each later window.

Usage: python bench/bench_hf_vs_lmeval.py [--tokens 2048] [--max-length 512] [--repeats 1]
Prints a table; timings are ratios measured in the same run (the machine may be shared).
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=2048, help="tokens of the demo text to score")
    parser.add_argument("--max-length", type=int, default=512, help="lm-eval max_length = ctxeval window")
    parser.add_argument("--batch-size", type=int, default=1, help="lm-eval batch size")
    parser.add_argument("--repeats", type=int, default=1, help="time each side this many times, keep the fastest")
    args = parser.parse_args()

    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM
    from lm_eval.utils import get_rolling_token_windows

    from ctxeval.backends.registry import load_scorer
    from ctxeval.data.texts import load_text
    from ctxeval.tokens import tokenize

    scorer = load_scorer("hf:gemma-3-270m")
    demo = load_text("demo")
    spans = tokenize(scorer, demo)
    n = min(args.tokens, len(spans))
    text = demo.content[: int(spans.char_ends[n - 1])]
    ids = scorer.tokenize(text)
    assert ids == spans.ids[:n].tolist(), "prefix re-tokenizes differently"

    lm = HFLM(pretrained=scorer.info.path, device="cpu", dtype="float32", batch_size=args.batch_size, max_length=args.max_length, add_bos_token=False)
    assert lm.tok_encode(text) == ids, "lm-eval tokenizes the text differently"
    bos = scorer.info.bos_id
    assert lm.prefix_token_id == bos
    rolling = list(get_rolling_token_windows(token_list=ids, prefix_token=bos, max_seq_len=args.max_length, context_len=1))

    def run_lmeval() -> float:
        request = Instance(request_type="loglikelihood_rolling", doc={}, arguments=(text,), idx=0)
        return float(lm.loglikelihood_rolling([request], disable_tqdm=True)[0])

    def passes_from(windows):
        out = []
        for context, pred in windows:
            inp = np.asarray(context, dtype=np.int32)
            out.append((inp, np.arange(len(inp) - len(pred), len(inp)), np.asarray(pred, dtype=np.int32)))
        return out

    same = passes_from(rolling)
    chunks = [([bos] + ids[s : s + args.max_length][:-1], ids[s : s + args.max_length]) for s in range(0, n, args.max_length)]
    own = passes_from(chunks)

    per_window: dict[str, list[float]] = {}

    def run_ctxeval(passes, batched: bool, key: str) -> float:
        scores = scorer.score_batch(passes, 20, (1.0,)) if batched else [scorer.score(*p, 20, (1.0,)) for p in passes]
        per_window[key] = [math.exp(-s.logprob.mean()) for s in scores]
        return float(sum(s.logprob.sum() for s in scores))

    rows = []
    for label, fn in [
        ("lm-eval loglikelihood_rolling", run_lmeval),
        ("ctxeval hf, lm-eval windows, batched", lambda: run_ctxeval(same, True, "lm-eval windows")),
        ("ctxeval hf, lm-eval windows, one at a time", lambda: run_ctxeval(same, False, "lm-eval windows")),
        ("ctxeval hf, chunked (BOS per chunk), batched", lambda: run_ctxeval(own, True, "chunked, BOS per chunk")),
    ]:
        best, total = math.inf, 0.0
        for _ in range(args.repeats):
            t = time.perf_counter()
            total = fn()
            best = min(best, time.perf_counter() - t)
        rows.append((label, best, total))

    base_seconds, base_total = rows[0][1], rows[0][2]
    print(f"\nGemma 3 270M (float32, {scorer.info.details['n_threads']} threads), {n} demo tokens, window {args.max_length}, "
          f"{len(rolling)} windows; ctxeval also computes exact ranks and top-20 per token\n")
    print("| method | seconds | tokens/s | speed vs lm-eval | perplexity | Σ logprob − lm-eval |")
    print("|---|---|---|---|---|---|")
    for label, seconds, total in rows:
        print(f"| {label} | {seconds:.2f} | {n / seconds:.1f} | {base_seconds / seconds:.2f}x | {math.exp(-total / n):.4f} | {total - base_total:+.5f} |")
    print("\nper-window perplexity (ctxeval): the first window is the same input in both conventions")
    for key, values in per_window.items():
        print(f"  {key:<24} " + "  ".join(f"{v:9.3f}" for v in values))


if __name__ == "__main__":
    main()
