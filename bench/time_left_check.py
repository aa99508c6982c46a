"""How close the time-left estimate comes on a real run: runs a ctxeval command in this process,
records when each job finished and what it cost (`Step.cost`), and prints, at given shares of
the work, the time left shown against the time the run really took from there (error in %).

A recorded trace (`--save`) can be replayed (`--replay`) through the estimate of this checkout,
with the recorded times, so a change of the cost model is checked on the same run without running
it again. The demo's two runs (scripts/demo.sh), at their full size:

    python bench/time_left_check.py --save bench/out/el.json -- effective-length demo --lengths 32,64,128,256,512,1024 \\
        --starts 8 --targets 16 --unit span --model gemma-3-270m --model 'gemma-3-270m?max_context=128' --out /tmp/el
    python bench/time_left_check.py --save bench/out/sweep.json -- sweep demo --lengths 32,64,128,256,512,1024 \\
        --context-mode approx --repeats 5 --out /tmp/sweep
    python bench/time_left_check.py --replay bench/out/el.json
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src")]

from ctxeval.pipeline import progress  # noqa: E402
from ctxeval.pipeline.time_left import Cost, TimeLeft, Load  # noqa: E402

SHARES = (0.25, 0.5, 0.75)


def record(argv: list[str]) -> dict:
    """Run `ctxeval argv` (its `--out` emptied first), noting each finished job: its units, cost
    and the time since the start. Returns the trace."""
    from typer.testing import CliRunner

    from ctxeval.cli import app

    if "--out" in argv:
        shutil.rmtree(argv[argv.index("--out") + 1], ignore_errors=True)
    jobs: list[dict] = []
    started = time.monotonic()
    plan: dict = {}
    original_init, original_advance, original_stage = progress.PlainProgress.__init__, progress.PlainProgress.advance, progress.PlainProgress.stage_done

    def init(self, stream, total, already, unit, clock=time.monotonic, left=None):  # type: ignore[no-untyped-def]
        plan.update(total=total, already=already, unit=unit, left=None if left is None else [left.jobs, left.tokens, left.token_lengths, left.generated, left.targets, left.longest])
        original_init(self, stream, total, already, unit, clock, left)

    def advance(self, step):  # type: ignore[no-untyped-def]
        cost = step.weighed()
        jobs.append({"at": time.monotonic() - started, "units": step.units, "label": step.label,
                     "cost": [cost.tokens, cost.length, cost.generated, cost.targets]})
        original_advance(self, step)

    def stage_done(self, name):  # type: ignore[no-untyped-def]
        jobs.append({"at": time.monotonic() - started, "stage_done": name})
        original_stage(self, name)

    progress.PlainProgress.__init__, progress.PlainProgress.advance, progress.PlainProgress.stage_done = init, advance, stage_done  # type: ignore[method-assign]
    result = CliRunner().invoke(app, argv)
    if result.exit_code != 0:
        raise SystemExit(f"ctxeval {' '.join(argv)} exited {result.exit_code}: {result.output[-2000:]}")
    return {"command": argv, "plan": plan, "jobs": jobs, "machine_load": _load()}


def _load() -> list[float]:
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]] if Path("/proc/loadavg").is_file() else []


def replay(trace: dict, by_time: bool = False) -> list[tuple[float, float | None, float]]:
    """(share done, time left shown, time really left) at the first job past each of SHARES:
    shares of the work as the progress bar counts it, or (`by_time`) of the run's whole time."""
    plan = trace["plan"]
    jobs = [job for job in trace["jobs"] if "units" in job]
    left = plan["left"]
    load = Load(*left[:5], longest=int(left[5])) if left is not None else progress.work_left(plan["total"], plan["already"], None)
    now = [0.0]
    estimate = TimeLeft(load, lambda: now[0])
    total, end = plan["total"] - plan["already"], jobs[-1]["at"]
    done, out, shares = 0, [], list(SHARES)
    for job in trace["jobs"]:
        if "stage_done" in job:
            estimate.stage_started()
            continue
        now[0] = job["at"]
        estimate.done(Cost(*job["cost"]))
        done += job["units"]
        share = job["at"] / end if by_time else done / total
        if shares and share >= shares[0]:
            out.append((share, estimate.seconds(), end - job["at"]))
            while shares and share >= shares[0]:
                shares.pop(0)
    return out


def table(trace: dict) -> str:
    lines = [f"ctxeval {' '.join(trace['command'])}", f"load average at the end: {trace.get('machine_load')}; {trace['jobs'][-1]['at']:.0f} s in all",
             "| done | of | shown left | actual left | error |", "|---|---|---|---|---|"]
    for by_time in (False, True):
        for share, shown, actual in replay(trace, by_time):
            error = "no estimate" if shown is None else f"{100 * (shown / actual - 1):+.0f} %"
            lines.append(f"| {share:.0%} | {'time' if by_time else 'work'} | {'-' if shown is None else progress.clock_time(shown)} | {progress.clock_time(actual)} | {error} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--save", type=Path, help="write the recorded trace here (JSON)")
    parser.add_argument("--replay", type=Path, help="replay a recorded trace instead of running a command")
    parser.add_argument("command", nargs="*", help="the ctxeval command and its options, after --")
    args = parser.parse_args()
    if args.replay is not None:
        trace = json.loads(args.replay.read_text())
    else:
        trace = record(args.command)
        if args.save is not None:
            args.save.parent.mkdir(parents=True, exist_ok=True)
            args.save.write_text(json.dumps(trace))
    print(table(trace))


if __name__ == "__main__":
    main()
