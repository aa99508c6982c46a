"""Each result kind's view on the `ctxeval report` page: what the page shows of one output
folder (its header, headline numbers, answer and tables) and, for runs with per-token records,
its arms (one model's scored tokens). A view reads the Result alone; each kind's renderer
declares its view beside its texts (`renderer.Renderer`), so explorer/ keeps no per-kind switch
of its own. The views several kinds share, and their parts, are here."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ctxeval.render import intervals
from ctxeval.render.compare_samples import answer_headline, differing_samples, order_headlines
from ctxeval.render.headline import Headline
from ctxeval.render.numerics import run_lines
from ctxeval.results.comparison import Comparison
from ctxeval.results.context_gain import ContextGainResult
from ctxeval.results.manifest import Manifest
from ctxeval.results.meta_eval import MetaEvalResult
from ctxeval.results.pplqa import PplqaResult
from ctxeval.results.retrieval import RetrievalResult
from ctxeval.results.runs import require_complete
from ctxeval.results.scoring import RunResult
from ctxeval.stats.interval import Interval


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
    gain: np.ndarray | None = None  # log p_long - log p_short per row (context-gain; effective-length: over the shortest length)
    key: np.ndarray | None = None  # LongPPL key token per row (context-gain, effective-length)
    pieces_of: str | None = None  # whose token pieces the run keeps for this arm (a diff's: REF's, shared by CAND); None: its own


@dataclass
class TokenPair:
    """Arm B against arm A token by token: Δ = log p_A − log p_B per token of A (NaN where B has
    no token on the same characters); the explorer's A − B colour."""

    a: Arm
    b: Arm
    delta: np.ndarray


@dataclass
class RunView:
    """One run directory as the report shows it."""

    label: str
    path: Path
    kind: str
    manifest: dict | None
    header: dict
    headline: list[dict] = field(default_factory=list)  # {label, value, interval}
    interval_header: str = "interval"  # the headline's interval column, its level and method where the view reads them from its rows
    summary: pd.DataFrame | None = None  # sweep/score: summarize()'s rows
    gain_by_distance: pd.DataFrame | None = None
    retrieval_cells: pd.DataFrame | None = None
    compare: dict | None = None  # a compare folder's report
    effective: dict | None = None  # an effective-length run's summary
    answer: Headline | None = None  # what the run answers, as its command prints it first
    pairs: list[TokenPair] = field(default_factory=list)  # its own arms compared token by token (a diff: REF − CAND)
    more: list[Headline] = field(default_factory=list)  # the tables after its answer, as its Markdown holds them
    curves: pd.DataFrame | None = None  # a score by length to chart: series, length, score, low, high (RULER)
    curves_title: str = ""
    samples: list[dict] | None = None  # RULER: one entry per sample, what the sample explorer shows


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


def lm_view(result: RunResult, label: str, first_arm: int) -> tuple[RunView, list[Arm]]:
    path, records, summary, kind = result.run_dir, result.records, result.summary, result.manifest.command
    require_complete(path, result.manifest)
    manifest = result.manifest.to_json()  # the page shows the manifest as written
    view = RunView(label, path, kind, manifest, header(manifest, kind), summary=summary)
    for _, row in summary.iterrows():
        where = f"{row['model']} · {row['text_id']} · {row['method']} {row['context_mode']} L={row['nominal_len']}"
        view.headline.append({"label": f"PPL (exact) {where}", "value": f"{row['ppl']:.4g}", "interval": intervals.labelled(Interval.from_columns(row, "ppl").to_row(), ".4g")})
        view.headline.append({"label": f"AVG {where}", "value": f"{row['avg']:.4f}", "interval": intervals.labelled(Interval.from_columns(row, "avg").to_row(), ".4f")})
    arms = [Arm(first_arm + i, label, path, kind, model, manifest, part.reset_index(drop=True)) for i, (model, part) in enumerate(records.groupby("model", sort=False))]
    return view, arms


def gain_view(result: ContextGainResult, label: str, first_arm: int) -> tuple[RunView, list[Arm]]:
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
            ratio = s["ppl_ratio_long_over_short"]
            view.headline.append({"label": f"PPL long/short {model} · {text_id}", "value": f"{ratio['estimate']:.4f}", "interval": intervals.labelled(ratio, ".4f")})
            if s.get("longppl") is not None:
                view.headline.append({"label": f"LongPPL {model} · {text_id}", "value": f"{s['longppl']:.4g}", "interval": ""})
    return view, arms


def retrieval_view(result: RetrievalResult, label: str, first_arm: int) -> tuple[RunView, list[Arm]]:
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
    return view, []


def compare_view(result: Comparison, label: str, first_arm: int) -> tuple[RunView, list[Arm]]:
    path, report = result.out, result.report
    if report.get("kind") == "samples":
        return samples_compare_view(result, label), []
    pm = report["primary_metric"]
    numerics = report.get("numerics")
    notes = "; ".join(numerics["lines"]) + ". " + " ".join(numerics["notes"]) if numerics else ""
    view = RunView(label, path, "compare", None, {"command": "compare", "runs": f"A {report['runs']['a']} · B {report['runs']['b']}", "profile": report.get("profile", ""), "numerics": notes}, compare=report)
    scores = report.get("secondary_metrics", {})
    view.headline.append({"label": "PPL ratio B/A", "value": f"{pm['ratio']['estimate']:.4f}", "interval": intervals.bounds(pm["ratio"], ".4f")})
    for name, m in scores.items():
        view.headline.append({"label": f"{name} B − A", "value": f"{m['difference']['estimate']:+.4f}", "interval": intervals.bounds(m["difference"], "+.4f")})
    view.interval_header = intervals.rows_header([pm["ratio"], *(m["difference"] for m in scores.values())]) + " interval"
    return view, []


def samples_compare_view(result: Comparison, label: str) -> RunView:
    """A comparison of per-sample runs (other tools' outputs): its answer, the orders and tie
    groups, and the samples the runs score differently."""
    report = result.report
    runs = " · ".join(f"{r['run']} ({r['format']})" for r in report["runs"])
    view = RunView(label, result.out, "compare", None, {"command": "compare", "runs": runs}, compare=report)
    view.answer = answer_headline(report)
    view.more = order_headlines(report) + differing_samples(report)
    for row in view.answer.rows:
        view.headline.append({"label": f"{row[0]}: {row[1]} − first", "value": row[4].split(" ", 1)[0], "interval": row[4].split(" ", 1)[1] + f" ({row[5]})"})
    return view


def answers_view(result: PplqaResult | MetaEvalResult, label: str, first_arm: int) -> tuple[RunView, list[Arm]]:
    """An answer-quality run (no per-token records): its manifest only."""
    manifest = result.manifest.to_json()
    return RunView(label, result.out, result.KIND, manifest, header(manifest, result.KIND)), []
