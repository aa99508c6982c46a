"""The engine: the one run lifecycle every model-backed command goes through.

`run(task, spec, out)` is the only code that reads and writes a run directory's manifest. For
every command (sweep, score, context-gain, retrieval, pplqa, meta-eval, judge) it:

1. refuses a run directory made with another configuration (`spec.run_id` differs), and
   returns the task's outputs at once for a finished run of the same configuration;
2. refuses an output folder that cannot be created, before any work; opens the executor
   (SIGTERM is treated like Ctrl-C: finished work is flushed and the status is `incomplete`),
   loads the task's models and lets the task plan its work, skipping work already recorded;
3. writes the manifest (`created` kept from the first session), streams the work through the
   executor and sinks each result as records (atomic Parquet parts);
4. records what API models used, in this session (`api_usage`) and over every session of the
   directory (`api_usage_total`), and the session's timing;
5. merges the parts in plan order and sets `status`: `complete`, or `incomplete` when some work
   failed (listed in `failed_passes`; `IncompleteRun` is raised, the CLI exits with
   `EXIT_INCOMPLETE`, and a re-run of the same command retries only that work);
   For token records, one fingerprint per model (results/fingerprint.py) joins the manifest;
   every manifest records each model's numeric path (results/numeric_path.py, built by machine_path.py);
6. calls the task's `finish`, which returns the command's `Result`, has the caller's
   `Rendering` add its texts and figure, and writes it (results/base.py); `model_done`, called once per model whose work is recorded, lets a task
   keep what only the loaded model knows.

A task (`RunTask`) supplies what differs: record kind and schema, models, the plan, how a
result becomes records, and the finisher. The engine imports no task, report or render/ code:
the command layer hands it render/'s `Rendering` (a result's Markdown, page and figure).
"""

from __future__ import annotations

import platform
import signal
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from importlib import metadata
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

import pyarrow as pa

from ctxeval.pipeline.machine_path import numeric_path
from ctxeval.config import config_id
from ctxeval.errors import FieldError, IncompleteRun, a_or_an
from ctxeval.pipeline.executors import ExecutorOptions, Loadable, Work, WorkerModel, open_executor
from ctxeval.results.fingerprint import run_fingerprints
from ctxeval.results.manifest import MANIFEST_FILE, Manifest, existing_manifest, now, read_manifest, write_manifest
from ctxeval.results.records import RecordKind, RowSink, check_resumable, done_passes, merge_parts
from ctxeval.pipeline.progress import Step, progress_bar
from ctxeval.pipeline.time_left import Load
from ctxeval.results.base import Result, check_folder, make_folder, write_result

R = TypeVar("R", covariant=True)


class Rendering(Protocol):
    """What render/ adds to a Result as it is written, from the Result alone: its texts (the
    Markdown, a page) and its figure. The command layer passes render/'s; the engine, the tasks
    and results/ import no render/ code."""

    def texts(self, result: Result) -> Result:
        """`result` with the texts it holds (Markdown, page) rendered."""
        ...

    def draw(self, result: Result, out: Path) -> None:
        """Draw `result`'s figure into its folder `out` (nothing for a kind without one)."""
        ...


@dataclass(frozen=True)
class RunSpec:
    """A run's identity: the command, the hash of what decides its records, and the
    configuration as the manifest stores it. `what` names the run in a refusal."""

    command: str
    run_id: str
    config: dict[str, Any]
    what: str = "run"


@dataclass
class Plan:
    """What a task will run: one `Work` per model (in model order; jobs already recorded left
    out), the manifest fields the plan decides, progress totals, and the work left as the
    time-left estimate weighs it (None: a job per unit, all alike)."""

    work: list[Work]
    manifest: dict[str, Any] = field(default_factory=dict)
    units: int = 0  # units of work in the whole plan (for the failure message)
    noun: str = "units of work"  # what they are called ("passes", "cases", "requests")
    total: int = 0  # progress total, in the task's `unit`
    already: int = 0  # of which already recorded
    load: Load | None = None  # the `Step.cost`s of the jobs not yet recorded, summed


class RunTask(Protocol, Generic[R]):
    """One command family's part of a run (see the module docstring)."""

    records: RecordKind  # the record kind the task writes
    schema: pa.Schema  # its columns
    unit: str  # what the progress bar counts ("tokens", "cases", "passes", "requests")
    # write the outputs even when some work failed (the judge reports failed requests as errors)
    finish_incomplete: bool

    def load_specs(self) -> Sequence[Loadable]:
        """The models the run needs, loaded by the engine in this order."""
        ...

    def plan(self, models: list[WorkerModel], done: set) -> Plan:
        """The work still to do (`done`: keys of the records already on disk)."""
        ...

    def record(self, model: WorkerModel, job: Any, result: object, columns: dict[str, list]) -> dict | None:
        """Append the records of one finished job to `columns`; or, for failed work, return
        what the manifest lists about it (with an `error` text) and append nothing."""
        ...

    def progress(self, model: WorkerModel, job: Any) -> Step:
        """How far one job advances the progress bar, its label and its cost (from the job
        alone: asked when the job is sent to a worker, for the label, and when it is done)."""
        ...

    def model_done(self, run_dir: Path, model: WorkerModel) -> None:
        """Called once a model's work is recorded, while the model is still loaded (scoring
        runs keep its token pieces); most tasks do nothing."""
        ...

    def finish(self, run_dir: Path, manifest: Manifest) -> R:
        """The command's result of a run whose records are merged (the engine writes it)."""
        ...


