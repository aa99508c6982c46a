"""Everything the HTML report shows, read from run directories: headers, headline numbers and
the per-token data of every scored window, packed column by column.

The per-token data travels as one typed array per field (base64 of little-endian bytes) rather
than one object per token: a 100K-token run stays a few MB and the browser decodes it in
milliseconds. Token texts are kept once per model (id -> text of every id the page shows, from
the run's `pieces.parquet`), so the top-k alternatives and the greedy token show as text; a run
without that file falls back to the records' own targets, and an id never scored shows as `#id`
(the report never loads a model or tokenizer).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ctxeval.errors import UserError
from ctxeval.results.manifest import Manifest, read_manifest
from ctxeval.pieces import read_pieces
from ctxeval.render import agreement as agreement_render, diff as diff_render, effective_length as effective_render, ruler as ruler_render
from ctxeval.render.headline import Headline
from ctxeval.render.numerics import run_lines
from ctxeval.render.page import b64, runs_of
from ctxeval.results.runs import require_complete
from ctxeval.results.base import RESULT_FILE, read_header, read_result
from ctxeval.results.agreement import AgreementResult
from ctxeval.results.comparison import Comparison
from ctxeval.results.context_gain import ContextGainResult
from ctxeval.results.diff import DiffResult
from ctxeval.results.effective_length import EffectiveLengthResult, describe_length
from ctxeval.results.meta_eval import MetaEvalResult
from ctxeval.results.pplqa import PplqaResult
from ctxeval.results.retrieval import RetrievalResult
from ctxeval.results.ruler import RulerResult
from ctxeval.results.scoring import RunResult

TOKEN_KINDS = ("sweep", "score", "context-gain")
DEFAULT_TOP_K_SHOWN = 10


@dataclass
class Arm:
    """The scored tokens of one model in one run: what the explorer pages through."""

    index: int
    run: str  # the run's label (its directory name, made unique)
    run_dir: Path
    kind: str
    model: str
    manifest: dict
    records: pd.DataFrame  # in plan order, only the explorer's rows (context-gain: long contexts)
    gain: np.ndarray | None = None  # context-gain: log p_long - log p_short per row
    key: np.ndarray | None = None  # context-gain: LongPPL key token per row


@dataclass
class RunView:
    """One run directory as the report shows it."""

    label: str
    path: Path
    kind: str
    manifest: dict | None
    header: dict
    headline: list[dict] = field(default_factory=list)  # {label, value, interval}
    summary: pd.DataFrame | None = None  # sweep/score: summarize()'s rows
    gain_by_distance: pd.DataFrame | None = None
    retrieval_cells: pd.DataFrame | None = None
    compare: dict | None = None  # a compare folder's report
    effective: dict | None = None  # an effective-length run's summary
    answer: Headline | None = None  # what the run answers, as its command prints it first


def run_kind(path: Path) -> str:
    """What an output folder holds: its result's kind where the page reads the result
    (`scoring`, `comparison`, `context-gain`, `effective-length`, `retrieval`, `ruler`, `agreement`,
    `pplqa`, `meta-eval`), else the command its manifest names."""
    if (path / RESULT_FILE).is_file() and read_header(path)["kind"] in ("scoring", "comparison", "context-gain", "effective-length", "retrieval", "ruler", "agreement",
                                                                        "pplqa", "meta-eval"):
        return read_header(path)["kind"]
    if (path / "manifest.json").is_file():
        return read_manifest(path).command or "unknown"
    raise UserError(f"{path} is not a ctxeval output folder (no {RESULT_FILE} or manifest.json)")


def load_runs(paths: list[Path]) -> tuple[list[RunView], list[Arm]]:
    """Read every run directory; UserError for a missing, unknown or unfinished one."""
    if not paths:
        raise UserError("give at least one run directory")
    views, arms, labels = [], [], set()
    for path in paths:
        path = Path(path)
        if not path.is_dir():
            raise UserError(f"{path} is not a directory")
        label = _unique(path.name or str(path), labels)
        kind = run_kind(path)
        if kind in ("comparison", "compare"):  # a compare folder without a header is refused
            views.append(_compare_view(read_result(path, reader="report", kinds=(Comparison,)), label))
        elif kind in ("scoring", "sweep", "score"):  # as is a scoring run without one
            view, run_arms = _lm_view(read_result(path, reader="report", kinds=(RunResult,)), label, len(arms))
            views.append(view)
            arms += run_arms
        elif kind == "context-gain":  # (these too are refused without a header)
            view, run_arms = _gain_view(read_result(path, reader="report", kinds=(ContextGainResult,)), label, len(arms))
            views.append(view)
            arms += run_arms
        elif kind == "effective-length":
            views.append(_effective_view(read_result(path, reader="report", kinds=(EffectiveLengthResult,)), label))
        elif kind == "retrieval":
            views.append(_retrieval_view(read_result(path, reader="report", kinds=(RetrievalResult,)), label))
        elif kind == "ruler":
            views.append(_ruler_view(read_result(path, reader="report", kinds=(RulerResult,)), label))
        elif kind == "agreement":
            views.append(_agreement_view(read_result(path, reader="report", kinds=(AgreementResult,)), label))
        elif kind == "diff":  # a diff run without a header is refused
            views.append(_diff_view(read_result(path, reader="report", kinds=(DiffResult,)), label))
        elif kind in ("pplqa", "meta-eval"):  # as is an answer-quality run without one
            views.append(_answers_view(read_result(path, reader="report", kinds=(PplqaResult, MetaEvalResult)), label))
        else:
            views.append(_generic_view(path, label, kind))
    return views, arms


def _unique(label: str, seen: set[str]) -> str:
    out, i = label, 2
    while out in seen:
        out, i = f"{label} ({i})", i + 1
    seen.add(out)
    return out


def header(manifest: dict, kind: str) -> dict:
    """Model(s), backend, tokenizer, BOS, windows/lengths, seed, version, status of a manifest."""
    config = manifest.get("config", {})
    models = manifest.get("models", [])
    bos = [f"{m.get('name')}: BOS id {m['bos_id']}" if m.get("bos_id") is not None else f"{m.get('name')}: no BOS" for m in models]
    if kind in ("sweep",):
        windows = f"lengths {', '.join(str(x) for x in config.get('lengths', []))}; n_c {config.get('n_compare')}; repeats {config.get('repeats')}; modes {', '.join(config.get('context_modes', []))}"
    elif kind == "score":  # a stride exists only for sliding windows (chunked and fixed record 0)
        stride = f" stride {config.get('stride')}" if config.get("method") == "sliding" else ""
        windows = f"{config.get('method')} window {config.get('window')}{stride}"
    elif kind == "effective-length":
        windows = f"lengths {', '.join(str(x) for x in config.get('lengths', []))}; {config.get('repeats')} spans of {config.get('n_compare')} targets per document, the same targets at every length"
    elif kind == "context-gain":
        windows = f"chunked window {config.get('window')} vs last {config.get('short')} tokens (stride {config.get('stride')})"
    else:
        windows = ", ".join(f"{k} {v}" for k, v in config.items() if k in ("lines", "depths", "samples", "variant", "tokens"))
    return {
        "run_id": manifest.get("run_id", ""),
        "command": kind,
        "status": manifest.get("status", ""),
        "created": manifest.get("created", ""),
        "models": ", ".join(f"{m.get('name')} ({m.get('backend')}, vocab {m.get('vocab_size')})" for m in models) or ", ".join(config.get("models", [])),
        "tokenizer": ", ".join(_tokenizer(m, config) for m in models),
        "bos": "; ".join(bos) + (f" — {manifest['bos']}" if manifest.get("bos") else ""),
        "windows": windows,
        "texts": ", ".join(config.get("text_ids", [])),
        "seed": config.get("seed", ""),
        "top_k": config.get("top_k", ""),
        "version": manifest.get("versions", {}).get("ctxeval", ""),
        "numerics": "; ".join(run_lines(Manifest.from_json(manifest))),
    }


def _tokenizer(model: dict, config: dict) -> str:
    if model.get("backend") == "llamacpp":
        return f"{model.get('name')}: GGUF vocabulary of {Path(str(model.get('path', ''))).name}"
    if model.get("backend") == "openai" and config.get("backend_options"):
        return f"{model.get('name')}: {config['backend_options']}"
    return f"{model.get('name')}: the {model.get('backend')} model's own tokenizer"


def _interval(lo: float, hi: float, fmt: str) -> str:
    """The bounds in the format of the value they bracket (`fmt`), so estimate and bounds read
    alike: "1.0077 [1.0004, 1.0164]", "+0.0023 [-0.0001, +0.0053]"."""
    return "" if not (math.isfinite(lo) and math.isfinite(hi)) else f"[{lo:{fmt}}, {hi:{fmt}}]"


def _bounds(bounds: list[float] | None, fmt: str) -> str:
    """A paired estimate's interval in the value's format, or "no interval" where there is none
    (one window/document)."""
    return "no interval" if bounds is None else _interval(*bounds, fmt)


def _lm_view(result: RunResult, label: str, first_arm: int) -> tuple[RunView, list[Arm]]:
    path, records, summary, kind = result.run_dir, result.records, result.summary, result.manifest.command
    require_complete(path, result.manifest)
    manifest = result.manifest.to_json()  # the page shows the manifest as written
    view = RunView(label, path, kind, manifest, header(manifest, kind), summary=summary)
    for _, row in summary.iterrows():
        where = f"{row['model']} · {row['text_id']} · {row['method']} {row['context_mode']} L={row['nominal_len']}"
        view.headline.append({"label": f"PPL (exact) {where}", "value": f"{row['ppl']:.4g}", "interval": _interval(row["ppl_lo"], row["ppl_hi"], ".4g")})
        view.headline.append({"label": f"AVG {where}", "value": f"{row['avg']:.4f}", "interval": _interval(row["avg_lo"], row["avg_hi"], ".4f")})
    arms = [Arm(first_arm + i, label, path, kind, model, manifest, part.reset_index(drop=True)) for i, (model, part) in enumerate(records.groupby("model", sort=False))]
    return view, arms


def _gain_view(result: ContextGainResult, label: str, first_arm: int) -> tuple[RunView, list[Arm]]:
    path, records = result.run_dir, result.records
    require_complete(path, result.manifest)
    manifest = result.manifest.to_json()
    view = RunView(label, path, "context-gain", manifest, header(manifest, "context-gain"))
    arms, distance = [], []
    for i, model in enumerate(dict.fromkeys(records["model"])):
        parts, gains, keys = [], [], []
        for text_id in dict.fromkeys(records["text_id"]):
            table = result.tables[model, text_id].set_index("target_pos")
            long_rows = result.long_rows(model, text_id)
            parts.append(long_rows)
            gains.append(table["gain"].reindex(long_rows["target_pos"]).to_numpy())
            keys.append(table["key"].reindex(long_rows["target_pos"]).to_numpy(dtype=bool))
            by_distance = result.by_distance[(result.by_distance["model"] == model) & (result.by_distance["text_id"] == text_id)].drop(columns=["model", "text_id"])
            distance.append(by_distance.assign(series=f"{model} · {text_id}")[["series", *by_distance.columns]])
        arms.append(Arm(first_arm + i, label, path, "context-gain", model, manifest, pd.concat(parts, ignore_index=True), np.concatenate(gains), np.concatenate(keys)))
    view.gain_by_distance = pd.concat(distance, ignore_index=True)
    for text_id, entry in result.summary["texts"].items():
        for model, s in entry["by_model"].items():
            view.headline.append({"label": f"PPL long/short {model} · {text_id}", "value": f"{s['ppl_ratio_long_over_short']:.4f}", "interval": _bounds(s["ppl_ratio_ci"], ".4f")})
            if s.get("longppl") is not None:
                view.headline.append({"label": f"LongPPL {model} · {text_id}", "value": f"{s['longppl']:.4g}", "interval": ""})
    return view, arms


def _effective_view(result: EffectiveLengthResult, label: str) -> RunView:
    """An effective-length run: L* per model (all targets and key tokens) and its gain, in the
    headline; the curves with their bands are charts (render._effective_charts)."""
    manifest = result.manifest.to_json()
    view = RunView(label, result.run_dir, "effective-length", manifest, header(manifest, "effective-length"), effective=result.summary,
                   answer=effective_render.headline(result.summary))
    lengths = result.summary["lengths"]
    for model, s in result.summary["models"].items():
        view.headline.append({"label": f"L* {model}", "value": describe_length(s["effective_length"]), "interval": f"{s['effective_length']['units']} {s['effective_length']['unit']}s"})
        view.headline.append({"label": f"key-token L* {model}", "value": describe_length(s["key_effective_length"]), "interval": f"{s['n_key']} key tokens"})
        gain = s["curve"][-1]["gain"]
        view.headline.append({"label": f"gain {lengths[0]}→{lengths[-1]} {model} (nats/token)", "value": f"{gain['estimate']:+.4f}",
                              "interval": "no interval" if gain["interval"] == "none" else f"[{gain['low']:+.4f}, {gain['high']:+.4f}]"})
    return view


def _retrieval_view(result: RetrievalResult, label: str) -> RunView:
    manifest = result.manifest.to_json()
    view = RunView(label, result.run_dir, "retrieval", manifest, header(manifest, "retrieval"))
    cells = result.cells
    view.retrieval_cells = cells
    for model, part in cells.groupby("model", sort=False):
        acc = float((part["accuracy"] * part["n"]).sum() / part["n"].sum())
        view.headline.append({"label": f"retrieval accuracy {model}", "value": f"{acc:.3f}", "interval": f"{int(part['n'].sum())} cases"})
    for model, e in result.effective_lengths().items():
        value = "below the shortest length" if e["value"] is None else (f"≥ {e['value']}" if e["at_least"] else str(e["value"]))
        view.headline.append({"label": f"retrieval effective length {model}", "value": value, "interval": f"accuracy ≥ {e['threshold']:g}"})
    return view


def _compare_view(result: Comparison, label: str) -> RunView:
    path, report = result.out, result.report
    pm = report["primary_metric"]
    numerics = report.get("numerics")
    notes = "; ".join(numerics["lines"]) + ". " + " ".join(numerics["notes"]) if numerics else ""
    view = RunView(label, path, "compare", None, {"command": "compare", "runs": f"A {report['runs']['a']} · B {report['runs']['b']}", "profile": report.get("profile", ""), "numerics": notes}, compare=report)
    view.headline.append({"label": "PPL ratio B/A", "value": f"{pm['ratio']:.4f}", "interval": _bounds(pm["display_ci"], ".4f")})
    for name, m in report.get("secondary_metrics", {}).items():
        view.headline.append({"label": f"{name} B − A", "value": f"{m['difference']:+.4f}", "interval": _bounds(m["ci"], "+.4f")})
    return view


def _diff_view(result: DiffResult, label: str) -> RunView:
    """A diff: its answer and manifest (its tokens are on its own page, report.html)."""
    manifest = result.manifest.to_json()
    return RunView(label, result.run_dir, "diff", manifest, header(manifest, "diff"), answer=diff_render.headline(result.report))


def _ruler_view(result: RulerResult, label: str) -> RunView:
    """A RULER run: every model's score by length, and its manifest."""
    manifest = result.manifest.to_json()
    return RunView(label, result.run_dir, "ruler", manifest, header(manifest, "ruler"),
                   answer=ruler_render.headline(result.table, result.effective_lengths, result.threshold))


