"""Where a probe's prompt ends its context, in tokens: the part a model with a KV-cache press
compresses before the question, the answer prefix and every generated token run against its
cache (kvpress's context / question split). A model that keeps its whole cache is not told.

RULER: the context ends where the prompt's last question starts, found as kvpress's own RULER
benchmark splits RULER's prompts (`evaluation/benchmarks/ruler/create_huggingface_dataset.py`,
QUESTION_PATTERNS): the task's instruction and haystack are context; the question and the answer
prefix are not. vt's worked example asks the same question, so the last match is the sample's.
Line retrieval: the record (its header and lines) is context; the question after it is not.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from ctxeval.backends.base import Scorer

RULER_QUESTIONS = {
    "niah": re.compile(r"What (?:is|are all) the special magic"),
    "variable_tracking": re.compile(r"Question: Find all variables that are assigned the value"),
    "common_words_extraction": re.compile(r"Question: What are the 10 most common words in the above list\?"),
    "freq_words_extraction": re.compile(r"Question: Do not provide any explanation\."),
}


def ruler_context_chars(family: str, prompt: str) -> int:
    """How many leading characters of a RULER prompt of task family `family` are its context."""
    return list(RULER_QUESTIONS[family].finditer(prompt))[-1].start()


def first_token_from(scorer: Scorer, ids: Sequence[int], byte_offset: int) -> int:
    """Index of the first token of `ids` whose text ends after `byte_offset` (the token that
    starts there, or straddles it: a straddling token runs against the cache, never compressed)."""
    ends = np.cumsum([len(scorer.token_bytes(int(t))) for t in ids])
    return int(np.searchsorted(ends, byte_offset, side="right"))


def context_end(scorer: Scorer, text: str, ids: Sequence[int], chars: int, n_before: int) -> int:
    """How many leading input ids are the context when `ids` tokenize `text` and its first
    `chars` characters are the context; `n_before` ids (BOS) precede `ids` in the input."""
    return n_before + first_token_from(scorer, ids, len(text[:chars].encode("utf-8")))
