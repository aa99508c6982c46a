"""Which tokens are scored with which context.

A `Pass` is one forward pass of the model: BOS (when the model uses one, never counted as
context), then the text tokens `[context_start, target_end - 1)`; it scores the targets
`[target_start, target_end)`, and target `i` sees the `i - context_start` tokens before it.
Windows only decide *what* is scored, never how a backend computes it.

All positions are indices into the token sequence of one text under one tokenizer.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from ctxeval.errors import FieldError, UserError
from ctxeval.pipeline.time_left import Cost

METHODS = ("chunked", "sliding", "fixed")
CONTEXT_MODES = ("exact", "approx", "thesis")
HEADS = ("full", "skip")  # fixed: score or skip the targets with fewer than W predecessors


@dataclass(frozen=True)
class Pass:
    """One forward pass: context from `context_start`, targets `[target_start, target_end)`."""

    window_id: str
    method: str
    context_mode: str
    nominal_len: int
    repeat: int
    context_start: int
    target_start: int
    target_end: int

    @property
    def n_targets(self) -> int:
        return self.target_end - self.target_start

    @property
    def n_input(self) -> int:
        """Text tokens fed to the model (BOS not included): the whole window, its last target
        too, because llama.cpp rounds a batch's rows by the batch's length and its own tools
        decode whole windows (docs/numerics.md)."""
        return self.target_end - self.context_start

    def cost(self) -> Cost:
        """The pass's work for the time-left estimate: its input, decoded at contexts up to its
        length, and the targets it scores."""
        return Cost(self.n_input, self.n_input, targets=self.n_targets)

    def context_lens(self) -> np.ndarray:
        return np.arange(self.target_start, self.target_end) - self.context_start


def chunked(n_tokens: int, window: int) -> list[Pass]:
    """Disjoint chunks of `window` tokens; each token sees the tokens before it in its chunk."""
    _check_positive(window=window)
    return [
        Pass(f"C{window}-{k}", "chunked", "window", window, 0, start, start, min(start + window, n_tokens))
        for k, start in enumerate(range(0, n_tokens, window))
    ]


def sliding(n_tokens: int, window: int, stride: int) -> list[Pass]:
    """Windows of `window` tokens moved by `stride`; every token is scored exactly once.

    The first window scores all its tokens; each later one scores only the tokens past the
    previous window's end, so each target sees between `window - stride` and `window - 1`
    tokens (the Hugging Face perplexity-guide convention). `stride == window` is `chunked`.
    """
    _check_positive(window=window, stride=stride)
    if stride > window:
        raise FieldError("stride", f"({stride}) must not exceed {{window}} ({window})")
    passes: list[Pass] = []
    prev_end = 0
    for k, begin in enumerate(range(0, n_tokens, stride)):
        end = min(begin + window, n_tokens)
        if end <= prev_end:
            break
        passes.append(Pass(f"S{window}/{stride}-{k}", "sliding", "window", window, 0, begin, prev_end, end))
        prev_end = end
        if end == n_tokens:
            break
    return passes


def fixed(n_tokens: int, context_len: int, head: str = "full") -> list[Pass]:
    """Every target sees `min(i, context_len)` previous tokens (paper 002's P2, A.1 eq. 3-4).

    With `head="full"` the first `context_len` targets, which have fewer predecessors, are
    scored with all of them in one pass (the same pass as the first `chunked` window), so
    `fixed` and `chunked` cover the same tokens and their perplexities compare like for like.
    `head="skip"` leaves them out, so every scored target sees exactly `context_len` tokens.
    Later targets get one pass each. Reporting window `F{W}-k` holds the targets
    `[k * W, (k + 1) * W)`, the same targets as chunk `C{W}-k`, so spreads over windows can be
    computed and the windows of the two methods pair.
    """
    _check_positive(window=context_len)
    if head not in HEADS:
        raise FieldError("head", f"unknown {{name}} {head!r}; choose one of {', '.join(HEADS)}")
    if head == "skip" and n_tokens <= context_len:
        raise FieldError("window", f"text has {n_tokens} tokens; {{name}} {context_len} with {{head}} skip needs at least {context_len + 1}")
    mode = "capped" if head == "full" else "exact"
    passes = []
    if head == "full" and n_tokens > 0:
        passes.append(Pass(f"F{context_len}-0", "fixed", mode, context_len, 0, 0, 0, min(context_len, n_tokens)))
    passes.extend(
        Pass(f"F{context_len}-{i // context_len}", "fixed", mode, context_len, 0, i - context_len, i, i + 1)
        for i in range(context_len, n_tokens)
    )
    return passes


def truncated(long_passes: Sequence[Pass], context_len: int, stride: int) -> list[Pass]:
    """Short-context passes that re-score the targets of `long_passes` with about `context_len` tokens.

    Inside each long pass, target `j` tokens after its context start keeps its long score when
    `j < context_len + stride` (its context is already that short); later targets are scored by
    passes of `context_len + stride` tokens moved by `stride`, so each sees between
    `context_len` and `context_len + stride - 1` tokens of the same text (LongPPL's truncated
    context and sliding window; `stride` 1 gives exactly `context_len`). Every short context is
    a suffix of the target's long context, so the two scores differ only by distant tokens.
    """
    _check_positive(short=context_len, short_stride=stride)
    passes: list[Pass] = []
    for lp in long_passes:
        m = 1
        while lp.context_start + m * stride + context_len < lp.target_end:
            begin = lp.context_start + m * stride
            first = max(begin + context_len, lp.target_start)
            end = min(begin + context_len + stride, lp.target_end)
            if first < end:
                passes.append(Pass(f"T{context_len}/{stride}-{lp.window_id}-{m}", "truncated", "short", context_len, lp.repeat, begin, first, end))
            m += 1
    return passes


def for_model(passes: Sequence[Pass], uses_bos: bool, max_context: int | None = None) -> list[Pass]:
    """`passes` as one model scores them: without a BOS token a text's first token has nothing
    before it to be predicted from, so a pass whose first target opens its window keeps that
    token as context only (a one-token pass has nothing left); then its truncation control."""
    if not uses_bos:
        passes = [replace(p, target_start=p.target_start + 1) if p.target_start == p.context_start else p for p in passes]
        passes = [p for p in passes if p.n_targets > 0]
    return cap_context(passes, max_context)


def cap_context(passes: Sequence[Pass], max_context: int | None, unique: bool = False) -> list[Pass]:
    """`passes` as a model truncated to `max_context` tokens scores them (a truncation control,
    `?max_context=N`): each target sees at most the last N tokens of its planned context.

    A pass keeps the targets whose context is already at most N (their input is unchanged);
    every later target gets its own pass of exactly N tokens before it, in the same window (as
    `fixed` windows hold one pass per target), so summaries group targets as before and records
    give each target the context it really had. Capping
    capped passes changes nothing. `unique` scores a target with its last N tokens once (a
    plan that scores one target at many lengths needs it once): a capped pass is dropped when
    an earlier pass already gave that target exactly N tokens.
    """
    if max_context is None:
        return list(passes)
    _check_positive(max_context=max_context)
    out: list[Pass] = []
    seen: set[tuple[int, int]] = set()
    for p in passes:
        last_uncapped = p.context_start + capped_context(p.target_end - 1 - p.context_start, max_context) + 1  # past the last target that sees all of its context
        if p.target_start < last_uncapped:
            out.append(p if last_uncapped == p.target_end else Pass(p.window_id, p.method, p.context_mode, p.nominal_len, p.repeat, p.context_start, p.target_start, last_uncapped))
            if last_uncapped - 1 - p.context_start == max_context:  # its last target already sees exactly N
                seen.add((last_uncapped - 1, max_context))
        for target in range(max(p.target_start, last_uncapped), p.target_end):
            if unique and (target, max_context) in seen:
                continue
            seen.add((target, max_context))
            out.append(Pass(p.window_id, p.method, p.context_mode, p.nominal_len, p.repeat, target - capped_context(target - p.context_start, max_context), target, target + 1))
    return out


def capped_context(planned: int | np.ndarray, max_context: int | None) -> int | np.ndarray:
    """The tokens of context a target has under a truncation control `?max_context=N`: its
    planned context (L + j for target j of an effective-length span) but at most N. The one
    place the cap is written: `cap_context` plans the passes by it, and the effective-length
    analysis finds each target's record by it (an array of them at once)."""
    if max_context is None:
        return planned
    return np.minimum(planned, max_context) if isinstance(planned, np.ndarray) else min(planned, max_context)


def sweep_fraction(seed: int, text_sha256: str, length: int, repeat: int) -> float:
    """The seeded uniform draw in [0, 1) that places one sweep start.

    It depends on the seed, the text's content hash, the length and the repeat, never on a
    tokenizer, so every model scored on the same text starts at the same character.
    """
    text_key = int.from_bytes(hashlib.sha256(text_sha256.encode()).digest()[:8], "little")
    return float(np.random.default_rng([seed, text_key, length, repeat]).random())


def sweep_start_char(fraction: float, max_start_char: int) -> int:
    """Character offset of a sweep's first context token, given the draw and the last valid start."""
    return int(fraction * (max_start_char + 1))


def token_start_chars(char_starts: np.ndarray, char_ends: np.ndarray) -> np.ndarray:
    """Characters at which a token of this tokenization begins at the character's first byte
    (a byte-level token that starts inside a multi-byte character does not count)."""
    clean = np.ones(len(char_starts), dtype=bool)
    clean[1:] = char_ends[:-1] == char_starts[1:]
    return np.unique(char_starts[clean])


def aligned_start_char(drawn: int, boundaries: Sequence[np.ndarray], max_start_char: int) -> int:
    """The first character at or after `drawn` (at most `max_start_char`) where every
    tokenization has a token boundary, so all models' contexts begin at exactly that character;
    if none is left before `max_start_char`, the last common boundary before it."""
    common = boundaries[0]
    for other in boundaries[1:]:
        common = np.intersect1d(common, other, assume_unique=True)
    common = common[common <= max_start_char]
    i = int(np.searchsorted(common, drawn, side="left"))
    return int(common[min(i, len(common) - 1)])


def max_sweep_start_char(char_starts: np.ndarray, length: int, n_compare: int) -> int:
    """Last character at which a window of `length + n_compare` tokens can start in this tokenization."""
    last_token = len(char_starts) - (length + n_compare)
    if last_token < 0:
        raise FieldError(
            "n_compare", f"text has {len(char_starts)} tokens; context length {length} with {{name}} {n_compare} "
            f"needs at least {length + n_compare}"
        )
    return int(char_starts[last_token])


def sweep(
    char_starts: np.ndarray,
    lengths: Sequence[int],
    n_compare: int,
    start_chars: dict[tuple[int, int], int],
    context_mode: str,
    thesis_targets: int | None = None,
) -> list[Pass]:
    """The thesis protocol: per length L and repeat, n_c consecutive targets after a start.

    `start_chars[(L, repeat)]` is the character where the context begins; it is mapped to the
    first token starting at or after it. In `exact` mode every target sees exactly L tokens
    (one pass per target); in `approx` mode one pass of L + n_c tokens scores the n_c targets
    with contexts L ... L + n_c - 1. In `thesis` mode one pass holds the targets an API
    model's generation protocol may reach (`thesis_targets`, default n_c; cut at the text's
    end); the scorer decides which it scores and with what context (L, or L + j when reused).
    """
    _check_positive(n_compare=n_compare)
    if context_mode not in CONTEXT_MODES:
        raise UserError(f"unknown context mode {context_mode!r}; choose one of {', '.join(CONTEXT_MODES)}")
    n_tokens = len(char_starts)
    passes: list[Pass] = []
    for (length, repeat), start_char in sorted(start_chars.items()):
        _check_positive(lengths=length)
        start = int(np.searchsorted(char_starts, start_char, side="left"))
        first_target = start + length
        if first_target + n_compare > n_tokens:
            raise FieldError(
                "n_compare", f"text has {n_tokens} tokens; a sweep start at character {start_char} with length {length} "
                f"and {{name}} {n_compare} runs past its end"
            )
        window_id = f"{context_mode[0].upper()}{length}-r{repeat}"
        if context_mode == "approx":
            passes.append(Pass(window_id, "sweep", "approx", length, repeat, start, first_target, first_target + n_compare))
        elif context_mode == "thesis":
            end = min(n_tokens, first_target + (thesis_targets or n_compare))
            passes.append(Pass(window_id, "sweep", "thesis", length, repeat, start, first_target, end))
        else:
            passes.extend(
                Pass(window_id, "sweep", "exact", length, repeat, target - length, target, target + 1)
                for target in range(first_target, first_target + n_compare)
            )
    return passes


def run_order(passes: Sequence[Pass]) -> list[int]:
    """The order in which a document's passes run, as positions in its plan: a sweep's from its
    longest length down, each length's passes in plan order; others as planned. A length too
    long for the machine's memory fails in the first minute, not the last, and the time-left
    estimate interpolates between lengths it has timed instead of extrapolating the short
    passes' cost to passes 17 times longer (docs/outputs.md). Records keep the plan's order
    (pass indices), so a run's files do not depend on it."""
    return sorted(range(len(passes)), key=lambda k: -passes[k].nominal_len if passes[k].method == "sweep" else 0)


def _check_positive(**values: int) -> None:
    """Each value positive, named by the option that sets it."""
    for option, value in values.items():
        if value < 1:
            raise FieldError(option, f"must be a positive integer, got {value}")
