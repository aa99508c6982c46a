"""Pseudo-labels at the ends of a bounded label's range: the interval of a mean of few bounded
labels that holds near the range's ends.

Why. A RULER cell's generated labels are scores in [0, 1] (0/1, or a share of a multi-answer
task's answers); a paired difference's lie in [−1, 1]. With the 10–30 generated samples a cell
holds, the mean's t (Wald) interval undercovers where the mean is near an end: its standard
error is computed at the estimate, and a sample that happens to lie close to the end both moves
the estimate there and shrinks the spread, so the interval misses on the side away from the end
(Brown, Cai and DasGupta 2001, Statistical Science 16:101, for a proportion; simulated here:
0.911 at an accuracy of 0.8 with about 18 generated labels, bench/coverage_grid.py). The
classical remedy adds pseudo-observations at the two ends before the mean and its spread are
computed: Agresti and Coull (1998, The American Statistician 52:119) add z²/2 ≈ 2 successes and
2 failures to a proportion ("add two successes and two failures" at 95 %), which pulls the
centre toward the middle as Wilson's score interval does and keeps a spread where every label is
equal; Bonett and Price (2012, Journal of Educational and Behavioral Statistics 37:479) add one
pair to each discordant cell of a paired 2×2 table (one pseudo-difference at −1 and one at +1)
for a difference of paired proportions. Both cover close to their level at small n where the
Wald interval does not, and both apply to any bounded label (a fraction of answers, a
difference of fractions), where Wilson's and Tango's likelihoods, written for 0/1 counts, do not.

In a PPI++ stratum the pseudo-labels join the generated (labelled) samples with the stratum's
mean prediction as their prediction: they carry no information about how the prediction relates
to the label, so they neither help nor hurt the power tuning beyond their weight, and with an
uninformative prediction (λ = 0) the interval is exactly the adjusted Wald interval above. They
shape the interval only: the point estimate stays the PPI++ estimate of the real labels.
"""

from __future__ import annotations

import numpy as np

from ctxeval.stats.defaults import DEFAULT_CONFIDENCE
from ctxeval.stats.interval import Interval, quantile


def pseudo_count(label_range: tuple[float, float], confidence: float = DEFAULT_CONFIDENCE) -> int:
    """Pseudo-labels added at each end of `label_range`: 2 for a score in [0, 1] (Agresti and
    Coull's z²/2 at 95 %, rounded), 1 for a paired difference in [−1, 1] (Bonett and Price's
    one pair per discordant cell). At higher confidence (`--until`'s per-look level) the score's
    count follows z²/2 (3 at 98.75 %); the difference keeps Bonett and Price's single pair,
    whose coverage bench/coverage_grid.py measures at that confidence too."""
    low, high = label_range
    if low < 0 < high:
        return 1
    z = quantile(confidence)
    return max(1, round(z * z / 2))


def with_pseudo_labels(y: np.ndarray, prediction: np.ndarray, prediction_unlabelled: np.ndarray, label_range: tuple[float, float],
                       count: int) -> tuple[np.ndarray, np.ndarray]:
    """(labels, predictions) of a stratum's labelled samples with `count` pseudo-labels at each
    end of `label_range` appended, each predicted at the mean of the stratum's predictions
    (labelled and unlabelled)."""
    y, prediction = np.asarray(y, float), np.asarray(prediction, float)
    if count <= 0:
        return y, prediction
    every = np.concatenate([prediction, np.asarray(prediction_unlabelled, float)])
    centre = float(every.mean()) if len(every) else 0.0
    low, high = label_range
    return np.concatenate([y, np.full(count, float(low)), np.full(count, float(high))]), np.concatenate([prediction, np.full(2 * count, centre)])


def pseudo_label_interval(labels: np.ndarray, confidence: float = DEFAULT_CONFIDENCE, label_range: tuple[float, float] = (0.0, 1.0)) -> Interval:
    """The mean of bounded labels all drawn (a cell scored on every sample, by generation
    or by likelihood): the labels' mean, and the adjusted Wald interval of Agresti and Coull
    (1998) with `pseudo_count` pseudo-labels at each end, its variance Bessel-corrected and its
    quantile Student's t with (n − 1) degrees of freedom, the interval `stratified_ppi` gives a
    cell with every sample generated. Why not Wilson's: enumerated exactly over every n from 20
    to 100 and every accuracy on a 0.001 grid, Wilson's 95 % interval covers as little as 0.838
    (n = 22, p = 0.008) and 0.922 at p = 0.5 (n = 21); Agresti and Coull's with the normal
    quantile 0.929; this one 0.943 (tests/test_pseudo_labels.py). Fractional labels (partial
    credit) enter with their own spread, which is at most a 0/1 label's of the same mean.
    The bounds are clipped to `label_range` (a score cannot pass 100 %: clipping a bound that
    lies outside changes no coverage). No labels: nan; one label: the mean without an interval."""
    labels = np.asarray(labels, float)
    n = len(labels)
    method = "pseudo-labels (Agresti-Coull, t)"
    if n == 0:
        return Interval(float("nan"), n=0, confidence=confidence, method=method, reason="no samples")
    mean = float(labels.mean())
    if n < 2:
        return Interval(mean, n=n, confidence=confidence, method=method, reason="one sample")
    augmented, _ = with_pseudo_labels(labels, np.zeros(n), np.zeros(0), label_range, pseudo_count(label_range, confidence))
    centre = float(augmented.mean())
    se = float(augmented.std(ddof=1)) / np.sqrt(len(augmented))
    half = quantile(confidence, n - 1) * se
    low, high = label_range
    return Interval(mean, max(centre - half, low), min(centre + half, high), se, n, confidence, method)


def mover_mean(estimates: list[float], lows: list[float], highs: list[float], confidence: float = DEFAULT_CONFIDENCE) -> Interval:
    """The mean of k independent estimates with their intervals, by MOVER,
    the method of variance estimates recovery (Zou and Donner 2008, Statistics in Medicine
    27:1693; for linear functions of proportions, Zou, Huang and Zhang 2009, Statistics in
    Medicine 28:1693): each bound's distance from the mean is the root of the summed squared
    distances of the estimates from their own bounds on that side, over k. Why: it keeps each
    cell's asymmetric interval (a score-type interval near 0 or 1 reaches further toward the
    middle than toward the end), which a pooled proportion over all samples does not: that one
    estimates the sample-weighted mean, not RULER's mean of the task scores, and missed it in
    every replicate where the tasks' sizes and accuracies differ (bench/coverage_grid.py).
    Any interval missing: the mean without one."""
    k = len(estimates)
    if k == 0:
        return Interval(float("nan"), n=0, confidence=confidence, method="MOVER", reason="no estimates")
    e, lo, hi = (np.asarray(v, float) for v in (estimates, lows, highs))
    mean = float(e.mean())
    if np.isnan(lo).any() or np.isnan(hi).any():
        return Interval(mean, n=k, confidence=confidence, method="MOVER", reason="a part without an interval")
    return Interval(mean, mean - float(np.sqrt(((e - lo) ** 2).sum())) / k, mean + float(np.sqrt(((hi - e) ** 2).sum())) / k,
                    n=k, confidence=confidence, method="MOVER")
