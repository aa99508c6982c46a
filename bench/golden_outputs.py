"""Golden outputs: every command on a fixed small input, run through the CLI as a user would,
and a byte-for-byte comparison of two such output folders (timing fields aside).

A refactor that must not change numbers is checked by running this before and after it:

    python bench/golden_outputs.py run /tmp/golden-before      # on the old code
    python bench/golden_outputs.py run /tmp/golden-after       # on the new code
    python bench/golden_outputs.py compare /tmp/golden-before /tmp/golden-after

`run` writes one folder per command invocation (the run directory or output folder) plus
`_cli/<name>.txt` (exit code, stdout, stderr). Inputs: the bundled wikitext excerpt of the
tests, the embedded model (gemma-3-270m), the shared data folder (CTXEVAL_SHARED_DATA, default
../shared/data beside the checkout; `pplqa`, `meta-eval`, `leval`, `leval-corr` and `judge`
need it) and, for `judge`, a scripted OpenAI-compatible server on 127.0.0.1 (tests/servers).

`compare` prints one row per file: identical (bytes equal), or the same after dropping what
changes from run to run — manifest `timing`, `created`, `versions`, the output folder's and the
checkout's absolute paths, creation times and timings embedded in text (the HTML report), and Parquet files
compared by content — or different (with the keys that differ for JSON). Exit code 1 when any file differs or is missing on one side.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TEXT = ROOT / "tests" / "fixtures" / "wikitext2-test-head.txt"
SHARED = Path(os.environ.get("CTXEVAL_SHARED_DATA", ROOT.parent / "shared" / "data"))
VOLATILE_KEYS = {"timing", "created", "versions"}  # manifest fields that change on every run
ROOT_TOKEN = "<OUT>"


def _chat(text: str) -> dict:
    return {"choices": [{"message": {"role": "assistant", "content": text}}], "usage": {"prompt_tokens": 100, "completion_tokens": 5}}


def commands(out: Path, shared: Path, judge_url: str) -> list[tuple[str, list[str]]]:
    """(name, CLI arguments) of every command on the fixed small set, in order (later ones read
    earlier ones' run directories)."""
    o = lambda name: str(out / name)  # noqa: E731
    text = str(TEXT)
    sweep = ["--lengths", "16,32,64", "--n-compare", "4", "--repeats", "2", "--top-k", "5", "--approx-k", "5", "--quiet"]
    leval_models = out / "_inputs" / "leval"
    return [
        ("sweep-exact", ["sweep", text, *sweep, "--out", o("sweep-exact")]),
        ("sweep-approx", ["sweep", text, *sweep, "--context-mode", "approx", "--out", o("sweep-approx")]),
        ("sweep-both", ["sweep", text, *sweep, "--context-mode", "both", "--temperatures", "1,2", "--out", o("sweep-both")]),
        ("score-chunked", ["score", text, "--method", "chunked", "--window", "64", "--max-tokens", "256", "--top-k", "5", "--approx-k", "5", "--quiet", "--out", o("score-chunked")]),
        ("score-sliding", ["score", text, "--method", "sliding", "--window", "64", "--stride", "32", "--max-tokens", "256", "--top-k", "5", "--approx-k", "5", "--quiet", "--out", o("score-sliding")]),
        ("score-fixed", ["score", text, "--method", "fixed", "--window", "32", "--max-tokens", "128", "--top-k", "5", "--approx-k", "5", "--quiet", "--out", o("score-fixed")]),
        ("summary", ["summary", o("sweep-exact"), "--cutoff", "full", "--alphas", "0.5"]),
        ("compare", ["compare", o("sweep-exact"), o("sweep-both"), "--context-mode-b", "exact", "--replicates", "200", "--out", o("compare")]),
        ("trends", ["trends", o("sweep-exact"), "--out", o("trends")]),
        ("diff", ["diff", "gemma-3-270m", "gemma-3-270m?type_k=q8_0&type_v=q8_0&flash_attn=1", text, "--window", "64", "--max-tokens", "192", "--replicates", "200", "--noise-floor", "?n_batch=7", "--noise-windows", "2", "--quiet", "--out", o("diff")]),
        ("score-noise", ["score", text, "--method", "chunked", "--window", "64", "--max-tokens", "128", "--top-k", "5", "--approx-k", "5", "--noise-floor", "?n_batch=7", "--noise-windows", "2", "--quiet", "--out", o("score-noise")]),
        ("context-gain", ["context-gain", text, "--window", "64", "--short", "16", "--max-tokens", "192", "--replicates", "200", "--block", "16", "--quiet", "--out", o("context-gain")]),
        ("retrieval", ["retrieval", "--lines", "5,8", "--depths", "0,1", "--samples", "1", "--quiet", "--out", o("retrieval")]),
        ("effective-length", ["effective-length", text, "--lengths", "16,32,64", "--starts", "2", "--targets", "8", "--replicates", "200", "--quiet",
                              "--model", "gemma-3-270m", "--model", "gemma-3-270m?max_context=32", "--out", o("effective-length")]),
        ("ruler", ["ruler", "--tasks", "niah_single_1,fwe", "--lengths", "512", "--samples", "2", "--model", "gemma-3-270m", "--model", "gemma-3-270m?max_context=128",
                   "--quiet", "--out", o("ruler")]),
        ("agreement", ["agreement", o("ruler"), o("effective-length"), "--replicates", "200", "--out", o("agreement")]),
        ("probe-report", ["probe-report", o("sweep-exact"), o("context-gain"), o("effective-length"), o("retrieval"), "--out", o("probe-report")]),
        ("pplqa", ["pplqa", "--limit", "1", "--methods", "pplqa,gptscore", "--quiet", "--out", o("pplqa")]),
        ("meta-eval", ["meta-eval", "--dataset", "llmbar:MT-Bench", "--limit", "2", "--methods", "pplqa,geval", "--replicates", "200", "--quiet", "--out", o("meta-eval")]),
        ("leval", ["leval", "--predictions", str(leval_models), "--quiet", "--out", o("leval")]),
        ("leval-corr", ["leval-corr", o("leval"), "--human", str(out / "_inputs" / "human.csv"), "--out", o("leval-corr")]),
        ("judge", ["judge", str(shared / "leval/predictions/llm_gpt4_eval/claude-100k.pred.jsonl"), str(shared / "leval/predictions/llm_gpt4_eval/turbo-16k-0613.pred.jsonl"),
                   "--judge-model", "openai:judge", "--base-url", judge_url, "--concurrency", "1", "--cache", "none", "--limit", "3", "--out", o("judge")]),
        ("report", ["report", o("sweep-exact"), o("score-chunked"), o("context-gain"), o("effective-length"), o("retrieval"), o("compare"), o("pplqa"), o("diff"), "--out", o("report") + "/report.html"]),
    ]


def _inputs(out: Path, shared: Path) -> None:
    """Small L-Eval prediction folder (3 models x 1 task) and a human score table for leval-corr."""
    ngram = shared / "leval" / "predictions" / "ngram_eval"
    models = ("turbo-16k-0613", "llama2-13b-chat-4k", "vicuna-13b-16k")
    for model in models:
        folder = out / "_inputs" / "leval" / model
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "financial_qa.pred.jsonl").write_bytes((ngram / model / "financial_qa.pred.jsonl").read_bytes())
    (out / "_inputs" / "human.csv").write_text("model,score\nturbo-16k-0613,3.0\nllama2-13b-chat-4k,1.0\nvicuna-13b-16k,2.0\n")


