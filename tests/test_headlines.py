"""Each command's first lines answer its question, with the interval: effective-length, diff,
ruler and agreement, printed by the commands' own echo from results built without a model
(agreement through the CLI), and the same headline leading the `ctxeval report` page."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from scipy import stats

from ctxeval import api
from ctxeval.commands import COMMANDS
from ctxeval.commands.compare import compare_models
from ctxeval.explorer.render import render_report
from ctxeval.modeldiff.summary import Bootstrap, summarize as summarize_diff
from ctxeval.pipeline.engine import save_result
from ctxeval.render.kinds import RENDERING
from ctxeval.probes.effective_length import EstimatorSettings, share_kept, summarize
from ctxeval.ruler.report import ruler_result
from ctxeval.ruler.run import SAMPLE_SCHEMA
from ctxeval.render.diff import render_markdown as diff_markdown
from ctxeval.render.effective_length import render_markdown as effective_markdown
from ctxeval.render.headline import percent
from ctxeval.results.effective_length import describe_length
from ctxeval.results.diff import DiffResult
from ctxeval.results.effective_length import EffectiveLengthResult
from ctxeval.results.manifest import Manifest, write_manifest
from ctxeval.results.ruler import SAMPLES_FILE
from ctxeval.stats.paired import ratio_replicates

from .conftest import run_cli
from .test_diff import _records as diff_records
from .test_effective_length import LENGTHS, SETTINGS, _knee_curve, _records, _tables
from .test_ruler import _retrieval_folder, _ruler_folder


def _echo(name: str, result, spec=None) -> list[str]:
    """What the CLI prints for `result` as its command returns it (its texts rendered), as lines
    (the exit code, where the echo gives one, dropped)."""
    command = COMMANDS[name]
    out = command.echo(RENDERING.texts(result), spec, command.display() if command.display else None)
    return (out[0] if isinstance(out, tuple) else out).splitlines()


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _row(lines: list[str], first_cell: str) -> list[str]:
    return next(_cells(line) for line in lines if line.startswith("|") and _cells(line)[0] == first_cell)


# --- effective-length: L* per model, every variant's loss against the reference --------------

CAPS = {"m": None, "m?max_context=32": 32}


@pytest.fixture(scope="module")
def effective():
    records = pd.concat([_records(name, _knee_curve(10_000), docs=6, spans=4, targets=24, noise=0.05, seed=5, cap=cap) for name, cap in CAPS.items()])
    tables = _tables(records, CAPS)
    return tables, summarize(tables, LENGTHS, SETTINGS, CAPS)


def _gain(table: pd.DataFrame) -> float:
    """Mean log-probability of every target at the longest length minus at the shortest."""
    by_length = table.groupby("length")["logprob"].mean()
    return float(by_length[LENGTHS[-1]] - by_length[LENGTHS[0]])


def test_effective_length_opens_with_l_star_and_each_variants_loss_and_share_kept(effective, tmp_path):
    tables, summary = effective
    manifest = Manifest(command="effective-length", run_id="r", config={}, models=[{"name": m} for m in CAPS], status="complete")
    result = EffectiveLengthResult(tmp_path, manifest, summary, pd.concat(tables.values()), effective_markdown(summary))
    lines = _echo("effective-length", result)
    head = lines[:12]
    assert head[0] == "# Effective context length" and head[2].startswith("**Effective context length**: 24 spans of 24 targets in 6 document(s)")
    assert _cells(head[4]) == ["model", "verdict vs reference", "L* [95 %]", f"log p at {LENGTHS[-1]}", f"gain {LENGTHS[0]}→{LENGTHS[-1]} [95 %]",
                               "gain lost vs reference", "share of reference's gain kept"]
    reference, control = _row(head, "m"), _row(head, "m?max_context=32")
    # the verdict first: the control loses gain beyond doubt
    assert reference[1] == "reference" and control[1].startswith("hurts, by more than δ (within ±") and summary["comparisons"][0]["verdict"]["outcome"] == "hurts"
    reference, control = [reference[0], *reference[2:]], [control[0], *control[2:]]
    gain_ref, gain_control = _gain(tables["m"]), _gain(tables["m?max_context=32"])
    assert reference[1] == describe_length(summary["models"]["m"]["effective_length"]) == "≥ 256 [256, ≥ 256]"
    assert control[1] == describe_length(summary["models"]["m?max_context=32"]["effective_length"]) and control[1].startswith("32 [")
    assert reference[2] == f"{tables['m'].query('length == 256')['logprob'].mean():.3f}"
    assert reference[3].startswith(f"{gain_ref:+.3f} [") and control[3].startswith(f"{gain_control:+.3f} [")
    assert reference[4:] == ["reference", "—"]
    # the control loses what it does not gain, and keeps gain_control / gain_ref of the reference's gain
    lost = summary["comparisons"][0]["gain_difference"]
    assert control[4] == f"{gain_ref - gain_control:+.3f} [{-lost['high']:+.3f}, {-lost['low']:+.3f}]" and -lost["high"] > 0
    share = summary["comparisons"][0]["share_kept"]
    assert share["estimate"] == pytest.approx(gain_control / gain_ref, rel=1e-12) and share["interval"] == "percentile"
    assert control[5] == f"{percent(share['estimate'])} [{percent(share['low'])}, {percent(share['high'])}]"
    assert share["low"] <= share["estimate"] <= share["high"] < 1
    assert any(line.startswith("Reference: m, the first --model.") for line in head)


def test_share_kept_is_the_ratio_of_gains_with_the_percentile_interval_of_its_resamples():
    gain, reference, counts = np.array([0.1, 0.3, 0.2, 0.0, 0.4]), np.array([0.5, 0.4, 0.6, 0.2, 0.5]), np.array([2.0, 1.0, 3.0, 2.0, 2.0])
    clusters = np.array(["a", "a", "b", "c", "c"])
    settings = EstimatorSettings(replicates=500, seed=7)
    s = share_kept(gain, reference, counts, clusters, settings)
    assert s["estimate"] == pytest.approx((2 * 0.1 + 0.3 + 3 * 0.2 + 0 + 2 * 0.4) / (2 * 0.5 + 0.4 + 3 * 0.6 + 2 * 0.2 + 2 * 0.5), rel=1e-12)
    # a naive loop over the same draws of the three documents
    num, den = np.array([0.5, 0.6, 0.8]), np.array([1.4, 1.8, 1.4])
    draws = np.random.default_rng(7).integers(0, 3, size=(500, 3))
    ratios = [num[row].sum() / den[row].sum() for row in draws]
    assert [s["low"], s["high"]] == pytest.approx(list(np.percentile(ratios, [2.5, 97.5])), rel=1e-12)
    assert s["units"] == 3 and s["interval"] == "percentile"
    nothing = share_kept(gain, -reference, counts, clusters, settings)
    assert nothing["estimate"] is None and "gains nothing" in nothing["reason"]
    one = share_kept(gain, reference, counts, np.array(["a"] * 5), settings)
    assert one["interval"] == "none" and one["estimate"] == pytest.approx(s["estimate"]) and "one document" in one["reason"]
    sometimes = share_kept(gain, np.array([0.5, 0.4, -0.5, 0.2, 0.5]), counts, clusters, settings)
    assert sometimes["interval"] == "none" and "% of the bootstrap resamples" in sometimes["reason"]
    assert np.all(ratio_replicates(den, np.ones(3), 500, 7) > 0)


# --- diff: KL, perplexity ratio and same top-1, one line each -------------------------------

def _diff_report(edges: list[int]) -> tuple[pd.DataFrame, dict]:
    rec = diff_records()
    s = summarize_diff(rec, edges, Bootstrap(replicates=300))
    return rec, {"ref": {"name": "a"}, "cand": {"name": "b"}, "summary": s, "gates": {"profile": "dev", "max_kl": None, "min_same_top": None, "failures": []},
                 "settings": {"window": 64, "stride": 64, "confidence": 0.95, "replicates": 300, "seed": 0}}


@pytest.mark.parametrize("edges, buckets", [([0, 64], []), ([0, 16, 64], ["0–16", "16–64"])])
def test_diff_opens_with_kl_perplexity_ratio_and_same_top1(edges, buckets, tmp_path):
    rec, report = _diff_report(edges)
    result = DiffResult(tmp_path, Manifest(command="diff", run_id="r", config={}, models=[], status="complete"), report, diff_markdown(report), "")
    lines = _echo("diff", result)
    head = lines[:10]
    assert head[0] == "# ctxeval diff" and head[2] == "**CAND b against REF a**: 768 tokens, 12 windows of 4 document(s)"
    kl, same, ratio = (report["summary"]["all"][k] for k in ("kl", "same_top1", "ppl_ratio"))
    assert _row(head, "mean KL(P_ref ‖ P_cand), nats/token") == ["mean KL(P_ref ‖ P_cand), nats/token", f"{rec.kl.mean():.5f}", f"[{kl['low']:.5f}, {kl['high']:.5f}]"]
    ppl = np.exp((rec.ref_logprob - rec.cand_logprob).mean())
    assert _row(head, "perplexity ratio CAND/REF") == ["perplexity ratio CAND/REF", f"{ppl:.4f}", f"[{ratio['ratio']['low']:.4f}, {ratio['ratio']['high']:.4f}]"]
    assert _row(head, "same top-1 token") == ["same top-1 token", f"{100 * rec.same_top1.mean():.2f} %", f"[{same['low']:.2f}, {same['high']:.2f}]"]
    # the by-distance table only where there is more than one bucket: no row repeating "all"
    rows = [_cells(line)[0] for line in lines if line.startswith("| ") and _cells(line)[0] not in ("context",)]
    assert [r for r in rows if r in ("all", "0–64", "0–16", "16–64")] == ["all", *buckets]


# --- ruler: one table, models as rows, lengths as columns -----------------------------------

def _ruler_samples(path, cells: dict[tuple[str, str, int], tuple[list[float], bool]]) -> None:
    """A finished RULER folder: per (model, task, length) its samples' scores and whether they were generated."""
    rows = []
    for (model, task, length), (scores, generated) in cells.items():
        for k, score in enumerate(scores):
            rows.append({"sample_index": len(rows), "model": model, "task": task, "length": length, "sample": k, "haystack": 10, "prompt_tokens": length - 50,
                         "depth": 0.5, "answers": ["1"], "prediction": "", "method": "greedy generation" if generated else "likelihood only (no generation)",
                         "generation_score": score if generated else None, "likelihood_score": score, "answer_logprob": -1.0, "answer_tokens": 1,
                         "mean_logprob": -1.0, "first_rank": 1, "mean_log2_rank": 1.0, "greedy_prefix": 1, "reference_tokens": 2, "min_margin": 1.0})
    path.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=SAMPLE_SCHEMA), path / SAMPLES_FILE)


