"""RULER's variable tracking, common-words and frequent-words extraction (NVIDIA/RULER commit
c3f5e3b: `scripts/data/synthetic/variable_tracking.py`, `common_words_extraction.py`,
`freq_words_extraction.py`), rendered from a seeded generator per sample.

RULER seeds one global stream; where it reseeds a fresh `random.Random(seed)` for a shuffle
(cwe's word list and its repeated words, fwe's vocabulary and text), so does ctxeval, which
makes those permutations the same for every sample of a given size, as in RULER.
"""

from __future__ import annotations

import random
import re
import string
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from ctxeval.data.texts import ruler_haystack_path
from ctxeval.errors import FieldError

VT_TEMPLATE = ("Memorize and track the chain(s) of variable assignment hidden in the following text.\n\n{context}\n"
               "Question: Find all variables that are assigned the value {query} in the text above.")
VT_ANSWER_PREFIX = " Answer: According to the chain(s) of variable assignment in the text above, {num_v} variables are assigned the value {query}, they are: "
CWE_TEMPLATE = ("Below is a numbered list of words. In these words, some appear more often than others. Memorize the ones that appear most often.\n"
                "{context}\nQuestion: What are the 10 most common words in the above list?")
CWE_ANSWER_PREFIX = " Answer: The top 10 words that appear most often in the list are:"
FWE_TEMPLATE = ("Read the following coded text and track the frequency of each coded word. Find the three most frequently appeared coded words. "
                "{context}\nQuestion: Do not provide any explanation. Please ignore the dots '....'. What are the three most frequently appeared words in the above coded text?")
FWE_ANSWER_PREFIX = " Answer: According to the coded text above, the three most frequently appeared words are:"
NOISE = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."
SHORT = 4096  # below this length RULER's cwe uses its short-context frequencies and example
VT_ICL_VALUE = "12345"
FWE_TOKENS = 50  # fwe's tokens_to_generate, which its vocabulary size also subtracts from the length


@dataclass(frozen=True)
class Setting:
    """What a sample's rendering needs beside its generator and haystack size."""

    args: dict[str, Any]
    seed: int
    length: int
    essay: str = ""
    example: str = ""  # variable tracking's in-context example (input, answer and newline), '' while it is made


@dataclass(frozen=True)
class Rendered:
    """A sample's prompt (input with the answer prefix), its answers and needle depth."""

    prompt: str
    answers: tuple[str, ...]
    depth: float | None = None


def _chains(rng: random.Random, num_chains: int, num_hops: int, is_icl: bool) -> tuple[list[list[str]], list[list[str]]]:
    """variable_tracking.py's `generate_chains`: unique upper-case names, each chain a value then hops."""
    k = 3 if is_icl else 5
    num_hops = min(10, num_hops) if is_icl else num_hops
    names = ["".join(rng.choices(string.ascii_uppercase, k=k)) for _ in range((num_hops + 1) * num_chains)]
    while len(set(names)) < num_chains * (num_hops + 1):
        names.append("".join(rng.choices(string.ascii_uppercase, k=k)))
    variables, chains = [], []
    for i in range(0, len(names), num_hops + 1):
        these = names[i : i + num_hops + 1]
        variables.append(these)
        chain = [f"VAR {these[0]} = {VT_ICL_VALUE if is_icl else rng.randint(10000, 99998)}"]
        chain += [f"VAR {these[j + 1]} = VAR {these[j]} " for j in range(num_hops)]
        chains.append(chain)
    return variables, chains


def vt_body(rng: random.Random, size: int, setting: Setting, is_icl: bool = False) -> tuple[str, list[str]]:
    """variable_tracking.py's `generate_input_output` on a noise haystack of `size` lines: the
    chains' lines inserted at random line positions, in order; the template and answer prefix."""
    num_chains, num_hops = setting.args["num_chains"], setting.args["num_hops"]
    variables, chains = _chains(rng, num_chains, num_hops, is_icl)
    value = chains[0][0].split("=")[-1].strip()
    lines = [NOISE] * size
    for chain in chains:
        positions = sorted(rng.sample(range(len(lines)), len(chain)))
        for j, position in enumerate(positions):
            lines.insert(position + j, chain[j])
    context = "\n".join(lines).replace(". \n", ".\n")
    text = (VT_TEMPLATE + VT_ANSWER_PREFIX).format(context=context, query=value, num_v=num_hops + 1)
    return text, variables[0]


def vt_example(body: str, answers: list[str]) -> str:
    """The in-context example as RULER prepends it: its input, its answer, a newline."""
    return body + " " + " ".join(answers) + "\n"


def _randomize_example(rng: random.Random, example: str, num_hops: int) -> str:
    """variable_tracking.py's `randomize_icl`: new names for the example's answer variables and a new value."""
    for item in example.strip().split()[-num_hops - 1 :]:
        example = example.replace(item, "".join(rng.choices(string.ascii_uppercase, k=len(item))))
    return example.replace(VT_ICL_VALUE, str(rng.randint(10000, 99998)))


def variable_tracking(rng: random.Random, size: int, setting: Setting) -> Rendered:
    """One vt sample: the randomized example, a newline, then the task on `size` noise lines."""
    text, answers = vt_body(rng, size, setting)
    example = _randomize_example(rng, setting.example, setting.args["num_hops"])
    return Rendered(example + "\n" + text, tuple(answers))


