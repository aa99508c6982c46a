"""KV-cache compression (NVIDIA's kvpress presses) for the hf backend: `hf:M?press=NAME&...`.

Semantics, one pass at a time: the tokens before the pass's first scored position are its
context. They are prefilled once inside the press (kvpress compresses each layer's cache in a
forward hook, after that layer's attention has run), and the rest of the pass, from the token
whose output predicts the first target on, then runs against the compressed cache, so every
target is scored against it (kvpress's own context / question split). The rest keeps the
positions it holds in the full sequence; each attention layer gets a mask built from its own
cache length, because presses leave layers of different lengths (PyramidKV per layer,
Gemma 3's uncompressed sliding-window layers) and one mask for all of them lets targets see
later targets. Head-wise presses (AdaKV) mask keys instead of dropping them; their masks are
folded in the same way. Generation splits as kvpress's own pipeline does: the first
`context_end` ids are prefilled and compressed (`prefill`), and the rest of the prompt and every
generated token then run against the cache at their true positions (`run_against`), with the
same masks.

`budget=B` keeps B tokens of every context whatever its length: the press's ratio is set per
pass to the ratio whose rounding (`int(c·(1−r))`, kvpress's own) keeps exactly B.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import math
from dataclasses import dataclass, field

from ctxeval.errors import UserError, install_hint

INSTALL_HINT = f"model option press needs kvpress: {install_hint('kvpress')}"
# presses whose own __call__ runs extra passes or decodes (not a prefill hook), or that fetch
# weights from a model hub: the prefill-then-score recipe does not apply to them
_NOT_PREFILL_HOOKS = ("KVzipPress", "RestoreKVPress", "KVgradPress", "FastKVzipPress", "FinchPress", "KVComposePress", "DecodingPress", "CAMPress",
                      "CompressionRatioDecodingPress", "PrefillDecodingPress", "DMSPress", "DuoAttentionPress", "QFilterPress", "KVzapPress",
                      "ExpectedAttentionStatsPress", "LUKVPress")
_WRAPPER_FIELDS = ("press", "base_press", "presses", "prefilling_press", "decoding_press")
# the model options a press takes itself, read by `parse_press` (the press's own constructor
# arguments pass through); other backends refuse them as press options (model_options.py)
PRESS_KEYS = ("press", "compression_ratio", "budget")


@dataclass(frozen=True)
class PressOptions:
    """A press as a model option: its kvpress class name, a fixed ratio or a fixed budget, and
    its other constructor arguments (numbers, booleans or strings as typed)."""

    name: str
    compression_ratio: float | None = None
    budget: int | None = None
    arguments: dict = field(default_factory=dict)

    def acts_on(self, context: int) -> bool:
        """Whether the press drops any token of a `context`-token context: a budget keeps
        min(B, c), a ratio kvpress's max(1, int(c·(1−r))) (docs/kv_compression.md)."""
        if self.budget is not None:
            return context > self.budget
        return max(1, int(context * (1 - (self.compression_ratio or 0.0)))) < context

    def describe(self) -> dict:
        """What the manifest records (and the fingerprint's model name carries)."""
        return {"press": self.name, "compression_ratio": self.compression_ratio, "budget": self.budget, "arguments": dict(self.arguments),
                "context": "every token before a pass's first scored position, prefilled once and compressed; the rest of the pass runs against the compressed cache",
                "kept_rule": "kvpress's n_kept = max(1, int(c * (1 - ratio))) per compressed layer; budget B sets the ratio per pass so n_kept = B (min(B, c))"}