def run(out: Path, only: list[str] | None) -> int:
    from tests.servers.scripted import ScriptedServer

    out = out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    (out / "_cli").mkdir(exist_ok=True)
    _inputs(out, SHARED)
    verdicts = ["[[A]]", "[[B]]", "[[C]]", "no verdict", "[[B]] then [[A]]", "[[B]]"]
    server = ScriptedServer({"/v1/chat/completions": [_chat(v) for v in verdicts]})
    env = dict(os.environ, COLUMNS="200", PYTHONPATH=str(ROOT / "src"), CTXEVAL_SHARED_DATA=str(SHARED))
    failed = 0
    try:
        for name, args in commands(out, SHARED, server.url):
            if only and name not in only:
                continue
            result = subprocess.run([sys.executable, "-m", "ctxeval.cli", *args], capture_output=True, text=True, env=env, timeout=900)
            (out / "_cli" / f"{name}.txt").write_text(f"exit {result.returncode}\n--- stdout\n{result.stdout}--- stderr\n{result.stderr}")
            print(f"{name:<14} exit {result.returncode}", flush=True)
            failed += result.returncode != 0
    finally:
        server.close()
    return 1 if failed else 0


_CHECKOUT = re.compile(rb"/[^\"\s]*?/tests/fixtures/")  # the input text, in whichever checkout ran


def _normalised_text(data: bytes, root: Path) -> bytes:
    return _CHECKOUT.sub(b"<CHECKOUT>/tests/fixtures/", data.replace(str(root).encode(), ROOT_TOKEN.encode()))


