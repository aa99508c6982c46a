"""Benchmark: ctxeval at long windows against llama-cpp-python on the same windows, in one run.

Scoring (`--windows`): `ctxeval score --method fixed` on one window of W tokens of Moby-Dick
(exact ranks, top-20) against llama-cpp-python's own `Llama.eval` with all logits
(`logits_all=True`) and a NumPy log-softmax, rank and top-20 over them in blocks of 512 rows. Both
run with llama.cpp's sliding-window cache at its window (`swa_full=False`), flash attention off,
n_batch 512, the same threads. Each side runs in its own process (peak RSS is its own), the two
alternate window by window, and the table gives their ratio, since a shared machine's load
moves both. ctxeval's side also reports where its time went: llama.cpp's decodes and the
scoring of the 262,144-token vocabulary (`score_block`: log-softmax, exact ranks, top-20).

RULER (`--ruler-length`): one niah_single_2 sample's prefill and greedy generation of up to 128
tokens (to the end-of-generation token) by ctxeval's llama.cpp backend (`generate`, the path a
RULER sample takes when the greedy answer leaves the reference) against llama-cpp-python's
`Llama.generate` at temperature 0 on the same prompt ids; then `ctxeval ruler` on `--ruler-samples` samples of
niah_single_2 with and without prefix reuse (`?prefix_reuse=0`), their records compared.
`--reuse-plan L` counts, without running the model, the prompt tokens prefix reuse skips at
length L (samples in run order, resumed at the sliding-window checkpoints).

    PYTHONPATH=src .venv/bin/python bench/bench_long_context.py --windows 4096 8192 --ruler-length 4096 --ruler-samples 4 --reuse-ab 16384 --reuse-plan 16384
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
TASK = "niah_single_2"


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
    decode, score_block = llama_cpp.llama_decode, backend.score_block

    def timed_decode(*args):
        t0 = time.perf_counter()
        status = decode(*args)
        spent["decode"] += time.perf_counter() - t0
        return status

    def timed_score(*args, **kwargs):
        t0 = time.perf_counter()
        result = score_block(*args, **kwargs)
        spent["ranking"] += time.perf_counter() - t0
        return result

    llama_cpp.llama_decode, backend.score_block = timed_decode, timed_score
    t0 = time.perf_counter()
    result = ctxeval.score((str(MOBY),), method="fixed", window=window, max_tokens=window, top_k=TOP_K, out=out)
    seconds = time.perf_counter() - t0
    return {"side": "ctxeval score --method fixed", "window": window, "tokens": len(result.records), "seconds": seconds,
            "decode_seconds": spent["decode"], "ranking_seconds": spent["ranking"], "peak_rss_mb": peak_rss_mb()}


def _llama(n_ctx: int, logits_all: bool):
    import llama_cpp

    from ctxeval.backends.llamacpp import load_llama_without_amx_buffers
    from ctxeval.backends.model_files import embedded_model_path

    load_llama_without_amx_buffers(llama_cpp)
    threads = _threads()
    return llama_cpp.Llama(model_path=str(embedded_model_path()), n_ctx=n_ctx, n_batch=N_BATCH, n_ubatch=N_BATCH, n_threads=threads,
                           n_threads_batch=threads, logits_all=logits_all, swa_full=False, flash_attn=False, verbose=False)


def score_peer(window: int) -> dict:
    """llama-cpp-python's `eval` with all logits, then a NumPy log-softmax, rank and top-20."""
    import numpy as np

    t0 = time.perf_counter()
    llm = _llama(window + 256, logits_all=True)
    ids = llm.tokenize(MOBY.read_bytes(), add_bos=False, special=False)[:window]
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


def _ruler_prompt(length: int) -> tuple[list[int], int]:
    """The prompt ids (BOS first) of niah_single_2's sample 0 at `length` and the tokens it may
    generate, as `ctxeval ruler` builds them for Gemma 3 270M."""
    from ctxeval.backends.registry import load_vocabulary
    from ctxeval.data.texts import RULER_HAYSTACK_NAME, load_text
    from ctxeval.probes.ruler_prompt import token_counter
    from ctxeval.probes.ruler_samples import SampleSpec, build_sample, fit_size
    from ctxeval.probes.ruler_tasks import TASKS

    vocab = load_vocabulary("gemma-3-270m")
    essay = load_text(RULER_HAYSTACK_NAME).content
    count = token_counter(vocab, TASK, None)
    size = fit_size(TASK, length, 42, essay, count, "gemma-3-270m")
    rendered, _ = build_sample(SampleSpec(TASK, length, 0, size), 42, essay, count)
    return [vocab.info.bos_id, *vocab.tokenize(rendered.prompt)], TASKS[TASK].tokens_to_generate


