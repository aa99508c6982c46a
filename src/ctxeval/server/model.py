"""The served model as the routes see it: its names, tokenization rules and limits.

Token ids in a request are used verbatim. A string prompt is tokenized with special-token
strings read as those tokens (as vLLM and llama-cpp-python do) and, with `string_bos` "model",
gets BOS first when the model's tokenizer adds one (Gemma: `<bos>`); a string that already
starts with the BOS token gets no second one.
"""

from __future__ import annotations

import asyncio
import codecs
from concurrent.futures import Future

from ctxeval.backends.base import Scorer, SpecialTokens
from ctxeval.errors import FieldError
from ctxeval.server.errors import ApiError
from ctxeval.server.settings import ServerSettings
from ctxeval.server.worker import ModelWorker, QueueFull


class ServedModel:
    """A scorer behind its worker, with the checks every route shares."""

    def __init__(self, scorer: Scorer, settings: ServerSettings) -> None:
        if settings.n_ctx > scorer.info.n_ctx_train:
            raise FieldError("n_ctx", f"{settings.n_ctx} exceeds {scorer.info.name}'s training context of {scorer.info.n_ctx_train} tokens")
        self.scorer = scorer
        self.settings = settings
        self.info = scorer.info
        self.special: SpecialTokens = scorer.special_tokens()
        self.worker = ModelWorker(scorer, settings.max_queue, settings.batch_tokens)
        self._pieces: dict[int, bytes] = {}

    @property
    def generates(self) -> bool:
        """Whether the routes may generate: a request does not say where its context ends, which a
        model with a KV-cache press needs to know (it scores prompts, as for any model)."""
        return self.scorer.capabilities.generation and not self.scorer.compresses_context

    # --- names and limits ------------------------------------------------------------------
    def check_model(self, name: str | None) -> None:
        """A request may name the model by any served name, or not at all."""
        if name is not None and name not in self.settings.names:
            raise ApiError(404, f"The model `{name}` does not exist; this server serves {', '.join(self.settings.names)}", "model", "model_not_found")

    def check_k(self, value: int | None, field: str) -> None:
        if value is not None and value > self.settings.max_logprobs:
            raise ApiError(400, f"{field}: at most {self.settings.max_logprobs} alternatives per token (got {value}; see --max-logprobs)", field)

    def check_vocab(self, ids: list[int], field: str) -> None:
        vocab = self.info.vocab_size
        bad = next((t for t in ids if t >= vocab), None)
        if bad is not None:
            raise ApiError(400, f"{field}: token id {bad} is outside the vocabulary ({vocab} tokens)", field)

    def check_ids(self, ids: list[int], field: str, n_new: int) -> None:
        """Ids the model can read: in its vocabulary, and with `n_new` more within --n-ctx."""
        self.check_vocab(ids, field)
        if not ids:
            raise ApiError(400, f"{field}: no tokens to read (an empty string with --string-bos none)", field)
        if len(ids) + n_new > self.settings.n_ctx:
            raise ApiError(400, f"{field}: {len(ids)} prompt tokens + {n_new} to generate exceed this server's context of {self.settings.n_ctx} tokens (--n-ctx)", field)

    # --- tokens ----------------------------------------------------------------------------
    def string_ids(self, text: str) -> list[int]:
        """A string prompt's ids (module docstring)."""
        ids = self.scorer.tokenize_with_specials(text)
        bos = self.info.bos_id
        if self.settings.string_bos == "model" and bos is not None and ids[:1] != [bos]:
            ids = [bos, *ids]
        return ids

    def piece(self, token_id: int) -> bytes:
        """A token's bytes in running text (special tokens are empty)."""
        piece = self._pieces.get(token_id)
        if piece is None:
            piece = self._pieces[token_id] = self.scorer.token_bytes(token_id)
        return piece

    def token_text(self, token_id: int) -> str:
        """A token as the `tokens` of the legacy format give it: its own bytes, a partial UTF-8
        character dropped (as llama-cpp-python does, and ctxeval's openai backend compares)."""
        return self.piece(token_id).decode("utf-8", errors="ignore")

    def text(self, ids: list[int]) -> str:
        """The text of `ids` as running text (special tokens are empty)."""
        return b"".join(self.piece(t) for t in ids).decode("utf-8", errors="replace")

    def text_with_specials(self, ids: list[int]) -> str:
        """The text of `ids` with BOS and EOS written out (`<bos>`), as a Hugging Face tokenizer
        decodes them: tokenized again as a string prompt, it gives the same ids back, so a client
        that detokenizes a window beginning with BOS (lm-eval's untokenized requests) sends BOS."""
        written = {self.special.bos_id: self.special.bos_text, self.special.eos_id: self.special.eos_text}
        return b"".join(written[t].encode() if written.get(t) else self.piece(t) for t in ids).decode("utf-8", errors="replace")

    def offsets(self, ids: list[int], start: int = 0) -> list[int]:
        """Character offset of each token in the decoded text (a token that completes a
        character begun by the one before starts where that character starts)."""
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        out, position = [], start
        for t in ids:
            out.append(position)
            position += len(decoder.decode(self.piece(t)))
        return out

    # --- the worker ------------------------------------------------------------------------
    async def run(self, job) -> object:
        """Queue `job` for the model and wait for it; a full queue is a 429."""
        try:
            future: Future = self.worker.submit(job)
        except QueueFull:
            raise ApiError(429, f"the server is busy: {self.settings.max_queue} requests are waiting (--max-queue); retry later", None, "rate_limit_exceeded") from None
        return await asyncio.wrap_future(future)