def _strip(value: object) -> object:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in VOLATILE_KEYS}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def _json_diff(a: object, b: object, path: str = "") -> list[str]:
    """Paths of the keys whose values differ (at most a few levels deep)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for key in sorted(set(a) | set(b), key=str):
            if key not in a or key not in b:
                out.append(f"{path}{key} ({'only B' if key not in a else 'only A'})")
            elif a[key] != b[key]:
                out += _json_diff(a[key], b[key], f"{path}{key}.") if path.count(".") < 2 else [f"{path}{key}"]
        return out
    return [path.rstrip(".") or "(value)"]


_TIMES = [
    (re.compile(rb"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z"), b"<TIME>"),  # manifests' `created`
    (re.compile(rb'(&#34;|&quot;|\\?")(seconds[a-z_]*|[a-z_]+_seconds)(&#34;|&quot;|\\?")\s*:\s*[0-9.]+'), rb"\1\2\3: <S>"),  # timings
    (re.compile(rb"took [0-9.]+ s\b"), b"took <S> s"),  # timings in Markdown
]


def _masked(data: bytes) -> bytes:
    """Text with creation times and timings replaced (an HTML report embeds manifests)."""
    for pattern, replacement in _TIMES:
        data = pattern.sub(replacement, data)
    return data


def _unpadded(data: bytes) -> bytes:
    """Markdown tables without the padding that a column's widest cell (an output path) sets."""
    return re.sub(rb" +", b" ", re.sub(rb"(?<=[|:])-+(?=[|:])", b"-", data))


def _cli_text(data: bytes) -> bytes:
    """CLI output without the lines that report time spent."""
    return b"\n".join(line for line in data.split(b"\n") if b"seconds" not in line)


def compare_file(a: Path, b: Path, root_a: Path, root_b: Path) -> tuple[str, str]:
    """(verdict, detail) for one file present on both sides."""
    da, db = a.read_bytes(), b.read_bytes()
    if da == db:
        return "identical", ""
    na, nb = _normalised_text(da, root_a), _normalised_text(db, root_b)
    if na == nb:
        return "identical", "after the output and checkout paths"
    if a.suffix == ".parquet":
        import pyarrow.parquet as pq

        return ("same content", "Parquet metadata only") if pq.read_table(a).equals(pq.read_table(b)) else ("DIFFERENT", "Parquet rows differ")
    if a.suffix == ".json":
        ja, jb = json.loads(na), json.loads(nb)
        if _strip(ja) == _strip(jb):
            return "identical", "apart from timing/created/versions"
        return "DIFFERENT", ", ".join(_json_diff(_strip(ja), _strip(jb))[:6])
    if a.parent.name == "_cli" and _cli_text(na) == _cli_text(nb):
        return "identical", "apart from timing lines"
    if _masked(na) == _masked(nb):
        return "identical", "apart from embedded times and timings"
    if _unpadded(_masked(na)) == _unpadded(_masked(nb)):
        return "identical", "apart from table padding (paths of other lengths)"
    return "DIFFERENT", f"{len(da)} vs {len(db)} bytes"


def compare(dir_a: Path, dir_b: Path) -> int:
    dir_a, dir_b = dir_a.resolve(), dir_b.resolve()
    files = sorted({p.relative_to(dir_a) for p in dir_a.rglob("*") if p.is_file()} | {p.relative_to(dir_b) for p in dir_b.rglob("*") if p.is_file()})
    files = [f for f in files if f.parts[0] != "_inputs"]
    width = max(len(str(f)) for f in files)
    bad = 0
    print(f"{'file':<{width}}  identical  detail")
    for f in files:
        a, b = dir_a / f, dir_b / f
        if not a.is_file() or not b.is_file():
            verdict, detail = "MISSING", "only in B" if not a.is_file() else "only in A"
        else:
            verdict, detail = compare_file(a, b, dir_a, dir_b)
        ok = verdict in ("identical", "same content")
        bad += not ok
        print(f"{str(f):<{width}}  {'yes' if ok else 'NO':<9}  {detail if ok else verdict + ': ' + detail}")
    print(f"\n{len(files) - bad} of {len(files)} files identical")
    return 1 if bad else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="action", required=True)
    r = sub.add_parser("run", help="run every command into DIR")
    r.add_argument("dir", type=Path)
    r.add_argument("--only", nargs="*", help="run only these commands (names as in the table)")
    c = sub.add_parser("compare", help="compare two output folders file by file")
    c.add_argument("a", type=Path)
    c.add_argument("b", type=Path)
    args = parser.parse_args()
    sys.exit(run(args.dir, args.only) if args.action == "run" else compare(args.a, args.b))


if __name__ == "__main__":
    main()
