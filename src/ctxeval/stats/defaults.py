"""Defaults every interval shares, declared once: replicates, confidence and their option."""

from __future__ import annotations

from typing import Any

from ctxeval.options import at_least, option

DEFAULT_REPLICATES = 2000
MIN_REPLICATES = 100  # fewer make a BCa bound rest on a handful of replicates
DEFAULT_CONFIDENCE = 0.95
DEFAULT_SEED = 0


def replicates_option(help: str = "Bootstrap replicates.") -> Any:
    """The --replicates field of a spec or option group."""
    return option("--replicates", help, DEFAULT_REPLICATES, check=at_least(MIN_REPLICATES))
