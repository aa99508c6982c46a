"""The public Python API; the CLI is a thin layer over these functions."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd

from ctxeval.pipeline import windows
from ctxeval.backends.openai_options import DEFAULT_CACHE, OpenAIOptions, dry_run_table
from ctxeval.backends.registry import ModelEntry, list_models, refuse_api_models
from ctxeval.config import DEFAULT_LENGTHS, DEFAULT_MODEL, DEFAULT_TOP_K, MetricConfig, RunConfig
from ctxeval.data.corpus import Corpus, CorpusOptions, open_corpus
from ctxeval.data.texts import DEMO_TEXT_NAME
from ctxeval.modeldiff.command import DiffResult, diff, measure_noise_floor
from ctxeval.modeldiff.noise_floor import NoiseFloor, floor_dir, floor_line, write_floor
from ctxeval.modeldiff.summary import Bootstrap, bucket_edges
from ctxeval.errors import UserError
from ctxeval.pipeline.executors import ExecutorOptions
from ctxeval.metrics.rank import alpha_key
from ctxeval.pipeline.manifest import SCORING_COMMANDS, Manifest, read_manifest, require_command
from ctxeval.pairing import pair_windows
from ctxeval.pipeline.planning import ContextGainPlanner, ScorePlanner, SweepPlanner
from ctxeval.probes.gain_report import ContextGainResult, KeyTokenSettings, write_context_gain
from ctxeval.probes.probe_report import write_probe_report
from ctxeval.probes.keytokens import DEFAULT_ALPHA, DEFAULT_BETA
from ctxeval.probes.retrieval_data import N_EXAMPLES, VARIANTS
from ctxeval.probes.retrieval_run import RetrievalConfig, RetrievalResult, run_retrieval
from ctxeval.qa import commands as qa_commands
from ctxeval.qa.methods import parse_methods
from ctxeval.explorer import DEFAULT_TOP_K_SHOWN, write_report as write_html_report
from ctxeval.report.compare import NAN_POLICIES, PROFILES, build_report, gate, resolve_minima, window_table, write_report
from ctxeval.report.numerics import compare_numerics, run_markdown
from ctxeval.report.outputs import RunResult, compute, load_run, write_outputs
from ctxeval.server.settings import server_settings
from ctxeval.report.summary import window_metrics
from ctxeval.report.tables import markdown_tables
from ctxeval.report.trends import metric_names, trend_table, variance_table, write_trends
from ctxeval.stats.paired import RESAMPLE_SCHEMES
from ctxeval.pipeline.engine import estimate, run
from ctxeval.scoring import Finish, ScoringRun, scoring_spec

__all__ = ["sweep", "score", "diff", "DiffResult", "Bootstrap", "NoiseFloor", "floor_line", "context_gain", "retrieval", "probe_report", "summary", "compare", "trends", "run_metrics", "models", "pplqa", "meta_eval", "leval", "leval_corr", "judge", "report", "RunResult", "Comparison", "Report", "MetricConfig", "OpenAIOptions", "DEFAULT_CACHE", "dry_run_table"]


def sweep(
    texts: Sequence[str | Path] = (DEMO_TEXT_NAME,),
    *,
    models: Sequence[str] = (DEFAULT_MODEL,),
    lengths: Sequence[int] = DEFAULT_LENGTHS,
    n_compare: int = 30,
    seed: int = 0,
    repeats: int = 1,
    context_mode: str = "exact",
    top_k: int = DEFAULT_TOP_K,
    temperatures: Sequence[float] = (1.0,),
    metrics: MetricConfig = MetricConfig(),
    out: str | Path | None = None,
    progress: bool = False,
    n_threads: int | None = None,
    device: str | None = None,
    dtype: str | None = None,
    openai: OpenAIOptions | None = None,
    dry_run: bool = False,
    exhaustive: bool = False,
    corpus: CorpusOptions = CorpusOptions(),
    executor: ExecutorOptions | None = None,
) -> RunResult | dict:
    """The thesis protocol: per context length, `repeats` seeded starts, `n_compare` targets each
    with exactly L tokens of context (`exact`), or one pass per start (`approx`), or `both`; or,
    for API models, the thesis's own API schedule (`thesis`: contexts L, L + j on reused
    generated steps; n_c comparisons, or n_c requests if `exhaustive`; `gen_tokens` default n_c).

    Every model starts each (text, length, repeat) at the same character, so runs of models
    with different tokenizers score the same stretch of text. `texts` may be corpora (folders,
    JSON lines, Parquet; see `corpus`); a document too short for a length is skipped and counted.
    """
    modes = ("exact", "approx") if context_mode == "both" else (context_mode,)
    for mode in modes:
        if mode not in windows.CONTEXT_MODES:
            raise UserError(f"unknown --context-mode {context_mode!r}; choose exact, approx, both or thesis")
    lengths = tuple(sorted(set(int(x) for x in lengths)))
    if not lengths:
        raise UserError("--lengths must name at least one context length")
    if lengths[0] < 1:
        raise UserError(f"--lengths must be positive integers, got {lengths[0]}")
    _check_common(top_k, temperatures, metrics)
    _check_backend_options(models, device, dtype)
    if repeats < 1:
        raise UserError(f"--repeats must be a positive integer, got {repeats}")
    if n_compare < 1:
        raise UserError(f"--n-compare must be a positive integer, got {n_compare}")
    thesis = context_mode == "thesis"
    if thesis:
        openai = _thesis_options(models, openai or OpenAIOptions(), n_compare)
    elif exhaustive:
        raise UserError("--exhaustive applies to --context-mode thesis only")
    loaded = _load_texts(texts, corpus)
    config = RunConfig(
        command="sweep",
        texts=tuple(r.sha256 for r in loaded.refs),
        text_ids=tuple(r.text_id for r in loaded.refs),
        models=tuple(models),
        top_k=top_k,
        temperatures=_temperatures(temperatures),
        lengths=lengths,
        n_compare=n_compare,
        seed=seed,
        repeats=repeats,
        context_modes=modes,
        exhaustive=exhaustive,
        metrics=metrics,
        device=device,
        dtype=dtype,
        backend_options=_backend_options(models, openai),
    )
    # a thesis pass may reach n_c targets, or n_c requests of gen_tokens each if exhaustive
    gen_tokens = openai.tokens_per_request if thesis else 1
    thesis_targets = n_compare * gen_tokens if exhaustive else n_compare

    planner = SweepPlanner(lengths, n_compare, seed, repeats, modes, thesis_targets, gen_tokens)
    return _run_scoring(config, loaded, list(models), planner, _out_dir(out, "sweep", config), progress, n_threads, openai, dry_run, executor)


def score(
    texts: str | Path | Sequence[str | Path],
    *,
    method: str = "chunked",
    window: int = 1024,
    stride: int | None = None,
    model: str = DEFAULT_MODEL,
    max_tokens: int | None = None,
    top_k: int = DEFAULT_TOP_K,
    temperatures: Sequence[float] = (1.0,),
    metrics: MetricConfig = MetricConfig(),
    out: str | Path | None = None,
    progress: bool = False,
    n_threads: int | None = None,
    device: str | None = None,
    dtype: str | None = None,
    openai: OpenAIOptions | None = None,
    dry_run: bool = False,
    head: str | None = None,
    corpus: CorpusOptions = CorpusOptions(),
    executor: ExecutorOptions | None = None,
    noise_floor: NoiseFloor | None = None,
) -> RunResult | dict:
    """Score whole texts (or their first `max_tokens` tokens) with `chunked`, `sliding` or `fixed` windows.

    `noise_floor`: afterwards, a seeded sample of the windows scored again with the model on a
    second numeric path and compared token by token (noise_floor.json, `modeldiff/noise_floor.py`).

    `texts`: one input or several, as for `sweep`; each may be a text file or a corpus (a folder,
    JSON lines or Parquet file; see `corpus`). Every document is scored the same way, one at a time.

    `head` (fixed only): `full` (default, paper 002's P2) scores the first `window` tokens with
    all their predecessors, so fixed and chunked cover the same tokens; `skip` leaves them out.
    """
    if method not in windows.METHODS:
        raise UserError(f"unknown --method {method!r}; choose one of {', '.join(windows.METHODS)}")
    if method == "sliding" and stride is None:
        raise UserError("--method sliding needs --stride")
    if method != "sliding" and stride is not None:
        raise UserError(f"--stride applies only to --method sliding, not {method}")
    if method != "fixed" and head is not None:
        raise UserError(f"--head applies only to --method fixed, not {method}")
    if method == "fixed":
        head = head or "full"
        if head not in windows.HEADS:
            raise UserError(f"unknown --head {head!r}; choose one of {', '.join(windows.HEADS)}")
    if max_tokens is not None and max_tokens < 1:
        raise UserError(f"--max-tokens must be a positive integer, got {max_tokens}")
    _check_common(top_k, temperatures, metrics)
    _check_backend_options([model], device, dtype)
    if noise_floor is not None:
        if method == "fixed":
            raise UserError("--noise-floor re-scores chunked or sliding windows, not --method fixed")
        refuse_api_models([model, noise_floor.second_spec(model)], "--noise-floor", "the full next-token distribution")
    loaded = _load_texts([texts] if isinstance(texts, (str, Path)) else texts, corpus)
    config = RunConfig(
        command="score",
        texts=tuple(r.sha256 for r in loaded.refs),
        text_ids=tuple(r.text_id for r in loaded.refs),
        models=(model,),
        top_k=top_k,
        temperatures=_temperatures(temperatures),
        method=method,
        window=window,
        stride=stride or 0,
        head=head or "",
        max_tokens=max_tokens,
        metrics=metrics,
        device=device,
        dtype=dtype,
        backend_options=_backend_options([model], openai),
    )

    planner = ScorePlanner(method, window, stride, head or "full", max_tokens)
    result = _run_scoring(config, loaded, [model], planner, _out_dir(out, "score", config), progress, n_threads, openai, dry_run, executor)
    if noise_floor is None or not isinstance(result, RunResult):
        return result
    floor = measure_noise_floor(model, noise_floor, loaded, window=window, stride=stride, max_tokens=max_tokens,
                                edges=bucket_edges(window, None), out=floor_dir(result.run_dir), n_threads=n_threads,
                                executor=executor, progress=progress)
    write_floor(result.run_dir, floor)
    return replace(result, noise_floor=floor)


def context_gain(
    texts: Sequence[str | Path],
    *,
    models: Sequence[str] = (DEFAULT_MODEL,),
    window: int = 2048,
    short: int = 128,
    short_stride: int | None = None,
    evaluator: str | None = None,
    alpha: float = DEFAULT_ALPHA,
    beta: float = DEFAULT_BETA,
    max_tokens: int | None = None,
    top_k: int = DEFAULT_TOP_K,
    block: int = 256,
    replicates: int = 2000,
    seed: int = 0,
    out: str | Path | None = None,
    progress: bool = False,
    n_threads: int | None = None,
    corpus: CorpusOptions = CorpusOptions(),
    executor: ExecutorOptions | None = None,
) -> ContextGainResult:
    """Score every target with its full context inside chunks of `window` tokens and with only
    about the last `short` tokens; report both perplexities, the per-token gain, its paired
    interval, gain by distance, and LongPPL over the key tokens an evaluator model picks.

    `short_stride` (default short // 4) trades cost for exactness: short contexts lie between
    `short` and `short + short_stride - 1` tokens; 1 makes them exactly `short`.
    """
    stride = short_stride if short_stride is not None else max(1, short // 4)
    for name, value in (("--window", window), ("--short", short), ("--short-stride", stride), ("--block", block)):
        if value < 1:
            raise UserError(f"{name} must be a positive integer, got {value}")
    if max_tokens is not None and max_tokens < 2:
        raise UserError(f"--max-tokens must be at least 2, got {max_tokens}")
    if replicates < 100:
        raise UserError(f"--replicates must be at least 100, got {replicates}")
    _check_common(top_k, (1.0,), MetricConfig())
    model_specs = list(dict.fromkeys(models))
    if not model_specs:
        raise UserError("no --model given")
    evaluator_spec = evaluator or model_specs[0]
    if evaluator_spec not in model_specs:
        model_specs.append(evaluator_spec)
    refuse_api_models(model_specs, "context-gain", "the log-probability of each chunk's first token given only BOS")
    loaded = _load_texts(texts, corpus)
    config = RunConfig(
        command="context-gain",
        texts=tuple(r.sha256 for r in loaded.refs),
        text_ids=tuple(r.text_id for r in loaded.refs),
        models=tuple(model_specs),
        top_k=top_k,
        method="chunked",
        window=window,
        stride=stride,
        short=short,
        max_tokens=max_tokens,
    )

    planner = ContextGainPlanner(window, short, stride, max_tokens)

    def finish(run_dir: Path, manifest: Manifest, _metrics: MetricConfig) -> ContextGainResult:
        evaluator_name = manifest.model_names[model_specs.index(evaluator_spec)]
        return write_context_gain(run_dir, manifest, KeyTokenSettings(evaluator_name, alpha, beta, block, replicates, seed))

    return _run_scoring(config, loaded, model_specs, planner, _out_dir(out, "context-gain", config), progress, n_threads, None, False, executor, finish)


def retrieval(
    *,
    variant: str = "cat",
    lines: Sequence[int] | None = (20, 50, 100),
    depths: Sequence[float] = (0.0, 0.25, 0.5, 0.75, 1.0),
    samples: int = 3,
    models: Sequence[str] = (DEFAULT_MODEL,),
    seed: int = 0,
    out: str | Path | None = None,
    progress: bool = False,
    n_threads: int | None = None,
    tokens: Sequence[int] | None = None,
    executor: ExecutorOptions | None = None,
) -> RetrievalResult:
    """Line retrieval (paper 002 appendix A.2 `cat`, or LongChat's `register`): records of `lines`
    key-value lines (or, with `tokens`, of as many lines as fit each model's prompt of that many
    tokens), the queried line at each depth, `samples` seeded records per cell; greedy exact
    match (what greedy generation produces) and the rank of the right answer, per cell."""
    if variant not in VARIANTS:
        raise UserError(f"unknown --variant {variant!r}; choose one of {', '.join(VARIANTS)}")
    if tokens:
        token_targets = tuple(sorted(set(int(t) for t in tokens)))
        if min(token_targets) < 1:
            raise UserError("--tokens must be positive integers")
        lines = ()
    else:
        token_targets = ()
        lines = tuple(sorted(set(int(n) for n in lines or ())))
        if not lines or min(lines) < N_EXAMPLES + 1:
            raise UserError(f"--lines must be integers of at least {N_EXAMPLES + 1}")
    depths = tuple(sorted(set(float(d) for d in depths)))
    if not depths or min(depths) < 0 or max(depths) > 1:
        raise UserError("--depths must be numbers between 0 and 1")
    if samples < 1:
        raise UserError(f"--samples must be a positive integer, got {samples}")
    if not models:
        raise UserError("no --model given")
    refuse_api_models(list(models), "retrieval", "the rank of the answer's first token over the whole vocabulary")
    config = RetrievalConfig(variant, lines, depths, samples, seed, tuple(dict.fromkeys(models)), tokens=token_targets)
    run_dir = Path(out) if out is not None else Path("runs") / f"retrieval-{config.run_id()[:8]}"
    return run_retrieval(config, run_dir, progress, n_threads, executor)


def probe_report(runs: Sequence[str | Path], *, out: str | Path) -> str:
    """Side-by-side Markdown report (and JSON, plot) over sweep/score, context-gain and retrieval runs."""
    _, markdown = write_probe_report([Path(r) for r in runs], Path(out))
    return markdown


def report(runs: Sequence[str | Path], *, out: str | Path = "report.html", top_k_shown: int = DEFAULT_TOP_K_SHOWN) -> Path:
    """One offline HTML file over any mix of finished runs: headers, headline numbers, charts
    and a per-token explorer (`top_k_shown` alternatives per token are embedded)."""
    return write_html_report([Path(r) for r in runs], Path(out), top_k_shown)


def run_metrics(run_dir: str | Path) -> MetricConfig:
    """The metric settings a run was made with."""
    return require_command(read_manifest(Path(run_dir)), Path(run_dir), "summary", SCORING_COMMANDS).metrics


def summary(run_dir: str | Path, *, metrics: MetricConfig | None = None, write: bool = False, thesis: bool = False) -> RunResult:
    """Recompute a finished run's summaries, optionally with other metric settings; `thesis`:
    `tables` holds only the thesis's tables (Table 1, Table 2 and Appendix A's rows, whose
    "PPL" is the approximate perplexity). `write` always writes the full tables."""
    manifest, records = load_run(Path(run_dir), "summary")
    metrics = metrics or manifest.metrics
    _check_metrics(metrics)
    result = write_outputs(Path(run_dir), manifest, metrics) if write else compute(Path(run_dir), manifest, records, metrics)
    if thesis:
        result.tables = markdown_tables(result.summary, metrics, result.approx_vs_exact, thesis=True) + "\n" + run_markdown(manifest)
    return result


@dataclass
class Comparison:
    """A paired comparison: the report, where it was written, and why a profile failed it."""

    report: dict
    out: Path
    failures: list[str]
    markdown: str = ""  # what compare.md holds


def compare(
    run_a: str | Path,
    run_b: str | Path,
    *,
    out: str | Path,
    replicates: int = 2000,
    seed: int = 0,
    cluster_by_text: bool | None = None,
    profile: str = "dev",
    min_windows: int | None = None,
    min_tokens: int | None = None,
    max_ratio: float | None = None,
    model_a: str | None = None,
    model_b: str | None = None,
    context_mode_a: str | None = None,
    context_mode_b: str | None = None,
    nan_windows: str = "exclude",
    resample: str = "windows",
) -> Comparison:
    """Is B worse than A, by how much, how sure are we: the paired perplexity ratio over the
    windows both runs scored, with a BCa interval, and the same for the rank scores. Windows
    with a NaN loss in either arm are left out and listed (`nan_windows="error"` refuses them).
    `cluster_by_text` None (default) resamples whole documents when at least
    `report.compare.MIN_CLUSTERS` are compared, windows otherwise. `resample` "windows" draws
    units uniformly (ratio of sums); "tokens" draws them with probability ∝ their tokens and
    averages their Δ (paper 001's wording; covers less when windows differ, docs/design.md)."""
    if profile not in PROFILES:
        raise UserError(f"unknown --profile {profile!r}; choose one of {', '.join(PROFILES)}")
    if nan_windows not in NAN_POLICIES:
        raise UserError(f"unknown --nan-windows {nan_windows!r}; choose one of {', '.join(NAN_POLICIES)}")
    if resample not in RESAMPLE_SCHEMES:
        raise UserError(f"unknown --resample {resample!r}; choose one of {', '.join(RESAMPLE_SCHEMES)}")
    if replicates < 100:
        raise UserError(f"--replicates must be at least 100, got {replicates}")
    manifest_a, records_a = load_run(Path(run_a), "compare")
    manifest_b, records_b = load_run(Path(run_b), "compare")
    metrics = manifest_a.metrics
    a = window_table(records_a, manifest_a, metrics, model_a, context_mode_a, "A")
    b = window_table(records_b, manifest_b, metrics, model_b, context_mode_b, "B")
    pairing = pair_windows(a, b)
    if pairing.paired.empty:
        raise UserError("the two runs share no windows: they scored different texts, lengths, repeats or spans")
    scores = ["lin", "rp", *(alpha_key(x) for x in metrics.alphas), "avg"]
    minima = resolve_minima(profile, min_windows, min_tokens)
    report = build_report(pairing, (str(run_a), str(run_b)), replicates, seed, cluster_by_text, scores, nan_windows, resample, minima)
    report["profile"] = profile
    report["numerics"] = compare_numerics(manifest_a, model_a or records_a["model"].iloc[0], manifest_b, model_b or records_b["model"].iloc[0])
    failures = gate(report, profile, max_ratio)
    report["gates"] = {"passed": not failures, "failures": failures}
    markdown = write_report(report, Path(out))
    return Comparison(report, Path(out), failures, markdown)


def trends(run_dir: str | Path, *, out: str | Path | None = None, outlier_sd: float = 2.0) -> tuple[pd.DataFrame, pd.DataFrame, str]:
    """Slopes of every metric against context length (raw and log2), with SE, p-value and CI,
    and the spread across repeated starts with flagged outliers. Writes trends.json/.md."""
    if outlier_sd <= 0:
        raise UserError(f"--outlier-sd must be positive, got {outlier_sd}")
    manifest, records = load_run(Path(run_dir), "trends")
    metrics = manifest.metrics
    per_window = window_metrics(records, metrics, manifest.vocab_sizes, manifest.temperatures)
    names = metric_names(metrics.alphas)
    trend, variance = trend_table(per_window, names), variance_table(per_window, names, outlier_sd)
    markdown = write_trends(Path(out) if out is not None else Path(run_dir), trend, variance, outlier_sd)
    return trend, variance, markdown


def models() -> list[ModelEntry]:
    """Models and backends usable on this machine."""
    return list_models()


@dataclass(frozen=True)
class Report:
    """What a report command computed (`value`: the command's own result), the Markdown it
    wrote, its files, and notes worth a warning; the CLI prints these and reads nothing back."""

    value: Any
    markdown: str
    files: tuple[Path, ...] = ()
    notes: tuple[str, ...] = ()


def leval(predictions: str | Path, *, out: str | Path = Path("runs/leval"), variant: str = "leval", tokenize: str = "plain", progress: bool = False) -> Report:
    """L-Eval metrics of prediction files (exact match, F1 or ROUGE, ΔL); writes scores.json/.md."""
    from ctxeval.leval.report import SCORES_JSON, SCORES_MD, markdown, run_leval

    out = Path(out)
    result = run_leval(Path(predictions), out, variant, progress=progress, tokenize=tokenize)
    return Report(result, markdown(result), (out / SCORES_JSON, out / SCORES_MD), tuple(result.notes()))


def leval_corr(metrics: Sequence[str], human: str | Path, *, column: str | None = None, out: str | Path | None = None) -> Report:
    """Kendall τ-b between each metric's model ranking and the human ranking (`value`: the correlations)."""
    from ctxeval.leval.corr import CORR_JSON, CORR_MD, run_corr

    correlations, text = run_corr(Path(human), list(metrics), column, Path(out) if out is not None else None)
    return Report(correlations, text, (Path(out) / CORR_JSON, Path(out) / CORR_MD) if out is not None else ())


def judge(predictions: str | Path, base_predictions: str | Path, *, judge_model: str = "openai:gpt-4", openai: OpenAIOptions | None = None,
          max_tokens: int = 2048, limit: int | None = None, out: str | Path = Path("runs/judge"), questions: str = "auto",
          executor: ExecutorOptions | None = None) -> Report:
    """Pairwise LLM judge (L-Eval's prompt, both answer orders); `value` is judge.json's content.
    Verdicts are records in `out`: a re-run of the same command resumes."""
    from ctxeval.judge import markdown, run_api_judge

    out = Path(out)
    report = run_api_judge(Path(predictions), Path(base_predictions), judge_model, openai or OpenAIOptions(), max_tokens, limit, out, questions, executor)
    return Report(report, markdown(report), (out / "judge.json", out / "judge.md"))


def pplqa(answers: str = "mt-bench", *, methods: str | Sequence[str] = ("pplqa",), out: str | Path | None = None, model: str = DEFAULT_MODEL,
          limit: int | None = None, qa_scope: str = "all", aspect: str | None = None, reference: str | None = "auto", seed: int = 0,
          progress: bool = False, n_threads: int | None = None, tau: str = "a", executor: ExecutorOptions | None = None) -> Report:
    """Rank each question's answers by PPLqa (and optionally the baselines); `value` is pplqa.json's content."""
    from ctxeval.qa.ranking import markdown

    result = qa_commands.pplqa(answers, _methods(methods), out, model, limit, qa_scope, aspect, reference, seed, progress, n_threads, tau=tau, executor=executor)
    return Report(result, markdown(result))


def meta_eval(dataset: str, *, methods: str | Sequence[str] = ("pplqa", "gptscore", "geval", "geval_weighted"), out: str | Path | None = None,
              model: str = DEFAULT_MODEL, limit: int | None = None, qa_scope: str = "all", aspect: str = "coherence", ties: str | None = None,
              replicates: int = 2000, seed: int = 0, progress: bool = False, n_threads: int | None = None,
              executor: ExecutorOptions | None = None) -> Report:
    """Meta-evaluate answer-quality methods against a pairwise dataset's human labels; `value` is the result JSON.
    `ties`: drop or keep human ties; None keeps the dataset layout's own policy (data/pairwise.py)."""
    from ctxeval.report.meta_eval import markdown_table

    result = qa_commands.meta_eval(dataset, _methods(methods), out, model, limit, qa_scope, aspect, ties, replicates, seed, progress, n_threads, executor)
    return Report(result, markdown_table(result))


def serve(model: str = DEFAULT_MODEL, *, chat_template: str | Path | None = None, api_key_env: str | None = None, **options: Any) -> None:
    """Serve `model` behind ctxeval's OpenAI-compatible scoring server until interrupted
    (docs/serve.md). `options` are `ctxeval.server.settings.ServerSettings` fields (host, port,
    n_ctx, ...); `chat_template` is a Jinja file, `api_key_env` the environment variable holding
    the API key. Imported on demand (it needs the server extra)."""
    from ctxeval.server.launch import serve as run_server

    run_server(server_settings(model, chat_template, api_key_env, **options))


def _run_scoring(config: RunConfig, texts: Corpus, model_specs: list[str], planner, out: Path, progress: bool, n_threads: int | None,
                 openai: OpenAIOptions | None, dry_run: bool, executor: ExecutorOptions | None, finish: Finish = write_outputs) -> Any:
    """A scoring run through the engine (or, with `dry_run`, what it would send to API models).
    Passes a backend fails to score are left out of the records, listed in the manifest, and
    reported by raising `IncompleteRun`; a re-run retries them."""
    task = ScoringRun(config, texts, model_specs, planner, finish, n_threads=n_threads, openai_options=openai, input_facts=texts.facts())
    if dry_run:
        return estimate(task, out, task.estimate)
    return run(task, scoring_spec(config), out, executor=executor, progress=progress)


def _methods(methods: str | Sequence[str]) -> tuple[str, ...]:
    return parse_methods(methods) if isinstance(methods, str) else tuple(methods)


def _thesis_options(models: Sequence[str], openai: OpenAIOptions, n_compare: int) -> OpenAIOptions:
    """The thesis context mode is the API protocol of paper 000 (section 3.1.2): only for
    `openai:` models on a generation path; `gen_tokens` defaults to n_c as in the thesis."""
    local = [m for m in models if not m.startswith("openai:")]
    if local:
        raise UserError(f"--context-mode thesis is the protocol for API models that only score generated tokens; {local[0]} is not an openai: model (use exact)")
    if openai.mode == "prompt":
        raise UserError("--context-mode thesis runs the generation protocol; use --api-mode generate, chat or auto, not prompt")
    return openai.with_default_gen_tokens(n_compare)


def _backend_options(models: Sequence[str], openai: OpenAIOptions | None) -> str:
    """The API options that decide records, when any model is an `openai:` model."""
    if not any(m.startswith("openai:") for m in models):
        return ""
    return json.dumps((openai or OpenAIOptions()).identity(), sort_keys=True)


def _load_texts(specs: Sequence[str | Path], options: CorpusOptions) -> Corpus:
    """Scan the inputs (texts or corpora); their documents are read again lazily when run."""
    return open_corpus(specs, options)


def _temperatures(values: Sequence[float]) -> tuple[float, ...]:
    temps = tuple(float(t) for t in values)
    if any(t <= 0 for t in temps):
        raise UserError(f"--temperatures must be positive, got {', '.join(f'{t:g}' for t in temps)}")
    return tuple(sorted(set(temps) | {1.0}))


def _check_common(top_k: int, temperatures: Sequence[float], metrics: MetricConfig) -> None:
    if top_k < 1:
        raise UserError(f"--top-k must be a positive integer, got {top_k}")
    if metrics.approx_k > top_k:
        raise UserError(f"--approx-k ({metrics.approx_k}) cannot exceed --top-k ({top_k})")
    _temperatures(temperatures)
    _check_metrics(metrics)


def _check_backend_options(models: Sequence[str], device: str | None, dtype: str | None) -> None:
    if (device is not None or dtype is not None) and not any(m.startswith("hf:") for m in models):
        raise UserError("--device and --dtype apply to hf: models only; no hf: model was given")


def _check_metrics(metrics: MetricConfig) -> None:
    if metrics.cutoff is not None and metrics.cutoff < 1:
        raise UserError(f"--cutoff must be a positive integer or 'full', got {metrics.cutoff}")
    if any(a <= 0 for a in metrics.alphas):
        raise UserError("--alphas must be positive")
    if metrics.approx_k < 1:
        raise UserError(f"--approx-k must be a positive integer, got {metrics.approx_k}")
    if metrics.penalty < 0:
        raise UserError(f"--penalty must not be negative, got {metrics.penalty}")


def _out_dir(out: str | Path | None, command: str, config: RunConfig) -> Path:
    """Default run directory: named by the run id, so the same command resumes the same run."""
    return Path(out) if out is not None else Path("runs") / f"{command}-{config.run_id()[:8]}"
