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

from pathlib import Path

import numpy as np

from ctxeval.errors import UserError
from ctxeval.pieces import read_pieces
from ctxeval.render.kinds import renderer
from ctxeval.render.renderer import View
from ctxeval.render.page import b64, runs_of
from ctxeval.render.views import Arm, RunView, header
from ctxeval.results.base import RESULT_FILE, read_header, read_result, result_class
from ctxeval.results.manifest import read_manifest

DEFAULT_TOP_K_SHOWN = 10
# a folder's command -> the kind of result it writes, where they differ (the page reads that
# result: a folder without a header is refused by read_result)
COMMAND_KINDS = {"sweep": "scoring", "score": "scoring", "compare": "comparison"}


def _view(kind: str) -> View | None:
    """The view of `kind` its renderer declares (None: the page shows its manifest)."""
    found = renderer(kind)
    return None if found is None else found.view


def run_kind(path: Path) -> str:
    """What an output folder holds: its result's kind where the page has a view of it (its
    renderer's), else the command its manifest names."""
    if (path / RESULT_FILE).is_file() and _view(read_header(path)["kind"]) is not None:
        return read_header(path)["kind"]
    if (path / "manifest.json").is_file():
        return read_manifest(path).command or "unknown"
    raise UserError(f"{path} is not a ctxeval output folder (no {RESULT_FILE} or manifest.json)")


def load_runs(paths: list[Path]) -> tuple[list[RunView], list[Arm]]:
    """Read every run directory, each as its result's view (its renderer's; a kind without one
    shows its manifest); UserError for a missing, unknown or unfinished one."""
    if not paths:
        raise UserError("give at least one run directory")
    views, arms, labels = [], [], set()
    for path in paths:
        path = Path(path)
        if not path.is_dir():
            raise UserError(f"{path} is not a directory")
        label = _unique(path.name or str(path), labels)
        kind = run_kind(path)
        kind = COMMAND_KINDS.get(kind, kind)
        show = _view(kind)
        if show is not None:
            view, run_arms = show(read_result(path, reader="report", kinds=(result_class(kind),)), label, len(arms))
            arms += run_arms
        else:
            view = _generic_view(path, label, kind)
        views.append(view)
    return views, arms


def _unique(label: str, seen: set[str]) -> str:
    out, i = label, 2
    while out in seen:
        out, i = f"{label} ({i})", i + 1
    seen.add(out)
    return out


def _generic_view(path: Path, label: str, kind: str) -> RunView:
    """Runs without per-token records and without a view of their own: their manifest only."""
    manifest = read_manifest(path).to_json()
    return RunView(label, path, kind, manifest, header(manifest, kind))


def _vocab(arm: Arm, topk_ids: np.ndarray) -> dict[int, str]:
    """Text of every id the page can show (targets, greedy tokens, the top-k shown): the records'
    own target texts, where they hold them (a diff's do not), over the run's token pieces."""
    r = arm.records
    shown = np.unique(np.concatenate([r["target_id"].to_numpy(dtype=np.int64), r["greedy_id"].fillna(-1).to_numpy(dtype=np.int64), topk_ids.ravel().astype(np.int64)]))
    pieces = read_pieces(arm.run_dir, arm.pieces_of or arm.model)
    vocab = {int(i): pieces[int(i)] for i in shown if int(i) in pieces}
    return vocab | {i: text for i, text in zip(r["target_id"].astype(int).tolist(), r["target_text"].tolist()) if text is not None}


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