def ruler_ctxeval(length: int) -> dict:
    import numpy as np

    from ctxeval.backends.registry import load_scorer, parse_model_spec

    prompt, n_new = _ruler_prompt(length)
    t0 = time.perf_counter()
    scorer = load_scorer(parse_model_spec("gemma-3-270m"), n_threads=_threads())
    generated = scorer.generate(np.asarray(prompt, dtype=np.int32), n_new)
    return {"side": "ctxeval generate", "window": len(prompt), "seconds": time.perf_counter() - t0, "generated": len(generated), "peak_rss_mb": peak_rss_mb()}


def ruler_peer(length: int) -> dict:
    prompt, n_new = _ruler_prompt(length)
    t0 = time.perf_counter()
    llm = _llama(length + 256, logits_all=False)
    out = []
    for token in llm.generate(prompt, top_k=1, temp=0.0, reset=True):
        if llm.token_eos() == token or len(out) == n_new:
            break
        out.append(token)
    return {"side": "llama-cpp-python eval + greedy generate", "window": len(prompt), "seconds": time.perf_counter() - t0, "generated": len(out),
            "peak_rss_mb": peak_rss_mb()}


def ruler_run(length: int, samples: int, reuse: bool, out: Path) -> dict:
    import ctxeval

    model = "gemma-3-270m" if reuse else "gemma-3-270m?prefix_reuse=0"
    t0 = time.perf_counter()
    result = ctxeval.ruler(tasks=(TASK,), lengths=(length,), samples=samples, models=(model,), out=out, n_threads=_threads())
    seconds = time.perf_counter() - t0
    import pandas as pd

    records = pd.read_parquet(out / "samples.parquet").drop(columns=["model"]).sort_values("sample_index")
    del result
    return {"side": f"ctxeval ruler, prefix reuse {'on' if reuse else 'off'}", "window": length, "samples": samples, "seconds": seconds,
            "prompt_tokens": int(records["prompt_tokens"].sum()), "records": records.to_json(orient="records"), "peak_rss_mb": peak_rss_mb()}


def ruler_ab(length: int, samples: int) -> dict:
    """RULER's per-sample work (`score_then_generate` of the reference, generation where greedy
    decoding leaves it) on `samples` niah_single_2 samples in run order, by two scorers, with and
    without prefix reuse, alternating sample by sample so the machine's load falls on both alike."""
    import numpy as np

    from ctxeval.backends.registry import load_scorer, load_vocabulary, parse_model_spec
    from ctxeval.data.texts import RULER_HAYSTACK_NAME, load_text
    from ctxeval.probes.ruler import reference_text
    from ctxeval.probes.ruler_prompt import token_counter
    from ctxeval.probes.ruler_samples import SampleSpec, build_sample, fit_size, shared_prefix_order
    from ctxeval.probes.ruler_tasks import TASKS

    vocab = load_vocabulary("gemma-3-270m")
    essay = load_text(RULER_HAYSTACK_NAME).content
    count = token_counter(vocab, TASK, None)
    size = fit_size(TASK, length, 42, essay, count, "gemma-3-270m")
    jobs = shared_prefix_order([(k, SampleSpec(TASK, length, k, size)) for k in range(samples)], 42, essay)
    scorers = {reuse: load_scorer(parse_model_spec("gemma-3-270m" if reuse else "gemma-3-270m?prefix_reuse=0"), n_threads=_threads()) for reuse in (True, False)}
    for scorer in scorers.values():
        scorer.prepare(length + 2)  # as `ctxeval ruler` sizes the context for a length
    seconds, outputs, generated = {True: 0.0, False: 0.0}, {True: [], False: []}, 0
    for i, (_, spec) in enumerate(jobs):
        rendered = build_sample(spec, 42, essay, count)[0]
        prompt = np.asarray([vocab.info.bos_id, *vocab.tokenize(rendered.prompt)], dtype=np.int32)
        reference = np.asarray(vocab.tokenize(reference_text(TASKS[TASK].family, rendered.answers)), dtype=np.int32)
        for reuse in ((True, False) if i % 2 == 0 else (False, True)):
            t0 = time.perf_counter()
            scores, text = scorers[reuse].score_then_generate(prompt, reference, TASKS[TASK].tokens_to_generate, 2, (1.0,))
            seconds[reuse] += time.perf_counter() - t0
            outputs[reuse].append((scores.logprob.tolist(), scores.rank.tolist(), text))
        generated += outputs[True][-1][2] is not None
    return {"side": "ruler samples, prefix reuse on vs off (alternating)", "window": length, "samples": samples, "seconds_on": seconds[True],
            "seconds_off": seconds[False], "generated_samples": generated, "identical": outputs[True] == outputs[False],
            "reused_tokens": scorers[True].prefix_cache.reused, "peak_rss_mb": peak_rss_mb()}


