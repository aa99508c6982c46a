"""KV-cache presses against the full cache and the truncation control of the same budget, on an
embedded model (docs/kv_compression.md): one effective-length run of every variant on the same
spans of public-domain books (L*, gain, share of the full model's gain, gain − full's with
intervals, mean log p at the longest length), line retrieval with the record compressed,
mean KL against the full cache (`diff`), and the cost of one pass with each press against the
unpressed model, timed in the same process. Every run resumes where it stopped.

    python bench/bench_kv_compression.py                    # SmolLM2 135M (hf), budgets 128 and 512, lengths 256..2048
    python bench/bench_kv_compression.py --model hf:gemma-3-270m --out runs/kv-gemma
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src")]

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

BOOKS = [ROOT.parent / "shared" / "data" / "gutenberg" / name for name in ("austen-emma.txt", "melville-moby_dick.txt")]
PRESSES = ("StreamingLLMPress", "SnapKVPress", "KnormPress", "ExpectedAttentionPress")


def variants(model: str, budgets: tuple[int, ...], presses: tuple[str, ...], all_presses_at: int) -> list[str]:
    """The full model, then per budget its presses (all of them at `all_presses_at`, the first two
    elsewhere) and the truncation control of that budget."""
    out = [model]
    for budget in budgets:
        chosen = presses if budget == all_presses_at else presses[:2]
        out += [f"{model}?press={p}&budget={budget}" for p in chosen] + [f"{model}?max_context={budget}"]
    return out


def effective_length_rows(run: Path) -> pd.DataFrame:
    summary = json.loads((run / "summary.json").read_text())
    names = list(summary["models"])
    full = summary["models"][names[0]]["curve"][-1]["gain"]["estimate"]
    diffs = {c["b"]: c["gain_difference"] for c in summary["comparisons"]}
    rows = []
    for name, s in summary["models"].items():
        e, last = s["effective_length"], s["curve"][-1]
        star = ("≥ " if e["at_least"] else "") + f"{e['value']:,}"
        low, high = e.get("low"), e.get("high")
        d = diffs.get(name)
        rows.append({
            "model": name.split("?", 1)[1] if "?" in name else "full cache",
            "L* [95 %]": f"{star} [{low:,}, {high:,}]" if low is not None else f"{star} (no interval)",
            f"log p at {last['length']:,}": round(last["logprob"], 3),
            "gain": f"{last['gain']['estimate']:+.3f} [{last['gain']['low']:+.3f}, {last['gain']['high']:+.3f}]",
            "share of full gain": f"{last['gain']['estimate'] / full:.0%}" if full > 0 else "—",
            "gain − full": f"{d['estimate']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}]" if d else "—",
        })
    return pd.DataFrame(rows)


def retrieval_rows(run: Path) -> pd.DataFrame:
    cases = pd.read_parquet(run / "cases.parquet")
    cases["variant"] = cases.model.map(lambda n: n.split("?", 1)[1] if "?" in n else "full cache")
    return cases.groupby(["variant", "lines"], sort=False).agg(prompt_tokens=("prompt_tokens", "mean"), accuracy=("correct", "mean"), value_logprob=("value_logprob", "mean"),
                                                               first_rank=("first_rank", "median"), cases=("correct", "size")).round(3).reset_index()


def kl_row(run: Path, first_window_tokens: int) -> float:
    """Mean KL per target over targets that had a context to compress (after the first window)."""
    records = pd.read_parquet(run / "diff_records.parquet")
    return float(records.kl[records.target_pos >= first_window_tokens].mean())


def pass_cost(models: list[str], text: Path, context: int, targets: int, repeats: int) -> dict[str, float]:
    """Seconds per pass of `context` + `targets` tokens, each model timed in turn, best of `repeats`."""
    from ctxeval.backends.registry import load_scorer, parse_model_spec

    rows = {}
    ids = None
    for spec in models:
        if "max_context" in spec:
            continue
        scorer = load_scorer(parse_model_spec(spec))
        if ids is None:
            ids = np.asarray(scorer.tokenize(text.read_text(encoding="utf-8")[100_000:200_000]), dtype=np.int32)[: context + targets + 1]
        args = (ids[:-1], np.arange(context, context + targets), ids[context + 1 :], 20, (1.0,))
        best = np.inf
        for _ in range(repeats):
            start = time.perf_counter()
            scorer.score(*args)
            best = min(best, time.perf_counter() - start)
        rows[spec] = best
        scorer.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="hf:smollm2-135m")
    parser.add_argument("--budgets", default="128,512")
    parser.add_argument("--all-presses-at", type=int, default=128, help="the budget at which every press runs (the first two elsewhere)")
    parser.add_argument("--lengths", default="256,512,1024,2048")
    parser.add_argument("--starts", type=int, default=4)
    parser.add_argument("--targets", type=int, default=16)
    parser.add_argument("--retrieval-tokens", default="1024,2048")
    parser.add_argument("--kl-window", type=int, default=2048)
    parser.add_argument("--kl-tokens", type=int, default=6144)
    parser.add_argument("--out", default="runs/kv-compression")
    parser.add_argument("--skip", default="", help="comma-separated steps to skip: effective-length,retrieval,diff,cost")
    args = parser.parse_args()
    from ctxeval import api

    out, skip = Path(args.out), set(filter(None, args.skip.split(",")))
    budgets = tuple(int(b) for b in args.budgets.split(","))
    models = variants(args.model, budgets, PRESSES, args.all_presses_at)
    books = [str(b) for b in BOOKS]
    if "effective-length" not in skip:
        api.effective_length(books, models=tuple(models), lengths=tuple(int(x) for x in args.lengths.split(",")), starts=args.starts,
                             targets=args.targets, unit="span", out=out / "effective-length")
        print(f"\n## Effective length ({', '.join(Path(b).stem for b in books)}; {args.starts} spans x {args.targets} targets per book, spans as units)\n")
        print(effective_length_rows(out / "effective-length").to_markdown(index=False))
    pressed = [m for m in models if "press=" in m]
    if "retrieval" not in skip:
        api.retrieval(models=(args.model, *pressed), tokens=tuple(int(x) for x in args.retrieval_tokens.split(",")), depths=(0.0, 0.5, 1.0),
                      samples=2, variant="register", out=out / "retrieval")
        print("\n## Line retrieval (register, the record compressed)\n")
        print(retrieval_rows(out / "retrieval").to_markdown(index=False))
    if "diff" not in skip:
        print(f"\n## Mean KL against the full cache (windows of {args.kl_window}, stride {args.kl_window // 2}, targets after the first window)\n")
        print("| variant | mean KL (nats/target) |\n|---|---|")
        for m in pressed:
            run = out / "diff" / m.split("?", 1)[1].replace("&", "_").replace("=", "-")
            api.diff(args.model, m, [books[0]], window=args.kl_window, stride=args.kl_window // 2, max_tokens=args.kl_tokens, out=run)
            print(f"| {m.split('?', 1)[1]} | {kl_row(run, args.kl_window):.4f} |")
    if "cost" not in skip:
        costs = pass_cost(models, BOOKS[0], max(int(x) for x in args.lengths.split(",")), args.targets, 3)
        base = costs[args.model]
        print(f"\n## Cost of one pass ({max(int(x) for x in args.lengths.split(','))} + {args.targets} tokens, best of 3)\n")
        print("| variant | s | × full |\n|---|---|---|")
        for m, s in costs.items():
            print(f"| {m.split('?', 1)[1] if '?' in m else 'full cache'} | {s:.2f} | {s / base:.2f} |")


if __name__ == "__main__":
    main()
