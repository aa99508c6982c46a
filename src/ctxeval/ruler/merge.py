"""One RULER run folder written from the samples of several: `ruler --until`'s rounds, or a
study's variants run in separate processes (bench/join_ruler_runs.py). Either way the folder is
an ordinary finished run: its records in plan order and a manifest that says where they came from."""

from __future__ import annotations

import shutil
from dataclasses import fields, replace
from pathlib import Path

import pandas as pd
import pyarrow as pa

from ctxeval.errors import UserError
from ctxeval.pipeline.engine import write_combined
from ctxeval.results.manifest import Manifest, read_manifest
from ctxeval.results.records import write_records
from ctxeval.results.ruler import SAMPLES_FILE, read_samples
from ctxeval.ruler.generation import Generation
from ctxeval.ruler.run import SAMPLE_SCHEMA, SAMPLES, RulerConfig

# what a run's variants may differ in: which models, and where and how each ran
PER_VARIANT = ("models", "device", "dtype", "api", "skip")


def shared_config() -> tuple[str, ...]:
    """The config keys every joined folder must agree on: RulerConfig's, but the per-variant ones."""
    generation = tuple(Generation().config())
    return tuple(k for f in fields(RulerConfig) for k in (generation if f.name == "generation" else (f.name,)) if k not in PER_VARIANT)


def write_run(out: Path, samples: pd.DataFrame, manifest: Manifest) -> Manifest:
    """`samples` (numbered anew in their order) as the records of the run in `out`, with `manifest`."""
    out.mkdir(parents=True, exist_ok=True)
    records = samples.assign(sample_index=range(len(samples)))
    write_records(out, pa.Table.from_pandas(records[SAMPLE_SCHEMA.names], schema=SAMPLE_SCHEMA, preserve_index=False), SAMPLES)
    return write_combined(out, manifest)


def join_runs(runs: list[Path], out: Path) -> pd.DataFrame:
    """The samples of finished runs of one study's variants, written to `out` as one run whose
    first model is the first folder's first (every paired difference's reference); refused unless
    the folders share their configuration but the variants and every prompt agrees. A folder
    already at `out` is replaced."""
    unfinished = [str(run) for run in runs if not (run / SAMPLES_FILE).is_file()]
    if unfinished:
        raise UserError(f"{', '.join(unfinished)}: no {SAMPLES_FILE}, not a finished ruler run (let it finish, or rerun it to resume)")
    manifests = [read_manifest(run) for run in runs]
    first = manifests[0]
    for run, manifest in zip(runs, manifests):
        if manifest.command != "ruler":
            raise UserError(f"{run}: not a ruler run")
        differing = [k for k in shared_config() if manifest.config.get(k) != first.config.get(k)]
        if differing:
            raise UserError(f"{run} differs from {runs[0]} in {', '.join(differing)}")
    samples = pd.concat([read_samples(run) for run in runs], ignore_index=True)
    models = [m for manifest in manifests for m in manifest.config["models"]]
    if len(set(models)) != len(models):
        raise UserError("a model appears in more than one folder")
    prompts = samples.groupby(["task", "length", "sample"])["prompt_sha256"].nunique()
    if (prompts > 1).any():
        raise UserError(f"the folders' prompts differ at {prompts[prompts > 1].index[0]}: not the same samples")
    seconds = sum(float(m.timing["seconds_all_sessions"]) for m in manifests)
    joined = replace(first, config=dict(first.config, models=models), models=[m for manifest in manifests for m in manifest.models],
                     timing=dict(first.timing, seconds_this_session=seconds, seconds_all_sessions=seconds),
                     extra=dict(first.extra, joined_from=[str(run) for run in runs]))
    if out.exists():
        shutil.rmtree(out)
    write_run(out, samples, joined)
    return samples
