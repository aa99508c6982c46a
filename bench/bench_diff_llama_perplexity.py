"""ctxeval diff against llama.cpp's `llama-perplexity --kl-divergence` on the same tokens.

    .venv/bin/python bench/bench_diff_llama_perplexity.py [--chunks 48] [--cand q8_0,q4_0] [--threads 2] [--out runs/diff-llama-perplexity]
                                                          [--token-windows 512,500,83,37] [--token-check-only]

llama-perplexity (built here from the pinned llama-cpp-python sdist, cached under
~/.cache/ctxeval) tokenizes the whole text with BOS, cuts chunks of 512 tokens whose first token
it replaces by BOS, and scores targets 256..510 of each chunk: chunk k's targets are text tokens
t[512k+256 .. 512k+510], each seeing its chunk's text tokens before it (256..510, BOS not counted).
It first writes REF's log-probabilities of those tokens to a base-logits file (uint16 per vocabulary
entry), then runs CAND and compares. ctxeval's disjoint windows of 512 are the same chunks
(BOS + t[512k .. 512k+510]), so `ctxeval.diff(..., window=512, buckets=[0, 256, 511])` gives the
same tokens in its 256–511 bucket, with no file written first. Both sides run without flash
attention (`-fa off`; ctxeval's default) on the same number of threads.

REF is the embedded Gemma 3 270M (Q4_K_M), CAND its requantization by llama.cpp's quantizer.
The bench checks that both sides scored the same token ids, prints both sides' numbers, the disk
each used and each side's wall time, then deletes the base-logits file. First it checks token for
token that ctxeval's windows (whole-window decodes) equal llama-cpp-python's own `eval` of the same
windows, at lengths that are and are not multiples of llama.cpp's row tiles.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import math
import os
import re
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

import ctxeval
from ctxeval.backends.model_files import embedded_model_path
from ctxeval.backends.quantize import requantize

CACHE = Path.home() / ".cache" / "ctxeval"
SHARED = Path(os.environ.get("CTXEVAL_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
WIKITEXT = SHARED / "wikitext2" / "wiki.test.raw"
N_CTX = 512
FIRST = N_CTX // 2  # llama-perplexity scores logits FIRST .. N_CTX-2 of each chunk
SCORED_PER_CHUNK = N_CTX - 1 - FIRST
CLIP = 16.0  # the base-logits file keeps log-probabilities down to 16 nats below the top token
# llama-perplexity's summary lines: our name -> (its label, scale to our unit)
LINES = {
    "ppl_cand": ("Mean PPL(Q)", 1.0),
    "ppl_ref": ("Mean PPL(base)", 1.0),
    "ln_ppl_ratio": ("Mean ln(PPL(Q)/PPL(base))", 1.0),
    "kl_mean": ("Mean    KLD", 1.0),
    "kl_max": ("Maximum KLD", 1.0),
    "kl_p99_9": ("99.9%   KLD", 1.0),
    "kl_p99": ("99.0%   KLD", 1.0),
    "kl_p95": ("95.0%   KLD", 1.0),
    "kl_p90": ("90.0%   KLD", 1.0),
    "kl_p50": ("Median  KLD", 1.0),
    "delta_p_mean": ("Mean    Δp", 0.01),
    "delta_p_rms": ("RMS Δp    ", 0.01),
    "same_top1": ("Same top p", 1.0),
}


def build_llama_perplexity(version: str, jobs: int) -> tuple[Path, float]:
    """The llama-perplexity binary of llama-cpp-python `version`'s vendored llama.cpp, and the
    seconds its build took (0 when cached)."""
    root = CACHE / f"llama-perplexity-{version}"
    binary = root / "build" / "bin" / "llama-perplexity"
    if binary.is_file():
        return binary, 0.0
    start = time.perf_counter()
    root.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", f"llama-cpp-python=={version}", "--no-binary", ":all:", "--no-deps",
                    "-d", str(root)], check=True)
    with tarfile.open(root / f"llama_cpp_python-{version}.tar.gz") as sdist:
        sdist.extractall(root, filter="data")
    source = root / f"llama_cpp_python-{version}" / "vendor" / "llama.cpp"
    subprocess.run(["cmake", "-S", str(source), "-B", str(root / "build"), "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
                    "-DLLAMA_CURL=OFF", "-DLLAMA_BUILD_TOOLS=ON", "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF",
                    "-DLLAMA_BUILD_SERVER=OFF", "-DGGML_NATIVE=ON"], check=True)
    subprocess.run(["cmake", "--build", str(root / "build"), "--target", "llama-perplexity", "-j", str(jobs)], check=True)
    return binary, time.perf_counter() - start


def run_logged(command: list[str], log: Path) -> float:
    """Run `command` with its output in `log`; its wall seconds."""
    start = time.perf_counter()
    with log.open("w") as out:
        subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, check=True)
    return time.perf_counter() - start


def parse_kl_output(text: str) -> dict[str, float]:
    """The summary numbers of a `llama-perplexity --kl-divergence` log, in ctxeval's units
    (probabilities as fractions, same-top in percent)."""
    out = {}
    for name, (label, scale) in LINES.items():
        match = re.search(rf"^{re.escape(label)}\s*:\s*(-?[0-9.]+)", text, re.MULTILINE)
        if match is None:
            raise SystemExit(f"no '{label}' line in llama-perplexity's output")
        out[name] = float(match.group(1)) * scale
    return out


def base_file_tokens(path: Path) -> np.ndarray:
    """The token ids a base-logits file was computed on (its header: magic, n_ctx, n_vocab, n_chunk, ids)."""
    with path.open("rb") as f:
        if f.read(8) != b"_logits_":
            raise SystemExit(f"{path} is not a llama-perplexity base-logits file")
        n_ctx, _n_vocab, n_chunk = np.frombuffer(f.read(12), dtype=np.int32)
        return np.frombuffer(f.read(4 * int(n_ctx) * int(n_chunk)), dtype=np.int32)


def ctxeval_numbers(summary: dict) -> dict[str, float]:
    """The same quantities from one bucket of ctxeval's summary."""
    kl, ratio = summary["kl"], summary["ppl_ratio"]
    return {"ppl_cand": ratio["ppl_cand"], "ppl_ref": ratio["ppl_ref"], "ln_ppl_ratio": ratio["delta_log_nll"]["estimate"], "kl_mean": kl["estimate"],
            "kl_max": kl["max"], "kl_p99_9": kl["p99_9"], "kl_p99": kl["p99"], "kl_p95": kl["p95"], "kl_p90": kl["p90"],
            "kl_p50": kl["p50"], "delta_p_mean": summary["delta_p"]["estimate"], "delta_p_rms": summary["delta_p"]["rms"],
            "same_top1": summary["same_top1"]["estimate"]}


