"""Execute a planned run: score every pass, write records as it goes, resume after interruption.

The run directory's identity is the run id (a hash of everything that decides the records).
Re-running the same command into the same directory scores only the passes that are missing;
a different configuration is refused rather than mixed in.
"""

from __future__ import annotations

import math
import platform
import signal
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from ctxeval.backends.base import ModelInfo, ScheduledScores, Scorer
from ctxeval.config import MetricConfig, RunConfig
from ctxeval.data.texts import Text
from ctxeval.errors import ScoringFailed, UserError
from ctxeval.manifest import MANIFEST_FILE, Manifest, existing_manifest, now, write_manifest
from ctxeval.pieces import has_pieces, write_pieces
from ctxeval.plan_stream import Planner, document_jobs, plan_documents
from ctxeval.executors import ExecutorOptions, ScorerSpec, open_executor
from ctxeval.executors.work import scoring_work
from ctxeval.records import RowSink, done_passes, merge_parts, schema_for, temperature_column
from ctxeval.report.outputs import write_outputs
from ctxeval.tokens import TokenizedText
from ctxeval.windows import Pass


# A planner turns the models and the texts as tokenized by each ([model][text]) into passes
# ([model][text][pass]) and facts about the plan for the manifest (plan_stream.Planner); it is
# called one document at a time.


def execute(
    config: RunConfig,
    texts: Iterable[Text],
    model_specs: list[str],
    run_dir: Path,
    planner: Planner,
    progress: bool = True,
    n_threads: int | None = None,
    openai_options=None,
    dry_run: bool = False,
    finish: Callable[[Path, Manifest, MetricConfig], Any] = write_outputs,
    input_facts: dict | None = None,
    executor: ExecutorOptions | None = None,
) -> Any:
    """Plan, score missing passes, merge records, then `finish` writes the outputs (by default
    summaries, tables and plots) and returns the result.

    `texts` is read again for each pass over it (a list, or a lazy `Corpus`): planning and
    scoring hold one document at a time (plan_stream). `input_facts` (a corpus's options and
    skipped bad documents) go into the manifest as `corpus`.

    `executor` says where passes run (default: in this process); records do not depend on it.
    With `dry_run`, only plan and return what the run would send to API backends (nothing is
    scored or written). Passes a backend fails to score (`ScoringFailed`) are left out of the
    records, listed in the manifest, and reported by raising `IncompleteRun`; a re-run retries them.
    """
    run_dir = Path(run_dir)
    manifest_path = run_dir / MANIFEST_FILE
    previous = existing_manifest(run_dir, config.run_id())
    if previous is not None and previous.status == "complete" and not dry_run:
        if not has_pieces(run_dir):
            _add_pieces([ScorerSpec(spec, n_threads, openai_options, config.device, config.dtype) for spec in model_specs], run_dir)
        return finish(run_dir, previous, config.metrics)

    started = time.time()
    (executor or ExecutorOptions()).check()
    load_specs = [ScorerSpec(spec, n_threads, openai_options, config.device, config.dtype) for spec in model_specs]
    with ExitStack() as stack:
        # the executor first: its workers start loading the first model while the driver loads
        # and plans (and Ray installs its own SIGTERM handler when it connects)
        runner = None if dry_run else stack.enter_context(open_executor(executor))
        if runner is not None:
            runner.warm(load_specs[0])
        scorers = [s.load() for s in load_specs]
        plan, plan_facts, text_entries, held = plan_documents(planner, scorers, texts)
        if dry_run:
            estimate = _estimate(scorers, config, plan, done_passes(run_dir) if run_dir.exists() else set())
            for scorer in scorers:
                scorer.close()
            return estimate
        run_dir.mkdir(parents=True, exist_ok=True)
        manifest = _manifest(config, scorers, text_entries, plan, plan_facts, previous)
        if input_facts is not None:
            manifest.corpus = input_facts | {"skipped_documents": sum(1 for t in text_entries if "skipped" in t)}
        write_manifest(run_dir, manifest)

        schema = schema_for(config.temperatures)
        done = done_passes(run_dir)
        sink = RowSink(run_dir, schema)
        total = sum(p.n_targets for per_model in plan for per_text in per_model for p in per_text)
        already = _count_done_targets(plan, done)
        failures: list[dict] = []
        with terminate_as_interrupt(), progress_bar(progress, total, already) as advance:
            pass_index = 0
            for model_index, (scorer, load_spec, per_model) in enumerate(zip(scorers, load_specs, plan)):
                jobs = document_jobs(scorer, per_model, texts, pass_index, done, {d: per[model_index] for d, per in held.items()})
                pass_index += sum(len(passes) for passes in per_model)
                try:
                    for job, result in runner.stream(scorer, load_spec, scoring_work(scorer, config, jobs)):
                        index, tt, p = job
                        if isinstance(result, ScoringFailed):
                            failures.append({"pass_index": index, "model": scorer.info.name, "text_id": tt.text.text_id, "window_id": p.window_id, "error": str(result)})
                        else:
                            _append_rows(scorer, config, tt, p, index, result, sink.columns)
                        advance(p.n_targets, f"{scorer.info.name} · {tt.text.text_id} · {p.window_id}")
                        sink.unit_done()
                    sink.flush()
                    write_pieces(run_dir, scorer.info.name, scorer.token_bytes)
                finally:
                    sink.flush()
                    _record_usage(manifest, scorers, (previous.api_usage_total if previous else None) or {}, runner.worker_usage)
                    scorer.close()
    manifest.timing = {"seconds_this_session": round(time.time() - started, 2), "resumed": previous is not None}
    if failures:
        manifest.status = "incomplete"
        manifest.failed_passes = failures
        write_manifest(run_dir, manifest)
        raise IncompleteRun(
            f"{len(failures)} of {len(plan_passes(plan))} passes failed and were not scored "
            f"(first: {failures[0]['error']}); see failed_passes in {manifest_path}; re-run the same command to retry them"
        )
    manifest.failed_passes = None
    merge_parts(run_dir, schema)
    manifest.status = "complete"
    write_manifest(run_dir, manifest)
    return finish(run_dir, manifest, config.metrics)


