"""diff: how far a candidate model's next-token distributions are from a reference's."""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Optional

from ctxeval.commands import common
from ctxeval.commands.base import Command
from ctxeval.config import DEFAULT_MODEL
from ctxeval.data.corpus import CorpusOptions, open_corpus
from ctxeval.modeldiff.finish import DEFAULT_DELTA, DEFAULT_TOP_K as DIFF_TOP_K, DiffFinish, diff_result
from ctxeval.modeldiff.noise_floor import DEFAULT_NOISE_WINDOWS, NoiseFloor, candidate_path
from ctxeval.modeldiff.keytokens import check_gain_run
from ctxeval.modeldiff.run import DEFAULT_BLOCK_ROWS, DIFF_FILE, DiffConfig, DiffRun
from ctxeval.modeldiff.summary import Bootstrap, bucket_edges
from ctxeval.modeldiff.acted import check_layout
from ctxeval.options import argument, at_least, comma_ints, fail, group, non_negative, option, positive
from ctxeval.pipeline.engine import run
from ctxeval.render.kinds import RENDERING
from ctxeval.pipeline.executors import ExecutorOptions
from ctxeval.results.manifest import Manifest
from ctxeval.results.diff import DiffResult


@dataclass(frozen=True)
class DiffSpec:
    """How much CAND's next-token distributions differ from REF's on the same windows: KL, same-top-1, PPL ratio, by context position.

    Writes diff_records.parquet (one row per scored token), diff.json and diff.md (summaries) and report.html (tokens coloured by KL, both models' top-k per token, charts by context position) into the run directory."""

    ref: str = argument(f"REF model: {DEFAULT_MODEL}, a .gguf path or hf:MODEL, with options as MODEL?key=value&... (docs/diff.md).")
    cand: str = argument("CAND model, same forms; e.g. gemma-3-270m?type_k=q8_0&type_v=q8_0&flash_attn=1, a requantized .gguf, or 'hf:M?press=SnapKVPress&budget=256' (REF hf:M): KL against the uncompressed cache.")
    texts: tuple[str, ...] = argument("UTF-8 text files ('demo' for the bundled excerpt) or corpora: folders, .jsonl/.json or .parquet.", cli_type=list[str], to_value=tuple)
    window: int = option("--window", "Window W: tokens per pass (BOS not counted).", 512, check=at_least(2))
    stride: int | None = common.stride()
    max_tokens: int | None = common.max_tokens()
    top_k: int = common.top_k("k of each model's recorded top-k (ids and log-probabilities, side by side in report.html's token card) and of their overlap.", DIFF_TOP_K)
    reverse: bool = option("--reverse-kl", "Also record KL(P_cand || P_ref).", False)
    buckets: tuple[int, ...] | None = option("--buckets", "Comma-separated context-length bucket edges from 0 (default 0,512,1024,2048,... up to the window).", None,
                                             cli_type=Optional[str], to_value=lambda v: comma_ints("--buckets")(v) if v else None)
    profile: str = common.profile()
    max_kl: float | None = option("--max-kl", "Fail (exit 1) if the upper CI bound of the mean KL exceeds this (nats).", None, check=non_negative)
    min_same_top: float | None = option("--min-same-top", "Fail (exit 1) if the lower CI bound of same-top-1 is below this percentage.", None,
                                        check=lambda v: None if 0 <= v <= 100 else f"is a percentage within 0..100, got {v:g}")
    delta: float = option("--delta", "The verdict's margin δ in nats of mean Δ log-loss per token (CAND − REF, the log of the perplexity ratio): 'within δ' when the paired interval lies inside ±δ; 0.01 ≈ a perplexity ratio within ±1 %.",
                          DEFAULT_DELTA, check=lambda v: None if v > 0 else f"must be a positive number of nats, got {v:g}")
    min_windows: int | None = common.min_windows()
    min_tokens: int | None = common.min_tokens()
    bootstrap: Bootstrap = group(Bootstrap)
    seed: int = common.seed()
    noise_floor: NoiseFloor | None = group(NoiseFloor, optional=True)
    block_rows: int = option("--block-rows", "Logit rows per block of each model (memory: 2 x rows x vocab floats).", DEFAULT_BLOCK_ROWS, check=positive)
    key_tokens: Path | None = option("--key-tokens", "A finished context-gain run over the same texts: also summarise over its evaluator's key tokens.", None)
    out: Path | None = common.out()
    progress: bool = common.progress()
    n_threads: int | None = common.threads()
    corpus: CorpusOptions = common.corpus()
    executor: ExecutorOptions = common.executor()

    def check(self) -> None:
        models = (common.model_spec(self.ref), common.model_spec(self.cand))
        for model in models:
            common.refuse_truncation(model, truncates=False)
        stride = self.window if self.stride is None else self.stride
        if not 1 <= stride <= self.window:
            raise fail(DiffSpec, "stride", f"must be within 1..--window ({self.window}), got {stride}")
        check_layout(models, self.window, self.stride)


