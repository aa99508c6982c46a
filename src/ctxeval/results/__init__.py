"""Typed, versioned results: one class per output kind, the only writer and reader of its files
(results/base.py has the contract)."""

from ctxeval.results.base import RESULT_FILE, Result, read_header, read_result, result_class, write_result

__all__ = ["RESULT_FILE", "Result", "read_header", "read_result", "result_class", "write_result"]