def reuse_plan(length: int, samples: int) -> dict:
    """Prompt tokens prefix reuse skips between consecutive samples at `length`, in run order, with
    Gemma 3 270M's checkpoints (every 1,024 tokens from 512), without running the model."""
    import numpy as np

    from ctxeval.backends.registry import load_vocabulary
    from ctxeval.data.texts import RULER_HAYSTACK_NAME, load_text
    from ctxeval.probes.ruler_prompt import token_counter
    from ctxeval.probes.ruler_samples import SampleSpec, build_sample, fit_size, shared_prefix_order

    vocab = load_vocabulary("gemma-3-270m")
    essay = load_text(RULER_HAYSTACK_NAME).content
    count = token_counter(vocab, TASK, None)
    size = fit_size(TASK, length, 42, essay, count, "gemma-3-270m")
    jobs = shared_prefix_order([(k, SampleSpec(TASK, length, k, size)) for k in range(samples)], 42, essay)
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
        return score_peer(args.n)
    if args.side == "ruler-ctxeval":
        return ruler_ctxeval(args.n)
    if args.side == "ruler-peer":
        return ruler_peer(args.n)
    if args.side == "reuse-plan":
        return reuse_plan(args.n, args.samples)
    if args.side == "ruler-ab":
        return ruler_ab(args.n, args.samples)
    return ruler_run(args.n, args.samples, args.side == "ruler-reuse", args.out)


def run_side(side: str, n: int, out: Path, samples: int = 0) -> dict:
    command = [sys.executable, __file__, "--side", side, "--n", str(n), "--samples", str(samples), "--out", str(out)]
    proc = subprocess.run(command, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"{side} at {n} failed (exit code {proc.returncode}):\n{proc.stderr[-3000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    print(json.dumps({k: v for k, v in result.items() if k != "records"}), flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--windows", type=int, nargs="*", default=[4096, 8192])
    parser.add_argument("--ruler-length", type=int, nargs="*", default=[])
    parser.add_argument("--ruler-samples", type=int, default=4)
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
    print("| window | side | tokens/s | s per 1K tokens | peak RSS MB | ctxeval / peer tokens/s |\n|---:|---|---:|---:|---:|---:|")
    for i, window in enumerate(args.windows):
        order = ["score-peer", "score-ctxeval"] if i % 2 == 0 else ["score-ctxeval", "score-peer"]  # alternate who runs first
        got = {side: run_side(side, window, args.out / f"{side}-{window}") for side in order}
        ours, peer = got["score-ctxeval"], got["score-peer"]
        for r in (peer, ours):
            print(f"| {window} | {r['side']} | {r['tokens'] / r['seconds']:.1f} | {1000 * r['seconds'] / r['tokens']:.2f} | {r['peak_rss_mb']:.0f} | "
                  f"{(ours['tokens'] / ours['seconds']) / (peer['tokens'] / peer['seconds']):.2f} |")
        print(f"where ctxeval's {ours['seconds']:.1f} s went: llama.cpp's decodes {ours['decode_seconds']:.1f} s, "
              f"ranking the vocabulary {ours['ranking_seconds']:.1f} s", flush=True)
    for length in args.ruler_length:
        peer, ours = run_side("ruler-peer", length, args.out), run_side("ruler-ctxeval", length, args.out)
        print(f"RULER sample at {length}: ctxeval {ours['seconds']:.1f} s ({ours['generated']} generated), llama-cpp-python {peer['seconds']:.1f} s "
              f"({peer['generated']} generated): ctxeval / peer speed {peer['seconds'] / ours['seconds']:.2f}")
        off = run_side("ruler-fresh", length, args.out / f"fresh-{length}", args.ruler_samples)
        on = run_side("ruler-reuse", length, args.out / f"reuse-{length}", args.ruler_samples)
        same = json.loads(on["records"]) == json.loads(off["records"])
        print(f"ctxeval ruler {TASK} at {length}, {args.ruler_samples} samples: prefix reuse off {off['seconds']:.1f} s, on {on['seconds']:.1f} s, "
              f"saved {100 * (1 - on['seconds'] / off['seconds']):.0f} %; records identical: {same}")
    for length in args.reuse_ab:
        ab = run_side("ruler-ab", length, args.out, args.ruler_samples)
        print(f"{TASK} at {length}, {args.ruler_samples} samples ({ab['generated_samples']} generating), alternating: prefix reuse off {ab['seconds_off']:.1f} s, "
              f"on {ab['seconds_on']:.1f} s, saved {100 * (1 - ab['seconds_on'] / ab['seconds_off']):.0f} %; {ab['reused_tokens']} prompt tokens reused; "
              f"scores and generated text identical: {ab['identical']}")
    for length in args.reuse_plan:
        plan = run_side("reuse-plan", length, args.out, args.ruler_samples)
        print(f"reuse plan at {length}, {args.ruler_samples} samples: {plan['skipped_tokens']} of {plan['prompt_tokens']} prompt tokens skipped between samples "
              f"({100 * plan['skipped_tokens'] / plan['prompt_tokens']:.0f} %)")


if __name__ == "__main__":
    main()
