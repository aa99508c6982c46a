"""Memory and speed of corpus input: streaming (ctxeval) against a naive load-everything peer.

Builds a synthetic JSON-lines corpus of at least --mb megabytes (default 500) in a temporary
directory (deleted afterwards; never committed) from the shared Gutenberg books and WikiText-2:
each document is a slice of 20-200 KB of one of them, at a seeded offset. Then, each arm in its
own process (peak RSS = that process's ru_maxrss):

1. reading the whole corpus: `open_corpus` (scan: read, check, hash) + iterating its Texts,
   one at a time, against json-loading every document into a list (the naive peer);
2. planning (tokenize + plan chunked windows of 1024) of the first --plan-docs documents:
   `ctxeval.score(..., dry_run=True)` (one document's tokens held at a time) against the
   pre-corpus executor's shape: every Text and every TokenizedText kept until planning ends.

Planning is measured on a prefix because llama.cpp's Gemma tokenizer runs at about 0.3 MB/s on
this 2-core machine (the whole 500 MB would take about half an hour per arm). Prints a table with
ratios (naive / streaming); nothing is asserted.

    PYTHONPATH=src .venv/bin/python bench/bench_corpus.py [--mb 500] [--plan-docs 100]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
SOURCES = [
    SHARED / "gutenberg" / "austen-emma.txt",
    SHARED / "gutenberg" / "chesterton-thursday.txt",
    SHARED / "gutenberg" / "melville-moby_dick.txt",
    SHARED / "gutenberg" / "shakespeare-hamlet.txt",
    SHARED / "wikitext2" / "wiki.test.raw",
]


def build_corpus(path: Path, megabytes: int, seed: int = 0) -> tuple[int, int]:
    """Write documents until the file holds `megabytes` MB; returns (documents, bytes)."""
    texts = [p.read_bytes().decode("utf-8") for p in SOURCES]  # byte-exact: WikiText's CRLFs kept
    rng = np.random.default_rng(seed)
    n_docs = 0
    with path.open("wb") as out:
        while out.tell() < megabytes * 1_000_000:
            source = texts[int(rng.integers(len(texts)))]
            size = int(rng.integers(20_000, 200_000))
            start = int(rng.integers(0, max(1, len(source) - size)))
            out.write((json.dumps({"id": f"doc{n_docs}", "text": source[start : start + size]}) + "\n").encode("utf-8"))
            n_docs += 1
        return n_docs, out.tell()


# --- the arms, each run as `python bench_corpus.py --arm NAME CORPUS N` in its own process ------


def arm_read_streaming(corpus: Path, n: int) -> int:
    from ctxeval.data.corpus import CorpusOptions, open_corpus

    docs = open_corpus([corpus], CorpusOptions(id_field="id"))
    return sum(1 for _ in docs)


def arm_read_naive(corpus: Path, n: int) -> int:
    with corpus.open(encoding="utf-8") as f:
        docs = [json.loads(line)["text"] for line in f]
    return len(docs)


def arm_plan_streaming(corpus: Path, n: int) -> int:
    from ctxeval import api
    from ctxeval.data.corpus import CorpusOptions

    with tempfile.TemporaryDirectory() as out:
        api.score(str(corpus), method="chunked", window=1024, corpus=CorpusOptions(id_field="id", max_docs=n), out=Path(out) / "run", dry_run=True)
    return n


def arm_plan_naive(corpus: Path, n: int) -> int:
    """The executor before corpora: all texts loaded, all tokenized, then planned."""
    from ctxeval.pipeline import windows
    from ctxeval.backends.registry import load_scorer, parse_model_spec
    from ctxeval.data.texts import Text
    from ctxeval.pipeline.tokens import tokenize
    import hashlib

    texts = []
    with corpus.open(encoding="utf-8") as f:
        for line, _ in zip(f, range(n)):
            row = json.loads(line)
            texts.append(Text(row["id"], str(corpus), row["text"], hashlib.sha256(row["text"].encode()).hexdigest()))
    scorer = load_scorer(parse_model_spec("gemma-3-270m"))
    tokenized = [tokenize(scorer, t) for t in texts]
    plan = [windows.chunked(len(tt), 1024) for tt in tokenized]
    scorer.close()
    return len(plan)


ARMS = {"read-streaming": arm_read_streaming, "read-naive": arm_read_naive, "plan-streaming": arm_plan_streaming, "plan-naive": arm_plan_naive}


def run_arm(name: str, corpus: Path, n: int) -> tuple[float, float, int]:
    """(seconds, peak RSS in MB, documents) of one arm in a fresh process."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])))
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, __file__, "--arm", name, str(corpus), str(n)], stdout=subprocess.PIPE, env=env, text=True)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - started
    out = proc.stdout.read() if proc.stdout else ""
    if status != 0:
        raise SystemExit(f"arm {name} failed (status {status})")
    return seconds, usage.ru_maxrss / 1024, int(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=int, default=500, help="corpus size in MB (at least)")
    parser.add_argument("--plan-docs", type=int, default=100, help="documents planned (tokenized) per planning arm")
    parser.add_argument("--arm", nargs=3, metavar=("NAME", "CORPUS", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.arm:
        name, corpus, n = args.arm
        print(ARMS[name](Path(corpus), int(n)))
        return
    with tempfile.TemporaryDirectory(prefix="ctxeval-bench-corpus-") as tmp:
        corpus = Path(tmp) / "corpus.jsonl"
        n_docs, n_bytes = build_corpus(corpus, args.mb)
        with corpus.open(encoding="utf-8") as f:
            plan_mb = sum(len(json.loads(line)["text"].encode()) for line, _ in zip(f, range(args.plan_docs))) / 1e6
        print(f"corpus: {n_docs} documents, {n_bytes / 1e6:.0f} MB of JSON lines; planning arms: first {args.plan_docs} documents ({plan_mb:.1f} MB of text)")
        rows = []
        for task, n in (("read whole corpus", n_docs), ("plan (tokenize, chunked 1024)", args.plan_docs)):
            key = "read" if task.startswith("read") else "plan"
            stream = run_arm(f"{key}-streaming", corpus, n)
            naive = run_arm(f"{key}-naive", corpus, n)
            rows.append((task, stream, naive))
        print()
        print("| task | arm | documents | seconds | documents/s | peak RSS MB |")
        print("|---|---|---:|---:|---:|---:|")
        for task, stream, naive in rows:
            for arm, (sec, rss, docs) in (("ctxeval streaming", stream), ("naive load-all", naive)):
                print(f"| {task} | {arm} | {docs} | {sec:.1f} | {docs / sec:.1f} | {rss:.0f} |")
        print()
        print("| task | peak RSS naive / streaming | documents/s streaming / naive |")
        print("|---|---:|---:|")
        for task, stream, naive in rows:
            print(f"| {task} | {naive[1] / stream[1]:.2f} | {(stream[2] / stream[0]) / (naive[2] / naive[0]):.2f} |")


if __name__ == "__main__":
    main()
