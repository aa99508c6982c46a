"""Coverage of `ctxeval compare`'s bootstrap intervals, by seeded simulation (numpy/scipy only).

Two tables, the evidence behind two defaults of `stats/paired.py` and `report/compare.py`:

1. Resampling scheme (`--resample windows|tokens`). Windows with token counts
   t = round(exp(N(4.5, 1.2))) + 1 and differences d_i = 0.05 + h_i + N(0, 1) * 3 / sqrt(t_i)
   (the generator of tests/test_paired.py; h_i = 0, or a per-window effect h_i ~ N(0, sd)).
   The truth is 0.05. Schemes: "windows" (draw windows uniformly, ratio of sums), "tokens"
   (draw windows with p_i ∝ t_i, plain mean of the drawn d: paper 001's scheme) and
   "tokens, weighted again" (draw ∝ t_i and then take the token-weighted mean of the drawn
   windows, which weights twice). Each with a BCa and a percentile interval.
2. Number of documents (`MIN_CLUSTERS`, `RELIABLE_CLUSTERS` in stats/defaults.py). D documents
   of W windows each, d = 0.05 + u_doc + window noise as above, u_doc ~ N(0, tau); coverage of
   the BCa cluster bootstrap (resampling documents) and of the window bootstrap, per D x W x tau,
   then per D the worst cell of each. MIN_CLUSTERS is the fewest documents from which resampling
   documents has the better worst cell (whether documents differ is unknown to compare, so the
   unit with the better worst case is chosen); RELIABLE_CLUSTERS the fewest from which it covers
   at least 85 % in every cell.

Usage: python bench/bench_compare_coverage.py [--sims 2000] [--grid-sims 1000] [--replicates 999] (about 15 min)
Prints both tables (coverage of the nominal 95 % interval, in %; the Monte Carlo standard error
of a coverage near 95 % is about sqrt(.95 * .05 / sims)).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from scipy.special import ndtr, ndtri

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from ctxeval.stats.paired import paired_bca, ratio_replicates, token_replicates, weighted_mean  # noqa: E402

TRUE = 0.05
CONFIDENCE = 0.95


def draw_windows(rng: np.random.Generator, n: int, window_sd: float) -> tuple[np.ndarray, np.ndarray]:
    """Token counts and differences of n windows; with window_sd 0 the draws are exactly those of
    tests/test_paired.py's coverage test (same seed, same order)."""
    tokens = np.round(np.exp(rng.normal(4.5, 1.2, n))) + 1
    delta = TRUE + rng.normal(0.0, 1.0, n) / np.sqrt(tokens) * 3
    if window_sd > 0:
        delta += rng.normal(0.0, window_sd, n)
    return delta, tokens


def bca_bounds(boot: np.ndarray, theta: float, accel: float) -> tuple[float, float]:
    z0 = ndtri((np.sum(boot < theta) + np.sum(boot <= theta)) / (2.0 * len(boot)))
    if not np.isfinite(z0):
        return theta, theta
    alpha = (1 - CONFIDENCE) / 2
    levels = [ndtr(z0 + (z0 + z) / (1 - accel * (z0 + z))) for z in (ndtri(alpha), ndtri(1 - alpha))]
    low, high = np.percentile(boot, [100 * levels[0], 100 * levels[1]])
    return float(low), float(high)


def percentile_bounds(boot: np.ndarray) -> tuple[float, float]:
    alpha = 100 * (1 - CONFIDENCE) / 2
    low, high = np.percentile(boot, [alpha, 100 - alpha])
    return float(low), float(high)


def double_weighted(delta: np.ndarray, tokens: np.ndarray, replicates: int, seed: int) -> np.ndarray:
    """Draw windows with p ∝ t and take the token-weighted mean of the drawn windows."""
    rng = np.random.default_rng(seed)
    idx = rng.choice(len(delta), size=(replicates, len(delta)), p=tokens / tokens.sum())
    return (tokens * delta)[idx].sum(axis=1) / tokens[idx].sum(axis=1)


def jackknife_acceleration(delta: np.ndarray, tokens: np.ndarray) -> float:
    num, den = tokens * delta, tokens
    jack = (num.sum() - num) / (den.sum() - den)
    u = jack.mean() - jack
    return float(np.sum(u**3) / (6 * np.sum(u**2) ** 1.5))


