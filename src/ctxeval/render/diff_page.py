"""The HTML report of a diff (`report.html` in its run directory; its result writes it): the
answer first (render/diff.py's headline: KL, perplexity ratio, same top-1), every window's tokens coloured by KL(P_ref || P_cand), a card per token with both models' numbers and
their top-k side by side, and mean KL and same-top-1 % by context position with their intervals.

Built from the parts every page shares: the JSON embedding and base64 typed columns of `page`,
the SVG line chart of `charts`, the shared CSS and JS helpers (`report.css`, `common.js`); only
the page's own layout (`diff.html.j2`) and token view (`diff.js`) are its own. Token texts are
REF's pieces (the two models share one token table; the task reads them from the run's
`pieces.parquet`); an id without a piece shows as `#id`.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
from markupsafe import Markup

from ctxeval.render import charts
from ctxeval.render.diff import headline, intervals, render_markdown
from ctxeval.render.intervals import header as level_header
from ctxeval.render.page import b64, environment, page_js, runs_of, script_json, static
from ctxeval.render.renderer import Renderer
from ctxeval.render.views import Arm, RunView, TokenPair, header
from ctxeval.results.diff import DiffResult


# the records' top-k columns (modeldiff/run.py writes them; runs from before them lack them)
TOPK_COLUMNS = ("ref_topk_ids", "ref_topk_logprobs", "cand_topk_ids", "cand_topk_logprobs")


def render_diff(report: dict, records: pd.DataFrame, pieces: dict[int, str], key: np.ndarray | None = None, compressed: np.ndarray | None = None) -> str:
    """The page of a finished diff: its diff.json content, records and REF's token pieces
    (id -> text). `key`: the records that are key tokens (`--key-tokens`), marked on the page;
    `compressed`: a press's records scored against a compressed cache (the page opens on the
    first window of them, not on one the press never touched)."""
    summary = report["summary"]
    cells = [summary["all"], *summary["buckets"]]
    key_summary = summary.get("key_tokens")
    key_cells = [key_summary["all"], *key_summary["buckets"]] if key_summary and key_summary["tokens"] else []
    data = diff_payload(records, pieces, key)
    if compressed is not None and compressed.any():
        data["open"] = int(np.searchsorted(runs_of(records["pass_index"].to_numpy())[0], int(np.argmax(compressed)), side="right") - 1)
    data |= {"ref": report["ref"]["name"], "cand": report["cand"]["name"]}
    template = environment().get_template("diff.html.j2")
    return template.render(
        report=report,
        headline=headline(report),
        cells=cells,
        intervals=intervals(summary["all"]),
        level=levels(cells),
        key_summary=key_summary,
        key_cells=key_cells,
        charts=position_charts(summary, report.get("noise_floor")),
        has_topk=data["k"] > 0,
        data=script_json(data),
        css=Markup(static("report.css")),
        js=page_js("diff.js"),
    )


def position_charts(summary: dict, noise_floor: dict | None = None) -> list[Markup]:
    """Mean KL and same-top-1 % per context-position bucket with their intervals: all tokens,
    the key tokens where the diff has them, and the noise floor (REF on a second numeric path)
    where it was measured: what lies on or below it is numerics, not the model."""
    buckets = summary["buckets"]
    labels = {float(i): b["bucket"] for i, b in enumerate(buckets)}
    parts = [("all tokens", buckets)]
    key = summary.get("key_tokens")
    if key and key["tokens"]:
        parts.append(("key tokens", key["buckets"]))
    if noise_floor is not None:
        parts.append((f"noise floor ({noise_floor['cand']})", noise_floor["buckets"]))
    level = levels([c for _, cells in parts for c in cells])
    out = []
    for title, ylabel, value in ((f"mean KL(P_ref ‖ P_cand) by context position ({level} interval)", "mean KL (nats)", _kl),
                                 (f"same top-1 by context position ({level} interval)", "same top-1 (%)", _same)):
        series = []
        for name, cells in parts:
            points = [value(c) if c["tokens"] else (float("nan"),) * 3 for c in cells]
            series.append(charts.Series(name, list(labels), [p[0] for p in points], [p[1] for p in points], [p[2] for p in points]))
        out.append(Markup(charts.line_chart(title, "context length of the target (tokens)", ylabel, series, log2_x=False, x_labels=labels)))
    return out


def levels(cells: list[dict]) -> str:
    """The levels the cells' intervals hold at, from their rows ('95 %')."""
    return level_header([(c["kl"]["confidence"], c["kl"]["method"]) for c in cells if c.get("tokens")], with_method=False)


def _point(row: dict) -> tuple[float, float, float]:
    """An interval row as a chart's point: estimate, low, high (NaN for no bound)."""
    return tuple(float("nan") if row[key] is None else row[key] for key in ("estimate", "low", "high"))


def _kl(cell: dict) -> tuple[float, float, float]:
    return _point(cell["kl"])


def _same(cell: dict) -> tuple[float, float, float]:
    return _point(cell["same_top1"])


