"""The time-left estimate of a run: the work still planned, weighed by what each kind of work has
cost so far in this session, not counted.

Jobs differ in cost far more than in count: a sweep's pass at 1,024 tokens scores as many
targets as one at 32 but decodes 30 times the tokens, each at a longer context; a RULER sample
that generates costs many decode steps more than one settled by its likelihood pass; a
truncation control's pass of 129 tokens that scores one target costs little more than half of
a 144-token pass that scores 16 (each target's rank is read over the whole vocabulary). A job's
time is modelled as

    t = o + P·(a + b·L) + c·T + g·G

an overhead o per job, its P prompt tokens at a per-token cost that grows with the context
length L they are decoded at (attention reads every earlier token), its T scored targets at
their own cost, and its G generated tokens at theirs (one decode step each, counted apart from
the prompt). The coefficients (all ≥ 0) are fitted by non-negative least squares to the times
between this session's finished jobs, a term only once the finished jobs can tell it apart from
the others: the growth with length once they span three lengths, a factor of four, and reach
half the plan's longest (`_grows`), generation once one job generated, the overhead once they
differ in tokens and (where jobs score targets) in targets — until then a job's fixed cost is
weighed half as an overhead, half as its targets' (`_split`); before two jobs differ a job's
time is taken as proportional to its tokens. A stage's first job (`stage_started`) is not
fitted: its time also holds the model's warm-up. The time left is the fit applied to the sums of
the same terms over the jobs not yet finished, which the plan gives (`Load`). While the plan
still holds jobs at longer contexts than any finished one and the growth is not fitted, the
estimate extrapolates the cost per token of the shorter jobs as it is and says so (`at_least`):
a job's cost only grows with its context. With one length finished there is none: its jobs'
overhead cannot be told from their tokens' cost, and counting it per token would charge passes
17 times longer 17 times the overhead. With an executor that runs jobs side by side (Ray actors)
the times between finished jobs are shorter in the same proportion as the work left is, so the
estimate needs no worker count.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

OVERHEAD, TOKENS, TOKEN_LENGTHS, GENERATED, TARGETS = range(5)
TERMS = 5  # the model's terms, as columns
LENGTHS_FOR_GROWTH = 3  # distinct lengths finished before the growth with length is fitted
GROWTH_REACH = 2  # ... and the longest of them at least 1/GROWTH_REACH of the longest planned
GROWTH_SPAN = 4  # ... and at least GROWTH_SPAN times the shortest


@dataclass(frozen=True)
class Cost:
    """One job's work as the estimate weighs it: `tokens` decoded at a context of up to
    `length` tokens (0: no length applies), then `generated` tokens generated (a budget where
    the job may stop early: the fit learns what a budgeted token costs on average); `targets`:
    the tokens it scores (0: a job whose scoring is not counted apart)."""

    tokens: int
    length: int = 0
    generated: int = 0
    targets: int = 0

    def terms(self) -> np.ndarray:
        return np.array([1.0, self.tokens, self.tokens * self.length, self.generated, self.targets])


@dataclass(frozen=True)
class Load:
    """The terms of `t` summed over a set of jobs (the plan's work not yet recorded)."""

    jobs: float
    tokens: float
    token_lengths: float
    generated: float
    targets: float
    longest: int = 0  # the longest context length among the jobs

    @classmethod
    def of(cls, costs: Iterable[Cost]) -> Load:
        total, longest = np.zeros(TERMS), 0
        for cost in costs:
            total += cost.terms()
            longest = max(longest, cost.length)
        return cls(*map(float, total), longest=longest)

    def terms(self) -> np.ndarray:
        return np.array([self.jobs, self.tokens, self.token_lengths, self.generated, self.targets])


class TimeLeft:
    """The estimate, updated as each job finishes; `seconds` counts it down between jobs."""

    def __init__(self, left: Load, clock: Callable[[], float]) -> None:
        self.clock = clock
        self._left = left.terms()
        self._longest = left.longest
        self._gram = np.zeros((TERMS, TERMS))  # sums of outer products of the finished jobs' terms
        self._moment = np.zeros(TERMS)  # sums of their terms times their times
        self._scale = np.zeros(TERMS)  # each term's largest value so far (the fit's units)
        self._lengths: set[int] = set()
        self._tokens: set[int] = set()
        self._targets: set[int] = set()
        self._last = clock()
        self._estimate: float | None = None
        self._starting = True  # the next job is a stage's first (`stage_started`)
        self._first: tuple[Cost, float] | None = None  # the run's first job and its time, while no other is fitted

    def stage_started(self) -> None:
        """The next job is the first of a stage (a model's work): its time also holds the stage's
        start (a model warmed or loaded, the last stage's records written), so it is not fitted
        as the cost of its work."""
        self._starting = True

    def done(self, cost: Cost) -> None:
        """A job of `cost` finished now: its time is the time since the previous one finished."""
        now = self.clock()
        seconds, self._last = now - self._last, now
        self._left = np.maximum(self._left - cost.terms(), 0.0)
        if self._starting:  # not fitted; the run's first job stands in until another one finishes
            self._starting = False
            self._first = (cost, seconds) if not self._lengths else None
        else:
            self._first = None
            self._fit(cost, seconds)
        self._estimate = float(self._left @ self._per_term())

    def _fit(self, cost: Cost, seconds: float) -> None:
        terms = cost.terms()
        self._gram += np.outer(terms, terms)
        self._moment += terms * seconds
        self._scale = np.maximum(self._scale, terms)
        self._lengths.add(cost.length)
        self._tokens.add(cost.tokens)
        self._targets.add(cost.targets)

    def seconds(self) -> float | None:
        """Seconds left (None before a job finished, or while one length is finished and the
        plan reaches longer ones): the estimate at the last finished job, less the time since."""
        if self._estimate is None or (self.at_least() and len(self._lengths) < 2):
            return None
        return max(0.0, self._estimate - (self.clock() - self._last))

    def at_least(self) -> bool:
        """Whether the estimate is a lower bound: the plan reaches longer contexts than any
        finished job, and the growth with length is not fitted yet (`_grows`), so the cost per
        token found on the shorter jobs is extrapolated to the longer ones as it is. A job's
        cost only grows with its context, so the work left costs at least that much."""
        lengths = self._lengths or ({self._first[0].length} if self._first else {0})
        return self._longest > max(lengths) and not self._grows()

    def _grows(self) -> bool:
        """Whether the growth with length is fitted: the finished jobs span three lengths, the
        longest of them at least four times the shortest and half the plan's longest. Fitted to a
        narrower span the growth is mostly noise, extrapolated: passes of 62, 94 and 158 tokens,
        0.01–0.03 s apart between two idle runs, put the 1,054-token passes at −17 % in one and
        +199 % in the other; fitted to 1,054, 542 and 286 tokens (a sweep's first three lengths,
        run longest first) it put the passes of 62–158 at +74 % in one of them."""
        shortest, longest = min(self._lengths, default=0), max(self._lengths, default=0)
        return len(self._lengths) >= LENGTHS_FOR_GROWTH and longest * GROWTH_REACH >= self._longest and longest >= GROWTH_SPAN * shortest

    def _per_term(self) -> np.ndarray:
        """Seconds per unit of each term, fitted to the finished jobs (0 for a term not fitted)."""
        from scipy.optimize import nnls  # here, so importing the engine stays light

        out = np.zeros(TERMS)
        if not self._lengths:  # only the run's first job: its time taken as proportional to its tokens
            if self._first is not None:
                first, seconds = self._first
                out[TOKENS if first.tokens else OVERHEAD] = seconds / (first.tokens or 1)
            return out
        used = [TOKENS]
        scores = self._scale[TARGETS] > 0
        if scores and (len(self._tokens) > 1 or len(self._targets) > 1):
            used.append(TARGETS)  # while every job scored as many targets, it stands for a job's whole fixed cost (`_split`)
        if len(self._tokens) > 1 and (not scores or len(self._targets) > 1):
            used.append(OVERHEAD)
        if self._grows():
            used.append(TOKEN_LENGTHS)
        if self._scale[GENERATED] > 0:
            used.append(GENERATED)
        if self._scale[TOKENS] == 0:  # jobs without tokens (a count): the overhead is all there is
            used = [OVERHEAD]
        scale = np.where(self._scale[used] > 0, self._scale[used], 1.0)
        gram = self._gram[np.ix_(used, used)] / np.outer(scale, scale)
        moment = self._moment[used] / scale
        # min |Xc - y|² through the Gram matrix: X'X = R'R, then |Rc - R'^-1 X'y|² (a tiny ridge keeps R defined for equal columns)
        upper = np.linalg.cholesky(gram + 1e-9 * np.trace(gram) * np.eye(len(used))).T
        coefficients, _ = nnls(upper, np.linalg.solve(upper.T, moment))
        out[used] = coefficients / scale
        return self._split(out) if TARGETS in used and len(self._targets) == 1 else out

    def _split(self, per_term: np.ndarray) -> np.ndarray:
        """A fixed cost fitted to jobs that all scored T targets, as half an overhead per job and
        half a cost per target: which it is, the jobs cannot tell, and jobs with other targets
        may follow (a truncation control's one-target passes). On an idle machine it is mostly
        the targets' (each target's rank is read over the vocabulary), on an oversubscribed one
        mostly each job's (its decodes wait for the cores); either way the even split misses a
        one-target job by at most about half its fixed cost, where one guess would miss it by all
        of it (measured: docs/outputs.md)."""
        (targets,) = self._targets
        out = per_term.copy()
        out[OVERHEAD] = per_term[TARGETS] * targets / 2
        out[TARGETS] = per_term[TARGETS] / 2
        return out
