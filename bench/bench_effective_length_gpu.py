"""Effective context length of open models on a GPU, beside the effective lengths published for
them by retrieval-style benchmarks (docs/effective_length.md cites each figure).

For every local Hugging Face checkpoint given (`--model NAME=DIR`; nothing is downloaded), one
`ctxeval effective-length` run scores the same spans of public-domain books at every length
(1K..128K by default) with the model and its truncation controls (`?max_context=N`), then
prints per model: L* with its interval, the key-token L*, the controls' L*s (each must come
out within a doubling of N, its interval covering N) and the published figures. The goal past
this machine is the agreement table: does L* order models as RULER, NoLiMa and BABILong do?

    python bench/bench_effective_length_gpu.py --model llama-3.1-8b=/models/Llama-3.1-8B \\
        --texts ../shared/data/gutenberg --lengths 1024,2048,4096,8192,16384,32768,65536,131072 --controls 4096,16384
    python bench/bench_effective_length_gpu.py --small     # a tiny random model on the CPU: checks the recipe runs
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

import pandas as pd  # noqa: E402

# Effective lengths published for open models (tokens). Sources: RULER (Hsieh et al., 2024, the
# repository's results table: longest length whose 13-task mean stays above Llama-2-7B's 85.6 at
# 4K), NoLiMa (Modarressi et al., 2025: longest length keeping 85 % of the model's own short-
# context score), BABILong (Kuratov et al., 2024). The figures are those cited in docs/effective_length.md.
PUBLISHED = {
    "llama-3.1-8b": {"RULER": 32768, "NoLiMa": 1024, "BABILong": 16384},
    "llama-3.1-70b": {"RULER": 65536},
}
GUTENBERG = ROOT.parent / "shared" / "data" / "gutenberg"


def run_model(name: str, directory: str, texts: list[str], lengths: tuple[int, ...], controls: tuple[int, ...], args: argparse.Namespace, out: Path) -> list[dict]:
    from ctxeval import api

    spec = f"hf:{directory}"
    models = (spec, *(f"{spec}?max_context={n}" for n in controls))
    result = api.effective_length(texts, models=models, lengths=lengths, starts=args.starts, targets=args.targets, unit=args.unit,
                                  device=args.device, dtype=args.dtype, out=out / name, replicates=args.replicates)
    rows = []
    for s in result.summary["models"].values():  # the model first, then its controls
        e, key = s["effective_length"], s["key_effective_length"]
        row = {"model": name if s["max_context"] is None else f"{name} ≤{s['max_context']}", "L*": e["value"], "low": e["low"], "high": e["high"],
               "at least": e["at_least"], "key-token L*": key["value"] if key else None, "gain (nats/token)": s["curve"][-1]["gain"]["estimate"]}
        if s["max_context"] is None:
            row |= {f"published {k}": v for k, v in PUBLISHED.get(name, {}).items()}
        else:
            n = s["max_context"]
            row["control recovered"] = (n / 2 < e["value"] <= 2 * n) and e["low"] is not None and e["low"] <= n <= e["high"]
        rows.append(row)
    return rows


def tiny_model(path: Path) -> str:
    from tests.hf_tiny import tiny_llama_dir

    text = (GUTENBERG / "shakespeare-hamlet.txt").read_text(encoding="utf-8")[:200_000]
    return str(tiny_llama_dir(path, text, vocab_size=512, max_positions=4096))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", action="append", default=[], help="NAME=DIR of a local HF checkpoint (repeat)")
    parser.add_argument("--texts", nargs="+", default=[str(GUTENBERG)], help="texts or corpus folders (default: the Gutenberg books)")
    parser.add_argument("--lengths", default="1024,2048,4096,8192,16384,32768,65536,131072")
    parser.add_argument("--controls", default="4096,16384", help="truncation controls N (comma-separated)")
    parser.add_argument("--starts", type=int, default=8)
    parser.add_argument("--targets", type=int, default=32)
    parser.add_argument("--unit", default="document", choices=["document", "span"])
    parser.add_argument("--replicates", type=int, default=2000)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--out", default=None, help="keep the runs here (default: a temporary folder)")
    parser.add_argument("--small", action="store_true", help="a tiny random-weight model on the CPU, lengths 64..512")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(args.out or tmp)
        if args.small:
            args.model = [f"tiny={tiny_model(out / 'tiny-model')}"]
            args.lengths, args.controls, args.device, args.dtype, args.starts, args.targets = "64,128,256,512", "128", "cpu", "float32", 3, 16
        lengths = tuple(int(x) for x in args.lengths.split(","))
        controls = tuple(int(x) for x in args.controls.split(",") if x)
        rows = []
        for entry in args.model:
            name, _, directory = entry.partition("=")
            rows += run_model(name, directory, args.texts, lengths, controls, args, out)
    print(f"lengths {args.lengths}; {args.starts} starts x {args.targets} targets per document; device {args.device} {args.dtype}")
    print(pd.DataFrame(rows).to_markdown(index=False))


if __name__ == "__main__":
    main()
