"""The numeric path of a loaded model: what, besides the weights, decides its numbers' last bits.

The same model and configuration give bit-identical scores only on the same numeric path:
llama.cpp picks CPU kernels by instruction set (AVX2, AVX-512, AMX) and by batch shape, flash
attention and the KV cache type change the arithmetic, transformers runs another path per
device and dtype (docs/numerics.md). A run manifest records one `NumericPath` per model, so two
runs' numbers can be told apart by how they were computed, not only by their configuration.

Built from what a model's `describe()` says (its backend's `ModelInfo.details`) plus the machine
this process runs on (CPU model and flags from /proc/cpuinfo, llama.cpp's
`llama_print_system_info()`, the CUDA device torch sees). An API model's path is the server's,
which ctxeval cannot see: it records what it knows (the server, the model asked for) and no more.
"""

from __future__ import annotations

import platform
from dataclasses import asdict, dataclass, field, fields
from functools import lru_cache
from pathlib import Path
from typing import Any

from ctxeval.backends.registry import backend_for

# CPU flags (as /proc/cpuinfo spells them) that pick kernels in llama.cpp and PyTorch
KERNEL_FLAGS = ("avx2", "fma", "f16c", "avx512f", "avx512_vnni", "avx512_bf16", "avx512vbmi", "amx_tile", "amx_int8", "amx_bf16")


@dataclass(frozen=True)
class NumericPath:
    """How one model's numbers were computed. None: does not apply to the backend, or unknown."""

    backend: str  # llamacpp, hf, openai
    libraries: dict[str, str] = field(default_factory=dict)  # package -> version, those computing the numbers
    device: str = "cpu"  # cpu, cuda, mps, remote (an API), or "ray workers" (machines not inspected)
    processor: str | None = None  # CPU model name, GPU name, or an API's server URL
    cpu_flags: tuple[str, ...] = ()  # the KERNEL_FLAGS the CPU has
    kernel_features: tuple[str, ...] = ()  # llama.cpp: the features its build uses (llama_print_system_info)
    cuda: str | None = None  # CUDA version of torch on a cuda device
    dtype: str | None = None  # hf: the body's dtype; llama.cpp: the GGUF file type
    n_batch: int | str | None = None  # rows per decode (llama.cpp n_batch; hf rows per block)
    flash_attention: bool | str | None = None  # llama.cpp on/off; hf the attention implementation
    kv_cache_type: str | None = None  # llama.cpp KV cache type(s)
    threads: int | None = None
    model: str | None = None  # an API's model as asked for

    def to_json(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(self).items()}

    @staticmethod
    def from_json(data: dict[str, Any]) -> NumericPath:
        known = {f.name for f in fields(NumericPath)}
        values = {k: (tuple(v) if isinstance(v, list) else v) for k, v in data.items() if k in known}
        return NumericPath(**values)

    def compact(self) -> str:
        """One line for reports, e.g. `llama.cpp 0.3.36 · AMD EPYC AVX-512 · f16 KV · n_batch 512 ·
        flash attn off · 2 threads`."""
        parts = [" ".join(p for p in (_LIBRARY_LABEL.get(self.backend, self.backend), self.libraries.get(_MAIN_LIBRARY.get(self.backend, ""))) if p)]
        if self.device == "remote":
            parts.append(f"remote {self.processor}" if self.processor else "remote")
            parts.extend([f"model {self.model}"] if self.model else [])
            return " · ".join(parts)
        where = self.processor if self.device == "cpu" else " ".join(p for p in (self.device, self.processor) if p)
        parts.append(" ".join(p for p in (where, instruction_set(self)) if p) or self.device)
        if self.cuda:
            parts.append(f"CUDA {self.cuda}")
        if self.dtype:
            parts.append(self.dtype)
        if self.kv_cache_type:
            parts.append(f"{self.kv_cache_type} KV")
        if self.n_batch is not None:
            parts.append(f"n_batch {self.n_batch}")
        if isinstance(self.flash_attention, bool):
            parts.append(f"flash attn {'on' if self.flash_attention else 'off'}")
        elif self.flash_attention:
            parts.append(f"attention {self.flash_attention}")
        if self.threads is not None:
            parts.append(f"{self.threads} thread{'s' if self.threads != 1 else ''}")
        return " · ".join(parts)


