"""The command line's faults, each as a user meets it: an --out that cannot be created, a run
stopped by Ctrl-C or `kill`, --version, --help's text, and what `ctxeval --help` imports."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import metadata
from pathlib import Path

import pytest

from ctxeval import catalog
from ctxeval.errors import EXIT_USER_ERROR
from tests.conftest import SHARED_DATA, run_cli

LEVAL = SHARED_DATA / "leval" / "predictions" / "llm_gpt4_eval"
HEAVY = ("torch", "pandas", "pyarrow", "matplotlib", "scipy", "jinja2")


def _one_line_error(proc: subprocess.CompletedProcess, *expected: str) -> None:
    assert proc.returncode == EXIT_USER_ERROR, proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("ctxeval: error: "), proc.stderr
    assert all(e in proc.stderr for e in expected), proc.stderr


@pytest.mark.parametrize("args", [
    ["sweep", "--lengths", "16", "--n-compare", "2"],  # a model-backed command (refused before a model loads)
    ["agreement", "{folder}"],  # a post-hoc one
])
def test_an_out_under_a_file_is_one_line_and_exit_code_2(args, tmp_path):
    in_the_way = tmp_path / "a-file"
    in_the_way.write_text("not a folder")
    args = [a.format(folder=tmp_path) for a in args]
    _one_line_error(run_cli(*args, "--out", str(in_the_way / "run")), f"--out {in_the_way / 'run'} cannot be created", f"{in_the_way} is a file, not a folder")
    _one_line_error(run_cli(*args, "--out", str(in_the_way)), f"--out {in_the_way} is a file, not a folder")
    assert in_the_way.read_text() == "not a folder"


def test_the_reports_file_under_a_file_is_one_line_and_exit_code_2(tmp_path):
    in_the_way = tmp_path / "a-file"
    in_the_way.write_text("")
    _one_line_error(run_cli("report", str(tmp_path), "--out", str(in_the_way / "sub" / "report.html")), f"{in_the_way} is a file, not a folder")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a folder without write permission")
def test_an_out_in_a_folder_without_write_permission_is_one_line(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    _one_line_error(run_cli("sweep", "--lengths", "16", "--n-compare", "2", "--out", str(locked / "run")), f"{locked} is not writable")


def test_version_is_the_installed_packages():
    proc = run_cli("--version")
    assert proc.returncode == 0 and proc.stdout == f"ctxeval {metadata.version('ctxeval')}\n", proc.stderr


def test_help_lists_every_command_in_one_whole_sentence_and_shows_no_type_beside_a_switch():
    top = run_cli("--help")
    assert top.returncode == 0, top.stderr
    for name in catalog.COMMANDS:
        # each summary on one line (COLUMNS=200: wide enough), never broken where a source line ended
        line = next(line for line in top.stdout.splitlines() if line.startswith(f"│ {name} "))
        assert catalog.SUMMARIES[name] in line and catalog.SUMMARIES[name].endswith("."), line
    assert "--version" in top.stdout and "<bool>" not in top.stdout
    sweep = run_cli("sweep", "--help")
    assert sweep.returncode == 0 and "<bool>" not in sweep.stdout
    switch = next(line for line in sweep.stdout.splitlines() if "--quiet" in line)
    assert switch.split("--quiet")[1].split()[0] == "No", switch  # the help text follows the flag, no type between


def test_help_imports_no_heavy_library():
    """`ctxeval --help` lists the commands from the catalog without importing any command's code."""
    code = ("import sys\nfrom ctxeval import cli\nsys.argv = ['ctxeval', '--help']\n"
            "try:\n    cli.main()\nexcept SystemExit:\n    pass\n"
            f"print('IMPORTED', sorted(m for m in {HEAVY!r} if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=dict(os.environ, COLUMNS="200"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "IMPORTED []"


# How long the local server holds a request: far beyond how long a test waits for an interrupted
# run to exit, so a run that waited for its request (instead of abandoning it) fails the test
# rather than passing once the server lets go.
HOLD_SECONDS = 600
EXIT_WAIT_SECONDS = 60


class _HoldingServer:
    """An OpenAI-compatible chat server that answers its first `answer` requests and holds every
    later one until released, so a test can interrupt a run while it waits for a model."""

    def __init__(self, answer: int = 1) -> None:
        self.holding, self.release = threading.Event(), threading.Event()
        self.requests = 0
        lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                self.rfile.read(int(self.headers.get("content-length", 0)))
                with lock:
                    server.requests += 1
                    held = server.requests > answer and not server.release.is_set()
                if held:
                    server.holding.set()
                    server.release.wait(HOLD_SECONDS)
                payload = json.dumps({"choices": [{"message": {"role": "assistant", "content": "[[A]]"}}],
                                      "usage": {"prompt_tokens": 100, "completion_tokens": 5}}).encode()
                try:
                    self.send_response(200)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except OSError:  # the interrupted client is gone
                    pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.release.set()
        self._server.shutdown()
        self._server.server_close()


# The CLI as `python -m ctxeval.cli`, with SIGINT unblocked and raising KeyboardInterrupt
# whatever the test process passed on (a background job of a non-interactive shell starts with
# SIGINT ignored, and Python then installs no handler). Set by the child's own Python after
# exec, never by a preexec_fn: Python code run between fork and exec in a process with threads
# (this test's server, the test runner's) can wait for ever on a lock another thread held.
CLI_WITH_SIGINT = [sys.executable, "-c", "import runpy, signal, sys; signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT}); "
                   "signal.signal(signal.SIGINT, signal.default_int_handler); sys.argv[0] = 'ctxeval'; runpy.run_module('ctxeval.cli', run_name='__main__')"]


def _judge_args(tmp_path: Path, concurrency: int, limit: int) -> list[str]:
    return [*CLI_WITH_SIGINT, "judge", str(LEVAL / "claude-100k.pred.jsonl"), str(LEVAL / "turbo-16k-0613.pred.jsonl"),
            "--judge-model", "openai:judge", "--concurrency", str(concurrency), "--cache", "none", "--limit", str(limit), "--out", str(tmp_path / "run")]


def _interrupt_while_held(args: list[str], server: _HoldingServer, sent: int) -> tuple[str, float]:
    """Start the run, send `sent` once the server holds a request, and return its stderr and
    the seconds it took to exit after the signal."""
    proc = subprocess.Popen([*args, "--base-url", server.url], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert server.holding.wait(300), proc.communicate(timeout=60)
        signalled = time.monotonic()
        proc.send_signal(sent)
        _, stderr = proc.communicate(timeout=EXIT_WAIT_SECONDS)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr, stderr
    return stderr, time.monotonic() - signalled


@pytest.mark.skipif(not LEVAL.exists(), reason="shared L-Eval predictions not present")
@pytest.mark.parametrize("sent", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_an_interrupted_run_is_incomplete_and_resumes(sent, tmp_path):
    """A real CLI run (the judge over a local server) gets SIGINT or SIGTERM while it waits for its
    second request: it exits 130, its manifest says `incomplete`, keeps the first verdict and the
    time the session ran, and the same command again finishes the run, counting both sessions."""
    args = _judge_args(tmp_path, concurrency=1, limit=1)
    server = _HoldingServer()
    try:
        _interrupt_while_held(args, server, sent)
        manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
        assert manifest["status"] == "incomplete" and not manifest.get("failed_passes")
        first = manifest["timing"]
        assert first["seconds_this_session"] > 0 and first["seconds_all_sessions"] == first["seconds_this_session"] and not first["resumed"]
        server.release.set()
        resumed = subprocess.run([*args, "--base-url", server.url], capture_output=True, text=True, timeout=300)
        assert resumed.returncode == 0, resumed.stderr
        manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
        assert manifest["status"] == "complete"
        timing = manifest["timing"]
        assert timing["resumed"] and timing["seconds_all_sessions"] == pytest.approx(first["seconds_all_sessions"] + timing["seconds_this_session"], abs=0.011)
        assert server.requests == 3  # the held request is asked again, the first one not
    finally:
        server.close()


@pytest.mark.skipif(not LEVAL.exists(), reason="shared L-Eval predictions not present")
def test_an_interrupt_abandons_requests_in_flight_on_worker_threads(tmp_path):
    """With --concurrency 4 the requests run on worker threads; the server answers the first and
    holds the rest. Ctrl-C ends the run at once (the held requests are abandoned, not waited
    for: the server would hold them for HOLD_SECONDS), exit 130, the manifest `incomplete`; the
    same command finishes it, asking again only what the first session did not keep."""
    args = _judge_args(tmp_path, concurrency=4, limit=3)
    server = _HoldingServer(answer=1)
    try:
        _, seconds = _interrupt_while_held(args, server, signal.SIGINT)
        assert seconds < EXIT_WAIT_SECONDS
        manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
        assert manifest["status"] == "incomplete"
        asked_first = server.requests
        # never more than --concurrency in flight: the answered request's thread may ask a fifth
        # while the other three are held, so at most 4 held + 1 answered
        assert 2 <= asked_first <= 5
        server.release.set()
        resumed = subprocess.run([*args, "--base-url", server.url], capture_output=True, text=True, timeout=300)
        assert resumed.returncode == 0, resumed.stderr
        manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
        assert manifest["status"] == "complete"
        assert json.loads((tmp_path / "run" / "judge.json").read_text())["totals"]["verdicts"] == 6  # 3 questions x 2 orders
        # Results are kept in plan order: the answered request is kept when it was the first of the
        # plan, and only then is it not asked again; a held request is always asked again.
        assert 5 <= server.requests - asked_first <= 6
    finally:
        server.close()
