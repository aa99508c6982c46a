"""Benchmark: ctxeval at long windows against llama.cpp's own tools on the same windows, in one run.

Scoring (`--windows`): `ctxeval score --method fixed` on one window of W tokens of Moby-Dick
(exact ranks, top-20; every side reads the book's first 12 x W bytes) against `llama-perplexity --chunks 1 -c W` (built from the llama.cpp that
llama-cpp-python vendors, as bench_diff_llama_perplexity.py builds it: the same forwards, logits
for the chunk's second half only, no ranks) and, where its all-logits array fits in memory,
llama-cpp-python's own `Llama.eval` with all logits (`logits_all=True`) and a NumPy
log-softmax, rank and top-20 in blocks of 512 rows. All run with llama.cpp's sliding-window
cache at its window (`swa_full` off), flash attention off, n_batch 512, the same threads. Each
side runs in its own process (peak RSS is its own), the order alternates window by window, and
the table gives ratios, since a shared machine's load moves every side. ctxeval's side also
reports where its time went: llama.cpp's decodes and the scoring of the 262,144-token vocabulary
(`score_block`: log-softmax, exact ranks, top-20).

RULER (`--ruler-length`): one sample's prefill and greedy generation of up to the task's tokens
(to the end-of-generation token) by ctxeval's llama.cpp backend (`generate`, the path a RULER
sample takes when the greedy answer leaves the reference) against llama-cpp-python's
`Llama.generate` at temperature 0 on the same prompt ids. `--reuse-ab L` runs RULER's
per-sample work on `--ruler-samples` samples with and without prefix reuse, alternating sample by
sample; `--ruler-runs L` runs whole `ctxeval ruler` runs with and without it (`?prefix_reuse=0`),
their records compared. `--reuse-plan L` counts, without running the model, the prompt tokens
prefix reuse skips at length L (samples in run order, resumed at the sliding-window checkpoints).

    PYTHONPATH=src .venv/bin/python bench/bench_long_context.py --windows 4096 8192 16384 32768 \
        --ruler-length 4096 8192 16384 32767 --task niah_multikey_2 --reuse-ab 16384 --ruler-samples 4
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

MOBY = Path(__file__).resolve().parents[2] / "shared" / "data" / "gutenberg" / "melville-moby_dick.txt"
TOP_K, BLOCK, N_BATCH = 20, 512, 512
LLAMA_CPP_PYTHON = "0.3.36"  # llama-perplexity is built from this llama-cpp-python's vendored llama.cpp
PEER_LOGITS_LIMIT_GB = 12.0  # llama-cpp-python's `scores` (window x 262,144 float32) must fit beside the model


def window_text(window: int, out: Path) -> Path:
    """The first 12 x `window` bytes of Moby-Dick, every side's input: enough for llama-perplexity's
    2 x window tokens, and no side pays for tokenizing the rest of the book."""
    out.mkdir(parents=True, exist_ok=True)
    text = out / "text.txt"
    text.write_bytes(MOBY.read_bytes()[: 12 * window])
    return text


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _threads() -> int:
    from ctxeval.backends.cores import usable_cores

    return usable_cores()


def score_ctxeval(window: int, out: Path) -> dict:
    """`ctxeval score --method fixed` on one window, timing llama.cpp's decodes and the scoring."""
    import llama_cpp

    import ctxeval
    import ctxeval.backends.llamacpp as backend

    spent = {"decode": 0.0, "ranking": 0.0}
    batches: list[float] = []
    decode, score_block = llama_cpp.llama_decode, backend.score_block

    def timed_decode(*args):
        t0 = time.perf_counter()
        status = decode(*args)
        batches.append(time.perf_counter() - t0)
        spent["decode"] += batches[-1]
        return status

    def timed_score(*args, **kwargs):
        t0 = time.perf_counter()
        result = score_block(*args, **kwargs)
        spent["ranking"] += time.perf_counter() - t0
        return result

    llama_cpp.llama_decode, backend.score_block = timed_decode, timed_score
    t0 = time.perf_counter()
    text = window_text(window, out / "input")
    result = ctxeval.score((str(text),), method="fixed", window=window, max_tokens=window, top_k=TOP_K, out=out)
    seconds = time.perf_counter() - t0
    return {"side": "ctxeval score --method fixed", "window": window, "tokens": len(result.records), "seconds": seconds,
            "decode_seconds": spent["decode"], "ranking_seconds": spent["ranking"], "batch_seconds": batches, "peak_rss_mb": peak_rss_mb()}


