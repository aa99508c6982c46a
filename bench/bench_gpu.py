"""Long-context exact scoring on one device: ctxeval's hf backend vs lm-eval's HFLM.loglikelihood_rolling.

A random-weight model built from a real config (Llama-3-8B-shaped: 32 layers, hidden 4096,
GQA 32/8 heads, 128,256-token vocabulary, bf16; `AutoModelForCausalLM.from_config`, nothing
downloaded) is saved once with a byte-level BPE tokenizer (tests/hf_tiny.py), then each side
scores the same single window of N tokens (BOS + N-1 text tokens, every token a target) in a
fresh process: tokens/s, peak memory (`torch.cuda.max_memory_allocated` on CUDA; on CPU the
process's peak RSS above its RSS after loading), and whether it ran out of memory. ctxeval also
computes the exact full-vocabulary rank and top-20 of every token; lm-eval only log-probabilities.
Then packed vs unpacked exact sweeps (n_c passes of L+1 tokens scoring their last token) at small
L, and optionally the embedded Gemma 3 270M (`--gemma`, 262,144-token vocabulary).

    python bench/bench_gpu.py                      # cuda, 8K / 32K / 128K, Llama-3-8B shape
    python bench/bench_gpu.py --device cpu --small # tiny config (2 layers, hidden 64, 128K vocab), 512-2K
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

LLAMA3_8B = dict(
    vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
    num_key_value_heads=8, max_position_embeddings=131072, rope_theta=500000.0, rms_norm_eps=1e-5, tie_word_embeddings=False,
)
TINY = dict(
    vocab_size=128256, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
    num_key_value_heads=2, head_dim=16, max_position_embeddings=8192, tie_word_embeddings=False,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--small", action="store_true", help="tiny config and 512-2K contexts (runs on a CPU in minutes)")
    parser.add_argument("--lengths", default=None, help="comma-separated window lengths (default 8192,32768,131072; --small 512,1024,2048)")
    parser.add_argument("--dtype", default=None, help="default bfloat16 on cuda, float32 on cpu")
    parser.add_argument("--sweep-lengths", default="32,128,512", help="L of the packed-vs-unpacked exact sweep")
    parser.add_argument("--n-compare", type=int, default=64, help="passes per L in the sweep (n_c)")
    parser.add_argument("--gemma", type=int, default=0, help="also score the embedded Gemma 3 270M over this many tokens (e.g. 32768)")
    parser.add_argument("--layers", type=int, default=None, help="override the config's layer count (a shallower model of the same width and vocabulary)")
    parser.add_argument("--keep", default=None, help="save the random-weight model in this folder and keep it (default: a temporary folder)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_child(json.loads(args.child))))
        return
    dtype = args.dtype or ("bfloat16" if args.device == "cuda" else "float32")
    lengths = [int(x) for x in (args.lengths or ("512,1024,2048" if args.small else "8192,32768,131072")).split(",")]
    with tempfile.TemporaryDirectory(prefix="ctxeval-bench-gpu-") as tmp:
        config = (TINY if args.small else LLAMA3_8B) | ({"num_hidden_layers": args.layers} if args.layers else {})
        path = build_model(Path(args.keep or Path(tmp) / "model"), config, dtype, max(lengths), args.device)
        jobs = [{"task": "window", "side": side, "path": str(path), "device": args.device, "dtype": dtype, "n": n} for n in lengths for side in ("ctxeval", "lm-eval")]
        if args.gemma:
            jobs += [{"task": "window", "side": side, "path": "gemma", "device": args.device, "dtype": dtype, "n": args.gemma} for side in ("ctxeval", "lm-eval")]
        rows = []
        for job in jobs:  # each row printed as it comes, so a run cut short keeps what it measured
            rows.append(child(job))
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
        sweep_lengths = [int(L) for L in args.sweep_lengths.split(",")]
        sweep = child({"task": "sweep", "path": str(path), "device": args.device, "dtype": dtype, "lengths": sweep_lengths, "n_c": args.n_compare})
        sweep = sweep.get("rows") or [{"L": L, "error": sweep.get("error", "failed")} for L in sweep_lengths]
    report(args, dtype, rows, sweep)


def build_model(path: Path, config: dict, dtype: str, max_len: int, device: str) -> Path:
    """Save a random-weight Llama of `config` with a byte-level BPE tokenizer trained on the demo
    text; the weights are drawn on `device` (an 8B model initialises in seconds on a GPU, minutes on a CPU)."""
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig

    from ctxeval.data.texts import load_text
    from tests.hf_tiny import byte_bpe_tokenizer

    tok = byte_bpe_tokenizer(load_text("demo").content[:200000], 4096)
    cfg = LlamaConfig(**(config | {"max_position_embeddings": max(config["max_position_embeddings"], max_len)}), bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(cfg, dtype=getattr(torch, dtype))
    model.save_pretrained(str(path))
    tok.save_pretrained(str(path))
    return path


def child(job: dict) -> dict:
    """Run one measurement in a fresh interpreter, so peak memory and an OOM belong to it alone."""
    proc = subprocess.run([sys.executable, __file__, "--child", json.dumps(job)], capture_output=True, text=True)
    if proc.returncode != 0:
        return job | {"error": (proc.stderr.strip().splitlines() or ["failed"])[-1]}
    return job | json.loads(proc.stdout.strip().splitlines()[-1])


def run_child(job: dict) -> dict:
    import torch

    if job["task"] == "sweep":
        return run_sweep(job)
    try:
        text, ids, bos, runner, warm = (lmeval_runner if job["side"] == "lm-eval" else ctxeval_runner)(job)
        n = len(ids)
        warm()  # a short window first: kernel selection and allocator start-up are not timed, on either side
        base = _memory_baseline(job["device"])
        start = time.perf_counter()
        total = runner()
        if job["device"] == "cuda":
            torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        return {"tokens": n, "seconds": seconds, "tok_s": n / seconds, "peak_bytes": _peak(job["device"], base), "total_logprob": total, "oom": False}
    except torch.OutOfMemoryError:
        return {"oom": True}
    except Exception as exc:  # ctxeval's one-line UserError for a window that does not fit
        if "does not fit" in str(exc):
            return {"oom": True}
        raise


def _text_and_ids(tok, n: int) -> tuple[str, list[int]]:
    """A prefix of the (repeated) demo text that tokenizes to exactly `n` - 1 tokens plus BOS."""
    from ctxeval.data.texts import load_text

    demo = load_text("demo").content
    text = demo * (1 + (4 * n) // len(demo))
    enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
    end = enc["offset_mapping"][n - 2][1]
    prefix = text[:end]
    ids = tok(prefix, add_special_tokens=False)["input_ids"]
    return prefix, ids


def lmeval_runner(job: dict):
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM

    path = _gemma_dir() if job["path"] == "gemma" else job["path"]
    lm = HFLM(pretrained=path, device=job["device"], dtype=job["dtype"], batch_size=1, max_length=job["n"], add_bos_token=False)
    text, ids = _text_and_ids(lm.tokenizer, job["n"])
    request = Instance(request_type="loglikelihood_rolling", doc={}, arguments=(text,), idx=0)
    short = Instance(request_type="loglikelihood_rolling", doc={}, arguments=(text[:512],), idx=0)
    return (text, ids, lm.prefix_token_id, lambda: float(lm.loglikelihood_rolling([request], disable_tqdm=True)[0]),
            lambda: lm.loglikelihood_rolling([short], disable_tqdm=True))


def ctxeval_runner(job: dict):
    import numpy as np

    from ctxeval.backends.hf import HFScorer

    path = Path(_gemma_dir() if job["path"] == "gemma" else job["path"])
    scorer = HFScorer(path, "bench", device=job["device"], dtype=job["dtype"])
    text, ids = _text_and_ids(scorer._tok, job["n"])
    inp = np.asarray([scorer.info.bos_id, *ids[:-1]], dtype=np.int32)
    one_pass = (inp, np.arange(len(ids)), np.asarray(ids, dtype=np.int32))
    short = (inp[:128], np.arange(128), np.asarray(ids[:128], dtype=np.int32))
    return (text, ids, scorer.info.bos_id, lambda: float(scorer.score(*one_pass, 20, (1.0,)).logprob.sum()),
            lambda: scorer.score(*short, 20, (1.0,)))


def run_sweep(job: dict) -> dict:
    """For every L: n_c exact-sweep passes of L+1 tokens (BOS + L context tokens, the last token
    scored), one forward each (unpacked) vs `score_batch` (packed [B, L+1] forwards); one model load."""
    import numpy as np

    from ctxeval.backends.hf import HFScorer

    scorer = HFScorer(Path(job["path"]), "bench", device=job["device"], dtype=job["dtype"])
    ids = np.asarray(_text_and_ids(scorer._tok, 20000)[1], dtype=np.int32)
    return {"rows": [{"L": L, "n_c": job["n_c"]} | _sweep_one(scorer, ids, L, job["n_c"], job["device"]) for L in job["lengths"]]}


def _sweep_one(scorer, ids, L: int, n_c: int, device: str) -> dict:
    import numpy as np
    import torch

    starts = np.random.default_rng(0).integers(0, len(ids) - L - 1, n_c)
    passes = [(np.asarray([scorer.info.bos_id, *ids[s : s + L]], dtype=np.int32), np.asarray([L]), ids[s + L : s + L + 1]) for s in starts]
    scorer.score_batch(passes[:2], 20, (1.0,))  # warm-up
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    sync()
    start = time.perf_counter()
    single = [scorer.score(*p, 20, (1.0,)) for p in passes]
    sync()
    t_single = time.perf_counter() - start
    start = time.perf_counter()
    packed = scorer.score_batch(passes, 20, (1.0,))
    sync()
    t_packed = time.perf_counter() - start
    diff = max(abs(float(a.logprob[0] - b.logprob[0])) for a, b in zip(single, packed))
    same_rank = sum(int(a.rank[0] == b.rank[0]) for a, b in zip(single, packed))
    return {"unpacked_s": t_single, "packed_s": t_packed, "max_abs_dlogprob": diff, "same_rank": same_rank}


def _gemma_dir() -> str:
    from ctxeval.backends.hf_embedded import embedded_hf_dir
    from ctxeval.config import DEFAULT_MODEL

    return str(embedded_hf_dir(DEFAULT_MODEL)[0])


def _memory_baseline(device: str) -> int:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        return torch.cuda.memory_allocated()
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


def _peak(device: str, base: int) -> int:
    """Peak memory above the loaded model: CUDA's allocator peak, or on CPU peak RSS minus the RSS after loading."""
    import torch

    if device == "cuda":
        return torch.cuda.max_memory_allocated() - base
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - base


