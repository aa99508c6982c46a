"""Request bodies of the OpenAI-compatible routes (validated by pydantic: a wrong type or
value is answered 400 with the field's name, never a 500)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr

from ctxeval.backends.openai_options import OPENAI_TEMPERATURE

TokenIds = Annotated[list[Annotated[StrictInt, Field(ge=0)]], Field(min_length=1)]
Prompt = StrictStr | Annotated[list[StrictStr], Field(min_length=1)] | TokenIds | Annotated[list[TokenIds], Field(min_length=1)]
Stop = StrictStr | list[StrictStr] | None
Temperature = Annotated[StrictFloat | StrictInt, Field(ge=0, le=2)]


class Request(BaseModel):
    """Unknown fields are ignored (clients add their own); known ones are checked strictly."""

    model_config = ConfigDict(extra="ignore")


class Sampling(Request):
    """What both generating routes take: the sampling settings (one completion, not streamed)."""

    temperature: Temperature | None = OPENAI_TEMPERATURE
    seed: StrictInt | None = None
    stop: Stop = None
    n: Literal[1] = 1
    top_p: Literal[1] = 1
    stream: Literal[False] = False


class CompletionRequest(Sampling):
    """POST /v1/completions (OpenAI's legacy completions, with vLLM's `prompt_logprobs`)."""

    model: StrictStr | None = None
    prompt: Prompt
    max_tokens: Annotated[StrictInt, Field(ge=0)] | None = 16
    echo: StrictBool = False
    logprobs: Annotated[StrictInt, Field(ge=0)] | None = None
    prompt_logprobs: Annotated[StrictInt, Field(ge=0)] | None = None
    presence_penalty: Literal[0] = 0
    frequency_penalty: Literal[0] = 0


class Message(Request):
    role: Literal["system", "user", "assistant"]
    content: StrictStr


class ChatRequest(Sampling):
    """POST /v1/chat/completions: the model's chat template, then generation."""

    model: StrictStr | None = None
    messages: Annotated[list[Message], Field(min_length=1)]
    max_tokens: Annotated[StrictInt, Field(ge=1)] | None = None
    max_completion_tokens: Annotated[StrictInt, Field(ge=1)] | None = None
    logprobs: StrictBool = False
    top_logprobs: Annotated[StrictInt, Field(ge=0)] | None = None


class TokenizeRequest(Request):
    """POST /tokenize (vLLM's): `add_special_tokens` adds BOS as the model's tokenizer does."""

    model: StrictStr | None = None
    prompt: StrictStr
    add_special_tokens: StrictBool = True


class DetokenizeRequest(Request):
    model: StrictStr | None = None
    tokens: list[Annotated[StrictInt, Field(ge=0)]]


class ExtrasTokenizeRequest(Request):
    """POST /extras/tokenize (llama-cpp-python's): BOS first as for a string prompt."""

    model: StrictStr | None = None
    input: StrictStr
