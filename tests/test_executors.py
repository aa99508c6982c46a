"""Executors: the Ray executor gives the local executor's records, survives a killed worker and a
killed driver; option errors are one line and exit code 2.

The Ray tests start one local cluster (num_cpus=2, 127.0.0.1, no dashboard) for the module and
shut it down after. Records are compared column by column with no tolerance: on this machine
(AMD EPYC Zen3, AVX2) local with 1 thread and Ray actors with 1 thread each gave bit-identical
Parquet contents, as docs/numerics.md found for n_threads and n_batch.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from ctxeval.server.launch import spawn_server
from ctxeval import api
from ctxeval.backends.openai_options import OpenAIOptions
from ctxeval.errors import FieldError, UserError
from ctxeval.pipeline.executors import ExecutorOptions, Work, open_executor
from ctxeval.pipeline.executors.work import one_per_unit
from ctxeval.pipeline.executors.ray import KILL_WORKER_AFTER_ENV, interleaved
from ctxeval.results.records import STOP_AFTER_PASSES_ENV

from .conftest import run_cli

SRC = Path(__file__).resolve().parents[1] / "src"
RAY2 = ExecutorOptions("ray", workers=2, threads_per_worker=1)
SWEEP = {"lengths": (16, 48), "n_compare": 4, "repeats": 2, "context_mode": "both"}


@pytest.fixture(scope="module")
def ray_address():
    """A local Ray cluster for this module; its workers import ctxeval (and these tests' helper
    classes) from this checkout."""
    ray = pytest.importorskip("ray")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SRC), str(SRC.parent), os.environ.get("PYTHONPATH", "")]))
    context = ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False)
    yield context.address_info["address"]
    ray.shutdown()


def _records(run_dir: Path) -> pd.DataFrame:
    return pq.read_table(run_dir / "records.parquet").to_pandas()


def _same_run(a: Path, b: Path) -> None:
    """Identical records (every column, every row, plan order), identical summaries and equal
    fingerprints; only the numeric path's description may differ (Ray workers are not
    inspected; an API run names its servers)."""
    pd.testing.assert_frame_equal(_records(a), _records(b))
    summaries = [json.loads((d / "summary.json").read_text()) for d in (a, b)]
    for summary in summaries:
        summary.pop("numerics", None)  # numeric paths; context-gain summaries have none
    assert summaries[0] == summaries[1]
    fingerprints = [json.loads((d / "manifest.json").read_text())["fingerprints"] for d in (a, b)]
    assert fingerprints[0] and fingerprints[0] == fingerprints[1]


@pytest.fixture(scope="module")
def local_sweep(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("local") / "sweep"
    api.sweep(**SWEEP, out=out, n_threads=1)
    return out


@pytest.mark.model
def test_sweep_on_ray_gives_the_local_records(ray_address, local_sweep, tmp_path):
    api.sweep(**SWEEP, out=tmp_path / "ray", executor=RAY2)
    _same_run(local_sweep, tmp_path / "ray")
    manifest = json.loads((tmp_path / "ray" / "manifest.json").read_text())
    assert manifest["run_id"] == json.loads((local_sweep / "manifest.json").read_text())["run_id"]


@pytest.mark.model
def test_score_on_ray_gives_the_local_records(ray_address, tmp_path):
    args = {"texts": "demo", "method": "sliding", "window": 64, "stride": 32, "max_tokens": 256}
    api.score(**args, out=tmp_path / "local", n_threads=1)
    api.score(**args, out=tmp_path / "ray", executor=RAY2)
    _same_run(tmp_path / "local", tmp_path / "ray")


@pytest.mark.model
def test_context_gain_on_ray_gives_the_local_records(ray_address, tmp_path):
    args = {"texts": ["demo"], "window": 64, "short": 16, "max_tokens": 192, "replicates": 200}
    api.context_gain(**args, out=tmp_path / "local", n_threads=1)
    api.context_gain(**args, out=tmp_path / "ray", executor=RAY2)
    _same_run(tmp_path / "local", tmp_path / "ray")


@pytest.mark.model
def test_effective_length_on_ray_gives_the_local_records(ray_address, tmp_path):
    args = {"texts": ["demo"], "lengths": (16, 64), "starts": 2, "targets": 8, "replicates": 200, "models": ("gemma-3-270m", "gemma-3-270m?max_context=32")}
    api.effective_length(**args, out=tmp_path / "local", n_threads=1)
    api.effective_length(**args, out=tmp_path / "ray", executor=RAY2)
    _same_run(tmp_path / "local", tmp_path / "ray")


@pytest.mark.model
def test_a_killed_worker_loses_and_duplicates_no_pass(ray_address, local_sweep, tmp_path, monkeypatch):
    monkeypatch.setenv(KILL_WORKER_AFTER_ENV, "2")  # ray.kill on a busy actor after 2 passes came back
    api.sweep(**SWEEP, out=tmp_path / "ray", executor=RAY2)
    records = _records(tmp_path / "ray")
    assert not records.duplicated(["pass_index", "target_pos"]).any()
    assert records.pass_index.nunique() == json.loads((tmp_path / "ray" / "manifest.json").read_text())["plan"]["passes"]
    _same_run(local_sweep, tmp_path / "ray")


@pytest.mark.model
def test_a_killed_driver_resumes_to_the_local_records(ray_address, local_sweep, tmp_path):
    out = tmp_path / "killed"
    args = ["sweep", "--lengths", "16,48", "--n-compare", "4", "--repeats", "2", "--context-mode", "both", "--quiet",
            "--executor", "ray", "--workers", "2", "--address", ray_address, "--out", str(out)]
    env = dict(os.environ, **{STOP_AFTER_PASSES_ENV: "3"})
    killed = subprocess.run([sys.executable, "-m", "ctxeval.cli", *args], capture_output=True, text=True, env=env, timeout=900)
    assert killed.returncode == 130, killed.stderr
    assert not (out / "records.parquet").exists()
    on_disk = pq.read_table(out / "parts", columns=["pass_index"]).column(0).unique().to_pylist()
    assert len(on_disk) == 3  # passes come back in completion order: any 3, each whole
    resumed = run_cli(*args)
    assert resumed.returncode == 0, resumed.stderr
    _same_run(local_sweep, out)
    assert json.loads((out / "manifest.json").read_text())["timing"]["resumed"] is True


@pytest.fixture(scope="module")
def two_servers():
    """Two `ctxeval serve` servers of the embedded model on loopback, one thread each."""
    procs, urls = zip(*(spawn_server(n_ctx=64, n_threads=1, wait_s=600) for _ in range(2)))
    yield urls
    for proc in procs:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.model
def test_openai_passes_dealt_over_two_servers_give_the_one_server_records(two_servers, ray_address, tmp_path):
    def options(urls: list[str]) -> OpenAIOptions:
        return OpenAIOptions(base_url=urls[0], fanout=tuple(urls[1:]), mode="prompt", tokenizer="gemma-3-270m", cache=None, concurrency=1)

    # 4 requests of at most 12 tokens
    args = {"models": ["openai:gemma-3-270m"], "lengths": (4, 8), "n_compare": 4, "repeats": 2, "context_mode": "approx"}
    api.sweep(**args, out=tmp_path / "one", openai=options(two_servers[:1]))
    api.sweep(**args, out=tmp_path / "two", openai=options(two_servers))
    api.sweep(**args, out=tmp_path / "ray", openai=options(two_servers), executor=RAY2)
    for run in ("two", "ray"):
        _same_run(tmp_path / "one", tmp_path / run)
        manifest = json.loads((tmp_path / run / "manifest.json").read_text())
        assert manifest["run_id"] == json.loads((tmp_path / "one" / "manifest.json").read_text())["run_id"]
        usage = manifest["api_usage"]["openai:gemma-3-270m"]
        assert usage["requests"] - usage["retries"] == manifest["plan"]["passes"] == 4, usage  # one request per pass, all servers counted


def test_units_are_dealt_longest_shortest_alternately():
    lengths = [5, 40, 10, 30, 20]
    assert [lengths[i] for i in interleaved(lengths)] == [40, 5, 30, 10, 20]


@pytest.mark.parametrize("options, cli, python", [
    (ExecutorOptions("dask"), "unknown --executor 'dask'", "unknown executor.kind= 'dask'"),
    (ExecutorOptions("ray", workers=0), "--workers must be a positive integer", "executor.workers= must be a positive integer"),
    (ExecutorOptions("ray", threads_per_worker=0), "--threads-per-worker must be a positive integer", "executor.threads_per_worker= must be"),
    (ExecutorOptions("ray", placement_timeout=0), "--placement-timeout must be positive", "executor.placement_timeout= must be positive"),
    (ExecutorOptions("local", workers=2), "--workers, --address, --threads-per-worker, --gpus-per-worker and --placement-timeout apply to --executor ray only",
     "executor.workers=, executor.address=, executor.threads_per_worker=, executor.gpus_per_worker= and executor.placement_timeout= apply to executor.kind= ray only"),
])
def test_bad_executor_options_are_refused_naming_the_option_as_the_caller_spells_it(options, cli, python):
    from ctxeval.commands import COMMANDS
    from ctxeval.options import named

    with pytest.raises(FieldError) as found:
        options.check()
    error = named(COMMANDS["score"].spec, found.value)
    assert cli in str(error) and python in str(error.for_python())


def test_ray_missing_is_one_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    with pytest.raises(UserError, match=r"\.venv/bin/pip install -e '\.\[ray\]'"):
        with open_executor(ExecutorOptions("ray")):
            pass


def test_cli_refuses_ray_options_without_ray_executor():
    result = run_cli("sweep", "--workers", "2", "--lengths", "16")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == ["ctxeval: error: --workers, --address, --threads-per-worker, --gpus-per-worker and --placement-timeout apply to --executor ray only"]


def test_serve_refuses_a_model_it_cannot_serve():
    result = run_cli("serve", "model.bin", "--port", "8000")
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("ctxeval: error: unknown model 'model.bin': use an embedded model (gemma-3-270m, smollm2-135m), a path to a .gguf file"), line


def test_more_servers_do_not_change_what_decides_records():
    one = OpenAIOptions(base_url="http://a:8000/v1")
    two = OpenAIOptions(base_url="http://a:8000", fanout=("http://b:8000/v1/",))
    assert one.identity() == two.identity()
    assert [o.base_url for o in two.per_server()] == ["http://a:8000", "http://b:8000"]
    assert all(o.fanout == () for o in two.per_server())


def _same_table(a: Path, b: Path, name: str) -> None:
    pd.testing.assert_frame_equal(pq.read_table(a / name).to_pandas(), pq.read_table(b / name).to_pandas())


@pytest.mark.model
def test_ruler_on_ray_gives_the_local_records(ray_address, tmp_path):
    args = {"tasks": ("niah_single_1", "vt"), "lengths": (1024,), "samples": 1}  # vt needs more than 512 tokens with gemma
    local = api.ruler(**args, out=tmp_path / "local", n_threads=1)
    ray = api.ruler(**args, out=tmp_path / "ray", executor=RAY2)
    _same_table(tmp_path / "local", tmp_path / "ray", "samples.parquet")
    pd.testing.assert_frame_equal(local.table, ray.table)
    assert len(local.samples) == 2


@pytest.mark.model
def test_retrieval_on_ray_gives_the_local_records(ray_address, tmp_path):
    args = {"lines": (6, 12), "depths": (0.0, 1.0), "samples": 1}
    local = api.retrieval(**args, out=tmp_path / "local", n_threads=1)
    ray = api.retrieval(**args, out=tmp_path / "ray", executor=RAY2)
    _same_table(tmp_path / "local", tmp_path / "ray", "cases.parquet")
    pd.testing.assert_frame_equal(local.cells, ray.cells)
    assert len(local.cases) == 4


@pytest.mark.model
def test_pplqa_on_ray_gives_the_local_records(ray_address, short_mt_bench, tmp_path):
    args = {"answers": str(short_mt_bench), "methods": "pplqa,gptscore,geval_weighted", "reference": str(short_mt_bench.with_name("reference.csv"))}
    local = api.pplqa(**args, out=tmp_path / "local", n_threads=1).report
    ray = api.pplqa(**args, out=tmp_path / "ray", executor=RAY2).report
    _same_table(tmp_path / "local", tmp_path / "ray", "passes.parquet")
    assert (tmp_path / "local" / "scores.csv").read_text() == (tmp_path / "ray" / "scores.csv").read_text()
    assert {k: v for k, v in local.items() if k != "timing"} == {k: v for k, v in ray.items() if k != "timing"}
    assert "pplqa vs reference" in local["agreement"]  # the human votes' ranking is compared too
    # 1 MT-Bench question x 6 answers x (PPL(a), PPL(q+a) shared by PPLqa and GPTScore, G-Eval)
    assert local["timing"]["passes_run_this_session"] == ray["timing"]["passes_run_this_session"] == 1 * 6 * 3


@dataclass(frozen=True)
class _TagSpec:
    """A model that only says which spec loaded it: tests how actors are dealt, not a backend."""

    tag: str

    def load(self, n_threads: int | None = None) -> _Tagger:
        return _Tagger(self.tag)

    def per_server(self) -> list[_TagSpec]:
        return [self]


@dataclass
class _Tagger:
    tag: str
    name: str = "tagger"
    concurrency: int = 1
    remote: bool = False

    def usage(self) -> dict:
        return {}

    def close(self) -> None:
        pass


@dataclass(frozen=True)
class _TagTask:
    def __call__(self, model: _Tagger, items: list[int]) -> list[object]:
        return [f"{model.tag}:{i}" for i in items]


def test_warmed_actors_serve_their_model_and_free_the_cpus_of_others(ray_address):
    """Actors warmed for one model run its work; warmed actors it does not need, or warmed for
    another model, are stopped, so the next model's actors get the cluster's 2 CPUs (a leak
    would leave them waiting for CPUs forever)."""
    def work(n: int) -> Work:
        return Work(_TagTask(), one_per_unit(range(n)), lambda job: job, lambda job: 1)

    with open_executor(RAY2) as runner:
        runner.warm(_TagSpec("a"))
        assert dict(runner.stream(_Tagger("a"), _TagSpec("a"), work(1))) == {0: "a:0"}  # one of the two warmed actors used
        runner.warm(_TagSpec("a"))
        assert dict(runner.stream(_Tagger("b"), _TagSpec("b"), work(5))) == {i: f"b:{i}" for i in range(5)}


def _tag_work(n: int) -> Work:
    return Work(_TagTask(), one_per_unit(range(n)), lambda job: job, lambda job: 1)


def test_an_actor_no_node_could_hold_stops_the_run_at_once_in_one_line(ray_address, tmp_path):
    """3 CPUs an actor on a cluster of one 2-CPU node: Ray would keep it waiting for ever."""
    with open_executor(ExecutorOptions("ray", threads_per_worker=3)) as runner:
        with pytest.raises(FieldError, match=r"^a Ray actor needs 3 CPUs, but no node of the cluster has that many \(the largest has 2 CPUs\); lower threads_per_worker$"):
            runner.warm(_TagSpec("a"))
    result = run_cli("sweep", "--lengths", "16", "--executor", "ray", "--address", ray_address, "--threads-per-worker", "3", "--quiet", "--out", str(tmp_path / "run"))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == ["ctxeval: error: a Ray actor needs 3 CPUs, but no node of the cluster has that many (the largest has 2 CPUs); lower --threads-per-worker"]


def test_actors_that_cannot_be_placed_stop_the_run_after_the_placement_timeout(ray_address):
    """3 actors of 1 CPU on the cluster's 2 CPUs: the third is never placed. The run stops in one
    line naming what it waits for once it has waited --placement-timeout (2 s here); the two placed
    ones were waited for as long as they took to start. Then the cluster's CPUs are free again."""
    ray = pytest.importorskip("ray")
    with open_executor(ExecutorOptions("ray", workers=3, placement_timeout=2)) as runner:
        runner.warm(_TagSpec("a"))
        with pytest.raises(FieldError, match=r"^a Ray actor waited [2-9] s for a node to offer 1 CPU \(the cluster has 2 CPUs, 0 CPUs free: this run's other actors or "
                                             r"other jobs hold them\); free them, or lower workers, or raise placement_timeout$"):
            dict(runner.stream(_Tagger("a"), _TagSpec("a"), _tag_work(5)))
    while ray.available_resources().get("CPU", 0) < 2:  # the killed actors' CPUs come back (the tests after this one need them)
        time.sleep(0.5)
    with open_executor(RAY2) as runner:
        assert dict(runner.stream(_Tagger("b"), _TagSpec("b"), _tag_work(3))) == {i: f"b:{i}" for i in range(3)}


