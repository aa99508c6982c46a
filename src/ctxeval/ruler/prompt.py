"""The text a model is given for a RULER sample, and its token ids.

Without a chat template the prompt is RULER's `base` template: the input and the answer prefix.
With `--chat-template` it is what RULER's published runs send: the model's template applied to
the input as the user's message with the generation prompt, then the answer prefix (RULER's
prepare.py: `model_template.format(task_template=...) + answer_prefix`). The template is
rendered with an empty BOS text, since the BOS id is prepended to every prompt as without a
template, and its text is tokenized with special tokens read as such.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ctxeval.backends.base import Scorer
from ctxeval.backends.chat_template import ChatTemplateRefused, apply_chat_template
from ctxeval.errors import FieldError, UserError
from ctxeval.ruler.tasks import TASKS, split_answer_prefix


@dataclass(frozen=True)
class ChatTemplate:
    """A model's own chat template (Jinja) and the EOS text it may write (picklable)."""

    template: str
    eos_text: str = ""

    def wrap(self, task: str, prompt: str) -> str:
        """RULER's prompt with the input as the user's turn and the answer prefix after the generation prompt."""
        text, answer_prefix = split_answer_prefix(TASKS[task].family, prompt)
        try:
            head = apply_chat_template(self.template, [{"role": "user", "content": text}], eos_text=self.eos_text)
        except ChatTemplateRefused as exc:
            raise UserError(f"the model's chat template refused a RULER prompt: {exc}") from None
        return head + answer_prefix


def model_chat_template(scorer: Scorer) -> ChatTemplate:
    """The model's own chat template; refused for a model without one and for a pressed model."""
    name = scorer.info.name
    if scorer.compresses_context:
        raise FieldError("chat_template", f"{{name}} is not offered with a KV press ({name}): a pressed model is given RULER's base prompt")
    special = scorer.special_tokens()
    if not special.chat_template:
        raise FieldError("chat_template", f"{{name}}: {name} has no chat template")
    return ChatTemplate(special.chat_template, special.eos_text or "")


def model_text(task: str, prompt: str, chat: ChatTemplate | None) -> str:
    """The text the model is given for a rendered RULER prompt."""
    return prompt if chat is None else chat.wrap(task, prompt)


def text_ids(scorer: Scorer, text: str, chat: ChatTemplate | None) -> list[int]:
    """The model text's ids (no BOS): a template's special-token strings are those tokens."""
    return scorer.tokenize(text) if chat is None else scorer.tokenize_with_specials(text)


def token_counter(scorer: Scorer, task: str, chat: ChatTemplate | None) -> Callable[[str], int]:
    """Counts a rendered prompt of `task` in the model's tokens as it is given (RULER's rule: no BOS)."""
    return lambda prompt: len(text_ids(scorer, model_text(task, prompt, chat), chat))
