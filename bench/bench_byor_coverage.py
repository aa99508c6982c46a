"""Coverage and width of the paired difference interval on simulated paired 0/1 samples, as a
KV-cache press makes them: ctxeval compare's interval (Tango's score interval,
stats/paired_binary.py) beside evalsig 0.1.2's (the interval its `compare()` picks for two runs of
0/1 scores: `mcnemar_test`, a Wald interval of the paired difference).

Each cell draws a reference run right with probability `p` per sample and a press that loses
each right answer with probability `--loss` and rights each wrong one with probability `--gain`
(true difference −p·loss + (1 − p)·gain), `--draws` times at each n; a method covers when its
95 % interval holds the true difference. evalsig is called, not copied: install it for the bench
only (evalsig 0.1.2 from PyPI, into the venv; it is no dependency of ctxeval).

    python bench/bench_byor_coverage.py [--draws 2000] [--loss 0.03] [--gain 0.005] [--seed 0]
"""

from __future__ import annotations

import argparse
import time
from functools import lru_cache

import numpy as np

from ctxeval.stats.paired_binary import tango_interval

ACCURACIES = (0.5, 0.7, 0.9, 0.95, 0.99)
SIZES = (20, 30, 50, 100, 200, 500)


@lru_cache(maxsize=None)
def tango(gained: int, lost: int, n: int) -> tuple[float, float]:
    """ctxeval's interval depends on the flips and n only: computed once per (gained, lost, n)."""
    return tango_interval(gained, lost, n)


def cell(p: float, n: int, loss: float, gain: float, draws: int, rng: np.random.Generator) -> dict:
    """Coverage, mean width and zero-width share of both intervals over `draws` paired runs."""
    from evalsig.inference.mcnemar import mcnemar_test

    truth = -p * loss + (1 - p) * gain
    hits = {"ctxeval": 0, "evalsig": 0}
    widths = {"ctxeval": 0.0, "evalsig": 0.0}
    zero = 0
    for _ in range(draws):
        reference = (rng.random(n) < p).astype(float)
        flip = np.where(reference == 1, rng.random(n) < loss, rng.random(n) < gain)
        candidate = np.where(flip, 1 - reference, reference)
        theirs = mcnemar_test(reference, candidate).ci
        gained, lost = int(((reference == 0) & (candidate == 1)).sum()), int(((reference == 1) & (candidate == 0)).sum())
        ours = tango(gained, lost, n)
        for name, (low, high) in (("ctxeval", ours), ("evalsig", theirs)):
            hits[name] += low <= truth <= high
            widths[name] += high - low
        zero += theirs[1] - theirs[0] == 0
    return {"p": p, "n": n, "truth": truth, **{f"cover_{k}": v / draws for k, v in hits.items()},
            **{f"width_{k}": v / draws for k, v in widths.items()}, "zero_evalsig": zero / draws}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--draws", type=int, default=2000)
    parser.add_argument("--loss", type=float, default=0.03, help="share of the reference's right answers the press loses")
    parser.add_argument("--gain", type=float, default=0.005, help="share of the reference's wrong answers the press rights")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    started = time.time()
    print(f"paired 0/1 samples, press loses {100 * args.loss:g} % of right answers and rights {100 * args.gain:g} % of wrong ones; {args.draws} draws a cell; 95 % intervals")
    print("| reference accuracy | n | true Δ (points) | ctxeval coverage | ctxeval mean width | evalsig coverage | evalsig mean width | evalsig zero width |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for p in ACCURACIES:
        for n in SIZES:
            r = cell(p, n, args.loss, args.gain, args.draws, rng)
            print(f"| {p:.2f} | {n} | {100 * r['truth']:+.2f} | {r['cover_ctxeval']:.3f} | {100 * r['width_ctxeval']:.1f} | {r['cover_evalsig']:.3f} | "
                  f"{100 * r['width_evalsig']:.1f} | {r['zero_evalsig']:.3f} |", flush=True)
    print(f"({time.time() - started:.0f} s)")


if __name__ == "__main__":
    main()
