"""A mean from exact labels, a random generated share and predictions for the rest: PPI++.

A RULER cell's samples fall in two strata: the *exact* ones, settled by the likelihood pass at no
cost, and the others, of which a random share is labelled by generation and the rest carry only a
prediction. The unsettled stratum's mean is prediction-powered (PPI++, Angelopoulos, Duchi and
Zrnic 2023, with `ppi_py.ppi_mean_ci`); the cell's mean weighs the strata by their shares, and its
variance is the law of total variance over them, so the interval covers the mean of the population
the samples are drawn from. A cell whose every sample is labelled (settled or generated, as at
`--generate-share 1` or where likelihood settles them all) gets the full-generation interval on
all its labels (`pseudo_labels.pseudo_label_interval`): a settled label is the label generation
gives, so these labels are a plain sample of the population, at any settled share. Otherwise a
cell's handful of generated samples makes a normal interval undercover, so the unsettled
variance is Bessel-corrected, the quantile is Student's t, and below MIN_GENERATED generated
samples there is no interval. A t interval on a mean near 0 or 1 still undercovers (its spread
shrinks exactly when the sample lies near the end), so the unsettled stratum's interval is
computed with pseudo-labels at each end of the label range (stats/pseudo_labels.py: Agresti and
Coull for a score, Bonett and Price for a paired difference), predicted at the stratum's mean
prediction; the point estimate stays PPI++ on the real labels. The cell's interval combines that
stratum's interval, scaled by its share, with the composition's (the settled share and labels,
a t interval on n − 1 df) by MOVER, so the stratum's pull toward the middle moves its own part
only (added to the centre instead, it would shift a cell whose unsettled samples are all wrong
upward, its misses all on one side). Every bound is clipped to the range its quantity can take. The mean
over tasks (`mean_of`) combines the cells' intervals by MOVER (Zou and Donner 2008). The
simulations behind each choice: docs/ruler.md and docs/agreement.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ctxeval.stats.defaults import DEFAULT_CONFIDENCE
from ctxeval.stats.interval import Interval, quantile
from ctxeval.stats.pseudo_labels import mover_mean, pseudo_count, pseudo_label_interval, with_pseudo_labels

MIN_GENERATED = 10  # fewer generated samples in a cell's unsettled stratum: no interval
METHOD = "PPI++ stratified (t)"


@dataclass(frozen=True, kw_only=True)
class PPIEstimate(Interval):
    """A mean with its interval (`n`: the samples), and how its samples were labelled.

    `estimate` is NaN when fewer than two generated samples estimate the unsettled stratum;
    `low`/`high` NaN: no interval (fewer than MIN_GENERATED generated samples where some were needed)."""

    exact: int  # labelled at no cost
    generated: int  # labelled by generation
    predicted: int  # neither: the prediction stands in, corrected by the generated ones
    df: float  # degrees of freedom of the interval's t quantile


def unsettled_mean(y: np.ndarray, yhat: np.ndarray, yhat_unlabelled: np.ndarray, confidence: float = DEFAULT_CONFIDENCE) -> tuple[float, float]:
    """(estimate, standard error) of the unsettled stratum's mean: labels `y` with their
    predictions `yhat` (each made without its own label), predictions `yhat_unlabelled` of the
    samples not generated. PPI++ with ppi_py's power tuning; where every sample was generated,
    the classical mean (there is nothing to predict)."""
    n = len(y)
    if len(yhat_unlabelled) == 0:
        return float(np.mean(y)), float(np.std(y) / math.sqrt(n))
    from ppi_py import ppi_mean_ci  # imported when used: ppi_py loads numba, statsmodels and scikit-learn

    # a constant prediction carries nothing (ppi_py's tuning would divide by its zero variance): the classical mean
    lam = 0.0 if np.ptp(np.concatenate([yhat, yhat_unlabelled])) == 0 else None
    low, high = ppi_mean_ci(np.asarray(y, float), np.asarray(yhat, float), np.asarray(yhat_unlabelled, float), alpha=1 - confidence, lam=lam)
    low, high = float(np.ravel(low)[0]), float(np.ravel(high)[0])
    return (low + high) / 2, (high - low) / (2 * quantile(confidence))


def stratified_ppi(y: np.ndarray, prediction: np.ndarray, exact: np.ndarray, generated: np.ndarray, confidence: float = DEFAULT_CONFIDENCE,
                   label_range: tuple[float, float] = (0.0, 1.0)) -> PPIEstimate:
    """The mean of `y` over all samples: `y` is read where `exact` or `generated` (nan elsewhere),
    `prediction` where neither (and on the generated ones, for the correction); `label_range`
    the smallest and largest value a label can take (the interval's pseudo-labels, and its clip).

    Every sample labelled (settled or generated): the full-generation rule on all the labels
    (`pseudo_label_interval`), whatever the settled share. Else the split: the PPI++ estimate of
    the strata; its interval by MOVER from two independent parts, the unsettled stratum's own
    pseudo-labelled interval (scaled by its share) and the composition's (the settled share and
    the settled labels, a t interval on n − 1 df), so the stratum's pull toward the middle of the
    label range moves only its own part."""
    y, prediction = np.asarray(y, float), np.asarray(prediction, float)
    exact, generated = np.asarray(exact, bool), np.asarray(generated, bool) & ~np.asarray(exact, bool)
    n, n_exact = len(y), int(exact.sum())
    unsettled = ~exact
    n_unsettled, n_generated = int(unsettled.sum()), int(generated.sum())
    if n_generated == n_unsettled:
        return every_labelled(y[exact | generated], n_exact, confidence, label_range)
    df = float(n_generated - 1)
    counts = dict(n=n, confidence=confidence, method=METHOD, exact=n_exact, generated=n_generated, predicted=n_unsettled - n_generated, df=df)
    nan = math.nan
    if n_generated < 2:
        return PPIEstimate(nan, nan, nan, nan, reason="fewer than 2 generated samples", **counts)
    w_exact, w_unsettled = n_exact / n, n_unsettled / n
    mean_exact = float(y[exact].mean()) if n_exact else 0.0
    # each settled label is exact, but the samples are a draw: settled pairs that all agree
    # (a paired difference of 0 on each) do not make the mean's spread zero
    var_exact = floored(float(y[exact].var(ddof=1)) / n_exact if n_exact > 1 else 0.0, y[exact], label_range)
    # the unsettled stratum's interval: PPI++ on the generated labels with pseudo-labels at each
    # end of the label range (stats/pseudo_labels.py: the t interval alone undercovered a
    # stratum's mean near 0 or 1, 0.863 at worst on bench/coverage_grid.py's grid); its point
    # estimate stays PPI++ on the real labels
    predicted = prediction[unsettled & ~generated]
    mean_unsettled = unsettled_mean(y[generated], prediction[generated], predicted, confidence)[0]
    y_aug, f_aug = with_pseudo_labels(y[generated], prediction[generated], predicted, label_range, pseudo_count(label_range, confidence))
    centre_unsettled, se_unsettled = unsettled_mean(y_aug, f_aug, predicted, confidence)
    var_unsettled = se_unsettled**2 * len(y_aug) / (len(y_aug) - 1)
    estimate = w_exact * mean_exact + w_unsettled * mean_unsettled
    # the composition's spread at the strata's own means (law of total variance): a cell whose
    # unsettled samples are all wrong has a gap of 1 between them
    between = w_exact * w_unsettled * (mean_exact - mean_unsettled) ** 2 / n
    composition = quantile(confidence, n - 1) * math.sqrt(w_exact**2 * var_exact + between)
    se = math.sqrt(w_exact**2 * var_exact + w_unsettled**2 * var_unsettled + between)
    if n_generated < MIN_GENERATED:
        return PPIEstimate(estimate, nan, nan, se, reason=no_interval(n_generated), **counts)
    half = quantile(confidence, df) * math.sqrt(var_unsettled)
    low_u, high_u = clip(centre_unsettled - half, label_range), clip(centre_unsettled + half, label_range)
    below = math.hypot(composition, w_unsettled * max(0.0, mean_unsettled - low_u))
    above = math.hypot(composition, w_unsettled * max(0.0, high_u - mean_unsettled))
    return PPIEstimate(estimate, clip(estimate - below, label_range), clip(estimate + above, label_range), se, **counts)


def every_labelled(labels: np.ndarray, n_exact: int, confidence: float, label_range: tuple[float, float]) -> PPIEstimate:
    """A cell whose every sample is labelled (settled by likelihood or generated): its labels'
    mean with the full-generation interval, which covers the population's mean at any settled
    share (a settled label is the label generation gives); one sample: the mean alone."""
    full = pseudo_label_interval(labels, confidence, label_range)
    n = len(labels)
    return PPIEstimate(full.estimate, full.low, full.high, full.se, n=n, confidence=confidence, method=full.method, reason=full.reason,
                       exact=n_exact, generated=n - n_exact, predicted=0, df=float(max(n - 1, 0)))


def clip(value: float, label_range: tuple[float, float]) -> float:
    """A bound kept inside the range its quantity can take."""
    return min(max(value, label_range[0]), label_range[1])


def no_interval(generated: int) -> str:
    """Why a cell with samples to predict has no interval."""
    return f"{generated} generated of its unsettled samples, fewer than the {MIN_GENERATED} an interval needs"


def floored(variance: float, labels: np.ndarray, label_range: tuple[float, float]) -> float:
    """A stratum's variance of the mean, floored where its labels are all equal (none: no floor)
    at that of the labels with one pseudo-label at each end of `label_range` added: the floor
    under a spread the sample shows as zero."""
    labels = np.asarray(labels, float)
    if len(labels) == 0 or np.ptp(labels) != 0:
        return variance
    augmented = np.concatenate([labels, label_range])
    return max(variance, float(augmented.var(ddof=1)) / len(augmented))


def mean_of(estimates: list[PPIEstimate], confidence: float = DEFAULT_CONFIDENCE) -> PPIEstimate:
    """The mean of independent estimates (cells of distinct samples): the mean of their
    estimates, its standard error the root of their summed variances over their number, its
    interval by MOVER from the cells' intervals (`pseudo_labels.mover_mean`)."""
    k = len(estimates)
    df = min((e.df for e in estimates), default=math.nan)  # the smallest cell's, to stay on the safe side
    counts = dict(n=sum(e.n for e in estimates), confidence=confidence, method=METHOD, exact=sum(e.exact for e in estimates),
                  generated=sum(e.generated for e in estimates), predicted=sum(e.predicted for e in estimates), df=df)
    nan = math.nan
    if k == 0 or any(math.isnan(e.low) for e in estimates):
        estimate = sum(e.estimate for e in estimates) / k if k else nan
        return PPIEstimate(estimate, nan, nan, nan, reason="a task without an interval", **counts)
    # MOVER over the cells' own (asymmetric, pseudo-labelled) intervals: stats/pseudo_labels.mover_mean
    mean = mover_mean([e.estimate for e in estimates], [e.low for e in estimates], [e.high for e in estimates], confidence)
    se = math.sqrt(sum(e.se**2 for e in estimates)) / k
    return PPIEstimate(mean.estimate, mean.low, mean.high, se, **counts)