def _add_pieces(specs: list[ScorerSpec], run_dir: Path) -> None:
    """Token pieces for a complete run that has none (written by an older ctxeval): each model's
    tokenizer is loaded (llama.cpp: the vocabulary only) and nothing is scored."""
    for spec in specs:
        scorer = spec.load()
        try:
            write_pieces(run_dir, scorer.info.name, scorer.token_bytes)
        finally:
            scorer.close()


class IncompleteRun(UserError):
    """Some passes could not be scored; the records hold every other pass."""


def plan_passes(plan: list[list[list[Pass]]]) -> list[Pass]:
    return [p for per_model in plan for per_text in per_model for p in per_text]


def _record_usage(manifest: Manifest, scorers: list[Scorer], earlier: dict, worker_usage: dict[str, list[dict]]) -> None:
    """Requests and tokens each API model used in this invocation (`api_usage`; cache hits are
    free), the driver's and its executor's workers' together, and over every session of this run
    directory (`api_usage_total`)."""
    usage = {}
    for s in scorers:
        if s.remote:
            usage[s.info.name] = s.usage()
            for other in worker_usage.get(s.info.name, []):
                usage[s.info.name] = add_counts(usage[s.info.name], other)
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


def _estimate(scorers: list[Scorer], config: RunConfig, plan: list[list[list[Pass]]], done: set[int]) -> dict:
    """What scoring the missing passes would send: requests and tokens per API model (upper
    bounds for the generation paths, whose reuse is only known afterwards)."""
    out: dict[str, dict] = {}
    index = 0
    for scorer, per_model in zip(scorers, plan):
        totals = {"passes": 0, "requests": 0, "prompt_tokens": 0, "completion_tokens": 0}
        for per_text in per_model:
            for p in per_text:
                if index not in done and scorer.remote:
                    if p.context_mode == "thesis":
                        requests, prompt_tokens, completion_tokens = scorer.estimate_thesis(p.nominal_len, p.n_targets, config.n_compare, config.exhaustive)
                    else:
                        requests, prompt_tokens, completion_tokens = scorer.estimate(p.n_input, p.n_targets)
                    totals["passes"] += 1
                    totals["requests"] += requests
                    totals["prompt_tokens"] += prompt_tokens
                    totals["completion_tokens"] += completion_tokens
                index += 1
        if scorer.remote:
            out[scorer.info.name] = totals | {"mode": scorer.api_mode or "prompt (assumed; give --api-mode)"}
    return out


def check_context(infos: list[ModelInfo], max_tokens: int, what: str) -> None:
    """Refuse windows longer than a model's training context (BOS included)."""
    for info in infos:
        needed = max_tokens + (1 if info.uses_bos else 0)
        if needed > info.n_ctx_train:
            raise UserError(f"{what} needs {needed} tokens per pass, beyond {info.name}'s training context of {info.n_ctx_train}")


