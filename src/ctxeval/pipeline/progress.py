"""How a run shows that it is alive: a rich progress bar on a terminal, and plain lines
elsewhere (output redirected to a file, a CI log), where a live bar is drawn only once, at the
end. A plain line is written when the first job is done, when a model's work is done, at every
tenth of the work, and at least every `HEARTBEAT_SECONDS` of work, each with the time elapsed and an estimate of the time
left: the work not yet done weighed by what its kind of work cost in this session
(pipeline/time_left.py; work recorded by an earlier session is not counted in it), "at least"
while it extrapolates to longer contexts than any finished job's (`TimeLeft.at_least`). The bar
shows the same estimate, counted down between finished jobs, from the first finished job on,
and the label of the job last sent to a worker (the work running); a plain line names the work
just done."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TextIO

from ctxeval.pipeline.time_left import Cost, Load, TimeLeft

if TYPE_CHECKING:
    from rich.progress import Progress as Bar
    from rich.progress import TaskID

HEARTBEAT_SECONDS = 30.0
STEPS = 10  # a plain line at every tenth of the total


@dataclass(frozen=True)
class Step:
    """What one job means to the progress shown: how far it moves the count (in the task's
    unit), its label, and its cost for the time-left estimate (None: its units, for work whose
    plan gives no `Load`)."""

    units: int
    label: str
    cost: Cost | None = None

    def weighed(self) -> Cost:
        return self.cost if self.cost is not None else Cost(self.units)


class Progress(Protocol):
    def start(self, label: str) -> None:
        """A job was sent to a worker; `label` names it (the work now running)."""
        ...

    def advance(self, step: Step) -> None:
        """A job is done."""
        ...

    def stage_done(self, name: str) -> None:
        """A stage of the run (one model's work) is finished."""
        ...


class _Silent:
    def start(self, label: str) -> None:
        pass

    def advance(self, step: Step) -> None:
        pass

    def stage_done(self, name: str) -> None:
        pass


class PlainProgress:
    """Progress as plain lines on `stream`, for output that is not a terminal."""

    def __init__(self, stream: TextIO, total: int, already: int, unit: str, clock: Callable[[], float] = time.monotonic, left: Load | None = None) -> None:
        self.stream, self.total, self.unit, self.clock = stream, total, unit, clock
        self.already = self.done = already
        self.started = self.last_line = clock()
        self.next_step = self._step_after(already)
        self.left = TimeLeft(work_left(total, already, left), clock)

    def start(self, label: str) -> None:
        """A line names the work just done, so nothing to show."""

    def advance(self, step: Step) -> None:
        first = self.done == self.already  # the first estimate is worth a line
        self.done += step.units
        self.left.done(step.weighed())
        now = self.clock()
        if first or self.done >= self.next_step or now - self.last_line >= HEARTBEAT_SECONDS:
            self.next_step = self._step_after(self.done)
            self._line(step.label)

    def stage_done(self, name: str) -> None:
        self.left.stage_started()
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
        seconds = self.left.seconds()
        if self.total - self.done <= 0:
            return "none left"
        if seconds is None:
            return "time left not known yet"
        return f"{'at least' if self.left.at_least() else 'about'} {clock_time(seconds)} left"


def work_left(total: int, already: int, load: Load | None) -> Load:
    """The plan's work not yet done as the estimate weighs it; without a `Load`, one job of one
    token per unit (work whose jobs are a unit each and cost alike as far as the plan knows)."""
    units = float(max(total - already, 0))
    return load if load is not None else Load(units, units, 0.0, 0.0, 0.0)


def clock_time(seconds: float) -> str:
    """Seconds as h:mm:ss, as rich's progress columns show them."""
    whole = int(round(seconds))
    return f"{whole // 3600}:{whole % 3600 // 60:02d}:{whole % 60:02d}"


@contextmanager
def progress_bar(enabled: bool, total: int, already: int, unit: str = "tokens", stream: TextIO | None = None, left: Load | None = None,
                 clock: Callable[[], float] = time.monotonic) -> Iterator[Progress]:
    """Progress on `stream` (stderr): a rich bar on a terminal, plain lines otherwise, or
    nothing when not `enabled`; `left`: the plan's work not yet done (None: its units)."""
    stream = stream if stream is not None else sys.stderr
    if not enabled:
        yield _Silent()
        return
    if not stream.isatty():
        yield PlainProgress(stream, total, already, unit, clock, left)
        return
    from rich import progress as rp
    from rich.console import Console
    from rich.text import Text

    estimate = TimeLeft(work_left(total, already, left), clock)

    class TimeLeftColumn(rp.ProgressColumn):
        """The estimate of pipeline/time_left.py (rich's own column needs two finished jobs
        within 30 s and counts them alike)."""

        def render(self, task: rp.Task) -> Text:
            seconds = estimate.seconds()
            shown = "-:--:--" if seconds is None else f"{'≥' if estimate.at_least() else ''}{clock_time(seconds)} left"
            return Text(shown, style="progress.remaining")

    columns = [rp.TextColumn("{task.description}"), rp.BarColumn(), rp.MofNCompleteColumn(), rp.TextColumn(unit), rp.TimeElapsedColumn(), TimeLeftColumn()]
    with rp.Progress(*columns, console=Console(file=stream), transient=False) as bar:
        yield _RichProgress(bar, bar.add_task("running", total=total, completed=already), estimate)


class _RichProgress:
    def __init__(self, bar: Bar, task: TaskID, estimate: TimeLeft) -> None:
        self.bar, self.task, self.estimate = bar, task, estimate

    def start(self, label: str) -> None:
        self.bar.update(self.task, description=label)

    def advance(self, step: Step) -> None:
        self.estimate.done(step.weighed())
        self.bar.update(self.task, advance=step.units)

    def stage_done(self, name: str) -> None:
        """The bar shows the stage's last label; the estimate learns that a stage starts."""
        self.estimate.stage_started()
