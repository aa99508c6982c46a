"""GGUF models through llama.cpp (llama-cpp-python's low-level API).

Logits are requested only at target positions (the batch's per-token logits flags, never
`logits_all`), the input is decoded in batches of `n_batch` tokens, and each batch's logits are
scored in place from llama.cpp's own output buffer, so memory stays bounded by
`n_batch x vocab` floats however long the context. Flash attention is off (unless a model
option turns it on: backends/model_options.py), so a score does not depend on how the input
was split into batches.

`score_batch` packs several passes into one decode stream (a context with `n_seq_max` > 1 and
a KV cache split per sequence, not unified): each pass is its own sequence (its own seq_id,
positions from 0, its own KV range), the tokens of all of them fill each `n_batch` batch, and
logits are flagged only at target rows. Short passes (the exact sweep's L+1 tokens) then fill the
batches instead of running one nearly empty decode each (docs/gpu.md: measured agreement).
"""

from __future__ import annotations

import ctypes
import logging
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from ctxeval.backends.base import GREEDY, Capabilities, ModelInfo, PassInput, ScorerBase, SpecialTokens, Stop
from ctxeval.backends.cores import free_cores
from ctxeval.backends.llamacpp_prefix import PrefixCache
from ctxeval.backends.logits import BlockScores, pick_token, score_block
from ctxeval.backends.model_files import file_identity, file_sha256
from ctxeval.backends.model_options import LlamaCppOptions
from ctxeval.errors import UserError

DEFAULT_N_BATCH = 512
# a packed decode stream holds at most this many passes and tokens (the KV cache it needs)
MAX_PACK_SEQS = 16
PACK_TOKENS = 4096  # a good `pack_tokens` when packing is wanted
# Off by default: packed and unpacked passes take different kernel paths in llama.cpp and
# differ by up to 0.07 nats on Gemma 3 270M (docs/gpu.md), more than float rounding.
DEFAULT_PACK_TOKENS = 0  # 0: no packing, every pass decoded alone

# One pass to score: input ids, positions whose logits are scored, target ids.


def _amx_build(llama_cpp) -> bool:
    """Whether this llama.cpp build uses Intel AMX kernels.

    llama-cpp-python 0.3.36 built with -march=native on an AMX CPU segfaults in
    ggml_backend_amx_mul_mat on Gemma 3; AMX is an "extra buffer type", so such builds run
    with extra buffer types (AMX and weight repacking) switched off.
    """
    return b"AMX_INT8 = 1" in llama_cpp.llama_print_system_info()


def load_llama_without_amx_buffers(llama_cpp) -> None:
    """Make models loaded through `llama_cpp.Llama` (llama-cpp-python's server in bench/bench_serve.py, the naive
    peer of bench/bench_scoring.py) skip extra buffer types on AMX builds, as this backend does."""
    if not _amx_build(llama_cpp):
        return
    low_level = llama_cpp.llama_cpp  # the module llama_cpp.Llama calls into
    default_params = low_level.llama_model_default_params

    def params_without_extra_bufts():
        params = default_params()
        params.use_extra_bufts = False
        return params

    low_level.llama_model_default_params = params_without_extra_bufts


_VOCABULARIES: dict[tuple[str, int, int, int], object] = {}
_VOCABULARIES_LOCK = threading.Lock()


def _vocabulary(llama_cpp, llama_model: type, path: Path):
    """The vocabulary-only llama.cpp model of a GGUF file, loaded once per file and process:
    the variants of one model in a run (a press, a `max_context` control), an API model's
    tokenizer and the scorer share it (loading Gemma 3's 262,144-token vocabulary takes 0.4 s
    and 40 MB; tokenizing reads it only)."""
    key = file_identity(path)
    with _VOCABULARIES_LOCK:
        if key not in _VOCABULARIES:
            params = llama_cpp.llama_model_default_params()
            params.vocab_only = True
            try:
                _VOCABULARIES[key] = llama_model(path_model=str(path), params=params, verbose=False)
            except (ValueError, RuntimeError) as exc:
                raise UserError(f"cannot load GGUF model {path}: {exc}") from None
        return _VOCABULARIES[key]


