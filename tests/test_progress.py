"""Progress where no terminal is: plain lines at every tenth of the work, at least every 30 s of
work and when a model's work is done, each with the time elapsed and an estimate of what is left."""

from __future__ import annotations

import io

from ctxeval.pipeline.engine import run
from ctxeval.pipeline.progress import HEARTBEAT_SECONDS, PlainProgress, clock_time, progress_bar
from tests.test_engine import _spec, _SquaresTask


class _Clock:
    """A clock the test moves by hand (no timed assertion: the lines depend only on it)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_plain_lines_at_each_tenth_with_elapsed_and_time_left():
    stream, clock = io.StringIO(), _Clock()
    shown = PlainProgress(stream, total=100, already=20, unit="tokens", clock=clock)
    for _ in range(4):  # 5 tokens per 5 s: 20 -> 40 (the tenths at 30 and 40)
        clock.now += 5
        shown.advance(5, "w1")
    lines = stream.getvalue().splitlines()
    # this session: 10 tokens in 10 s, 70 left at that pace: 70 s; then 20 in 20 s, 60 left: 60 s
    assert lines == ["30/100 tokens (30%), 0:00:10 elapsed, about 0:01:10 left — w1",
                     "40/100 tokens (40%), 0:00:20 elapsed, about 0:01:00 left — w1"]


def test_a_line_at_least_every_heartbeat_of_work_and_at_each_finished_stage():
    stream, clock = io.StringIO(), _Clock()
    shown = PlainProgress(stream, total=1000, already=0, unit="passes", clock=clock)
    clock.now += HEARTBEAT_SECONDS - 1
    shown.advance(1, "a")  # below a tenth, before the heartbeat: nothing
    assert stream.getvalue() == ""
    clock.now += 1
    shown.advance(1, "b")  # 30 s since the last line
    clock.now += 10
    shown.stage_done("gemma-3-270m")
    assert stream.getvalue().splitlines() == ["2/1,000 passes (0%), 0:00:30 elapsed, about 4:09:30 left — b",
                                              "2/1,000 passes (0%), 0:00:40 elapsed, about 5:32:40 left — gemma-3-270m done"]


def test_nothing_done_yet_or_nothing_left():
    stream, clock = io.StringIO(), _Clock()
    shown = PlainProgress(stream, total=10, already=10, unit="cases", clock=clock)
    shown.stage_done("m")  # a resumed run with everything recorded
    assert stream.getvalue() == "10/10 cases (100%), 0:00:00 elapsed, none left — m done\n"
    assert clock_time(3725.4) == "1:02:05"


def test_a_stream_that_is_not_a_terminal_gets_plain_lines():
    stream = io.StringIO()
    with progress_bar(True, 4, 0, "jobs", stream) as shown:
        assert isinstance(shown, PlainProgress)
    with progress_bar(False, 4, 0, "jobs", stream) as shown:
        shown.advance(4, "x")
    assert stream.getvalue() == ""


def test_an_engine_run_with_progress_writes_lines_to_stderr_when_redirected(tmp_path, capsys):
    """The engine's progress on a stderr that is a capture (as a file is): a line at every tenth
    of 10 jobs, then the model's stage."""
    assert run(_SquaresTask(10), _spec(10), tmp_path, progress=True) == [j * j for j in range(10)]
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 11 and lines[0].startswith("1/10 jobs (10%), ") and lines[0].endswith(" — 0")
    assert lines[-2].startswith("10/10 jobs (100%), ") and "none left" in lines[-2] and lines[-1].endswith(" — counter done")
