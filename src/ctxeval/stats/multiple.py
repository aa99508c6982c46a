"""Many pairwise comparisons read together: Holm's adjustment, the ranks they allow, and the
groups of variants they cannot tell apart.

Why Holm: with k variants there are k(k − 1)/2 pairs, and reading each pair's test at 5 % lets
some pair look different by chance in most runs of several variants. Holm's step-down procedure
(Holm 1979, Scandinavian Journal of Statistics 6:65) keeps the chance of any false "different"
at most α whatever the tests' dependence, as Bonferroni does, and rejects at least as often.

Ranks: if every "different" decision of the family is right (probability ≥ 1 − α), a variant's
true rank lies between 1 + the variants decided better than it and k − the variants decided
worse; these rank intervals then hold for every variant at once. This is the construction of
simultaneous rank confidence sets from simultaneous pairwise tests (Mogstad, Romano, Shaikh and
Wilhelm 2024, Review of Economic Studies 91:476), with Holm in place of their bootstrap
step-down (valid, a little wider).

Groups: "cannot be told apart" is not transitive (a may tie b and b tie c while a beats c), so
the groups are a compact letter display (Piepho 2004, Journal of Computational and Graphical
Statistics 13:456): one letter per maximal set of variants no two of which are decided
different; two variants share a letter exactly when they are not told apart, and a variant may
carry several letters.
"""

from __future__ import annotations

import string
from collections.abc import Sequence

import numpy as np


def holm(pvalues: Sequence[float]) -> np.ndarray:
    """Holm-adjusted p-values, in the input's order: the i-th smallest p times (m − i + 1),
    made non-decreasing, capped at 1; a pair is "different" at family level α where it is ≤ α."""
    p = np.asarray(pvalues, dtype=np.float64)
    if p.ndim != 1 or np.isnan(p).any() or (p < 0).any() or (p > 1).any():
        raise ValueError("p-values must be a 1-D sequence of numbers in [0, 1]")
    m = len(p)
    order = np.argsort(p, kind="stable")
    adjusted = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * p[order]))
    out = np.empty(m)
    out[order] = adjusted
    return out


def rank_intervals(better: np.ndarray) -> list[tuple[int, int]]:
    """Per variant, (lowest, highest) rank it can hold (1 the best): `better[i, j]` is True where
    variant i is decided better than variant j."""
    better = np.asarray(better, dtype=bool)
    k = len(better)
    return [(1 + int(better[:, j].sum()), k - int(better[j, :].sum())) for j in range(k)]


def letter_groups(apart: np.ndarray) -> list[str]:
    """Per variant (in the order given, best first), its letters: one per maximal group of
    variants no two of which are `apart` (a symmetric matrix of "decided different"); letters
    follow the groups' best member, then their size."""
    apart = np.asarray(apart, dtype=bool)
    k = len(apart)
    tied = [{j for j in range(k) if j != i and not apart[i, j]} for i in range(k)]
    groups: list[frozenset[int]] = []

    def extend(clique: set[int], candidates: set[int], excluded: set[int]) -> None:  # Bron and Kerbosch (1973), without pivoting: k is small
        if not candidates and not excluded:
            groups.append(frozenset(clique))
        for v in sorted(candidates):
            extend(clique | {v}, candidates & tied[v], excluded & tied[v])
            candidates = candidates - {v}
            excluded = excluded | {v}

    extend(set(), set(range(k)), set())
    groups.sort(key=lambda g: (min(g), -len(g), sorted(g)))
    if len(groups) > len(string.ascii_lowercase):
        raise ValueError(f"{len(groups)} groups need more than {len(string.ascii_lowercase)} letters")
    return ["".join(string.ascii_lowercase[n] for n, g in enumerate(groups) if i in g) for i in range(k)]
