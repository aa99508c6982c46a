"""Defaults every interval shares, declared once: replicates, confidence (the level: every other
module derives its own from DEFAULT_CONFIDENCE) and the seed. Their CLI options live with the
others (ctxeval.options), so stats/ imports nothing of the command layer."""

from __future__ import annotations

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
FEW_CLUSTERS = (f"with fewer than {RELIABLE_CLUSTERS} documents the cluster bootstrap's {100 * DEFAULT_CONFIDENCE:g} % interval covered less than 85 % in simulation "
                "(bench/bench_compare_coverage.py)")
