"""The same sweep on each executor: local (2 threads), Ray (2 workers x 1 thread, and 1 x 1),
and two `ctxeval serve` servers on loopback behind `--base-url` x2 (openai backend).

Prints one Markdown table: wall time of the sweep, its speed relative to local, and whether the records
are identical to local's. The Ray cluster (num_cpus=2) and the servers are started before the
clock starts (their start-up is printed apart); every run scores the same passes from scratch.

    PYTHONPATH=src python bench/bench_executors.py [--lengths 64,128,256] [--n-compare 8] [--repeats 2]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import ray

from ctxeval import api
from ctxeval.server.launch import spawn_server
from ctxeval.backends.openai_options import OpenAIOptions
from ctxeval.pipeline.executors import ExecutorOptions


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lengths", default="64,128,256")
    parser.add_argument("--n-compare", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--api-lengths", default="8,16", help="the server rows' sweep (approx mode)")
    args = parser.parse_args()
    sweep = {"lengths": [int(x) for x in args.lengths.split(",")], "n_compare": args.n_compare, "repeats": args.repeats, "context_mode": "exact"}
    api_sweep = {"lengths": [int(x) for x in args.api_lengths.split(",")], "n_compare": 4, "repeats": 2, "context_mode": "approx"}

    t0 = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False)
    ray_start = time.perf_counter() - t0
    t0 = time.perf_counter()
    servers = [spawn_server(n_ctx=1024, n_threads=1), spawn_server(n_ctx=1024, n_threads=1)]
    server_start = time.perf_counter() - t0
    openai = OpenAIOptions(base_url=servers[0][1], fanout=(servers[1][1],), mode="prompt", tokenizer="gemma-3-270m", cache=None, concurrency=1, top_logprobs=20)

    setups = [
        ("local, 2 threads", sweep, {"n_threads": 2}),
        ("ray, 2 workers x 1 thread", sweep, {"executor": ExecutorOptions("ray", workers=2, threads_per_worker=1)}),
        ("ray, 1 worker x 1 thread", sweep, {"executor": ExecutorOptions("ray", workers=1, threads_per_worker=1)}),
        ("local, 2 threads (server sweep)", api_sweep, {"n_threads": 2}),
        ("2 x ctxeval serve (1 thread each), --base-url x2", api_sweep, {"models": ["openai:gemma-3-270m"], "openai": openai}),
    ]
    rows = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for label, plan, options in setups:
                out = Path(tmp) / str(len(rows))
                start = time.perf_counter()
                result = api.sweep(**plan, out=out, **options)
                seconds = time.perf_counter() - start
                records = result.records
                if label.startswith("local"):
                    reference, local_seconds = records, seconds
                if "openai" in options:  # API records: ids unknown (-1); ranks exact from the server's prompt_logprobs
                    delta = np.abs(records["logprob"].to_numpy() - reference["logprob"].to_numpy()).max()
                    ranks = "identical" if records["rank"].tolist() == reference["rank"].tolist() else "DIFFER"
                    same = f"logprobs within {delta:.1e}, ranks {ranks} (ids unknown to an API)"
                else:
                    same = "yes" if records.equals(reference) else "NO"
                rows.append((label, seconds, local_seconds / seconds, same, len(records)))
    finally:
        for proc, _ in servers:
            proc.terminate()
        ray.shutdown()

    print(f"sweep: lengths {args.lengths}, n_c {args.n_compare}, {args.repeats} repeats, exact ({rows[0][4]} targets, one pass each); "
          f"server rows: lengths {args.api_lengths}, n_c 4, 2 repeats, approx ({rows[3][4]} targets)")
    print(f"start-up outside the clock: Ray cluster {ray_start:.1f} s, two servers {server_start:.1f} s\n")
    print("| executor | wall (s) | speed vs local (local time / time) | records identical to local |")
    print("|---|---:|---:|---|")
    for label, seconds, speed, same, _ in rows:
        print(f"| {label} | {seconds:.1f} | {speed:.2f}x | {same} |")


if __name__ == "__main__":
    main()
