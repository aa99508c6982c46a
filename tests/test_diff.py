"""`ctxeval diff` without a model: the per-token numerics against a float64 full-softmax
reference, lockstep over differently cut blocks, summaries against hand computation, gates
and model options."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.special import log_softmax

from ctxeval.backends.logits import score_block
from ctxeval.backends.model_options import LlamaCppOptions, split_spec
from ctxeval.modeldiff.divergence import compare_block
from ctxeval.modeldiff.pair import lockstep
from ctxeval.stats.gates import diff_gate
from ctxeval.render.diff import render_markdown
from ctxeval.modeldiff.summary import Bootstrap, bucket_edges, percentiles, summarize
from ctxeval.errors import UserError
from tests.numeric_paths import FLOAT32_PATHS, assert_same_top_k, top1_margin


def _logits(n: int, vocab: int, seed: int, scale: float = 4.0) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal((n, vocab)) * scale).astype(np.float32)


def _naive_kl(z: np.ndarray, w: np.ndarray) -> np.ndarray:
    """KL(softmax z || softmax w) per row, float64 full softmax."""
    a, b = log_softmax(z.astype(np.float64), axis=1), log_softmax(w.astype(np.float64), axis=1)
    return (np.exp(a) * (a - b)).sum(axis=1)


@pytest.mark.parametrize("vocab", [1000, 262144])
def test_kl_matches_a_float64_full_softmax_reference_within_1e_6(vocab):
    z = _logits(40, vocab, 0)
    w = (z + np.random.default_rng(1).standard_normal(z.shape) * 0.5 + 2.0).astype(np.float32)  # a shift of 2 changes nothing
    targets = np.random.default_rng(2).integers(0, vocab, 40)
    d = compare_block(z, w, targets, 10, reverse=True)
    np.testing.assert_allclose(d.kl, _naive_kl(z, w), rtol=0, atol=1e-6)
    np.testing.assert_allclose(d.kl_reverse, _naive_kl(w, z), rtol=0, atol=1e-6)
    assert (d.kl > 0).all() and (d.kl_reverse > 0).all()


def test_kl_of_far_apart_distributions_keeps_the_mass_where_p_underflows():
    """A token REF gives ~e^-150 (0 in float32) and CAND most of the mass: the term that
    carries it must not vanish or overflow."""
    z = _logits(4, 5000, 3)
    w = z.copy()
    z[:, 7] = z.max(axis=1) - 150.0
    w[:, 7] = w.max(axis=1) + 5.0
    d = compare_block(z, w, np.zeros(4, dtype=np.int64), 5, reverse=True)
    np.testing.assert_allclose(d.kl, _naive_kl(z, w), rtol=1e-7, atol=1e-6)
    np.testing.assert_allclose(d.kl_reverse, _naive_kl(w, z), rtol=1e-7, atol=1e-6)


def test_identical_logits_give_exactly_zero_and_full_agreement():
    z = _logits(33, 3000, 4)
    d = compare_block(z, z.copy(), np.arange(33), 8, reverse=True)
    assert (d.kl == 0.0).all() and (d.kl_reverse == 0.0).all()
    assert (d.ref_top1 == d.cand_top1).all() and (d.topk_overlap == 1.0).all()
    assert (d.ref_logprob == d.cand_logprob).all() and (d.ref_rank == d.cand_rank).all()


def test_nearly_identical_logits_never_give_a_negative_kl():
    z = _logits(64, 20000, 5, scale=8.0)
    w = z.copy()
    w[:, ::97] = np.nextafter(w[:, ::97], np.float32(np.inf))  # one-ulp changes
    d = compare_block(z, w, np.zeros(64, dtype=np.int64), 4, reverse=True)
    assert (d.kl >= 0).all() and (d.kl_reverse >= 0).all()
    np.testing.assert_allclose(d.kl, _naive_kl(z, w), rtol=0, atol=1e-9)


def test_target_ranks_logprobs_and_top1_match_the_scoring_path_and_a_naive_top_k():
    z, w = _logits(20, 2048, 6), _logits(20, 2048, 7)
    targets = np.random.default_rng(8).integers(0, 2048, 20)
    d = compare_block(z, w, targets, 16)
    for logits, logprob, rank, top1 in ((z, d.ref_logprob, d.ref_rank, d.ref_top1), (w, d.cand_logprob, d.cand_rank, d.cand_top1)):
        scores = score_block(logits, targets, 1)
        np.testing.assert_allclose(logprob, scores.logprob, rtol=0, atol=1e-9)
        np.testing.assert_array_equal(rank, scores.rank)
        np.testing.assert_array_equal(top1, np.argmax(logits, axis=1))
    naive = [len(set(np.argsort(-a)[:16]) & set(np.argsort(-b)[:16])) / 16 for a, b in zip(z, w)]
    np.testing.assert_allclose(d.topk_overlap, naive)


def test_lockstep_over_differently_cut_blocks_equals_one_block():
    z, w = _logits(50, 700, 9), _logits(50, 700, 10)
    targets = np.arange(50)
    whole = compare_block(z, w, targets, 5, reverse=True)

    def blocks(x: np.ndarray, cuts: list[int]):
        bounds = [0, *cuts, len(x)]
        for lo, hi in zip(bounds[:-1], bounds[1:]):
            yield x[lo:hi].copy()

    stepped = lockstep(blocks(z, [7, 8, 30]), blocks(w, [20, 21, 49]), targets, 5, True)
    for field in ("kl", "kl_reverse", "ref_rank", "cand_rank", "ref_logprob", "cand_logprob", "topk_overlap"):
        np.testing.assert_array_equal(getattr(stepped, field), getattr(whole, field))
    with pytest.raises(ValueError, match="fewer logit rows"):
        lockstep(blocks(z[:40], [10]), blocks(w, [25]), targets, 5, False)


def _records(seed: int = 0, windows: int = 12, per_window: int = 64) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n = windows * per_window
    ref_lp = -rng.exponential(3.0, n)
    cand_lp = ref_lp - rng.normal(0.02, 0.1, n)
    return pd.DataFrame({
        "pass_index": np.repeat(np.arange(windows), per_window),
        "text_id": np.repeat([f"doc{i // 3}" for i in range(windows)], per_window),
        "context_len": np.tile(np.arange(per_window), windows),
        "kl": rng.exponential(0.03, n),
        "kl_reverse": rng.exponential(0.03, n),
        "same_top1": rng.random(n) < 0.9,
        "ref_logprob": ref_lp,
        "cand_logprob": cand_lp,
        "delta_p": np.exp(cand_lp) - np.exp(ref_lp),
        "topk_overlap": rng.random(n),
    })


def test_summary_point_estimates_are_the_token_means_by_bucket():
    rec = _records()
    s = summarize(rec, [0, 16, 64], Bootstrap(replicates=300))
    head = rec[rec.context_len < 16]
    cell = s["buckets"][0]
    assert cell["bucket"] == "0–16" and cell["tokens"] == len(head)
    assert cell["kl"]["estimate"] == pytest.approx(head.kl.mean(), rel=1e-12)
    assert cell["kl"]["low"] <= cell["kl"]["estimate"] <= cell["kl"]["high"]
    assert cell["same_top1"]["estimate"] == pytest.approx(100 * head.same_top1.mean(), rel=1e-12)
    ratio = np.exp((head.ref_logprob - head.cand_logprob).mean())
    shown, log = cell["ppl_ratio"]["ratio"], cell["ppl_ratio"]["delta_log_nll"]
    assert shown["estimate"] == pytest.approx(ratio, rel=1e-12)
    assert [shown["low"], shown["high"]] == pytest.approx(np.exp([log["low"], log["high"]]), rel=1e-12)
    # every interval is its row: the level and method beside its bounds, the same on both scales
    for row in (cell["kl"], cell["same_top1"], cell["delta_p"], shown, log):
        assert (row["confidence"], row["method"], row["n"]) == (0.95, "BCa-cluster", 4)
    assert cell["ppl_ratio"]["ppl_cand"] / cell["ppl_ratio"]["ppl_ref"] == pytest.approx(ratio, rel=1e-12)
    assert s["all"]["kl"]["p99_9"] == pytest.approx(np.percentile(rec.kl, 99.9))
    assert s["all"]["kl"]["max"] == rec.kl.max()
    assert s["all"]["kl_reverse"]["estimate"] == pytest.approx(rec.kl_reverse.mean(), rel=1e-12)
    # compare's rule: from 3 documents whole documents are resampled, with a warning below 7
    assert (s["all"]["resampling_unit"], s["all"]["resampling_units"]) == ("document", 4)
    assert "fewer than 7 documents" in s["all"]["warning"]


def test_one_window_says_it_has_no_interval_instead_of_a_zero_width_one():
    rec = _records()
    one = rec[rec.pass_index == rec.pass_index.iloc[0]]
    s = summarize(one, [0, 16, 64], Bootstrap(replicates=300))
    cell = s["all"]
    assert (cell["windows"], cell["resampling_unit"], cell["interval"]) == (1, "window", "none")
    assert cell["interval_note"] == "no interval (one window): a single resampling unit has no spread to resample"
    rows = {name: cell[name] for name in ("kl", "same_top1", "delta_p", "kl_reverse")} | {"ppl_ratio": cell["ppl_ratio"]["delta_log_nll"]}
    for name, row in rows.items():
        assert (row["interval"], row["degenerate"], row["low"], row["high"]) == ("none", False, None, None), name
    assert (cell["ppl_ratio"]["ratio"]["low"], cell["ppl_ratio"]["ratio"]["high"]) == (None, None)
    report = {"ref": {"name": "a"}, "cand": {"name": "b"}, "summary": s,
              "settings": {"window": 64, "stride": 64, "confidence": 0.95, "replicates": 300, "seed": 0},
              "gates": {"failures": [], "profile": "dev", "max_kl": None, "min_same_top": None}}
    md = render_markdown(report)
    assert "\nNo interval (one window): a single resampling unit has no spread to resample.\n" in md and "Degenerate" not in md
    row = next(line for line in md.splitlines() if line.startswith("| all |"))
    assert row.count("| no interval |") == 3 and "[" not in row
    assert diff_gate(s, "dev", 0.1, None) == ["--max-kl 0.1 cannot be checked: no interval (one window): a single resampling unit has no spread to resample"]


def test_the_diff_page_prints_no_interval_for_one_window():
    from markupsafe import Markup

    from ctxeval.render.diff import headline
    from ctxeval.render.diff_page import position_charts
    from ctxeval.render.page import environment

    rec = _records()
    s = summarize(rec[rec.pass_index == 0], [0, 16, 64], Bootstrap(replicates=300))
    report = {"ref": {"name": "a", "path": "a.gguf", "sha": "0", "sha256": "0"}, "cand": {"name": "b", "path": "b.gguf", "sha": "1", "sha256": "1"}, "summary": s, "run_id": "r",
              "settings": {"window": 64, "stride": 64, "confidence": 0.95, "replicates": 300, "seed": 0, "max_tokens": None, "top_k": 0},
              "gates": {"failures": [], "profile": "dev", "max_kl": None, "min_same_top": None}}
    html = environment().get_template("diff.html.j2").render(
        report=report, headline=headline(report), cells=[s["all"], *s["buckets"]], intervals="95 % BCa", level="95 %", key_summary=None, key_cells=[], charts=position_charts(s),
        has_topk=False, data=Markup("{}"), css=Markup(""), js=Markup(""))
    row = next(line for line in html.splitlines() if "<td>all</td>" in line)
    assert row.count(">no interval<") == 3 and "[" not in row
    answer = html[html.index('<section id="answer">'):html.index('<section id="runs">')]
    assert answer.count('<td class="num"><span class="phrase">no interval</span></td>') == 3 and "<strong>CAND b against REF a</strong>" in answer


def test_percentiles_follow_linear_interpolation():
    values = np.arange(1001, dtype=float)
    p = percentiles(values)
    assert (p["p50"], p["p90"], p["p99"], p["p99_9"], p["max"]) == pytest.approx((500.0, 900.0, 990.0, 999.0, 1000.0), rel=1e-12)


def test_identical_models_summarise_to_degenerate_zero_intervals():
    rec = _records()
    rec = rec.assign(kl=0.0, kl_reverse=0.0, same_top1=True, cand_logprob=rec.ref_logprob, delta_p=0.0)
    s = summarize(rec, [0, 64], Bootstrap(replicates=200))["all"]
    assert [s["kl"]["low"], s["kl"]["high"]] == [0.0, 0.0] and s["kl"]["degenerate"] and s["kl"]["interval"] == "degenerate" and s["interval"] == "bca"
    assert [s["same_top1"]["low"], s["same_top1"]["high"]] == [100.0, 100.0]
    assert [s["ppl_ratio"]["ratio"]["low"], s["ppl_ratio"]["ratio"]["high"]] == [1.0, 1.0]


def test_bucket_edges_double_from_512_up_to_the_window():
    assert bucket_edges(512) == [0, 512]
    assert bucket_edges(3000) == [0, 512, 1024, 2048, 3000]
    assert bucket_edges(8192) == [0, 512, 1024, 2048, 4096, 8192]
    assert bucket_edges(512, (0, 128, 256)) == [0, 128, 256, 512]
    for bad in ((0, 256, 128), (64, 128), (0, 512)):
        with pytest.raises(UserError):
            bucket_edges(512, bad)


def test_gates_judge_the_unfavourable_interval_bound():
    s = summarize(_records(), [0, 64], Bootstrap(replicates=300))
    kl, same = s["all"]["kl"], s["all"]["same_top1"]
    assert diff_gate(s, "dev", None, None) == []
    assert diff_gate(s, "dev", kl["high"] * 1.01, same["low"] * 0.99) == []
    failures = diff_gate(s, "dev", kl["estimate"], same["estimate"])
    assert len(failures) == 2 and "--max-kl" in failures[0] and "--min-same-top" in failures[1]
    assert any("below the minimum of 100 / 20000" in f for f in diff_gate(s, "release", None, None))
    report = {"ref": {"name": "a"}, "cand": {"name": "b"}, "summary": s, "gates": {"profile": "dev", "max_kl": None, "min_same_top": None, "failures": []},
              "settings": {"window": 64, "stride": 64, "confidence": 0.95, "replicates": 300, "seed": 0}}
    assert "| all | 768 |" in render_markdown(report)


def test_model_options_parse_and_refuse_bad_values():
    assert split_spec("gemma-3-270m") == ("gemma-3-270m", {})
    base, options = split_spec("x.gguf?type_k=q8_0&type_v=q4_0&flash_attn=1&rope_freq_scale=0.5")
    assert base == "x.gguf"
    parsed = LlamaCppOptions.parse(options, "x")
    assert parsed == LlamaCppOptions("q8_0", "q4_0", True, 0.5, None)
    assert parsed.prefix_reuse and not LlamaCppOptions.parse({"prefix_reuse": "0"}, "m").prefix_reuse
    for spec, message in (
        ("m?type_k=q9", "choose one of"),
        ("m?colour=red", "unknown model option 'colour'"),
        ("m?type_v=q8_0", "needs flash attention"),
        ("m?flash_attn=yes", "must be 0 or 1"),
        ("m?prefix_reuse=off", "must be 0 or 1"),
        ("m?rope_freq_scale=-1", "must be positive"),
        ("m?type_k", "not key=value"),
        ("m?type_k=q8_0&type_k=f16", "given twice"),
    ):
        with pytest.raises(UserError, match=message):
            LlamaCppOptions.parse(split_spec(spec)[1], spec)


# --- the whole command on tiny random-weight transformers models (no GGUF) ---------------------

@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    pytest.importorskip("transformers")
    from ctxeval.data.texts import load_text
    from tests.hf_tiny import tiny_llama_dir

    root, text = tmp_path_factory.mktemp("tiny"), load_text("demo").content[:20000]
    return {
        "a": tiny_llama_dir(root / "a", text, seed=0, max_positions=256),
        "b": tiny_llama_dir(root / "b", text, seed=1, max_positions=256),  # same tokenizer, other weights
        "other_vocab": tiny_llama_dir(root / "c", text, vocab_size=600),
        "other_tokens": tiny_llama_dir(root / "e", load_text("demo").content[20000:40000], max_positions=256),  # 1,024 other tokens
    }


def test_hf_pair_records_match_the_models_own_float64_softmax(tmp_path, tiny):
    import torch
    from transformers import AutoModelForCausalLM

    from ctxeval import api
    from ctxeval.data.texts import load_text
    from ctxeval.modeldiff.run import DIFF_FILE

    result = api.diff(f"hf:{tiny['a']}", f"hf:{tiny['b']}", ["demo"], window=64, stride=32, max_tokens=200, reverse=True, block_rows=7,
                      out=tmp_path / "d", bootstrap=api.Bootstrap(replicates=200))
    rec = pd.read_parquet(tmp_path / "d" / DIFF_FILE)
    assert rec.target_pos.tolist() == list(range(200)) and (rec.kl > 0).all() and (rec.kl_reverse > 0).all()
    from transformers import AutoTokenizer

    ids = AutoTokenizer.from_pretrained(str(tiny["a"]))(load_text("demo").content, add_special_tokens=False)["input_ids"]
    first = rec[rec.pass_index == 0]  # the first window: BOS + tokens 0..63 decoded, rows 0..63 predict tokens 0..63
    inputs = torch.as_tensor([[AutoTokenizer.from_pretrained(str(tiny["a"])).bos_token_id, *ids[:64]]])
    log_probs = []
    for name in ("a", "b"):
        with torch.inference_mode():
            logits = AutoModelForCausalLM.from_pretrained(str(tiny[name])).eval()(input_ids=inputs).logits[0, :64].double()
        log_probs.append(torch.log_softmax(logits, dim=1).numpy())
    a, b = log_probs
    # two float32 paths (blocks of 7 output rows vs one forward): relative bounds (docs/numerics.md)
    np.testing.assert_allclose(first.kl, (np.exp(a) * (a - b)).sum(axis=1), **FLOAT32_PATHS)
    np.testing.assert_allclose(first.kl_reverse, (np.exp(b) * (b - a)).sum(axis=1), **FLOAT32_PATHS)
    np.testing.assert_allclose(first.ref_logprob, a[np.arange(64), ids[:64]], **FLOAT32_PATHS)
    # argmaxes compared where both top-1 margins exceed the paths' rounding (a near-tie may flip)
    clear = (top1_margin(a) > 1e-4) & (top1_margin(b) > 1e-4)
    np.testing.assert_array_equal(first.same_top1[clear], (a.argmax(axis=1) == b.argmax(axis=1))[clear])
    assert clear.mean() > 0.9
    assert result.report["summary"]["all"]["tokens"] == 200


def _first_window_log_softmax(tiny, n: int) -> tuple[list[int], np.ndarray, np.ndarray]:
    """The demo's token ids and both tiny models' float64 log-softmax on the first window
    (BOS + tokens 0..n-1 decoded, as ctxeval decodes a window; rows 0..n-1 predict tokens 0..n-1)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ctxeval.data.texts import load_text

    tokenizer = AutoTokenizer.from_pretrained(str(tiny["a"]))
    ids = tokenizer(load_text("demo").content, add_special_tokens=False)["input_ids"]
    inputs = torch.as_tensor([[tokenizer.bos_token_id, *ids[:n]]])
    out = []
    for name in ("a", "b"):
        with torch.inference_mode():
            logits = AutoModelForCausalLM.from_pretrained(str(tiny[name])).eval()(input_ids=inputs).logits[0, :n].double()
        out.append(torch.log_softmax(logits, dim=1).numpy())
    return ids, *out


