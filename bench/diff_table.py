"""The table of docs/diff.md: the embedded Gemma 3 270M (Q4_K_M) as REF against candidates
that need no download (llama.cpp requantizations of it, and KV-cache quantization), on the
first N tokens of WikiText-2 test in disjoint windows, by context-position bucket, and on the
key tokens a context-gain run of REF picks (`--key-short K`: LongPPL's rule, short contexts of K
to 2K - 1 tokens); and the same weights in transformers (`hf:gemma-3-270m`) against llama.cpp.

    .venv/bin/python bench/diff_table.py [--tokens 4096] [--window 512] [--buckets 0,128,256] [--out runs/diff-table] [--text FILE] [--key-short 128]
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import ctxeval
from ctxeval import api
from ctxeval.backends.model_files import embedded_model_path
from ctxeval.backends.quantize import requantize

SHARED = Path(os.environ.get("CTXEVAL_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
WIKITEXT = SHARED / "wikitext2" / "wiki.test.raw"
REQUANTIZED = ("q8_0", "q4_0", "q3_k_m", "q2_k")
# a quantized V cache needs flash attention, which alone moves scores (docs/numerics.md): FA with
# the f16 cache separates the two
KV = {"FA KV f16": "gemma-3-270m?flash_attn=1", "FA KV q8_0": "gemma-3-270m?type_k=q8_0&type_v=q8_0&flash_attn=1",
      "FA KV q4_0": "gemma-3-270m?type_k=q4_0&type_v=q4_0&flash_attn=1"}
# one backend against the other on the same Q4_K_M weights: label -> (REF, CAND)
BACKENDS = {"hf:gemma-3-270m": ("gemma-3-270m", "hf:gemma-3-270m"),
            "hf:gemma-3-270m vs f32 KV": ("gemma-3-270m?type_k=f32&type_v=f32", "hf:gemma-3-270m")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--window", type=int, default=512)
    parser.add_argument("--text", type=Path, default=WIKITEXT)
    parser.add_argument("--buckets", default="0,128,256")
    parser.add_argument("--out", type=Path, default=Path("runs/diff-table"))
    parser.add_argument("--only", default=None, help="comma-separated candidate labels to run")
    parser.add_argument("--key-short", type=int, default=None, help="also summarise over REF's key tokens, short context K")
    args = parser.parse_args()
    gain_run = None
    if args.key_short:
        gain_run = args.out / f"context-gain-short{args.key_short}"
        # short passes move by K: short contexts of K to 2K - 1 tokens (context-gain's --short-stride)
        api.context_gain([str(args.text)], window=args.window, short=args.key_short, short_stride=args.key_short,
                             max_tokens=args.tokens, out=gain_run)
    candidates = {}
    for file_type in REQUANTIZED:
        path = args.out / "gguf" / f"gemma-3-270m-{file_type}.gguf"
        if not path.is_file():
            requantize(embedded_model_path(), path, file_type)
        candidates[f"requantized {file_type.upper()}"] = ("gemma-3-270m", str(path))
    candidates |= {label: ("gemma-3-270m", spec) for label, spec in KV.items()} | BACKENDS
    if args.only:
        candidates = {k: v for k, v in candidates.items() if k in args.only.split(",")}
    edges = [int(e) for e in args.buckets.split(",")]
    print("| CAND | context | tokens | mean KL [95 % CI] | p99 KL | max KL | same top-1 % [95 % CI] | PPL ratio [95 % CI] |")
    print("|---|---|---:|---|---:|---:|---|---|")
    for label, (ref, cand) in candidates.items():
        result = ctxeval.diff(ref, cand, [str(args.text)], window=args.window, max_tokens=args.tokens, buckets=edges,
                              out=args.out / label.replace(" ", "-"), key_tokens=gain_run, progress=False)
        summary = result.report["summary"]
        cells = [summary["all"], *summary["buckets"]]
        key = summary.get("key_tokens", {})
        if "all" in key:
            cells.append(key["all"] | {"bucket": "key tokens"})
        for cell in cells:
            kl, same, ratio = cell["kl"], cell["same_top1"], cell["ppl_ratio"]["ratio"]
            print(f"| {label} | {cell['bucket']} | {cell['tokens']} | {kl['estimate']:.4f} [{kl['low']:.4f}, {kl['high']:.4f}] | {kl['p99']:.3f} | {kl['max']:.3f} | "
                  f"{same['estimate']:.1f} [{same['low']:.1f}, {same['high']:.1f}] | {ratio['estimate']:.4f} [{ratio['low']:.4f}, {ratio['high']:.4f}] |", flush=True)


if __name__ == "__main__":
    main()
