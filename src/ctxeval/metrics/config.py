"""The metric settings: how a run's records become scores (post hoc, so never part of a run's
identity); stored in manifests and results, read by metrics, reports and specs alike. Their CLI
flags are given by the command layer (ctxeval.commands.common), as metrics/ imports nothing of it."""

from __future__ import annotations

from dataclasses import dataclass

from ctxeval.errors import UserError
from ctxeval.metrics.perplexity import DEFAULT_PENALTY


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

    cutoff: int | None = 20  # rank cutoff l of the rank scores; None = full vocabulary
    alphas: tuple[float, ...] = (0.1, 0.3)  # of the non-linear score e^(-alpha (r-1))
    approx_k: int = 20  # top-k an API would return
    penalty: float = DEFAULT_PENALTY  # thesis eq. 10

    @staticmethod
    def from_dict(stored: dict) -> MetricConfig:
        """The settings as stored in a run manifest."""
        return MetricConfig(stored["cutoff"], tuple(stored["alphas"]), stored["approx_k"], stored["penalty"])
