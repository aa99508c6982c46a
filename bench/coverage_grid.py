"""Coverage of every interval `ruler` prints for a task score or a paired task difference, on a
grid of the populations a RULER cell can be; prints per estimator the minimum coverage given an
interval, the share of replicates (and settings) left without one, what the refused replicates'
intervals would have covered, and the median width against the estimator it replaced (left out
with --no-before, a third faster).

Populations (every setting drawn `--replicates` times, vectorised over the replicates):

- a latent x ~ N(0, 1) per sample and P(answer right | x) = Φ(a + 1.5 x), a chosen so the
  population's accuracy is exactly p (E Φ(a + b x) = Φ(a / √(1 + b²))); binary labels (one
  answer) or fractional ones (4 answers, each right with that probability: scores in
  {0, 1/4, ..., 1}, the multi-answer tasks' partial credit);
- settled samples (`exact`): the likelihood pass settles only samples generation gets fully
  right (greedy decoding produces the reference), each with probability min(1, s / p), so the
  settled share is s where p allows it (0.7 of a 0.3-accurate cell cannot be settled), and
  s = 1 settles every right answer (the unsettled samples all wrong; a cell drawn all right is
  settled whole);
- generated: each unsettled sample with probability P (`--generate-share`), or the N samples
  with the smallest uniforms (`--generate N`);
- the prediction of an unsettled sample: uninformative (uniform, independent of everything),
  informative (the calibrated Φ(a + 1.5 x)), miscalibrated (that plus 0.3, clipped to [0, 1])
  or inverted (1 − it: anti-correlated with the label);
- paired differences: a reference and a variant on the same samples (the same x, and with
  probability ρ the same uniform deciding each answer, so pairs agree more than chance), each
  side settled and predicted as above and generated on the same draw, the difference formed
  as `ruler/ppi._difference` forms it (exact where both sides are, labelled where both
  labels are known, else the difference of predictions with an exact side's label standing in).

The PPI estimators are computed by a vectorised mirror of `ctxeval.stats.ppi.stratified_ppi`
(`ppi_cells` below; ppi_py's PPI++ mean in closed form), which tests/test_coverage_grid.py
checks equal to the production function, ppi_py included, to 1e-9 on random inputs. Wilson
and Tango are the production functions themselves, called once per distinct count.

    python bench/coverage_grid.py [--replicates 2000] [--quick] [--seed 0] [--only cells|differences|means] [--no-before] [--worst N]
"""

from __future__ import annotations

import argparse
import itertools
import math
import platform
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone

import numpy as np
from scipy import stats

from ctxeval.stats.paired_binary import tango_interval

SLOPE = 1.5  # of the latent in the probit of a right answer
ANSWERS = 4  # of a fractional label
MIN_GENERATED = 10
BETWEEN_AT_POINT = True  # the strata split's spread from the PPI++ estimate, not the pseudo-labelled one


# ---------------------------------------------------------------- populations

@dataclass(frozen=True)
class Side:
    """One model's labels, settled flags and predictions over (replicates, n) samples."""

    y: np.ndarray
    exact: np.ndarray
    f: np.ndarray


def intercept(p: float) -> float:
    return float(stats.norm.ppf(p) * math.sqrt(1 + SLOPE**2))


def draw_side(rng: np.random.Generator, x: np.ndarray, u: np.ndarray, p: float, labels: str, settled: float, prediction: str) -> Side:
    """Labels of accuracy p from the latent x and the answers' uniforms u (R, n, answers)."""
    prob = stats.norm.cdf(intercept(p) + SLOPE * x)
    right = u < prob[..., None]
    y = right[..., 0].astype(float) if labels == "binary" else right.mean(axis=-1)
    exact = (y == 1.0) & (rng.random(x.shape) < min(1.0, settled / p))
    if prediction == "uninformative":
        f = rng.random(x.shape)
    elif prediction == "informative":
        f = prob
    elif prediction == "miscalibrated":
        f = np.clip(prob + 0.3, 0.0, 1.0)
    else:  # inverted
        f = 1.0 - prob
    return Side(y, exact, f)


def answer_uniforms(rng: np.random.Generator, shape: tuple[int, int], labels: str) -> np.ndarray:
    return rng.random((*shape, 1 if labels == "binary" else ANSWERS))