# --- diff: one worker holds REF and CAND --------------------------------------------------------

DIFF_ARGS = {"window": 64, "stride": 32, "max_tokens": 200, "reverse": True, "block_rows": 7}
DIFF_CLI = ["--window", "64", "--stride", "32", "--max-tokens", "200", "--reverse-kl", "--block-rows", "7", "--replicates", "200", "--quiet"]


@pytest.fixture(scope="module")
def tiny_pair(tmp_path_factory) -> tuple[str, str]:
    """REF and CAND: two random-weight transformers models sharing one tokenizer."""
    pytest.importorskip("transformers")
    from ctxeval.data.texts import load_text
    from tests.hf_tiny import tiny_llama_dir

    root, text = tmp_path_factory.mktemp("tiny"), load_text("demo").content[:20000]
    return tuple(f"hf:{tiny_llama_dir(root / name, text, seed=seed, max_positions=256)}" for name, seed in (("a", 0), ("b", 1)))


@pytest.fixture(scope="module")
def local_diff(tiny_pair, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("local") / "diff"
    api.diff(*tiny_pair, ["demo"], **DIFF_ARGS, out=out, n_threads=1, bootstrap=api.Bootstrap(replicates=200))
    return out


def _same_diff(a: Path, b: Path) -> None:
    """Bit-identical diff records (every column, every row, plan order) and identical summaries."""
    records = [pq.read_table(run / "diff_records.parquet").to_pandas() for run in (a, b)]
    pd.testing.assert_frame_equal(*records, check_exact=True)
    assert json.loads((a / "diff.json").read_text())["summary"] == json.loads((b / "diff.json").read_text())["summary"]
    assert json.loads((a / "manifest.json").read_text())["run_id"] == json.loads((b / "manifest.json").read_text())["run_id"]


def test_diff_on_ray_gives_the_local_records(ray_address, tiny_pair, local_diff, tmp_path):
    result = api.diff(*tiny_pair, ["demo"], **DIFF_ARGS, out=tmp_path / "ray", executor=RAY2, bootstrap=api.Bootstrap(replicates=200))
    _same_diff(local_diff, result.run_dir)
    records = pq.read_table(result.run_dir / "diff_records.parquet").to_pandas()
    assert records.target_pos.tolist() == list(range(200)) and (records.kl > 0).all()


def test_a_diff_whose_ray_worker_is_killed_gives_the_local_records(ray_address, tiny_pair, local_diff, tmp_path, monkeypatch):
    monkeypatch.setenv(KILL_WORKER_AFTER_ENV, "1")  # ray.kill on a busy actor (and its pair) after one pass came back
    result = api.diff(*tiny_pair, ["demo"], **DIFF_ARGS, out=tmp_path / "ray", executor=RAY2, bootstrap=api.Bootstrap(replicates=200))
    _same_diff(local_diff, result.run_dir)


def test_a_killed_diff_driver_resumes_on_ray_to_the_local_records(ray_address, tiny_pair, local_diff, tmp_path):
    out = tmp_path / "killed"
    args = ["diff", *tiny_pair, "demo", *DIFF_CLI, "--executor", "ray", "--workers", "2", "--address", ray_address, "--out", str(out)]
    killed = run_cli(*args, env={STOP_AFTER_PASSES_ENV: "2"})
    assert killed.returncode == 130, killed.stderr
    assert not (out / "diff_records.parquet").exists()
    assert len(pq.read_table(out / "parts", columns=["pass_index"]).column(0).unique()) == 2  # any 2 passes, each whole
    resumed = run_cli(*args)
    assert resumed.returncode == 0, resumed.stderr
    _same_diff(local_diff, out)
    assert json.loads((out / "manifest.json").read_text())["timing"]["resumed"] is True


@pytest.mark.model
def test_a_kv_cache_diff_of_gemma_on_ray_gives_the_local_records(ray_address, tmp_path):
    args = {"window": 32, "max_tokens": 128, "bootstrap": api.Bootstrap(replicates=200)}
    kv_q8 = "gemma-3-270m?type_k=q8_0&type_v=q8_0&flash_attn=1"
    api.diff("gemma-3-270m", kv_q8, ["demo"], **args, out=tmp_path / "local", n_threads=1)
    api.diff("gemma-3-270m", kv_q8, ["demo"], **args, out=tmp_path / "ray", executor=RAY2)
    _same_diff(tmp_path / "local", tmp_path / "ray")  # a killed worker's diff: test_a_diff_whose_ray_worker_is_killed_gives_the_local_records
    records = pq.read_table(tmp_path / "ray" / "diff_records.parquet").to_pandas()
    assert len(records) == 128 and (records.kl >= 0).all() and records.kl.max() > 0


def test_a_pressed_model_on_ray_gives_the_local_records(ray_address, tiny_pair, tmp_path):
    pytest.importorskip("kvpress")
    pressed = f"{tiny_pair[0]}?press=SnapKVPress&budget=16&window_size=8"
    args = {"texts": ["demo"], "lengths": (32, 64), "starts": 2, "targets": 8, "replicates": 200, "unit": "span", "models": (tiny_pair[0], pressed)}
    api.effective_length(**args, out=tmp_path / "local", n_threads=1)
    api.effective_length(**args, out=tmp_path / "ray", executor=RAY2)
    _same_run(tmp_path / "local", tmp_path / "ray")
    manifest = json.loads((tmp_path / "ray" / "manifest.json").read_text())
    assert [m["details"]["kv_press"]["budget"] for m in manifest["models"] if "kv_press" in m["details"]] == [16]