def test_hf_pair_top_k_columns_match_a_naive_top_k_of_the_float64_softmax(tmp_path, tiny):
    from ctxeval import api
    from ctxeval.modeldiff.run import DIFF_FILE

    k = 7
    api.diff(f"hf:{tiny['a']}", f"hf:{tiny['b']}", ["demo"], window=48, max_tokens=96, top_k=k, block_rows=5, out=tmp_path / "d",
             bootstrap=api.Bootstrap(replicates=200))
    rec = pd.read_parquet(tmp_path / "d" / DIFF_FILE)
    first = rec[rec.pass_index == 0]
    _, a, b = _first_window_log_softmax(tiny, 48)
    for side, lp in (("ref", a), ("cand", b)):
        got_ids = np.stack(first[f"{side}_topk_ids"].to_numpy())
        assert_same_top_k(got_ids, np.stack(first[f"{side}_topk_logprobs"].to_numpy()), lp)
        np.testing.assert_array_equal(got_ids[:, 0], first[f"{side}_top1"])
    overlap = [len(set(r) & set(c)) / k for r, c in zip(rec.ref_topk_ids, rec.cand_topk_ids)]
    np.testing.assert_array_equal(rec.topk_overlap, overlap)
    assert all(len(x) == k for c in ("ref_topk_ids", "ref_topk_logprobs", "cand_topk_ids", "cand_topk_logprobs") for x in rec[c])


