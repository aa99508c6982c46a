"""Start the server: in this process (`serve`) or as a child process on loopback (`spawn_server`)."""

from __future__ import annotations

import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

from ctxeval.backends.registry import ModelSpec
from ctxeval.config import DEFAULT_MODEL
from ctxeval.errors import UserError, install_hint
from ctxeval.server.settings import ServerSettings


def serve(settings: ServerSettings, spec: ModelSpec) -> None:
    """Load the model (`spec`: `settings.model` typed), then serve until interrupted."""
    settings.check()
    try:
        import uvicorn

        from ctxeval.server.app import create_app
    except ImportError:
        raise UserError(f"ctxeval serve needs FastAPI and uvicorn: {install_hint('server')}") from None
    from ctxeval.backends.registry import load_scorer
    from ctxeval.server.model import ServedModel

    if spec.backend.remote:
        raise UserError(f"ctxeval serve scores with a local model (a .gguf path, {DEFAULT_MODEL} or hf:...), not {settings.model}")
    scorer = load_scorer(spec, n_threads=settings.n_threads, device=settings.device, dtype=settings.dtype)
    model = ServedModel(scorer, settings)
    try:
        uvicorn.run(create_app(model), host=settings.host, port=settings.port, log_level="warning")
    finally:
        model.worker.stop()
        scorer.close()


@contextmanager
def serve_in_thread(settings: ServerSettings, scorer) -> Iterator[tuple[str, object]]:
    """Serve `scorer` from a thread of this process on a free loopback port (settings.port is
    ignored): yields (base URL, the ServedModel). For tests and benchmarks that also need the
    server's own objects; stops the server on exit."""
    import uvicorn

    from ctxeval.server.app import create_app
    from ctxeval.server.model import ServedModel

    settings.check()
    model = ServedModel(scorer, settings)
    server = uvicorn.Server(uvicorn.Config(create_app(model), host="127.0.0.1", port=free_port(), log_level="warning"))
    thread = threading.Thread(target=server.run, name="ctxeval-serve", daemon=True)
    thread.start()
    try:
        while not server.started:
            if not thread.is_alive():
                raise RuntimeError("ctxeval serve stopped while starting")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{server.config.port}", model
    finally:
        server.should_exit = True
        thread.join(timeout=60)
        model.worker.stop()


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spawn_server(n_ctx: int = ServerSettings.n_ctx, n_threads: int | None = None, model: str = DEFAULT_MODEL, wait_s: float = 180.0, args: tuple[str, ...] = ()) -> tuple[subprocess.Popen, str]:
    """Start `ctxeval serve` in a child process on a free loopback port and wait until it
    answers: (process, base URL). A one-machine fleet for tests, benchmarks and trials; the
    caller terminates the process. `args` are further `ctxeval serve` options."""
    port = free_port()
    cmd = [sys.executable, "-m", "ctxeval.cli", "serve", model, "--port", str(port), "--n-ctx", str(n_ctx), *args]
    if n_threads is not None:
        cmd += ["--threads", str(n_threads)]
    # stderr goes to an unlinked file, never to a pipe: nobody reads a pipe while the server
    # runs, and once its 64 KiB filled (warnings, llama.cpp's logs) the server would block
    # mid-request and its client wait for ever
    stderr = tempfile.TemporaryFile()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=stderr)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            stderr.seek(0)
            raise RuntimeError(f"ctxeval serve exited with code {proc.returncode}: {stderr.read().decode(errors='replace')[-2000:]}")
        try:
            with urllib.request.urlopen(url + "/health", timeout=1) as response:
                if response.status == 200:
                    return proc, url
        except OSError:  # refused or reset while the model loads
            time.sleep(0.3)
    proc.terminate()
    raise RuntimeError(f"ctxeval serve did not answer within {wait_s:.0f} s")
