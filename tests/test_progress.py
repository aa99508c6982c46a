"""Progress where no terminal is: plain lines at every tenth of the work, at least every 30 s of
work and when a model's work is done, each with the time elapsed and an estimate of what is left;
on a terminal, a bar with the same estimate from the first finished job on and the label of the
job running. The estimate weighs the work left by its cost (pipeline/time_left.py): checked on
runs replayed with an injected clock, never timed."""

from __future__ import annotations

import io
import math

import pytest

from ctxeval.pipeline.engine import announced, run
from ctxeval.pipeline.executors import Work
from ctxeval.pipeline.executors.local import LocalExecutor
from ctxeval.pipeline.executors.work import one_per_unit
from ctxeval.pipeline.progress import HEARTBEAT_SECONDS, PlainProgress, Step, clock_time, progress_bar
from ctxeval.pipeline.time_left import Cost, Load, TimeLeft
from tests.test_engine import _Counter, _CounterSpec, _spec, _Square, _SquaresTask


class _Clock:
    """A clock the test moves by hand (no timed assertion: the lines depend only on it)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_plain_lines_at_each_tenth_with_elapsed_and_time_left():
    stream, clock = io.StringIO(), _Clock()
    shown = PlainProgress(stream, total=100, already=20, unit="tokens", clock=clock)
    for _ in range(4):  # 5 tokens per 5 s: 20 -> 40 (the first job, then the tenths at 30 and 40)
        clock.now += 5
        shown.advance(Step(5, "w1"))
    lines = stream.getvalue().splitlines()
    # this session: 5 tokens in 5 s, 75 left at that pace; 10 in 10 s, 70 left: 70 s; then 20 in 20 s, 60 left: 60 s
    assert lines == ["25/100 tokens (25%), 0:00:05 elapsed, about 0:01:15 left — w1",
                     "30/100 tokens (30%), 0:00:10 elapsed, about 0:01:10 left — w1",
                     "40/100 tokens (40%), 0:00:20 elapsed, about 0:01:00 left — w1"]


def test_a_line_at_least_every_heartbeat_of_work_and_at_each_finished_stage():
    stream, clock = io.StringIO(), _Clock()
    shown = PlainProgress(stream, total=1000, already=0, unit="passes", clock=clock)
    clock.now += 10
    shown.advance(Step(1, "a"))  # the first job: a line with the first estimate
    clock.now += HEARTBEAT_SECONDS - 1
    shown.advance(Step(1, "b"))  # below a tenth, before the heartbeat: nothing
    clock.now += 1
    shown.advance(Step(1, "c"))  # 30 s since the last line
    clock.now += 10
    shown.stage_done("gemma-3-270m")
    # the first job stands in alone (10 s a pass); once b is done it is left out (its time holds the
    # stage's start), so c's line weighs b and c: 15 s a pass
    assert stream.getvalue().splitlines() == ["1/1,000 passes (0%), 0:00:10 elapsed, about 2:46:30 left — a",
                                              "3/1,000 passes (0%), 0:00:40 elapsed, about 4:09:15 left — c",
                                              "3/1,000 passes (0%), 0:00:50 elapsed, about 4:09:05 left — gemma-3-270m done"]  # counted down since


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
        shown.advance(Step(4, "x"))
    assert stream.getvalue() == ""


def test_an_engine_run_with_progress_writes_lines_to_stderr_when_redirected(tmp_path, capsys):
    """The engine's progress on a stderr that is a capture (as a file is): a line at every tenth
    of 10 jobs, then the model's stage."""
    assert run(_SquaresTask(10), _spec(10), tmp_path, progress=True) == [j * j for j in range(10)]
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 11 and lines[0].startswith("1/10 jobs (10%), ") and lines[0].endswith(" — 0")
    assert lines[-2].startswith("10/10 jobs (100%), ") and "none left" in lines[-2] and lines[-1].endswith(" — counter done")


