"""What a finished diff run is made of: its records summarised and gated into the result (render/ draws its Markdown and page), and the noise floor (a diff of a model against itself on a second numeric path)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

import pyarrow.parquet as pq

from ctxeval.backends.registry import ModelSpec
from ctxeval.data.corpus import Corpus
from ctxeval.modeldiff.keytokens import key_token_mask
from ctxeval.modeldiff.acted import acted_mask, describe
from ctxeval.modeldiff.noise_floor import NoiseFloor, floor_dir, floor_summary, whole_path
from ctxeval.stats.gates import diff_gate
from ctxeval.pieces import read_pieces
from ctxeval.modeldiff.run import DEFAULT_BLOCK_ROWS, DIFF_FILE, DiffConfig, DiffRun
from ctxeval.pipeline.engine import run as engine_run
from ctxeval.modeldiff.summary import Bootstrap, summarize, summarize_tokens
from ctxeval.pipeline.executors import ExecutorOptions
from ctxeval.results.manifest import Manifest
from ctxeval.report.numerics import arm, pair_numerics
from ctxeval.results.diff import DiffResult
from ctxeval.stats.defaults import MIN_CLUSTERS
from ctxeval.stats.interval import Interval
from ctxeval.stats.verdict import Verdict, verdict

DEFAULT_TOP_K = 10
DEFAULT_DELTA = 0.01  # nats of mean Δ log-loss: a perplexity ratio within about ±1 %
NO_EFFECT = "the option had no effect on any scored target"


@dataclass(frozen=True)
class FloorRun:
    """A noise floor's own diff run: `model` against itself on `second` (`floor`'s path, its
    windows and seed), laid out as the run it belongs to lays its windows over `corpus`, written
    into `out` and resumed like any other run."""

    model: ModelSpec
    second: ModelSpec
    floor: NoiseFloor
    corpus: Corpus
    window: int
    stride: int | None
    max_tokens: int | None
    edges: list[int]
    out: Path
    n_threads: int | None = None
    executor: ExecutorOptions | None = None
    progress: bool = False
    block_rows: int = DEFAULT_BLOCK_ROWS
    bootstrap: Bootstrap = Bootstrap()


@dataclass(frozen=True)
class DiffFinish:
    """What a diff's finisher needs besides its records: both models, the texts, diff.json's
    `settings` (window, stride, bucket_edges, ...), the verdict's `delta`, the key-token run,
    the noise floor (its path and second model, None for none) with how to run it (`floor_run`:
    block_rows, n_threads, executor, progress) and the `gates` (profile, max_kl,
    min_same_top, min_windows, min_tokens)."""

    ref: ModelSpec
    cand: ModelSpec
    loaded: Corpus
    settings: dict
    bootstrap: Bootstrap
    delta: float
    key_tokens: Path | None
    noise_floor: NoiseFloor | None
    second: ModelSpec | None
    floor_run: dict
    gates: dict


def diff_result(run_dir: Path, manifest: Manifest, spec: DiffFinish) -> DiffResult:
    """A finished diff's result: the records summarised (over the targets a press acted on,
    the others apart; also over a context-gain run's key tokens), the noise floor measured where
    asked or where CAND changes the numeric path, the verdict, the gates; the result keeps the
    records, token texts and masks its page shows."""
    records = pq.read_table(run_dir / DIFF_FILE).to_pandas()
    settings, bootstrap = spec.settings, spec.bootstrap
    edges = settings["bucket_edges"]
    acted = acted_mask(records, (spec.ref, spec.cand))
    scored = records if acted is None else records[acted]
    summary = summarize(scored, edges, bootstrap)
    if acted is not None:
        summary["compressed"] = {"targets": int(acted.sum()), "of": len(records), "presses": describe((spec.ref, spec.cand)),
                                 "uncompressed": summarize_tokens(records[~acted], bootstrap) if (~acted).any() else None}
    mask = None
    if spec.key_tokens is not None:
        mask, picked = key_token_mask(records, manifest.texts or [], spec.key_tokens)
        keys = mask if acted is None else mask & acted
        summary["key_tokens"] = picked | (summarize(records[keys], edges, bootstrap) if keys.any() else {})
    floor = None
    if spec.noise_floor is not None and spec.second is not None:
        floor = measure_noise_floor(FloorRun(spec.ref, spec.second, spec.noise_floor, spec.loaded, settings["window"], settings["stride"], settings["max_tokens"], edges,
                                             floor_dir(run_dir), bootstrap=bootstrap, **spec.floor_run))
        floor["automatic"] = spec.noise_floor.why
    gates = spec.gates
    failures = diff_gate(summary, gates["profile"], gates["max_kl"], gates["min_same_top"], gates["min_windows"], gates["min_tokens"])
    recorded = {"profile": gates["profile"], "max_kl": gates["max_kl"], "min_same_top": gates["min_same_top"], "failures": failures}
    report = diff_report(manifest, settings, summary, recorded, floor)
    report["verdict"] = diff_verdict(summary["all"], spec.delta, bootstrap.confidence, report["numerics"]).to_row()
    if whole_path(spec.ref, spec.cand):
        report["whole_numeric_path"] = True
    return DiffResult(run_dir, manifest, report, failures=failures, records=records, pieces=read_pieces(run_dir, report["ref"]["name"]), key_mask=mask,
                      compressed_mask=acted)


def diff_verdict(overall: dict, delta: float, confidence: float, numerics: dict) -> Verdict:
    """The verdict on CAND's mean Δ log-loss against REF (the log of the perplexity ratio), read
    against 0 and ±`delta` nats with its paired interval; samples are the resampling units
    (windows, or documents). Records bit-identical to REF's say the option had no effect."""
    ratio, units = overall["ppl_ratio"], overall["resampling_units"]
    se = ratio["unit_sd"] / math.sqrt(units) if ratio["unit_sd"] is not None and units > 0 else math.nan
    interval = replace(Interval.from_row(ratio["delta_log_nll"]), se=se, confidence=confidence, reason="")
    if units < MIN_CLUSTERS:  # two window means are no interval to decide on
        interval = interval.without_interval(f"{units} {overall['resampling_unit']}(s): fewer than {MIN_CLUSTERS} paired units decide nothing")
    if numerics.get("bit_identical"):
        interval = replace(interval, reason=NO_EFFECT + (": REF and CAND ran on the same numeric path" if numerics.get("differing_fields") == [] else ""))
    return verdict(interval, delta, worse="higher")


