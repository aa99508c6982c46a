"""Run llama-cpp-python's OpenAI-compatible server with ctxeval's llama.cpp settings.

`python -m tests.servers.llama_server --model M --port P ...` is `python -m llama_cpp.server`
with two changes: every request is evaluated from an empty KV cache (see
`_disable_prefix_reuse`), and on llama.cpp builds with Intel AMX kernels, extra buffer types are switched
off, exactly as ctxeval's llamacpp backend does (that build segfaults in the AMX matmul on
Gemma 3, and the server exposes no setting for it). Flash attention is off by the server's
own default (`--flash_attn false`), like the backend.
"""

from __future__ import annotations

import llama_cpp
import llama_cpp.llama_cpp as llama_lib  # the module llama_cpp.Llama calls into


def _patch_extra_buffer_types() -> None:
    if b"AMX_INT8 = 1" not in llama_cpp.llama_print_system_info():
        return
    default_params = llama_lib.llama_model_default_params

    def params_without_extra_bufts():
        params = default_params()
        params.use_extra_bufts = False
        return params

    llama_lib.llama_model_default_params = params_without_extra_bufts


def _disable_prefix_reuse() -> None:
    """Evaluate every request's prompt from scratch in one batch, as the backend does.

    The server otherwise keeps the previous request's KV cache and decodes only the new
    suffix, in a small batch of its own; with Gemma 3 on this build that moved
    log-probabilities of the same context by up to 0.15 nats, so results would depend on
    the order of requests.
    """
    original = llama_cpp.Llama.generate

    def generate(self, tokens, *args, **kwargs):
        self.reset()  # n_tokens = 0: no prefix match, eval() clears the cache from position 0
        return original(self, tokens, *args, **kwargs)

    llama_cpp.Llama.generate = generate


if __name__ == "__main__":
    _patch_extra_buffer_types()
    _disable_prefix_reuse()
    from llama_cpp.server.__main__ import main

    main()
