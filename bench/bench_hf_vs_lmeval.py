"""ctxeval's hf backend vs lm-eval's HFLM.loglikelihood_rolling on the same weights, text and windows.

Both run the embedded Gemma 3 270M as converted by ctxeval (float32 safetensors in
~/.cache/ctxeval/hf/gemma-3-270m) on CPU with the same torch threads. Every timing runs in a
fresh process of its own (one untimed warm-up window first), and the order of the sides is
reversed on every other repeat, so neither side inherits the other's caches, allocator state
or a quieter moment of a shared machine.

Windows: lm-eval's rolling windows (max_length M, prefix token = BOS) are: first window
BOS + tokens[0:M-1] scoring tokens[0:M]; every later window is the M tokens *before* its
targets' end, scoring M targets, so its first target sees exactly one token of context and no
BOS. ctxeval runs exactly those windows for the side-by-side perplexity ("identical windows"),
and also its own `chunked` convention (every chunk starts with BOS, its first target sees
only BOS), which gives a different perplexity for a different reason: BOS vs one real token at
the start of each later window.

Usage: python bench/bench_hf_vs_lmeval.py [--tokens 2048] [--max-length 512] [--repeats 3]
Prints the load average and a table of min / median tokens/s per side and their ratios to lm-eval.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SIDES = {
    "lm-eval": "lm-eval loglikelihood_rolling",
    "batched": "ctxeval hf, lm-eval windows, batched",
    "single": "ctxeval hf, lm-eval windows, one at a time",
    "chunked": "ctxeval hf, chunked (BOS per chunk), batched",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=2048, help="tokens of the demo text to score")
    parser.add_argument("--max-length", type=int, default=512, help="lm-eval max_length = ctxeval window")
    parser.add_argument("--batch-size", type=int, default=1, help="lm-eval batch size")
    parser.add_argument("--repeats", type=int, default=3, help="processes per side; odd repeats run the sides in reverse order")
    parser.add_argument("--threads", type=int, default=None, help="torch threads in every process (default: torch's default)")
    parser.add_argument("--sides", default="lm-eval,batched,single,chunked", help=f"comma-separated subset of {','.join(SIDES)}")
    parser.add_argument("--side", choices=list(SIDES), help=argparse.SUPPRESS)  # internal: one timed run
    parser.add_argument("--setup", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        print(json.dumps(run_side(args.side, json.loads(args.setup.read_text()))))
        return
    sides = args.sides.split(",")
    unknown = set(sides) - set(SIDES)
    if unknown or "lm-eval" not in sides:
        parser.error(f"--sides must include lm-eval and name only {', '.join(SIDES)}")
    with tempfile.TemporaryDirectory() as tmp:
        setup_file = Path(tmp) / "setup.json"
        setup = prepare(args)
        setup_file.write_text(json.dumps(setup))
        load_before = os.getloadavg()
        runs = {side: [] for side in sides}
        for r in range(args.repeats):
            for side in sides if r % 2 == 0 else sides[::-1]:
                runs[side].append(child(side, setup_file))
                print(f"repeat {r + 1} {side}: {runs[side][-1]['seconds']:.2f} s", file=sys.stderr)
        load_after = os.getloadavg()
    report(setup, args, runs, load_before, load_after)


def prepare(args: argparse.Namespace) -> dict:
    """The text prefix, its ids and the windows, computed once and handed to every process."""
    import torch

    from ctxeval.backends.registry import load_scorer, parse_model_spec
    from ctxeval.data.texts import load_text
    from ctxeval.pipeline.tokens import tokenize

    threads = args.threads or torch.get_num_threads()
    scorer = load_scorer(parse_model_spec("hf:gemma-3-270m"), n_threads=threads)
    demo = load_text("demo")
    spans = tokenize(scorer, demo)
    n = min(args.tokens, len(spans))
    text = demo.content[: int(spans.char_ends[n - 1])]
    ids = scorer.tokenize(text)
    assert ids == spans.ids[:n].tolist(), "prefix re-tokenizes differently"
    setup = {"text": text, "ids": ids, "bos": scorer.info.bos_id, "path": str(scorer.info.path), "threads": threads, "max_length": args.max_length, "batch_size": args.batch_size}
    scorer.close()
    return setup


def child(side: str, setup_file: Path) -> dict:
    """One timed run of `side` in a fresh interpreter."""
    proc = subprocess.run([sys.executable, __file__, "--side", side, "--setup", str(setup_file)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{side} failed:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_side(side: str, setup: dict) -> dict:
    """Warm up on the first window, then time the whole text once: seconds and Σ logprob (per window for ctxeval)."""
    import torch

    torch.set_num_threads(setup["threads"])
    fn = lmeval_runner(setup) if side == "lm-eval" else ctxeval_runner(side, setup)
    fn(warmup=True)
    start = time.perf_counter()
    totals = fn(warmup=False)
    return {"seconds": time.perf_counter() - start, "total_logprob": sum(totals), "window_logprobs": totals}


def rolling_windows(setup: dict) -> list[tuple[list[int], list[int]]]:
    from lm_eval.utils import get_rolling_token_windows

    return list(get_rolling_token_windows(token_list=setup["ids"], prefix_token=setup["bos"], max_seq_len=setup["max_length"], context_len=1))


def lmeval_runner(setup: dict):
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM

    text = setup["text"]
    lm = HFLM(pretrained=setup["path"], device="cpu", dtype="float32", batch_size=setup["batch_size"], max_length=setup["max_length"], add_bos_token=False)
    assert lm.tok_encode(text) == setup["ids"], "lm-eval tokenizes the text differently"
    assert lm.prefix_token_id == setup["bos"]
    first = lm.tok_decode(setup["ids"][: setup["max_length"]])

    def run(warmup: bool) -> list[float]:
        request = Instance(request_type="loglikelihood_rolling", doc={}, arguments=(first if warmup else text,), idx=0)
        return [float(lm.loglikelihood_rolling([request], disable_tqdm=True)[0])]

    return run


def ctxeval_runner(side: str, setup: dict):
    import numpy as np

    from ctxeval.backends.registry import load_scorer, parse_model_spec

    scorer = load_scorer(parse_model_spec("hf:gemma-3-270m"), n_threads=setup["threads"])
    ids, bos, m = setup["ids"], setup["bos"], setup["max_length"]
    if side == "chunked":
        windows = [([bos] + ids[s : s + m][:-1], ids[s : s + m]) for s in range(0, len(ids), m)]
    else:
        windows = rolling_windows(setup)
    passes = []
    for context, pred in windows:
        inp = np.asarray(context, dtype=np.int32)
        passes.append((inp, np.arange(len(inp) - len(pred), len(inp)), np.asarray(pred, dtype=np.int32)))

    def run(warmup: bool) -> list[float]:
        todo = passes[:1] if warmup else passes
        scores = [scorer.score(*p, 20, (1.0,)) for p in todo] if side == "single" else scorer.score_batch(todo, 20, (1.0,))
        return [float(s.logprob.sum()) for s in scores]

    return run


def report(setup: dict, args: argparse.Namespace, runs: dict[str, list[dict]], load_before: tuple, load_after: tuple) -> None:
    n = len(setup["ids"])
    base = runs["lm-eval"]
    base_best = min(r["seconds"] for r in base)
    base_median = statistics.median(r["seconds"] for r in base)
    base_total = base[0]["total_logprob"]
    print(f"\nGemma 3 270M (float32, {setup['threads']} torch threads, CPU), {n} demo tokens, window {args.max_length}, "
          f"{len(rolling_windows(setup))} windows, {args.repeats} processes per side (order reversed every other repeat); "
          f"ctxeval also computes exact ranks and top-20 per token")
    print(f"load average (1/5/15 min) before {fmt_load(load_before)}, after {fmt_load(load_after)}, {os.cpu_count()} CPUs\n")
    print("| method | tokens/s best | tokens/s median | best vs lm-eval | median vs lm-eval | perplexity | Σ logprob − lm-eval |")
    print("|---|---|---|---|---|---|---|")
    for side, side_runs in runs.items():
        seconds = [r["seconds"] for r in side_runs]
        total = side_runs[0]["total_logprob"]
        median = statistics.median(seconds)
        print(f"| {SIDES[side]} | {n / min(seconds):.1f} | {n / median:.1f} | {base_best / min(seconds):.2f}x | "
              f"{base_median / median:.2f}x | {math.exp(-total / n):.4f} | {total - base_total:+.5f} |")
    print("\nseconds per process (repeat 1, 2, ...): " + "; ".join(f"{side} " + ", ".join(f"{r['seconds']:.2f}" for r in side_runs) for side, side_runs in runs.items()))
    print("per-window perplexity (ctxeval; the first window is the same input in both conventions):")
    for side, side_runs in runs.items():
        if side != "lm-eval":
            windows = zip(side_runs[0]["window_logprobs"], window_sizes(setup, side))
            print(f"  {SIDES[side]:<46} " + "  ".join(f"{math.exp(-lp / size):9.3f}" for lp, size in windows))


def window_sizes(setup: dict, side: str) -> list[int]:
    """Targets per window, to turn a window's Σ logprob into its perplexity."""
    if side == "chunked":
        n, m = len(setup["ids"]), setup["max_length"]
        return [min(m, n - s) for s in range(0, n, m)]
    return [len(pred) for _, pred in rolling_windows(setup)]


def fmt_load(load: tuple) -> str:
    return "/".join(f"{x:.2f}" for x in load)


if __name__ == "__main__":
    main()
