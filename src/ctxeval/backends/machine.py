"""What this machine offers a model's arithmetic: the CPU's model name and kernel flags, what
llama.cpp's build uses, the CUDA device torch sees, llama.cpp's names of GGUF file types."""

from __future__ import annotations

import platform
from functools import lru_cache
from pathlib import Path
from typing import Any

# CPU flags (as /proc/cpuinfo spells them) that pick kernels in llama.cpp and PyTorch
KERNEL_FLAGS = ("avx2", "fma", "f16c", "avx512f", "avx512_vnni", "avx512_bf16", "avx512vbmi", "amx_tile", "amx_int8", "amx_bf16")


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


def llama_device(features: tuple[str, ...]) -> str:
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


def cuda_device() -> tuple[str | None, str | None]:
    """The CUDA GPU torch uses here and torch's CUDA version."""
    import torch

    return torch.cuda.get_device_name(), torch.version.cuda