@dataclass
class Base:
    """llama-perplexity's base pass: its file's size and token ids, REF's perplexity from its
    float logits, its wall time."""

    n_bytes: int
    tokens: np.ndarray
    ppl: float
    seconds: float


def llama_command(binary: Path, args: argparse.Namespace) -> list[str]:
    return [str(binary), "-c", str(N_CTX), "-b", "2048", "-t", str(args.threads), "-fa", "off"]


def compare(label: str, cand: Path, args: argparse.Namespace, binary: Path, base_file: Path, base: Base) -> None:
    """Both sides on REF vs `cand`: the table, the token check, disk and time."""
    out = args.out / label
    out.mkdir(parents=True, exist_ok=True)
    kl_seconds = run_logged([*llama_command(binary, args), "-m", str(cand), "--kl-divergence-base", str(base_file), "--kl-divergence"],
                            out / "llama-perplexity-kl.log")
    llama = parse_kl_output((out / "llama-perplexity-kl.log").read_text())

    start = time.perf_counter()
    result = ctxeval.diff("gemma-3-270m", str(cand), [str(args.text)], window=N_CTX, max_tokens=args.chunks * N_CTX, buckets=[0, FIRST, N_CTX - 1],
                          out=out / "ctxeval", n_threads=args.threads)
    diff_seconds = time.perf_counter() - start
    records = pq.read_table(result.files()["records"], columns=["target_pos", "target_id", "context_len", "ref_logprob"]).to_pandas()
    (bucket,) = [cell for cell in result.report["summary"]["buckets"] if cell["lo"] == FIRST]
    ours = ctxeval_numbers(bucket)

    # same tokens: the file holds BOS + t[0 .. chunks*512 - 2]; ctxeval's records hold t[0 .. chunks*512 - 1]
    same_ids = bool(base.tokens[1:].tolist() == records["target_id"].to_numpy()[: len(base.tokens) - 1].tolist())
    in_bucket = records[(records["context_len"] >= FIRST) & (records["context_len"] < N_CTX - 1)]
    expected = np.concatenate([np.arange(N_CTX * k + FIRST, N_CTX * k + N_CTX - 1) for k in range(args.chunks)])
    same_positions = bool(np.array_equal(np.sort(in_bucket["target_pos"].to_numpy()), expected))
    print(f"\n## REF {embedded_model_path().name} vs CAND {label}: {args.chunks} chunks of {N_CTX}, {bucket['tokens']} scored tokens "
          f"(llama-perplexity: {args.chunks} x {SCORED_PER_CHUNK} = {args.chunks * SCORED_PER_CHUNK})")
    print(f"token ids of the base-logits file == ctxeval's tokenization: {same_ids}; ctxeval bucket {bucket['bucket']} == "
          f"llama-perplexity's targets (t[512k+{FIRST} .. 512k+{N_CTX - 2}]): {same_positions}")
    print("\n| quantity | llama-perplexity | ctxeval | relative difference |")
    print("|---|---:|---:|---:|")
    rows = [(name, theirs, ours[name]) for name, theirs in llama.items()]
    # the KL pass reads REF's log-probabilities from the file, clipped 16 nats below the top token;
    # the base pass computes REF's perplexity from the float logits
    rows.insert(2, ("ppl_ref (base pass)", base.ppl, ours["ppl_ref"]))
    rows.insert(4, ("ln_ppl_ratio (PPL(Q) / base pass)", math.log(llama["ppl_cand"] / base.ppl), ours["ln_ppl_ratio"]))
    for name, theirs, mine in rows:
        if name == "same_top1":
            print(f"| same_top1 % | {theirs:.3f} | {mine:.3f} | {mine - theirs:+.3f} points |")
        else:
            print(f"| {name} | {theirs:.6g} | {mine:.6g} | {(mine - theirs) / abs(theirs):+.2%} |")
    kl_rel = abs(ours["kl_mean"] - llama["kl_mean"]) / llama["kl_mean"]
    top_points = abs(ours["same_top1"] - llama["same_top1"])
    print(f"\nmean KL within 2 % relative: {kl_rel <= 0.02} ({kl_rel:.3%}); same-top within 0.2 points: {top_points <= 0.2} ({top_points:.3f})")
    low = in_bucket["ref_logprob"].to_numpy()
    print(f"REF targets with log p < -{CLIP:g} (clipped in the base-logits file): {int((low < -CLIP).sum())}; clipping them at -{CLIP:g} "
          f"would lower ln PPL(base) by {np.mean(np.maximum(-CLIP - low, 0)):.6f} (an upper bound: the clip lies at log p_top - {CLIP:g})")

    records_bytes = result.files()["records"].stat().st_size
    n_text = json.loads((result.run_dir / "manifest.json").read_text())["texts"][0]["n_tokens"]
    whole = (n_text + 1) // N_CTX  # llama-perplexity's chunks of the whole text (BOS + its tokens)
    per_token = base.n_bytes / (args.chunks * SCORED_PER_CHUNK)
    print(f"\ndisk: llama-perplexity's base-logits file {base.n_bytes / 1e9:.2f} GB ({per_token / 1e3:.0f} KB per scored token; the whole "
          f"text, {whole} chunks, would need {per_token * whole * SCORED_PER_CHUNK / 1e9:.1f} GB); ctxeval's {result.files()['records'].name} "
          f"{records_bytes / 1e6:.2f} MB for all {len(records)} tokens of the chunks")
    llama_seconds = base.seconds + kl_seconds
    print(f"wall time (shared machine, {args.threads} threads): llama-perplexity base {base.seconds:.1f} s + KL {kl_seconds:.1f} s = "
          f"{llama_seconds:.1f} s; ctxeval diff {diff_seconds:.1f} s; ctxeval / llama-perplexity = {diff_seconds / llama_seconds:.2f}", flush=True)