def _append_rows(scorer: Scorer, config: RunConfig, tt: TokenizedText, p: Pass, pass_index: int, result, out: dict[str, list]) -> None:
    """Append the records of one scored pass to `out`, with each target's actual context length."""
    info = scorer.info
    if isinstance(result, ScheduledScores):
        scores, context_lens = result.scores, result.context_len
    else:
        scores, context_lens = result, p.context_lens()
    targets = np.arange(p.target_start, p.target_start + len(scores.logprob))
    target_ids = tt.ids[targets]
    n = len(targets)
    out["pass_index"].extend([pass_index] * n)
    out["model"].extend([info.name] * n)
    out["text_id"].extend([tt.text.text_id] * n)
    out["method"].extend([p.method] * n)
    out["context_mode"].extend([p.context_mode] * n)
    out["nominal_len"].extend([p.nominal_len] * n)
    out["repeat"].extend([p.repeat] * n)
    out["window_id"].extend([p.window_id] * n)
    out["context_len"].extend(context_lens.tolist())
    out["target_pos"].extend(targets.tolist())
    out["char_start"].extend(tt.char_starts[targets].tolist())
    out["char_end"].extend(tt.char_ends[targets].tolist())
    out["n_bytes"].extend(tt.n_bytes[targets].tolist())
    out["target_id"].extend(target_ids.tolist())
    out["target_text"].extend(scorer.token_bytes(int(t)).decode("utf-8", errors="replace") for t in target_ids)
    # an API backend knows neither a rank beyond its top-k (rank 0) nor the log-probability of
    # a generated-path reference outside the returned tokens (NaN): both are stored as null
    out["logprob"].extend(None if math.isnan(x) else x for x in scores.logprob.tolist())
    out["rank"].extend(r if r > 0 else None for r in scores.rank.tolist())
    out["greedy_id"].extend(scores.greedy_id.tolist())
    out["topk_ids"].extend(scores.topk_ids.tolist())
    out["topk_logprobs"].extend(scores.topk_logprobs.tolist())
    for j, t in enumerate(config.temperatures):
        if t != 1.0:
            out[temperature_column(t)].extend(scores.temp_logprobs[:, j].tolist())


def _count_done_targets(plan: list[list[list[Pass]]], done: set[int]) -> int:
    count, index = 0, 0
    for per_model in plan:
        for per_text in per_model:
            for p in per_text:
                if index in done:
                    count += p.n_targets
                index += 1
    return count


def _manifest(config: RunConfig, scorers: list[Scorer], texts: list[dict], plan, plan_facts: dict, previous: Manifest | None) -> Manifest:
    return Manifest(
        command=config.command,
        run_id=config.run_id(),
        created=(previous.created if previous else None) or now(),
        config=asdict(config),
        models=model_entries(scorers),
        texts=texts,
        text_handling="files decoded as UTF-8 byte-exactly: no newline translation, no normalisation",
        bos="every pass starts with the model's BOS token when it uses one; BOS is never counted as context and never scored",
        rank_convention="rank = 1 + number of vocabulary entries with a strictly larger logit",
        plan=plan_facts | {"passes": sum(len(t) for m in plan for t in m), "targets": sum(p.n_targets for m in plan for t in m for p in t)},
        versions=versions(),
    )


def model_entries(scorers: list[Scorer]) -> list[dict]:
    """Each model's identity and what its backend can measure, as a manifest records them."""
    return [asdict(s.info) | {"capabilities": asdict(s.capabilities)} for s in scorers]


def versions() -> dict[str, str]:
    versions = {"python": platform.python_version(), "platform": platform.platform()}
    for package in ("ctxeval", "llama-cpp-python", "numpy", "pyarrow", "pandas"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = "not installed"
    return versions


@contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """Treat SIGTERM (`kill`) like Ctrl-C, so finished passes are flushed before exiting."""
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
def progress_bar(enabled: bool, total: int, already: int, unit: str = "tokens") -> Iterator[Callable[[int, str], None]]:
    """A rich progress bar on stderr (or nothing); yields advance(n, label)."""
    if not enabled:
        yield lambda n, label: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    columns = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn(unit), TimeElapsedColumn(), TimeRemainingColumn()]
    with Progress(*columns, console=Console(stderr=True), transient=False) as bar:
        task = bar.add_task("scoring", total=total, completed=already)

        def advance(n: int, label: str) -> None:
            bar.update(task, advance=n, description=label)

        yield advance