def _agreement_view(result: AgreementResult, label: str) -> RunView:
    """An agreement report: the cheap measures ranked by ρ, and what it read."""
    manifest = read_manifest(result.out).to_json()
    return RunView(label, result.out, "agreement", manifest, header(manifest, "agreement"),
                   answer=agreement_render.headline(result.measures, result.correlations, result.replicates))


def _answers_view(result: PplqaResult | MetaEvalResult, label: str) -> RunView:
    """An answer-quality run (no per-token records): its manifest only."""
    manifest = result.manifest.to_json()
    return RunView(label, result.out, result.KIND, manifest, header(manifest, result.KIND))


def _generic_view(path: Path, label: str, kind: str) -> RunView:
    """Runs without per-token records and without a view of their own: their manifest only."""
    manifest = read_manifest(path).to_json()
    return RunView(label, path, kind, manifest, header(manifest, kind))


def _vocab(arm: Arm, topk_ids: np.ndarray) -> dict[int, str]:
    """Text of every id the page can show (targets, greedy tokens, the top-k shown): from the
    run's token pieces, else (a run without them) the records' own targets."""
    r = arm.records
    shown = np.unique(np.concatenate([r["target_id"].to_numpy(dtype=np.int64), r["greedy_id"].fillna(-1).to_numpy(dtype=np.int64), topk_ids.ravel().astype(np.int64)]))
    pieces = read_pieces(arm.run_dir, arm.model)
    vocab = {int(i): pieces[int(i)] for i in shown if int(i) in pieces}
    return vocab | dict(zip(r["target_id"].astype(int).tolist(), r["target_text"].tolist()))


