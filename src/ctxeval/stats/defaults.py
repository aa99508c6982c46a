"""Defaults every interval shares, declared once: replicates, confidence and their option."""

from __future__ import annotations

from typing import Any

from ctxeval.options import at_least, option

DEFAULT_REPLICATES = 2000
MIN_REPLICATES = 100  # fewer make a BCa bound rest on a handful of replicates
DEFAULT_CONFIDENCE = 0.95
DEFAULT_SEED = 0

# From bench/bench_compare_coverage.py's grid (documents x windows per document x document
# effect; docs/design.md): from MIN_CLUSTERS documents on, the cluster bootstrap's worst-case
# coverage beats the window bootstrap's (with 2 documents: 49 % against 55 %), so compare
# resamples documents by default; below RELIABLE_CLUSTERS documents its coverage fell under 85 %
# in some cell (68-76 % with 3), and every report of a document-clustered interval says so.
MIN_CLUSTERS = 3
RELIABLE_CLUSTERS = 7
FEW_CLUSTERS = (f"with fewer than {RELIABLE_CLUSTERS} documents the cluster bootstrap's 95 % interval covered less than 85 % in simulation "
                "(bench/bench_compare_coverage.py)")


def replicates_option() -> Any:
    """The --replicates field of a spec or option group: one help for every command."""
    return option("--replicates", "Bootstrap replicates of every interval.", DEFAULT_REPLICATES, check=at_least(MIN_REPLICATES))