@pytest.mark.parametrize("pressed_generates", [True, False])
def test_ruler_with_several_models_opens_with_one_table_of_models_by_length(pressed_generates, tmp_path):
    scores = {("a", "niah_single_1", 512): [1, 1, 1, 1], ("a", "niah_single_2", 512): [1, 1, 1, 0], ("a", "niah_single_1", 1024): [1, 1, 0, 0],
              ("a", "niah_single_2", 1024): [1, 0, 0, 0], ("b", "niah_single_1", 512): [1, 0, 0, 0], ("b", "niah_single_2", 512): [0, 0, 0, 0],
              ("b", "niah_single_1", 1024): [0, 0, 0, 0], ("b", "niah_single_2", 1024): [0, 0, 0, 0]}
    _ruler_samples(tmp_path / "r", {k: (v, k[0] == "a" or pressed_generates) for k, v in scores.items()})
    manifest = Manifest(command="ruler", run_id="r", config={}, models=[{"name": "a"}, {"name": "b"}], status="complete")
    write_manifest(tmp_path / "r", manifest)
    lines = _echo("ruler", ruler_result(tmp_path / "r", manifest, 85.6))
    head = lines[:8]
    assert head[0] == "# RULER synthetic tasks"
    assert head[2].startswith("**RULER, mean of 2 tasks (niah_single_1, niah_single_2)**: percent, scored ")
    mixed = not pressed_generates
    assert ("scored as the column says: generation by generation" in head[2]) == mixed and ("scored by generation (RULER's string_match_all" in head[2]) != mixed
    assert _cells(head[4]) == ["model", *(["scored by"] if mixed else []), "512", "1024", "effective length (≥ 85.6)"]
    a, b = _row(head, "a"), _row(head, "b")
    assert [c.split(" [")[0] for c in a[1 + mixed:3 + mixed]] == ["87.5", "37.5"] and a[-1] == "512"  # (100 + 75) / 2, (50 + 25) / 2
    assert [c.split(" [")[0] for c in b[1 + mixed:3 + mixed]] == ["12.5", "0.0"] and b[-1] == "below the shortest (< 512)"
    if mixed:
        assert (a[1], b[1]) == ("generation", "likelihood")


