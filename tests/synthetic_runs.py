"""Tiny finished runs written through the library's own writers (PartWriter, merge_parts,
write_manifest, write_result) with the real record schema, so report tests and the benchmark need no model.

The vocabulary holds hostile texts (`<script>`, an attribute break-out, `</script>`, `{{ }}`,
U+2028) next to ordinary words and whitespace, so every page built from these runs is an
escaping test too.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd

from ctxeval.pieces import write_pieces
from ctxeval.results.records import BASE_SCHEMA, PartWriter, merge_parts
from ctxeval.render.meta_eval import markdown_table
from ctxeval.render.pplqa import markdown as pplqa_markdown
from ctxeval.results.manifest import Manifest, write_manifest
from ctxeval.qa.meta_eval import evaluate_picks
from ctxeval.pipeline.engine import save_result
from ctxeval.render.kinds import RENDERING
from ctxeval.results.meta_eval import MetaEvalResult
from ctxeval.results.pplqa import PplqaResult
from ctxeval.scoring.finish import scoring_result

XSS = ["<script>alert(1)</script>", '" onmouseover="alert(1)', "</script>", "{{ }}"]
VOCAB = XSS + [" the", " cat", " sat", "\n", "\t", "Hello", " &amp;", "\u2028", " on", " mat", ".", " a", " dog", " ran"]
VOCAB_SIZE = 1000  # ids beyond VOCAB never appear as targets, only as top-k alternatives and greedy tokens
TOP_K = 5


def token_sequence(n: int, seed: int) -> np.ndarray:
    """The text as token ids: the hostile tokens first, then seeded ordinary ones."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(len(XSS), len(VOCAB), size=n)
    ids[: len(XSS)] = np.arange(len(XSS))
    return ids


def _text(ids: np.ndarray) -> str:
    return "".join(VOCAB[i] for i in ids)


def _rows(ids, starts, ends, positions, ranks, contexts, rng, shift, fixed: dict) -> dict:
    """Columns of one pass: `ranks` decides each target's log-probability and top-k."""
    columns = {name: [] for name in BASE_SCHEMA.names}
    for p, rk, ctx in zip(positions, ranks, contexts):
        target = int(ids[p])
        others = [int(x) for x in rng.choice(np.setdiff1d(np.arange(VOCAB_SIZE), [target]), size=TOP_K, replace=False)]
        topk_lp = np.sort(rng.uniform(-6.0, -0.1, TOP_K))[::-1].astype(np.float32)
        if rk <= TOP_K:
            others.insert(int(rk) - 1, target)
            logprob = float(topk_lp[rk - 1]) - shift
        else:
            logprob = float(topk_lp[-1]) - rng.uniform(0.5, 5.0) - shift
        topk = others[:TOP_K]
        row = fixed | {
            "context_len": int(ctx), "target_pos": int(p), "char_start": int(starts[p]), "char_end": int(ends[p]),
            "n_bytes": len(VOCAB[target].encode()), "target_id": target, "target_text": VOCAB[target], "logprob": logprob,
            "rank": int(rk), "greedy_id": topk[0], "topk_ids": topk, "topk_logprobs": topk_lp.tolist(),
            "topk_returned": None,  # exact ranks over the full vocabulary
        }
        for k, v in row.items():
            columns[k].append(v)
    return columns


