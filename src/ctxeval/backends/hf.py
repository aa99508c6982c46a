"""Hugging Face transformers models (AutoModelForCausalLM + AutoTokenizer) on cpu, cuda or mps.

The model body runs once per pass (or once per batch of equal-length passes: a [B, L] forward,
no padding), KV-free (`use_cache=False`) under `torch.inference_mode`, attention through
PyTorch SDPA (flash-attention 2 when installed, on CUDA, in half precision). The output head
then runs only on target positions, in float32 whatever the body's dtype, a block of rows at a
time, the row count sized from free memory (`head_memory.head_block_rows`); each block is
scored where it lies: by `logits.score_block` (numpy) on CPU, by
`logits_torch.score_block_device` on an accelerator, so only per-row results cross to the host.
Memory for logits is bounded by the block however long the window; no [positions x vocab]
log-softmax is ever formed. On CUDA the head is a half-precision GEMM with float32 output
(`head_gemm.OutputHead`), a block is scored by a top-k from tile maxima and one compiled
reduction (`logits_torch`), and
blocks are sized so that the head never holds more than a bare forward's logits would
(`head_memory.cuda_head_block_rows`).

Tokenization matches the rest of ctxeval: no special tokens are added, and special-token
strings inside the text (a literal "<unk>") are plain text, as in llama.cpp's tokenizer.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from functools import lru_cache
from importlib import metadata
from pathlib import Path

import numpy as np

from ctxeval.backends import head_memory
from ctxeval.backends.base import GREEDY, Capabilities, ModelInfo, PassInput, ScorerBase, SpecialTokens, Stop
from ctxeval.backends.head_gemm import OutputHead
from ctxeval.backends.logits import BlockScores, pick_token, score_block
from ctxeval.backends.kv_press import PressedModel, PressOptions
from ctxeval.backends.logits_torch import score_block_device
from ctxeval.backends.hf_embedded import quiet_transformers
from ctxeval.backends.hf_prefix import HeldPrefix
from ctxeval.backends.model_files import file_sha256
from ctxeval.errors import FieldError, UserError

DTYPES = ("float32", "bfloat16", "float16", "float64")  # float64: a slow reference precision
DEVICES = ("cpu", "cuda", "mps")
HALF_DTYPES = ("bfloat16", "float16")
# a batch of equal-length passes holds at most this many tokens (a batch that does not fit in
# GPU memory is split in halves until it does)
DEFAULT_BATCH_TOKENS = {"cpu": 4096, "cuda": 32768, "mps": 8192}

# One pass to score: input ids, positions whose logits are scored, target ids.


class HFScorer(ScorerBase):
    """Scorer for one local transformers checkpoint directory."""

    # a pressed model generates too: its context compressed, the rest against the cache (`context_end`)
    capabilities = Capabilities(full_logits=True, max_top_k=None, temperatures=True, generation=True)
    batches = True

    def __init__(
        self,
        path: Path,
        name: str,
        device: str | None = None,
        dtype: str | None = None,
        n_threads: int | None = None,
        rows_per_block: int | None = None,
        batch_tokens: int | None = None,
        details: dict | None = None,
        press: PressOptions | None = None,
        prefix_reuse: bool = True,
    ) -> None:
        import torch

        device = device or "cpu"
        dtype = dtype or "float32"
        _check_settings(path, device, dtype, torch)
        if n_threads:
            torch.set_num_threads(n_threads)
        quiet_transformers()
        self._torch = torch
        self._device = torch.device(device)
        self._rows_per_block = rows_per_block
        self._batch_tokens = batch_tokens or DEFAULT_BATCH_TOKENS[device]
        self._tok, model = _load(path, getattr(torch, dtype), _attention(device, dtype))
        self._model = model.to(self._device).eval()
        self._body = model.base_model
        self._press = None if press is None else PressedModel(self._model, press)
        self.compresses_context = press is not None
        config = model.config
        # A pressed cache holds a compressed prompt, a sliding-window layer drops early positions:
        # neither can be cut back to a shared prefix.
        can_reuse = press is None and _full_attention_cache(config)
        self._prefix = HeldPrefix() if prefix_reuse and can_reuse else None
        self._softcap = getattr(config, "final_logit_softcapping", None)
        # float32 logits whatever the body's dtype, so log-sum-exp, ranks and top-k see float32
        # logits, not bf16/fp16-rounded ones
        self._output_head = OutputHead.of(model.get_output_embeddings(), device, self._softcap)
        self._vocab_size = self._output_head.vocab_size
        self._piece = _piece_decoder(self._tok, self._vocab_size)
        self._hidden_size = self._output_head.hidden_size
        self._hidden_bytes = torch.empty((), dtype=getattr(torch, dtype)).element_size()
        self.info = self._model_info(path, name, model, dtype, rows_per_block, can_reuse, details)
        if self.info.n_ctx_train <= 0:
            raise UserError(f"{path}: config.json gives no max_position_embeddings (training context)")

    def _model_info(self, path: Path, name: str, model, dtype: str, rows_per_block: int | None, can_reuse: bool, details: dict | None) -> ModelInfo:
        """What a run's manifest records of this model: its identity, and every setting and
        version that decides its numbers (`can_reuse`: its cache can be cut back to a prefix)."""
        import transformers

        config, torch, device = model.config, self._torch, self._device.type
        weights = _weights_sha256(path)
        return ModelInfo(
            name=name,
            backend="hf",
            path=str(path),
            sha256=_combined_sha256(weights),
            vocab_size=self._vocab_size,
            n_ctx_train=int(getattr(config, "max_position_embeddings", 0) or 0),
            bos_id=_bos_id(self._tok),
            details={
                "architecture": (config.architectures or [type(model).__name__])[0],
                "model_type": config.model_type,
                "n_params": int(sum(p.numel() for p in model.parameters())),
                "weights_sha256": weights,
                "dtype": dtype,
                "device": device,
                "attn_implementation": getattr(config, "_attn_implementation", None),
                "precision": {
                    "body": dtype,
                    "head_matmul": self._output_head.precision,
                    "scoring": "float32 logits; exp-sum "
                    + {"cpu": "float64 (numpy)", "cuda": "float32 (one compiled torch reduction)"}.get(device, "float32 (torch reduction)")
                    + ", its log and the log-probabilities float64",
                },
                "final_logit_softcapping": self._softcap,
                "tokenizer": type(self._tok).__name__,
                "tokenizer_vocab_size": len(self._tok),
                "rows_per_block": rows_per_block
                or f"from {'the forward length and ' if device == 'cuda' else ''}free memory (at most {head_memory.max_rows(self._device)})",
                "batch_tokens": self._batch_tokens,
                # None where the cache cannot be cut back (a press, sliding-window layers): no choice to record
                "prefix_reuse": (self._prefix is not None) if can_reuse else None,
                "n_threads": torch.get_num_threads(),
                "torch": torch.__version__,
                "transformers": transformers.__version__,
                "safetensors": _version("safetensors"),
            }
            | (details or {})
            | ({} if self._press is None else {"kv_press": self._press.details}),
        )

    # --- tokenizer -------------------------------------------------------------------------
    def tokenize(self, text: str) -> list[int]:
        return self._tok(text, add_special_tokens=False, split_special_tokens=True)["input_ids"]

    def token_bytes(self, token_id: int) -> bytes:
        return self._piece(int(token_id))

    def tokenize_with_specials(self, text: str) -> list[int]:
        return self._tok(text, add_special_tokens=False)["input_ids"]

    def special_tokens(self) -> SpecialTokens:
        tok = self._tok
        return SpecialTokens(tok.bos_token_id, tok.bos_token, tok.eos_token_id, tok.eos_token, tok.chat_template)

    # --- inference -------------------------------------------------------------------------
    def score(self, input_ids: np.ndarray, output_positions: np.ndarray, target_ids: np.ndarray, top_k: int, temperatures: tuple[float, ...]) -> BlockScores:
        return self.score_batch([(input_ids, output_positions, target_ids)], top_k, temperatures)[0]

    def score_batch(self, passes: Sequence[PassInput], top_k: int, temperatures: tuple[float, ...]) -> list[BlockScores]:
        """Score several passes; passes of equal length share forward passes (no padding, so
        a batched pass gives the same numbers as a pass on its own up to float rounding)."""
        results: list[BlockScores | None] = [None] * len(passes)
        by_length: dict[int, list[int]] = {}
        for i, (input_ids, positions, targets) in enumerate(passes):
            if len(input_ids) > self.info.n_ctx_train:
                raise UserError(f"a window of {len(input_ids)} tokens exceeds {self.info.name}'s training context of {self.info.n_ctx_train} tokens")
            if len(positions) != len(targets) or np.any(np.diff(np.asarray(positions)) <= 0):
                raise ValueError("output positions must be strictly increasing, one per target")
            by_length.setdefault(len(input_ids), []).append(i)
        for length, members in by_length.items():
            per_batch = max(1, self._batch_tokens // max(length, 1))
            for lo in range(0, len(members), per_batch):
                group = members[lo : lo + per_batch]
                for i, scores in zip(group, self._score_group([passes[i] for i in group], top_k, temperatures)):
                    results[i] = scores
        return results  # type: ignore[return-value]

    def _score_group(self, passes: list[PassInput], top_k: int, temperatures: tuple[float, ...]) -> list[BlockScores]:
        """One [B, L] forward; a batch that runs out of GPU memory is split in halves, a single
        pass that does not fit is a user error that names the measured free memory."""
        torch = self._torch
        try:
            if self._press is not None:  # each pass its own context to compress
                return [self._forward_and_score([p], top_k, temperatures)[0] for p in passes]
            return self._forward_and_score(passes, top_k, temperatures)
        except torch.OutOfMemoryError:
            free = head_memory.free_bytes(self._device)
            if len(passes) == 1:
                raise UserError(
                    f"a window of {len(passes[0][0])} tokens does not fit in {self._device} memory in one forward "
                    f"({free / 2**30:.1f} GiB free after the failed attempt); use shorter windows or a larger device"
                ) from None
        half = len(passes) // 2
        return self._score_group(passes[:half], top_k, temperatures) + self._score_group(passes[half:], top_k, temperatures)

    def _forward_and_score(self, passes: list[PassInput], top_k: int, temperatures: tuple[float, ...]) -> list[BlockScores]:
        torch = self._torch
        ids = torch.as_tensor(np.stack([np.asarray(p[0], dtype=np.int64) for p in passes]), device=self._device)
        with torch.inference_mode():
            hidden, first = self._hidden(ids, int(passes[0][1][0]))
            # the head runs only on target rows, in blocks
            rows = torch.cat([hidden[b, torch.as_tensor(np.asarray(p[1], dtype=np.int64) - first, device=self._device)] for b, p in enumerate(passes)])
            del hidden
            targets = torch.as_tensor(np.concatenate([np.asarray(p[2], dtype=np.int64) for p in passes]), device=self._device)
            block = self._rows_per_block or self._block_rows(ids.numel())
            parts = [self._score_rows(rows[lo : lo + block], targets[lo : lo + block], top_k, temperatures) for lo in range(0, len(targets), block)]
        scores = BlockScores.concat(parts)
        bounds = np.cumsum([0] + [len(p[2]) for p in passes])
        return [scores.rows(a, b) for a, b in zip(bounds[:-1], bounds[1:])]

    def score_stepwise(self, prompt_ids: np.ndarray, continuation_ids: np.ndarray, top_k: int, temperatures: tuple[float, ...],
                       context_end: int | None = None) -> BlockScores:
        """Teacher-forced scores of a continuation on generation's path: the prompt in one forward
        that fills a KV cache (with a press: its context compressed, then the rest), then one token
        per forward, as `generate` decodes."""
        step = self._stepper(np.asarray(prompt_ids), len(continuation_ids), context_end)
        logits = step(np.asarray(prompt_ids))
        parts = []
        for i, target in enumerate(np.asarray(continuation_ids)):
            parts.append(score_block(logits, np.asarray([target]), top_k, temperatures))
            if i + 1 < len(continuation_ids):
                logits = step(np.asarray([target]))
        return BlockScores.concat(parts)

    def generate(self, input_ids: np.ndarray, max_new_tokens: int, temperature: float = GREEDY, seed: int | None = None,
                 context_end: int | None = None, stop: Stop | None = None) -> list[int]:
        """Greedy continuation (ties to the lowest id) with a KV cache, float32 logits from the
        head as scoring computes them; sampled at `temperature` > 0 with a generator seeded by `seed`;
        stops after `max_new_tokens`, at the end-of-sequence token, or where `stop` says. With a press, the first
        `context_end` ids are compressed and the rest of the prompt and every generated token run
        against the compressed cache at their true positions (kvpress's context / question split)."""
        if max_new_tokens < 1:
            return []
        rng = np.random.default_rng(seed)
        step = self._stepper(np.asarray(input_ids), max_new_tokens, context_end)
        logits = step(np.asarray(input_ids))
        generated: list[int] = []
        eos = self._end_ids()
        while True:
            token = pick_token(logits[0], temperature, rng)
            generated.append(token)
            if len(generated) >= max_new_tokens or token in eos or (stop is not None and stop(generated)):
                return generated
            logits = step(np.asarray([token]))

    def _end_ids(self) -> set[int]:
        """Tokens that end generation: the tokenizer's EOS and the model's generation config's."""
        configured = getattr(self._model.generation_config, "eos_token_id", None)
        ids = configured if isinstance(configured, list) else [configured]
        return {int(i) for i in [*ids, self._tok.eos_token_id] if i is not None}

    def _stepper(self, prompt_ids: np.ndarray, n_new: int, context_end: int | None):
        """A fresh KV-cached sequence for `prompt_ids` and `n_new` tokens after it: `step(tokens)`
        runs them after what came before and returns the float32 logits row of the last one,
        [1, vocab]. With a press, the first step compresses the prompt's first `context_end` ids
        and runs the rest at their true positions against the compressed cache, as every later
        step runs; without one, `context_end` changes nothing (the full cache keeps every token)."""
        torch = self._torch
        max_len = len(prompt_ids) + n_new
        if max_len > self.info.n_ctx_train:
            raise UserError(f"{max_len} tokens exceed {self.info.name}'s training context of {self.info.n_ctx_train} tokens")
        from transformers import DynamicCache

        press = self._press
        if press is not None:
            if context_end is None:
                raise UserError(f"{self.info.name} compresses its KV cache: generating needs context_end, how many leading ids form the context to compress")
            press.check_generation_context(context_end, len(prompt_ids))
        cache, position = DynamicCache(config=self._model.config), 0
        held = self._prefix

        def step(tokens: np.ndarray) -> np.ndarray:
            nonlocal cache, position
            tokens = np.asarray(tokens, dtype=np.int64)
            if held is not None and position == 0:
                cache, position = held.resume(tokens, cache)
                tokens = tokens[position:]
            ids = torch.as_tensor(tokens[None], device=self._device)
            with torch.inference_mode():
                if press is None:
                    try:
                        hidden = self._body(input_ids=ids, past_key_values=cache, use_cache=True).last_hidden_state[:, -1]
                    except BaseException:
                        if held is not None:
                            held.forget()  # the cache may hold part of this forward
                        raise
                    if held is not None:
                        held.fed(tokens)
                else:
                    if position == 0:
                        cache, ids, position = press.prefill(self._body, ids[:, :context_end]), ids[:, context_end:], context_end
                    hidden = press.run_against(self._body, cache, ids, position)[:, -1]
                position += ids.shape[1]
                return self._head(hidden).cpu().numpy()

        return step

    def logit_blocks(self, input_ids: np.ndarray, output_positions: np.ndarray, max_rows: int) -> Iterator[np.ndarray]:
        """One forward pass; the head runs on `max_rows` output rows at a time and each block
        of float32 logits comes to the host."""
        torch = self._torch
        if len(input_ids) > self.info.n_ctx_train:
            raise UserError(f"a window of {len(input_ids)} tokens exceeds {self.info.name}'s training context of {self.info.n_ctx_train} tokens")
        output_positions = np.asarray(output_positions, dtype=np.int64)
        if np.any(np.diff(output_positions) <= 0):
            raise ValueError("output positions must be strictly increasing")
        ids = torch.as_tensor(np.asarray(input_ids, dtype=np.int64)[None], device=self._device)
        with torch.inference_mode():
            hidden, first = self._hidden(ids, int(output_positions[0]))
            rows = hidden[0, torch.as_tensor(output_positions - first, device=self._device)]
        for lo in range(0, len(output_positions), max_rows):
            with torch.inference_mode():
                logits = self._head(rows[lo : lo + max_rows]).cpu()
            yield logits.numpy()

    def _hidden(self, ids, first_output: int):
        """The body's last hidden states and the position of their first row: the whole pass, or
        with a press the rows from the first scored position on, the tokens before it compressed."""
        if self._press is None:
            return self._body(input_ids=ids, use_cache=False).last_hidden_state, 0
        return self._press.hidden_states(self._body, ids, first_output)[0], first_output

    def _head(self, hidden_rows):
        """float32 logits of hidden rows (the LM head, and the final soft-cap when the model has one)."""
        return self._output_head(hidden_rows)

    def _block_rows(self, tokens: int) -> int:
        """Head rows per block after a forward of `tokens` tokens, from the memory free now."""
        free, args = head_memory.free_bytes(self._device), (self._vocab_size, self._hidden_size, self._hidden_bytes, head_memory.max_rows(self._device))
        if self._device.type == "cuda":
            return head_memory.cuda_head_block_rows(tokens, free, *args)
        return head_memory.head_block_rows(free, *args)

    def _score_rows(self, hidden_rows, targets, top_k: int, temperatures: tuple[float, ...]) -> BlockScores:
        logits = self._head(hidden_rows)
        if self._device.type == "cpu":
            return score_block(logits.numpy(), targets.numpy(), top_k, temperatures)
        return score_block_device(logits, targets, top_k, temperatures)

    def close(self) -> None:
        """Free the held prefix's cache (the model lives as long as the scorer)."""
        if self._prefix is not None:
            self._prefix.forget()

    @property
    def prefix_tokens_reused(self) -> int:
        """Prompt tokens that prefix reuse did not run again (0 when it is off)."""
        return 0 if self._prefix is None else self._prefix.reused


def _full_attention_cache(config) -> bool:
    """Whether the model's KV cache keeps every position in every layer (no sliding window), so
    it can be cut back to a prefix."""
    from transformers import DynamicCache
    from transformers.cache_utils import DynamicLayer

    return all(type(layer) is DynamicLayer for layer in DynamicCache(config=config).layers)


def _check_settings(path: Path, device: str, dtype: str, torch) -> None:
    """Refuse a device or dtype this torch cannot use, and a folder that holds no checkpoint, before anything loads."""
    _check_device(device, torch)
    if dtype not in DTYPES:
        raise FieldError("dtype", f"unknown {{name}} {dtype!r}; choose one of {', '.join(DTYPES)}")
    if not (path / "config.json").is_file():
        raise UserError(f"{path} is not a transformers checkpoint directory (no config.json)")


def _check_device(device: str, torch) -> None:
    if device not in DEVICES:
        raise FieldError("device", f"unknown {{name}} {device!r}; choose one of {', '.join(DEVICES)}")
    if device == "cuda" and not torch.cuda.is_available():
        raise FieldError("device", "{name} cuda: this torch build sees no CUDA device")
    if device == "mps" and not torch.backends.mps.is_available():
        raise FieldError("device", "{name} mps: Apple MPS is not available here")


def _attention(device: str, dtype: str) -> str:
    """flash-attention 2 where it applies (installed, CUDA, half precision), else PyTorch SDPA."""
    if device == "cuda" and dtype in HALF_DTYPES and _version("flash-attn") != "not installed":
        return "flash_attention_2"
    return "sdpa"


def _load(path: Path, dtype, attention: str):
    """The tokenizer and the model of a checkpoint folder; a folder transformers cannot read is a user error."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(path)), _load_model(AutoModelForCausalLM, path, dtype, attention)
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot load transformers model {path}: {exc}") from None


def _load_model(auto, path: Path, dtype, attention: str):
    """The model with `attention`; an architecture without it (Gemma 2's attention softcapping
    has no SDPA path) falls back to its own default, which ModelInfo then records."""
    try:
        return auto.from_pretrained(str(path), dtype=dtype, attn_implementation=attention)
    except ValueError as exc:
        if "attention implementation" not in str(exc):
            raise
        return auto.from_pretrained(str(path), dtype=dtype)


def _bos_id(tok) -> int | None:
    """The BOS id if the tokenizer itself starts sequences with BOS (the model was trained so)."""
    plain = tok("a", add_special_tokens=False)["input_ids"]
    with_special = tok("a")["input_ids"]
    if tok.bos_token_id is not None and len(with_special) > len(plain) and with_special[0] == tok.bos_token_id:
        return int(tok.bos_token_id)
    return None


def _piece_decoder(tok, model_vocab: int):
    """token id -> exact bytes in running text, for byte-level (GPT-2) and SentencePiece-style
    (▁ for space, <0xXX> byte fallback) tokenizers. A head wider than the tokenizer (rows padded
    to a round size, as Qwen's and many random-weight models' are) can still rank and predict
    the padding ids: they stand for no text, so their piece is empty."""
    backend = getattr(tok, "backend_tokenizer", None)
    if backend is None:
        raise UserError(f"{type(tok).__name__} has no fast (tokenizers) backend; ctxeval needs exact token bytes")
    decoder = json.dumps(json.loads(backend.to_str()).get("decoder"))
    byte_level = '"ByteLevel"' in decoder
    table = {c: b for b, c in _bytes_to_unicode().items()}
    special = set(tok.all_special_ids)
    n_tokens = len(tok)  # computed on every call by transformers: once here

    @lru_cache(maxsize=None)
    def piece(token_id: int) -> bytes:
        token = tok.convert_ids_to_tokens(token_id) if token_id < n_tokens else None
        if token is None and 0 <= token_id < model_vocab:
            return b""
        if token is None:
            raise ValueError(f"token id {token_id} is outside the vocabulary")
        if token_id in special:
            return token.encode("utf-8")
        if byte_level:
            return bytes(table[c] for c in token)
        if len(token) == 6 and token.startswith("<0x") and token.endswith(">"):
            return bytes([int(token[3:5], 16)])
        return token.replace("\u2581", " ").encode("utf-8")

    return piece


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character map used by byte-level BPE vocabularies."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    mapping = {b: chr(b) for b in keep}
    extra = 0
    for b in range(256):
        if b not in mapping:
            mapping[b] = chr(256 + extra)
            extra += 1
    return mapping


def _weights_sha256(path: Path) -> dict[str, str]:
    files = sorted(path.glob("*.safetensors")) or sorted(path.glob("*.bin"))
    if not files:
        raise UserError(f"{path} holds no weight files (*.safetensors or *.bin)")
    return {f.name: file_sha256(f) for f in files}


def _combined_sha256(files: dict[str, str]) -> str:
    """One file: its sha256; several (shards): sha256 of the sorted 'name sha' lines."""
    if len(files) == 1:
        return next(iter(files.values()))
    return hashlib.sha256("".join(f"{n} {h}\n" for n, h in sorted(files.items())).encode()).hexdigest()


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"
