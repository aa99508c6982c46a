"""An embedded GGUF (Gemma 3 270M, SmolLM2 135M) as a transformers checkpoint, converted once into a cache directory.

transformers reads GGUF files (gemma3 included) and dequantizes every tensor to float; saving
that model as safetensors lets the `hf` backend run exactly the weights llama.cpp runs, with
no network access. The conversion takes a minute or two and happens on first use only.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from ctxeval.backends.model_files import embedded_path, file_sha256
from ctxeval.errors import UserError

SOURCE_FILE = "ctxeval_source.json"


def cache_root() -> Path:
    """Where converted checkpoints live: $CTXEVAL_CACHE/hf, default ~/.cache/ctxeval/hf."""
    base = os.environ.get("CTXEVAL_CACHE")
    return (Path(base) if base else Path.home() / ".cache" / "ctxeval") / "hf"


def embedded_hf_dir(name: str) -> tuple[Path, dict]:
    """The converted checkpoint of embedded model `name` (converting it if needed) and its provenance."""
    gguf = embedded_path(name)
    target = cache_root() / name
    source = target / SOURCE_FILE
    if source.is_file():
        return target, json.loads(source.read_text())
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
        raise UserError("converting a GGUF file for the hf backend needs the packages gguf and accelerate: pip install 'ctxeval[hf]'") from None
    transformers.logging.set_verbosity_error()
    tmp = target.with_name(target.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    adds_bos = _gguf_adds_bos(gguf)
    if not adds_bos:  # transformers' GGUF reader prepends BOS whatever the file says (SmolLM2's says no, as llama.cpp reads it)
        from tokenizers import processors

        tokenizer.backend_tokenizer.post_processor = processors.TemplateProcessing(single="$A", pair="$A $B")
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
    }
    (tmp / SOURCE_FILE).write_text(json.dumps(provenance, indent=2))
    shutil.rmtree(target, ignore_errors=True)
    tmp.rename(target)
    return provenance


def _gguf_adds_bos(gguf: Path) -> bool:
    """The file's tokenizer.ggml.add_bos_token (llama.cpp's default, true, when absent)."""
    from gguf import GGUFReader

    field = GGUFReader(str(gguf)).fields.get("tokenizer.ggml.add_bos_token")
    return True if field is None else bool(field.parts[field.data[0]][0])
