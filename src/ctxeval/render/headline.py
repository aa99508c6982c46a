"""The answer a result gives, first: one table of the numbers that answer its command's
question, each with its interval, and the notes that qualify them.

Each result kind builds its headline once (`headline` in render/<kind>.py, from the data the
Result holds); the command's printout and its Markdown begin with it, and the `ctxeval report`
page shows the same table at its top.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Headline:
    """What a result answers: a title and a detail saying what the table holds, its rows, and
    notes (what a number means, what was left out and why). Plain text, no Markdown."""

    title: str
    detail: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    notes: tuple[str, ...] = ()

    def markdown(self) -> list[str]:
        """The caption, the table and the notes as Markdown lines."""
        lines = [f"**{self.title}**: {self.detail}", "", _row(self.columns), "|" + "---|" * len(self.columns)]
        lines += [_row(row) for row in self.rows]
        return lines + ([""] + [f"{note}  " if i < len(self.notes) - 1 else note for i, note in enumerate(self.notes)] if self.notes else [])


def _row(cells: tuple[str, ...]) -> str:
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def percent(value: float) -> str:
    """A share as a percentage: one decimal below 10 %, none above."""
    return f"{100 * value:.1f} %" if abs(value) < 0.1 else f"{100 * value:.0f} %"
