"""Start the server: in this process (`serve`) or as a child process on loopback (`spawn_server`)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request

from ctxeval.config import DEFAULT_MODEL
from ctxeval.errors import UserError
from ctxeval.server.settings import ServerSettings


def serve(settings: ServerSettings) -> None:
    """Load the model, then serve until interrupted."""
    settings.check()
    try:
        import uvicorn

        from ctxeval.server.app import create_app
    except ImportError:
        raise UserError("ctxeval serve needs FastAPI and uvicorn: pip install 'ctxeval[server]'") from None
    from ctxeval.backends.registry import load_scorer
    from ctxeval.server.model import ServedModel

    if settings.model.startswith("openai:"):
        raise UserError(f"ctxeval serve scores with a local model (a .gguf path, {DEFAULT_MODEL} or hf:...), not {settings.model}")
    scorer = load_scorer(settings.model, n_threads=settings.n_threads, device=settings.device, dtype=settings.dtype)
    model = ServedModel(scorer, settings)
    try:
        uvicorn.run(create_app(model), host=settings.host, port=settings.port, log_level="warning")
    finally:
        model.worker.stop()
        scorer.close()


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spawn_server(n_ctx: int = 4096, n_threads: int | None = None, model: str = DEFAULT_MODEL, wait_s: float = 180.0, args: tuple[str, ...] = ()) -> tuple[subprocess.Popen, str]:
    """Start `ctxeval serve` in a child process on a free loopback port and wait until it
    answers: (process, base URL). A one-machine fleet for tests, benchmarks and trials; the
    caller terminates the process. `args` are further `ctxeval serve` options."""
    port = free_port()
    cmd = [sys.executable, "-m", "ctxeval.cli", "serve", model, "--port", str(port), "--n-ctx", str(n_ctx), *args]
    if n_threads is not None:
        cmd += ["--threads", str(n_threads)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"ctxeval serve exited with code {proc.returncode}: {proc.stderr.read().decode()[-2000:]}")
        try:
            with urllib.request.urlopen(url + "/health", timeout=1) as response:
                if response.status == 200:
                    return proc, url
        except OSError:  # refused or reset while the model loads
            time.sleep(0.3)
    proc.terminate()
    raise RuntimeError(f"ctxeval serve did not answer within {wait_s:.0f} s")