def _page_data(html: str) -> dict:
    """The page's embedded JSON, its typed columns decoded as the browser decodes them."""
    import base64
    import json
    import re

    data = json.loads(re.search(r'<script type="application/json" id="ctxeval-data">(.*?)</script>', html, re.S).group(1))
    types = {"i4": ("target_id", "context_len", "ref_rank", "cand_rank", "ref_top1", "cand_top1", "ref_topk_ids", "cand_topk_ids"),
             "f8": ("kl", "ref_logprob", "cand_logprob", "delta_p"), "f4": ("ref_topk_lp", "cand_topk_lp"), "u1": ("key",)}
    dtype = {name: t for t, names in types.items() for name in names}
    data["tokens"] = {name: np.frombuffer(base64.b64decode(v), dtype=np.dtype(dtype[name]).newbyteorder("<")) for name, v in data["tokens"].items()}
    return data


def test_diff_report_html_holds_the_records_pieces_and_summary(tmp_path, tiny):
    from ctxeval import api
    from ctxeval.pieces import read_pieces
    from ctxeval.modeldiff.run import DIFF_FILE

    k = 4
    result = api.diff(f"hf:{tiny['a']}", f"hf:{tiny['b']}", ["demo"], window=64, stride=32, max_tokens=160, top_k=k, buckets=[0, 16, 40],
                      out=tmp_path / "d", bootstrap=api.Bootstrap(replicates=200))
    html = result.paths()["html"].read_text()
    rec = pd.read_parquet(tmp_path / "d" / DIFF_FILE)
    data = _page_data(html)
    t = data["tokens"]
    assert data["n"] == len(rec) and data["k"] == k and "key" not in t
    for name in ("target_id", "context_len", "kl", "ref_logprob", "cand_logprob", "ref_rank", "cand_rank", "ref_top1", "cand_top1", "delta_p"):
        np.testing.assert_array_equal(t[name], rec[name].to_numpy(), err_msg=name)
    for side in ("ref", "cand"):
        np.testing.assert_array_equal(t[f"{side}_topk_ids"].reshape(-1, k), np.stack(rec[f"{side}_topk_ids"].to_numpy()))
        np.testing.assert_array_equal(t[f"{side}_topk_lp"].reshape(-1, k), np.stack(rec[f"{side}_topk_logprobs"].to_numpy()))
    windows = data["windows"]
    assert windows["start"] == [int(rec.index[rec.pass_index == p][0]) for p in sorted(rec.pass_index.unique())]
    assert windows["mean_kl"] == pytest.approx(rec.groupby("pass_index").kl.mean().tolist(), rel=1e-12)
    assert windows["flips"] == (~rec.same_top1).groupby(rec.pass_index).sum().tolist()
    # every id the page shows has its piece (REF's token table), and the pieces of the targets are the text
    pieces = read_pieces(tmp_path / "d", "hf:a")
    shown = set(rec.target_id) | set(rec.ref_top1) | set(rec.cand_top1) | {i for c in ("ref_topk_ids", "cand_topk_ids") for x in rec[c] for i in x}
    assert data["vocab"] == {str(i): pieces[i] for i in shown}
    from ctxeval.data.texts import load_text

    text = load_text("demo").content
    plain = [(s, e, i) for s, e, i in zip(rec.char_start, rec.char_end, rec.target_id) if "\ufffd" not in pieces[i]]
    assert plain and all(pieces[i] == text[s:e] for s, e, i in plain)
    # the summary table and one point (with its interval) per non-empty bucket in each chart
    summary = result.report["summary"]
    for cell in [summary["all"], *summary["buckets"]]:
        assert f"{cell['kl']['estimate']:.5f}" in html and f"{cell['same_top1']['estimate']:.2f}" in html
    assert html.count("<circle") == 2 * len(summary["buckets"]) == 6
    assert "by context position (95 % interval)" in html
    # the engine wrote the result: read back, it is the one the command returned
    import json

    from ctxeval.results.base import read_result
    from ctxeval.results.diff import DiffResult

    again = read_result(tmp_path / "d", reader="report", kinds=(DiffResult,))
    assert (again.html, again.markdown, again.failures, again.run_dir) == (html, result.markdown, result.failures, result.run_dir)
    assert again.report == json.loads(json.dumps(result.report, default=float))
    assert again.manifest.to_json() == json.loads(json.dumps(result.manifest.to_json()))  # tuples of the config read back as lists