def press_classes() -> dict[str, type]:
    """The kvpress presses usable here, by class name (importing kvpress): prefill hooks with a
    compression_ratio of their own. Wrappers of another press (AdaKV, Chunk, ...) and presses
    set by another knob (ThinK's channel ratio) cannot be written as one model option."""
    try:
        import kvpress
    except ImportError:
        raise UserError(INSTALL_HINT) from None
    found = {}
    for name in kvpress.__all__:
        cls = getattr(kvpress, name)
        if not (isinstance(cls, type) and issubclass(cls, kvpress.BasePress)) or cls in (kvpress.BasePress, kvpress.ScorerPress) or name in _NOT_PREFILL_HOOKS:
            continue
        fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
        wraps = any(w in fields and fields[w].default is dataclasses.MISSING and fields[w].default_factory is dataclasses.MISSING for w in _WRAPPER_FIELDS)
        if "compression_ratio" in fields and not wraps:
            found[name] = cls
    return found


def parse_press(options: dict[str, str], spec: str) -> PressOptions | None:
    """The press options of an hf: spec (None without `press=`), checked before any model loads:
    a known press, a ratio in [0, 1) or a positive budget (one of them), constructor arguments
    the press takes."""
    if "press" not in options:
        stray = [k for k in ("compression_ratio", "budget") if k in options]
        if stray:
            raise UserError(f"model option {stray[0]} of {spec!r} needs press=NAME (a kvpress press, e.g. press=StreamingLLMPress)")
        return None
    name = options["press"]
    classes = press_classes()
    if name not in classes:
        raise UserError(f"unknown press {name!r} in {spec!r}; kvpress presses usable here: {', '.join(sorted(classes))}")
    ratio = budget = None
    if "compression_ratio" in options and "budget" in options:
        raise UserError(f"{spec!r}: give compression_ratio or budget, not both")
    if "compression_ratio" in options:
        ratio = _number(options["compression_ratio"], "compression_ratio", spec)
        if not 0 <= ratio < 1:
            raise UserError(f"model option compression_ratio of {spec!r} must be in [0, 1), got {options['compression_ratio']}")
    elif "budget" in options:
        value = options["budget"]
        if not value.lstrip("-").isdigit() or int(value) <= 0:
            raise UserError(f"model option budget of {spec!r} must be a positive integer (tokens kept of each context), got {value!r}")
        budget = int(value)
    else:
        raise UserError(f"{spec!r}: press={name} needs compression_ratio=R (in [0, 1)) or budget=B (tokens kept)")
    takes = [f.name for f in dataclasses.fields(classes[name]) if f.init]
    arguments = {}
    for key, value in options.items():
        if key in (*PRESS_KEYS, "dtype", "device"):
            continue
        if key not in takes:
            raise UserError(f"unknown model option {key!r} in {spec!r}; {name} takes {', '.join(k for k in takes if k != 'compression_ratio') or 'no other arguments'}")
        arguments[key] = _typed(value)
    return PressOptions(name, ratio, budget, arguments)


