"""L-Eval's exam-style exact match for closed-ended tasks (``Evaluation/auto_eval.py`` + ``em.py``).

L-Eval first extracts an answer from the free-text output with task-specific rules, then
scores it against the (also processed) reference:

- multiple choice (coursera, quality, tpo): letters A–D; 1 if the letter strings are equal,
  **0.25 partial credit** if the predicted letters are a subset of the correct ones;
- gsm100: the number after "The answer is", else the last number of the first paragraph,
  compared as numbers;
- codeU: the last (or after "the final output", the first) len(ref)+3 words of the output must
  contain the reference;
- topic_retrieval_longchat: the reference must be contained in the output; rows cycle through
  first/second/third topic and the score is the mean of the three groups' scores;
- sci_fi: "loyalty [fact: truth]" — both parts scored, the score is their mean.

The rules are reproduced including their quirks (e.g. codeU deletes every "is" substring, an
empty multiple-choice output is read as "None" and scores 0 — auto_eval.py since 2024-07-09 —
and an unreadable one is read as "A"), because the published numbers depend on them. Which
rule applies is decided, as in L-Eval, by the task name containing the task's key.
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence

CHOICE_TASKS = ("coursera", "quality", "tpo")
_CHOICES = "ABCD"
_ASCII_PUNCT = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_OPTION_LETTER = re.compile(r"\s*[A-Z](?=[\s.)])")


def em_normalize(text: str) -> str:
    """L-Eval em.py's normalisation: drop ASCII punctuation and the (lower-case) articles,
    collapse whitespace. Unlike F1 it does not lower-case, so option letters stay capitals."""
    text = "".join(ch for ch in text if ch not in _ASCII_PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, reference: str) -> float:
    """Score of one processed answer, as em.py's exact_match_score: 1, 0.25 (multiple choice:
    another string whose set of characters is a subset of the reference's, e.g. "A" or "" for
    "AC", "AB" for "BA") or 0.

    A reference made only of letters A–D is multiple choice; any other reference is compared as
    a number when both sides parse as one, else by containment ignoring case and spaces."""
    ref = em_normalize(reference)
    if all(ch in _CHOICES for ch in ref):
        pred = em_normalize(prediction)
        if pred == ref:
            return 1.0
        return 0.25 if set(pred) <= set(ref) else 0.0
    try:
        return float(float(prediction) == float(reference))
    except ValueError:
        return float(reference.lower().replace(" ", "") in prediction.lower().replace(" ", ""))


def choice_reference(reference: str) -> str:
    """Option letters of a multiple-choice reference: its first word with everything but A–D
    removed ("(B) Their subconscious..." -> "B"); "A" when none is left."""
    letters = re.sub(r"[^A-D]", "", reference.split()[0]) if reference.split() else ""
    return letters or "A"


def choice_prediction(output: str, multiple: bool) -> str:
    """Option letters L-Eval reads from an output.

    Single-answer tasks take the first capital A–D anywhere. Multi-answer tasks (coursera) take
    a leading run of letters ("AC ..."), else the letters standing alone before a space, "." or
    ")" up to the word "Question", else the first run of letters. Empty output -> "None"
    (never correct); nothing readable -> "A" (L-Eval's random guess)."""
    if not output.strip():
        return "None"
    if output in _CHOICES:  # a substring of "ABCD": "A", "BC", "ABCD"
        return output
    if not multiple:
        for ch in output:
            if ch in _CHOICES:
                return ch
    lead = len(output) - len(output.lstrip(_CHOICES))
    letters, rest = output[:lead], output[lead:]
    if len(letters) > 1:
        return "".join(sorted(set(letters)))
    rest = rest.split("Question")[0]
    letters += " ".join(_OPTION_LETTER.findall(rest)).strip()
    letters = "".join(sorted(set(re.sub(r"[^A-D]", "", letters))))
    if not letters:
        match = re.search(f"[{_CHOICES}]+", rest)
        letters = match.group(0) if match else ""
    return letters or "A"


def math_answer(text: str) -> str:
    """The digits of a GSM answer: the token after "The answer is", else the last word holding
    a digit in the first paragraph; digits kept up to the first "." ("$1,250.50" -> "1250")."""
    match = re.search(r"The answer is (\S+)", text)
    if match:
        word = match.group(1)
    else:
        words = text.split("\n\n")[0].split(" ")
        word = next((w for w in reversed(words) if any(ch.isdigit() for ch in w)), "")
    digits = ""
    for ch in word:
        if ch.isdigit():
            digits += ch
        if ch == ".":
            break
    return digits


def code_reference(text: str) -> str:
    """codeU reference clean-up: one space for any whitespace run, drop commas, quotes,
    backslashes and ".0", close up nested brackets."""
    text = re.sub(r"\s+", " ", text)
    for old, new in ((",", ""), ("'", ""), ("\\", ""), (".0", ""), ("] [", "]["), ("[ [", "[["), ("] ]", "]]")):
        text = text.replace(old, new)
    return text


def code_prediction(output: str, reference: str) -> str:
    """codeU output window: after the reference clean-up and deletion of filler phrases, the
    len(reference words)+3 words after the last "the final output", else the last ones."""
    width = len(reference.split()) + 3
    text = code_reference(output)
    for filler in ("will be", "of the code", "is", "would be", "the value of", "the result of", "printed"):
        text = text.replace(filler, "")
    if "the final output" in text:
        return " ".join(re.split(r"\s+", text.split("the final output")[-1])[:width])
    return " ".join(re.split(r"\s+", text)[-width:])


def judge_reference(text: str) -> tuple[str, str]:
    """sci_fi reference "True [fact: False]" -> ("true", "false"): loyalty to the document and
    real-world fact. The fact part ends one character early (its closing bracket); without a
    "[fact:" part the fact is "" (L-Eval would stop with an error)."""
    parts = text.lower().split("[fact:")
    fact = parts[1][:-1] if len(parts) > 1 else ""
    return parts[0].strip(), fact.strip()


def judge_prediction(output: str) -> tuple[str, str]:
    """sci_fi output -> (loyalty, fact), each the first of true/false found in its part's
    words, or "<error>" (never correct; L-Eval does no random guess here)."""
    parts = judge_reference(output)
    found = []
    for part in parts:
        verdict = "<error>"
        for word in part.split():
            if "true" in word:
                verdict = "true"
                break
            if "false" in word:
                verdict = "false"
                break
        found.append(verdict)
    return found[0], found[1]


def _mean_em(predictions: Sequence[str], references: Sequence[str]) -> float:
    return 100.0 * sum(exact_match(p, r) for p, r in zip(predictions, references, strict=True)) / len(predictions)


def exam_score(task: str, outputs: Sequence[str], references: Sequence[str], indices: Sequence[int]) -> float:
    """Exact match ×100 of a closed-ended task, with L-Eval's per-task answer extraction.

    `indices` are the rows' positions in their file: topic retrieval groups rows by index mod 3
    (first/second/third topic) and averages the groups' scores."""
    if not outputs:
        raise ValueError("no rows to score")
    if any(key in task for key in CHOICE_TASKS):
        multiple = "coursera" in task
        return _mean_em([choice_prediction(o, multiple) for o in outputs], [choice_reference(r) for r in references])
    if "gsm" in task:
        return _mean_em([math_answer(o) for o in outputs], [math_answer(r) for r in references])
    if "codeU" in task:
        return _mean_em([code_prediction(o, r) for o, r in zip(outputs, references)], [code_reference(r) for r in references])
    if "topic_retrieval_longchat" in task:
        groups = [[k for k, i in enumerate(indices) if i % 3 == g] for g in range(3)]
        if any(not g for g in groups):
            raise ValueError("topic retrieval needs rows for the first, second and third topic")
        return sum(_mean_em([outputs[k] for k in g], [references[k] for k in g]) for g in groups) / 3
    if "sci_fi" in task:
        preds = [judge_prediction(o) for o in outputs]
        refs = [judge_reference(r) for r in references]
        loyalty = _mean_em([p[0] for p in preds], [r[0] for r in refs])
        fact = _mean_em([p[1] for p in preds], [r[1] for r in refs])
        return (loyalty + fact) / 2
    return _mean_em(outputs, references)
