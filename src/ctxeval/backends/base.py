"""The scorer protocol every backend implements, and what a backend can and cannot measure."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from ctxeval.backends.logits import BlockScores
from ctxeval.errors import UserError

GREEDY = 0.0  # the temperature of a greedy continuation (every backend's default)
# asked after each generated token with every token generated so far: True ends generation there
# (a task whose score can no longer change stops paying for tokens)
Stop = Callable[[list[int]], bool]


@dataclass(frozen=True)
class Capabilities:
    """What a backend sees; the pipeline adapts to it and never pretends."""

    full_logits: bool  # exact ranks over the whole vocabulary
    max_top_k: int | None  # None = unlimited
    temperatures: bool  # log-probabilities at any temperature from the same pass
    generation: bool = False  # greedy continuation of token ids (`generate`), e.g. for retrieval probes


@dataclass(frozen=True)
class ModelInfo:
    """Identity of a loaded model, recorded in every run manifest."""

    name: str
    backend: str
    path: str
    sha256: str
    vocab_size: int
    n_ctx_train: int
    bos_id: int | None  # None: the model uses no BOS token
    details: dict[str, Any] = field(default_factory=dict)
    max_context: int | None = None  # a truncation control (`?max_context=N`): at most N tokens before a target

    @property
    def uses_bos(self) -> bool:
        return self.bos_id is not None


PassInput = tuple[np.ndarray, np.ndarray, np.ndarray]  # input ids, output positions, target ids


@dataclass(frozen=True)
class SpecialTokens:
    """The tokenizer's special tokens and chat template, as a server describes them to clients
    (vLLM's /tokenizer_info: lm-eval finds its prefix token from `bos_text`)."""

    bos_id: int | None
    bos_text: str | None
    eos_id: int | None
    eos_text: str | None
    chat_template: str | None


class ScorerBase(ABC):
    """The backend contract: every backend subclasses it. `tokenize`, `token_bytes` and `score`
    are required; every optional method has a default here or fails with a clear "this backend
    cannot ..." error, so callers never probe a scorer for what it has."""

    info: ModelInfo
    capabilities: Capabilities
    concurrency: int = 1  # passes it can usefully have in flight at once (an API: requests)
    batches: bool = False  # `score_batch` runs equal-length passes in one forward pass
    remote: bool = False  # it sends requests to a server (so `estimate` and `usage` say something)
    # a KV-cache press compresses every token before a pass's first scored position, and a
    # generation's first `context_end` ids
    compresses_context: bool = False

    @property
    def name(self) -> str:
        """The model's name, as records and manifests give it."""
        return self.info.name

    @abstractmethod
    def tokenize(self, text: str) -> list[int]:
        """Token ids of `text` without BOS or other special tokens."""

    @abstractmethod
    def token_bytes(self, token_id: int) -> bytes:
        """The exact UTF-8 bytes a token stands for in running text."""

    def token_text(self, token_id: int) -> bytes:
        """The token as its vocabulary spells it: `token_bytes`, except that a control token
        is its text (`<pad>`, `<unused0>`) where llama.cpp gives it no bytes in running text.
        Two models share a vocabulary when this agrees for every token id."""
        return self.token_bytes(token_id)

    @abstractmethod
    def score(self, input_ids: np.ndarray, output_positions: np.ndarray, target_ids: np.ndarray, top_k: int, temperatures: tuple[float, ...]) -> BlockScores:
        """One forward pass over `input_ids`; row i scores `target_ids[i]` from the logits
        at input position `output_positions[i]` (the position of the token before it). The
        planners pass whole windows (the last target is the last input token), as llama.cpp's
        own tools decode them."""

    def score_batch(self, passes: Sequence[PassInput], top_k: int, temperatures: tuple[float, ...]) -> list[BlockScores]:
        """Scores of several passes; by default one `score` each (a backend with `batches`
        runs equal-length passes together)."""
        return [self.score(*p, top_k, temperatures) for p in passes]

    def score_thesis(self, input_ids: np.ndarray, output_positions: np.ndarray, target_ids: np.ndarray, top_k: int, temperatures: tuple[float, ...],
                     n_compare: int, exhaustive: bool) -> ScheduledScores:
        """Score from the pass's first target (L tokens after its context start) on, with the
        thesis's context schedule; n_c comparisons, or n_c requests if `exhaustive`."""
        raise UserError(f"{self.info.name}: this backend cannot run the thesis API protocol (an openai: model in generate or chat mode can)")

    def generate(self, input_ids: np.ndarray, max_new_tokens: int, temperature: float = GREEDY, seed: int | None = None,
                 context_end: int | None = None, stop: Stop | None = None) -> list[int]:
        """Continuation of `input_ids` (Capabilities.generation): greedy at temperature 0, else
        sampled from the distribution at `temperature` with `seed`. `context_end`: how many
        leading ids (BOS included) are the context, the part a model that `compresses_context`
        compresses before the rest of the prompt and the generated tokens run against its cache;
        such a model requires it, a model that keeps its whole cache ignores it. `stop`, asked
        after every token, ends generation early (the tokens so far are what the longer
        generation starts with)."""
        raise UserError(f"{self.info.name}: this backend cannot generate text")

    def text_of(self, ids: Sequence[int]) -> str:
        """The text of token ids, their bytes joined (a UTF-8 character cut by the ends replaced)."""
        return b"".join(self.token_bytes(int(t)) for t in ids).decode("utf-8", errors="replace")

    def generate_text(self, input_ids: np.ndarray, max_new_tokens: int) -> str:
        """The greedy continuation as text (what a task's scorer reads, e.g. RULER's); an API
        model, which returns text and not token ids, answers this one."""
        return self.text_of(self.generate(input_ids, max_new_tokens))

    def tokenize_with_specials(self, text: str) -> list[int]:
        """Token ids of `text` where special-token strings (`<bos>`, `<start_of_turn>`) are those
        tokens, as chat templates and Hugging Face tokenizers read them; no BOS added."""
        raise UserError(f"{self.info.name}: this backend has no tokenizer of special tokens")

    def special_tokens(self) -> SpecialTokens:
        """BOS, EOS and the chat template of the model's tokenizer."""
        raise UserError(f"{self.info.name}: this backend does not describe its special tokens")

    def score_stepwise(
        self, prompt_ids: np.ndarray, continuation_ids: np.ndarray, top_k: int, temperatures: tuple[float, ...], context_end: int | None = None
    ) -> BlockScores:
        """Teacher-forced scores of a continuation computed on generation's own kernel path
        (one token per step), so a greedy chain read from them is what `generate` produces
        (`context_end` as there)."""
        raise UserError(f"{self.info.name}: this backend cannot score on its generation path")

    def score_then_generate(self, prompt_ids: np.ndarray, continuation_ids: np.ndarray, max_new_tokens: int, top_k: int,
                            temperatures: tuple[float, ...], context_end: int | None = None, stop: Stop | None = None) -> tuple[BlockScores, list[int] | None]:
        """`score_stepwise`, and the greedy generation of `max_new_tokens` (or until `stop`) when
        the greedy chain leaves the continuation (None when it does not: generation reproduces the continuation)."""
        scores = self.score_stepwise(prompt_ids, continuation_ids, top_k, temperatures, context_end=context_end)
        if np.array_equal(scores.greedy_id, np.asarray(continuation_ids)):
            return scores, None
        return scores, self.generate(prompt_ids, max_new_tokens, context_end=context_end, stop=stop)

    def logit_blocks(self, input_ids: np.ndarray, output_positions: np.ndarray, max_rows: int) -> Iterator[np.ndarray]:
        """The full-vocabulary float32 logits at `output_positions` (strictly increasing), in
        order, as blocks of at most `max_rows` rows [rows, vocab_size] from one forward pass
        over `input_ids`. A block may be a view of the backend's own buffer: it is valid until
        the next block is requested, and is read, never written (`ctxeval diff` compares two
        models' blocks in lockstep and keeps no logits)."""
        raise UserError(f"{self.info.name}: this backend cannot give full-vocabulary logits (a .gguf or hf: model can)")

    def prepare(self, max_input_len: int) -> None:
        """Size whatever the backend allocates per input length once, for the longest input;
        a backend with nothing to size does nothing."""

    @property
    def api_mode(self) -> str | None:
        """The API path chosen so far (prompt, generate or chat; None: not yet probed, or not an API)."""
        return None

    def estimate(self, n_input: int, n_targets: int) -> tuple[int, int, int]:
        """Upper bounds (requests, prompt tokens, completion tokens) of one pass, sent nothing."""
        raise UserError(f"{self.info.name}: this backend cannot estimate requests: it sends none")

    def estimate_thesis(self, length: int, n_targets: int, n_compare: int, exhaustive: bool) -> tuple[int, int, int]:
        """Upper bounds (requests, prompt tokens, completion tokens) of one thesis pass."""
        raise UserError(f"{self.info.name}: this backend cannot estimate requests: it sends none")

    def describe(self) -> dict:
        """The model's identity and what its backend can measure, as a run manifest records them."""
        return asdict(self.info) | {"capabilities": asdict(self.capabilities)}

    def usage(self) -> dict:
        """Requests and tokens this scorer sent since it was loaded (empty for a backend that sends none)."""
        return {}

    def close(self) -> None:
        """Release the model (a backend holding nothing releasable does nothing)."""


Scorer = ScorerBase  # the name callers annotate with


@dataclass
class ScheduledScores:
    """Scores of a pass whose scorer chose the contexts (the thesis's API protocol): rows are the
    pass's consecutive targets from its first, as many as were scored, and `context_len` is
    the number of text tokens each actually saw."""

    scores: BlockScores
    context_len: np.ndarray  # int64 [n]