def _spans(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    ends = np.cumsum([len(VOCAB[i]) for i in ids])
    return ends - np.array([len(VOCAB[i]) for i in ids]), ends


def _manifest(model: str, text: str, n_text: int, config: dict) -> dict:
    sha = hashlib.sha256(text.encode()).hexdigest()
    return {
        "ctxeval_manifest": 1, "run_id": hashlib.sha256(json.dumps([model, config]).encode()).hexdigest()[:16], "status": "complete",
        "created": "2026-01-01T00:00:00Z",
        "config": {"texts": [sha], "text_ids": ["synthetic"], "models": [model], "top_k": TOP_K, "temperatures": [1.0], "seed": 0,
                   "metrics": {"cutoff": 20, "alphas": [0.1, 0.3], "approx_k": TOP_K, "penalty": 3.0}} | config,
        "models": [{"name": model, "backend": "synthetic", "vocab_size": VOCAB_SIZE, "bos_id": 2}],
        "texts": [{"text_id": "synthetic", "source": "synthetic", "sha256": sha, "n_chars": len(text), "n_bytes": len(text.encode()), "n_tokens": {model: n_text}}],
        "bos": "synthetic: no model ran", "versions": {"ctxeval": "0.1.0"},
    }


def write_gain_run(run_dir: Path, model: str, n_tokens: int = 96, window: int = 32, short: int = 4, seed: int = 0, summarise: bool = False) -> Path:
    """A complete context-gain run: chunks of `window` tokens scored with their full context
    (`chunked`) and with the last `short` tokens (`truncated`, for targets past `short`);
    `summarise` also writes what the command writes from them (summary.json, report, plot)."""
    run_dir = Path(run_dir)
    ids = token_sequence(n_tokens, seed)
    starts, ends = _spans(ids)
    rng = np.random.default_rng(seed + 7)
    writer = PartWriter(run_dir, BASE_SCHEMA)
    pass_index = 0
    for chunk in range(0, n_tokens, window):
        pos = np.arange(chunk, min(chunk + window, n_tokens))
        context = pos - chunk
        base = {"model": model, "text_id": "synthetic", "context_mode": "exact", "nominal_len": window, "repeat": 0}
        writer.write(_rows(ids, starts, ends, pos, rng.choice([1, 1, 2, 4, 40, 3000], size=len(pos)), context, rng, 0.0,
                           base | {"pass_index": pass_index, "method": "chunked", "window_id": f"c{chunk}"}))
        far = pos[context > short]
        writer.write(_rows(ids, starts, ends, far, rng.choice([1, 3, 40, 3000, 9000], size=len(far)), np.full(len(far), short), rng, 0.0,
                           base | {"pass_index": pass_index + 1, "method": "truncated", "window_id": f"t{chunk}"}))
        pass_index += 2
    merge_parts(run_dir, BASE_SCHEMA)
    manifest = Manifest.from_json(_manifest(model, _text(ids), n_tokens, {"command": "context-gain", "window": window, "short": short, "stride": 1, "method": "chunked"}))
    write_manifest(run_dir, manifest)
    if summarise:
        from ctxeval.probes.gain_report import KeyTokenSettings
        from ctxeval.probes.gain_report import context_gain_result

        save_result(run_dir, context_gain_result(run_dir, manifest, KeyTokenSettings(model, 2.0, -2.0, 16, 200, seed)), "context-gain", RENDERING)
    return run_dir


def synthetic_piece(token_id: int) -> bytes:
    """The synthetic tokenizer: VOCAB, then ` w<id>` for the ids that occur only as alternatives."""
    return (VOCAB[token_id] if token_id < len(VOCAB) else f" w{token_id}").encode()


def write_run(run_dir: Path, model: str, lengths: list[int], n_compare: int, repeats: int = 1, seed: int = 0, shift: float = 0.0,
              command: str = "sweep", n_text_tokens: int | None = None, pieces: bool = True) -> Path:
    """A complete sweep-like run of one model on one text: per (length, repeat) a window of
    `n_compare` targets. `shift` lowers every log-probability (a worse model on the same
    windows); the windows and character spans depend only on `lengths`, `repeats` and `seed`.
    `pieces`: write the run's token pieces (False: a run as older ctxeval versions wrote it)."""
    run_dir = Path(run_dir)
    n_text = n_text_tokens or (max(lengths) + n_compare) * 2
    ids = token_sequence(n_text, seed)
    starts, ends = _spans(ids)
    rng = np.random.default_rng(seed + 1 + int(shift * 1000))
    place = np.random.default_rng(seed)
    writer = PartWriter(run_dir, BASE_SCHEMA)
    pass_index = 0
    for length in lengths:
        for r in range(repeats):
            first = 0 if (length, r) == (lengths[0], 0) else int(place.integers(length, n_text - n_compare))
            pos = np.arange(first, first + n_compare)
            fixed = {"pass_index": pass_index, "model": model, "text_id": "synthetic", "method": "sweep", "context_mode": "exact",
                     "nominal_len": length, "repeat": r, "window_id": f"L{length}-r{r}"}
            writer.write(_rows(ids, starts, ends, pos, rng.choice([1, 1, 2, 3, 7, 40, 300, 5000], size=n_compare), np.full(n_compare, length), rng, shift, fixed))
            pass_index += 1
    if pieces:
        write_pieces(run_dir, model, synthetic_piece)
    merge_parts(run_dir, BASE_SCHEMA)
    config = {"command": command, "lengths": lengths, "n_compare": n_compare, "seed": seed, "repeats": repeats, "context_modes": ["exact"]}
    manifest = Manifest.from_json(_manifest(model, _text(ids), n_text, config))
    write_manifest(run_dir, manifest)
    save_result(run_dir, scoring_result(run_dir, manifest, manifest.metrics), command, RENDERING)
    return run_dir


def write_retrieval_run(run_dir: Path, model: str, lines: tuple[int, ...] = (5, 8), depths: tuple[float, ...] = (0.0, 1.0), samples: int = 2, seed: int = 0) -> Path:
    """A complete retrieval run: seeded case records of the real schema, the manifest, and the
    results the command writes from them (results.json/.md, heatmap)."""
    from dataclasses import asdict

    from ctxeval.probes.retrieval_run import CASE_SCHEMA, CASES, RetrievalConfig
    from ctxeval.probes.retrieval_report import retrieval_result

    run_dir = Path(run_dir)
    config = RetrievalConfig("cat", lines, depths, samples, seed, (model,))
    rng = np.random.default_rng(seed)
    grid = [(n, d, k) for n in lines for d in depths for k in range(samples)]
    ranks = rng.choice([1, 1, 2, 9, 300], size=len(grid))
    columns = {
        "case_index": list(range(len(grid))), "model": [model] * len(grid), "variant": ["cat"] * len(grid), "tokens_target": [None] * len(grid),
        "lines": [n for n, _, _ in grid], "depth": [d for _, d, _ in grid], "sample": [k for _, _, k in grid], "char_depth": [d for _, d, _ in grid],
        "prompt_tokens": [25 * n for n, _, _ in grid], "correct": [bool(r == 1) for r in ranks], "prediction": ["1234" if r == 1 else "99" for r in ranks],
        "accuracy_method": ["teacher forcing"] * len(grid), "min_margin": rng.uniform(0.1, 3.0, len(grid)).tolist(), "first_rank": [int(r) for r in ranks],
        "value_logprob": rng.uniform(-9.0, -0.1, len(grid)).tolist(), "value_tokens": [2] * len(grid), "answer_ranks": [[int(r), 1] for r in ranks],
    }
    PartWriter(run_dir, CASE_SCHEMA).write(columns)
    merge_parts(run_dir, CASE_SCHEMA, CASES)
    models = [{"name": model, "backend": "synthetic", "vocab_size": VOCAB_SIZE, "bos_id": 2}]
    manifest = Manifest(command="retrieval", run_id=config.run_id(), config=asdict(config), models=models, status="complete",
                        plan={"cases": len(grid), "record_kind": "retrieval case", "records": CASES.file})
    write_manifest(run_dir, manifest)
    save_result(run_dir, retrieval_result(run_dir, manifest), "retrieval", RENDERING)
    return run_dir


def write_answer_quality_run(run_dir: Path, command: str = "meta-eval") -> Path:
    """A finished pplqa/meta-eval run (no per-token records): its manifest and its result."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    config = {"dataset": "fixture", "items": 2, "model": "synthetic"}
    manifest = Manifest(command=command, run_id=hashlib.sha256(command.encode()).hexdigest()[:16], config=config,
                        models=[{"name": "synthetic", "backend": "synthetic"}], status="complete")
    write_manifest(run_dir, manifest)
    save_result(run_dir, answer_quality_result(command, manifest, run_dir), command, RENDERING)
    return run_dir


def answer_quality_result(command: str, manifest: Manifest, run_dir: Path) -> PplqaResult | MetaEvalResult:
    """The result of a pplqa or meta-eval run over two answers (or one item) scored by PPLqa."""
    evaluator = {"name": "synthetic", "backend": "synthetic", "sha256": "0" * 64}
    config = {"methods": ["pplqa"], "qa_scope": "all", "aspect": "coherence"}
    if command == "pplqa":
        scores = pd.DataFrame([{"question_id": "81", "model": m, "pplqa": v, "pplqa:ppl_qa": 2.5, "pplqa:ppl_a": 2.5 + v, "pplqa_rank": r}
                               for m, v, r in (("a", 0.25, 1.0), ("NA", float("nan"), 2.0))])
        report = {"evaluator": evaluator, "config": config, "questions": 1, "answers": 2, "mean_rank_per_model": {"pplqa": {"a": 1.0, "NA": 2.0}},
                  "reference": None, "tau_variant": "a", "agreement": {}, "timing": {"seconds": 0.0, "passes_run_this_session": 0}}
        return PplqaResult(report, scores, manifest, Path(run_dir), pplqa_markdown(report))
    rows = [{"item_id": "007", "label": 1, "pplqa_1": 0.5, "pplqa_2": 0.75, "pplqa_pick": 1}, {"item_id": "8", "label": 2, "pplqa_1": 0.5, "pplqa_2": 0.25, "pplqa_pick": 2}]
    report = {"dataset": {"name": "fixture", "source": "synthetic", "items": 2, "tie_policy": "drop", "ties_dropped": 0, "labels": {"1": 1, "2": 1}},
              "evaluator": evaluator, "config": config, "bootstrap": {"method": "percentile", "replicates": 20, "seed": 0, "confidence": 0.95, "unit": "item"},
              "methods": evaluate_picks(rows, ("pplqa",), 20, 0), "timing": {"scoring_seconds": 0.0, "passes_run_this_session": 0, "total_seconds": 0.0}}
    return MetaEvalResult(report, pd.DataFrame(rows), manifest, Path(run_dir), markdown_table(report))
