"""Bring your own runs: other tools' per-sample outputs read into one table, so `ctxeval compare`
answers for them with the paired statistics it gives its own runs.

One reader per format (lm-eval `samples_*.jsonl`, inspect logs, NVIDIA RULER `pred/` folders,
kvpress results folders, a plain CSV/Parquet), each returning the rows of `table.COLUMNS`; a file
that lacks what its format needs is refused in one line naming the file and what is missing.
"""