_LIBRARY_LABEL = {"llamacpp": "llama.cpp", "hf": "transformers", "openai": "openai API", "openai-chat": "openai chat API"}
_MAIN_LIBRARY = {"llamacpp": "llama-cpp-python", "hf": "transformers"}


def instruction_set(path: NumericPath) -> str | None:
    """The widest kernel family the path can use: AMX, AVX-512 or AVX2 (llama.cpp's own report
    where there is one, else the CPU's flags)."""
    features = {f.upper() for f in path.kernel_features} or {f.upper() for f in path.cpu_flags}
    for label, names in (("AMX", ("AMX_INT8", "AMX_TILE", "AMX_BF16")), ("AVX-512", ("AVX512", "AVX512F")), ("AVX2", ("AVX2",))):
        if features & set(names):
            return label
    return None


def _served_model(name: str) -> str:
    """The server's name of an API model, from the scorer's name (its `--model` spec)."""
    return backend_for(name).target(name)


def differences(a: NumericPath, b: NumericPath) -> list[str]:
    """Names of the fields in which two numeric paths differ (empty: the same path)."""
    return [f.name for f in fields(NumericPath) if getattr(a, f.name) != getattr(b, f.name)]


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
            device=_llama_device(features),
            kernel_features=features,
            dtype=gguf_file_type(details.get("file_type")),
            n_batch=details.get("n_batch"),
            flash_attention=details.get("flash_attention"),
            kv_cache_type=details.get("kv_cache_type"),
            threads=details.get("n_threads"),
        )
    elif backend == "hf":
        device = str(details.get("device", "cpu"))
        gpu, cuda = _cuda_device() if device == "cuda" else (None, None)
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


@lru_cache(maxsize=1)
def cpu() -> tuple[str | None, tuple[str, ...]]:
    """This machine's CPU model name and which KERNEL_FLAGS it has (from /proc/cpuinfo; on a
    system without it, the platform's processor name and no flags)."""
    info = Path("/proc/cpuinfo")
    if not info.is_file():
        return platform.processor() or None, ()
    name, flags = None, set()
    for line in info.read_text(errors="replace").splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and name is None:
            name = value.strip()
        elif key == "flags" and not flags:
            flags = set(value.split())
    return name, tuple(f for f in KERNEL_FLAGS if f in flags)


@lru_cache(maxsize=1)
def llama_system_features() -> tuple[str, ...]:
    """What `llama_print_system_info()` reports, e.g. ("AVX2", "AVX512", ..., "REPACK"): the
    features set to 1; a backend other than the CPU's adds its name ("CUDA")."""
    import llama_cpp

    report = llama_cpp.llama_print_system_info().decode(errors="replace")
    out: list[str] = []
    for section in report.split("|"):
        section = section.strip()
        backend, colon, rest = section.partition(" : ")
        if colon:
            if backend != "CPU":
                out.append(backend)
            section = rest
        name, _, value = section.partition(" = ")
        if name and value.strip() == "1":
            out.append(name.strip())
    return tuple(out)


def _llama_device(features: tuple[str, ...]) -> str:
    """"cpu", or "<gpu backends> build" for a llama.cpp built with GPU backends (which layers it
    offloads is llama.cpp's default, not inspected here)."""
    gpus = [f for f in features if f in ("CUDA", "Metal", "Vulkan", "ROCm", "HIP", "SYCL")]
    return f"{'+'.join(gpus)} build" if gpus else "cpu"


def gguf_file_type(file_type: Any) -> str | None:
    """llama.cpp's name of a GGUF `general.file_type`, e.g. 15 -> "Q4_K_M"."""
    if file_type is None:
        return None
    import llama_cpp

    names = {getattr(llama_cpp, n): n.removeprefix("LLAMA_FTYPE_").removeprefix("MOSTLY_") for n in dir(llama_cpp) if n.startswith("LLAMA_FTYPE_")}
    return names.get(int(file_type), f"file type {file_type}")


def _cuda_device() -> tuple[str | None, str | None]:
    """The CUDA GPU torch uses here and torch's CUDA version."""
    import torch

    return torch.cuda.get_device_name(), torch.version.cuda