@cache
def wonderwords_list(name: str) -> tuple[str, ...]:
    """One of the wonderwords package's word lists ("nounlist.txt", ...), which RULER's keys and
    cwe's vocabulary are drawn from."""
    from wonderwords import random_word

    return tuple(random_word._get_words_from_text_file(name))


@cache
def cwe_words(seed: int) -> tuple[str, ...]:
    """common_words_extraction.py's vocabulary: wonderwords' nouns, adjectives and verbs,
    deduplicated, sorted, shuffled with `random.Random(seed)`."""
    merged = sorted({w for name in ("nounlist.txt", "adjectivelist.txt", "verblist.txt") for w in wonderwords_list(name)})
    random.Random(seed).shuffle(merged)
    return tuple(merged)


@cache
def fallback_words() -> tuple[str, ...]:
    """cwe's words where a list needs more than wonderwords has: RULER then samples its whole list
    from a larger English word list (`json/english_words.json`, a Git LFS file not in its
    repository's text); ctxeval samples from the distinct lower-case words of the bundled
    haystack's books, sorted."""
    text = ruler_haystack_path().read_text(encoding="utf-8").lower()
    return tuple(sorted(set(re.findall(r"(?<![\w'-])[a-z]+(?![\w'-])", text))))


def cwe_capacity() -> int:
    """The most distinct words a cwe list can have: the larger of the two word lists."""
    return max(len(cwe_words(0)), len(fallback_words()))


def _cwe_list(rng: random.Random, seed: int, num_words: int, common_repeats: int, uncommon_repeats: int, common: int) -> tuple[str, list[str]]:
    """common_words_extraction.py's `get_example`: `num_words` distinct words from wonderwords,
    or from the fallback list where wonderwords has fewer, the first `common` repeated more."""
    words = cwe_words(seed)
    if num_words > len(words):
        words = fallback_words()
    if num_words > len(words):
        raise FieldError("lengths", f"a cwe list of {num_words} distinct words exceeds the fallback list's {len(words)}: choose a shorter {{name}}")
    chosen = rng.sample(words, num_words)
    top, rest = chosen[:common], chosen[common:]
    listed = top * common_repeats + rest * uncommon_repeats
    random.Random(seed).shuffle(listed)
    return " ".join(f"{i + 1}. {w}" for i, w in enumerate(listed)), top


def common_words(rng: random.Random, size: int, setting: Setting) -> Rendered:
    """One cwe sample of `size` distinct words: one worked example, a newline, the list and the
    question. Below 4,096 tokens RULER repeats the common words 6 times (the others once) with
    an example of 20 words; from 4,096 on, `freq_cw` and `freq_ucw` times with 40."""
    args, template = setting.args, CWE_TEMPLATE + CWE_ANSWER_PREFIX
    if setting.length < SHORT:
        example_shape, shape = (20, 3, 1), (6, 1)
    else:
        example_shape, shape = (40, 10, 3), (args["freq_cw"], args["freq_ucw"])
    example_context, example_answer = _cwe_list(rng, setting.seed, *example_shape, args["num_cw"])
    context, answer = _cwe_list(rng, setting.seed, size, *shape, args["num_cw"])
    example = template.format(context=example_context) + " " + " ".join(f"{i + 1}. {w}" for i, w in enumerate(example_answer))
    return Rendered(example + "\n" + template.format(context=context), tuple(answer))


def fwe_vocabulary_size(length: int) -> int:
    """fwe's vocabulary at a length, (length - 50) / 50 coded words; refused below 4 (the noise
    word and the three answers)."""
    size = (length - FWE_TOKENS) // 50
    if size < 4:
        need = FWE_TOKENS + 4 * 50
        raise FieldError("lengths", f"{length} is too short for fwe: its vocabulary of (length - {FWE_TOKENS}) / 50 coded words needs at least 4, "
                                    f"a length of {need} tokens, {need - length} more than {length}")
    return size


def fwe_vocabulary(rng: random.Random, setting: Setting) -> list[str]:
    """freq_words_extraction.py's coded words: random 6-letter words, sorted, shuffled with the
    seed; the most frequent is '...' (noise), the next three are the answer."""
    size, length = setting.args.get("vocab_size", -1), setting.args.get("coded_wordlen", 6)
    size = fwe_vocabulary_size(setting.length) if size == -1 else size
    vocab = ["".join(rng.choices(string.ascii_lowercase, k=length)) for _ in range(size)]
    while len(set(vocab)) < size:
        vocab.append("".join(rng.choices(string.ascii_lowercase, k=length)))
    vocab = sorted(set(vocab))
    random.Random(setting.seed).shuffle(vocab)
    vocab[0] = "..."
    return vocab


def frequent_words(rng: random.Random, size: int, setting: Setting) -> Rendered:
    """One fwe sample of `size` words: word k of the vocabulary appears int(size k^-alpha / zeta(alpha)) times."""
    from scipy.special import zeta  # imported when used: scipy is a third of the CLI's start-up
    vocab = fwe_vocabulary(rng, setting)
    k = np.arange(1, len(vocab) + 1)
    counts = (size * (k ** -setting.args["alpha"]) / zeta(setting.args["alpha"])).astype(int)
    words = [w for w, n in zip(vocab, counts) for _ in range(n)]
    random.Random(setting.seed).shuffle(words)
    return Rendered((FWE_TEMPLATE + FWE_ANSWER_PREFIX).format(context=" ".join(words)), tuple(vocab[1:4]))