def diff_report(manifest: Manifest, settings: dict, summary: dict, gates: dict, floor: dict | None) -> dict:
    """diff.json's content: both models, the settings, the definitions, the summaries, the gates,
    both numeric paths, and the noise floor where one was measured."""
    ref_entry, cand_entry = manifest.models
    top_k = settings["top_k"]
    report = {
        "ref": {"name": ref_entry["name"], "path": ref_entry["path"], "sha256": ref_entry["sha256"]},
        "cand": {"name": cand_entry["name"], "path": cand_entry["path"], "sha256": cand_entry["sha256"]},
        "run_id": manifest.run_id,
        "settings": settings,
        "definitions": {
            "kl": "KL(P_ref || P_cand) = sum_v P_ref(v) log(P_ref(v) / P_cand(v)) over the full vocabulary, nats, per scored token",
            "same_top1": "percent of tokens whose REF and CAND argmax agree",
            "ppl_ratio": "exp(sum_i t_i (loss_i(CAND) - loss_i(REF)) / sum_i t_i) over windows i with t_i tokens (in the bucket)",
            "delta_p": "P_cand(target) - P_ref(target)",
            "topk_overlap": f"|top-{top_k}(REF) & top-{top_k}(CAND)| / {top_k}",
            "percentiles": "linear interpolation between order statistics (numpy's default)",
        },
        "summary": summary,
        "gates": gates,
        "numerics": pair_numerics(arm(manifest, 0), arm(manifest, 1), ("REF", "CAND")),
    }
    if floor is not None:
        report["noise_floor"] = floor
    return report


def measure_noise_floor(run: FloorRun) -> dict:
    """`run.model` against itself on `run.second`, on a seeded sample of the windows its run
    scores over the texts. The callers refuse API models before their own run."""
    stride = run.window if run.stride is None else run.stride
    config = DiffConfig(run.model.text, run.second.text, tuple(r.sha256 for r in run.corpus.refs), tuple(r.text_id for r in run.corpus.refs), run.window, stride,
                        run.max_tokens, DEFAULT_TOP_K, False, run.block_rows, sample_windows=run.floor.windows, sample_seed=run.floor.seed)
    task = DiffRun(config, run.corpus, (run.model, run.second), run.n_threads)
    engine_run(task, task.spec(), run.out, executor=run.executor, progress=run.progress)
    records = pq.read_table(run.out / DIFF_FILE).to_pandas()
    return floor_summary(records, run.model.text, run.second.text, summarize(records, run.edges, run.bootstrap))