def generation_draw(rng: np.random.Generator, shape: tuple[int, int], share: float | None, count: int | None) -> np.ndarray:
    """Which samples are drawn for generation: a share (each independently) or a count (the smallest uniforms)."""
    uniforms = rng.random(shape)
    if count is None:
        return uniforms < share
    order = np.argsort(uniforms, axis=1)
    drawn = np.zeros(shape, bool)
    np.put_along_axis(drawn, order[:, :count], True, axis=1)
    return drawn


# ---------------------------------------------------------------- estimators (vectorised mirrors)

def _masked_mean(a: np.ndarray, mask: np.ndarray, count: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(mask, a, 0.0).sum(axis=1) / count


def _masked_var(a: np.ndarray, mask: np.ndarray, count: np.ndarray, mean: np.ndarray, ddof: int) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(mask, (a - mean[:, None]) ** 2, 0.0).sum(axis=1) / (count - ddof)


def _masked_ptp_zero(a: np.ndarray, mask: np.ndarray) -> np.ndarray:
    hi = np.where(mask, a, -np.inf).max(axis=1)
    lo = np.where(mask, a, np.inf).min(axis=1)
    return hi == lo


def _floor(variance: np.ndarray, labels: np.ndarray, mask: np.ndarray, count: np.ndarray, label_range: tuple[float, float]) -> np.ndarray:
    """`stats.ppi.floored`, per row: where a row's labels are all equal, the variance of its
    labels with one pseudo-label at each end of the range, over count + 2."""
    lo, hi = label_range
    equal = (count > 0) & _masked_ptp_zero(labels, mask)
    value = np.where(mask, labels, 0.0).sum(axis=1) / np.maximum(count, 1)  # the common value where equal
    total = count + 2
    mean = (count * value + lo + hi) / total
    augmented = (count * (value - mean) ** 2 + (lo - mean) ** 2 + (hi - mean) ** 2) / (total - 1) / total
    return np.where(equal, np.maximum(variance, augmented), variance)


def ppi_cells(y: np.ndarray, f: np.ndarray, exact: np.ndarray, generated: np.ndarray, confidence: float = 0.95,
              label_range: tuple[float, float] = (0.0, 1.0), pseudo: float = 0.0, point: np.ndarray | None = None,
              rule: str = "production") -> dict[str, np.ndarray]:
    """`stratified_ppi` per row of (replicates, n) arrays: estimate, low, high, se, generated
    (nan low/high where it gives no interval), and `low_any`/`high_any`, the interval the rule
    would give where the refusal (fewer than MIN_GENERATED generated) withholds it. `pseudo` > 0:
    the generated stratum gets `pseudo` pseudo-labels at each end of `label_range`, predicted at
    the stratum's mean prediction; `rule` "production" (every sample labelled: the
    full-generation rule on all labels; else MOVER of the stratum's interval and the
    composition's, clipped to the range) or "additive" (the estimator it replaced: the t
    interval around the pseudo-labelled centre of both strata, no clip). `pseudo` 0: the
    estimator before the pseudo-labels, with the floor instead."""
    exact = exact.astype(bool)
    generated = generated.astype(bool) & ~exact
    unsettled = ~exact
    predicted = unsettled & ~generated
    n = y.shape[1]
    n_exact = exact.sum(axis=1).astype(float)
    n_uns = unsettled.sum(axis=1).astype(float)
    m = generated.sum(axis=1).astype(float)
    big_n = predicted.sum(axis=1).astype(float)
    w_e, w_u = n_exact / n, n_uns / n

    mean_e = np.where(n_exact > 0, _masked_mean(y, exact, n_exact), 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        var_e = np.where(n_exact > 1, _masked_var(y, exact, n_exact, mean_e, 1) / n_exact, 0.0)
    var_e = _floor(var_e, y, exact, n_exact, label_range)

    # the unsettled stratum: PPI++ (ppi_py's power tuning, closed form), pseudo-labels appended
    lo, hi = label_range
    f_all_mean = _masked_mean(f, unsettled, n_uns)
    m_aug = m + 2 * pseudo
    sum_y = np.where(generated, y, 0.0).sum(axis=1) + pseudo * (lo + hi)
    sum_f = np.where(generated, f, 0.0).sum(axis=1) + 2 * pseudo * f_all_mean
    with np.errstate(invalid="ignore", divide="ignore"):
        y_bar, f_bar = sum_y / m_aug, sum_f / m_aug
        cov = (np.where(generated, (y - y_bar[:, None]) * (f - f_bar[:, None]), 0.0).sum(axis=1)
               + pseudo * ((lo - y_bar) + (hi - y_bar)) * (f_all_mean - f_bar)) / m_aug
        # var of predictions over labelled (pseudo included) and unlabelled, ddof 1
        f_pool_n = m_aug + big_n
        f_pool_mean = (sum_f + np.where(predicted, f, 0.0).sum(axis=1)) / f_pool_n
        f_pool_var = (np.where(unsettled & (generated | predicted), (f - f_pool_mean[:, None]) ** 2, 0.0).sum(axis=1)
                      + 2 * pseudo * (f_all_mean - f_pool_mean) ** 2) / (f_pool_n - 1)
        constant = _masked_ptp_zero(f, unsettled)
        lam = np.where(constant, 0.0, np.clip(cov / ((1 + m_aug / big_n) * f_pool_var), 0.0, 1.0))
        lam = np.where(big_n > 0, lam, 0.0)
        f_u_mean = _masked_mean(f, predicted, big_n)
        rect = y - lam[:, None] * f
        rect_mean = (np.where(generated, rect, 0.0).sum(axis=1) + pseudo * ((lo - lam * f_all_mean) + (hi - lam * f_all_mean))) / m_aug
        rect_var0 = (np.where(generated, (rect - rect_mean[:, None]) ** 2, 0.0).sum(axis=1)
                     + pseudo * ((lo - lam * f_all_mean - rect_mean) ** 2 + (hi - lam * f_all_mean - rect_mean) ** 2)) / m_aug
        f_u_var0 = _masked_var(f, predicted, big_n, f_u_mean, 0)
        est_u = np.where(big_n > 0, lam * f_u_mean + rect_mean, rect_mean)
        se2_u = np.where(big_n > 0, lam**2 * f_u_var0 / big_n + rect_var0 / m_aug, rect_var0 / m_aug)
        var_u = se2_u * m_aug / (m_aug - 1)
    if pseudo == 0:
        var_u = _floor(var_u, y, generated, m, label_range)
    est_u = np.where(n_uns > 0, est_u, 0.0)
    var_u = np.where(n_uns > 0, var_u, 0.0)
    # the point estimate: PPI++ without the pseudo-labels (they shape the interval only)
    point_u = est_u if pseudo == 0 else point if point is not None else ppi_cells(y, f, exact, generated, confidence, label_range, 0.0)["unsettled"]
    estimate = w_e * mean_e + w_u * point_u
    between = w_e * w_u * (mean_e - (point_u if BETWEEN_AT_POINT else est_u)) ** 2 / n
    se = np.sqrt(w_e**2 * var_e + w_u**2 * var_u + between)
    nan = np.nan
    if pseudo == 0 or rule == "additive":
        centre = w_e * mean_e + w_u * est_u
        df = np.where(n_uns > 0, m - 1, n - 1)
        no_estimate = (n_uns > 0) & (m < 2)
        refused = (n_uns > 0) & (m < MIN_GENERATED)
        with np.errstate(invalid="ignore"):
            half = stats.t.ppf(0.5 + confidence / 2, np.maximum(df, 1)) * se
        low_any, high_any = centre - half, centre + half
        impossible = no_estimate | (n < 2)
    else:
        t = lambda df: stats.t.ppf(0.5 + confidence / 2, np.maximum(df, 1))  # noqa: E731
        with np.errstate(invalid="ignore"):
            composition = t(n - 1) * np.sqrt(w_e**2 * var_e + between)
            half_u = t(m - 1) * np.sqrt(var_u)
        low_u, high_u = np.clip(est_u - half_u, lo, hi), np.clip(est_u + half_u, lo, hi)
        low_any = np.clip(estimate - np.hypot(composition, w_u * np.maximum(0.0, point_u - low_u)), lo, hi)
        high_any = np.clip(estimate + np.hypot(composition, w_u * np.maximum(0.0, high_u - point_u)), lo, hi)
        # every sample labelled: the full-generation rule on all labels
        every = big_n == 0
        full_low, full_high = adjusted_cells(y, confidence, pseudo, label_range)
        full_est = y.mean(axis=1)
        estimate = np.where(every, full_est, estimate)
        low_any, high_any = np.where(every, full_low, low_any), np.where(every, full_high, high_any)
        full_centre = (y.sum(axis=1) + pseudo * (lo + hi)) / (n + 2 * pseudo)
        full_se = np.sqrt((((y - full_centre[:, None]) ** 2).sum(axis=1) + pseudo * ((lo - full_centre) ** 2 + (hi - full_centre) ** 2))
                          / (n + 2 * pseudo - 1) / (n + 2 * pseudo))
        se = np.where(every, full_se, se)
        no_estimate = ~every & (m < 2)
        refused = ~every & (m < MIN_GENERATED)
        impossible = no_estimate | (n < 2)
    no_interval = refused | impossible
    return {"estimate": np.where(no_estimate, nan, estimate), "low": np.where(no_interval, nan, low_any),
            "high": np.where(no_interval, nan, high_any), "se": np.where(no_estimate, nan, se), "generated": m, "unsettled": point_u,
            "low_any": np.where(impossible, nan, low_any), "high_any": np.where(impossible, nan, high_any)}


def wilson(successes: float, n: int, confidence: float) -> tuple[float, float]:
    """Wilson's score interval of a proportion (partial credit as a fraction of a success), from statsmodels."""
    from statsmodels.stats.proportion import proportion_confint

    low, high = proportion_confint(successes, n, alpha=1 - confidence, method="wilson")
    return float(low), float(high)


def wilson_cells(y: np.ndarray, confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """The former per-cell interval, Wilson's (statsmodels' `proportion_confint`), on each row's sum of scores."""
    n = y.shape[1]
    sums = np.round(y.sum(axis=1) * ANSWERS) / ANSWERS
    values, inverse = np.unique(sums, return_inverse=True)
    bounds = np.array([wilson(float(s), n, confidence) for s in values])
    return bounds[inverse, 0], bounds[inverse, 1]


def adjusted_cells(y: np.ndarray, confidence: float = 0.95, pseudo: float = 2.0, label_range: tuple[float, float] = (0.0, 1.0)) -> tuple[np.ndarray, np.ndarray]:
    """`stats.pseudo_labels.pseudo_label_interval` per row: the mean of the labels with `pseudo`
    pseudo-labels at each end, Bessel-corrected, Student's t with n − 1 df, clipped to the range."""
    n = y.shape[1]
    lo, hi = label_range
    total = n + 2 * pseudo
    centre = (y.sum(axis=1) + pseudo * (lo + hi)) / total
    var = (((y - centre[:, None]) ** 2).sum(axis=1) + pseudo * ((lo - centre) ** 2 + (hi - centre) ** 2)) / (total - 1)
    half = stats.t.ppf(0.5 + confidence / 2, max(n - 1, 1)) * np.sqrt(var / total)
    return np.clip(centre - half, lo, hi), np.clip(centre + half, lo, hi)


def tango_cells(y_r: np.ndarray, y_v: np.ndarray, confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """The production `tango_interval` on each row's discordant sums (partial credit as fractions)."""
    n = y_r.shape[1]
    d = y_v - y_r
    gained = np.round(np.where(d > 0, d, 0).sum(axis=1) * ANSWERS) / ANSWERS
    lost = np.round(np.where(d < 0, -d, 0).sum(axis=1) * ANSWERS) / ANSWERS
    pairs = np.stack([gained, lost], axis=1)
    values, inverse = np.unique(pairs, axis=0, return_inverse=True)
    bounds = np.array([tango_interval(float(g), float(c), n, confidence) for g, c in values])
    inverse = inverse.ravel()
    return bounds[inverse, 0], bounds[inverse, 1]


def mover_mean(estimates: np.ndarray, lows: np.ndarray, highs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """MOVER (Zou and Donner 2008) for the mean of k independent estimates, per row of (R, k) arrays."""
    k = estimates.shape[1]
    est = estimates.mean(axis=1)
    low = est - np.sqrt(((estimates - lows) ** 2).sum(axis=1)) / k
    high = est + np.sqrt(((highs - estimates) ** 2).sum(axis=1)) / k
    return est, low, high


# ---------------------------------------------------------------- the grid

@dataclass
class Tally:
    """Per estimator: each setting's coverage given an interval, its share refused (no interval),
    what the refused replicates' intervals would have covered, and the median width ratio
    against the replaced estimator."""

    rows: list

    def add(self, estimator: str, setting: dict, truth: float, low: np.ndarray, high: np.ndarray, reference_width: np.ndarray | None = None,
            low_any: np.ndarray | None = None, high_any: np.ndarray | None = None) -> None:
        given = ~np.isnan(low)
        covered = (low[given] <= truth + 1e-12) & (truth - 1e-12 <= high[given])
        ratio = math.nan
        if reference_width is not None:
            both = given & ~np.isnan(reference_width) & (reference_width > 0)
            if both.any():
                ratio = float(np.median((high - low)[both] / reference_width[both]))
        refused = ~given & (~np.isnan(low_any) if low_any is not None else False)
        would = math.nan
        if low_any is not None and refused.any():
            would = float(((low_any[refused] <= truth + 1e-12) & (truth - 1e-12 <= high_any[refused])).mean())
        self.rows.append({"estimator": estimator, **setting, "intervals": int(given.sum()), "replicates": len(low),
                          "coverage": float(covered.mean()) if given.any() else math.nan, "ratio": ratio,
                          "refused": int(np.sum(refused)), "refused_coverage": would})


def shares_of(quick: bool) -> list:
    return [0.3, 1.0] if quick else [0.1, 0.2, 0.3, 0.5, 1.0]


SETTLED = [0.0, 0.3, 0.7, 1.0]  # settled share; 1.0: every right answer settled (so every sample, in a cell all right)
ACCURACIES = [0.05, 0.3, 0.5, 0.8, 0.9, 0.95, 0.99]
NS = [20, 30, 60, 100, 300]


def cell_grid(tally: Tally, replicates: int, rng: np.random.Generator, quick: bool, pseudo: float, confidence: float = 0.95,
              before_too: bool = True) -> None:
    ns = [20, 60] if quick else NS
    settled = [0.0, 0.7, 1.0] if quick else SETTLED
    accuracies = [0.05, 0.5, 0.8, 0.9, 0.99] if quick else ACCURACIES
    predictions = ["uninformative", "informative"] if quick else ["uninformative", "informative", "miscalibrated", "inverted"]
    draws = [(s, None) for s in shares_of(quick)] + ([] if quick else [(None, 10), (None, 20)])
    for n, p, labels in itertools.product(ns, accuracies, ["binary", "fractional"]):
        x = rng.normal(size=(replicates, n))
        u = answer_uniforms(rng, (replicates, n), labels)
        for s, prediction in itertools.product(settled, predictions):
            side = draw_side(rng, x, u, p, labels, s, prediction)
            for share, count in draws:
                if count is not None and count > n:
                    continue
                generated = generation_draw(rng, (replicates, n), share, count) & ~side.exact
                setting = {"n": n, "p": p, "labels": labels, "settled": s, "prediction": prediction,
                           "generate": f"share {share}" if count is None else f"count {count}"}
                point = ppi_cells(side.y, side.f, side.exact, generated, confidence)["unsettled"]
                after = ppi_cells(side.y, side.f, side.exact, generated, confidence, pseudo=pseudo, point=point)
                width = None
                if before_too:
                    before = ppi_cells(side.y, side.f, side.exact, generated, confidence, pseudo=pseudo, point=point, rule="additive")
                    tally.add("cell, PPI++ additive pseudo-labels (before)", setting, p, before["low"], before["high"], None, before["low_any"], before["high_any"])
                    width = before["high"] - before["low"]
                tally.add("cell, PPI++ (after)", setting, p, after["low"], after["high"], width, after["low_any"], after["high_any"])
        # every sample scored by generation (or likelihood): independent of settling and predictions
        low, high = wilson_cells(side.y, confidence)
        tally.add("cell, Wilson (before)", {"n": n, "p": p, "labels": labels}, p, low, high)
        low_a, high_a = adjusted_cells(side.y, confidence, pseudo)
        tally.add("cell, full generation pseudo-labels t (after)", {"n": n, "p": p, "labels": labels}, p, low_a, high_a, high - low)


PAIRS = [(0.95, 0.95), (0.8, 0.8), (0.5, 0.5), (0.05, 0.05), (0.99, 0.99), (0.95, 0.5), (0.8, 0.3), (0.5, 0.05), (0.95, 0.8), (0.3, 0.8),
         (0.99, 0.9), (0.9, 0.99)]
DIFFERENCE_PAIRS = [(0.95, 0.95), (0.5, 0.5), (0.05, 0.05), (0.99, 0.99), (0.95, 0.5), (0.99, 0.9), (0.3, 0.8)]


def difference_grid(tally: Tally, replicates: int, rng: np.random.Generator, quick: bool, pseudo: float, confidence: float = 0.95,
              before_too: bool = True) -> None:
    # the full grid is a third of the cells' in n, settled shares and predictions: two sides a setting cost twice as much
    ns = [20, 60] if quick else [20, 60, 300]
    settled = [0.0, 0.7, 1.0]
    pairs = PAIRS[:5] if quick else DIFFERENCE_PAIRS
    predictions = ["uninformative", "informative"] if quick else ["uninformative"]
    for n, (p_r, p_v), labels, rho in itertools.product(ns, pairs, ["binary", "fractional"], [0.0, 0.8]):
        x = rng.normal(size=(replicates, n))
        u_r = answer_uniforms(rng, (replicates, n), labels)
        same = rng.random((replicates, n, 1)) < rho
        u_v = np.where(same, u_r, answer_uniforms(rng, (replicates, n), labels))
        truth = p_v - p_r
        for s, prediction in itertools.product(settled, predictions):
            ref = draw_side(rng, x, u_r, p_r, labels, s, prediction)
            var = draw_side(rng, x, u_v, p_v, labels, s, prediction)
            for share in shares_of(quick) if quick else [0.1, 0.3, 1.0]:
                drawn = rng.random((replicates, n)) < share
                exact = ref.exact & var.exact
                known = (ref.exact | drawn) & (var.exact | drawn) & ~exact
                f = np.where(var.exact, var.y, var.f) - np.where(ref.exact, ref.y, ref.f)
                y = var.y - ref.y
                setting = {"n": n, "p": f"{p_r}->{p_v}", "labels": labels, "rho": rho, "settled": s, "prediction": prediction, "generate": f"share {share}"}
                point = ppi_cells(y, f, exact, known, confidence, (-1.0, 1.0))["unsettled"]
                after = ppi_cells(y, f, exact, known, confidence, (-1.0, 1.0), pseudo=pseudo, point=point)
                width = None
                if before_too:
                    before = ppi_cells(y, f, exact, known, confidence, (-1.0, 1.0), pseudo=pseudo, point=point, rule="additive")
                    tally.add("difference, PPI++ additive pseudo-labels (before)", setting, truth, before["low"], before["high"], None,
                              before["low_any"], before["high_any"])
                    width = before["high"] - before["low"]
                tally.add("difference, PPI++ (after)", setting, truth, after["low"], after["high"], width, after["low_any"], after["high_any"])
        low, high = tango_cells(ref.y, var.y, confidence)
        tally.add("difference, Tango", {"n": n, "p": f"{p_r}->{p_v}", "labels": labels, "rho": rho}, truth, low, high)


TASK_SETS = [((0.95, 0.5, 0.05), (20, 20, 20)), ((0.95, 0.5, 0.05), (20, 60, 100)), ((0.05, 0.5, 0.95), (20, 60, 100)),
             ((0.95, 0.95, 0.8), (100, 20, 20)), ((0.05, 0.05, 0.3), (20, 20, 100)), ((0.8, 0.8, 0.8), (60, 60, 60)),
             ((0.99, 0.5, 0.3), (300, 20, 60)), ((0.99, 0.9, 0.95), (20, 300, 100))]


def mean_grid(tally: Tally, replicates: int, rng: np.random.Generator, quick: bool, pseudo: float, confidence: float = 0.95,
              before_too: bool = True) -> None:
    """The mean over tasks: `mean_of` over the tasks' PPI cells, and `mean_table`'s interval over
    the tasks' Wilson cells (RULER's mean of the task scores, of tasks of equal or unequal sizes)."""
    sets = TASK_SETS[:3] if quick else TASK_SETS
    for (accuracies, sizes), labels in itertools.product(sets, ["binary", "fractional"]):
        truth = float(np.mean(accuracies))
        ys = []
        for p, n in zip(accuracies, sizes):
            x = rng.normal(size=(replicates, n))
            ys.append((x, draw_side(rng, x, answer_uniforms(rng, (replicates, n), labels), p, labels, 0.0, "uninformative").y))
        # full generation: the Wilson cells and their mean
        cells = [adjusted_cells(y, confidence, pseudo) for _, y in ys]
        means = np.stack([y.mean(axis=1) for _, y in ys], axis=1)
        lows, highs = np.stack([c[0] for c in cells], axis=1), np.stack([c[1] for c in cells], axis=1)
        total = sum(sizes)
        pooled = np.round(sum(y.sum(axis=1) for _, y in ys) * ANSWERS) / ANSWERS
        values, inverse = np.unique(pooled, return_inverse=True)
        bounds = np.array([wilson(float(v), total, confidence) for v in values])
        setting = {"p": "/".join(map(str, accuracies)), "n": "/".join(map(str, sizes)), "labels": labels}
        tally.add("mean over tasks, Wilson pooled (before)", setting, truth, bounds[inverse, 0], bounds[inverse, 1])
        _, low, high = mover_mean(means, lows, highs)
        tally.add("mean over tasks, MOVER of the cells (after)", setting, truth, low, high, bounds[inverse, 1] - bounds[inverse, 0])
        shares = [0.5, 1.0] if quick else [0.3, 0.5, 1.0]
        for s, prediction, share in itertools.product([0.0, 0.7, 1.0], ["uninformative", "informative"], shares):
            before, after = [], []
            for (x, _), p, n in zip(ys, accuracies, sizes):
                side = draw_side(rng, x, answer_uniforms(rng, (replicates, n), labels), p, labels, s, prediction)
                generated = (rng.random((replicates, n)) < share) & ~side.exact
                point = ppi_cells(side.y, side.f, side.exact, generated, confidence)["unsettled"]
                if before_too:
                    before.append(ppi_cells(side.y, side.f, side.exact, generated, confidence, pseudo=pseudo, point=point, rule="additive"))
                after.append(ppi_cells(side.y, side.f, side.exact, generated, confidence, pseudo=pseudo, point=point))
            stack = lambda cells, key: np.stack([c[key] for c in cells], axis=1)  # noqa: E731
            setting_ppi = {**setting, "settled": s, "prediction": prediction, "generate": f"share {share}"}
            width = None
            if before_too:
                _, low_b, high_b = mover_mean(stack(before, "estimate"), stack(before, "low"), stack(before, "high"))
                _, any_low_b, any_high_b = mover_mean(stack(before, "estimate"), stack(before, "low_any"), stack(before, "high_any"))
                tally.add("mean over tasks, PPI++ MOVER of additive cells (before)", setting_ppi, truth, low_b, high_b, None, any_low_b, any_high_b)
                width = high_b - low_b
            e = stack(after, "estimate")
            _, low_a, high_a = mover_mean(e, stack(after, "low"), stack(after, "high"))
            _, any_low_a, any_high_a = mover_mean(e, stack(after, "low_any"), stack(after, "high_any"))
            tally.add("mean over tasks, PPI++ MOVER (after)", setting_ppi, truth, low_a, high_a, width, any_low_a, any_high_a)


def summary(tally: Tally, min_intervals: int) -> list[dict]:
    out = []
    for estimator in dict.fromkeys(r["estimator"] for r in tally.rows):
        rows = [r for r in tally.rows if r["estimator"] == estimator]
        counted = [r for r in rows if r["intervals"] >= min_intervals]
        worst = min(counted, key=lambda r: r["coverage"]) if counted else None
        ratios = [r["ratio"] for r in rows if not math.isnan(r["ratio"])]
        replicates = sum(r["replicates"] for r in rows)
        out.append({"estimator": estimator, "settings": len(rows), "counted": len(counted),
                    "min": worst["coverage"] if worst else math.nan, "worst": worst,
                    "below_093": sum(r["coverage"] < 0.93 for r in counted),
                    "mean": float(np.mean([r["coverage"] for r in counted])) if counted else math.nan,
                    "no_interval": 1 - sum(r["intervals"] for r in rows) / replicates,
                    "settings_without": sum(r["intervals"] == 0 for r in rows),
                    "ratio_median": float(np.median(ratios)) if ratios else math.nan,
                    "ratio_max": float(np.max(ratios)) if ratios else math.nan,
                    **refused_summary(rows, min_intervals)})
    return out


def refused_summary(rows: list[dict], min_refused: int) -> dict:
    """What the refused replicates' intervals would have covered: over all of them, and the
    least over the settings with at least `min_refused` refused."""
    refused = sum(r.get("refused", 0) for r in rows)
    covered = sum(r["refused"] * r["refused_coverage"] for r in rows if r.get("refused", 0))
    counted = [r["refused_coverage"] for r in rows if r.get("refused", 0) >= min_refused]
    return {"refused": refused, "refused_coverage": covered / refused if refused else math.nan,
            "refused_min": min(counted) if counted else math.nan}


def machine() -> str:
    try:
        model = next(line.split(":", 1)[1].strip() for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines()
                     if line.startswith("Model name"))
    except (OSError, StopIteration):
        model = platform.processor() or "unknown CPU"
    return f"{model}, {subprocess.run(['nproc'], capture_output=True, text=True).stdout.strip()} cores, Python {platform.python_version()}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="a slice of the grid (the test's)")
    parser.add_argument("--confidence", type=float, default=0.95, help="e.g. 0.9875: --until's per-look confidence at 4 rounds")
    parser.add_argument("--min-intervals", type=int, default=200, help="settings with fewer intervals are not counted in the minimum")
    parser.add_argument("--pseudo", type=float, default=None, help="pseudo-labels per end (default: the production rule)")
    parser.add_argument("--only", choices=["cells", "differences", "means"], default=None)
    parser.add_argument("--worst", type=int, default=0, help="also list the N worst settings per estimator")
    parser.add_argument("--no-before", action="store_true", help="leave out the estimators the current ones replaced (a third faster)")
    args = parser.parse_args(argv)
    from ctxeval.stats.pseudo_labels import pseudo_count

    rng = np.random.default_rng(args.seed)
    tally = Tally([])
    started = time.perf_counter()
    score_pseudo = pseudo_count((0.0, 1.0), args.confidence) if args.pseudo is None else args.pseudo
    diff_pseudo = pseudo_count((-1.0, 1.0), args.confidence) if args.pseudo is None else args.pseudo
    if args.only in (None, "cells"):
        cell_grid(tally, args.replicates, rng, args.quick, score_pseudo, args.confidence, not args.no_before)
    if args.only in (None, "differences"):
        difference_grid(tally, args.replicates, rng, args.quick, diff_pseudo, args.confidence, not args.no_before)
    if args.only in (None, "means"):
        mean_grid(tally, args.replicates, rng, args.quick, score_pseudo, args.confidence, not args.no_before)
    seconds = time.perf_counter() - started
    print(f"# coverage grid: {args.replicates} replicates per setting, confidence {args.confidence}, seed {args.seed}"
          f"{' (quick slice)' if args.quick else ''}; {machine()}; {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; {seconds:.0f} s")
    print(f"# minimum over the settings with at least {args.min_intervals} intervals; width: median over settings of the"
          " per-setting median width ratio against the 'before' estimator (max in brackets)\n")
    print("| estimator | settings | min coverage | settings below 0.93 | mean coverage | replicates without interval | settings without any"
          " | refused draws would have covered (least) | width ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for s in summary(tally, args.min_intervals):
        ratio = "—" if math.isnan(s["ratio_median"]) else f"{s['ratio_median']:.2f} ({s['ratio_max']:.2f})"
        would = "—" if math.isnan(s["refused_coverage"]) else f"{s['refused_coverage']:.3f} ({s['refused_min']:.3f})"
        print(f"| {s['estimator']} | {s['counted']} of {s['settings']} | {s['min']:.3f} | {s['below_093']} | {s['mean']:.3f} | "
              f"{100 * s['no_interval']:.1f} % | {s['settings_without']} | {would} | {ratio} |")
    print()
    for s in summary(tally, args.min_intervals):
        w = s["worst"]
        if w:
            print(f"worst for {s['estimator']}: " + ", ".join(f"{k}={v}" for k, v in w.items() if k not in ("estimator", "ratio")))
    if args.worst:
        for estimator in dict.fromkeys(r["estimator"] for r in tally.rows):
            rows = sorted((r for r in tally.rows if r["estimator"] == estimator and r["intervals"] >= args.min_intervals), key=lambda r: r["coverage"])
            print(f"\n{estimator}:")
            for r in rows[: args.worst]:
                print("   ", ", ".join(f"{k}={v}" for k, v in r.items() if k != "estimator"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