def token_agreement(text: Path, window_lengths: tuple[int, ...], n_windows: int, threads: int) -> None:
    """Every target of ctxeval's windows against llama-cpp-python's own `eval` of the same window
    (BOS + the window's tokens, all logits; what llama-perplexity decodes for a chunk), token for
    token, beside the decode of the window's first n - 1 tokens (where a batch's last rows round
    differently when the window's length is not a multiple of llama.cpp's row tiles)."""
    import llama_cpp

    from ctxeval.backends.llamacpp import load_llama_without_amx_buffers
    from ctxeval.backends.registry import load_scorer, parse_model_spec

    scorer = load_scorer(parse_model_spec("gemma-3-270m"), n_threads=threads)
    ids = np.asarray(scorer.tokenize(text.read_bytes()[:200_000].decode("utf-8", errors="ignore")), dtype=np.int32)
    load_llama_without_amx_buffers(llama_cpp)
    llm = llama_cpp.Llama(model_path=str(embedded_model_path()), n_ctx=max(window_lengths) + 1, n_batch=512, logits_all=True,
                          flash_attn=False, n_threads=threads, verbose=False)
    print(f"\n## Token for token: ctxeval vs llama-cpp-python's eval of the same window ({n_windows} windows per length)\n")
    print("| window | targets | whole window: max abs diff | whole window: targets > 1e-6 | first n-1 tokens: max abs diff | first n-1: targets > 1e-6 |")
    print("|---:|---:|---:|---:|---:|---:|")
    for n in window_lengths:
        whole, short = [], []
        for k in range(n_windows):
            win = ids[k * n : (k + 1) * n]
            full = np.concatenate([[scorer.info.bos_id], win]).astype(np.int32)
            llm.reset()
            llm.eval(full.tolist())
            z = np.array(llm.scores[:n], dtype=np.float64)
            z -= z.max(axis=1, keepdims=True)
            reference = (z - np.log(np.exp(z).sum(axis=1, keepdims=True)))[np.arange(n), win]
            whole.append(np.abs(scorer.score(full, np.arange(n), win, 1, (1.0,)).logprob - reference))
            short.append(np.abs(scorer.score(full[:-1], np.arange(n), win, 1, (1.0,)).logprob - reference))
        w, s = np.concatenate(whole), np.concatenate(short)
        print(f"| {n} | {len(w)} | {w.max():.2e} | {int((w > 1e-6).sum())} | {s.max():.2e} | {int((s > 1e-6).sum())} |", flush=True)
    llm.close()
    scorer.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=48, help="chunks of 512 tokens (the base-logits file takes 134 MB each)")
    parser.add_argument("--cand", default="q8_0", help="comma-separated requantizations of REF to compare")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--text", type=Path, default=WIKITEXT)
    parser.add_argument("--out", type=Path, default=Path("runs/diff-llama-perplexity"))
    parser.add_argument("--logits-dir", type=Path, default=CACHE, help="where the base-logits file is written (and deleted)")
    parser.add_argument("--jobs", type=int, default=2, help="build jobs")
    parser.add_argument("--build-only", action="store_true")
    parser.add_argument("--token-windows", default="512,500,83,37", help="window lengths of the token-for-token check against llama-cpp-python's eval")
    parser.add_argument("--token-check-only", action="store_true", help="only the token-for-token check (no llama-perplexity build)")
    args = parser.parse_args()
    token_agreement(args.text, tuple(int(x) for x in args.token_windows.split(",")), 4, args.threads)
    if args.token_check_only:
        return
    version = importlib.metadata.version("llama-cpp-python")
    binary, seconds = build_llama_perplexity(version, args.jobs)
    print(f"llama-perplexity of llama-cpp-python {version}: {binary} ({f'built in {seconds:.0f} s' if seconds else 'cached'})")
    if args.build_only:
        return
    args.out.mkdir(parents=True, exist_ok=True)
    base_file = args.logits_dir / f"base-{args.chunks}.kld"
    seconds = run_logged([*llama_command(binary, args), "-m", str(embedded_model_path()), "-f", str(args.text), "--chunks", str(args.chunks),
                          "--kl-divergence-base", str(base_file)], args.out / "llama-perplexity-base.log")
    ppl = re.search(r"Final estimate: PPL = ([0-9.]+)", (args.out / "llama-perplexity-base.log").read_text())
    base = Base(base_file.stat().st_size, base_file_tokens(base_file), float(ppl.group(1)), seconds)
    try:
        for file_type in args.cand.split(","):
            path = args.out / "gguf" / f"gemma-3-270m-{file_type}.gguf"
            if not path.is_file():
                requantize(embedded_model_path(), path, file_type, n_threads=args.threads)
            compare(f"requantized-{file_type}", path, args, binary, base_file, base)
    finally:
        base_file.unlink()


if __name__ == "__main__":
    main()
