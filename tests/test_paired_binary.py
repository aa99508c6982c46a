"""Tango's score interval for a paired difference of proportions, against a published value, an
independent inversion of the score test and an exact enumeration of its coverage."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import minimize_scalar
from scipy.stats import multinomial, norm

from ctxeval.stats.paired_binary import discordant, paired_proportions, tango_interval

Z = float(norm.ppf(0.975))


def test_published_value_of_fagerland_lydersen_laake():
    # Cavo et al. 2012 (complete response before/after consolidation therapy), n = [[59, 6], [16, 80]]:
    # Tango's interval -0.1240 to -0.0054 around -0.0621 (R package contingencytables, its test of
    # Tango_asymptotic_score_CI_paired_2x2, printed to four decimals)
    low, high = tango_interval(6, 16, 161)
    assert (round(low, 4), round(high, 4)) == (-0.1240, -0.0054)


def test_no_discordant_sample_keeps_a_width_of_z2_over_n_plus_z2():
    # with b = c = 0 the score statistic at Δ > 0 is -sqrt(NΔ / (1 - Δ)): the bound solves NΔ / (1 - Δ) = z²
    low, high = tango_interval(0, 0, 9)
    assert high == pytest.approx(Z * Z / (9 + Z * Z), abs=1e-12) and low == pytest.approx(-high, abs=1e-12)
    assert tango_interval(9, 0, 9)[1] == 1.0 and tango_interval(0, 9, 9)[0] == -1.0


def _profile_statistic(delta: float, n12: float, n21: float, n: float) -> float:
    """The score statistic with the constrained maximum-likelihood p21 found numerically: the
    multinomial log-likelihood profiled over q = p21 (p12 = q + Δ, the concordant cells sharing the rest)."""
    concordant = n - n12 - n21
    lo, hi = max(0.0, -delta), (1.0 - delta) / 2.0

    def minus_loglik(q: float) -> float:
        terms = [(n12, q + delta), (n21, q), (concordant, 1.0 - 2.0 * q - delta)]
        return -sum(k * math.log(p) for k, p in terms if k > 0)

    q = minimize_scalar(minus_loglik, bounds=(lo + 1e-12, hi - 1e-12), method="bounded", options={"xatol": 1e-12}).x
    return (n12 - n21 - n * delta) / math.sqrt(n * (2 * q + delta * (1 - delta)))


@pytest.mark.parametrize("n12, n21, n", [(3, 1, 9), (0, 4, 12), (5, 0, 30), (2, 2, 10), (7, 3, 40), (1, 7, 21)])
def test_bounds_equal_an_independent_inversion_of_the_score_test(n12, n21, n):
    grid = np.linspace(-0.999, 0.999, 1999)  # steps of 1e-3
    inside = grid[[abs(_profile_statistic(d, n12, n21, n)) <= Z for d in grid]]
    low, high = tango_interval(n12, n21, n)
    assert low == pytest.approx(inside.min(), abs=1e-3) and high == pytest.approx(inside.max(), abs=1e-3)


def test_exact_coverage_by_enumerating_every_table():
    """Every 2×2 table of n = 20 pairs weighted by its multinomial probability: the share whose
    interval holds the true difference stays near 95 % (Tango's is close to nominal at small n)."""
    n = 20
    for p in ([0.5, 0.1, 0.1, 0.3], [0.6, 0.05, 0.25, 0.1], [0.2, 0.3, 0.1, 0.4]):
        true = p[1] - p[2]
        covered = 0.0
        for n12 in range(n + 1):
            for n21 in range(n + 1 - n12):
                low, high = tango_interval(n12, n21, n)
                if low <= true <= high:
                    covered += sum(multinomial.pmf([n11, n12, n21, n - n12 - n21 - n11], n, p) for n11 in range(n + 1 - n12 - n21))
        assert 0.94 <= covered <= 0.97, (p, covered)


def test_partial_credit_counts_as_a_fraction_of_a_sample_and_equal_scores_are_concordant():
    assert discordant(np.array([1, 0, 1, 0]), np.array([0, 1, 1, 0])) == (1.0, 1.0)
    assert discordant(np.array([0.5, 0.75, 1.0]), np.array([0.5, 0.25, 1.0])) == (0.0, 0.5)
    result = paired_proportions(np.array([1.0, 1.0, 0.5, 0.0]), np.array([1.0, 0.0, 0.25, 0.0]))
    assert result.estimate == pytest.approx(-1.25 / 4) and (result.gained, result.lost) == (0.0, 1.25)
    assert (result.low, result.high) == tango_interval(0.0, 1.25, 4)
    assert result.sd == pytest.approx(np.std([0.0, -1.0, -0.25, 0.0], ddof=1))
    with pytest.raises(ValueError, match="in \\[0, 1\\]"):
        paired_proportions(np.array([2.0]), np.array([1.0]))