def diff_payload(records: pd.DataFrame, pieces: dict[int, str], key: np.ndarray | None = None) -> dict:
    """The page's data: windows (one entry per pass, in plan order) and one typed array per
    per-token field; top-k as flat [n * k] arrays (k = 0 for records without them)."""
    r = records
    starts, counts = runs_of(r["pass_index"].to_numpy())
    first = r.iloc[starts]
    kl = r["kl"].to_numpy(dtype=np.float64)
    flips = ~r["same_top1"].to_numpy(dtype=bool)
    has_topk = all(c in r for c in TOPK_COLUMNS) and len(r) > 0
    k = len(r["ref_topk_ids"].iloc[0]) if has_topk else 0
    topk = {c: np.stack([np.asarray(x) for x in r[c]]) if k else np.zeros((len(r), 0)) for c in TOPK_COLUMNS}
    tokens = {
        "target_id": b64(r["target_id"].to_numpy(), "i4"),
        "context_len": b64(r["context_len"].to_numpy(), "i4"),
        "kl": b64(kl, "f8"),
        "ref_logprob": b64(r["ref_logprob"].to_numpy(), "f8"),
        "cand_logprob": b64(r["cand_logprob"].to_numpy(), "f8"),
        "ref_rank": b64(r["ref_rank"].to_numpy(), "i4"),
        "cand_rank": b64(r["cand_rank"].to_numpy(), "i4"),
        "ref_top1": b64(r["ref_top1"].to_numpy(), "i4"),
        "cand_top1": b64(r["cand_top1"].to_numpy(), "i4"),
        "delta_p": b64(r["delta_p"].to_numpy(), "f8"),
        "ref_topk_ids": b64(topk["ref_topk_ids"].ravel(), "i4"),
        "ref_topk_lp": b64(topk["ref_topk_logprobs"].ravel(), "f4"),
        "cand_topk_ids": b64(topk["cand_topk_ids"].ravel(), "i4"),
        "cand_topk_lp": b64(topk["cand_topk_logprobs"].ravel(), "f4"),
    }
    if key is not None:
        tokens["key"] = b64(key.astype(np.uint8), "u1")
    shown = np.unique(np.concatenate([r[c].to_numpy(dtype=np.int64) for c in ("target_id", "ref_top1", "cand_top1")]
                                     + [topk[c].ravel().astype(np.int64) for c in ("ref_topk_ids", "cand_topk_ids")]))
    return {
        "n": int(len(r)),
        "k": int(k),
        "vocab": {str(i): pieces[int(i)] for i in shown if int(i) in pieces},
        "windows": {
            "id": first["window_id"].tolist(),
            "text_id": first["text_id"].tolist(),
            "start": starts.astype(int).tolist(),
            "count": counts.astype(int).tolist(),
            "mean_kl": [float(kl[s : s + n].mean()) for s, n in zip(starts, counts)],
            "flips": [int(flips[s : s + n].sum()) for s, n in zip(starts, counts)],
        },
        "tokens": tokens,
    }


def texts(r: DiffResult) -> DiffResult:
    """diff.md from the report; report.html from the records, token texts and key-token mask
    the result was built with (a diff read back from its folder holds its page already)."""
    page = r.html if r.records is None else render_diff(r.report, r.records, r.pieces or {}, r.key_mask, r.compressed_mask)
    return replace(r, markdown=render_markdown(r.report), html=page)


def view(result: DiffResult, label: str, first_arm: int) -> tuple[RunView, list[Arm]]:
    """A diff: its answer and manifest; its scored tokens as two arms of the explorer, REF's
    numbers and CAND's, paired token by token (REF − CAND; its own page, report.html, shows them
    side by side with the KL)."""
    manifest = result.manifest.to_json()
    records = result.token_records()
    window = manifest["config"].get("window", 0)
    arms = [Arm(first_arm + i, label, result.run_dir, "diff", result.report[side]["name"], manifest, arm_records(records, side, result.report[side]["name"], window),
                pieces_of=result.report["ref"]["name"])
            for i, side in enumerate(("ref", "cand"))]
    ref, cand = arms
    pair = TokenPair(ref, cand, ref.records["logprob"].to_numpy(dtype=float) - cand.records["logprob"].to_numpy(dtype=float))
    return RunView(label, result.run_dir, "diff", manifest, header(manifest, "diff"), answer=headline(result.report), pairs=[pair]), arms


def arm_records(records: pd.DataFrame, side: str, model: str, window: int) -> pd.DataFrame:
    """One model's numbers of a diff's records (`side` "ref" or "cand") in the columns of the
    explorer's token records: its log p, rank, top-1 as the greedy token and top-k; window
    length `window` as the nominal length, the side as the context mode; no target text (the
    run's pieces, REF's, give it)."""
    r = records
    has_topk = all(c in r for c in TOPK_COLUMNS)
    none = pd.Series([[]] * len(r), index=r.index)
    return pd.DataFrame({
        "model": model, "text_id": r["text_id"], "window_id": r["window_id"], "method": "diff", "context_mode": side.upper(),
        "nominal_len": window, "repeat": 0, "pass_index": r["pass_index"], "target_pos": r["target_pos"], "char_start": r["char_start"],
        "char_end": r["char_end"], "context_len": r["context_len"], "target_id": r["target_id"], "target_text": None,
        "logprob": r[f"{side}_logprob"], "rank": r[f"{side}_rank"], "greedy_id": r[f"{side}_top1"],
        "topk_ids": r[f"{side}_topk_ids"] if has_topk else none, "topk_logprobs": r[f"{side}_topk_logprobs"] if has_topk else none,
    }).reset_index(drop=True)


RENDERER = Renderer(texts, view)