def test_ruler_with_one_task_names_the_task_not_a_mean(tmp_path):
    _ruler_samples(tmp_path / "r", {("a", "vt", 512): ([1.0, 0.5], True), ("b", "vt", 512): ([0.0, 0.5], True)})
    manifest = Manifest(command="ruler", run_id="r", config={}, models=[{"name": "a"}, {"name": "b"}], status="complete")
    lines = _echo("ruler", ruler_result(tmp_path / "r", manifest, 85.6))
    assert lines[2].startswith("**RULER, vt**: percent, scored by generation") and _row(lines[:8], "a")[1].startswith("75.0 [")


# --- agreement: the measures ranked by rho, and what was left out ---------------------------

def test_agreement_opens_with_the_ranking_by_rho_and_says_what_was_left_out(tmp_path):
    rng = np.random.default_rng(3)
    scores = {}
    for m in range(5):
        gen = list((rng.random(8) < (m + 1) / 6).astype(float))
        scores[f"model-{m}"] = (gen, [g * (rng.random() < 0.8) for g in gen], list(rng.normal(-1 + m / 5, 0.3, 8)))
    ruler = _ruler_folder(tmp_path / "ruler", scores)
    retrieval = _retrieval_folder(tmp_path / "retrieval", {"other": [True, False]})
    proc = run_cli("agreement", str(ruler), str(retrieval), "--replicates", "200", "--out", str(tmp_path / "agreement"))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "# Agreement across models" and lines[2].startswith("**Which cheap measure orders the models as the task does**")
    assert _cells(lines[4]) == ["task measure", "rank", "cheap measure", "Spearman ρ [95 %]", "models", "note"]
    table = api.read_result(tmp_path / "agreement").measures.pivot(index="model", columns="measure", values="value")
    cheap = ("RULER likelihood score at 1024", "RULER answer log p at 1024", "RULER answer log2 rank at 1024")
    for first, task in ((6, "RULER score at 1024"), (9, "RULER effective length")):
        rows = [_cells(line) for line in lines[first:first + 3]]
        rho = {c: stats.spearmanr(table[c] * (-1 if "rank" in c else 1), table[task], nan_policy="omit").statistic for c in cheap}
        assert [r[0] for r in rows] == [task] * 3 and [r[1] for r in rows] == ["1", "2", "3"] and all(r[4] == "5" for r in rows)
        assert [rho[r[2]] for r in rows] == sorted(rho.values(), reverse=True)  # ranked by rho
        for r in rows:
            assert r[3].startswith(f"{rho[r[2]]:+.2f} [")
    assert lines[13].startswith("RULER score at 1024: split-half reliability r = ") and "(√r)" in lines[13]  # how far a ρ could reach
    assert lines[14:16] == ["Left out: retrieval accuracy (task): 0 model(s) have it beside a cheap measure; a correlation needs 2.  ",
                            "Left out: model other: it has no cheap measure (effective-length, diff, RULER likelihood)."]
    page = (tmp_path / "agreement" / "agreement.html").read_text()  # the agreement page leads with the same answer
    answer = page[page.index('<section id="answer">'):page.index("<h2>Correlations</h2>")]
    assert "<strong>Which cheap measure orders the models as the task does</strong>" in answer and "Left out: model other" in answer