def _number(value: str, key: str, spec: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise UserError(f"model option {key} of {spec!r} expects a number, got {value!r}") from None


def _typed(value: str) -> int | float | bool | str:
    """A constructor argument as typed in the spec: integer, number, true/false, else text."""
    if value.lower() in ("true", "false"):
        return value.lower() == "true"
    for kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            pass
    return value


def ratio_for_budget(budget: int, context: int) -> float:
    """The ratio whose kvpress rounding, int(c·(1−r)), keeps exactly `budget` of `context`
    tokens (1 − B/c alone loses a token to float rounding, e.g. c=80, B=16 keeps 15)."""
    if budget >= context:
        return 0.0
    ratio = (context - budget) / context
    while int(context * (1 - ratio)) < budget:
        ratio = math.nextafter(ratio, 0.0)
    while int(context * (1 - ratio)) > budget:
        ratio = math.nextafter(ratio, 1.0)
    return ratio


def sliding_layers(config) -> list[int]:
    """Indices of the model's sliding-window attention layers (Gemma 2/3 interleave them)."""
    return [i for i, kind in enumerate(getattr(config, "layer_types", None) or []) if kind != "full_attention"]


class PressedModel:
    """A transformers model with a press: builds the press once, sets its ratio per pass, and
    runs the prefill / rest split with per-layer masks."""

    def __init__(self, model, options: PressOptions) -> None:
        _check_architecture(model, options.name)
        inner = press_classes()[options.name](**({"compression_ratio": options.compression_ratio or 0.0} | options.arguments))
        self._model = model
        self._sliding = set(sliding_layers(model.config))
        self._press = _full_attention_only(inner) if self._sliding else inner
        self.options = options
        layers = range(model.config.num_hidden_layers)
        self.details = options.describe() | {
            "compressed_layers": [i for i in layers if i not in self._sliding],
            "uncompressed_sliding_layers": sorted(self._sliding),
        }

    def hidden_states(self, body, ids, context: int):
        """The last hidden states of positions `context`… of `ids` [B, L] with ids[:, :context]
        compressed (nothing to compress when `context` is 0), and each layer's kept cache length."""
        if context == 0:
            return body(input_ids=ids, use_cache=False).last_hidden_state, []
        cache = self.prefill(body, ids[:, :context])
        kept = [layer.keys.shape[-2] for layer in cache.layers]
        return self.run_against(body, cache, ids[:, context:], context), kept

    def prefill(self, body, context_ids):
        """A fresh cache holding `context_ids` [B, c] prefilled inside the press, compressed
        (the ratio set for c tokens when the press has a budget)."""
        from transformers import DynamicCache

        context = context_ids.shape[1]
        ratio = ratio_for_budget(self.options.budget, context) if self.options.budget is not None else self.options.compression_ratio
        self._press.compression_ratio = ratio
        cache = DynamicCache(config=self._model.config)
        with self._press(self._model):
            try:
                body(input_ids=context_ids, past_key_values=cache, use_cache=True)
            except AssertionError as exc:  # kvpress states its presses' limits as assertions (SnapKV: context > window_size)
                raise UserError(f"press {self.options.name} cannot compress a context of {context} tokens: {exc}") from None
        return cache

    def run_against(self, body, cache, ids, start: int):
        """The last hidden states of `ids` [B, n], the tokens at true positions `start`…, run
        against `cache` (a compressed context and whatever ran after it), which they extend."""
        import torch

        n = ids.shape[1]
        positions = torch.arange(start, start + n, device=ids.device)[None].expand(ids.shape[0], -1)
        with _per_layer_masks(self._model, cache, start, n, self._sliding):
            return body(input_ids=ids, past_key_values=cache, position_ids=positions, use_cache=True).last_hidden_state

    def check_generation_context(self, context: int, n_input: int) -> None:
        """Refuse a generation whose split leaves nothing to measure: no token after the context
        to run against the compressed cache, or a budget that keeps every context token."""
        if not 0 < context < n_input:
            raise UserError(f"context_end must lie between 1 and {n_input - 1} (the prompt's last token runs against the compressed cache), got {context}")
        if self.options.budget is not None and context <= self.options.budget:
            raise UserError(f"press {self.options.name} with budget={self.options.budget} keeps all {context} tokens of the context: nothing is "
                            "compressed; give a budget below the context's length or a longer context")


def _check_architecture(model, press: str) -> None:
    """Refuse a model kvpress does not compress: its own supported classes (other layouts fail
    inside its hooks: GPT-2's and OPT's layers are not where it looks, Phi's partial rotary
    embedding breaks SnapKV's and ExpectedAttention's queries), and Gemma3ForCausalLM, whose
    sliding-window layers ctxeval leaves whole."""
    from kvpress.presses.base_press import SUPPORTED_MODELS
    from transformers import Gemma3ForCausalLM

    supported = (*SUPPORTED_MODELS, Gemma3ForCausalLM)
    if not isinstance(model, supported):
        names = ", ".join(sorted(cls.__name__ for cls in supported))
        raise UserError(f"press {press} cannot compress a {type(model).__name__}: kvpress compresses {names}")


def _full_attention_only(inner):
    """`inner` applied to full-attention layers only: a sliding-window layer keeps its last W−1
    tokens in a cache of its own, which kvpress would compress to a length no mask matches (as it
    skips such layers only for Gemma3ForConditionalGeneration)."""
    from kvpress import BasePress

    @dataclass
    class FullAttentionOnlyPress(BasePress):
        press: BasePress = None

        def post_init_from_model(self, model):
            self.press.post_init_from_model(model)

        @property
        def compression_ratio(self):
            return self.press.compression_ratio

        @compression_ratio.setter
        def compression_ratio(self, value):
            self.press.compression_ratio = value

        def forward_hook(self, module, input, kwargs, output):
            if _is_sliding(module):
                return output
            rope = getattr(module, "rotary_emb", None)
            bind = rope is not None and "layer_type" in inspect.signature(rope.forward).parameters
            if bind:  # Gemma 3's rotary embedding needs the layer type kvpress does not pass
                module.rotary_emb = _rope_module()(rope, getattr(module, "layer_type", "full_attention"))
            try:
                return self.press.forward_hook(module, input, kwargs, output)
            finally:
                if bind:
                    module.rotary_emb = rope

    return FullAttentionOnlyPress(press=inner)


def _is_sliding(module) -> bool:
    kinds = getattr(module.config, "layer_types", None)
    return bool(getattr(module, "is_sliding", False)) or (kinds is not None and kinds[module.layer_idx] != "full_attention")


@functools.cache
def _rope_module() -> type:
    """A module binding Gemma 3's rotary embedding to one layer type (built on first use: torch is an optional extra)."""
    from torch import nn

    class RopeOfLayerType(nn.Module):
        def __init__(self, rope, layer_type: str) -> None:
            super().__init__()
            self.rope, self.layer_type = rope, layer_type

        def forward(self, x, position_ids):
            return self.rope(x, position_ids, self.layer_type)

    return RopeOfLayerType


@contextlib.contextmanager
def _per_layer_masks(model, cache, start: int, n: int, sliding: set[int]):
    """Each attention layer's mask from its own cache length, for n new tokens at true positions
    `start`…: every cached entry (the kept context entries, and any token run after them) is
    earlier than every new token (visible to all of them), new tokens are causal among
    themselves, and an uncompressed sliding layer applies its window on true positions."""
    import torch

    eager = model.config._attn_implementation == "eager"
    hooks, stashed = [], {}

    def pre_hook(module, args, kwargs):
        kept = cache.layers[module.layer_idx].keys.shape[-2]
        hidden = kwargs["hidden_states"]
        batch = hidden.shape[0]
        new = torch.arange(start, start + n)
        if module.layer_idx in sliding and getattr(module, "sliding_window", None):
            keys = torch.cat([torch.arange(start - kept, start), new])
            allowed = (keys[None, :] <= new[:, None]) & (new[:, None] - keys[None, :] < module.sliding_window)
        else:
            allowed = torch.cat([torch.ones(n, kept, dtype=torch.bool), torch.tril(torch.ones(n, n, dtype=torch.bool))], 1)
        mask = allowed[None, None].expand(batch, 1, n, kept + n)
        masked = getattr(module, "masked_key_indices", None)
        if masked is not None:  # head-wise presses mask keys instead of dropping them
            b, h, s = masked
            heads, kv_heads = module.config.num_attention_heads, module.config.num_key_value_heads
            keep = torch.ones(batch, kv_heads, kept + n, dtype=torch.bool)
            keep[b.cpu(), h.cpu(), s.cpu()] = False
            mask = mask & keep.repeat_interleave(heads // kv_heads, dim=1)[:, :, None, :]
            stashed[module] = masked
            module.masked_key_indices = None
        mask = mask.to(hidden.device)
        if eager:
            mask = torch.zeros(mask.shape, dtype=hidden.dtype, device=hidden.device).masked_fill(~mask, torch.finfo(hidden.dtype).min)
        kwargs["attention_mask"] = mask
        return args, kwargs

    language_model = getattr(model.model, "language_model", model.model)
    for layer in language_model.layers:
        hooks.append(layer.self_attn.register_forward_pre_hook(pre_hook, with_kwargs=True))
    try:
        yield
    finally:
        for hook in hooks:
            hook.remove()
        for module, masked in stashed.items():
            module.masked_key_indices = masked