def test_an_earlier_diff_without_top_k_still_summarises_and_an_unfinished_one_is_refused(tmp_path, tiny):
    import json

    import pyarrow.parquet as pq

    from ctxeval import api
    from ctxeval.modeldiff.run import DIFF_FILE, TOPK_COLUMNS

    args = (f"hf:{tiny['a']}", f"hf:{tiny['b']}", ["demo"])
    options = dict(window=32, max_tokens=96, out=tmp_path / "d", bootstrap=api.Bootstrap(replicates=200))
    first = api.diff(*args, **options)
    # a finished run written before the top-k columns and pieces existed
    old = pq.read_table(tmp_path / "d" / DIFF_FILE).drop_columns(list(TOPK_COLUMNS))
    pq.write_table(old, tmp_path / "d" / DIFF_FILE)
    for name in ("pieces.parquet", "report.html"):
        (tmp_path / "d" / name).unlink()
    again = api.diff(*args, **options)
    assert again.report["summary"] == first.report["summary"]
    html = again.paths()["html"].read_text()
    assert 'id="card-no-topk"' in html and _page_data(html)["k"] == 0
    assert (tmp_path / "d" / "pieces.parquet").is_file()
    # an unfinished one: its part files lack the columns, and merging would mix two schemas
    (tmp_path / "d" / "parts").mkdir()
    pq.write_table(old.filter(pq.read_table(tmp_path / "d" / DIFF_FILE).column("pass_index").to_numpy() == 0), tmp_path / "d" / "parts" / "part-00001.parquet")
    (tmp_path / "d" / DIFF_FILE).unlink()
    manifest = json.loads((tmp_path / "d" / "manifest.json").read_text())
    (tmp_path / "d" / "manifest.json").write_text(json.dumps(manifest | {"status": "running"}))
    with pytest.raises(UserError, match="unfinished diff records with other columns"):
        api.diff(*args, **options)