def _replay(costs: list[Cost], seconds: list[float], units: list[int], at: float) -> tuple[float, float, list[str]]:
    """Run jobs of `costs` taking `seconds` each on an injected clock through the plain lines:
    (elapsed + the estimate left, when `at` of the units are done; the actual finish; the lines)."""
    stream, clock = io.StringIO(), _Clock()
    start, total = clock.now, sum(units)
    shown = PlainProgress(stream, total=total, already=0, unit="units", clock=clock, left=Load.of(costs))
    predicted, done = None, 0
    for cost, took, n in zip(costs, seconds, units):
        clock.now += took
        shown.advance(Step(n, "job", cost))
        done += n
        if predicted is None and done >= at * total:
            left = shown.left.seconds()
            predicted = math.nan if left is None else clock.now - start + left  # nan: no estimate shown
    return predicted, clock.now - start, stream.getvalue().splitlines()


# The demo's sweep (`sweep demo --lengths 32,...,1024 --context-mode approx --repeats 5`): 5
# passes per length, each of L + 30 tokens scoring 30 targets (900 in all). A
# pass's seconds: the curve fitted to that sweep's passes as measured (CPU seconds per pass of the
# embedded Gemma 3 270M, 2 threads, 2-core AMD EPYC at load 7-15, 2026-12-02): 1.7 s at 62 tokens,
# 11 s at 1,054 (overhead, per token, and per token times length).
DEMO_LENGTHS = (32, 64, 128, 256, 512, 1024)


def _demo_pass_seconds(tokens: int) -> float:
    return 1.68 + 0.00658 * tokens + 2.11e-6 * tokens * tokens


def test_a_sweep_run_from_its_longest_length_down_is_estimated_from_its_first_pass_on():
    """The demo's sweep as planned (`windows.sweep`: longest length first): the estimate only
    interpolates between lengths it has timed, within 20 % from the first line on."""
    passes = [Cost(n + 30, n + 30) for n in reversed(DEMO_LENGTHS) for _ in range(5)]
    seconds = [_demo_pass_seconds(c.tokens) for c in passes]
    units = [30] * len(passes)
    _, actual, lines = _replay(passes, seconds, units, at=1.0)
    assert all(" about " in line for line in lines[:-1]), lines
    for at in (0.04, 0.25, 0.5):
        predicted, _, _ = _replay(passes, seconds, units, at=at)
        assert abs(predicted / actual - 1) <= 0.2, (at, predicted, actual)


def test_jobs_planned_from_the_shortest_length_up_show_a_lower_bound_until_their_lengths_reach_half_the_longest():
    """The same passes from the shortest length up. While one length is done nothing is known
    of the longer passes: no estimate. From the second length on the shorter passes' cost per
    token is extrapolated as it is, said to be a lower bound ("at least"), and it is one;
    once the passes of 542 tokens (half of the longest, 1,054) are done the growth with length
    is fitted and the estimate is "about", within 5 %."""
    passes = [Cost(n + 30, n + 30) for n in DEMO_LENGTHS for _ in range(5)]
    seconds = [_demo_pass_seconds(c.tokens) for c in passes]
    units = [30] * len(passes)
    _, actual, lines = _replay(passes, seconds, units, at=1.0)
    assert lines[0].startswith("30/900 units (3%)") and lines[0].endswith("time left not known yet — job"), lines
    for at in (0.25, 0.5):
        predicted, _, _ = _replay(passes, seconds, units, at=at)
        assert -0.35 <= predicted / actual - 1 < 0, (at, predicted, actual)
    assert any(line.startswith("180/900 units (20%)") and " at least " in line for line in lines), lines
    assert any(line.startswith("450/900 units (50%)") and " at least " in line for line in lines), lines
    predicted, _, _ = _replay(passes, seconds, units, at=0.85)  # 26 passes done: the fifth length's all and one more
    assert abs(predicted / actual - 1) <= 0.05, (predicted, actual)
    assert any(line.startswith("810/900 units (90%)") and " about " in line for line in lines), lines
    counted = sum(seconds[:8]) / 8 * len(passes)  # the estimate that counts every pass alike: far short
    assert counted / actual < 0.5


