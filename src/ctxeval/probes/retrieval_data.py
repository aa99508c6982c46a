"""Synthetic line-retrieval records (paper 002, appendix A.2, after LongChat's LongEval lines).

`cat`: "A person named <key> has a cat. His cat's name is <value>." with three in-context
examples before the query; `register`: LongChat's "line <key>: REGISTER_CONTENT is <value>".
Keys and values are made-up words (and 5-digit numbers), unique, with no word shared between
keys and values, so the answer can only come from its line; the queried value occurs exactly
once in the prompt. Everything is a pure function of (variant, lines, depth, sample, seed).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

VARIANTS = ("cat", "register")
N_EXAMPLES = 3

CAT_HEADER = (
    "Below is a record of lines I want you to remember. Each line begins with a person's name and its cat's name. "
    "For each line index, memorize the person's name and the cat's name. At the end of the record, I will ask you "
    "to retrieve the cat's name of a certain person. Now the record start:\n\n"
)
REGISTER_HEADER = (
    "Below is a record of lines I want you to remember. Each line begins with 'line <line index>' and contains a "
    "'<REGISTER_CONTENT>' at the end of the line as a numerical value. For each line index, memorize its "
    "corresponding <REGISTER_CONTENT>. At the end of the record, I will ask you to retrieve the corresponding "
    "<REGISTER_CONTENT> of a certain line index. Now the record start:\n\n"
)
_CONSONANTS = "bdfgklmnprstvz"
_VOWELS = "aeiou"
_SYLLABLES = [c + v for c in _CONSONANTS for v in _VOWELS]


@dataclass(frozen=True)
class RetrievalCase:
    """One prompt, the expected continuation and where the queried line sits."""

    variant: str
    n_lines: int
    depth: float  # requested depth in [0, 1]
    sample: int
    prompt: str
    answer: str  # the reference continuation: value plus its terminator
    value: str
    key: str
    line_index: int  # 0-based index of the queried line among the record lines
    line_char_start: int  # character offset of the queried line in the prompt
    record_char_start: int  # where the first record line starts
    record_char_end: int  # where the last record line ends

    @property
    def char_depth(self) -> float:
        """Where the queried line starts, as a fraction of the record's characters."""
        return (self.line_char_start - self.record_char_start) / max(1, self.record_char_end - self.record_char_start)


def make_case(variant: str, n_lines: int, depth: float, sample: int, seed: int = 0) -> RetrievalCase:
    """The record for one (variant, lines, depth, sample); the queried line is line round(depth (n-1))."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}")
    if n_lines < N_EXAMPLES + 1:
        raise ValueError(f"at least {N_EXAMPLES + 1} lines are needed")
    if not 0.0 <= depth <= 1.0:
        raise ValueError("depth must lie in [0, 1]")
    rng = np.random.default_rng([seed, VARIANTS.index(variant), n_lines, round(depth * 10_000), sample])
    keys, values = _keys_and_values(variant, n_lines, rng)
    query = int(np.floor(depth * (n_lines - 1) + 0.5))
    if variant == "cat":
        lines = [f"A person named {k} has a cat. His cat's name is {v}.\n" for k, v in zip(keys, values)]
        others = [i for i in range(n_lines) if i != query]
        examples = rng.choice(others, size=N_EXAMPLES, replace=False)
        tail = "\nNow the record is over. " + "".join(
            f"I remember the cat's name of person {keys[i]} is {values[i]}.\n\n" for i in examples
        )
        tail += f"I remember the cat's name of person {keys[query]} is"
        header, answer = CAT_HEADER, f" {values[query]}."
    else:
        lines = [f"line {k}: REGISTER_CONTENT is <{v}>\n" for k, v in zip(keys, values)]
        tail = (
            f"\nNow the record is over. Tell me what is the <REGISTER_CONTENT> in line {keys[query]}? I need the number.\n"
            f"The <REGISTER_CONTENT> in line {keys[query]} is <"
        )
        header, answer = REGISTER_HEADER, f"{values[query]}>"
    prompt = header + "".join(lines) + tail
    line_start = len(header) + sum(len(line) for line in lines[:query])
    case = RetrievalCase(variant, n_lines, depth, sample, prompt, answer, values[query], keys[query], query,
                         line_start, len(header), len(header) + sum(len(line) for line in lines))
    if len(re.findall(rf"(?<![\w]){re.escape(case.value)}(?![\w])", prompt)) != 1:
        raise AssertionError("the queried value must occur exactly once in the prompt")
    return case


def _keys_and_values(variant: str, n: int, rng: np.random.Generator) -> tuple[list[str], list[str]]:
    """Unique keys and values; no word of a value is a word of a key."""
    if variant == "cat":
        words = _unique_words(rng, 3 * n, min_syllables=2, max_syllables=3)
        first, last, cats = words[:n], words[n : 2 * n], words[2 * n :]
        keys = [f"{a.capitalize()} {b.capitalize()}" for a, b in zip(first, last)]
        return keys, [c.capitalize() for c in cats]
    words = _unique_words(rng, 2 * n, min_syllables=2, max_syllables=2)
    keys = [f"{a}-{b}" for a, b in zip(words[:n], words[n:])]
    values = [str(v) for v in rng.choice(np.arange(10_000, 100_000), size=n, replace=False)]
    return keys, values


def _unique_words(rng: np.random.Generator, count: int, min_syllables: int, max_syllables: int) -> list[str]:
    words: list[str] = []
    seen: set[str] = set()
    while len(words) < count:
        n_syl = int(rng.integers(min_syllables, max_syllables + 1))
        word = "".join(_SYLLABLES[i] for i in rng.integers(0, len(_SYLLABLES), size=n_syl))
        if word not in seen:
            seen.add(word)
            words.append(word)
    return words