@dataclass(frozen=True)
class QuietDisplay:
    quiet: bool = common.quiet()

    def echo(self, markdown: str, files: str) -> str:
        """A result's Markdown (left out with --quiet) above the line naming its files."""
        return "\n".join([*([] if self.quiet else [markdown]), files])


def run_diff(spec: DiffSpec) -> DiffResult:
    """Run (or resume) the lockstep comparison of CAND with REF on the same windows of the texts;
    the run's finisher summarises the records (also over `key_tokens`' key tokens), measures the
    noise floor where asked, gates and renders them into the result (its page is the
    explorer's), which the engine writes into the run directory."""
    full = "the full next-token distribution"
    ref, cand = common.model_spec(spec.ref), common.model_spec(spec.cand)
    common.refuse_api_models([ref, cand], "diff", full)
    floor = spec.noise_floor or candidate_path(ref, cand, DEFAULT_NOISE_WINDOWS, spec.seed)
    floor = None if floor is None or floor.off else floor
    second = None
    if floor is not None:
        second = common.model_spec(floor.second_spec(spec.ref))
        common.refuse_truncation(second, truncates=False)
        common.refuse_api_models([second], "--noise-floor", full)
    stride = spec.window if spec.stride is None else spec.stride
    edges = bucket_edges(spec.window, spec.buckets)
    if spec.key_tokens is not None:
        check_gain_run(Path(spec.key_tokens))
    loaded = open_corpus(spec.texts, spec.corpus)
    config = DiffConfig(spec.ref, spec.cand, tuple(r.sha256 for r in loaded.refs), tuple(r.text_id for r in loaded.refs), spec.window, stride, spec.max_tokens,
                        spec.top_k, spec.reverse, spec.block_rows)
    bootstrap = spec.bootstrap
    settings = {"window": spec.window, "stride": stride, "max_tokens": spec.max_tokens, "top_k": spec.top_k, "reverse": spec.reverse, "bucket_edges": edges,
                "replicates": bootstrap.replicates, "seed": bootstrap.seed, "confidence": bootstrap.confidence, "delta": spec.delta}
    gates = {"profile": spec.profile, "max_kl": spec.max_kl, "min_same_top": spec.min_same_top, "min_windows": spec.min_windows, "min_tokens": spec.min_tokens}
    floor_run = {"block_rows": spec.block_rows, "n_threads": spec.n_threads, "executor": spec.executor, "progress": spec.progress}

    finishing = DiffFinish(ref, cand, loaded, settings, bootstrap, spec.delta, spec.key_tokens and Path(spec.key_tokens), floor, second, floor_run, gates)

    def finish(run_dir: Path, manifest: Manifest) -> DiffResult:
        return diff_result(run_dir, manifest, finishing)

    task = DiffRun(config, loaded, (ref, cand), spec.n_threads, finish)
    return run(task, task.spec(), common.out_dir(spec.out, "diff", config), render=RENDERING, executor=spec.executor, progress=spec.progress)


def _echo(result: DiffResult, spec: DiffSpec, display: QuietDisplay) -> tuple[str, int]:
    files = result.paths()
    lines = [] if display.quiet else [result.markdown]
    lines.append(f"records: {result.run_dir / DIFF_FILE}; report: {files['report']}, {files['markdown']}, {files['html']}")
    for failure in result.failures:
        print(f"ctxeval: {spec.profile} gate failed: {failure}", file=sys.stderr)
    return "\n".join(lines), 1 if result.failures else 0


def quiet_progress(spec: Any, display: QuietDisplay) -> Any:
    """The CLI shows progress unless --quiet."""
    return replace(spec, progress=not display.quiet)


COMMANDS = (Command("diff", DiffSpec, run_diff, _echo, QuietDisplay, quiet_progress, inputs=("ref", "cand", "texts")),)