def test_hf_dtype_option_names_the_candidate_and_gives_nonnegative_kl(tmp_path, tiny):
    from ctxeval import api

    result = api.diff(f"hf:{tiny['a']}", f"hf:{tiny['a']}?dtype=bfloat16", ["demo"], window=32, max_tokens=64, out=tmp_path / "d",
                      bootstrap=api.Bootstrap(replicates=200))
    assert result.report["cand"]["name"] == "hf:a?dtype=bfloat16"
    rec = pd.read_parquet(tmp_path / "d" / "diff_records.parquet")
    assert (rec.kl >= 0).all() and rec.kl.max() > 0


def test_hf_refusals_are_one_line_exit_code_2(tmp_path, tiny):
    from tests.conftest import run_cli

    for cand, window, message in ((f"hf:{tiny['other_vocab']}", "32", "different vocabularies (1024 and 600 tokens"),
                                  (f"hf:{tiny['other_tokens']}", "32", "different vocabularies (token "),
                                  (f"hf:{tiny['b']}", "300", "training context of 256"),
                                  (f"hf:{tiny['b']}?type_k=q8_0", "32", "unknown model option 'type_k'")):
        r = run_cli("diff", f"hf:{tiny['a']}", cand, "demo", "--window", window, "--quiet", "--out", str(tmp_path / "x"))
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and message in r.stderr, r.stderr



