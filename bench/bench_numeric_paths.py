"""How far apart are llama.cpp's numeric paths on this CPU? (docs/numerics.md)

llama.cpp picks kernels by CPU (AMX, AVX-512, AVX2) and by batch shape, so the same tokens
scored through different paths agree only up to the last digits. This measures, on the
embedded Gemma 3 270M and real text, the differences a test tolerance or a shortcut must cover:

- batch vs step: one batched pass (`score`) against one-token decodes (`score_stepwise`,
  the path greedy generation takes), over the same continuation tokens;
- n_batch: the same window decoded in batches of 512 vs 64 vs 7 tokens;
- threads: 2 vs 1 thread.

For each: max and mean |Δ logprob|, the share of identical ranks and of identical greedy tokens,
and the smallest top-1 margin among positions whose greedy token flipped (a shortcut that trusts
an argmax needs a margin above that). Prints a table and the CPU features llama.cpp reports.

    .venv/bin/python bench/bench_numeric_paths.py [--prompt 384] [--continuation 128]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

TEXTS = [
    Path(__file__).resolve().parents[2] / "shared" / "data" / "gutenberg" / "austen-emma.txt",
    Path(__file__).resolve().parents[2] / "shared" / "data" / "wikitext2" / "wiki.test.raw",
]


def cpu_features() -> str:
    import llama_cpp

    info = llama_cpp.llama_print_system_info().decode()
    flags = [f.split(" = ")[0].strip() for f in info.replace("|", ";").split(";") if f.strip().endswith("= 1")]
    return ", ".join(f for f in flags if f.isupper() or "AVX" in f or "AMX" in f) or info


def compare(a, b) -> dict:
    """Differences of two BlockScores over the same targets."""
    diff = np.abs(a.logprob - b.logprob)
    flipped = a.greedy_id != b.greedy_id
    margin = (a.topk_logprobs[:, 0].astype(np.float64) - a.topk_logprobs[:, 1])
    return {
        "n": len(diff),
        "max_abs": float(diff.max()),
        "mean_abs": float(diff.mean()),
        "same_rank": float(np.mean(a.rank == b.rank)),
        "same_greedy": float(np.mean(~flipped)),
        "flip_margin": float(margin[flipped].min()) if flipped.any() else float("nan"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompt", type=int, default=384)
    parser.add_argument("--continuation", type=int, default=128)
    args = parser.parse_args()

    from ctxeval.backends.llamacpp import LlamaCppScorer
    from ctxeval.backends.model_files import embedded_model_path

    path = embedded_model_path()
    scorers = {
        "512/2": LlamaCppScorer(path, "gemma", n_threads=2, n_batch=512),
        "64/2": LlamaCppScorer(path, "gemma", n_threads=2, n_batch=64),
        "7/2": LlamaCppScorer(path, "gemma", n_threads=2, n_batch=7),
        "512/1": LlamaCppScorer(path, "gemma", n_threads=1, n_batch=512),
    }
    base = scorers["512/2"]
    rows = []
    for text_path in TEXTS:
        text = text_path.read_bytes().decode("utf-8")[:40_000]
        ids = base.tokenize(text)[: args.prompt + args.continuation]
        prompt = np.asarray([base.info.bos_id] + ids[: args.prompt], dtype=np.int32)
        cont = np.asarray(ids[args.prompt :], dtype=np.int32)
        window = np.concatenate([prompt, cont[:-1]])
        positions = np.arange(len(prompt) - 1, len(window))
        batched = {name: s.score(window, positions, cont, 20, (1.0,)) for name, s in scorers.items()}
        stepwise = base.score_stepwise(prompt, cont, 20, (1.0,))
        name = text_path.stem
        rows.append((name, "batch vs one-token decodes", compare(batched["512/2"], stepwise)))
        rows.append((name, "n_batch 512 vs 64", compare(batched["512/2"], batched["64/2"])))
        rows.append((name, "n_batch 512 vs 7", compare(batched["512/2"], batched["7/2"])))
        rows.append((name, "2 threads vs 1", compare(batched["512/2"], batched["512/1"])))
    for s in scorers.values():
        s.close()

    print(f"CPU features (llama.cpp): {cpu_features()}")
    print(f"prompt {args.prompt} tokens, {args.continuation} scored continuation tokens per text\n")
    print("| text | paths | n | max abs Δ logprob | mean abs Δ | same rank | same greedy | min margin of a flip |")
    print("|---|---|---|---|---|---|---|---|")
    for name, what, r in rows:
        print(f"| {name} | {what} | {r['n']} | {r['max_abs']:.2e} | {r['mean_abs']:.2e} | {r['same_rank']:.3f} | {r['same_greedy']:.3f} | {r['flip_margin']:.2e} |")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