# --- the HTML report leads with the same headlines ------------------------------------------

def test_the_report_page_leads_with_each_runs_answer(effective, tmp_path):
    tables, summary = effective
    el = tmp_path / "el"
    el.mkdir()
    manifest = Manifest(command="effective-length", run_id="r", config={"lengths": list(LENGTHS)}, models=[{"name": m} for m in CAPS], status="complete")
    write_manifest(el, manifest)
    save_result(el, EffectiveLengthResult(el, manifest, summary, pd.concat(tables.values(), ignore_index=True), effective_markdown(summary)), "effective-length", RENDERING)
    rng = np.random.default_rng(3)
    scores = {f"model-{m}": (list((rng.random(6) < (m + 1) / 5).astype(float)), [0.0] * 6, list(rng.normal(-1, 0.3, 6))) for m in range(4)}
    ruler = _ruler_folder(tmp_path / "ruler", scores)
    api_out = tmp_path / "agreement"
    assert run_cli("agreement", str(ruler), "--replicates", "200", "--out", str(api_out)).returncode == 0
    html = render_report([el, ruler, api_out], compare_models)
    answers = html.index('<section id="answers">')
    assert answers < html.index('<section id="runs">')
    section = html[answers:html.index('<section id="runs">')]
    # the RULER run's four variants share prompts: its answer is which of them are tied (the paired
    # differences against the first model follow it)
    assert "<strong>RULER, which variants are tied</strong>" in section and "<strong>Which cheap measure orders the models as the task does</strong>" in section
    assert ">group</span></th>" in section and ">Spearman ρ</span>" in section
    assert html.index("<strong>RULER, which variants are tied</strong>") < html.index("<strong>RULER, paired differences against model-0</strong>")
    assert section.count('<article class="run answer">') == 3 and section.index("<strong>Effective context length</strong>") < section.index("<strong>RULER")
    text = re.sub(r"<[^>]+>", "", section)  # cells and headers are drawn as unbreakable phrases
    assert "share of reference&#39;s gain kept" in text and "m?max_context=32" in text