def test_a_ruler_run_whose_tasks_generate_more_or_less_is_estimated_from_its_first_sample_on():
    """RULER's 13 tasks in order at one length, 4 samples each: a sample costs its prompt and
    the tokens its task may generate (niah 128, vt 30, cwe 120, fwe 50, qa 32), as RulerRun
    weighs it; its simulated time: 0.5 ms per prompt token and 20 ms per generated token, the
    first sample of each task twice its prompt (the ones after it share the prefix)."""
    budgets = [128] * 8 + [30, 120, 50, 32, 32]
    samples = [(k, Cost(4096, 4096, g)) for g in budgets for k in range(4)]
    seconds = [c.tokens * 0.0005 * (2 if k == 0 else 1) + 0.02 * c.generated for k, c in samples]
    costs = [c for _, c in samples]
    predicted, actual, lines = _replay(costs, seconds, [1] * len(costs), at=0.25)
    assert abs(predicted / actual - 1) <= 0.35, (predicted, actual)
    assert lines[0].startswith("1/52 units (2%), 0:00:07 elapsed, about ") and lines[0].endswith(" left — job")  # from the first sample on


def test_the_overhead_and_the_growth_with_length_are_fitted_once_the_jobs_tell_them_apart():
    clock = _Clock()
    left = TimeLeft(Load.of([Cost(100, 100)] * 2 + [Cost(200, 200)] * 2 + [Cost(400, 400)] * 2 + [Cost(800, 800)]), clock)

    def took(cost: Cost) -> float:
        return 2.0 + cost.tokens * (0.01 + 0.00001 * cost.length)

    clock.now += 60  # the first job: its time holds the model's warm-up too, so it is not fitted
    left.done(Cost(100, 100))
    for cost in [Cost(100, 100), Cost(200, 200), Cost(400, 400)]:
        clock.now += took(cost)
        left.done(cost)
    # exact once three lengths are fitted: 200, 400 and 800 tokens left
    assert left.seconds() == pytest.approx(sum(took(Cost(n, n)) for n in (200, 400, 800)), rel=1e-6)
    clock.now += 5
    assert left.seconds() == pytest.approx(sum(took(Cost(n, n)) for n in (200, 400, 800)) - 5, rel=1e-6)  # counted down between jobs


def test_jobs_of_equal_tokens_and_other_targets_are_weighed_by_their_targets():
    """Passes of one input length scoring 1 or 16 targets (a truncation control's, context-gain's
    short passes): the targets' cost is told apart from the tokens', nothing split."""
    clock = _Clock()
    costs = [Cost(100, 100, targets=k) for k in (1, 1, 16, 16, 1, 16, 1)]
    left = TimeLeft(Load.of(costs), clock)

    def took(cost: Cost) -> float:
        return 0.001 * cost.tokens + 0.01 * cost.targets

    for cost in costs[:4]:
        clock.now += took(cost)
        left.done(cost)
    assert left.seconds() == pytest.approx(sum(took(c) for c in costs[4:]), rel=1e-6)


def test_a_stages_first_job_is_not_fitted_as_its_work():
    """A second model's first pass also waits for the model (and the first model's records): 30 s
    more than its 1 s of work. The passes after it are estimated at their own cost."""
    stream, clock = io.StringIO(), _Clock()
    costs = [Cost(100, 100)] * 20
    shown = PlainProgress(stream, total=20, already=0, unit="passes", clock=clock, left=Load.of(costs))
    for i, cost in enumerate(costs[:12]):
        clock.now += 1.0 + (30.0 if i in (0, 10) else 0.0)
        shown.advance(Step(1, "p", cost))
        if i == 9:
            shown.stage_done("first model")
    assert shown.left.seconds() == pytest.approx(8.0)


# The demo's effective-length run (`effective-length demo --lengths 32,...,1024 --starts 8 --targets 16
# --model gemma-3-270m --model 'gemma-3-270m?max_context=128'`): the full model's passes of L + 16
# tokens scoring 16 targets, from each start through every length, then the truncation control's:
# 16-target passes at 32 and 64, and at 128 one pass of 129 tokens per target (longer lengths reuse
# them). A pass's seconds (overhead, per token, per token times length, per target) as fitted to
# that run's passes (embedded Gemma 3 270M, 2 threads, 2-core Intel Xeon with AMX, 2026-12-06): idle,
# almost all of a pass's fixed cost is its targets' (each one's rank over the 262,144-entry
# vocabulary); beside two busy processes (the cores oversubscribed) almost all of it is the pass's own.
PASS_COSTS = {"idle": (0.0, 0.0013, 2.7e-7, 0.008), "oversubscribed": (2.66, 0.00675, 2.3e-6, 0.021)}
EFFECTIVE_LENGTHS = (32, 64, 128, 256, 512, 1024)