def run(task: RunTask[R], spec: RunSpec, out: Path, *, render: Rendering | None = None, executor: ExecutorOptions | None = None, progress: bool = False) -> R:
    """Run `task` into `out` (resuming what an earlier session left) and return its result,
    rendered by `render` (None only for a task whose finish returns no Result)."""
    out = Path(out)
    check_folder(out)
    previous = existing_manifest(out, spec.run_id, spec.what, spec.command)
    if previous is not None and previous.status == "complete":
        return _finished(task, out, previous, spec.command, render)
    check_resumable(out, task.schema, task.records, spec.what)
    started = time.time()
    options = executor or ExecutorOptions()
    options.check()
    load_specs = list(task.load_specs())
    failures: list[dict] = []
    usage: dict[str, dict] = {}
    with ExitStack() as stack:
        # the executor first: its workers start loading the first model while the driver loads
        # and plans (and Ray installs its own SIGTERM handler when it connects)
        runner = stack.enter_context(open_executor(options))
        runner.warm(load_specs[0])
        models = [s.load() for s in load_specs]
        for model in reversed(models):
            stack.callback(model.close)
        plan = task.plan(models, done_passes(out, task.records))
        make_folder(out)
        # a task whose one worker model holds several models (diff's pair) names them in its plan
        fields = {"models": [m.describe() for m in models]} | plan.manifest
        paths = [numeric_path(m, options.kind, options.threads_per_worker) for m in fields["models"]]
        # the earlier sessions' time stays on disk while this one runs (a SIGKILL writes nothing)
        manifest = Manifest(command=spec.command, run_id=spec.run_id, config=spec.config, numeric_paths=paths,
                            created=(previous.created if previous else None) or now(), versions=versions(),
                            timing=previous.timing if previous else None, **fields)
        write_manifest(out, manifest)
        sink = RowSink(out, task.schema)
        with terminate_as_interrupt(), incomplete_if_interrupted(out, manifest, lambda: session_timing(previous, started)), progress_bar(progress, plan.total, plan.already, task.unit, left=plan.load) as shown:
            for model, load_spec, work in zip(models, load_specs, plan.work):
                try:
                    for job, result in runner.stream(model, load_spec, announced(work, lambda job, model=model: shown.start(task.progress(model, job).label))):
                        failure = task.record(model, job, result, sink.columns)
                        if failure is None:
                            sink.unit_done()
                        else:
                            failures.append(failure)
                        shown.advance(task.progress(model, job))
                    sink.flush()
                    task.model_done(out, model)
                    shown.stage_done(model.name)
                finally:
                    sink.flush()
                    if model.remote:
                        usage[model.name] = _session_usage(model, runner.worker_usage.get(model.name, []))
    _record_usage(manifest, usage, (previous.api_usage_total if previous else None) or {})
    manifest.timing = session_timing(previous, started)
    manifest.failed_passes = failures or None
    if failures and not task.finish_incomplete:
        manifest.status = "incomplete"
        write_manifest(out, manifest)
        raise _incomplete(failures, plan, out)
    table = merge_parts(out, task.schema, task.records)
    if task.records.fingerprint:
        manifest.fingerprints = run_fingerprints(table, task.records.fingerprint, task.records.order, manifest.model_names)
    manifest.status = "incomplete" if failures else "complete"
    write_manifest(out, manifest)
    result = _finished(task, out, manifest, spec.command, render)
    if failures:
        raise _incomplete(failures, plan, out)
    return result


def announced(work: Work, sent: Callable[[Any], None]) -> Work:
    """`work` whose jobs call `sent` as their input is built, which every executor does as it
    sends a job to a worker: the bar's label follows the work running, not the work just done."""
    def item(job: Any) -> Any:
        sent(job)
        return work.item(job)

    return replace(work, item=item)


def session_timing(previous: Manifest | None, started: float) -> dict[str, Any]:
    """This session's seconds and the run's over every session so far: an interrupted session
    (Ctrl-C, `kill`) records its own before it stops, so a run finished over several sessions
    counts them all (only a SIGKILLed session's time is lost)."""
    seconds = round(time.time() - started, 2)
    earlier = (previous.timing or {}) if previous else {}
    total = round(earlier.get("seconds_all_sessions", earlier.get("seconds_this_session", 0.0)) + seconds, 2)
    return {"seconds_this_session": seconds, "seconds_all_sessions": total, "resumed": previous is not None}


