"""`ctxeval serve`: a GGUF behind an OpenAI-compatible server with ctxeval's llama.cpp settings.

It is llama-cpp-python's server with two changes, so that every node of a fleet serves the
numbers the local llamacpp backend computes: every request is evaluated from an empty KV cache
(a stock server reuses the previous request's prefix and decodes only the suffix in a batch of
its own, which moved Gemma 3's log-probabilities of the same context by up to 0.15 nats here,
so results would depend on the order of requests), and on llama.cpp builds with Intel AMX
kernels extra buffer types are off, as in the backend (that build segfaults in the AMX matmul
on Gemma 3). Flash attention is off and batches are 512 tokens, as in the backend.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from ctxeval.backends.llamacpp import DEFAULT_N_BATCH, load_llama_without_amx_buffers
from ctxeval.config import DEFAULT_MODEL
from ctxeval.errors import UserError


def serve(model: str = DEFAULT_MODEL, host: str = "127.0.0.1", port: int = 8000, n_ctx: int = 4096, n_threads: int | None = None) -> None:
    """Serve `model` (the embedded default or a .gguf path) until interrupted."""
    try:
        import uvicorn
        from llama_cpp.server.app import create_app
        from llama_cpp.server.settings import ModelSettings, ServerSettings
    except ImportError:
        raise UserError("ctxeval serve needs llama-cpp-python's server: pip install 'ctxeval[server]'") from None
    if not 1 <= port <= 65535:
        raise UserError(f"--port must be between 1 and 65535, got {port}")
    if n_ctx < 1:
        raise UserError(f"--n-ctx must be a positive integer, got {n_ctx}")
    path = model_path(model)
    patch_llama_cpp()
    settings = {"model": str(path), "model_alias": model, "n_ctx": n_ctx, "n_batch": DEFAULT_N_BATCH, "flash_attn": False, "verbose": False}
    if n_threads is not None:
        settings |= {"n_threads": n_threads, "n_threads_batch": n_threads}
    app = create_app(server_settings=ServerSettings(host=host, port=port), model_settings=[ModelSettings(**settings)])
    uvicorn.run(app, host=host, port=port, log_level="warning")


def model_path(model: str) -> Path:
    """The GGUF file a `--model` value names (only llama.cpp models can be served)."""
    if model == DEFAULT_MODEL:
        from ctxeval.backends.model_files import embedded_model_path

        return embedded_model_path()
    path = Path(model)
    if path.suffix.lower() != ".gguf":
        raise UserError(f"ctxeval serve runs GGUF models only: {DEFAULT_MODEL} or a .gguf path, not {model!r}")
    if not path.is_file():
        raise UserError(f"model file not found: {model}")
    return path


def patch_llama_cpp() -> None:
    """Make llama-cpp-python's server compute as the llamacpp backend does (module docstring)."""
    import llama_cpp

    load_llama_without_amx_buffers(llama_cpp)

    original = llama_cpp.Llama.generate

    def generate(self, tokens, *args, **kwargs):
        self.reset()  # n_tokens = 0: no prefix match, eval() clears the cache from position 0
        return original(self, tokens, *args, **kwargs)

    llama_cpp.Llama.generate = generate


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spawn_server(n_ctx: int = 4096, n_threads: int | None = None, model: str = DEFAULT_MODEL, wait_s: float = 180.0) -> tuple[subprocess.Popen, str]:
    """Start `ctxeval serve` in a child process on a free loopback port and wait until it
    answers: (process, base URL). A one-machine fleet for tests, benchmarks and trials; the
    caller terminates the process."""
    port = free_port()
    cmd = [sys.executable, "-m", "ctxeval.cli", "serve", model, "--port", str(port), "--n-ctx", str(n_ctx)]
    if n_threads is not None:
        cmd += ["--threads", str(n_threads)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"ctxeval serve exited with code {proc.returncode}: {proc.stderr.read().decode()[-2000:]}")
        try:
            with urllib.request.urlopen(url + "/v1/models", timeout=1) as response:
                if response.status == 200:
                    return proc, url
        except OSError:  # refused or reset while the model loads
            time.sleep(0.3)
    proc.terminate()
    raise RuntimeError(f"ctxeval serve did not answer within {wait_s:.0f} s")
