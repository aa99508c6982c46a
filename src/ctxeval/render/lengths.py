"""Effective lengths in words, as reports print them."""

from __future__ import annotations


def describe_length(e: dict | None) -> str:
    """L* in words: `1024 [512, 2048]`, `≥ 4096`, `no interval`."""
    if e is None:
        return "no key tokens"
    value = f"≥ {e['value']}" if e["at_least"] else (f"≤ {e['value']} (no gain)" if e["no_gain"] else f"{e['value']}")
    if e["interval"] == "none":
        return f"{value}, no interval"
    high = f"≥ {e['high']}" if e.get("high_at_least") else f"{e['high']}"
    return f"{value} [{e['low']}, {high}]"
