"""An embedded GGUF (Gemma 3 270M, SmolLM2 135M) as a transformers checkpoint, converted once into a cache directory.

transformers reads GGUF files (gemma3 included) and dequantizes every tensor to float; saving
that model as safetensors lets the `hf` backend run exactly the weights llama.cpp runs, with
no network access. The conversion takes a minute or two and happens on first use only.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

from ctxeval.backends.model_files import cache_base, embedded_path, file_sha256, one_writer
from ctxeval.errors import UserError, install_hint

SOURCE_FILE = "ctxeval_source.json"
# bumped when a conversion changes what it writes: a cache of an older one is converted again
CONVERSION = 2  # 2: SentencePiece GGUFs get llama.cpp's merges-by-score tokenizer; the file's add_bos_token honoured


def quiet_transformers() -> None:
    """transformers' warnings and progress bars off (a first GGUF conversion alone drew about 80 KB
    of them), unless TRANSFORMERS_VERBOSITY asks for its output: ctxeval's own progress lines say
    how far a run is."""
    import transformers

    if os.environ.get("TRANSFORMERS_VERBOSITY"):
        return
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()


@contextlib.contextmanager
def _quiet_gguf_bar() -> Iterator[None]:
    """transformers draws its GGUF conversion bar with tqdm directly, past its own logging
    switches: kept off stderr too, unless TRANSFORMERS_VERBOSITY asks for its output."""
    if os.environ.get("TRANSFORMERS_VERBOSITY"):
        yield
        return
    with contextlib.redirect_stderr(io.StringIO()):
        yield


def cache_root() -> Path:
    """Where converted checkpoints live: $CTXEVAL_CACHE/hf, default ~/.cache/ctxeval/hf."""
    return cache_base() / "hf"


def embedded_hf_dir(name: str) -> tuple[Path, dict]:
    """The converted checkpoint of embedded model `name` (converting it if needed) and its provenance."""
    gguf = embedded_path(name)
    target = cache_root() / name
    source = target / SOURCE_FILE
    with one_writer(f"hf-{name}"):  # a second process waits, then finds the first one's conversion
        if source.is_file():
            provenance = json.loads(source.read_text())
            if provenance.get("conversion_version") == CONVERSION:
                return target, provenance
        return target, convert_gguf(gguf, target)


def convert_gguf(gguf: Path, target: Path) -> dict:
    """Dequantize `gguf` to a float32 safetensors checkpoint plus tokenizer in `target`.

    Written to a temporary sibling and renamed, so an interrupted conversion leaves nothing
    that looks finished.
    """
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        import accelerate  # noqa: F401  (transformers needs it to read GGUF)
        import gguf as _gguf  # noqa: F401
    except ImportError:
        raise UserError(f"converting a GGUF file for the hf backend needs the packages gguf and accelerate: {install_hint('hf')}") from None
    quiet_transformers()
    tmp = target.with_name(target.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    from gguf import GGUFReader

    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    fields = GGUFReader(str(gguf)).fields  # the file's metadata, read once
    adds_bos = bool(_scalar(fields, "tokenizer.ggml.add_bos_token", True))  # llama.cpp's default when absent
    sentencepiece = bytes(_values(fields, "tokenizer.ggml.model")[0]).decode() == "llama"
    if sentencepiece:  # llama.cpp's merges, not transformers' Unigram reading of them
        template, tokenizer = tokenizer.chat_template, spm_tokenizer(fields)
        tokenizer.chat_template = template
    elif not adds_bos:  # transformers' GGUF reader prepends BOS whatever the file says (SmolLM2's says no, as llama.cpp reads it)
        from tokenizers import processors

        tokenizer.backend_tokenizer.post_processor = processors.TemplateProcessing(single="$A", pair="$A $B")
    with _quiet_gguf_bar():
        model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype="float32")
    # The loaded tensors are plain float32 (dequantized); only the GGUF quantization marker
    # blocks saving, so it is dropped.
    model.hf_quantizer = None
    model.config.__dict__.pop("quantization_config", None)  # set for some architectures' GGUF loads, not others
    model.save_pretrained(str(tmp))
    tokenizer.save_pretrained(str(tmp))
    provenance = {
        "converted_from": str(gguf),
        "gguf_sha256": file_sha256(gguf),
        "conversion": "transformers GGUF loader, every tensor dequantized to float32",
        "transformers": transformers.__version__,
        "adds_bos": adds_bos,
        "tokenizer": "llama.cpp's: merges by score from the GGUF's vocabulary" if sentencepiece else "transformers GGUF loader",
        "conversion_version": CONVERSION,
    }
    (tmp / SOURCE_FILE).write_text(json.dumps(provenance, indent=2))
    shutil.rmtree(target, ignore_errors=True)
    tmp.rename(target)
    return provenance


def _values(fields: dict, key: str) -> list:
    """The parts of a GGUF metadata field: one per array element (one for a scalar)."""
    field = fields[key]
    return [field.parts[i] for i in field.data]


def _scalar(fields: dict, key: str, default):
    """A scalar GGUF metadata value, or `default` when the file does not set it."""
    return _values(fields, key)[0][0] if key in fields else default


# GGUF token types (llama.cpp's llama_token_type)
_NORMAL, _CONTROL, _USER_DEFINED, _BYTE = 1, 3, 4, 6


def spm_tokenizer(fields: dict):
    """The tokenizer of a SentencePiece ("llama") GGUF, from its metadata `fields`, as llama.cpp runs it, for transformers:
    merges by score (the pair whose merged piece scores highest first, as llama.cpp's SPM
    tokenizer merges), byte fallback, spaces as ▁ with no prefix space unless the file asks,
    user-defined pieces ("\\n\\n", HTML tags) matched whole, control pieces special. transformers'
    own GGUF reader (5.2) builds a Unigram model from these scores, which splits words that the
    file's BPE keeps whole."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, processors
    from transformers import PreTrainedTokenizerFast

    pieces = [bytes(p).decode("utf-8") for p in _values(fields, "tokenizer.ggml.tokens")]
    scores = [float(s[0]) for s in _values(fields, "tokenizer.ggml.scores")]
    kinds = [int(t[0]) for t in _values(fields, "tokenizer.ggml.token_type")]
    vocab = {piece: i for i, piece in enumerate(pieces)}
    merges = []
    for i, piece in enumerate(pieces):
        if kinds[i] != _NORMAL or len(piece) < 2:
            continue
        for cut in range(1, len(piece)):
            left, right = piece[:cut], piece[cut:]
            if left in vocab and right in vocab:
                merges.append((-scores[i], vocab[left], vocab[right], left, right))
    merges.sort()
    unk = pieces[int(_scalar(fields, "tokenizer.ggml.unknown_token_id", 0))]
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[(m[3], m[4]) for m in merges], unk_token=unk, byte_fallback=True, fuse_unk=True))
    space = [normalizers.Prepend("▁")] if bool(_scalar(fields, "tokenizer.ggml.add_space_prefix", False)) else []
    backend.normalizer = normalizers.Sequence([*space, normalizers.Replace(" ", "▁")])
    backend.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()] + ([decoders.Strip(" ", 1, 0)] if space else []))
    backend.add_tokens([AddedToken(p, special=False, normalized=False) for p, k in zip(pieces, kinds) if k == _USER_DEFINED])
    backend.add_special_tokens([AddedToken(p, special=True, normalized=False) for p, k in zip(pieces, kinds) if k == _CONTROL])
    bos = pieces[int(_scalar(fields, "tokenizer.ggml.bos_token_id", 1))]
    if bool(_scalar(fields, "tokenizer.ggml.add_bos_token", True)):
        backend.post_processor = processors.TemplateProcessing(single=f"{bos} $A", pair=f"{bos} $A $B", special_tokens=[(bos, vocab[bos])])
    named = {role: pieces[int(_scalar(fields, f"tokenizer.ggml.{role}_token_id", -1))] for role in ("bos", "eos", "unknown", "padding") if f"tokenizer.ggml.{role}_token_id" in fields}
    return PreTrainedTokenizerFast(tokenizer_object=backend, bos_token=named.get("bos"), eos_token=named.get("eos"), unk_token=named.get("unknown"), pad_token=named.get("padding"))
