"""`ctxeval diff`: check the options, run (or resume) the lockstep comparison, summarise, gate."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from ctxeval.backends.registry import refuse_api_models
from ctxeval.data.corpus import Corpus, CorpusOptions, open_corpus
from ctxeval.modeldiff.keytokens import check_gain_run, key_token_mask
from ctxeval.modeldiff.noise_floor import NoiseFloor, floor_dir, floor_summary
from ctxeval.modeldiff.report import gate, render_markdown
from ctxeval.modeldiff.run import DEFAULT_BLOCK_ROWS, DIFF_FILE, DiffConfig, DiffRun
from ctxeval.pipeline.engine import run
from ctxeval.modeldiff.summary import Bootstrap, bucket_edges, summarize
from ctxeval.errors import UserError
from ctxeval.pipeline.executors import ExecutorOptions
from ctxeval.pipeline.manifest import Manifest
from ctxeval.stats.gates import PROFILES
from ctxeval.report.numerics import arm, pair_numerics
from ctxeval.results.diff import DiffResult

DEFAULT_TOP_K = 10
# renders a finished diff's page (explorer/diffpage.py's `render_diff`, passed by the command so
# that this package imports no explorer): (run directory, report, records, key-token mask) -> HTML
RenderPage = Callable[[Path, dict, pd.DataFrame, np.ndarray | None], str]


def diff(
    ref: str,
    cand: str,
    texts: Sequence[str | Path],
    *,
    render_page: RenderPage,
    window: int,
    stride: int | None = None,
    max_tokens: int | None = None,
    top_k: int = DEFAULT_TOP_K,
    reverse: bool = False,
    buckets: Sequence[int] | None = None,
    out: str | Path | None = None,
    progress: bool = False,
    n_threads: int | None = None,
    profile: str = "dev",
    max_kl: float | None = None,
    min_same_top: float | None = None,
    min_windows: int | None = None,
    min_tokens: int | None = None,
    bootstrap: Bootstrap = Bootstrap(),
    block_rows: int = DEFAULT_BLOCK_ROWS,
    key_tokens: str | Path | None = None,
    corpus: CorpusOptions = CorpusOptions(),
    executor: ExecutorOptions | None = None,
    noise_floor: NoiseFloor | None = None,
) -> DiffResult:
    """Compare CAND's next-token distributions with REF's on the same windows of `texts`.

    `key_tokens`: a finished context-gain run over the same texts; the summaries are also given
    over its evaluator's key tokens (by character span). `noise_floor`: REF on a second numeric
    path, on a seeded sample of the windows (`modeldiff/noise_floor.py`), drawn under the KL.
    The run's finisher summarises and gates the records into the result, which the engine writes."""
    refuse_api_models([ref, cand], "diff", "the full next-token distribution")
    if noise_floor is not None:
        refuse_api_models([noise_floor.second_spec(ref)], "--noise-floor", "the full next-token distribution")
    if window < 2:
        raise UserError(f"--window must be at least 2, got {window}")
    stride = window if stride is None else stride
    if not 1 <= stride <= window:
        raise UserError(f"--stride must be within 1..--window ({window}), got {stride}")
    if max_tokens is not None and max_tokens < 1:
        raise UserError(f"--max-tokens must be a positive integer, got {max_tokens}")
    if top_k < 1:
        raise UserError(f"--top-k must be a positive integer, got {top_k}")
    if block_rows < 1:
        raise UserError(f"--block-rows must be a positive integer, got {block_rows}")
    if profile not in PROFILES:
        raise UserError(f"unknown --profile {profile!r}; choose one of {', '.join(PROFILES)}")
    if max_kl is not None and max_kl < 0:
        raise UserError(f"--max-kl must not be negative, got {max_kl:g}")
    if min_same_top is not None and not 0 <= min_same_top <= 100:
        raise UserError(f"--min-same-top is a percentage within 0..100, got {min_same_top:g}")
    if bootstrap.replicates < 100:
        raise UserError(f"--replicates must be at least 100, got {bootstrap.replicates}")
    edges = bucket_edges(window, tuple(buckets) if buckets else None)
    if key_tokens is not None:
        check_gain_run(Path(key_tokens))
    loaded = open_corpus(texts, corpus)
    config = DiffConfig(ref, cand, tuple(r.sha256 for r in loaded.refs), tuple(r.text_id for r in loaded.refs), window, stride, max_tokens, top_k, reverse, block_rows)
    run_dir = Path(out) if out is not None else Path("runs") / f"diff-{config.run_id()[:8]}"
    settings = {"window": window, "stride": stride, "max_tokens": max_tokens, "top_k": top_k, "reverse": reverse, "bucket_edges": edges,
                "replicates": bootstrap.replicates, "seed": bootstrap.seed, "confidence": bootstrap.confidence}

    def finish(run_dir: Path, manifest: Manifest) -> DiffResult:
        records = pq.read_table(run_dir / DIFF_FILE).to_pandas()
        summary = summarize(records, edges, bootstrap)
        mask = None
        if key_tokens is not None:
            mask, picked = key_token_mask(records, manifest.texts or [], Path(key_tokens))
            summary["key_tokens"] = picked | (summarize(records[mask], edges, bootstrap) if mask.any() else {})
        floor = None
        if noise_floor is not None:
            floor = measure_noise_floor(ref, noise_floor, loaded, window=window, stride=stride, max_tokens=max_tokens, edges=edges, out=floor_dir(run_dir),
                                        block_rows=block_rows, bootstrap=bootstrap, n_threads=n_threads, executor=executor, progress=progress)
        failures = gate(summary, profile, max_kl, min_same_top, min_windows, min_tokens)
        gates = {"profile": profile, "max_kl": max_kl, "min_same_top": min_same_top, "failures": failures}
        report = diff_report(manifest, settings, summary, gates, floor)
        return DiffResult(run_dir, manifest, report, render_markdown(report), render_page(run_dir, report, records, mask), failures)

    task = DiffRun(config, loaded, n_threads, finish)
    return run(task, task.spec(), run_dir, executor=executor, progress=progress)


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


def measure_noise_floor(
    model: str,
    floor: NoiseFloor,
    loaded: Corpus,
    *,
    window: int,
    stride: int | None,
    max_tokens: int | None,
    edges: list[int],
    out: Path,
    block_rows: int = DEFAULT_BLOCK_ROWS,
    bootstrap: Bootstrap = Bootstrap(),
    n_threads: int | None = None,
    executor: ExecutorOptions | None = None,
    progress: bool = False,
) -> dict:
    """`model` against itself on `floor`'s second numeric path, on a seeded sample of the
    windows a run with these options scores over the `loaded` texts (a diff run in `out`,
    resumed like any other). The callers refuse API models before their own run."""
    second = floor.second_spec(model)
    stride = window if stride is None else stride
    config = DiffConfig(model, second, tuple(r.sha256 for r in loaded.refs), tuple(r.text_id for r in loaded.refs), window, stride, max_tokens,
                        DEFAULT_TOP_K, False, block_rows, sample_windows=floor.windows, sample_seed=floor.seed)
    task = DiffRun(config, loaded, n_threads)
    run(task, task.spec(), out, executor=executor, progress=progress)
    records = pq.read_table(out / DIFF_FILE).to_pandas()
    return floor_summary(records, model, second, summarize(records, edges, bootstrap))
