"""`ctxeval diff`: check the options, run (or resume) the lockstep comparison, summarise, gate."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq

from ctxeval.backends.registry import refuse_api_models
from ctxeval.data.corpus import Corpus, CorpusOptions, open_corpus
from ctxeval.modeldiff.keytokens import check_gain_run, key_token_mask
from ctxeval.modeldiff.noise_floor import NoiseFloor, floor_dir, floor_summary
from ctxeval.modeldiff.report import gate, write_report
from ctxeval.modeldiff.run import DEFAULT_BLOCK_ROWS, DIFF_FILE, DiffConfig, DiffRun
from ctxeval.pipeline.engine import run
from ctxeval.modeldiff.summary import Bootstrap, bucket_edges, summarize
from ctxeval.errors import UserError
from ctxeval.explorer.diffpage import REPORT_HTML, write_diff_html
from ctxeval.pipeline.executors import ExecutorOptions
from ctxeval.report.compare import PROFILES
from ctxeval.report.numerics import arm, pair_numerics

DEFAULT_TOP_K = 10


@dataclass
class DiffResult:
    """A finished diff: its directory, the report (diff.json's content), diff.md, gate failures
    (report.html beside them)."""

    run_dir: Path
    report: dict
    markdown: str
    failures: list[str]

    def files(self) -> dict[str, Path]:
        return {"records": self.run_dir / DIFF_FILE, "report": self.run_dir / "diff.json", "markdown": self.run_dir / "diff.md", "html": self.run_dir / REPORT_HTML}


def diff(
    ref: str,
    cand: str,
    texts: Sequence[str | Path],
    *,
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
    path, on a seeded sample of the windows (`modeldiff/noise_floor.py`), drawn under the KL."""
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
    task = DiffRun(config, loaded, n_threads)
    manifest = run(task, task.spec(), run_dir, executor=executor, progress=progress)
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
    ref_entry, cand_entry = manifest.models
    report = {
        "ref": {"name": ref_entry["name"], "path": ref_entry["path"], "sha256": ref_entry["sha256"]},
        "cand": {"name": cand_entry["name"], "path": cand_entry["path"], "sha256": cand_entry["sha256"]},
        "run_id": manifest.run_id,
        "settings": {"window": window, "stride": stride, "max_tokens": max_tokens, "top_k": top_k, "reverse": reverse, "bucket_edges": edges,
                     "replicates": bootstrap.replicates, "seed": bootstrap.seed, "confidence": bootstrap.confidence},
        "definitions": {
            "kl": "KL(P_ref || P_cand) = sum_v P_ref(v) log(P_ref(v) / P_cand(v)) over the full vocabulary, nats, per scored token",
            "same_top1": "percent of tokens whose REF and CAND argmax agree",
            "ppl_ratio": "exp(sum_i t_i (loss_i(CAND) - loss_i(REF)) / sum_i t_i) over windows i with t_i tokens (in the bucket)",
            "delta_p": "P_cand(target) - P_ref(target)",
            "topk_overlap": f"|top-{top_k}(REF) & top-{top_k}(CAND)| / {top_k}",
            "percentiles": "linear interpolation between order statistics (numpy's default)",
        },
        "summary": summary,
        "gates": {"profile": profile, "max_kl": max_kl, "min_same_top": min_same_top, "failures": failures},
        "numerics": pair_numerics(arm(manifest, 0), arm(manifest, 1), ("REF", "CAND")),
    }
    if floor is not None:
        report["noise_floor"] = floor
    markdown = write_report(report, run_dir)
    write_diff_html(run_dir, report, records, mask)
    return DiffResult(run_dir, report, markdown, failures)


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