def _effective_length_plan(starts: int) -> tuple[list[Cost], list[int]]:
    full = [Cost(n + 16, n + 16, targets=16) for _ in range(starts) for n in EFFECTIVE_LENGTHS]
    control = [c for _ in range(starts) for c in [Cost(48, 48, targets=16), Cost(80, 80, targets=16)] + [Cost(129, 129, targets=1)] * 16]
    costs = full + control
    return costs, [c.targets for c in costs]


def _pass_seconds(cost: Cost, machine: str) -> float:
    overhead, per_token, per_token_length, per_target = PASS_COSTS[machine]
    return overhead + per_token * cost.tokens + per_token_length * cost.tokens * cost.length + per_target * cost.targets


@pytest.mark.parametrize("machine", sorted(PASS_COSTS))
@pytest.mark.parametrize("at", [0.25, 0.5])
def test_the_effective_length_demo_is_estimated_within_a_fifth_though_its_control_scores_one_target_a_pass(at, machine):
    """Until the control runs, every pass scored 16 targets: whether their fixed cost is per pass
    or per target cannot be told, so it is weighed half each way (+13 % idle, -17 % oversubscribed).
    Weighed as an overhead per pass alone (no targets), the idle machine's control passes would be
    charged 16 targets each (+27 %)."""
    costs, units = _effective_length_plan(8)
    assert abs(_error(costs, units, machine, at)) <= 0.2
    untargeted = [Cost(c.tokens, c.length) for c in costs]
    worst = max(abs(_error(costs, units, m, at)) for m in PASS_COSTS)
    assert worst < max(abs(_error(untargeted, units, m, at)) for m in PASS_COSTS) - 0.05


def _error(costs: list[Cost], units: list[int], machine: str, at: float) -> float:
    """The estimate's relative error at `at` of the units, the passes taking their time on `machine`
    (whatever `costs` say of them)."""
    plan, _ = _effective_length_plan(8)
    predicted, actual, _ = _replay(costs, [_pass_seconds(c, machine) for c in plan], units, at=at)
    return predicted / actual - 1


def test_the_bar_shows_the_estimate_after_one_job_and_names_the_job_running():
    stream, clock = _Terminal(), _Clock()
    with progress_bar(True, 4, 0, "samples", stream, left=Load.of([Cost(10)] * 4), clock=clock) as shown:
        shown.start("m · niah_single_1 · 4096 tokens")
        shown.bar.refresh()
        assert "-:--:--" in stream.getvalue()  # nothing done: nothing known
        clock.now += 150
        shown.advance(Step(1, "m · niah_single_1 · 4096 tokens", Cost(10)))
        shown.start("m · vt · 4096 tokens")
        stream.seek(0)
        stream.truncate()
        shown.bar.refresh()
        screen = stream.getvalue()
    assert "-:--:--" not in screen and "0:07:30 left" in screen and "vt" in screen and "niah" not in screen, screen


def test_the_bar_marks_a_lower_bound():
    """Jobs at 100 and 200 tokens done, one at 800 left: the shorter jobs' cost per token, extrapolated, is "at least"."""
    stream, clock = _Terminal(), _Clock()
    costs = [Cost(100, 100), Cost(100, 100), Cost(200, 200), Cost(800, 800)]
    with progress_bar(True, 4, 0, "passes", stream, left=Load.of(costs), clock=clock) as shown:
        for cost in costs[:3]:
            clock.now += 1 + cost.tokens / 100
            shown.advance(Step(1, "p", cost))
        stream.seek(0)
        stream.truncate()
        shown.bar.refresh()
        screen = stream.getvalue()
    assert "≥0:00:09 left" in screen, screen  # 1 s a job plus 1 s per 100 tokens: 9 s for 800


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_job_is_announced_as_the_executor_sends_it_so_the_label_names_the_work_running():
    """Through the local executor: each job is announced after the previous one's result and
    before its own."""
    events: list[str] = []
    work = Work(_Square(), one_per_unit([1, 2, 3]), lambda job: job, lambda job: 1)
    for job, result in LocalExecutor().stream(_Counter(set()), _CounterSpec(), announced(work, lambda job: events.append(f"sent {job}"))):
        events.append(f"done {job}")
    assert events == ["sent 1", "done 1", "sent 2", "done 2", "sent 3", "done 3"]

