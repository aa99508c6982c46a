"""The flips of a paired comparison and McNemar's tests on them.

Two variants scored on the same samples differ only where a sample flips: right in the
reference and wrong in the candidate (a loss), or the reverse (a gain). lm-evaluation-harness's
paired-comparison issue (EleutherAI/lm-evaluation-harness#3831, PR #3835) asks for McNemar's
test on these per-item outcomes instead of an unpaired z-test; the two counts are shown beside
the difference because a difference of 0 points can hide many flips each way. A sample with partial credit (RULER's multi-answer tasks) is no flip: it is
counted apart.

McNemar's exact test conditions on the b + c flips: under "no difference" each is a loss or a
gain with probability 1/2, so b ~ Binomial(b + c, 1/2) and the two-sided p is twice the smaller
tail, capped at 1 (McNemar 1947; the exact conditional form, Fagerland, Lydersen and Laake 2013,
BMC Medical Research Methodology 13:91). That paper recommends the mid-p version (half the
observed count's probability left out of the tail), which holds its level closely where the
exact test is conservative; both are given. The score test of the difference at 0, what
Tango's interval inverts, is McNemar's asymptotic statistic (b − c)/√(b + c): `score_p` gives
its two-sided p with partial credit as fractions, the test whose Holm adjustment orders a run's
variants (ruler/ranking.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ctxeval.stats.paired_binary import tango_statistic


@dataclass(frozen=True)
class Flips:
    """Paired samples that changed: `lost` right (1) in the reference and wrong (0) in the
    candidate, `gained` the reverse, `partial` pairs that differ where either score is partial
    (strictly between 0 and 1). `binary` is whether every score is 0 or 1."""

    lost: int
    gained: int
    partial: int
    binary: bool


def flips(reference: np.ndarray, candidate: np.ndarray) -> Flips:
    """The flips of paired scores in [0, 1] (sample i of both is the same prompt)."""
    reference, candidate = np.asarray(reference, dtype=np.float64), np.asarray(candidate, dtype=np.float64)
    if reference.shape != candidate.shape or reference.ndim != 1:
        raise ValueError("paired scores must be two 1-D arrays of the same length")
    whole = np.isin(reference, (0.0, 1.0)) & np.isin(candidate, (0.0, 1.0))
    return Flips(lost=int(((reference == 1) & (candidate == 0)).sum()), gained=int(((reference == 0) & (candidate == 1)).sum()),
                 partial=int((~whole & (reference != candidate)).sum()), binary=bool(whole.all()))


def mcnemar_exact(lost: int, gained: int) -> tuple[float, float]:
    """(exact p, mid-p) of McNemar's two-sided test on `lost` and `gained` flips."""
    from scipy import stats  # imported when used: scipy is a third of the CLI's start-up

    if lost < 0 or gained < 0:
        raise ValueError(f"flip counts must be non-negative, not {lost}, {gained}")
    n, low = lost + gained, min(lost, gained)
    if n == 0:
        return 1.0, 1.0
    tail = float(stats.binom.cdf(low, n, 0.5))
    return min(1.0, 2 * tail), 2 * tail - float(stats.binom.pmf(low, n, 0.5))


def score_p(gained: float, lost: float, n: float) -> float:
    """Two-sided p of the score test of a zero paired difference (Tango's T at Δ = 0, McNemar's
    asymptotic statistic without continuity correction); `gained`/`lost` may be fractions."""
    from scipy import special

    t = tango_statistic(0.0, gained, lost, n)
    return 1.0 if t == 0 else float(special.erfc(abs(t) / math.sqrt(2)))
