"""Options written after a model spec, `MODEL?key=value&key=value`, so an edited model needs no
second file: `gemma-3-270m?type_k=q8_0&type_v=q8_0&flash_attn=1` is the embedded model with a
quantized KV cache, `hf:gemma-3-270m?dtype=bfloat16` its transformers copy in bf16.

llama.cpp models (the embedded one, .gguf paths): `type_k`, `type_v` (KV-cache types),
`flash_attn` (0/1; a quantized V cache needs it), `rope_freq_scale`, `rope_freq_base`, the
decode's shape: `n_batch` (tokens per decode) and `threads` (a second numeric path for
`--noise-floor`), and `prefix_reuse` (0/1, default 1: a prompt that begins as the previous one
did starts from its cache; backends/llamacpp_prefix.py).
hf: models: `dtype`, `device` (as --dtype / --device, for one model of a pair), `prefix_reuse`
(0/1, as for llama.cpp; on caches whose every layer keeps every position), and a KV-cache
press: `press=NAME` (a kvpress press) with `compression_ratio=R` or `budget=B` and the press's own
arguments (`hf:smollm2-135m?press=StreamingLLMPress&budget=128&n_sink=4`; backends/kv_press.py).
Every local model: `max_context=N`, a truncation control: the model sees only the last N
tokens before each target (the token-scoring commands plan it: `windows.cap_context`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ctxeval.backends.kv_press import PRESS_KEYS, PressOptions, parse_press
from ctxeval.errors import UserError

KV_TYPES = ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl")
_UNQUANTIZED = ("f32", "f16", "bf16")
LLAMACPP_KEYS = ("type_k", "type_v", "flash_attn", "rope_freq_scale", "rope_freq_base", "n_batch", "threads", "prefix_reuse")
HF_KEYS = ("dtype", "device", "prefix_reuse")


@dataclass(frozen=True)
class ModelOption:
    """One model option as `ctxeval models` lists it: its keys, the models that take it, one
    example, what it does, and the extras it needs (none: nothing beyond the default install)."""

    keys: str
    takes: str  # which models take it
    example: str
    what: str
    extra: tuple[str, ...] = ()


# the commands whose planners honour a truncation control `?max_context=N`
TRUNCATING = "sweep, score, context-gain, effective-length and ruler"
MODEL_OPTIONS = (
    ModelOption("max_context=N", "every local model", "gemma-3-270m?max_context=256",
                f"a truncation control: the model sees only the last N tokens before each target ({TRUNCATING})"),
    ModelOption("press=NAME&budget=B", "hf: models", "hf:smollm2-135m?press=StreamingLLMPress&budget=128",
                "a kvpress KV-cache press keeping B tokens of every context (SnapKVPress, KnormPress, ...: an unknown NAME lists them)", ("hf", "kvpress")),
    ModelOption("press=NAME&compression_ratio=R", "hf: models", "hf:smollm2-135m?press=SnapKVPress&compression_ratio=0.5",
                "the press dropping the share R in [0, 1) of every context instead; the press's own arguments follow (&n_sink=4, &window_size=16)", ("hf", "kvpress")),
    ModelOption("type_k=T&type_v=T", "llama.cpp (embedded names, .gguf paths)", "gemma-3-270m?type_k=q8_0&type_v=q8_0&flash_attn=1",
                f"KV-cache types ({', '.join(KV_TYPES)}; default f16); a quantized V cache needs flash_attn=1"),
    ModelOption("flash_attn=1", "llama.cpp", "gemma-3-270m?flash_attn=1", "flash attention (0/1), a numeric path of its own"),
    ModelOption("n_batch=N", "llama.cpp", "gemma-3-270m?n_batch=64", "tokens per decode: another numeric path (diff's --noise-floor)"),
    ModelOption("threads=N", "llama.cpp", "gemma-3-270m?threads=1", "CPU threads of this model alone: another numeric path"),
    ModelOption("rope_freq_scale=S&rope_freq_base=B", "llama.cpp", "gemma-3-270m?rope_freq_scale=0.5", "RoPE frequency scale and base"),
    ModelOption("prefix_reuse=0", "llama.cpp, hf: models", "gemma-3-270m?prefix_reuse=0",
                "prefill every prompt from zero instead of from the previous prompt's cache (default 1; llama.cpp's records are bit-identical "
                "either way, hf's equal within 2e-6 nats as measured, on full-attention caches without a press; docs/long_context.md)"),
    ModelOption("dtype=D&device=X", "hf: models", "hf:smollm2-135m?dtype=bfloat16", "--dtype and --device for this model alone (one model of a pair)", ("hf",)),
)


def split_spec(spec: str) -> tuple[str, dict[str, str]]:
    """The model spec without its options, and the options in the order given."""
    base, sep, query = spec.partition("?")
    if not sep:
        return spec, {}
    options: dict[str, str] = {}
    for pair in query.split("&"):
        key, eq, value = pair.partition("=")
        if not eq or not key or not value:
            raise UserError(f"model option {pair!r} of {spec!r} is not key=value")
        if key in options:
            raise UserError(f"model option {key!r} is given twice in {spec!r}")
        options[key] = value
    return base, options


def with_options(spec: str, added: str) -> str | None:
    """The model string `spec` with the options `added` (`?key=value&...`) merged in, later
    ones winning; None when they change none of its options."""
    base, options = split_spec(spec)
    _, extra = split_spec(f"x{added}")
    merged = {**options, **extra}
    return None if merged == options else base + "?" + "&".join(f"{k}={v}" for k, v in merged.items())


MAX_CONTEXT = "max_context"


def pop_max_context(spec: str) -> tuple[str, int | None]:
    """`spec` without its `max_context=N` option, and N (None when not given). The option is no
    backend's: a planner honours it by scoring each target with at most N tokens before it."""
    base, options = split_spec(spec)
    if MAX_CONTEXT not in options:
        return spec, None
    value = options.pop(MAX_CONTEXT)
    if not value.isdigit() or int(value) < 1:
        raise UserError(f"model option max_context of {spec!r} must be a positive integer, got {value!r}")
    rest = "&".join(f"{k}={v}" for k, v in options.items())
    return base + (f"?{rest}" if rest else ""), int(value)


