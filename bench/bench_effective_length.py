"""What effective-length costs, against its peers in the same run: one approx sweep over the same
lengths and as many starts (the thesis's cheapest protocol, one pass of L + n_c tokens per start)
and the line-retrieval probe sized to the same lengths (`retrieval --tokens`).

Each side runs in a fresh output folder, one after the other, on the same model and threads.
Tokens through the model are counted from the records: a scoring pass feeds its whole window
(BOS + context + targets), a retrieval case its prompt and its answer. Prints one table with
ratios against effective-length.

    python bench/bench_effective_length.py                       # demo text, 256..1024, 8 starts x 16 targets
    python bench/bench_effective_length.py --text ../shared/data/gutenberg/austen-emma.txt --lengths 256,512,1024,2048,4096
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src")]

import pandas as pd  # noqa: E402

from ctxeval import api  # noqa: E402
from ctxeval.results.records import read_records  # noqa: E402


def scoring_tokens(run_dir: Path, bos: int = 1) -> int:
    """Tokens fed to the model over every pass of a token-scoring run: per pass, BOS plus the
    tokens from its first context token to its last target."""
    records = read_records(run_dir)
    per_pass = records.groupby(["model", "pass_index"]).agg(first=("target_pos", "min"), last=("target_pos", "max"), context=("context_len", "first"))
    return int((per_pass["last"] - per_pass["first"] + per_pass["context"] + 1 + bos).sum())


def retrieval_tokens(run_dir: Path) -> int:
    """Prompt and answer tokens of every case (teacher-forced answers; greedy generation, when a
    case needs it, adds a few more decodes that are not counted)."""
    cases = pd.read_parquet(run_dir / "cases.parquet")
    return int(cases["prompt_tokens"].sum() + cases["value_tokens"].sum())


def timed(fn, *args, **kwargs) -> tuple[float, object]:
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    return time.perf_counter() - start, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--text", default="demo")
    parser.add_argument("--model", default="gemma-3-270m")
    parser.add_argument("--lengths", default="256,512,1024", help="context lengths; the retrieval probe needs 256 or more (its smallest record is 240 tokens)")
    parser.add_argument("--starts", type=int, default=8)
    parser.add_argument("--targets", type=int, default=16)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--no-retrieval", action="store_true", help="skip the retrieval probe")
    args = parser.parse_args()
    lengths = tuple(int(x) for x in args.lengths.split(","))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        seconds, _ = timed(api.effective_length, [args.text], models=(args.model,), lengths=lengths, starts=args.starts, targets=args.targets,
                           unit="span", replicates=200, out=out / "el", n_threads=args.threads)
        rows.append({"run": "effective-length", "seconds": seconds, "tokens": scoring_tokens(out / "el")})
        seconds, _ = timed(api.sweep, [args.text], models=(args.model,), lengths=lengths, repeats=args.starts, n_compare=args.targets,
                           context_mode="approx", out=out / "sweep", n_threads=args.threads)
        rows.append({"run": "sweep --context-mode approx", "seconds": seconds, "tokens": scoring_tokens(out / "sweep")})
        if not args.no_retrieval:
            seconds, _ = timed(api.retrieval, models=(args.model,), tokens=lengths, out=out / "retrieval", n_threads=args.threads)
            rows.append({"run": "retrieval --tokens (5 depths x 3 samples)", "seconds": seconds, "tokens": retrieval_tokens(out / "retrieval")})
    table = pd.DataFrame(rows)
    table["tokens / s"] = table["tokens"] / table["seconds"]
    table["time vs effective-length"] = table["seconds"] / table["seconds"].iloc[0]
    table["tokens vs effective-length"] = table["tokens"] / table["tokens"].iloc[0]
    print(f"text {args.text}, model {args.model}, lengths {args.lengths}, {args.starts} starts x {args.targets} targets")
    print(table.to_markdown(index=False, floatfmt=".3g"))


if __name__ == "__main__":
    main()