def scheme_table(sims: int, replicates: int) -> list[tuple]:
    rows = []
    for n, window_sd in ((50, 0.0), (15, 0.0), (200, 0.0), (50, 0.1), (50, 0.3), (200, 0.1)):
        rng = np.random.default_rng(2024)
        hits: dict[str, list[float]] = {}
        widths: dict[str, list[float]] = {}
        for sim in range(sims):
            delta, tokens = draw_windows(rng, n, window_sd)
            theta = weighted_mean(delta, tokens)
            intervals = {}
            for scheme in ("windows", "tokens"):
                est = paired_bca(delta, tokens, replicates, seed=sim, resample=scheme)
                intervals[f"{scheme}, BCa"] = (est.low, est.high)
            intervals["windows, percentile"] = percentile_bounds(ratio_replicates(tokens * delta, tokens, replicates, sim))
            intervals["tokens, percentile"] = percentile_bounds(token_replicates(delta, tokens / tokens.sum(), replicates, sim))
            boot = double_weighted(delta, tokens, replicates, sim)
            intervals["tokens, weighted again, BCa"] = bca_bounds(boot, theta, jackknife_acceleration(delta, tokens))
            intervals["tokens, weighted again, percentile"] = percentile_bounds(boot)
            for name, (low, high) in intervals.items():
                hits.setdefault(name, []).append(low <= TRUE <= high)
                widths.setdefault(name, []).append(high - low)
        for name in hits:
            rows.append((n, window_sd, name, 100 * np.mean(hits[name]), np.median(widths[name])))
    return rows


def cluster_table(sims: int, replicates: int, documents: list[int], windows: list[int], taus: list[float]) -> list[tuple]:
    rows = []
    for tau in taus:
        for n_docs in documents:
            for per_doc in windows:
                rng = np.random.default_rng(7)
                hits = {"documents": 0, "windows": 0}
                for sim in range(sims):
                    labels = np.repeat(np.arange(n_docs), per_doc)
                    delta, tokens = draw_windows(rng, n_docs * per_doc, 0.0)
                    delta += rng.normal(0.0, tau, n_docs)[labels]
                    by_doc = paired_bca(delta, tokens, replicates, seed=sim, clusters=labels)
                    by_window = paired_bca(delta, tokens, replicates, seed=sim)
                    hits["documents"] += by_doc.low <= TRUE <= by_doc.high
                    hits["windows"] += by_window.low <= TRUE <= by_window.high
                rows.append((tau, n_docs, per_doc, 100 * hits["documents"] / sims, 100 * hits["windows"] / sims))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sims", type=int, default=2000, help="simulated data sets per row of table 1")
    parser.add_argument("--grid-sims", type=int, default=1000, help="simulated corpora per cell of table 2")
    parser.add_argument("--replicates", type=int, default=999)
    parser.add_argument("--documents", default="2,3,4,5,6,7,8,10,12,15,20,30")
    parser.add_argument("--windows", default="2,8,32")
    parser.add_argument("--taus", default="0,0.1")
    parser.add_argument("--skip", choices=["schemes", "clusters"], help="leave one table out")
    args = parser.parse_args()
    if args.skip != "schemes":
        start = time.perf_counter()
        print(f"Table 1: resampling schemes, {args.sims} data sets per row, {args.replicates} replicates, nominal 95 %")
        print("| windows | per-window sd | scheme | coverage % | median width |\n|---:|---:|---|---:|---:|")
        for n, sd, name, cov, width in scheme_table(args.sims, args.replicates):
            print(f"| {n} | {sd:g} | {name} | {cov:.1f} | {width:.4f} |")
        print(f"({time.perf_counter() - start:.0f} s)\n")
    if args.skip != "clusters":
        start = time.perf_counter()
        documents = [int(x) for x in args.documents.split(",")]
        windows = [int(x) for x in args.windows.split(",")]
        taus = [float(x) for x in args.taus.split(",")]
        print(f"Table 2: documents x windows per document, {args.grid_sims} corpora per cell, {args.replicates} replicates, nominal 95 %")
        print("| document sd | documents | windows/doc | resample documents % | resample windows % |\n|---:|---:|---:|---:|---:|")
        rows = cluster_table(args.grid_sims, args.replicates, documents, windows, taus)
        for tau, n_docs, per_doc, by_doc, by_window in rows:
            print(f"| {tau:g} | {n_docs} | {per_doc} | {by_doc:.1f} | {by_window:.1f} |")
        print(f"({time.perf_counter() - start:.0f} s)\n")
        print("| documents | worst cell, resample documents % | worst cell, resample windows % |\n|---:|---:|---:|")
        worst = {d: (min(r[3] for r in rows if r[1] == d), min(r[4] for r in rows if r[1] == d)) for d in documents}
        for d, (by_doc, by_window) in worst.items():
            print(f"| {d} | {by_doc:.1f} | {by_window:.1f} |")
        minimax = next((d for d in documents if all(worst[e][0] >= worst[e][1] for e in documents if e >= d)), None)
        reliable = next((d for d in documents if all(worst[e][0] >= 85.0 for e in documents if e >= d)), None)
        print(f"\nfewest documents from which resampling documents has the better worst cell: {minimax} (MIN_CLUSTERS)")
        print(f"fewest documents from which resampling documents covers >= 85 % in every cell: {reliable} (RELIABLE_CLUSTERS)")


if __name__ == "__main__":
    main()
