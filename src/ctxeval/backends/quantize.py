"""Requantize a GGUF file with llama.cpp's own quantizer (through llama-cpp-python), so a
quantized candidate for `ctxeval diff` needs no second download."""

from __future__ import annotations

import ctypes
import logging
from pathlib import Path

from ctxeval.backends.cores import usable_cores
from ctxeval.errors import UserError

# llama.cpp file types by their usual names (llama_ftype)
FILE_TYPES = {"q8_0": "LLAMA_FTYPE_MOSTLY_Q8_0", "q6_k": "LLAMA_FTYPE_MOSTLY_Q6_K", "q5_k_m": "LLAMA_FTYPE_MOSTLY_Q5_K_M",
              "q4_k_m": "LLAMA_FTYPE_MOSTLY_Q4_K_M", "q4_0": "LLAMA_FTYPE_MOSTLY_Q4_0", "q3_k_m": "LLAMA_FTYPE_MOSTLY_Q3_K_M",
              "q2_k": "LLAMA_FTYPE_MOSTLY_Q2_K"}


def requantize(source: Path, target: Path, file_type: str, n_threads: int | None = None) -> Path:
    """Write `source` quantized as `file_type` to `target`. Tensors already quantized are
    requantized from their dequantized values, so the result carries both roundings."""
    import llama_cpp

    logging.getLogger("llama-cpp-python").setLevel(logging.ERROR)  # a line per tensor otherwise
    if file_type not in FILE_TYPES:
        raise UserError(f"unknown file type {file_type!r}; choose one of {', '.join(FILE_TYPES)}")
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, FILE_TYPES[file_type])
    params.allow_requantize = True
    params.nthread = n_threads or usable_cores()
    target.parent.mkdir(parents=True, exist_ok=True)
    if llama_cpp.llama_model_quantize(str(source).encode(), str(target).encode(), ctypes.byref(params)) != 0:
        raise UserError(f"llama.cpp could not quantize {source} to {file_type}")
    return target