def _finished(task: RunTask[R], out: Path, manifest: Manifest, command: str, render: Rendering | None) -> R:
    """The task's result of a run whose records are merged, rendered and written into the run directory."""
    result = task.finish(out, manifest)
    if not isinstance(result, Result):  # a sub-run (the noise floor's diff, inside its run's folder) returns its manifest: no result of its own
        return result
    if render is None:
        raise TypeError(f"{command}: a task whose finish returns a Result is run with render=")
    return save_result(out, result, command, render)  # type: ignore[return-value]  # the task's R is its Result


def write_posthoc(out: Path, result: Result, command: str, config: dict[str, Any], inputs: Sequence[str | Path], seconds: float, render: Rendering) -> Result:
    """Write the result of a command that computes from finished outputs and loads no model
    (compare, trends, probe-report, agreement, leval, leval-corr), then its manifest: what it
    read and with which settings, so its folder says what it is like every run directory.
    Returns the result as rendered."""
    out = Path(out)
    check_posthoc_out(out, command)
    result = save_result(out, result, command, render)
    manifest = Manifest(command=command, run_id=config_id(config), config=config, models=[], status="complete",
                        created=now(), versions=versions(), plan={"inputs": [str(p) for p in inputs]}, timing={"seconds_this_session": round(seconds, 2)})
    write_manifest(out, manifest)
    return result


def write_combined(out: Path, manifest: Manifest) -> Manifest:
    """The manifest of a run combined from finished runs in its subfolders (`ruler --until`'s
    rounds), written beside the records combined from theirs; returned as read back."""
    write_manifest(Path(out), manifest)
    return read_manifest(Path(out))


def save_result(out: Path, result: Result, command: str, render: Rendering) -> Result:
    """Write `result` into `out` with its texts and figure rendered by `render`: its files, its
    figure, then its header; returns the rendered result. Also how a finished run's result is
    written again with what a later step added (`summary --write`'s metric settings, `score
    --noise-floor`'s floor); records and manifest stay."""
    result = render.texts(result)
    write_result(out, result, command, render.draw)
    return result


def check_posthoc_out(out: Path, command: str) -> None:
    """Refuse, before any work, a folder holding another command's run (as `run` does)."""
    check_folder(Path(out))
    previous = existing_manifest(Path(out))
    if previous is not None and previous.command != command:
        found = f"{a_or_an(previous.command)} run" if previous.command else "a run of an unknown kind"
        raise FieldError("out", f"{out} holds {found}, not a {command} output; choose another {{name}} or remove it")


def estimate(task: RunTask, out: Path, what: Callable[[list[WorkerModel], Plan], dict]) -> dict:
    """A dry run: load the models and plan (work already recorded in `out` left out), then
    return `what` of the plan; nothing is sent to a model and nothing is written."""
    out = Path(out)
    models = [s.load() for s in task.load_specs()]
    try:
        return what(models, task.plan(models, done_passes(out, task.records) if out.exists() else set()))
    finally:
        for model in models:
            model.close()


def _incomplete(failures: list[dict], plan: Plan, out: Path) -> IncompleteRun:
    return IncompleteRun(
        f"{len(failures)} of {plan.units} {plan.noun} failed and were not recorded "
        f"(first: {failures[0]['error']}); see failed_passes in {out / MANIFEST_FILE}; re-run the same command to retry them"
    )


def _session_usage(model: WorkerModel, worker_usage: list[dict]) -> dict:
    """Requests and tokens one API model used in this session: the driver's connection and
    its executor's workers' together (cache hits are free)."""
    total = model.usage()
    for other in worker_usage:
        total = add_counts(total, other)
    return total


def _record_usage(manifest: Manifest, usage: dict[str, dict], earlier: dict) -> None:
    """`api_usage` (this session) and `api_usage_total` (every session of this run directory)."""
    if usage:
        manifest.api_usage = usage
        manifest.api_usage_total = {name: add_counts(earlier.get(name, {}), session) for name, session in usage.items()}


def add_counts(a: dict, b: dict) -> dict:
    """Sum of two usage records (numbers added, nested counts too; other values from `b`)."""
    out = dict(a)
    for key, value in b.items():
        if isinstance(value, dict):
            out[key] = add_counts(a.get(key, {}) if isinstance(a.get(key), dict) else {}, value)
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and isinstance(a.get(key), (int, float)):
            out[key] = a[key] + value
        else:
            out[key] = value
    return out


def versions() -> dict[str, str]:
    """The software a run was made with, as its manifest records it."""
    versions = {"python": platform.python_version(), "platform": platform.platform()}
    for package in ("ctxeval", "llama-cpp-python", "numpy", "pyarrow", "pandas"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = "not installed"
    return versions


@contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """Treat SIGTERM (`kill`) like Ctrl-C, so finished work is flushed before exiting."""
    def handler(signum, frame):
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def incomplete_if_interrupted(out: Path, manifest: Manifest, timing: Callable[[], dict[str, Any]]) -> Iterator[None]:
    """An interrupted session (Ctrl-C, `kill`) leaves the run `incomplete`, with the time it ran:
    its finished work is on disk and the same command resumes it."""
    try:
        yield
    except KeyboardInterrupt:
        manifest.status = "incomplete"
        manifest.timing = timing()
        write_manifest(out, manifest)
        raise
