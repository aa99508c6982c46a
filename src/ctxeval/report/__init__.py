"""Reports: summaries, tables and plots computed from token records."""