def report(args: argparse.Namespace, dtype: str, rows: list[dict], sweep: list[dict]) -> None:
    import torch

    where = torch.cuda.get_device_name() if args.device == "cuda" else f"CPU, {torch.get_num_threads()} torch threads"
    print(f"\n{'tiny config' if args.small else 'Llama-3-8B-shaped config'}, random weights, {dtype}, {where}\n")
    print("| model | tokens | side | tok/s | peak memory above weights (GiB) | Σ logprob | ratio tok/s (ctxeval / lm-eval) | ratio memory |")
    print("|---|---|---|---|---|---|---|---|")
    by_key: dict = {}
    for r in rows:
        by_key.setdefault((r["path"], r["n"]), {})[r["side"]] = r
    for (path, n), sides in by_key.items():
        model = "Gemma 3 270M" if path == "gemma" else ("tiny" if args.small else "Llama-3-8B shape")
        lm, ce = sides.get("lm-eval", {}), sides.get("ctxeval", {})
        for side, r in (("lm-eval", lm), ("ctxeval", ce)):
            ratio = mem = ""
            if side == "ctxeval" and "tok_s" in lm and "tok_s" in ce:
                ratio, mem = f"{ce['tok_s'] / lm['tok_s']:.2f}x", f"{ce['peak_bytes'] / max(lm['peak_bytes'], 1):.2f}x"
            if r.get("oom"):
                print(f"| {model} | {n} | {side} | out of memory | | | | |")
            elif "error" in r:
                print(f"| {model} | {n} | {side} | error: {r['error'][:80]} | | | | |")
            else:
                print(f"| {model} | {n} | {side} | {r['tok_s']:.0f} | {r['peak_bytes'] / 2**30:.3f} | {r['total_logprob']:.2f} | {ratio} | {mem} |")
    print(f"\nExact sweep, {args.n_compare} passes per L, ctxeval hf: unpacked (one forward per pass) vs packed (score_batch)\n")
    print("| L | unpacked s | packed s | speed-up | max abs Δ logprob | same rank |")
    print("|---|---|---|---|---|---|")
    for s in sweep:
        if "error" in s:
            print(f"| {s['L']} | error: {s['error'][:80]} | | | | |")
        else:
            print(f"| {s['L']} | {s['unpacked_s']:.2f} | {s['packed_s']:.2f} | {s['unpacked_s'] / s['packed_s']:.2f}x | {s['max_abs_dlogprob']:.2e} | {s['same_rank']}/{s['n_c']} |")


if __name__ == "__main__":
    main()
