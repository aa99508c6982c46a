"""compare and trends: post-hoc statistics over finished scoring runs."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from ctxeval.commands import common
from ctxeval.commands.base import Command
from ctxeval.metrics.registry import rank_keys, trend_keys
from ctxeval.options import argument, greater_than_zero, one_of, option
from ctxeval.pairing import pair_windows
from ctxeval.report.compare import NAN_POLICIES, build_report, by_length, comparison_result, paired_ids, window_table
from ctxeval.stats.gates import gate, resolve_minima
from ctxeval.report.numerics import compare_numerics
from ctxeval.results.runs import load_run
from ctxeval.report.summary import window_metrics
from ctxeval.report.trends import trend_table, trends_result, variance_table
from ctxeval.errors import UserError
from ctxeval.results.comparison import COMPARE_JSON, COMPARE_MD, Comparison
from ctxeval.results.trends import Trends
from ctxeval.stats.paired import RESAMPLE_SCHEMES
from ctxeval.byor.answer import FAIL_ON, AnswerSettings, answer
from ctxeval.byor.detect import is_ctxeval_run, read_runs


@dataclass(frozen=True)
class CompareSpec:
    """Paired comparison of runs: two ctxeval scoring runs by perplexity ratio B/A with a BCa interval; runs of lm-eval, inspect, RULER, kvpress or a CSV/Parquet of per-sample scores by paired verdicts, flips and tie groups."""

    run_a: Path = argument("Run A (the baseline): a ctxeval scoring run, an lm-eval --output_path folder or samples_*.jsonl, an inspect .eval/.json log, a RULER pred/ folder, a kvpress results folder (each config a run) or a CSV/Parquet of sample, score.")
    run_b: Path | None = argument("Run B (compared against A); may be left out where RUN_A holds several runs (a kvpress results folder of several configs, a table with a run column).", None)
    more: tuple[Path, ...] = argument("Further runs (not with ctxeval scoring runs): three or more are ordered, with simultaneous intervals and tie groups.",
                                      (), cli_type=list[Path], to_value=tuple)
    out: Path = common.out("Directory for compare.json and compare.md.", Path("runs/compare"))
    replicates: int = common.replicates()
    seed: int = common.seed()
    cluster_by_text: bool | None = option("--cluster-by-text", "Resample whole texts (documents) instead of windows. Default: by document when at least 3 documents are compared, by window otherwise (the reason is in the report).",
                                          None, negative="--no-cluster-by-text")
    resample: str = option("--resample", "Bootstrap scheme: windows (draw units uniformly, ratio of sums; default) or tokens (draw them with probability proportional to their tokens, plain mean of the drawn differences: paper 001's wording).",
                           "windows", check=one_of(RESAMPLE_SCHEMES))
    profile: str = common.profile()
    min_windows: int | None = common.min_windows()
    min_tokens: int | None = common.min_tokens()
    max_ratio: float | None = option("--max-ratio", "Fail (exit 1) if the upper CI bound of the perplexity ratio B/A exceeds this.", None)
    model_a: str | None = option("--model-a", "Model of run A to use, if it holds several.", None)
    model_b: str | None = option("--model-b", "Model of run B to use, if it holds several.", None)
    context_mode_a: str | None = option("--context-mode-a", "Context mode of run A to use (exact/approx/window/capped).", None)
    context_mode_b: str | None = option("--context-mode-b", "Context mode of run B to use.", None)
    nan_windows: str = option("--nan-windows", "Windows with a NaN loss in either run (e.g. API targets outside the top-k): exclude (listed in the report; fails ci/release) or error.",
                              "exclude", check=one_of(NAN_POLICIES))
    delta: float = common.score_delta()
    fail_on: str | None = option("--fail-on", "Per-sample runs: exit 1 when a run's verdict against the first (all tasks) is 'hurts' (hurts), or is 'hurts' or undecided (undecided).",
                                 None, check=one_of(FAIL_ON))
    cluster: str | None = option("--cluster", "Per-sample runs: the sample field (lm-eval doc, inspect metadata, RULER others, CSV column) shared by samples of one document; intervals then resample whole clusters.", None)


@dataclass(frozen=True)
class TrendsSpec:
    """Slope of every metric against context length (raw and log2) with SE, p-value and CI; spread across repeats."""

    run_dir: Path = argument("A finished run directory.")
    out: Path | None = common.out("Where to write trends.json/.md (default: the run directory's trends/ folder).")
    outlier_sd: float = option("--outlier-sd", "Flag a window more than this many SDs from the mean of the other windows at its length.", 2.0, check=greater_than_zero)


def run_compare(spec: CompareSpec) -> Comparison:
    """Is B worse than A, by how much, how sure are we: the paired perplexity ratio over the
    windows both runs scored, with a BCa interval, and the same for the rank scores. Windows
    with a NaN loss in either arm are left out and listed (`nan_windows="error"` refuses them).
    `cluster_by_text` None (default) resamples whole documents when at least
    `stats.defaults.MIN_CLUSTERS` are compared, windows otherwise. `resample` "windows" draws
    units uniformly (ratio of sums); "tokens" draws them with probability ∝ their tokens and
    averages their Δ (paper 001's wording; covers less when windows differ, docs/design.md).

    Runs of other tools (any other format, or more than two runs) are read per sample
    (ctxeval/byor/) and answered with paired verdicts, flips and tie groups."""
    paths = [Path(p) for p in (spec.run_a, spec.run_b, *spec.more) if p is not None]
    if not (len(paths) == 2 and all(is_ctxeval_run(p) for p in paths)):
        table, runs = read_runs(paths, spec.cluster)
        settings = AnswerSettings(delta=spec.delta, replicates=spec.replicates, seed=spec.seed, cluster=spec.cluster is not None)
        return comparison_result(answer(table, runs, settings, spec.fail_on), Path(spec.out))
    manifest_a, records_a = load_run(Path(spec.run_a), "compare")
    manifest_b, records_b = load_run(Path(spec.run_b), "compare")
    metrics = manifest_a.metrics
    a = window_table(records_a, manifest_a, metrics, spec.model_a, spec.context_mode_a, "A")
    b = window_table(records_b, manifest_b, metrics, spec.model_b, spec.context_mode_b, "B")
    pairing = pair_windows(a, b)
    if pairing.paired.empty:
        raise UserError("the two runs share no windows: they scored different texts, lengths, repeats or spans")
    scores = rank_keys(metrics)
    minima = resolve_minima(spec.profile, spec.min_windows, spec.min_tokens)
    report = build_report(pairing, (str(spec.run_a), str(spec.run_b)), spec.replicates, spec.seed, spec.cluster_by_text, scores, spec.nan_windows, spec.resample, minima)
    report["by_length"] = by_length(a, b, (str(spec.run_a), str(spec.run_b)), spec.replicates, spec.seed, spec.cluster_by_text, scores, spec.resample)
    report["paired_windows"] = paired_ids(pairing)
    report["profile"] = spec.profile
    report["numerics"] = compare_numerics(manifest_a, spec.model_a or records_a["model"].iloc[0], manifest_b, spec.model_b or records_b["model"].iloc[0])
    failures = gate(report, spec.profile, spec.max_ratio)
    report["gates"] = {"passed": not failures, "failures": failures}
    return comparison_result(report, Path(spec.out))


def compare_models(run_a: Path, model_a: str, run_b: Path, model_b: str) -> Comparison:
    """`compare` with its own defaults on one model of each run: what the report's pair view
    reads (UserError where the two cannot be compared: no shared window, several context modes)."""
    return run_compare(CompareSpec(Path(run_a), Path(run_b), model_a=model_a, model_b=model_b))


def run_trends(spec: TrendsSpec) -> Trends:
    """Slopes of every metric against context length (raw and log2), with SE, p-value and CI,
    and the spread across repeated starts with flagged outliers. Writes trends.json/.md."""
    manifest, records = load_run(Path(spec.run_dir), "trends")
    metrics = manifest.metrics
    per_window = window_metrics(records, metrics, manifest.vocab_sizes, manifest.temperatures)
    names = trend_keys(metrics)
    return trends_result(trend_table(per_window, names), variance_table(per_window, names, spec.outlier_sd), spec.outlier_sd, trends_dir(spec))


def trends_dir(spec: TrendsSpec) -> Path:
    """Trends go to a folder of their own (by default inside the run they read)."""
    return Path(spec.out) if spec.out is not None else Path(spec.run_dir) / "trends"


def _echo_compare(result: Comparison, spec: CompareSpec, display: None) -> tuple[str, int]:
    gate_name = f"--fail-on {spec.fail_on}" if result.report.get("kind") == "samples" else f"{spec.profile} gate"
    for failure in result.failures:
        print(f"ctxeval: {gate_name} failed: {failure}", file=sys.stderr)
    return f"{result.markdown}\nreport: {result.out / COMPARE_JSON}, {result.out / COMPARE_MD}", 1 if result.failures else 0


COMMANDS = (
    Command("compare", CompareSpec, run_compare, _echo_compare, inputs=("run_a", "run_b", "more"), posthoc=lambda spec: (spec.out, tuple(p for p in (spec.run_a, spec.run_b, *spec.more) if p is not None))),
    Command("trends", TrendsSpec, run_trends, lambda result, spec, display: result.markdown, inputs=("run_dir",), posthoc=lambda spec: (trends_dir(spec), (spec.run_dir,))),
)
