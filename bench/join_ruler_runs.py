"""Join `ruler` folders that ran one study's variants in separate processes into one folder.

Two one-thread processes, each on its own core with half the variants, finish a study nearly
twice as fast as one process on both cores (a batch-1 decode of a small model gains little from
a second thread). The validation scripts (`ppi_validation.py`, `ppi_until_simulation.py`) read
one folder whose variants are paired; this writes it. Refused unless the folders ran the same
tasks, lengths, samples, seed and essay, and every sample's prompt hash agrees across them (the
variants saw the same prompts). The first folder's first model stays first: the variant every
paired difference is taken against. The joined manifest's seconds are the folders' sum, the
compute the study took.

    python bench/join_ruler_runs.py RUN RUN [RUN ...] --out DIR
"""

from __future__ import annotations

import argparse
import shutil
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ctxeval.errors import UserError
from ctxeval.results.manifest import read_manifest, write_manifest
from ctxeval.results.ruler import SAMPLES_FILE

SHARED_CONFIG = ("tasks", "lengths", "samples", "seed", "essay_sha256", "ruler_commit", "chat_template", "likelihood_only", "full_generation",
                 "generate_share", "generate_count", "first_sample", "cells")


def join(runs: list[Path], out: Path) -> pd.DataFrame:
    """The joined samples, written with the joined manifest to `out`."""
    unfinished = [str(run) for run in runs if not (run / SAMPLES_FILE).is_file()]
    if unfinished:
        raise SystemExit(f"{', '.join(unfinished)}: no {SAMPLES_FILE}, not a finished ruler run (let it finish, or rerun it to resume)")
    manifests = [read_manifest(run) for run in runs]
    first = manifests[0]
    for run, manifest in zip(runs, manifests):
        if manifest.command != "ruler":
            raise SystemExit(f"{run}: not a ruler run")
        differing = [k for k in SHARED_CONFIG if manifest.config.get(k) != first.config.get(k)]
        if differing:
            raise SystemExit(f"{run} differs from {runs[0]} in {', '.join(differing)}")
    tables = [pq.read_table(run / SAMPLES_FILE) for run in runs]
    samples = pd.concat([t.to_pandas() for t in tables], ignore_index=True)
    models = [m for manifest in manifests for m in manifest.config["models"]]
    if len(set(models)) != len(models):
        raise SystemExit("a model appears in more than one folder")
    prompts = samples.groupby(["task", "length", "sample"])["prompt_sha256"].nunique()
    if (prompts > 1).any():
        raise SystemExit(f"the folders' prompts differ at {prompts[prompts > 1].index[0]}: not the same samples")
    samples["sample_index"] = range(len(samples))
    seconds = sum(float(m.timing["seconds_all_sessions"]) for m in manifests)
    joined = replace(first, config=dict(first.config, models=models), models=[m for manifest in manifests for m in manifest.models],
                     timing=dict(first.timing, seconds_this_session=seconds, seconds_all_sessions=seconds),
                     extra=dict(first.extra, joined_from=[str(run) for run in runs]))
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    pq.write_table(pa.Table.from_pandas(samples, schema=tables[0].schema, preserve_index=False), out / SAMPLES_FILE)
    write_manifest(out, joined)
    return samples


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if len(args.runs) < 2:
        parser.error("give two or more folders")
    samples = join(args.runs, args.out)
    print(f"{args.out}: {len(samples)} samples of {samples['model'].nunique()} variants")


if __name__ == "__main__":
    try:
        main()
    except UserError as exc:  # a folder that is not a (finished) run: one line, no traceback
        raise SystemExit(f"error: {exc}") from None
