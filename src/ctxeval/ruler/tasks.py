"""RULER's synthetic tasks (NVIDIA/RULER, commit c3f5e3b, 2026-07-22): configurations, templates
and the needle-in-a-haystack generator, read from `scripts/synthetic.yaml`,
`scripts/data/synthetic/constants.py` and `scripts/data/synthetic/niah.py`.

A task renders one sample from a seeded `random.Random` and a haystack size; `ruler_sizes`
fits the size to a length in the model's own tokens. The templates are RULER's word for word,
with its `base` model template (the identity) and the answer prefix appended, as RULER's
`prepare.py` sends them. Where ctxeval cannot follow RULER, it says so (docs/ruler.md): the
essay haystack is a public-domain text, not Paul Graham's essays (not available offline);
sentences are split by a regular expression, not nltk's punkt (whose model is a download);
a word key is an adjective and a noun drawn independently from wonderwords' lists, where RULER
draws from their sorted, deduplicated product (the few pairs that coincide aside, the same
distribution); each sample has its own seeded generator (RULER's shares one stream across
samples and the length search), so any sample can be rebuilt alone, in any order.
"""

from __future__ import annotations

import random
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from ctxeval.ruler.aggregation import (CWE_ANSWER_PREFIX, FWE_ANSWER_PREFIX, FWE_TOKENS, NOISE, SHORT, VT_ANSWER_PREFIX, Rendered, Setting, common_words,
                                              frequent_words, variable_tracking, wonderwords_list)

RULER_COMMIT = "c3f5e3b4f87f97e048793bb510a3a6b19a46bf3a"

NIAH_TEMPLATE = ("Some special magic {type_needle_v} are hidden within the following text. Make sure to memorize it. I will quiz you about the "
                 "{type_needle_v} afterwards.\n{context}\nWhat are all the special magic {type_needle_v} for {query} mentioned in the provided text?")
NIAH_ANSWER_PREFIX = " The special magic {type_needle_v} for {query} mentioned in the provided text are"
NEEDLE = "One of the special magic {type_needle_v} for {key} is: {value}."
DEPTHS = [int(d) for d in np.round(np.linspace(0, 100, num=40, endpoint=True)).astype(int)]
NUMBER_DIGITS = 7
# RULER steps essay haystacks by 500 words, more than a 2K prompt holds; below 4,096 tokens, where its
# other haystacks step by 5 lines, ctxeval steps essays by 25 words (about 35 tokens)
ESSAY_SHORT_STEP = 25


