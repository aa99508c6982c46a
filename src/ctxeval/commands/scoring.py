"""sweep, score and summary: token scoring of texts and the tables of a finished run."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Optional

from ctxeval.backends.openai_options import OpenAIOptions, dry_run_table
from ctxeval.backends.registry import ModelSpec
from ctxeval.commands import common
from ctxeval.commands.base import Command
from ctxeval.config import DEFAULT_LENGTHS, RunConfig
from ctxeval.metrics.config import MetricConfig, parse_cutoff
from ctxeval.data.corpus import Corpus, CorpusOptions, open_corpus
from ctxeval.data.texts import DEMO_TEXT_NAME
from ctxeval.errors import UserError, a_or_an
from ctxeval.modeldiff.acted import check_layout, presses
from ctxeval.modeldiff.finish import FloorRun, measure_noise_floor
from ctxeval.modeldiff.noise_floor import NoiseFloor, floor_dir
from ctxeval.render.diff import floor_line
from ctxeval.modeldiff.summary import bucket_edges
from ctxeval.options import argument, check_spec, comma_floats, comma_ints, fail, group, joined, one_of, option, positive, python_only
from ctxeval.pipeline import windows
from ctxeval.pipeline.engine import estimate, run, save_result
from ctxeval.render.kinds import RENDERING
from ctxeval.pipeline.executors import ExecutorOptions
from ctxeval.scoring.planning import ScorePlanner, SweepPlanner
from ctxeval.render.numerics import run_markdown
from ctxeval.results.base import Result, read_header, read_result
from ctxeval.results.manifest import MANIFEST_FILE, SCORING_COMMANDS, read_manifest
from ctxeval.results.runs import load_run
from ctxeval.render.tables import markdown_tables
from ctxeval.results.scoring import RunResult, stored_noise_floor
from ctxeval.scoring.finish import scoring_result
from ctxeval.scoring import Finish, ScoringRun, scoring_spec

_THESIS = ("exact", "approx", "both", "thesis")


@dataclass(frozen=True, kw_only=True)
class TokenScoringOptions(common.ModelRunOptions):
    """What sweep and score share: the records kept, the metrics, the model's settings, the
    API options, the corpus, the executor and the output."""

    top_k: int = common.top_k()
    temperatures: tuple[float, ...] = common.temperatures()
    metrics: MetricConfig = group(MetricConfig)
    openai: OpenAIOptions = group(OpenAIOptions)
    dry_run: bool = common.dry_run()
    corpus: CorpusOptions = common.corpus()
    executor: ExecutorOptions = common.executor(gpus=True)


@dataclass(frozen=True)
class SweepSpec(TokenScoringOptions):
    """Rank-based perplexity over context lengths (the thesis protocol)."""

    texts: tuple[str, ...] = argument("UTF-8 text files, corpus folders, .jsonl/.json or .parquet corpora; 'demo' (the default) is the bundled Chesterton excerpt.",
                                      (DEMO_TEXT_NAME,), cli_type=Optional[list[str]], shown=None, to_value=lambda v: tuple(v) if v else (DEMO_TEXT_NAME,))
    models: tuple[str, ...] = common.models(truncates=True)
    lengths: tuple[int, ...] = option("--lengths", "Comma-separated context lengths in tokens.", DEFAULT_LENGTHS, cli_type=str, shown=joined(DEFAULT_LENGTHS),
                                      to_value=comma_ints("--lengths"), check=lambda v: "must name at least one context length" if not v else positive(v))
    n_compare: int = option("--n-compare", "n_c: consecutive targets scored per start.", 30, check=positive)
    seed: int = common.seed()
    repeats: int = option("--repeats", "Independent seeded starts per length.", RunConfig.repeats, check=positive)
    context_mode: str = option("--context-mode", "exact: every target sees exactly L tokens (one pass per target); approx: one pass of L+n_c tokens (contexts L..L+n_c-1); both: run both and report their mean |delta logprob|; thesis (openai generate/chat): the thesis's API schedule, each request sends exactly L tokens, reused generated steps see L+j.",
                               "exact", check=one_of(_THESIS))
    exhaustive: bool = option("--exhaustive", "--context-mode thesis: stop after n_c requests (exhaustive; comparisons may exceed n_c) or after n_c comparisons (default).", False, negative="--non-exhaustive")

    def check(self) -> None:
        _check_token_scoring(self)


@dataclass(frozen=True)
class ScoreSpec(TokenScoringOptions):
    """Perplexity and rank scores of whole texts (every document of every input) with chunked, sliding or fixed windows."""

    texts: tuple[str, ...] = argument(common.TEXT_INPUTS, cli_type=list[str], to_value=tuple)
    method: str = option("--method", "chunked: disjoint windows; sliding: window W moved by stride S, each token scored once; fixed: every target sees the W tokens before it (all of them while fewer than W exist; see --head).",
                         "chunked", check=one_of(windows.METHODS))
    window: int = option("--window", "Window W (for fixed: the context length).", 1024, check=positive)
    stride: int | None = common.stride()
    head: str | None = option("--head", "--method fixed only. full (default, paper 002): score the first W tokens with all their previous tokens, so fixed covers the same tokens as chunked; skip: leave them out, so every target sees exactly W tokens.",
                              None, check=one_of(windows.HEADS))
    model: str = common.model(truncates=True)
    max_tokens: int | None = common.max_tokens()
    seed: int = common.seed()
    noise_floor: NoiseFloor | None = group(NoiseFloor, optional=True)

    def check(self) -> None:
        if self.method == "sliding" and self.stride is None:
            raise fail(ScoreSpec, "stride", "--method sliding needs {name}")
        if self.method != "sliding" and self.stride is not None:
            raise fail(ScoreSpec, "stride", f"applies only to --method sliding, not {self.method}")
        if self.method != "fixed" and self.head is not None:
            raise fail(ScoreSpec, "head", f"applies only to --method fixed, not {self.method}")
        if self.method == "chunked" and common.model_spec(self.model).pressed:
            raise fail(ScoreSpec, "method", "chunked scores every token of a window from its start, so a pressed model has no context to compress; "
                       "use --method sliding --stride S, effective-length or context-gain")
        _check_variant_acts(self)
        if self.noise_floor is not None and self.method == "fixed":
            raise fail(ScoreSpec, "noise_floor", "re-scores chunked or sliding windows, not --method fixed")
        _check_token_scoring(self)


@dataclass(frozen=True)
class SummarySpec:
    """Print a finished run's tables. A sweep or score run's (thesis Table 1/2 and Appendix A
    shapes) are recomputed from its records: "PPL (exact)" is the perplexity; "approx PPL
    (thesis, top-k, penalty p)" is what the thesis's tables call PPL. Any other output folder
    (ruler, diff, effective-length, compare, ...), of this ctxeval's version or an earlier one,
    prints its tables rendered from its stored rows; with --write they are rewritten in this
    version."""

    run_dir: Path = argument("A finished run directory.")
    cutoff: str | None = option("--cutoff", "Override the run's rank cutoff (integer or 'full').", None)
    alphas: str | None = option("--alphas", "Override the run's alphas.", None)
    approx_k: int | None = option("--approx-k", "Override the run's approximate-PPL k.", None)
    penalty: float | None = option("--penalty", "Override the run's approximate-PPL penalty.", None)
    write: bool = option("--write", "Also rewrite the run's summary files with these settings.", False)
    thesis: bool = option("--thesis", "Print only the thesis's tables: Table 1 (AVG), Table 2 and Appendix A's rows, whose \"PPL\" is the approximate perplexity (top-k, penalty); without it, also the exact PPL, TOP1 and BPB.", False)
    metrics: MetricConfig | None = python_only(None)  # Python callers may give all settings at once

    def settings(self, stored: MetricConfig) -> MetricConfig:
        """The run's metric settings with this command's overrides."""
        base = self.metrics or stored
        changes: dict[str, Any] = {}
        if self.cutoff is not None:
            changes["cutoff"] = parse_cutoff(self.cutoff, "--cutoff")
        if self.alphas is not None:
            changes["alphas"] = comma_floats("--alphas")(self.alphas)
        if self.approx_k is not None:
            changes["approx_k"] = self.approx_k
        if self.penalty is not None:
            changes["penalty"] = self.penalty
        return replace(base, **changes)


@dataclass(frozen=True)
class ScoringDisplay:
    quiet: bool = common.quiet()
    price_in: float | None = option("--price-in", "With --dry-run: price per 1M prompt tokens.", None)
    price_out: float | None = option("--price-out", "With --dry-run: price per 1M completion tokens.", None)


def _from_cli(spec: Any, display: ScoringDisplay) -> Any:
    return replace(spec, progress=not display.quiet and not spec.dry_run)


def run_sweep(spec: SweepSpec) -> RunResult | dict:
    """The thesis protocol: per context length, `repeats` seeded starts, `n_compare` targets each
    with exactly L tokens of context (`exact`), or one pass per start (`approx`), or `both`; or,
    for API models, the thesis's own API schedule (`thesis`: contexts L, L + j on reused
    generated steps; n_c comparisons, or n_c requests if `exhaustive`; `gen_tokens` default n_c).

    Every model starts each (text, length, repeat) at the same character, so runs of models
    with different tokenizers score the same stretch of text. `texts` may be corpora (folders,
    JSON lines, Parquet; see `corpus`); a document too short for a length is skipped and counted.
    """
    modes = ("exact", "approx") if spec.context_mode == "both" else (spec.context_mode,)
    lengths = tuple(sorted(set(spec.lengths)))
    thesis = spec.context_mode == "thesis"
    openai = spec.openai
    if thesis:
        openai = _thesis_options(spec.models, openai, spec.n_compare)
    elif spec.exhaustive:
        raise fail(SweepSpec, "exhaustive", "applies to --context-mode thesis only")
    loaded = open_corpus(spec.texts, spec.corpus)
    config = RunConfig.of_documents(
        "sweep", loaded.refs, spec.models,
        top_k=spec.top_k,
        temperatures=_temperatures(spec.temperatures),
        lengths=lengths,
        n_compare=spec.n_compare,
        seed=spec.seed,
        repeats=spec.repeats,
        context_modes=modes,
        exhaustive=spec.exhaustive,
        metrics=spec.metrics,
        device=spec.device,
        dtype=spec.dtype,
        backend_options=_backend_options(spec.models, openai),
    )
    # a thesis pass may reach n_c targets, or n_c requests of gen_tokens each if exhaustive
    gen_tokens = openai.tokens_per_request if thesis else 1
    thesis_targets = spec.n_compare * gen_tokens if spec.exhaustive else spec.n_compare
    planner = SweepPlanner(lengths, spec.n_compare, spec.seed, spec.repeats, modes, thesis_targets, gen_tokens)
    return run_scoring(config, loaded, common.model_specs(spec.models), planner, common.out_dir(spec.out, "sweep", config), spec, openai, dry_run=spec.dry_run)


def run_score(spec: ScoreSpec) -> RunResult | dict:
    """Score whole texts (or their first `max_tokens` tokens) with `chunked`, `sliding` or `fixed` windows.

    `noise_floor`: afterwards, a seeded sample of the windows scored again with the model on a
    second numeric path and compared token by token (noise_floor.json, `modeldiff/noise_floor.py`).

    `texts`: one input or several, as for `sweep`; each may be a text file or a corpus (a folder,
    JSON lines or Parquet file; see `corpus`). Every document is scored the same way, one at a time.

    `head` (fixed only): `full` (default, paper 002's P2) scores the first `window` tokens with
    all their predecessors, so fixed and chunked cover the same tokens; `skip` leaves them out.
    """
    head = (spec.head or "full") if spec.method == "fixed" else None
    model = common.model_spec(spec.model)
    second = _second_path(model, spec.noise_floor)
    if second is not None:
        common.refuse_api_models([model, second], "--noise-floor", "the full next-token distribution")
    loaded = open_corpus(spec.texts, spec.corpus)
    config = RunConfig.of_documents(
        "score", loaded.refs, (spec.model,),
        top_k=spec.top_k,
        temperatures=_temperatures(spec.temperatures),
        method=spec.method,
        window=spec.window,
        stride=spec.stride or 0,
        head=head or "",
        max_tokens=spec.max_tokens,
        metrics=spec.metrics,
        device=spec.device,
        dtype=spec.dtype,
        backend_options=_backend_options([spec.model], spec.openai),
    )
    planner = ScorePlanner(spec.method, spec.window, spec.stride, head or "full", spec.max_tokens)
    result = run_scoring(config, loaded, [model], planner, common.out_dir(spec.out, "score", config), spec, spec.openai, dry_run=spec.dry_run)
    if spec.noise_floor is None or second is None or not isinstance(result, RunResult):
        return result
    floor = measure_noise_floor(FloorRun(model, second, spec.noise_floor, loaded, spec.window, spec.stride, spec.max_tokens, bucket_edges(spec.window, None),
                                         floor_dir(result.run_dir), spec.n_threads, spec.executor, spec.progress))
    result = replace(result, noise_floor=floor)
    result = save_result(result.run_dir, result, "score", RENDERING)
    return result


def run_summary(spec: SummarySpec) -> Result:
    """Recompute a finished run's summaries, optionally with other metric settings; `thesis`:
    `tables` holds only the thesis's tables (Table 1, Table 2 and Appendix A's rows, whose
    "PPL" is the approximate perplexity). `write` always writes the full tables. A folder of
    another kind: `kind_summary`."""
    run_dir = Path(spec.run_dir)
    if not (run_dir / MANIFEST_FILE).is_file() or read_manifest(run_dir).command not in SCORING_COMMANDS:
        return kind_summary(run_dir, spec)
    manifest, records = load_run(run_dir, "summary")
    metrics = spec.settings(manifest.metrics)
    check_spec(metrics, ("metrics",))
    result = scoring_result(run_dir, manifest, metrics, records, corpus=spec.write)
    if spec.write:
        result = save_result(run_dir, replace(result, noise_floor=stored_noise_floor(run_dir)), "summary", RENDERING)
    else:
        result = RENDERING.texts(result)
    if spec.thesis:
        result = replace(result, tables=markdown_tables(result.summary, metrics, result.approx_vs_exact, thesis=True) + "\n" + run_markdown(manifest))
    return result


def kind_summary(run_dir: Path, spec: SummarySpec) -> Result:
    """The result in `run_dir` (any kind but a scoring run's; an earlier version read through its
    kind's migration) with its texts rendered from its rows; with `write`, its files rewritten in
    this version. The metric overrides and --thesis apply to sweep/score runs only."""
    header = read_header(run_dir)
    given = [flag for flag, value in (("--cutoff", spec.cutoff), ("--alphas", spec.alphas), ("--approx-k", spec.approx_k), ("--penalty", spec.penalty),
                                      ("--thesis", spec.thesis or None)) if value is not None]
    if given:
        raise UserError(f"{given[0]} applies to sweep/score runs; {run_dir} holds {a_or_an(header['kind'])} result")
    result = RENDERING.texts(read_result(run_dir))
    return save_result(run_dir, result, header["command"] or header["kind"], RENDERING) if spec.write else result


def _echo_summary(result: Result, spec: SummarySpec, display: Any) -> str:
    """A scoring run's tables, or another kind's text (its Markdown)."""
    return result.tables if isinstance(result, RunResult) else result.text()


def run_scoring(config: RunConfig, texts: Corpus, model_specs: list[ModelSpec], planner: Any, out: Path, spec: Any, openai: OpenAIOptions | None,
                finish: Finish = scoring_result, dry_run: bool = False) -> Any:
    """A scoring run through the engine (or, with `dry_run`, what it would send to API models).
    Passes a backend fails to score are left out of the records, listed in the manifest, and
    reported by raising `IncompleteRun`; a re-run retries them."""
    task = ScoringRun(config, texts, model_specs, planner, finish, n_threads=spec.n_threads, openai_options=openai, input_facts=texts.facts())
    if dry_run:
        return estimate(task, out, task.estimate)
    return run(task, scoring_spec(config), out, render=RENDERING, executor=spec.executor, progress=spec.progress)


def _thesis_options(models: tuple[str, ...], openai: OpenAIOptions, n_compare: int) -> OpenAIOptions:
    """The thesis context mode is the API protocol of paper 000 (section 3.1.2): only for
    `openai:` models on a generation path; `gen_tokens` defaults to n_c as in the thesis."""
    local = [m for m in models if not common.model_spec(m).backend.remote]
    if local:
        raise UserError(f"--context-mode thesis is the protocol for API models that only score generated tokens; {local[0]} is not an openai: model (use exact)")
    if openai.mode == "prompt":
        raise UserError("--context-mode thesis runs the generation protocol; use --api-mode generate, chat or auto, not prompt")
    return openai.with_default_gen_tokens(n_compare)


def _backend_options(models: Sequence[str], openai: OpenAIOptions | None) -> str:
    """The API options that decide records, when any model is an `openai:` model."""
    if not any(common.model_spec(m).backend.remote for m in models):
        return ""
    return json.dumps((openai or OpenAIOptions()).identity(), sort_keys=True)


def _second_path(model: ModelSpec, floor: NoiseFloor | None) -> ModelSpec | None:
    """The typed model of a noise floor's second numeric path (None without --noise-floor)."""
    if floor is None or floor.off:
        return None
    second = common.model_spec(floor.second_spec(model.text))
    common.refuse_truncation(second, truncates=False)
    return second


def _temperatures(values: Sequence[float]) -> tuple[float, ...]:
    return tuple(sorted(set(float(t) for t in values) | {1.0}))


def _check_variant_acts(spec: ScoreSpec) -> None:
    """Refuse a layout in which a press or a `max_context` limit acts on no scored target (the
    run would read as the plain model): a press needs more context before a pass's targets than
    it keeps, a limit a target with more context than N."""
    model = common.model_spec(spec.model)
    longest = spec.window if spec.method == "fixed" else spec.window - 1
    if model.max_context is not None and longest <= model.max_context:
        raise fail(ScoreSpec, "window", f"{{name}} ({spec.window}) gives no target more than {longest} tokens of context, within {model.text}'s max_context: "
                                        f"the limit would act on no target; give a {{name}} above {model.max_context + (0 if spec.method == 'fixed' else 1)}")
    if spec.method == "sliding":
        check_layout((model,), spec.window, spec.stride)
    for _, press in presses((model,)):
        if spec.method == "fixed" and not press.acts_on(spec.window):
            raise fail(ScoreSpec, "window", f"{{name}} ({spec.window}) tokens of context are kept whole by {model.text}: the press would act on no target; give a {{name}} above "
                                            f"{press.budget if press.budget is not None else spec.window}")


def _check_token_scoring(spec: Any) -> None:
    """Rules across fields of sweep and score."""
    if spec.metrics.approx_k > spec.top_k:
        raise UserError(f"--approx-k ({spec.metrics.approx_k}) cannot exceed --top-k ({spec.top_k})")
    models = spec.models if isinstance(spec, SweepSpec) else (spec.model,)
    if (spec.device is not None or spec.dtype is not None) and not any(common.model_spec(m).backend.takes_device for m in models):
        raise UserError("--device and --dtype apply to hf: models only; no hf: model was given")


def _echo_scoring(result: Any, spec: Any, display: ScoringDisplay) -> str:
    if spec.dry_run:
        return dry_run_table(result, display.price_in, display.price_out)
    lines = [] if display.quiet else [result.tables]
    files = result.paths()
    corpus = result.manifest.corpus or {}
    if corpus.get("skipped_documents") or corpus.get("bad_documents"):
        lines.append(f"documents: {corpus['documents']} read, {corpus['bad_documents']} bad skipped, {corpus['skipped_documents']} skipped by the plan (see manifest.json)")
    lines.append(f"records: {files['records']}  ({len(result.records)} tokens)")
    lines.append(f"summary: {files['summary_json']}, {files['summary_csv']}, {files['tables']}")
    lines.append(f"plot:    {files['plot']}")
    if "corpus_json" in files:
        lines.append(f"corpus:  {files['corpus_json']}, {files['corpus_csv']} (all documents pooled; intervals resample documents)")
    if result.noise_floor is not None:
        lines.append(floor_line(result.noise_floor))
    return "\n".join(lines)


COMMANDS = (
    Command("sweep", SweepSpec, run_sweep, _echo_scoring, ScoringDisplay, _from_cli, inputs=("texts",)),
    Command("score", ScoreSpec, run_score, _echo_scoring, ScoringDisplay, _from_cli, inputs=("texts",)),
    Command("summary", SummarySpec, run_summary, _echo_summary, inputs=("run_dir",)),
)
