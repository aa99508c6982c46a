"""Benchmark: a lockstep `ctxeval diff` against scoring REF alone on the same windows.

REF is the embedded Gemma 3 270M (Q4_K_M); CAND by default its Q8_0 requantization (made
here with llama.cpp's quantizer). Both sides take the first N tokens of WikiText-2 test in
disjoint windows of W tokens (BOS first) and run in their own processes, so each peak RSS is
its own; each side runs `--repeats` times, alternating, and the fastest run counts (the
machine may be shared). Timed: the model work of every window (REF alone and CAND alone:
`score`, the scoring path; diff: both models' forward passes and the per-token comparison),
after the models are loaded and warmed on one window. A CAND slower than REF (Q8_0 weights
are here) makes diff / REF exceed 2 by itself, so diff / (REF + CAND) is printed too: the
cost of the lockstep comparison over running both models.

Goals: time ratio diff / REF <= 2.2; diff peak RSS <= 1.3 x REF's peak + CAND's weights (file size).

    .venv/bin/python bench/bench_diff.py [--tokens 2048] [--window 512] [--cand PATH.gguf] [--repeats 2] [--text FILE]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SIDES = ("ref", "cand", "diff")
WIKITEXT = Path(__file__).resolve().parents[2] / "shared" / "data" / "wikitext2" / "wiki.test.raw"


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def windows(scorer, text_path: Path, n_tokens: int, window: int) -> list:
    """Work items of the first `n_tokens` tokens in disjoint windows, as `ctxeval diff` plans them."""
    from ctxeval.data.texts import load_text
    from ctxeval.pipeline.executors.work import work_item
    from ctxeval.pipeline.tokens import tokenize
    from ctxeval.pipeline.windows import chunked

    text = load_text(str(text_path))
    tt = tokenize(scorer, text)
    return [work_item(scorer.info, tt, p) for p in chunked(min(n_tokens, len(tt)), window)]


def run_side(side: str, cand: str, text_path: Path, n_tokens: int, window: int) -> dict:
    from ctxeval.backends.registry import load_scorer, parse_model_spec
    from ctxeval.modeldiff.pair import DiffTask, ModelPair
    from ctxeval.modeldiff.run import DEFAULT_BLOCK_ROWS

    ref = load_scorer(parse_model_spec("gemma-3-270m"))
    items = windows(ref, text_path, n_tokens, window)
    if side in ("ref", "cand"):
        alone = ref if side == "ref" else load_scorer(parse_model_spec(cand))

        def work(item) -> int:
            return len(alone.score(*item.arrays, 10, (1.0,)).logprob)
    else:
        pair = ModelPair(ref, load_scorer(parse_model_spec(cand)))
        task = DiffTask(10, False, DEFAULT_BLOCK_ROWS)

        def work(item) -> int:
            return len(task.compare(pair, item))
    work(items[0])  # warm: contexts sized, pages touched
    t0 = time.perf_counter()
    rows = sum(work(item) for item in items)
    return {"side": side, "tokens": rows, "windows": len(items), "seconds": time.perf_counter() - t0, "peak_rss_mb": peak_rss_mb()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=2048)
    parser.add_argument("--window", type=int, default=512)
    parser.add_argument("--text", type=Path, default=WIKITEXT)
    parser.add_argument("--cand", default=None, help="CAND model spec (default: a Q8_0 requantization of the embedded model)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--side", choices=SIDES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        print(json.dumps(run_side(args.side, args.cand, args.text, args.tokens, args.window)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        cand = args.cand
        if cand is None:
            from ctxeval.backends.model_files import embedded_model_path
            from ctxeval.backends.quantize import requantize

            cand = str(requantize(embedded_model_path(), Path(tmp) / "gemma-3-270m-q8_0.gguf", "q8_0"))
        cand_weights_mb = Path(cand.partition("?")[0]).stat().st_size / 2**20 if cand.partition("?")[0].endswith(".gguf") else 0.0
        runs: dict[str, list[dict]] = {side: [] for side in SIDES}
        for _ in range(args.repeats):
            for side in SIDES:
                cmd = [sys.executable, __file__, "--side", side, "--cand", cand, "--tokens", str(args.tokens), "--window", str(args.window), "--text", str(args.text)]
                out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
                runs[side].append(json.loads(out.strip().splitlines()[-1]))
    best = {side: min(r, key=lambda x: x["seconds"]) for side, r in runs.items()}
    peak = {side: max(x["peak_rss_mb"] for x in r) for side, r in runs.items()}
    ratio = best["diff"]["seconds"] / best["ref"]["seconds"]
    budget = 1.3 * peak["ref"] + cand_weights_mb
    print(f"REF gemma-3-270m (Q4_K_M), CAND {Path(cand.partition('?')[0]).name}{cand.partition('?')[1]}{cand.partition('?')[2]}; "
          f"{best['ref']['tokens']} tokens in {best['ref']['windows']} windows of {args.window}; best of {args.repeats}")
    print(f"{'side':<10}{'seconds':>10}{'tokens/s':>10}{'peak RSS MB':>14}")
    for side in SIDES:
        print(f"{side:<10}{best[side]['seconds']:>10.2f}{best[side]['tokens'] / best[side]['seconds']:>10.1f}{peak[side]:>14.0f}")
    alone = best["ref"]["seconds"] + best["cand"]["seconds"]
    print(f"time ratio diff / ref alone: {ratio:.2f} (goal <= 2.2); diff / (ref alone + cand alone): {best['diff']['seconds'] / alone:.2f}")
    print("all runs (s): " + "; ".join(f"{side} {[round(r['seconds'], 2) for r in runs[side]]}" for side in SIDES))
    print(f"peak RSS diff {peak['diff']:.0f} MB vs 1.3 x ref {peak['ref']:.0f} MB + CAND weights {cand_weights_mb:.0f} MB = {budget:.0f} MB "
          f"(ratio {peak['diff'] / budget:.2f}, goal <= 1.0)")


if __name__ == "__main__":
    main()