def _switch(options: dict[str, str], key: str, spec: str, default: bool) -> bool:
    """A 0/1 model option, `default` when not given."""
    value = options.get(key, "1" if default else "0")
    if value not in ("0", "1"):
        raise UserError(f"model option {key} of {spec!r} must be 0 or 1, got {value}")
    return value == "1"


def _unknown(options: dict[str, str], known: tuple[str, ...], spec: str, backend: str) -> None:
    for key in options:
        if key in PRESS_KEYS:
            raise UserError(f"model option {key} of {spec!r}: KV-cache presses run on hf: models only (kvpress compresses a transformers cache); "
                            "use the same weights as hf:DIR, or hf:gemma-3-270m / hf:smollm2-135m")
        if key not in known:
            raise UserError(f"unknown model option {key!r} in {spec!r}; {backend} models take {', '.join(known)}")


@dataclass(frozen=True)
class LlamaCppOptions:
    """Inference-context settings of a llama.cpp model (the defaults are ctxeval's reference path)."""

    type_k: str = "f16"
    type_v: str = "f16"
    flash_attn: bool = False
    rope_freq_scale: float | None = None
    rope_freq_base: float | None = None
    n_batch: int | None = None  # tokens per decode (None: the scorer's default)
    threads: int | None = None  # None: the --threads of the command
    prefix_reuse: bool = True  # prompts start from the previous prompt's cache where they share a prefix

    @staticmethod
    def parse(options: dict[str, str], spec: str) -> LlamaCppOptions:
        _unknown(options, LLAMACPP_KEYS, spec, "llama.cpp")
        for key in ("type_k", "type_v"):
            if key in options and options[key] not in KV_TYPES:
                raise UserError(f"model option {key}={options[key]} of {spec!r}: choose one of {', '.join(KV_TYPES)}")
        flash_attn, prefix_reuse = _switch(options, "flash_attn", spec, False), _switch(options, "prefix_reuse", spec, True)
        floats: dict[str, float] = {}
        for key in ("rope_freq_scale", "rope_freq_base"):
            if key in options:
                try:
                    floats[key] = float(options[key])
                except ValueError:
                    raise UserError(f"model option {key} of {spec!r} expects a number, got {options[key]!r}") from None
                if not floats[key] > 0:
                    raise UserError(f"model option {key} of {spec!r} must be positive, got {options[key]}")
        ints: dict[str, int] = {}
        for key in ("n_batch", "threads"):
            if key in options:
                if not options[key].isdigit() or int(options[key]) < 1:
                    raise UserError(f"model option {key} of {spec!r} must be a positive integer, got {options[key]!r}")
                ints[key] = int(options[key])
        parsed = LlamaCppOptions(options.get("type_k", "f16"), options.get("type_v", "f16"), flash_attn, **floats, **ints, prefix_reuse=prefix_reuse)
        if parsed.type_v not in _UNQUANTIZED and not parsed.flash_attn:
            raise UserError(f"{spec!r}: llama.cpp needs flash attention for a quantized V cache; add flash_attn=1")
        return parsed


@dataclass(frozen=True)
class HfOptions:
    """Options of an hf: spec: dtype and device for this model alone, and a KV-cache press."""

    dtype: str | None = None
    device: str | None = None
    press: PressOptions | None = None
    prefix_reuse: bool = True  # a prompt starts from the previous one's cache where they share a prefix (full-attention caches)

    @property
    def given(self) -> bool:
        return self != HfOptions()


def hf_options(options: dict[str, str], spec: str) -> HfOptions:
    """The options of an hf: spec, checked (a press against kvpress's presses) before any model loads."""
    press = parse_press(options, spec)
    _unknown({k: v for k, v in options.items() if press is None or k in HF_KEYS}, HF_KEYS, spec, "hf:")
    return HfOptions(options.get("dtype"), options.get("device"), press, _switch(options, "prefix_reuse", spec, True))
