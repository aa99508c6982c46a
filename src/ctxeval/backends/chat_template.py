"""A model's own chat template (Jinja, from its GGUF or tokenizer) applied to a conversation:
one sandboxed renderer for every caller (the server's chat route, RULER's `--chat-template`)."""

from __future__ import annotations

from functools import cache

from jinja2.exceptions import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment


class ChatTemplateRefused(ValueError):
    """The template raised (e.g. its `raise_exception` on a role order it does not accept)."""


def apply_chat_template(template: str, messages: list[dict], bos_text: str = "", eos_text: str = "") -> str:
    """The conversation as the template writes it, ready for the assistant's turn."""

    def raise_exception(message: str):
        raise TemplateError(message)

    try:
        return _compiled(template).render(messages=messages, bos_token=bos_text, eos_token=eos_text,
                                          add_generation_prompt=True, raise_exception=raise_exception)
    except TemplateError as exc:
        raise ChatTemplateRefused(str(exc)) from None


@cache
def _compiled(template: str):
    return ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True).from_string(template)
