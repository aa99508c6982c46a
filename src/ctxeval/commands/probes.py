"""context-gain, retrieval and probe-report: does a model use distant context?"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ctxeval.commands import common
from ctxeval.commands.base import Command
from ctxeval.commands.diff import QuietDisplay, quiet_progress
from ctxeval.commands.scoring import run_scoring
from ctxeval.config import RunConfig
from ctxeval.data.corpus import CorpusOptions, open_corpus
from ctxeval.data.texts import DEMO_TEXT_NAME
from ctxeval.options import argument, comma_floats, comma_ints, fail, group, joined, one_of, option, positive
from ctxeval.pipeline.executors import ExecutorOptions
from ctxeval.results.manifest import Manifest
from ctxeval.scoring.planning import ContextGainPlanner, EffectiveLengthPlanner
from ctxeval.probes.gain_report import KeyTokenSettings, context_gain_result
from ctxeval.probes.retrieval_data import N_EXAMPLES, VARIANTS
from ctxeval.probes.retrieval_run import RetrievalConfig, run_retrieval
from ctxeval.render.kinds import RENDERING
from ctxeval.metrics.config import MetricConfig
from ctxeval.modeldiff.acted import presses
from ctxeval.probes.effective_length import DEFAULT_DELTA as EL_DELTA, DEFAULT_SHARE, UNITS, EstimatorSettings, effective_length_result
from ctxeval.results.context_gain import ContextGainResult
from ctxeval.results.effective_length import EffectiveLengthResult
from ctxeval.probes.probe_report import probe_report
from ctxeval.results.probe_report import ProbeReport
from ctxeval.probes.retrieval_report import retrieval_result
from ctxeval.results.retrieval import RetrievalResult


@dataclass(frozen=True)
class ContextGainSpec:
    """Does the model use distant context? Perplexity with the full context (chunked, window W) vs only
    the last k tokens, the per-token gain g = log p_long - log p_short with a paired BCa interval, gain
    by distance, and LongPPL: perplexity over key tokens (g > alpha and log p_long > beta; LongPPL's
    defaults alpha 2, beta -2), the tokens that need long context."""

    texts: tuple[str, ...] = argument(common.TEXT_INPUTS, cli_type=list[str], to_value=tuple)
    window: int = option("--window", "W: long context. Chunks of W tokens; each target sees every token before it in its chunk.", 2048, check=positive)
    short: int = option("--short", "k: short context. Targets are re-scored with only about the last k tokens of their long context.", 128, check=positive)
    short_stride: int | None = option("--short-stride", "Targets per short pass (default k/4): short contexts lie between k and k + stride - 1 tokens; 1 = exactly k (slowest).", None, check=positive)
    models: tuple[str, ...] = common.models(truncates=True)
    evaluator: str | None = common.evaluator()
    alpha: float = common.key_alpha()
    beta: float = common.key_beta()
    max_tokens: int | None = common.max_tokens(low=2)
    block: int = option("--block", "Bootstrap unit: blocks of this many consecutive targets.", 256, check=positive)
    replicates: int = common.replicates()
    top_k: int = common.top_k()
    out: Path | None = common.out()
    progress: bool = common.progress()
    n_threads: int | None = common.threads()
    corpus: CorpusOptions = common.corpus()
    seed: int = common.seed()
    executor: ExecutorOptions = common.executor()


EFFECTIVE_LENGTHS = (128, 256, 512, 1024, 2048, 4096)


def _lengths_check(values: tuple[int, ...]) -> str | None:
    if len(set(values)) < 2:
        return "must name at least two different context lengths"
    return positive(values)


@dataclass(frozen=True)
class EffectiveLengthSpec(common.ModelRunOptions):
    """How much of its context does a model use? The same target tokens scored with every context length
    (paired), the gain per doubling with paired BCa intervals clustered by document, and the effective
    context length L*: the shortest length reaching --share of the total gain, with a bootstrap interval.
    MODEL?max_context=N is a truncation control whose L* is N by construction."""

    texts: tuple[str, ...] = argument("UTF-8 text files, corpus folders, .jsonl/.json or .parquet corpora; 'demo' (the default) is the bundled Chesterton excerpt.",
                                      (DEMO_TEXT_NAME,), cli_type=Optional[list[str]], shown=None, to_value=lambda v: tuple(v) if v else (DEMO_TEXT_NAME,))
    models: tuple[str, ...] = common.models(truncates=True)
    lengths: tuple[int, ...] = option("--lengths", "Comma-separated context lengths L in tokens (target j of a span sees L + j).", EFFECTIVE_LENGTHS,
                                      cli_type=str, shown=joined(EFFECTIVE_LENGTHS), to_value=comma_ints("--lengths"), check=_lengths_check)
    starts: int = option("--starts", "Seeded spans per document, one per equal stratum of the text after the longest length.", 8, check=positive)
    targets: int = option("--targets", "Consecutive target tokens per span, scored at every length.", 32, check=positive)
    share: float = option("--share", "L* is the shortest length whose gain over the shortest reaches this share of the gain at the longest.", DEFAULT_SHARE,
                          check=lambda v: None if 0 < v < 1 else "must lie strictly between 0 and 1")
    delta: float = option("--delta", "The verdict's margin δ in nats/token: a variant whose loss of gain (shortest to longest length) against the first --model has its interval inside ±δ is 'within δ'.",
                          EL_DELTA, check=lambda v: None if v > 0 else f"must be a positive number of nats, got {v:g}")
    unit: str = option("--unit", "Bootstrap unit: document (clustered; one document gives no interval) or span (spans of one long text as independent units).",
                       "document", check=one_of(UNITS))
    evaluator: str | None = common.evaluator()
    alpha: float = common.key_alpha()
    beta: float = common.key_beta()
    replicates: int = common.replicates()
    top_k: int = common.top_k()
    metrics: MetricConfig = group(MetricConfig)
    corpus: CorpusOptions = common.corpus()
    seed: int = common.seed()
    executor: ExecutorOptions = common.executor()

    def check(self) -> None:
        if self.evaluator is not None and self.evaluator not in self.models:
            raise fail(EffectiveLengthSpec, "evaluator", f"must be one of the models ({', '.join(self.models)}), got {self.evaluator!r}")
        longest = max(self.lengths)
        for model in common.model_specs(list(self.models)):
            if model.max_context is not None and longest + self.targets - 1 <= model.max_context:
                raise fail(EffectiveLengthSpec, "lengths", f"reach at most {longest + self.targets - 1} tokens of context, within {model.text}'s max_context: "
                                                           f"the limit would act on no target; give a length above {model.max_context - self.targets + 1}")
            for _, press in presses((model,)):
                if not press.acts_on(longest):
                    raise fail(EffectiveLengthSpec, "lengths", f"keep every context of {model.text} whole (the longest is {longest} tokens): the press would act on no target; "
                                                               f"give a length above {press.budget if press.budget is not None else longest}")


@dataclass(frozen=True)
class RetrievalSpec:
    """Line-retrieval test: accuracy of greedy exact match and mean rank of the right answer's first token,
    per (lines x depth), with heatmaps. Keys and values are made-up words and numbers, seen only in their line."""

    variant: str = option("--variant", "cat: 'A person named <key> has a cat. His cat's name is <value>.' with 3 in-context examples (paper 002, A.2); register: LongChat's 'line <key>: REGISTER_CONTENT is <value>'.",
                          "cat", check=one_of(VARIANTS))
    lines: tuple[int, ...] = option("--lines", "Comma-separated numbers of record lines (about 25 tokens per cat line, 22 per register line with Gemma).", (20, 50, 100),
                                    cli_type=str, shown="20,50,100", to_value=comma_ints("--lines"))
    tokens: tuple[int, ...] | None = option("--tokens", "Comma-separated prompt sizes in tokens (e.g. 1024,2048,4096), instead of --lines: each model gets the most lines that fit.", None,
                                            cli_type=Optional[str], to_value=lambda v: comma_ints("--tokens")(v) if v else None)
    depths: tuple[float, ...] = option("--depths", "Comma-separated depths in [0, 1] of the queried line within the record.", (0.0, 0.25, 0.5, 0.75, 1.0),
                                       cli_type=str, shown="0,0.25,0.5,0.75,1", to_value=comma_floats("--depths"),
                                       check=lambda d: None if d and min(d) >= 0 and max(d) <= 1 else "must be numbers between 0 and 1")
    samples: int = option("--samples", "Seeded records per (lines, depth) cell.", 3, check=positive)
    models: tuple[str, ...] = common.models()
    seed: int = common.seed()
    out: Path | None = common.out()
    progress: bool = common.progress()
    n_threads: int | None = common.threads()
    executor: ExecutorOptions = common.executor()

    def check(self) -> None:
        if self.tokens:
            if min(self.tokens) < 1:
                raise fail(RetrievalSpec, "tokens", "must be positive integers")
            problem = common.budget_covering(self.models, min(self.tokens))
            if problem:
                raise fail(RetrievalSpec, "tokens", problem)
        elif not self.lines or min(self.lines) < N_EXAMPLES + 1:
            raise fail(RetrievalSpec, "lines", f"must be integers of at least {N_EXAMPLES + 1}")


@dataclass(frozen=True)
class ProbeReportSpec:
    """One report per model, side by side: perplexity and rank scores by context, context gain, LongPPL and
    retrieval accuracy/rank — does a lower perplexity come with better use of long context?"""

    runs: tuple[Path, ...] = argument("Finished run directories: sweep/score, context-gain and retrieval runs, of one or more models.", cli_type=list[Path], to_value=tuple)
    out: Path = common.out("Directory for probe_report.md/.json and probe_report.png.", Path("runs/probe-report"))


def run_context_gain(spec: ContextGainSpec) -> ContextGainResult:
    """Score every target with its full context inside chunks of `window` tokens and with only
    about the last `short` tokens; report both perplexities, the per-token gain, its paired
    interval, gain by distance, and LongPPL over the key tokens an evaluator model picks.

    `short_stride` (default short // 4) trades cost for exactness: short contexts lie between
    `short` and `short + short_stride - 1` tokens; 1 makes them exactly `short`."""
    stride = spec.short_stride if spec.short_stride is not None else max(1, spec.short // 4)
    model_specs = list(dict.fromkeys(spec.models))
    evaluator_spec = spec.evaluator or model_specs[0]
    if evaluator_spec not in model_specs:
        model_specs.append(evaluator_spec)
    models = common.model_specs(model_specs)
    common.refuse_api_models(models, "context-gain", "the log-probability of each chunk's first token given only BOS")
    loaded = open_corpus(spec.texts, spec.corpus)
    config = RunConfig.of_documents(
        "context-gain", loaded.refs, model_specs,
        top_k=spec.top_k,
        method="chunked",
        window=spec.window,
        stride=stride,
        short=spec.short,
        max_tokens=spec.max_tokens,
    )
    planner = ContextGainPlanner(spec.window, spec.short, stride, spec.max_tokens)

    def finish(run_dir: Path, manifest: Manifest, _metrics: MetricConfig) -> ContextGainResult:
        evaluator_name = manifest.model_names[model_specs.index(evaluator_spec)]
        return context_gain_result(run_dir, manifest, KeyTokenSettings(evaluator_name, spec.alpha, spec.beta, spec.block, spec.replicates, spec.seed))

    return run_scoring(config, loaded, models, planner, common.out_dir(spec.out, "context-gain", config), spec, None, finish)


def run_effective_length(spec: EffectiveLengthSpec) -> EffectiveLengthResult:
    """Score the same spans of target tokens with every context length, then the curve, its
    gains per doubling and L* per model (probes/effective_length.py)."""
    model_specs = list(dict.fromkeys(spec.models))
    models = common.model_specs(model_specs)
    common.refuse_api_models(models, "effective-length", "exact ranks and the log-probability of every target at every context length")
    loaded = open_corpus(spec.texts, spec.corpus)
    lengths = tuple(sorted(set(spec.lengths)))
    config = RunConfig.of_documents("effective-length", loaded.refs, model_specs, top_k=spec.top_k, lengths=lengths, n_compare=spec.targets, seed=spec.seed,
                                    repeats=spec.starts, metrics=spec.metrics, device=spec.device, dtype=spec.dtype)
    planner = EffectiveLengthPlanner(lengths, spec.starts, spec.targets, spec.seed, caps=tuple(m.max_context for m in models))
    evaluator_spec = spec.evaluator or model_specs[0]

    def finish(run_dir: Path, manifest: Manifest, metrics: MetricConfig) -> EffectiveLengthResult:
        settings = EstimatorSettings(spec.share, spec.unit, spec.replicates, spec.seed, evaluator=manifest.model_names[model_specs.index(evaluator_spec)],
                                     alpha=spec.alpha, beta=spec.beta, delta=spec.delta)
        return effective_length_result(run_dir, manifest, metrics, settings)

    return run_scoring(config, loaded, models, planner, common.out_dir(spec.out, "effective-length", config), spec, None, finish)


def run_retrieval_probe(spec: RetrievalSpec) -> RetrievalResult:
    """Line retrieval (paper 002 appendix A.2 `cat`, or LongChat's `register`): records of `lines`
    key-value lines (or, with `tokens`, of as many lines as fit each model's prompt of that many
    tokens), the queried line at each depth, `samples` seeded records per cell; greedy exact
    match (what greedy generation produces) and the rank of the right answer, per cell."""
    token_targets = tuple(sorted(set(spec.tokens))) if spec.tokens else ()
    lines = () if spec.tokens else tuple(sorted(set(spec.lines)))
    models = common.model_specs(dict.fromkeys(spec.models))
    common.refuse_api_models(models, "retrieval", "the rank of the answer's first token over the whole vocabulary")
    config = RetrievalConfig(spec.variant, lines, tuple(sorted(set(spec.depths))), spec.samples, spec.seed, tuple(m.text for m in models), tokens=token_targets)
    return run_retrieval(config, models, common.out_dir(spec.out, "retrieval", config), retrieval_result, spec.progress, spec.n_threads, spec.executor,
                         render=RENDERING)


def run_probe_report(spec: ProbeReportSpec) -> ProbeReport:
    """Side-by-side Markdown report (and JSON, plot) over sweep/score, context-gain and retrieval runs."""
    return probe_report([Path(r) for r in spec.runs], Path(spec.out))


def _echo_gain(result: ContextGainResult, spec: ContextGainSpec, display: QuietDisplay) -> str:
    files = result.paths()
    return display.echo(result.markdown, f"summary: {files['summary']}, {files['report']}, plot: {files['plot']}")


def _echo_effective_length(result: EffectiveLengthResult, spec: EffectiveLengthSpec, display: QuietDisplay) -> str:
    files = result.paths()
    return display.echo(result.markdown, f"summary: {files['summary']}, {files['report']}, curve: {files['curve']}, plot: {files['plot']}")


def _echo_retrieval(result: RetrievalResult, spec: RetrievalSpec, display: QuietDisplay) -> str:
    files = result.paths()
    return display.echo(result.markdown, f"results: {files['results']}, cases: {files['cases']}, heatmap: {files['heatmap']}")


def _echo_probe_report(result: ProbeReport, spec: ProbeReportSpec, display: None) -> str:
    files = result.paths()
    return f"{result.markdown}\nreport: {files['report']}, {files['json']}, plot: {files['plot']}"


COMMANDS = (
    Command("context-gain", ContextGainSpec, run_context_gain, _echo_gain, QuietDisplay, quiet_progress, inputs=("texts",)),
    Command("effective-length", EffectiveLengthSpec, run_effective_length, _echo_effective_length, QuietDisplay, quiet_progress, inputs=("texts",)),
    Command("retrieval", RetrievalSpec, run_retrieval_probe, _echo_retrieval, QuietDisplay, quiet_progress),
    Command("probe-report", ProbeReportSpec, run_probe_report, _echo_probe_report, inputs=("runs",), posthoc=lambda spec: (spec.out, spec.runs)),
)
