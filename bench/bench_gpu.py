"""Long-context exact scoring on one device: ctxeval's hf backend against a bare forward and lm-eval.

A random-weight model built from a real config (Llama-3-8B-shaped: 32 layers, hidden 4096,
GQA 32/8 heads, 128,256-token vocabulary, bf16; `AutoModelForCausalLM.from_config`, nothing
downloaded) is saved once with a byte-level BPE tokenizer (tests/hf_tiny.py) and loaded once
per model shape, in a fresh process. There, on the same single window of N tokens (BOS + N-1
text tokens, every token a target), three sides are timed (best of --repeats after a warm-up
window), with their peak memory above the loaded weights:

- ctxeval: `HFScorer.score` with the exact full-vocabulary rank and top-20 of every token;
- bare forward: `log_softmax(model(ids).logits)` gathered at the targets (what lm-eval computes);
- lm-eval: `HFLM.loglikelihood_rolling` with `max_length` N (one window), wrapping the same model.

Then, on the rows of the first length: the head's parts timed one by one (the float32-copy GEMM
against the half-precision GEMM with float32 output, the fused reduction eager and compiled,
torch.topk against the top-k from the tiles with the largest maxima), the head's numbers against a float64 reference (docs/numerics.md's
accumulation bound), and packed vs unpacked exact sweeps (n_c passes of L+1 tokens).

    python bench/bench_gpu.py --out gpu_table.md      # cuda: 8K/32K/128K on 32 layers, 8K on 4 layers, then the head's tests
    python bench/bench_gpu.py --device cpu --small    # tiny config, 256-1K tokens, a couple of minutes on a CPU
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

LLAMA3_8B = dict(
    vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
    num_key_value_heads=8, max_position_embeddings=131072, rope_theta=500000.0, rms_norm_eps=1e-5, tie_word_embeddings=False,
)
TINY = dict(
    vocab_size=32000, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
    num_key_value_heads=2, head_dim=16, max_position_embeddings=4096, tie_word_embeddings=False,
)
TOP_K = 20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--small", action="store_true", help="tiny config (2 layers, hidden 64, vocabulary 32,000) and 256-1K tokens: a CPU run in minutes")
    parser.add_argument("--lengths", default=None, help="window lengths on the full-depth model (default 8192,32768,131072; --small 256,512,1024)")
    parser.add_argument("--shallow", default=None, help="LAYERS:LENGTHS, the same shape with fewer layers (head-dominated); default 4:8192, --small 1:256; 'none' to skip")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--repeats", type=int, default=3, help="timed calls per side and length after the warm-up; the best counts (2 from 65,536 tokens on)")
    parser.add_argument("--sweep-lengths", default=None, help="L of the packed-vs-unpacked exact sweep (default 32,128,512; --small 32,128; '' to skip)")
    parser.add_argument("--n-compare", type=int, default=None, help="passes per L in the sweep (n_c; default 64, --small 16)")
    parser.add_argument("--gemma", type=int, default=0, help="also score the embedded Gemma 3 270M over this many tokens (e.g. 32768)")
    parser.add_argument("--keep", default=None, help="save the random-weight models under this folder and reuse them (default: a temporary folder)")
    parser.add_argument("--out", default=None, help="also write the tables (Markdown) to this file, and the raw results beside it (.json)")
    parser.add_argument("--profile", action="store_true", help="also profile one ctxeval score at the first length of each model shape (torch profiler: the ops with the most device time)")
    parser.add_argument("--no-tests", action="store_true", help="skip tests/test_hf_head.py (run at the end: on CUDA its device-only tests run too)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_child(json.loads(args.child))))
        return
    lengths = [int(x) for x in (args.lengths or ("256,512,1024" if args.small else "8192,32768,131072")).split(",")]
    shallow = args.shallow or ("1:256" if args.small else "4:8192")
    args.n_compare = args.n_compare or (16 if args.small else 64)
    sweep_lengths = args.sweep_lengths if args.sweep_lengths is not None else ("32,128" if args.small else "32,128,512")
    config = TINY if args.small else LLAMA3_8B
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ctxeval-bench-gpu-") as tmp:
        folder = Path(args.keep or tmp)
        sweep = [int(L) for L in sweep_lengths.split(",") if L]
        jobs = [{"layers": config["num_hidden_layers"], "lengths": lengths, "time_parts": True, "sweep_lengths": sweep, "profile": args.profile}]
        if shallow != "none":
            layers, shallow_lengths = shallow.split(":")
            jobs.append({"layers": int(layers), "lengths": [int(x) for x in shallow_lengths.split(",")], "time_parts": False, "sweep_lengths": [], "profile": args.profile})
        if args.gemma:
            jobs.append({"layers": 0, "lengths": [args.gemma], "time_parts": False, "sweep_lengths": [], "gemma": True})
        results = []
        for job in jobs:  # each model in a fresh process: its memory and a crash are its own
            path = _gemma_dir() if job.get("gemma") else str(folder / f"model-{job['layers']}l")
            job |= {"config": config | {"num_hidden_layers": job["layers"]}, "device": args.device, "dtype": args.dtype, "repeats": args.repeats,
                    "n_c": args.n_compare, "path": path}
            results.append(child(job))
            print(json.dumps(results[-1]), file=sys.stderr, flush=True)
    tests = "" if args.no_tests else run_tests()
    text = report(args, results, time.perf_counter() - started) + tests
    print(text)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
        Path(args.out).with_suffix(".json").write_text(json.dumps(results, indent=1), encoding="utf-8")


def run_tests() -> str:
    """tests/test_hf_head.py on this machine: its CUDA tests run where CUDA is present."""
    path = os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]))  # ctxeval from this checkout, installed or not
    proc = subprocess.run([sys.executable, "-m", "pytest", "tests/test_hf_head.py", "-q", "-rs", "-p", "no:cacheprovider"], capture_output=True, text=True, cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=path))
    lines = proc.stdout.strip().splitlines()
    failures = [line for line in lines if line.startswith(("FAILED", "ERROR", "SKIPPED"))]
    return "\n`pytest tests/test_hf_head.py`: " + (lines[-1] if lines else proc.stderr.strip()[-300:]) + "".join(f"\n- {f}" for f in failures) + "\n"


def child(job: dict) -> dict:
    proc = subprocess.run([sys.executable, __file__, "--child", json.dumps(job)], capture_output=True, text=True)
    if proc.returncode != 0:
        return job | {"error": (proc.stderr.strip().splitlines() or ["failed"])[-1], "stderr_tail": proc.stderr[-3000:]}
    return job | json.loads(proc.stdout.strip().splitlines()[-1])


def run_child(job: dict) -> dict:
    import torch

    path = Path(job["path"])
    if not (path / "config.json").is_file():
        build_model(path, job["config"], job["dtype"], max(job["lengths"]), job["device"])
    from ctxeval.backends.hf import HFScorer

    start = time.perf_counter()
    scorer = HFScorer(path, "bench", device=job["device"], dtype=job["dtype"])
    out = {"load_s": time.perf_counter() - start, "versions": _versions(), "machine": _machine(job["device"]), "rows": []}
    for n in job["lengths"]:
        ids = _ids(scorer._tok, n)
        for side in ("bare", "ctxeval", "lm-eval"):
            out["rows"].append({"n": n, "side": side} | _measure(side, scorer, ids, job))
            print(json.dumps(out["rows"][-1]), file=sys.stderr, flush=True)
    if job["time_parts"]:
        rows = _target_rows(scorer, _ids(scorer._tok, job["lengths"][0]))
        out["parts"] = head_parts(scorer, rows, job["device"])
        out["numerics"] = head_numerics(scorer, rows[:256])
        del rows
    if job.get("profile"):
        out["profile"] = profile_score(scorer, _ids(scorer._tok, job["lengths"][0]), job["device"])
    if job["sweep_lengths"]:
        ids = _ids(scorer._tok, 20000)
        out["sweep"] = [{"L": L} | _sweep_one(scorer, ids, L, job["n_c"], job["device"]) for L in job["sweep_lengths"]]
    return out


def _gemma_dir() -> str:
    from ctxeval.backends.hf_embedded import embedded_hf_dir
    from ctxeval.config import DEFAULT_MODEL

    return str(embedded_hf_dir(DEFAULT_MODEL)[0])


def build_model(path: Path, config: dict, dtype: str, max_len: int, device: str) -> None:
    """Save a random-weight Llama of `config` with a byte-level BPE tokenizer trained on the demo
    text; the weights are drawn on `device` (an 8B model initialises in seconds on a GPU, minutes on a CPU)."""
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig

    from ctxeval.data.texts import load_text
    from tests.hf_tiny import byte_bpe_tokenizer

    tok = byte_bpe_tokenizer(load_text("demo").content[:200000], 4096)
    cfg = LlamaConfig(**(config | {"max_position_embeddings": max(config["max_position_embeddings"], max_len + 1)}), bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(cfg, dtype=getattr(torch, dtype))
    model.save_pretrained(str(path))
    tok.save_pretrained(str(path))
    del model
    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()


def _ids(tok, n: int) -> list[int]:
    """BOS and the first n - 1 tokens of the (repeated) demo text: one window of n tokens, the
    same ids for every side."""
    from ctxeval.data.texts import load_text

    demo = load_text("demo").content
    text = demo * (1 + (4 * n) // len(demo))
    return [tok.bos_token_id, *tok(text, add_special_tokens=False)["input_ids"][: n - 1]]


def _measure(side: str, scorer, ids: list[int], job: dict) -> dict:
    """Best of `repeats` timed calls after one warm-up on the first 128 tokens; peak memory above
    what was allocated before the timed calls; an out-of-memory error is a result, not a failure."""
    import torch

    device = job["device"]
    repeats = job["repeats"] if len(ids) < 65536 else min(job["repeats"], 2)
    try:
        run, warm = _side(side, scorer, ids, device)
        warm()
        base = _memory_baseline(device)
        times, total = [], 0.0
        for _ in range(repeats):
            start = time.perf_counter()
            total = run()
            _sync(device)
            times.append(time.perf_counter() - start)
        return {"seconds": min(times), "tok_s": len(ids) / min(times), "peak_bytes": _peak(device, base), "total_logprob": total, "oom": False}
    except torch.OutOfMemoryError:
        return {"oom": True}
    except Exception as exc:  # ctxeval's one-line UserError for a window that does not fit
        if "does not fit" in str(exc):
            return {"oom": True}
        return {"error": f"{type(exc).__name__}: {exc}"[:300]}
    finally:
        gc.collect()
        if device == "cuda":
            torch.cuda.empty_cache()


def _side(side: str, scorer, ids: list[int], device: str):
    """(the timed call returning Σ log-probability of the window's targets, its warm-up)."""
    import numpy as np
    import torch

    n = len(ids)
    if side == "ctxeval":
        inp, targets = np.asarray(ids, dtype=np.int32), np.asarray(ids[1:], dtype=np.int32)
        return (lambda: float(scorer.score(inp, np.arange(n - 1), targets, TOP_K, (1.0,)).logprob.sum()),
                lambda: scorer.score(inp[:128], np.arange(127), targets[:127], TOP_K, (1.0,)))
    if side == "bare":
        tensor = torch.as_tensor([ids], device=device)

        def bare(t=tensor) -> float:
            with torch.inference_mode():
                logprobs = torch.log_softmax(scorer._model(input_ids=t).logits[0, :-1], dim=-1)
                return float(logprobs.gather(1, t[0, 1:, None]).sum())

        return bare, lambda: bare(tensor[:, :128])
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM

    lm = HFLM(pretrained=scorer._model, tokenizer=scorer._tok, batch_size=1, max_length=n, add_bos_token=False)
    text = scorer._tok.decode(ids[1:])
    request = Instance(request_type="loglikelihood_rolling", doc={}, arguments=(text,), idx=0)
    short = Instance(request_type="loglikelihood_rolling", doc={}, arguments=(text[:512],), idx=0)
    return (lambda: float(lm.loglikelihood_rolling([request], disable_tqdm=True)[0]),
            lambda: lm.loglikelihood_rolling([short], disable_tqdm=True))


def _target_rows(scorer, ids: list[int]):
    """The body's last hidden states of one window: the rows the head scores."""
    import torch

    with torch.inference_mode():
        return scorer._body(input_ids=torch.as_tensor([ids], device=scorer._device), use_cache=False).last_hidden_state[0, :-1].clone()


def head_parts(scorer, rows, device: str) -> dict:
    """Milliseconds of each part of the head on `rows` (one block of the first length's rows),
    best of 5 after a warm-up: the alternatives measured for the CUDA path."""
    import torch

    from ctxeval.backends.logits_torch import _compiled_row_reduction, _row_reduction, _top_k, score_block_device

    head = scorer._output_head
    weight = head.weight
    targets = torch.as_tensor([1] * len(rows), device=rows.device)
    out: dict = {"rows": len(rows), "vocab": int(weight.shape[0]), "hidden": int(weight.shape[1])}
    with torch.inference_mode():
        w32 = weight.float()
        out["gemm_float32_copy"] = _time(lambda: torch.nn.functional.linear(rows.float(), w32), device)
        del w32
        half = weight.to(torch.bfloat16)
        try:
            out["gemm_bf16_out_float32"] = _time(lambda: torch.mm(rows.to(torch.bfloat16), half.t(), out_dtype=torch.float32), device)
        except (RuntimeError, TypeError, NotImplementedError) as exc:
            out["gemm_bf16_out_float32"] = f"unsupported on {device} ({type(exc).__name__})"
        del half
        logits = head(rows)
        vals = torch.topk(logits, TOP_K, dim=1).values
        args = (logits, targets, vals[:, :1], vals[:, -1:], (1.0,))
        out["reduction_eager"] = _time(lambda: _row_reduction(*args), device)
        if device == "cuda":
            out["reduction_compiled"] = _time(lambda: _compiled_row_reduction()(*args), device)
        out["torch_topk"] = _time(lambda: torch.topk(logits, TOP_K, dim=1), device)
        out["topk_from_tiles"] = _time(lambda: _top_k(logits, TOP_K), device)
        out["topk_from_tiles_equal_values"] = bool(torch.equal(torch.topk(logits, TOP_K, dim=1).values, _top_k(logits, TOP_K)[0]))
        out["score_block"] = _time(lambda: score_block_device(logits, targets, TOP_K, (1.0,)), device)
        out["head_and_score_block"] = _time(lambda: score_block_device(head(rows), targets, TOP_K, (1.0,)), device)
    return out


def head_numerics(scorer, rows) -> dict:
    """The head's float32 logits (the scorer's path) against the float64 product of the same
    hidden rows and head weights: the largest error, the largest error over docs/numerics.md's bound
    d * eps_f32 * Σ|h w|, log-probabilities, and ranks where no other logit lies within the bounds."""
    import numpy as np
    import torch

    from ctxeval.backends.logits_torch import score_block_device
    from tests.numeric_paths import head_reference

    with torch.inference_mode():
        logits = scorer._output_head(rows)
        ref, bound = head_reference(rows, scorer._output_head.weight)
        err = (logits.double() - ref).abs()
        targets = ref.argmax(dim=1)
        targets[1::2] = torch.randint(0, ref.shape[1], (len(rows) // 2,), generator=torch.Generator().manual_seed(0)).to(ref.device)
        scores = score_block_device(logits, targets, TOP_K, ())
        t = ref.gather(1, targets[:, None])
        lse = torch.logsumexp(ref, dim=1)
        slack = bound + bound.gather(1, targets[:, None])
        near = ((ref - t).abs() <= slack).sum(dim=1) - 1  # other logits within the bounds of the target's
        rank64 = 1 + (ref > t).sum(dim=1)
    clear = (near == 0).cpu().numpy()
    same = scores.rank == rank64.cpu().numpy()
    return {
        "rows": len(rows),
        "max_abs_dlogit": float(err.max()),
        "max_dlogit_over_bound": float((err / bound).max()),
        "median_bound": float(bound.median()),
        "max_abs_dlogprob": float(np.abs(scores.logprob - (t[:, 0] - lse).cpu().numpy()).max()),
        "rows_clear": int(clear.sum()),
        "ranks_equal_where_clear": int(same[clear].sum()),
        "ranks_equal_all": int(same.sum()),
    }


def profile_score(scorer, ids: list[int], device: str, top: int = 15) -> dict:
    """One ctxeval `score` of the window under torch's profiler (after the timed calls warmed it):
    the ops with the most self time on the device (on the CPU where there is no device), with
    their share of the total — where a missed throughput goal loses its time."""
    import numpy as np
    from torch.profiler import ProfilerActivity, profile

    inp = np.asarray(ids, dtype=np.int32)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    start = time.perf_counter()
    with profile(activities=activities) as prof:
        scorer.score(inp, np.arange(len(ids) - 1), inp[1:], TOP_K, (1.0,))
        _sync(device)
    wall = time.perf_counter() - start
    key = "self_device_time_total" if device == "cuda" else "self_cpu_time_total"
    events = [e for e in prof.key_averages() if getattr(e, key) > 0]
    total = sum(getattr(e, key) for e in events)
    events.sort(key=lambda e: getattr(e, key), reverse=True)
    return {"n": len(ids), "clock": "device" if device == "cuda" else "cpu", "wall_ms": wall * 1e3, "total_ms": total / 1e3,
            "ops": [{"op": e.key[:90], "ms": getattr(e, key) / 1e3, "share": getattr(e, key) / total, "calls": e.count} for e in events[:top]]}


def _sweep_one(scorer, ids, L: int, n_c: int, device: str) -> dict:
    """n_c exact-sweep passes of L+1 tokens (BOS + L context tokens, the last token scored): one
    forward each (unpacked) vs `score_batch` (packed [B, L+1] forwards)."""
    import numpy as np

    ids = np.asarray(ids[1:], dtype=np.int32)
    starts = np.random.default_rng(0).integers(0, len(ids) - L - 1, n_c)
    bos = scorer.info.bos_id
    passes = [(np.asarray([bos, *ids[s : s + L]], dtype=np.int32), np.asarray([L]), ids[s + L : s + L + 1]) for s in starts]
    scorer.score_batch(passes[:2], TOP_K, (1.0,))  # warm-up
    _sync(device)
    start = time.perf_counter()
    single = [scorer.score(*p, TOP_K, (1.0,)) for p in passes]
    _sync(device)
    t_single = time.perf_counter() - start
    start = time.perf_counter()
    packed = scorer.score_batch(passes, TOP_K, (1.0,))
    _sync(device)
    t_packed = time.perf_counter() - start
    diff = max(abs(float(a.logprob[0] - b.logprob[0])) for a, b in zip(single, packed))
    same_rank = sum(int(a.rank[0] == b.rank[0]) for a, b in zip(single, packed))
    return {"n_c": n_c, "unpacked_s": t_single, "packed_s": t_packed, "max_abs_dlogprob": diff, "same_rank": same_rank}


def _time(fn, device: str, repeats: int = 5) -> float:
    fn()
    _sync(device)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        _sync(device)
        best = min(best, time.perf_counter() - start)
    return best * 1000


def _sync(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def _memory_baseline(device: str) -> int:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        return torch.cuda.memory_allocated()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # the peak RSS (VmHWM) starts again from the current RSS
    return _status_bytes("VmRSS")


def _peak(device: str, base: int) -> int:
    """Peak memory above `base`: CUDA's allocator peak, or on CPU the peak RSS (a coarser measure)."""
    import torch

    if device == "cuda":
        return torch.cuda.max_memory_allocated() - base
    return _status_bytes("VmHWM") - base


def _status_bytes(field: str) -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":")) * 1024


def _versions() -> dict:
    from importlib import metadata

    return {p: metadata.version(p) for p in ("torch", "transformers", "lm_eval")}


def _machine(device: str) -> str:
    import torch

    if device == "cuda":
        smi = shutil.which("nvidia-smi")
        driver = subprocess.run([smi, "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True, text=True).stdout.strip() if smi else ""
        props = torch.cuda.get_device_properties(0)
        return f"{props.name}, {props.total_memory // 2**20:,} MiB, driver {driver or '?'}, CUDA {torch.version.cuda}"
    with open("/proc/cpuinfo") as f:
        model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), platform.processor())
    return f"{model}, {torch.get_num_threads()} torch threads"


def report(args: argparse.Namespace, results: list[dict], seconds: float) -> str:
    """The Markdown tables: per model and length, the three sides and ctxeval's ratios to the other two."""
    first = next((r for r in results if "machine" in r), {})
    versions = ", ".join(f"{k} {v}" for k, v in first.get("versions", {}).items())
    lines = [
        f"{first.get('machine', args.device)}; {versions}; {args.dtype}; {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; whole run {seconds:.0f} s",
        "",
        "| model | tokens | bare forward tok/s | ctxeval tok/s | lm-eval tok/s | ctxeval / bare | ctxeval / lm-eval | peak above weights, GiB (bare / ctxeval / lm-eval) | Σ logprob (bare / ctxeval / lm-eval) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        name = "Gemma 3 270M" if r.get("gemma") else f"{'tiny' if args.small else 'Llama-3-8B shape'}, {r['layers']} layer{'s' if r['layers'] != 1 else ''}"
        if "error" in r:
            lines.append(f"| {name} | | error: {r['error'][:120]} | | | | | | |")
            continue
        by_n: dict = {}
        for row in r["rows"]:
            by_n.setdefault(row["n"], {})[row["side"]] = row
        for n, sides in by_n.items():
            cell = {s: _cell(sides.get(s, {})) for s in ("bare", "ctxeval", "lm-eval")}
            ce, bare, lm = (sides.get(s, {}) for s in ("ctxeval", "bare", "lm-eval"))
            lines.append(
                f"| {name} | {n:,} | {cell['bare']} | {cell['ctxeval']} | {cell['lm-eval']} | {_ratio(ce, bare)} | {_ratio(ce, lm)} "
                f"| {' / '.join(_gib(sides.get(s, {})) for s in ('bare', 'ctxeval', 'lm-eval'))} "
                f"| {' / '.join(_total(sides.get(s, {})) for s in ('bare', 'ctxeval', 'lm-eval'))} |"
            )
    loads = ", ".join(f"{r['layers']} layers {r.get('load_s', float('nan')):.1f}" for r in results)
    lines.append(f"\nload of each model (s): {loads}")
    for r in results:
        if "parts" in r:
            p = r["parts"]
            lines += ["", f"Head parts on {p['rows']:,} rows x {p['vocab']:,} (hidden {p['hidden']:,}), ms, best of 5:", ""]
            lines += ["| part | ms |", "|---|---|"] + [f"| {k} | {v:.2f} |" if isinstance(v, float) else f"| {k} | {v} |" for k, v in p.items() if k not in ("rows", "vocab", "hidden")]
        if "numerics" in r:
            m = r["numerics"]
            lines += ["", f"Head numerics on {m['rows']} rows (half the targets the float64 argmax, half random) against float64:", ""]
            lines += ["| measure | value |", "|---|---|"] + [f"| {k} | {v:.3g} |" if isinstance(v, float) else f"| {k} | {v} |" for k, v in m.items()]
        if "profile" in r:
            prof = r["profile"]
            lines += ["", f"Profile of one ctxeval score of {prof['n']:,} tokens ({prof['clock']} self time {prof['total_ms']:,.1f} ms; wall {prof['wall_ms']:,.1f} ms under the profiler):", ""]
            lines += ["| op | ms | share | calls |", "|---|---|---|---|"] + [f"| `{o['op']}` | {o['ms']:.2f} | {o['share']:.1%} | {o['calls']} |" for o in prof["ops"]]
        if r.get("sweep"):
            lines += ["", f"Exact sweep, {args.n_compare} passes per L: unpacked (one forward per pass) vs packed (score_batch)", ""]
            lines += ["| L | unpacked s | packed s | speed-up | max abs Δ logprob | same rank |", "|---|---|---|---|---|---|"]
            lines += [f"| {s['L']} | {s['unpacked_s']:.2f} | {s['packed_s']:.2f} | {s['unpacked_s'] / s['packed_s']:.2f}x | {s['max_abs_dlogprob']:.2e} | {s['same_rank']}/{s['n_c']} |" for s in r["sweep"]]
    return "\n".join(lines) + "\n"


def _cell(row: dict) -> str:
    if row.get("oom"):
        return "out of memory"
    if "error" in row:
        return f"error: {row['error'][:60]}"
    return f"{row['tok_s']:,.0f}" if "tok_s" in row else "—"


def _ratio(a: dict, b: dict) -> str:
    return f"{a['tok_s'] / b['tok_s']:.2f}x" if "tok_s" in a and "tok_s" in b else "—"


def _gib(row: dict) -> str:
    return f"{row['peak_bytes'] / 2**30:.2f}" if "peak_bytes" in row else "—"


def _total(row: dict) -> str:
    return f"{row['total_logprob']:.1f}" if "total_logprob" in row else "—"


if __name__ == "__main__":
    main()