def test_key_tokens_of_a_context_gain_run_restrict_the_summary(tmp_path, tiny):
    from ctxeval import api
    from ctxeval.metrics.gain import gain_table
    from ctxeval.results.records import read_records

    gain = api.context_gain(["demo"], models=[f"hf:{tiny['a']}"], window=64, short=8, max_tokens=192, alpha=0.0, beta=-6.0, replicates=200, out=tmp_path / "g")
    table = gain_table(read_records(gain.run_dir), "hf:a", "demo")
    expected = set(table.loc[(table.gain > 0.0) & (table.logprob_long > -6.0), "target_pos"])
    assert 0 < len(expected) < len(table)
    result = api.diff(f"hf:{tiny['a']}", f"hf:{tiny['b']}", ["demo"], window=64, max_tokens=192, key_tokens=gain.run_dir,
                      out=tmp_path / "d", bootstrap=api.Bootstrap(replicates=200))
    key = result.report["summary"]["key_tokens"]
    assert key["evaluator"] == "hf:a" and key["tokens"] == len(expected) == key["all"]["tokens"]
    rec = pd.read_parquet(tmp_path / "d" / "diff_records.parquet")
    assert key["all"]["kl"]["estimate"] == pytest.approx(rec[rec.target_pos.isin(expected)].kl.mean(), rel=1e-12)
    assert "Key tokens of" in result.markdown
    html = result.paths()["html"].read_text()
    assert _page_data(html)["tokens"]["key"].tolist() == rec.target_pos.isin(expected).astype(int).tolist()
    assert html.count("<title>key tokens</title>") == 2  # a series in each chart


def test_what_a_ray_worker_receives_pickles():
    import pickle

    from ctxeval.backends.registry import parse_model_spec
    from ctxeval.pipeline.executors.spec import ScorerSpec
    from ctxeval.modeldiff.pair import DiffTask, PairSpec

    spec = PairSpec(ScorerSpec(parse_model_spec("gemma-3-270m"), 2), ScorerSpec(parse_model_spec("x.gguf?type_k=q8_0&type_v=q8_0&flash_attn=1"), 2))
    task = DiffTask(10, True, 128)
    assert pickle.loads(pickle.dumps(spec)) == spec and pickle.loads(pickle.dumps(task)) == task
    assert spec.per_server() == [spec]
