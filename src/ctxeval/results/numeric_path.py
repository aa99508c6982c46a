"""The numeric path of a model: what, besides the weights, decides its numbers' last bits.

The same model and configuration give bit-identical scores only on the same numeric path:
llama.cpp picks CPU kernels by instruction set (AVX2, AVX-512, AMX) and by batch shape, flash
attention and the KV cache type change the arithmetic, transformers runs another path per
device and dtype (docs/numerics.md). A run manifest records one `NumericPath` per model, so two
runs' numbers can be told apart by how they were computed, not only by their configuration.
`pipeline/machine_path.py` builds one for a loaded model on this machine.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from ctxeval.results.fingerprint import Fingerprint

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
    prefix_reuse: bool | None = None  # llama.cpp, hf: prompts start from the previous prompt's cache (generation and stepwise scoring)

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
        if self.prefix_reuse is False:
            parts.append("no prefix reuse")
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


def differences(a: NumericPath, b: NumericPath) -> list[str]:
    """Names of the fields in which two numeric paths differ (empty: the same path). Prefix reuse
    differs only where both arms could reuse (None: a cache that cannot be cut back, such as a
    press's, has no such choice)."""
    return [f.name for f in fields(NumericPath) if getattr(a, f.name) != getattr(b, f.name)
            and not (f.name == "prefix_reuse" and None in (a.prefix_reuse, b.prefix_reuse))]


def model_line(path: NumericPath | None, fingerprint: Fingerprint | None) -> str:
    """A model's numeric path and fingerprint in one line (a comparison's notes and every
    page print it), e.g. `llama.cpp 0.3.36 · AMD EPYC AVX-512 · Q4_K_M · f16 KV · n_batch 512 · flash attn off ·
    2 threads · fingerprint 3f9a0c1d2e4b5a69`."""
    parts = [path.compact() if path else "numeric path not recorded"]
    if fingerprint is not None:
        parts.append(f"fingerprint {fingerprint.short}")
    return " · ".join(parts)
