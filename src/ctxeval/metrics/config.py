"""The metric settings: how a run's records become scores (post hoc, so never part of a run's
identity); stored in manifests and results, read by metrics, reports and specs alike."""

from __future__ import annotations

from dataclasses import dataclass

from ctxeval.errors import UserError
from ctxeval.metrics.perplexity import DEFAULT_PENALTY
from ctxeval.options import comma_floats, non_negative, option, positive


def parse_cutoff(value: str, flag: str) -> int | None:
    """A rank cutoff as typed: a positive integer, or 'full' (None: the whole vocabulary)."""
    if value.strip().lower() == "full":
        return None
    try:
        return int(value)
    except ValueError:
        raise UserError(f"{flag} expects a positive integer or 'full', got {value!r}") from None


@dataclass(frozen=True)
class MetricConfig:
    """How records become scores; changing it never needs a new model run."""

    cutoff: int | None = option("--cutoff", "Rank cutoff l of the rank scores: a positive integer, or 'full' for the whole vocabulary (a rank an API read from a shorter top-k list is scored with l = that list's length).",
                                20, cli_type=str, shown="20", to_value=lambda v: parse_cutoff(v, "--cutoff"), check=positive)  # None = full vocabulary
    alphas: tuple[float, ...] = option("--alphas", "Comma-separated alphas of the non-linear score e^(-alpha (r-1)).", (0.1, 0.3),
                                       cli_type=str, shown="0.1,0.3", to_value=comma_floats("--alphas"), check=lambda a: "must be positive" if any(x <= 0 for x in a) else None)
    approx_k: int = option("--approx-k", "k of the approximate perplexity (an API's top-k).", 20, check=positive)  # top-k an API would return
    penalty: float = option("--penalty", "Penalty subtracted from log p_k for tokens outside the top-k.", DEFAULT_PENALTY, check=non_negative)  # thesis eq. 10

    @staticmethod
    def from_dict(stored: dict) -> MetricConfig:
        """The settings as stored in a run manifest."""
        return MetricConfig(stored["cutoff"], tuple(stored["alphas"]), stored["approx_k"], stored["penalty"])
