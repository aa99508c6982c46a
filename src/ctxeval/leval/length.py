"""Length-instruction-enhanced (LIE) evaluation: tell the model how long the reference is, and
measure how far its output's length is off (ΔL).

L-Eval exposes N = the number of words of the reference (``len(reference.split())``) after the
instruction. Its generation scripts use two wordings and the paper a third, all kept here:

- ``suggested`` (default; turbo-16k, vicuna, longchat, mpt; the wording in the shared
  prediction files): ``<instruction> The suggested output length is around N words.``
- ``answer-with`` (llama2-chat, chatglm2, claude, xgen scripts):
  ``<instruction> \\nAnswer this question with N words.``
- ``paper`` (the paper's example, Section 4.1, with a full stop):
  ``<instruction> We need a N-word summary.``

The default is a script's wording because the published prediction files, whose scores users
compare against, were generated with the scripts, not with the paper's sentence.
"""

from __future__ import annotations

from collections.abc import Sequence

from ctxeval.errors import UserError
from ctxeval.metrics.ngram import word_count

LENGTH_STYLES = {
    "suggested": "The suggested output length is around {n} words.",
    "answer-with": "\nAnswer this question with {n} words.",
    "paper": "We need a {n}-word summary.",
}
# System prompt of L-Eval's open-ended tasks (Baselines/LEval_config.py).
SYSTEM_PROMPT = (
    "Now you are given a very long document. Please follow the instruction after this document. These instructions "
    "may include summarizing a document, answering questions based on the document, or writing a required paragraph. "
)


def length_instruction(reference: str, style: str = "suggested") -> str:
    """The sentence that tells the model the reference's length in words."""
    if style not in LENGTH_STYLES:
        raise UserError(f"unknown length-instruction style {style!r}; choose one of {', '.join(LENGTH_STYLES)}")
    return LENGTH_STYLES[style].format(n=word_count(reference))


def add_length_instruction(instruction: str, reference: str, style: str = "suggested") -> str:
    """The instruction followed by a space and the length instruction, as L-Eval builds it."""
    return f"{instruction} {length_instruction(reference, style)}"


def leval_prompt(document: str, instruction: str, reference: str | None, style: str | None = "suggested") -> str:
    """L-Eval's open-ended prompt (turbo-16k script: system prompt, document, instruction,
    "Output: "), with the length instruction after the instruction when `style` is given."""
    if style is not None:
        if reference is None:
            raise UserError("a length instruction needs the reference answer")
        instruction = add_length_instruction(instruction, reference, style)
    return SYSTEM_PROMPT + f"Document is as follows. {document} Instruction: {instruction} Output: "


def length_difference(output: str, references: Sequence[str], tokenize: str = "plain") -> float:
    """ΔL of one answer: its words minus the reference's words (mean over several references),
    counted as `metrics.ngram.word_count` does for the tokenisation."""
    return word_count(output, tokenize) - sum(word_count(r, tokenize) for r in references) / len(references)
