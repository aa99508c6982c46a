"""GPU recipe: ctxeval's RULER and effective-length on open Hugging Face models whose RULER
effective lengths are published, then `ctxeval agreement` over them.

Published (NVIDIA/RULER README at commit c3f5e3b; 13 tasks, 500 samples per task and length,
4K to 128K, each model with its chat template; effective length = the longest length whose mean
stays at or above 85.6):

| model | claimed | RULER effective | mean at 4K / 8K / 16K / 32K / 64K / 128K |
|---|---|---|---|
| meta-llama/Llama-3.1-8B-Instruct | 128K | 32K | 95.5 / 93.8 / 91.6 / 87.4 / 84.7 / 77.0 |
| mistralai/Mistral-7B-Instruct-v0.2 | 32K | 16K | 93.6 / 91.2 / 87.2 / 75.4 / 49.0 / 13.8 |
| microsoft/Phi-3-mini-128k-instruct | 128K | 32K | 92.2 / 91.5 / 90.7 / 87.5 / 80.6 / 66.7 |
| Qwen/Qwen3-8B | 128K | 64K (its own scores give 32K by the rule: 82.1 at 64K; marked author-reported) | 96.3 / 96.0 / 91.8 / 91.2 / 82.1 / 77.4 |

ctxeval sends RULER's `base` template (no chat template), runs the 11 synthetic tasks (the QA
tasks need SQuAD/HotpotQA) and uses a public-domain essay haystack, so its scores are not the
README's: the comparison is of orderings and effective lengths. The checkpoints must be local
folders (`--model NAME=DIR`); nothing is downloaded.

    python bench/ruler_gpu.py --model llama31=/models/Llama-3.1-8B-Instruct --model mistral=/models/Mistral-7B-Instruct-v0.2 \\
        --lengths 4096,8192,16384,32768 --samples 50 --texts BOOK.txt ... --out runs/ruler-gpu

Each run resumes where it stopped. With `--smoke` the script checks itself on a random-weight
model of the Llama shape (no checkpoint needed) at small lengths, as on a device session.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import ctxeval
from ctxeval.data.texts import demo_text_path
from ctxeval.ruler.tasks import TASKS

PUBLISHED = {  # RULER README, commit c3f5e3b: effective length in tokens
    "Llama-3.1-8B-Instruct": 32768, "Mistral-7B-Instruct-v0.2": 16384, "Phi-3-mini-128k-instruct": 32768, "Qwen3-8B": 65536,
}


def random_llama(path: Path, layers: int, hidden: int) -> Path:
    """A random-weight Llama checkpoint with a byte-level tokenizer (the `--smoke` model)."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    if (path / "config.json").is_file():
        return path
    text = demo_text_path().read_text()
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator([text], trainers.BpeTrainer(vocab_size=4096, special_tokens=["<s>", "</s>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", tok.token_to_id("<s>"))])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>")
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=4 * hidden, num_hidden_layers=layers, num_attention_heads=hidden // 64,
                         num_key_value_heads=max(1, hidden // 256), max_position_embeddings=32768, bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    LlamaForCausalLM(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def generation_speed(path: str, device: str, dtype: str, prompt_tokens: int = 2048, new_tokens: int = 128, repeats: int = 3) -> dict:
    """ctxeval's greedy generation (`HFScorer.generate`: KV cache, float32 head) against
    transformers' own `model.generate(do_sample=False)` on the same prompt, in the same process."""
    import numpy as np
    import torch

    from ctxeval.backends.hf import HFScorer

    scorer = HFScorer(Path(path), "speed", device=device, dtype=dtype)
    ids = scorer.tokenize(demo_text_path().read_text())[:prompt_tokens]
    prompt = np.asarray([scorer.info.bos_id, *ids], dtype=np.int32)

    def clock(fn) -> float:
        fn()  # warm-up
        if device == "cuda":
            torch.cuda.synchronize()
        started = time.perf_counter()
        for _ in range(repeats):
            fn()
        if device == "cuda":
            torch.cuda.synchronize()
        return (time.perf_counter() - started) / repeats

    tensor = torch.as_tensor(prompt[None].astype(np.int64), device=device)
    ours = clock(lambda: scorer.generate(prompt, new_tokens))
    peer = clock(lambda: scorer._model.generate(tensor, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False))
    return {"prompt_tokens": len(prompt), "new_tokens": new_tokens, "ctxeval_s": round(ours, 3), "transformers_generate_s": round(peer, 3), "ratio": round(ours / peer, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", action="append", default=[], help="NAME=DIR of a local transformers checkpoint (repeat)")
    parser.add_argument("--lengths", default="4096,8192,16384,32768")
    parser.add_argument("--samples", type=int, default=50)
    parser.add_argument("--tasks", default="all")
    parser.add_argument("--texts", nargs="*", default=[], help="texts for effective-length (the Gutenberg books); none: RULER only")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--out", type=Path, default=Path("runs/ruler-gpu"))
    parser.add_argument("--smoke", action="store_true", help="a random-weight Llama (12 layers, 1024 wide) at 1K and 2K tokens, 2 samples")
    args = parser.parse_args()
    models = [spec.split("=", 1) for spec in args.model]
    if args.smoke:
        models = [("random-llama", str(random_llama(args.out / "random-llama", 12, 1024)))]
        args.lengths, args.samples = "1024,2048", 2
    if not models:
        raise SystemExit("name at least one --model NAME=DIR (or --smoke)")
    lengths = tuple(int(n) for n in args.lengths.split(","))
    tasks = tuple(TASKS) if args.tasks == "all" else tuple(args.tasks.split(","))
    specs = tuple(f"hf:{path}" for _, path in models)
    started = time.time()
    ruler = ctxeval.ruler(tasks=tasks, lengths=lengths, samples=args.samples, models=specs, device=args.device, dtype=args.dtype, out=args.out / "ruler", progress=True)
    print(f"ruler: {time.time() - started:.0f} s for {len(ruler.samples)} samples", flush=True)
    print(ruler.markdown)
    runs = [args.out / "ruler"]
    if args.texts:
        started = time.time()
        ctxeval.effective_length(tuple(args.texts), models=specs, lengths=(1024, 2048, *lengths), starts=4, targets=32, device=args.device, dtype=args.dtype,
                                 out=args.out / "effective-length", progress=True)
        print(f"effective-length: {time.time() - started:.0f} s", flush=True)
        runs.append(args.out / "effective-length")
    for (name, path), spec in zip(models, specs):
        mine = ruler.effective_lengths[ruler.models[specs.index(spec)]]["mean"]
        published = PUBLISHED.get(Path(path).name)
        print(json.dumps({"model": name, "ctxeval_ruler_effective_length": mine, "published": published}))
    if len(models) >= 2:
        agreement = ctxeval.agreement(runs, out=args.out / "agreement")
        print(agreement.markdown)
    print(json.dumps({"generation_speed": generation_speed(models[0][1], args.device, args.dtype)}))


if __name__ == "__main__":
    main()