def score_llama_perplexity(window: int, out: Path) -> dict:
    """`llama-perplexity` on one chunk of `window` tokens (BOS first): the same forwards, logits
    for the chunk's second half only, no ranks. Its peak RSS is the child's."""
    sys.path.insert(0, str(Path(__file__).parent))
    from bench_diff_llama_perplexity import build_llama_perplexity

    from ctxeval.backends.model_files import embedded_model_path

    binary, _ = build_llama_perplexity(LLAMA_CPP_PYTHON, _threads())
    threads = str(_threads())
    text = window_text(window, out)
    command = [str(binary), "-m", str(embedded_model_path()), "-f", str(text), "-c", str(window), "-b", str(N_BATCH), "-ub", str(N_BATCH),
               "--chunks", "1", "-t", threads, "-tb", threads, "-fa", "off"]
    t0 = time.perf_counter()
    with (out / "llama-perplexity.log").open("w") as log:
        status = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT).returncode
    seconds = time.perf_counter() - t0
    text = (out / "llama-perplexity.log").read_text(errors="replace")
    side = {"side": "llama-perplexity (second half scored, no ranks)", "window": window, "tokens": window, "scored": window - window // 2 - 1,
            "seconds": seconds, "peak_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}
    if "std::bad_alloc" in text:  # it reserves the window's logits, window x 262,144 floats, before its first decode
        return side | {"failed": f"out of memory (std::bad_alloc) reserving {window} x 262,144 float logits, {window * 262_144 * 4 / 2**30:.1f} GB"}
    if status != 0 or "Final estimate" not in text:
        sys.exit(f"llama-perplexity failed (exit code {status}):\n{text[-2000:]}")
    return side


def _llama(n_ctx: int, logits_all: bool):
    import llama_cpp

    from ctxeval.backends.llamacpp import load_llama_without_amx_buffers
    from ctxeval.backends.model_files import embedded_model_path

    load_llama_without_amx_buffers(llama_cpp)
    threads = _threads()
    return llama_cpp.Llama(model_path=str(embedded_model_path()), n_ctx=n_ctx, n_batch=N_BATCH, n_ubatch=N_BATCH, n_threads=threads,
                           n_threads_batch=threads, logits_all=logits_all, swa_full=False, flash_attn=False, verbose=False)


def score_peer(window: int, out: Path) -> dict:
    """llama-cpp-python's `eval` with all logits, then a NumPy log-softmax, rank and top-20."""
    import numpy as np

    text = window_text(window, out)
    t0 = time.perf_counter()
    llm = _llama(window + 256, logits_all=True)
    ids = llm.tokenize(text.read_bytes(), add_bos=False, special=False)[:window]
    llm.eval([llm.token_bos()] + ids[:-1])
    logprobs = []
    for lo in range(0, window, BLOCK):
        logits = np.asarray(llm.scores[lo : lo + BLOCK], dtype=np.float32)  # row i predicts ids[i]
        targets = np.asarray(ids[lo : lo + BLOCK])
        m = logits.max(axis=1, keepdims=True)
        lse = m[:, 0] + np.log(np.exp(logits - m).sum(axis=1))
        rows = np.arange(len(targets))
        target = logits[rows, targets]
        logprobs.extend((target - lse).tolist())
        (1 + (logits > target[:, None]).sum(axis=1))  # the exact ranks
        np.argpartition(-logits, TOP_K, axis=1)[:, :TOP_K]  # the top-20
    return {"side": "llama-cpp-python eval, all logits + NumPy", "window": window, "tokens": len(logprobs), "seconds": time.perf_counter() - t0,
            "peak_rss_mb": peak_rss_mb()}


def _ruler_prompt(task: str, length: int) -> tuple[list[int], int]:
    """The prompt ids (BOS first) of `task`'s sample 0 at `length` and the tokens it may
    generate, as `ctxeval ruler` builds them for Gemma 3 270M."""
    from ctxeval.backends.registry import load_vocabulary
    from ctxeval.data.texts import RULER_HAYSTACK_NAME, load_text
    from ctxeval.ruler.prompt import token_counter
    from ctxeval.ruler.samples import SampleSpec, build_sample, fit_size
    from ctxeval.ruler.tasks import TASKS

    vocab = load_vocabulary("gemma-3-270m")
    essay = load_text(RULER_HAYSTACK_NAME).content
    count = token_counter(vocab, task, None)
    size = fit_size(task, length, 42, essay, count, "gemma-3-270m")
    rendered, _ = build_sample(SampleSpec(task, length, 0, size), 42, essay, count)
    return [vocab.info.bos_id, *vocab.tokenize(rendered.prompt)], TASKS[task].tokens_to_generate


def ruler_ctxeval(task: str, length: int) -> dict:
    import numpy as np

    from ctxeval.backends.registry import load_scorer, parse_model_spec

    prompt, n_new = _ruler_prompt(task, length)
    t0 = time.perf_counter()
    scorer = load_scorer(parse_model_spec("gemma-3-270m"), n_threads=_threads())
    generated = scorer.generate(np.asarray(prompt, dtype=np.int32), n_new)
    return {"side": "ctxeval generate", "window": len(prompt), "seconds": time.perf_counter() - t0, "generated": len(generated), "peak_rss_mb": peak_rss_mb()}


def ruler_peer(task: str, length: int) -> dict:
    prompt, n_new = _ruler_prompt(task, length)
    t0 = time.perf_counter()
    llm = _llama(length + 256, logits_all=False)
    out = []
    for token in llm.generate(prompt, top_k=1, temp=0.0, reset=True):
        if llm.token_eos() == token or len(out) == n_new:
            break
        out.append(token)
    return {"side": "llama-cpp-python eval + greedy generate", "window": len(prompt), "seconds": time.perf_counter() - t0, "generated": len(out),
            "peak_rss_mb": peak_rss_mb()}


def ruler_run(task: str, length: int, samples: int, reuse: bool, out: Path) -> dict:
    import ctxeval

    model = "gemma-3-270m" if reuse else "gemma-3-270m?prefix_reuse=0"
    t0 = time.perf_counter()
    result = ctxeval.ruler(tasks=(task,), lengths=(length,), samples=samples, models=(model,), out=out, n_threads=_threads())
    seconds = time.perf_counter() - t0
    import pandas as pd

    records = pd.read_parquet(out / "samples.parquet").drop(columns=["model"]).sort_values("sample_index")
    del result
    return {"side": f"ctxeval ruler, prefix reuse {'on' if reuse else 'off'}", "window": length, "samples": samples, "seconds": seconds,
            "prompt_tokens": int(records["prompt_tokens"].sum()), "records": records.to_json(orient="records"), "peak_rss_mb": peak_rss_mb()}


def ruler_ab(task: str, length: int, samples: int) -> dict:
    """RULER's per-sample work (`score_then_generate` of the reference, generation where greedy
    decoding leaves it) on `samples` samples of `task` in run order, by two scorers, with and
    without prefix reuse, alternating sample by sample so the machine's load falls on both alike."""
    import numpy as np

    from ctxeval.backends.registry import load_scorer, load_vocabulary, parse_model_spec
    from ctxeval.data.texts import RULER_HAYSTACK_NAME, load_text
    from ctxeval.ruler.score import reference_text
    from ctxeval.ruler.prompt import token_counter
    from ctxeval.ruler.samples import SampleSpec, build_sample, fit_size, shared_prefix_order
    from ctxeval.ruler.tasks import TASKS

    vocab = load_vocabulary("gemma-3-270m")
    essay = load_text(RULER_HAYSTACK_NAME).content
    count = token_counter(vocab, task, None)
    size = fit_size(task, length, 42, essay, count, "gemma-3-270m")
    jobs = shared_prefix_order([(k, SampleSpec(task, length, k, size)) for k in range(samples)], 42, essay)
    scorers = {reuse: load_scorer(parse_model_spec("gemma-3-270m" if reuse else "gemma-3-270m?prefix_reuse=0"), n_threads=_threads()) for reuse in (True, False)}
    for scorer in scorers.values():
        scorer.prepare(length + 2)  # as `ctxeval ruler` sizes the context for a length
    seconds, outputs, generated = {True: 0.0, False: 0.0}, {True: [], False: []}, 0
    for i, (_, spec) in enumerate(jobs):
        rendered = build_sample(spec, 42, essay, count)[0]
        prompt = np.asarray([vocab.info.bos_id, *vocab.tokenize(rendered.prompt)], dtype=np.int32)
        reference = np.asarray(vocab.tokenize(reference_text(TASKS[task].family, rendered.answers)), dtype=np.int32)
        for reuse in ((True, False) if i % 2 == 0 else (False, True)):
            t0 = time.perf_counter()
            scores, text = scorers[reuse].score_then_generate(prompt, reference, TASKS[task].tokens_to_generate, 2, (1.0,))
            seconds[reuse] += time.perf_counter() - t0
            outputs[reuse].append((scores.logprob.tolist(), scores.rank.tolist(), text))
        generated += outputs[True][-1][2] is not None
    return {"side": "ruler samples, prefix reuse on vs off (alternating)", "window": length, "samples": samples, "seconds_on": seconds[True],
            "seconds_off": seconds[False], "generated_samples": generated, "identical": outputs[True] == outputs[False],
            "reused_tokens": scorers[True].prefix_cache.reused, "peak_rss_mb": peak_rss_mb()}


def reuse_plan(task: str, length: int, samples: int) -> dict:
    """Prompt tokens prefix reuse skips between consecutive samples at `length`, in run order, with
    Gemma 3 270M's checkpoints (every 1,024 tokens from 512), without running the model."""
    import numpy as np

    from ctxeval.backends.registry import load_vocabulary
    from ctxeval.data.texts import RULER_HAYSTACK_NAME, load_text
    from ctxeval.ruler.prompt import token_counter
    from ctxeval.ruler.samples import SampleSpec, build_sample, fit_size, shared_prefix_order

    vocab = load_vocabulary("gemma-3-270m")
    essay = load_text(RULER_HAYSTACK_NAME).content
    count = token_counter(vocab, task, None)
    size = fit_size(task, length, 42, essay, count, "gemma-3-270m")
    jobs = shared_prefix_order([(k, SampleSpec(task, length, k, size)) for k in range(samples)], 42, essay)
    prompts = [np.asarray([vocab.info.bos_id, *vocab.tokenize(build_sample(spec, 42, essay, count)[0].prompt)]) for _, spec in jobs]
    skipped = 0
    for before, prompt in zip(prompts, prompts[1:]):
        n = min(len(before), len(prompt) - 1)
        differ = np.flatnonzero(before[:n] != prompt[:n])
        common = int(differ[0]) if len(differ) else n
        skipped += max(0, (common - 512) // 1024 * 1024 + 512) if common >= 512 else 0
    total = sum(len(p) for p in prompts)
    return {"side": "reuse plan", "window": length, "samples": samples, "prompt_tokens": total, "skipped_tokens": skipped}


def worker(args: argparse.Namespace) -> dict:
    if args.side == "score-ctxeval":
        return score_ctxeval(args.n, args.out)
    if args.side == "score-peer":
        return score_peer(args.n, args.out)
    if args.side == "score-llama-perplexity":
        return score_llama_perplexity(args.n, args.out)
    if args.side == "ruler-ctxeval":
        return ruler_ctxeval(args.task, args.n)
    if args.side == "ruler-peer":
        return ruler_peer(args.task, args.n)
    if args.side == "reuse-plan":
        return reuse_plan(args.task, args.n, args.samples)
    if args.side == "ruler-ab":
        return ruler_ab(args.task, args.n, args.samples)
    return ruler_run(args.task, args.n, args.samples, args.side == "ruler-reuse", args.out)


def run_side(side: str, n: int, out: Path, task: str, samples: int = 0) -> dict:
    command = [sys.executable, __file__, "--side", side, "--n", str(n), "--samples", str(samples), "--task", task, "--out", str(out)]
    proc = subprocess.run(command, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"{side} at {n} failed (exit code {proc.returncode}):\n{proc.stderr[-3000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    print(json.dumps({k: v for k, v in result.items() if k != "records"}), flush=True)
    return result


def peer_logits_gb(window: int) -> float:
    """The size of llama-cpp-python's all-logits array for a context of `window` (+ 256) rows."""
    return (window + 256) * 262_144 * 4 / 2**30


def where_the_decodes_went(r: dict) -> str:
    """llama.cpp's decode seconds, and what attention over the window adds: a batch's matrix
    products cost alike at every position, so the faster of the first two full batches
    (positions below 1,024: little attention; the first also builds the graph) times the
    batches is the cost without it; the rest is attention's."""
    batches = r["batch_seconds"]
    full = batches[:-1] or batches
    without = min(full[:2]) * len(full) + (batches[-1] if len(batches) > len(full) else 0.0)
    extra = max(0.0, r["decode_seconds"] - without)
    return (f"llama.cpp's decodes {r['decode_seconds']:.1f} s in {len(batches)} batches (first {full[0]:.2f} s, last full {full[-1]:.2f} s; "
            f"attention beyond the first batches' about {extra:.1f} s, {100 * extra / r['decode_seconds']:.0f} %)")


def score_row(r: dict, ours: dict) -> str:
    speed = r["tokens"] / r["seconds"]
    scored = r.get("scored", r["tokens"]) / r["seconds"]
    ratios = "| | |" if r is ours else f"| {(ours['tokens'] / ours['seconds']) / speed:.2f} | {(ours['tokens'] / ours['seconds']) / scored:.2f} |"
    return f"| {r['window']} | {r['side']} | {speed:.1f} | {scored:.1f} | {1000 * r['seconds'] / r['tokens']:.2f} | {r['peak_rss_mb']:.0f} {ratios}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--windows", type=int, nargs="*", default=[4096, 8192])
    parser.add_argument("--ruler-length", type=int, nargs="*", default=[], help="lengths: one RULER sample, ctxeval against llama-cpp-python")
    parser.add_argument("--ruler-runs", type=int, nargs="*", default=[], help="lengths: whole `ctxeval ruler` runs with and without prefix reuse")
    parser.add_argument("--ruler-samples", type=int, default=4)
    parser.add_argument("--task", default="niah_single_2", help="the RULER task of the RULER rows")
    parser.add_argument("--reuse-plan", type=int, nargs="*", default=[])
    parser.add_argument("--reuse-ab", type=int, nargs="*", default=[], help="lengths: RULER samples with and without prefix reuse, alternating")
    parser.add_argument("--out", type=Path, default=Path("bench/out/long_context"))
    parser.add_argument("--side", help=argparse.SUPPRESS)
    parser.add_argument("--n", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--samples", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        print(json.dumps(worker(args)))
        return
    import shutil

    shutil.rmtree(args.out, ignore_errors=True)
    task = args.task
    print("| window | side | tokens through the model /s | scored tokens /s | s per 1K tokens | peak RSS MB | ctxeval / peer, tokens through the model | "
          "ctxeval / peer, scored tokens |\n|---:|---|---:|---:|---:|---:|---:|---:|")
    for i, window in enumerate(args.windows):
        sides = ["score-llama-perplexity", "score-ctxeval"] + (["score-peer"] if peer_logits_gb(window) <= PEER_LOGITS_LIMIT_GB else [])
        order = sides if i % 2 == 0 else sides[::-1]  # alternate who runs first
        got = {side: run_side(side, window, args.out / f"{side}-{window}", task) for side in order}
        ours = got["score-ctxeval"]
        for side in sides:
            print(score_row(got[side], ours) if "failed" not in got[side] else f"| {window} | {got[side]['side']} | failed: {got[side]['failed']} | | | | | |")
        if "score-peer" not in sides:
            print(f"| {window} | llama-cpp-python eval, all logits + NumPy | not run: its logits need {peer_logits_gb(window):.1f} GB | | | | | |")
        print(f"where ctxeval's {ours['seconds']:.1f} s went: {where_the_decodes_went(ours)}, ranking the vocabulary {ours['ranking_seconds']:.1f} s", flush=True)
    for i, length in enumerate(args.ruler_length):
        pair = ("ruler-peer", "ruler-ctxeval") if i % 2 == 0 else ("ruler-ctxeval", "ruler-peer")
        got = {side: run_side(side, length, args.out, task) for side in pair}
        peer, ours = got["ruler-peer"], got["ruler-ctxeval"]
        print(f"RULER {task} sample at {length}: {ours['window']}-token prompt, ctxeval {ours['seconds']:.1f} s ({ours['generated']} generated), "
              f"llama-cpp-python {peer['seconds']:.1f} s ({peer['generated']} generated): ctxeval / peer speed {peer['seconds'] / ours['seconds']:.2f}; "
              f"peak RSS {ours['peak_rss_mb']:.0f} / {peer['peak_rss_mb']:.0f} MB", flush=True)
    for length in args.ruler_runs:
        off = run_side("ruler-fresh", length, args.out / f"fresh-{length}", task, args.ruler_samples)
        on = run_side("ruler-reuse", length, args.out / f"reuse-{length}", task, args.ruler_samples)
        same = json.loads(on["records"]) == json.loads(off["records"])
        print(f"ctxeval ruler {task} at {length}, {args.ruler_samples} samples: prefix reuse off {off['seconds']:.1f} s, on {on['seconds']:.1f} s, "
              f"saved {100 * (1 - on['seconds'] / off['seconds']):.0f} %; records identical: {same}")
    for length in args.reuse_ab:
        ab = run_side("ruler-ab", length, args.out, task, args.ruler_samples)
        print(f"{task} at {length}, {args.ruler_samples} samples ({ab['generated_samples']} generating), alternating: prefix reuse off {ab['seconds_off']:.1f} s, "
              f"on {ab['seconds_on']:.1f} s, saved {100 * (1 - ab['seconds_on'] / ab['seconds_off']):.0f} %; {ab['reused_tokens']} prompt tokens reused; "
              f"scores and generated text identical: {ab['identical']}")
    for length in args.reuse_plan:
        plan = run_side("reuse-plan", length, args.out, task, args.ruler_samples)
        print(f"reuse plan at {length}, {args.ruler_samples} samples: {plan['skipped_tokens']} of {plan['prompt_tokens']} prompt tokens skipped between samples "
              f"({100 * plan['skipped_tokens'] / plan['prompt_tokens']:.0f} %)")


if __name__ == "__main__":
    main()
