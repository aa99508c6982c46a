"""Run the evaluator passes of an answer-quality command through an executor, as records.

Each pass is a record (`QA_PASSES`: one row per pass, keyed by its content hash) written in
atomic Parquet parts while the work runs and merged into `passes.parquet` at the end, so an
interrupted `pplqa` or `meta-eval` loses at most the passes in flight, and a re-run (also one
with other methods or more items, since keys are content hashes) runs only passes not yet
recorded. The run directory's manifest says which command and configuration wrote it last.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ctxeval.executors import ExecutorOptions, ScorerSpec, Work, open_executor
from ctxeval.executors.work import one_per_unit
from ctxeval.config import config_id
from ctxeval.manifest import Manifest, existing_manifest, now, write_manifest
from ctxeval.qa.evaluator import Evaluator, PassRequest, QATask
from ctxeval.records import RecordKind, RowSink, done_passes, merge_parts
from ctxeval.run import model_entries, progress_bar, terminate_as_interrupt, versions

PASSES_FILE = "passes.parquet"
QA_PASSES = RecordKind(PASSES_FILE, "key", ("key",))
PASS_SCHEMA = pa.schema(
    [
        ("key", pa.string()),
        ("kind", pa.string()),
        ("n_input", pa.int32()),
        ("n_prefix", pa.int32()),
        ("prefix_sum", pa.float64()),
        ("n_cont", pa.int32()),
        ("cont_sum", pa.float64()),
        ("digit_logprobs", pa.list_(pa.float64())),
        ("top_k", pa.int32()),
    ]
)


@dataclass
class PassRecords:
    """The records of every pass an evaluation needs, by request, and how many ran now."""

    evaluator: Evaluator
    by_key: dict[str, dict]
    run_now: int

    def __call__(self, request: PassRequest) -> dict:
        return self.by_key[self.evaluator.key(request)]


def run_passes(ev: Evaluator, load_spec: ScorerSpec, requests: list[PassRequest], out_dir: Path, command: str, config: dict,
               progress: bool, executor: ExecutorOptions | None) -> PassRecords:
    """Record every request's pass that is not recorded yet, then return all of them."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (executor or ExecutorOptions()).check()
    max_len = ev.max_input_len(requests)
    keyed = {ev.key(r): r for r in requests}
    done = done_passes(out_dir, QA_PASSES)
    pending = [key for key in keyed if key not in done]
    previous = existing_manifest(out_dir)  # not refused: passes are keyed by content, any configuration may reuse them
    manifest = Manifest(command=command, run_id=config_id(config), config=config, models=model_entries([ev.scorer]),
                        created=(previous.created if previous else None) or now(),
                        plan={"passes": len(keyed), "record_kind": "qa pass", "records": PASSES_FILE}, versions=versions())
    write_manifest(out_dir, manifest)
    started = time.time()
    sink = RowSink(out_dir, PASS_SCHEMA)
    # cost: characters, a proxy for tokens that needs no second tokenization
    work = Work(QATask(max_len), one_per_unit(pending), lambda key: ev.qa_pass(keyed[key]), lambda key: len(keyed[key].prefix) + len(keyed[key].continuation))
    if pending:  # (a Ray executor would start a cluster for nothing)
        with open_executor(executor) as runner, terminate_as_interrupt(), progress_bar(progress, len(keyed), len(keyed) - len(pending), unit="passes") as advance:
            try:
                for _, row in runner.stream(ev.scorer, load_spec, work):
                    advance(1, command)
                    sink.add(row)
            finally:
                sink.flush()
    merge_parts(out_dir, PASS_SCHEMA, QA_PASSES)
    manifest.status = "complete"
    manifest.timing = {"seconds_this_session": round(time.time() - started, 2), "resumed": previous is not None}
    write_manifest(out_dir, manifest)
    table = pq.read_table(out_dir / PASSES_FILE).to_pylist()
    return PassRecords(ev, {row["key"]: row for row in table}, sink.added)

