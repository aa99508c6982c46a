"""What a finished diff run is made of: its records summarised and gated into the result (render/ draws its Markdown and page), and the noise floor (a diff of a model against itself on a second numeric path)."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq

from ctxeval.backends.registry import ModelSpec
from ctxeval.data.corpus import Corpus
from ctxeval.modeldiff.keytokens import key_token_mask
from ctxeval.modeldiff.noise_floor import NoiseFloor, floor_dir, floor_summary
from ctxeval.stats.gates import diff_gate
from ctxeval.pieces import read_pieces
from ctxeval.modeldiff.run import DEFAULT_BLOCK_ROWS, DIFF_FILE, DiffConfig, DiffRun
from ctxeval.pipeline.engine import run
from ctxeval.modeldiff.summary import Bootstrap, summarize
from ctxeval.pipeline.executors import ExecutorOptions
from ctxeval.results.manifest import Manifest
from ctxeval.report.numerics import arm, pair_numerics
from ctxeval.results.diff import DiffResult

DEFAULT_TOP_K = 10


def diff_result(run_dir: Path, manifest: Manifest, *, ref: ModelSpec, loaded: Corpus, settings: dict, bootstrap: Bootstrap, key_tokens: Path | None,
                noise_floor: NoiseFloor | None, second: ModelSpec | None, floor_run: dict, gates: dict) -> DiffResult:
    """A finished diff's result: the records summarised (also over a context-gain run's key
    tokens), the noise floor measured where asked (`floor_run`: its block_rows, n_threads,
    executor, progress), gated (`gates`: profile, max_kl, min_same_top, min_windows,
    min_tokens); the result keeps the records, token texts and key-token mask its page shows. `settings` is diff.json's (window, stride, bucket_edges, ...)."""
    records = pq.read_table(run_dir / DIFF_FILE).to_pandas()
    edges = settings["bucket_edges"]
    summary = summarize(records, edges, bootstrap)
    mask = None
    if key_tokens is not None:
        mask, picked = key_token_mask(records, manifest.texts or [], key_tokens)
        summary["key_tokens"] = picked | (summarize(records[mask], edges, bootstrap) if mask.any() else {})
    floor = None
    if noise_floor is not None and second is not None:
        floor = measure_noise_floor(ref, second, noise_floor, loaded, window=settings["window"], stride=settings["stride"], max_tokens=settings["max_tokens"], edges=edges,
                                    out=floor_dir(run_dir), bootstrap=bootstrap, **floor_run)
    failures = diff_gate(summary, gates["profile"], gates["max_kl"], gates["min_same_top"], gates["min_windows"], gates["min_tokens"])
    recorded = {"profile": gates["profile"], "max_kl": gates["max_kl"], "min_same_top": gates["min_same_top"], "failures": failures}
    report = diff_report(manifest, settings, summary, recorded, floor)
    return DiffResult(run_dir, manifest, report, failures=failures, records=records, pieces=read_pieces(run_dir, report["ref"]["name"]), key_mask=mask)


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
    model: ModelSpec,
    second: ModelSpec,
    floor: NoiseFloor,
    loaded: Corpus,
    *,
    window: int,
    stride: int | None,
    max_tokens: int | None,
    edges: list[int],
    out: Path,
    n_threads: int | None,
    executor: ExecutorOptions | None,
    progress: bool,
    block_rows: int = DEFAULT_BLOCK_ROWS,
    bootstrap: Bootstrap = Bootstrap(),
) -> dict:
    """`model` against itself on `second`, `floor`'s second numeric path, on a seeded sample of
    the windows a run with these options scores over the `loaded` texts (a diff run in `out`,
    resumed like any other). The callers refuse API models before their own run."""
    stride = window if stride is None else stride
    config = DiffConfig(model.text, second.text, tuple(r.sha256 for r in loaded.refs), tuple(r.text_id for r in loaded.refs), window, stride, max_tokens,
                        DEFAULT_TOP_K, False, block_rows, sample_windows=floor.windows, sample_seed=floor.seed)
    task = DiffRun(config, loaded, (model, second), n_threads)
    run(task, task.spec(), out, executor=executor, progress=progress)
    records = pq.read_table(out / DIFF_FILE).to_pandas()
    return floor_summary(records, model.text, second.text, summarize(records, edges, bootstrap))
