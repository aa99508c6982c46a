"""The numeric path of a loaded model on this machine: what its `describe()` says (its backend's
`ModelInfo.details`) plus the machine this process runs on (backends/machine.py: CPU model and
flags, llama.cpp's system info, the CUDA device torch sees). An API model's path is the
server's, which ctxeval cannot see: it records what it knows (the server, the model asked for)
and no more.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from ctxeval.backends.machine import cpu, cuda_device, gguf_file_type, llama_device, llama_system_features
from ctxeval.backends.registry import backend_for
from ctxeval.results.numeric_path import NumericPath


def _served_model(name: str) -> str:
    """The server's name of an API model, from the scorer's name (its `--model` spec)."""
    return backend_for(name).target(name)


def numeric_path(description: dict[str, Any], executor: str = "local", threads_per_worker: int | None = None) -> NumericPath:
    """The numeric path of a model as its `describe()` gives it, run by `executor` here (local)
    or on Ray workers, whose machines this process does not see (their threads are
    `threads_per_worker`)."""
    backend = str(description.get("backend", ""))
    details = description.get("details") or {}
    if backend in ("openai", "openai-chat"):
        api = details.get("api") or {}
        return NumericPath(backend, device="remote", processor=api.get("base_url") or description.get("path") or None,
                           model=_served_model(str(description.get("name", ""))) or None)
    if backend == "llamacpp":
        features = llama_system_features()
        path = NumericPath(
            backend,
            libraries={"llama-cpp-python": str(details.get("llama_cpp_python"))},
            device=llama_device(features),
            kernel_features=features,
            dtype=gguf_file_type(details.get("file_type")),
            n_batch=details.get("n_batch"),
            flash_attention=details.get("flash_attention"),
            kv_cache_type=details.get("kv_cache_type"),
            threads=details.get("n_threads"),
            prefix_reuse=details.get("prefix_reuse"),
        )
    elif backend == "hf":
        device = str(details.get("device", "cpu"))
        gpu, cuda = cuda_device() if device == "cuda" else (None, None)
        rows = details.get("rows_per_block")
        path = NumericPath(
            backend,
            libraries={name: str(details[name]) for name in ("torch", "transformers") if name in details},
            device=device,
            processor=gpu,
            cuda=cuda,
            dtype=details.get("dtype"),
            n_batch=rows if isinstance(rows, int) else ("from free memory" if rows else None),
            flash_attention=details.get("attn_implementation"),
            threads=details.get("n_threads"),
            prefix_reuse=details.get("prefix_reuse"),
        )
    else:
        return NumericPath(backend or "unknown", device="unknown")
    if executor != "local":
        return NumericPath(**{**asdict(path), "device": f"{executor} workers", "processor": None, "cpu_flags": (), "kernel_features": (),
                              "threads": threads_per_worker})
    if path.device == "cpu":
        name, flags = cpu()
        return NumericPath(**{**asdict(path), "processor": name, "cpu_flags": flags})
    return path
