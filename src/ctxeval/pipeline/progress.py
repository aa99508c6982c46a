"""How a run shows that it is alive: a rich progress bar on a terminal, and plain lines
elsewhere (output redirected to a file, a CI log), where a live bar is drawn only once, at the
end. A plain line is written when a model's work is done, at every tenth of the work, and at
least every `HEARTBEAT_SECONDS` of work, each with the time elapsed and an estimate of the time
left (from this session's pace: work recorded by an earlier session is not counted in it)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Protocol, TextIO

if TYPE_CHECKING:
    from rich.progress import Progress as Bar
    from rich.progress import TaskID

HEARTBEAT_SECONDS = 30.0
STEPS = 10  # a plain line at every tenth of the total


class Progress(Protocol):
    def advance(self, n: int, label: str) -> None:
        """`n` more units done; `label` names the work just done."""
        ...

    def stage_done(self, name: str) -> None:
        """A stage of the run (one model's work) is finished."""
        ...


class _Silent:
    def advance(self, n: int, label: str) -> None:
        pass

    def stage_done(self, name: str) -> None:
        pass


class PlainProgress:
    """Progress as plain lines on `stream`, for output that is not a terminal."""

    def __init__(self, stream: TextIO, total: int, already: int, unit: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.stream, self.total, self.unit, self.clock = stream, total, unit, clock
        self.already = self.done = already
        self.started = self.last_line = clock()
        self.next_step = self._step_after(already)

    def advance(self, n: int, label: str) -> None:
        self.done += n
        now = self.clock()
        if self.done >= self.next_step or now - self.last_line >= HEARTBEAT_SECONDS:
            self.next_step = self._step_after(self.done)
            self._line(label)

    def stage_done(self, name: str) -> None:
        self._line(f"{name} done")

    def _step_after(self, done: int) -> int:
        """The count at which the next tenth of the total is reached."""
        if self.total <= 0:
            return done + 1
        tenth = done * STEPS // self.total + 1
        return -(-tenth * self.total // STEPS)  # ceil(tenth * total / STEPS), always > done

    def _line(self, label: str) -> None:
        now = self.clock()
        self.last_line = now
        elapsed = now - self.started
        share = f" ({self.done / self.total:.0%})" if self.total > 0 else ""
        print(f"{self.done:,}/{self.total:,} {self.unit}{share}, {clock_time(elapsed)} elapsed, {self._left(elapsed)} — {label}", file=self.stream, flush=True)

    def _left(self, elapsed: float) -> str:
        session = self.done - self.already
        remaining = self.total - self.done
        if remaining <= 0:
            return "none left"
        if session <= 0 or elapsed <= 0:
            return "time left not known yet"
        return f"about {clock_time(elapsed / session * remaining)} left"


def clock_time(seconds: float) -> str:
    """Seconds as h:mm:ss, as rich's progress columns show them."""
    whole = int(round(seconds))
    return f"{whole // 3600}:{whole % 3600 // 60:02d}:{whole % 60:02d}"


@contextmanager
def progress_bar(enabled: bool, total: int, already: int, unit: str = "tokens", stream: TextIO | None = None) -> Iterator[Progress]:
    """Progress on `stream` (stderr): a rich bar on a terminal, plain lines otherwise, or
    nothing when not `enabled`."""
    stream = stream if stream is not None else sys.stderr
    if not enabled:
        yield _Silent()
        return
    if not stream.isatty():
        yield PlainProgress(stream, total, already, unit)
        return
    from rich import progress as rp
    from rich.console import Console

    columns = [rp.TextColumn("{task.description}"), rp.BarColumn(), rp.MofNCompleteColumn(), rp.TextColumn(unit), rp.TimeElapsedColumn(), rp.TimeRemainingColumn()]
    with rp.Progress(*columns, console=Console(file=stream), transient=False) as bar:
        yield _RichProgress(bar, bar.add_task("running", total=total, completed=already))


class _RichProgress:
    def __init__(self, bar: Bar, task: TaskID) -> None:
        self.bar, self.task = bar, task

    def advance(self, n: int, label: str) -> None:
        self.bar.update(self.task, advance=n, description=label)

    def stage_done(self, name: str) -> None:
        """The bar shows the stage's last label; nothing to add."""