def arm_payload(arm: Arm, top_k_shown: int) -> dict:
    """Columnar data of one arm: windows (one entry per window) and tokens (one array per field)."""
    r = arm.records
    starts, counts = runs_of(r["window_id"].to_numpy())
    first = r.iloc[starts]
    k = min(top_k_shown, min((len(x) for x in r["topk_ids"]), default=0))
    topk_ids = np.stack([np.asarray(x[:k], dtype=np.int32) for x in r["topk_ids"]]) if k else np.zeros((len(r), 0), np.int32)
    vocab = _vocab(arm, topk_ids)
    topk_lp = np.stack([np.asarray(x[:k], dtype=np.float32) for x in r["topk_logprobs"]]) if k else np.zeros((len(r), 0), np.float32)
    rank = r["rank"].to_numpy(dtype=np.float64)
    tokens = {
        "target_id": b64(r["target_id"].to_numpy(), "i4"),
        "logprob": b64(r["logprob"].to_numpy(), "f8"),
        "rank": b64(np.where(np.isfinite(rank), rank, -1), "i4"),
        "greedy_id": b64(r["greedy_id"].fillna(-1).to_numpy(), "i4"),
        "context_len": b64(r["context_len"].to_numpy(), "i4"),
        "topk_ids": b64(topk_ids.ravel(), "i4"),
        "topk_lp": b64(topk_lp.ravel(), "f4"),
    }
    if arm.gain is not None:
        tokens["gain"] = b64(arm.gain, "f4")
        tokens["key"] = b64(arm.key.astype(np.uint8), "u1")
    return {
        "index": arm.index,
        "run": arm.run,
        "kind": arm.kind,
        "model": arm.model,
        "n": int(len(r)),
        "k": int(k),
        "vocab": {str(i): t for i, t in vocab.items()},
        "windows": {
            "id": first["window_id"].tolist(),
            "text_id": first["text_id"].tolist(),
            "method": first["method"].tolist(),
            "mode": first["context_mode"].tolist(),
            "nominal_len": first["nominal_len"].astype(int).tolist(),
            "repeat": first["repeat"].astype(int).tolist(),
            "start": starts.astype(int).tolist(),
            "count": counts.astype(int).tolist(),
        },
        "tokens": tokens,
    }
