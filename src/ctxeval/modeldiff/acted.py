"""Which scored targets a KV-cache press acted on, so a diff never reports "no difference" for a
press that had nothing to compress.

A press compresses only the context before a pass's first target (backends/kv_press.py): with
`budget=B` it keeps min(B, c) of a c-token context, with `compression_ratio=r` it keeps kvpress's
max(1, int(c·(1−r))). A target is scored against a compressed cache only when its pass's context
is longer than what the press keeps. Disjoint chunks have no context before their first target,
and the first window of sliding windows has none either: those targets are the uncompressed ones.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ctxeval.backends.kv_press import PressOptions
from ctxeval.backends.model_options import HfOptions
from ctxeval.backends.registry import ModelSpec
from ctxeval.errors import FieldError, UserError


def presses(models: tuple[ModelSpec, ...]) -> list[tuple[ModelSpec, PressOptions]]:
    """The pressed models among `models`, with their press; a ratio of 0 keeps every token (the
    plain model's control, docs/kv_compression.md) and is no press here."""
    return [(m, m.options.press) for m in models if isinstance(m.options, HfOptions) and m.options.press is not None
            and (m.options.press.budget is not None or m.options.press.compression_ratio)]


def first_acting_context(press: PressOptions, window: int) -> int | None:
    """The shortest context below `window` tokens that `press` compresses (None: none does)."""
    return next((c for c in range(1, window) if press.acts_on(c)), None)


def check_layout(models: tuple[ModelSpec, ...], window: int, stride: int | None) -> None:
    """Refuse a window layout in which no pressed model can compress anything: disjoint chunks
    (no context before a window's first target), or sliding windows whose context (W − S tokens)
    the press keeps whole. The error names a stride (or window) that would work."""
    for model, press in presses(models):
        first = first_acting_context(press, window)
        if first is None:
            kept = (press.budget or 1) + 1
            raise FieldError("window", f"{{name}} ({window}) leaves {model.text} nothing to compress: a window's context before its targets is at most "
                                       f"{window - 1} tokens, all of which the press keeps; give e.g. a {{name}} of {2 * kept} and a {{stride}} of {kept}")
        works = window // 2 if window - window // 2 >= first else window - first
        if stride is None or stride == window:
            raise FieldError("stride", f"{{name}} is needed for {model.text}: disjoint chunks leave no context before a window's first target, so the press "
                                       f"would compress nothing and the diff would read 'no difference'; give a {{name}} S ≤ {window - first} (e.g. {works})")
        if window - stride < first:
            raise FieldError("stride", f"{{name}} ({stride}) leaves {window - stride} tokens of context before a window's targets, which {model.text} keeps whole; "
                                       f"give a {{name}} S ≤ {window - first} (e.g. {works})")


def acted_mask(records: pd.DataFrame, models: tuple[ModelSpec, ...]) -> np.ndarray | None:
    """Per record: whether a press acted on its pass's context (the context before the pass's
    first target: the smallest context length in the pass). None when no model is pressed."""
    pressed = presses(models)
    if not pressed:
        return None
    context = records.groupby("pass_index")["context_len"].transform("min").to_numpy()
    acts = np.zeros(len(records), dtype=bool)
    for c in np.unique(context):
        if any(press.acts_on(int(c)) for _, press in pressed):
            acts[context == c] = True
    return acts


def check_plan_acts(models: tuple[ModelSpec, ...], contexts: list[int]) -> int | None:
    """How many passes (by their context before the first target, `contexts`) a press acts on
    (None: no model is pressed); refuses a plan in which it acts on none (documents no longer
    than one window)."""
    pressed = presses(models)
    if not pressed:
        return None
    acting = sum(any(press.acts_on(c) for _, press in pressed) for c in contexts)
    if not acting:
        names = ", ".join(m.text for m, _ in pressed)
        raise UserError(f"no window of this plan has more context before its targets than {names} keeps (the documents are too short for a second window): "
                        "the press would act on no scored target; give longer texts or shorter windows")
    return acting


def describe(models: tuple[ModelSpec, ...]) -> str:
    """The presses in play, for the headline (e.g. `StreamingLLMPress budget 128`)."""
    return ", ".join(f"{p.name} " + (f"budget {p.budget}" if p.budget is not None else f"ratio {p.compression_ratio:g}") for _, p in presses(models))