@dataclass(frozen=True)
class TaskDef:
    """One task of synthetic.yaml: its family, arguments, output length and haystack step."""

    name: str
    family: str  # niah, variable_tracking, common_words_extraction, freq_words_extraction
    args: dict[str, Any]
    tokens_to_generate: int
    render: Callable[[random.Random, int, Setting], Rendered]  # (generator, haystack size, setting) -> sample

    def smallest_size(self) -> int:
        """The fewest haystack units a sample can have (a line per needle or chain variable; the common words and one more)."""
        args = self.args
        if self.family == "niah":
            return 1 if args["type_haystack"] == "essay" else max(args["num_needle_k"], args["num_needle_q"]) * args["num_needle_v"]
        if self.family == "variable_tracking":
            return (args["num_hops"] + 1) * args["num_chains"]
        return args.get("num_cw", 0) + 1

    def increment(self, length: int) -> int:
        """RULER's haystack step: the unit the length search and the per-sample shrink move by."""
        if self.family == "niah":
            if self.args["type_haystack"] == "essay":
                return 500 if length >= SHORT else ESSAY_SHORT_STEP
            return 5 if length < SHORT else 25
        if self.family == "variable_tracking":
            return 5 if length < SHORT else 10
        if self.family == "common_words_extraction":
            return 10
        return max(1, (length - self.tokens_to_generate) // 32)  # freq_words_extraction


ANSWER_PREFIXES = {"niah": NIAH_ANSWER_PREFIX, "variable_tracking": VT_ANSWER_PREFIX, "common_words_extraction": CWE_ANSWER_PREFIX,
                   "freq_words_extraction": FWE_ANSWER_PREFIX}


def split_answer_prefix(family: str, prompt: str) -> tuple[str, str]:
    """(input, answer prefix) of a prompt, cut as RULER's generators cut it: at the last occurrence
    of the answer prefix's first 10 characters. A chat template wraps the input alone."""
    at = prompt.rfind(ANSWER_PREFIXES[family][:10])
    return prompt[:at], prompt[at:]


def _niah(type_haystack: str, type_needle_k: str, type_needle_v: str, num_needle_k: int = 1, num_needle_v: int = 1, num_needle_q: int = 1) -> dict[str, Any]:
    return {"type_haystack": type_haystack, "type_needle_k": type_needle_k, "type_needle_v": type_needle_v,
            "num_needle_k": num_needle_k, "num_needle_v": num_needle_v, "num_needle_q": num_needle_q}


def random_key_or_value(rng: random.Random, kind: str) -> str:
    """A word (adjective-noun), a 7-digit number or a UUID, as RULER's `generate_random`."""
    if kind == "numbers":
        return str(rng.randint(10 ** (NUMBER_DIGITS - 1), 10**NUMBER_DIGITS - 1))
    if kind == "words":
        return f"{rng.choice(wonderwords_list('adjectivelist.txt'))}-{rng.choice(wonderwords_list('nounlist.txt'))}"
    if kind == "uuids":
        return str(uuid.UUID(int=rng.getrandbits(128), version=4))
    raise ValueError(f"unknown needle type {kind!r}")


def sentences(text: str) -> list[str]:
    """Sentences of `text`: cut after ., ! or ? (closing quotes and brackets kept) before white space."""
    parts, start = [], 0
    text = text.strip()
    for match in re.finditer(r"[.!?][\"')\]]*\s+", text):
        parts.append(text[start : match.end()].strip())
        start = match.end()
    parts.append(text[start:].strip())
    return [p for p in parts if p]


def render_niah(rng: random.Random, size: int, setting: Setting) -> Rendered:
    """niah.py's `generate_input_output` for `size` haystack units (noise lines, essay words or
    distractor needles), then its template with the answer prefix."""
    args = setting.args
    num_k = max(args["num_needle_k"], args["num_needle_q"])
    kind_k, kind_v, haystack_kind = args["type_needle_k"], args["type_needle_v"], args["type_haystack"]
    keys, values, needles = [], [], []
    for _ in range(num_k):
        keys.append(random_key_or_value(rng, kind_k))
        value = []
        for _ in range(args["num_needle_v"]):
            value.append(random_key_or_value(rng, kind_v))
            needles.append(NEEDLE.format(type_needle_v=kind_v, key=keys[-1], value=value[-1]))
        values.append(value)
    random.Random(setting.seed).shuffle(needles)
    if haystack_kind == "essay":
        words = essay_words(setting.essay)
        repeats = -(-size // len(words))
        document = sentences(" ".join((words * repeats)[:size]))
        positions = [0] + sorted(int(len(document) * (depth / 100)) for depth in rng.sample(DEPTHS, len(needles))) + [len(document)]
        parts = []
        for i in range(1, len(positions)):
            parts.append(" ".join(document[positions[i - 1] : positions[i]]))
            if i - 1 < len(needles):
                parts.append(needles[i - 1])
        context = " ".join(parts)
    else:
        if haystack_kind == "noise":
            lines = [NOISE] * size
        else:
            lines = [NEEDLE.format(type_needle_v=kind_v, key=random_key_or_value(rng, kind_k), value=random_key_or_value(rng, kind_v)) for _ in range(size)]
        for index, element in zip(sorted(rng.sample(range(size), len(needles)), reverse=True), needles):
            lines.insert(index, element)
        context = "\n".join(lines)
    indices = rng.sample(range(num_k), args["num_needle_q"])
    queries = [keys[i] for i in indices]
    answers = [a for i in indices for a in values[i]]
    query = ", ".join(queries[:-1]) + ", and " + queries[-1] if len(queries) > 1 else queries[0]
    template = NIAH_TEMPLATE + NIAH_ANSWER_PREFIX
    type_needle_v = kind_v
    if args["num_needle_q"] * args["num_needle_v"] == 1:
        template = template.replace("Some", "A").replace("are all", "is").replace("are", "is").replace("answers", "answer")
        type_needle_v = kind_v[:-1]
    prompt = template.format(type_needle_v=type_needle_v, context=context, query=query)
    start = prompt.index("\n") + 1
    needle_at = prompt.find(f"for {queries[0]} is: {answers[0]}.")
    depth = (needle_at - start) / max(1, len(context)) if needle_at >= 0 else None
    return Rendered(prompt, tuple(answers), None if depth is None else round(depth, 6))


@cache
def essay_words(essay: str) -> list[str]:
    """RULER's essay haystack unit: the text's words, white space collapsed."""
    return re.sub(r"\s+", " ", essay).split(" ")


TASKS: dict[str, TaskDef] = {
    task.name: task
    for task in (
        TaskDef("niah_single_1", "niah", _niah("noise", "words", "numbers"), 128, render_niah),
        TaskDef("niah_single_2", "niah", _niah("essay", "words", "numbers"), 128, render_niah),
        TaskDef("niah_single_3", "niah", _niah("essay", "words", "uuids"), 128, render_niah),
        TaskDef("niah_multikey_1", "niah", _niah("essay", "words", "numbers", num_needle_k=4), 128, render_niah),
        TaskDef("niah_multikey_2", "niah", _niah("needle", "words", "numbers"), 128, render_niah),
        TaskDef("niah_multikey_3", "niah", _niah("needle", "uuids", "uuids"), 128, render_niah),
        TaskDef("niah_multivalue", "niah", _niah("essay", "words", "numbers", num_needle_v=4), 128, render_niah),
        TaskDef("niah_multiquery", "niah", _niah("essay", "words", "numbers", num_needle_q=4), 128, render_niah),
        TaskDef("vt", "variable_tracking", {"type_haystack": "noise", "num_chains": 1, "num_hops": 4}, 30, variable_tracking),
        TaskDef("cwe", "common_words_extraction", {"freq_cw": 30, "freq_ucw": 3, "num_cw": 10}, 120, common_words),
        TaskDef("fwe", "freq_words_extraction", {"alpha": 2.0}, FWE_TOKENS, frequent_words),
    )
}