class LlamaCppScorer(ScorerBase):
    """Scorer for one GGUF file; the inference context is sized on first use by `prepare`."""

    capabilities = Capabilities(full_logits=True, max_top_k=None, temperatures=True, generation=True)

    def __init__(
        self,
        path: Path,
        name: str,
        n_threads: int | None = None,
        n_batch: int = DEFAULT_N_BATCH,
        pack_tokens: int = DEFAULT_PACK_TOKENS,
        options: LlamaCppOptions = LlamaCppOptions(),
    ) -> None:
        import llama_cpp
        from llama_cpp._internals import LlamaModel

        logging.getLogger("llama-cpp-python").setLevel(logging.ERROR)  # llama.cpp's info logs
        self._lib = llama_cpp
        self._extra_bufts = not _amx_build(llama_cpp)
        self._path = path
        self._n_threads = options.threads or n_threads or free_cores()
        self._n_batch = options.n_batch or n_batch
        self._pack_tokens = pack_tokens
        self._options = options
        self.batches = pack_tokens > 0  # packing is off by default (docs/gpu.md: it moves scores)
        # The vocabulary alone (no inference context) serves tokenization and model facts.
        self._vocab_model = _vocabulary(llama_cpp, LlamaModel, path)
        self._vocab = self._vocab_model.vocab
        model = self._vocab_model.model
        metadata = self._vocab_model.metadata()
        architecture = metadata.get("general.architecture", "")
        add_bos = bool(llama_cpp.llama_vocab_get_add_bos(self._vocab))
        self.info = ModelInfo(
            name=name,
            backend="llamacpp",
            path=str(path),
            sha256=file_sha256(path),
            vocab_size=int(llama_cpp.llama_vocab_n_tokens(self._vocab)),
            n_ctx_train=int(metadata.get(f"{architecture}.context_length", 0)) or int(llama_cpp.llama_model_n_ctx_train(model)),
            bos_id=int(llama_cpp.llama_vocab_bos(self._vocab)) if add_bos else None,
            details={
                "architecture": architecture,
                "model_name": metadata.get("general.name"),
                "file_type": metadata.get("general.file_type"),
                "n_params": int(llama_cpp.llama_model_n_params(model)),
                "llama_cpp_python": llama_cpp.__version__,
                "n_threads": self._n_threads,
                "n_batch": self._n_batch,
                "pack_tokens": pack_tokens,
                "pack_max_sequences": MAX_PACK_SEQS,
                "extra_buffer_types": self._extra_bufts,
                "flash_attention": options.flash_attn,
                "prefix_reuse": options.prefix_reuse,
                "kv_cache_type": options.type_k if options.type_k == options.type_v else f"k {options.type_k}, v {options.type_v}",
                "rope_freq_scale": options.rope_freq_scale,
                "rope_freq_base": options.rope_freq_base,
            },
        )
        self._model = None
        self._ctx = None
        self._batch = None
        self._prefix: PrefixCache | None = None
        self._n_ctx = 0
        self._packed_ctx = None
        self._packed_batch = None
        self._packed_n_ctx = 0

    # --- tokenizer -------------------------------------------------------------------------
    def tokenize(self, text: str) -> list[int]:
        """llama.cpp's tokens of `text`, in one call: llama-cpp-python's own `tokenize` sizes its
        buffer to the training context and tokenizes a longer text twice (a book: twice the
        seconds); a text of n bytes has at most n tokens."""
        data = text.encode("utf-8")
        buffer = (self._lib.llama_token * (len(data) + 1))()
        n = self._lib.llama_tokenize(self._vocab, data, len(data), buffer, len(buffer), False, False)
        if n < 0:
            raise RuntimeError(f"llama.cpp could not tokenize a text of {len(data)} bytes ({n})")
        return np.frombuffer(buffer, dtype=np.int32, count=n).tolist()

    def token_bytes(self, token_id: int) -> bytes:
        return self._piece(token_id, special=False)

    def token_text(self, token_id: int) -> bytes:
        return self._piece(token_id, special=True)

    def _piece(self, token_id: int, special: bool) -> bytes:
        """llama.cpp's piece of a token; `special`: a control token as its text (`<bos>`)
        rather than the empty piece it is in running text."""
        size = 64
        while True:
            buf = ctypes.create_string_buffer(size)
            n = self._lib.llama_token_to_piece(self._vocab, token_id, buf, size, 0, special)
            if n >= 0:
                return buf.raw[:n]
            size = -n

    def tokenize_with_specials(self, text: str) -> list[int]:
        return self._vocab_model.tokenize(text.encode("utf-8"), add_bos=False, special=True)

    def special_tokens(self) -> SpecialTokens:
        lib, vocab = self._lib, self._vocab
        bos, eos = int(lib.llama_vocab_bos(vocab)), int(lib.llama_vocab_eos(vocab))
        template = self._vocab_model.metadata().get("tokenizer.chat_template")
        return SpecialTokens(
            bos_id=bos if bos >= 0 else None,
            bos_text=self._special_text(bos) if bos >= 0 else None,
            eos_id=eos if eos >= 0 else None,
            eos_text=self._special_text(eos) if eos >= 0 else None,
            chat_template=template,
        )

    def _special_text(self, token_id: int) -> str:
        """A special token as text (`<bos>`), not the empty piece it is in running text."""
        return self.token_text(token_id).decode("utf-8", errors="replace")

    # --- inference -------------------------------------------------------------------------
    def prepare(self, max_input_len: int) -> None:
        """Create (or grow) the inference context for inputs of up to `max_input_len` tokens."""
        if max_input_len > self.info.n_ctx_train:
            raise UserError(
                f"a window of {max_input_len} tokens exceeds {self.info.name}'s training context of "
                f"{self.info.n_ctx_train} tokens"
            )
        if self._ctx is not None and max_input_len <= self._n_ctx:
            return
        from llama_cpp._internals import LlamaBatch, LlamaContext

        self._close_context()
        n_ctx = min(self.info.n_ctx_train, -(-max_input_len // 256) * 256)
        self._ctx = LlamaContext(model=self._load_model(), params=self._context_params(n_ctx, 1), verbose=False)
        self._n_ctx = n_ctx
        self._batch = LlamaBatch(n_tokens=self._n_batch, embd=0, n_seq_max=1, verbose=False)
        window = self._lib.llama_model_n_swa(self._model.model)
        ring = min(n_ctx, -(-(window + self._n_batch) // 256) * 256)  # llama.cpp's sliding-window cache with swa_full off
        self._prefix = PrefixCache(self._lib, self._ctx.ctx, self._n_batch, window, ring, self._options.prefix_reuse)

    def _prepare_packed(self, max_input_len: int) -> None:
        """Create (or grow) the packed context: MAX_PACK_SEQS sequences, each with its own KV
        range of `_packed_n_ctx` cells. A unified KV cache (one buffer for all sequences) moved
        Gemma 3 270M log-probabilities by up to 0.25 nats against unpacked passes; per-sequence
        ranges keep each sequence's attention shaped as in an unpacked pass (docs/gpu.md)."""
        if self._packed_ctx is not None and max_input_len <= self._packed_n_ctx:
            return
        from llama_cpp._internals import LlamaBatch, LlamaContext

        self._close_packed()
        n_ctx_seq = min(self.info.n_ctx_train, -(-max_input_len // 256) * 256)
        params = self._context_params(n_ctx_seq * MAX_PACK_SEQS, MAX_PACK_SEQS)
        params.kv_unified = False
        self._packed_ctx = LlamaContext(model=self._load_model(), params=params, verbose=False)
        self._packed_n_ctx = n_ctx_seq
        self._packed_batch = LlamaBatch(n_tokens=self._n_batch, embd=0, n_seq_max=MAX_PACK_SEQS, verbose=False)

    def _load_model(self):
        if self._model is None:
            from llama_cpp._internals import LlamaModel

            model_params = self._lib.llama_model_default_params()
            model_params.use_extra_bufts = self._extra_bufts
            self._model = LlamaModel(path_model=str(self._path), params=model_params, verbose=False)
        return self._model

    def _context_params(self, n_ctx: int, n_seq_max: int):
        lib = self._lib
        ctx_params = lib.llama_context_default_params()
        ctx_params.n_ctx = n_ctx
        ctx_params.n_batch = ctx_params.n_ubatch = self._n_batch
        ctx_params.n_threads = ctx_params.n_threads_batch = self._n_threads
        ctx_params.n_seq_max = n_seq_max
        # llama.cpp's CPU flash attention works in f16: on Gemma 3 270M it moved log-probabilities
        # by 0.074 nats on average (max 1.2) and made them depend on the batch size; without it
        # scores are identical for every batch size. It is on only when a model option asks
        # (a quantized V cache needs it).
        options = self._options
        ctx_params.flash_attn_type = lib.LLAMA_FLASH_ATTN_TYPE_ENABLED if options.flash_attn else lib.LLAMA_FLASH_ATTN_TYPE_DISABLED
        ctx_params.type_k = getattr(lib, f"GGML_TYPE_{options.type_k.upper()}")
        ctx_params.type_v = getattr(lib, f"GGML_TYPE_{options.type_v.upper()}")
        if options.rope_freq_scale is not None:
            ctx_params.rope_freq_scale = options.rope_freq_scale
        if options.rope_freq_base is not None:
            ctx_params.rope_freq_base = options.rope_freq_base
        # no cache reuse: sliding-window layers need only their window
        ctx_params.swa_full = False
        return ctx_params

    def score(self, input_ids: np.ndarray, output_positions: np.ndarray, target_ids: np.ndarray, top_k: int, temperatures: tuple[float, ...]) -> BlockScores:
        target_ids = np.asarray(target_ids)
        parts: list[BlockScores] = []
        done = 0
        for logits in self.logit_blocks(input_ids, output_positions, self._n_batch):
            parts.append(score_block(logits, target_ids[done : done + len(logits)], top_k, temperatures))
            done += len(logits)
        return BlockScores.concat(parts)

    def logit_blocks(self, input_ids: np.ndarray, output_positions: np.ndarray, max_rows: int) -> Iterator[np.ndarray]:
        """Logits of the output positions straight from llama.cpp's output buffer: the input is
        decoded `min(max_rows, n_batch)` tokens at a time, so a block never holds more rows than
        that and the buffer llama.cpp reserves stays `max_rows x vocab` floats."""
        output_positions = np.asarray(output_positions)
        if np.any(np.diff(output_positions) <= 0):
            raise ValueError("output positions must be strictly increasing")
        self.prepare(len(input_ids))
        self.prefix_cache.forget()
        wanted = np.zeros(len(input_ids), dtype=np.int8)
        wanted[output_positions] = 1
        positions = np.arange(len(input_ids))
        for n_out in self._decode(self._ctx, self._batch, input_ids, positions, np.zeros_like(positions), wanted, min(max_rows, self._n_batch)):
            if n_out:
                yield self._logits(self._ctx, n_out)

    def score_batch(self, passes: Sequence[PassInput], top_k: int, temperatures: tuple[float, ...]) -> list[BlockScores]:
        """Score several passes, packed as sequences of one decode stream (up to MAX_PACK_SEQS
        passes and `pack_tokens` tokens at a time); a pass that fills a stream alone runs as `score`."""
        results: list[BlockScores] = []
        group: list[PassInput] = []
        for p in [*passes, None]:
            if group and (p is None or len(group) == MAX_PACK_SEQS or sum(len(g[0]) for g in group) + len(p[0]) > max(self._pack_tokens, 1)):
                results += [self.score(*group[0], top_k, temperatures)] if len(group) == 1 else self._score_packed(group, top_k, temperatures)
                group = []
            if p is not None:
                group.append(p)
        return results

    def _score_packed(self, passes: list[PassInput], top_k: int, temperatures: tuple[float, ...]) -> list[BlockScores]:
        lengths = [len(p[0]) for p in passes]
        for n in lengths:
            if n > self.info.n_ctx_train:
                raise UserError(f"a window of {n} tokens exceeds {self.info.name}'s training context of {self.info.n_ctx_train} tokens")
        self._prepare_packed(max(lengths))
        self._lib.llama_memory_clear(self._lib.llama_get_memory(self._packed_ctx.ctx), True)
        tokens = np.concatenate([np.asarray(p[0]) for p in passes])
        positions = np.concatenate([np.arange(n) for n in lengths])
        seqs = np.repeat(np.arange(len(passes)), lengths)
        wanted = np.zeros(len(tokens), dtype=np.int8)
        for offset, p in zip(np.cumsum([0, *lengths[:-1]]), passes):
            positions_p = np.asarray(p[1])
            if len(positions_p) != len(p[2]) or np.any(np.diff(positions_p) <= 0):
                raise ValueError("output positions must be strictly increasing, one per target")
            wanted[offset + positions_p] = 1
        targets = np.concatenate([np.asarray(p[2]) for p in passes])
        parts: list[BlockScores] = []
        done = 0
        for n_out in self._decode(self._packed_ctx, self._packed_batch, tokens, positions, seqs, wanted):
            if n_out:
                parts.append(score_block(self._logits(self._packed_ctx, n_out), targets[done : done + n_out], top_k, temperatures))
                done += n_out
        scores = BlockScores.concat(parts)
        bounds = np.cumsum([0] + [len(p[2]) for p in passes])
        return [scores.rows(a, b) for a, b in zip(bounds[:-1], bounds[1:])]

    def generate(self, input_ids: np.ndarray, max_new_tokens: int, temperature: float = GREEDY, seed: int | None = None,
                 context_end: int | None = None, stop: Stop | None = None) -> list[int]:
        """Continuation of `input_ids`: at temperature 0 the argmax at every step (ties to the
        lowest id), else a draw from softmax(logits / temperature) with a generator seeded by `seed`.

        Decodes the input (from the previous prompt's cache where the two share a prefix, unless
        `prefix_reuse` is off: backends/llamacpp_prefix.py), then one token per step; stops after `max_new_tokens`, at
        the end-of-generation token, or where `stop` says. `context_end` changes nothing: the whole cache is kept.
        """
        if max_new_tokens < 1:
            return []
        decoder = _StepDecoder(self, len(input_ids) + max_new_tokens)
        return self._decode_until_end(decoder, decoder.feed(np.asarray(input_ids)), [], max_new_tokens, temperature, np.random.default_rng(seed), stop)

    def _decode_until_end(self, decoder: _StepDecoder, logits: np.ndarray, generated: list[int], max_new_tokens: int, temperature: float = GREEDY,
                          rng: np.random.Generator | None = None, stop: Stop | None = None) -> list[int]:
        """`generated` continued from `logits` (the row after its last token), one token per decode,
        until `max_new_tokens` tokens, the end-of-generation token or `stop`."""
        while True:
            token = pick_token(logits[0], temperature, rng)
            generated.append(token)
            if self._ends(generated, max_new_tokens, stop):
                return generated
            logits = decoder.feed(np.asarray([token]))

    def _ends(self, generated: list[int], max_new_tokens: int, stop: Stop | None) -> bool:
        """Whether generation ends after its last token: the limit, end of generation, or `stop`."""
        return len(generated) >= max_new_tokens or bool(self._lib.llama_vocab_is_eog(self._vocab, generated[-1])) or (stop is not None and stop(generated))

    def score_stepwise(
        self, prompt_ids: np.ndarray, continuation_ids: np.ndarray, top_k: int, temperatures: tuple[float, ...], context_end: int | None = None
    ) -> BlockScores:
        """Teacher-forced scores of `continuation_ids` after `prompt_ids`, computed exactly as
        `generate` computes: the prompt in batches with logits at its last token, then one token
        per decode. While every greedy token equals the continuation, generation performs these
        very computations, so its output is known without running it. `score` (one batched
        pass) takes other kernel paths and can flip near-tied argmaxes (docs/numerics.md).
        `context_end` changes nothing, as in `generate`.
        """
        continuation_ids = np.asarray(continuation_ids)
        return self._score_along(_StepDecoder(self, len(prompt_ids) + len(continuation_ids)), prompt_ids, continuation_ids, top_k, temperatures)[0]

    def _score_along(self, decoder: _StepDecoder, prompt_ids: np.ndarray, continuation_ids: np.ndarray, top_k: int,
                     temperatures: tuple[float, ...]) -> tuple[BlockScores, int | None, int]:
        """The continuation's scores, one token per decode after the prompt, and where greedy
        decoding leaves it: (scores, step d or None, the greedy token at d)."""
        logits = decoder.feed(np.asarray(prompt_ids))
        parts: list[BlockScores] = []
        leave, first = None, -1
        for i, target in enumerate(continuation_ids):
            if leave is None and int(np.argmax(logits[0])) != int(target):
                leave, first = i, int(np.argmax(logits[0]))
            parts.append(score_block(logits, continuation_ids[i : i + 1], top_k, temperatures))
            if i + 1 < len(continuation_ids):
                logits = decoder.feed(np.asarray([target]))
        return BlockScores.concat(parts), leave, first

    def score_then_generate(self, prompt_ids: np.ndarray, continuation_ids: np.ndarray, max_new_tokens: int, top_k: int,
                            temperatures: tuple[float, ...], context_end: int | None = None, stop: Stop | None = None) -> tuple[BlockScores, list[int] | None]:
        """`score_stepwise`, then, where the greedy chain leaves the continuation at step d, the
        greedy generation, continued from step d on the same sequence: the cache is cut back to
        the prompt and the d tokens greedy decoding shares with the continuation (the freed
        cells are the ones generation would have used), so the prompt is decoded once. Where
        the cache cannot be cut back (a sliding-window cache that dropped early positions),
        generation runs as `generate`, whose prompt resumes from the last sliding-window
        checkpoint before its end (prefix reuse). `stop` ends generation as in `generate`."""
        continuation_ids = np.asarray(continuation_ids)
        # positions fed: the prompt, then at most max(continuation, new tokens) - 1 more (the last
        # token is scored or picked, never fed), so a sample that fills the context fits
        decoder = _StepDecoder(self, len(prompt_ids) + max(len(continuation_ids), max_new_tokens))
        scores, leave, first = self._score_along(decoder, prompt_ids, continuation_ids, top_k, temperatures)
        if leave is None:
            return scores, None
        generated: list[int] = []
        for token in [*map(int, continuation_ids[:leave]), first]:
            generated.append(token)
            if self._ends(generated, max_new_tokens, stop):
                return scores, generated
        if not decoder.rewind(len(prompt_ids) + leave):
            return scores, self.generate(np.asarray(prompt_ids), max_new_tokens, stop=stop)
        return scores, self._decode_until_end(decoder, decoder.feed(np.asarray([first])), generated, max_new_tokens, stop=stop)

    def _decode(
        self, ctx, llama_batch, tokens: np.ndarray, positions: np.ndarray, seqs: np.ndarray, wanted: np.ndarray, step: int | None = None
    ) -> Iterator[int]:
        """Decode `tokens` (token i at `positions[i]` of sequence `seqs[i]`) on `ctx` in batches of
        `step` (default `n_batch`) tokens, logits only where `wanted`; after each batch, yield how
        many logit rows it left."""
        batch = llama_batch.batch
        step = step or self._n_batch
        for start in range(0, len(tokens), step):
            stop = min(start + step, len(tokens))
            for i in range(stop - start):
                batch.token[i] = int(tokens[start + i])
                batch.pos[i] = int(positions[start + i])
                batch.n_seq_id[i] = 1
                batch.seq_id[i][0] = int(seqs[start + i])
                batch.logits[i] = int(wanted[start + i])
            batch.n_tokens = stop - start
            status = self._lib.llama_decode(ctx.ctx, batch)
            if status != 0:
                raise RuntimeError(f"llama_decode failed with status {status}")
            yield int(wanted[start:stop].sum())

    def _logits(self, ctx, n_rows: int) -> np.ndarray:
        """llama.cpp's output buffer (the flagged rows of the last batch, in order), not copied."""
        return np.ctypeslib.as_array(self._lib.llama_get_logits(ctx.ctx), shape=(n_rows, self.info.vocab_size))

    @property
    def prefix_cache(self) -> PrefixCache:
        """What sequence 0 of the inference context holds (`prepare` creates the context)."""
        if self._prefix is None:
            raise RuntimeError("the inference context is not prepared")
        return self._prefix

    def _close_context(self) -> None:
        for resource in (self._batch, self._ctx):
            if resource is not None:
                resource.close()
        self._batch = self._ctx = self._prefix = None
        self._n_ctx = 0

    def _close_packed(self) -> None:
        for resource in (self._packed_batch, self._packed_ctx):
            if resource is not None:
                resource.close()
        self._packed_batch = self._packed_ctx = None
        self._packed_n_ctx = 0

    def close(self) -> None:
        """Free the inference contexts and the model (the vocabulary stays loaded for tokenization)."""
        self._close_context()
        self._close_packed()
        if self._model is not None:
            self._model.close()
        self._model = None


class _StepDecoder:
    """One sequence on the scorer's context, decoded a few tokens at a time: `feed(tokens)`
    decodes them after what was fed before and returns the logits row of the last one (a view
    of llama.cpp's buffer, valid until the next feed); `rewind(n)` keeps the first n positions."""

    def __init__(self, scorer: LlamaCppScorer, max_len: int) -> None:
        scorer.prepare(max_len)
        self._scorer = scorer
        self._memory = scorer._lib.llama_get_memory(scorer._ctx.ctx)
        self.position = 0

    def feed(self, tokens: np.ndarray) -> np.ndarray:
        """The first feed is the prompt: it starts where the previous prompt's cache lets it
        (the prefix cache clears the sequence when nothing is reusable)."""
        s = self._scorer
        prefix = s.prefix_cache
        prompt = self.position == 0
        skip = prefix.resume(tokens) if prompt else 0
        todo = np.asarray(tokens)[skip:]
        wanted = np.zeros(len(todo), dtype=np.int8)
        wanted[-1] = 1
        positions = self.position + skip + np.arange(len(todo))
        end = self.position + skip
        for _ in s._decode(s._ctx, s._batch, todo, positions, np.zeros_like(positions), wanted):
            end = min(end + s._n_batch, self.position + len(tokens))
            if prompt:
                prefix.decoded(end)
        self.position += len(tokens)
        return s._logits(s._ctx, 1)

    def rewind(self, keep: int) -> bool:
        """Drop positions from `keep` on; False (nothing usable) when the cache no longer holds
        every position before `keep` (a sliding-window cache prunes early ones)."""
        lib = self._scorer._lib
        if not lib.llama_memory_seq_rm(self._memory, 0, keep, -1):
            return False
        if lib.llama_memory_seq_pos_min(self._memory, 0) != 0 or lib.llama_memory_seq_pos_max(self._memory, 0) != keep - 1:
            return False
        self.position = keep
        return True
