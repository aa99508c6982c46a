"""How every renderer words the samples that would settle an undecided verdict (stats/verdict.py),
so diff, effective-length and ruler say it alike."""

from __future__ import annotations


def would_settle(samples_needed: int, unit: str = "") -> str:
    """'about N windows would settle it' (`unit` "window"), or 'about N would settle it' with no unit."""
    return f"about {int(samples_needed)} {unit + 's ' if unit else ''}would settle it"
