"""Prompt templates: the aspect prompts of GPTScore (the PPLqa paper's "with prompt" variant)
and the G-Eval form-filling prompt.

Every template ends where the scored text begins, so the answer (or the G-Eval score token)
is always a continuation of a prefix and is tokenized on its own (see evaluator.py).
"""

from __future__ import annotations

from ctxeval.errors import UserError

# How the question and the answer are joined for PPL(q ⊕ a) and prompt-free GPTScore.
QA_SEPARATOR = "\n\n"

# GPTScore's dialogue aspects (Fu et al. 2023, Table 12; the "diag" task). The PPLqa paper
# quotes the coherence one.
ASPECTS: dict[str, str] = {
    "coherence": "Is the AI coherent and maintains a good conversation flow throughout the conversation?",
    "diversity": "Is there diversity in the AI responses?",
    "flexibility": "Is the AI flexible and adaptable to human and their interests?",
    "understandability": "Does the AI seem to understand the human?",
    "inquisitiveness": "Is the AI inquisitive throughout the conversation?",
    "informativeness": "Are the responses of AI informative throughout the conversation?",
    "likeability": "Does the AI display a likeable personality?",
    "depth": "Does the AI discuss topics in depth?",
}

# The PPLqa paper's example: "Answer the question based on the conversation between a human and
# AI. Question: <aspect> (a) Yes. (b) No. Conversation: human:{question} AI:{answer}."
ASPECT_TEMPLATE = (
    "Answer the question based on the conversation between a human and AI.\n"
    "Question: {aspect} (a) Yes. (b) No.\n"
    "Conversation: human: {question}\n"
    "AI: "
)

# G-Eval (Liu et al. 2023) form-filling prompt: task, criteria, the text, then
# "Evaluation Form (scores ONLY)" so that the next token is the score. The criterion is the
# aspect wording above (the PPLqa paper shows no G-Eval prompt of its own).
GEVAL_TEMPLATE = (
    "You will be given a question asked by a human and the answer of an AI assistant.\n\n"
    "Your task is to rate the answer on one metric.\n\n"
    "Evaluation Criteria:\n\n"
    "{name} (1-5) - {aspect} 1 is the worst, 5 is the best.\n\n"
    "Question:\n\n{question}\n\n"
    "Answer:\n\n{answer}\n\n"
    "Evaluation Form (scores ONLY):\n\n"
    "- {name}: "
)


def check_aspect(aspect: str | None) -> None:
    if aspect is not None and aspect not in ASPECTS:
        raise UserError(f"unknown aspect {aspect!r}: choose one of {', '.join(ASPECTS)}")


def qa_prefix(question: str, aspect: str | None) -> str:
    """The text before the answer: the bare question, or the aspect prompt around it."""
    if aspect is None:
        return question.rstrip() + QA_SEPARATOR
    check_aspect(aspect)
    return ASPECT_TEMPLATE.format(aspect=ASPECTS[aspect], question=question.strip())


def geval_prompt(question: str, answer: str, aspect: str = "coherence") -> str:
    """The G-Eval prompt; the evaluator's next token is read as the 1-5 score."""
    check_aspect(aspect)
    return GEVAL_TEMPLATE.format(name=aspect.capitalize(), aspect=ASPECTS[aspect], question=question.strip(), answer=answer.strip())
