"""Which variants are tied, and the flips of a paired table: McNemar's exact test and its mid-p
against scipy, statsmodels and hand-computed values; Holm against statsmodels; rank intervals and
letter groups on hand-made decisions; the ranking of a RULER run against its pairwise parts."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
from scipy.stats import binomtest
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.multitest import multipletests

from ctxeval import api
from ctxeval.ruler.ranking import rank_cell
from ctxeval.stats.mcnemar import flips, mcnemar_exact, score_p
from ctxeval.stats.multiple import holm, letter_groups, rank_intervals
from ctxeval.stats.paired_binary import tango_interval
from tests.test_ruler import _ruler_folder


@pytest.mark.parametrize(("lost", "gained"), [(0, 0), (1, 0), (3, 1), (2, 9), (7, 7), (0, 12), (25, 11)])
def test_exact_mcnemar_equals_statsmodels_and_scipys_binomial_test(lost, gained):
    exact, _ = mcnemar_exact(lost, gained)
    table = [[5, lost], [gained, 4]]
    assert exact == pytest.approx(mcnemar(table, exact=True).pvalue, abs=1e-12)
    if lost + gained:
        assert exact == pytest.approx(binomtest(lost, lost + gained, 0.5).pvalue, abs=1e-12)


def test_mid_p_by_hand():
    # 1 and 6 flips: P(X ≤ 1) = 8/128 for X ~ Bin(7, 1/2); exact 16/128, mid-p 16/128 − P(X = 1) = 9/128
    assert mcnemar_exact(1, 6) == pytest.approx((16 / 128, 9 / 128))
    assert mcnemar_exact(6, 1) == pytest.approx((16 / 128, 9 / 128))
    # equal flips: the exact p is capped at 1, the mid-p is 1 exactly (P(X ≤ b) = 1/2 + P(X = b)/2)
    assert mcnemar_exact(3, 3) == pytest.approx((1.0, 1.0)) and mcnemar_exact(0, 0) == (1.0, 1.0)
    # no flip one way, 4 the other: 2 · (1/16) = 1/8, mid-p 1/8 − 1/16
    assert mcnemar_exact(0, 4) == pytest.approx((0.125, 0.0625))


@pytest.mark.parametrize(("gained", "lost", "n"), [(1, 0, 9), (3, 1, 20), (2, 9, 30), (7, 7, 20), (0, 12, 40)])
def test_score_p_is_mcnemars_asymptotic_test_without_correction(gained, lost, n):
    table = [[n - gained - lost, lost], [gained, 0]]
    assert score_p(gained, lost, n) == pytest.approx(mcnemar(table, exact=False, correction=False).pvalue, abs=1e-12)


def test_flips_count_partial_credit_apart():
    reference = np.array([1, 1, 0, 0, 1, 0.5, 0.5, 1, 0.25])
    candidate = np.array([0, 1, 1, 0, 0, 0.5, 0.0, 0.75, 0.25])
    counted = flips(reference, candidate)
    # right → wrong: samples 0 and 4; wrong → right: sample 2; differing partial pairs: 6 (0.5 → 0) and 7 (1 → 0.75)
    assert (counted.lost, counted.gained, counted.partial, counted.binary) == (2, 1, 2, False)
    assert flips(np.array([1.0, 0.0]), np.array([0.0, 0.0])).binary


def test_holm_equals_statsmodels():
    rng = np.random.default_rng(7)
    for m in (1, 2, 6, 15):
        p = np.concatenate([rng.uniform(0, 0.08, m // 2), rng.uniform(0, 1, m - m // 2)])
        p[-1] = p[0]  # a tie
        assert holm(p) == pytest.approx(multipletests(p, method="holm")[1], abs=1e-12)
    with pytest.raises(ValueError):
        holm([0.1, 1.2])


# variants 0 > 1 > 2 > 3 in score; decided different: 0–2, 0–3, 1–3
APART = np.zeros((4, 4), dtype=bool)
for i, j in ((0, 2), (0, 3), (1, 3)):
    APART[i, j] = APART[j, i] = True


def test_rank_intervals_by_hand():
    # 0 beats two (rank ≤ 4 − 2), 1 beats one, 2 is beaten by one (rank ≥ 2), 3 by two (rank ≥ 3)
    assert rank_intervals(np.triu(APART)) == [(1, 2), (1, 3), (2, 4), (3, 4)]
    assert rank_intervals(np.zeros((3, 3), bool)) == [(1, 3)] * 3


def test_letter_groups_by_hand_and_their_defining_property():
    # the tied graph is the path 0 – 1 – 2 – 3: its maximal groups {0, 1}, {1, 2}, {2, 3}
    assert letter_groups(APART) == ["a", "ab", "bc", "c"]
    assert letter_groups(np.zeros((3, 3), bool)) == ["a", "a", "a"]
    assert letter_groups(~np.eye(3, dtype=bool)) == ["a", "b", "c"]
    rng = np.random.default_rng(3)
    for _ in range(50):
        k = int(rng.integers(2, 7))
        upper = np.triu(rng.random((k, k)) < 0.5, 1)
        apart = upper | upper.T
        letters = letter_groups(apart)
        for i, j in itertools.combinations(range(k), 2):
            assert bool(set(letters[i]) & set(letters[j])) == (not apart[i, j])


def test_a_cell_ranking_is_its_pairs_tango_intervals_and_holms_decisions():
    rng = np.random.default_rng(11)
    n = 40
    full = (rng.random(n) < 0.9).astype(float)
    scores = {"full": full, "mild": full * (rng.random(n) < 0.93), "strong": full * (rng.random(n) < 0.4), "same": full.copy()}
    rows, pairs = rank_cell(scores)
    assert [r["model"] for r in rows] == ["full", "same", "mild", "strong"]  # equal scores keep the run's order
    m = 6
    order = [r["model"] for r in rows]
    expected_p = []
    for pair in pairs:
        higher, lower = scores[pair["higher"]], scores[pair["lower"]]
        gained, lost = float(((lower == 1) & (higher == 0)).sum()), float(((lower == 0) & (higher == 1)).sum())
        table = [[0, lost], [gained, n - gained - lost]]
        expected_p.append(mcnemar(table, exact=False, correction=False).pvalue if gained + lost else 1.0)
        low, high = tango_interval(gained, lost, n, 1 - 0.05 / m)
        assert (pair["diff"], pair["diff.low"], pair["diff.high"]) == pytest.approx((100 * (gained - lost) / n, 100 * low, 100 * high))
        assert pair["diff.confidence"] == pytest.approx(1 - 0.05 / m) and pair["diff.n"] == n
        assert order.index(pair["higher"]) < order.index(pair["lower"])
    reject, adjusted, _, _ = multipletests(expected_p, alpha=0.05, method="holm")
    assert [p["p_holm"] for p in pairs] == pytest.approx(adjusted, abs=1e-12)
    assert [p["apart"] for p in pairs] == list(reject)
    strong = rows[3]
    assert strong["groups"] == "b" and (strong["rank.low"], strong["rank.high"], strong["rank.confidence"]) == (4, 4, 0.95) and rows[0]["groups"] == "a"
    to_full = next(p for p in pairs if p["higher"] == "full" and p["lower"] == "strong")
    assert (strong["to_best"], strong["to_best.low"], strong["to_best.high"]) == (to_full["diff"], to_full["diff.low"], to_full["diff.high"])
    assert rows[0]["to_best"] == 0.0 and math.isnan(rows[0]["to_best.low"])


def _scores(values: list[float]) -> tuple[list[float], list[float], list[float]]:
    return values, values, [-1.0 - 0.1 * v for v in values]


def test_a_run_of_four_variants_leads_with_the_ranking_and_its_paired_table_has_flips(tmp_path):
    full = [1.0] * 18 + [0.0] * 2
    mild = [0.0] + [1.0] * 17 + [0.0, 1.0]  # loses sample 0, gains sample 19
    strong = [1.0] * 4 + [0.0] * 16
    partial = [0.5] * 20
    scores = {"full": _scores(full), "mild": _scores(mild), "strong": _scores(strong), "half": _scores(partial), "other": _scores(full)}
    run = _ruler_folder(tmp_path / "ruler", scores, own_prompts=("other",), replicates=200)
    result = api.read_result(run)
    lines = result.markdown.splitlines()
    assert lines[2].startswith("**RULER, which variants are tied**: niah_single_1, per length") and "6 pairs" in lines[2]
    assert lines[6].startswith("| 1024 | 1 | full | 90.0 | — (the top) |") and lines[7].startswith("| 1024 | 2 | mild | 90.0 | +0.0 [")
    # half (50 %) is told apart from full and mild by Holm (adjusted p 0.046) though its simultaneous interval reaches 0,
    # and not from strong (20 %): 8 half-samples gained against 2 lost, p 0.058
    assert lines[8].startswith("| 1024 | 3 | half | 50.0 | -40.0 [") and lines[8].endswith("| 3–4 | b |")
    assert lines[9].startswith("| 1024 | 4 | strong | 20.0 | -70.0 [") and lines[9].endswith("| 3–4 | b |")
    assert lines[11] == "1024: a: full, mild; b: half, strong  "
    assert "reaches 0: full and half at 1024, mild and half at 1024." in lines[12]
    assert any(line == "other at 1024: left out: its prompts differ from full's (another tokenizer or template)." for line in lines)
    assert any(line.startswith("**RULER, paired differences against full**") for line in lines)
    data = json.loads((run / "results.json").read_text())
    ranking = {r["model"]: r for r in data["ranking"]}
    assert [ranking[m]["order"] for m in ("full", "mild", "half", "strong")] == [1, 2, 3, 4] and not ranking["other"]["ranked"]
    assert len(data["ranking_pairs"]) == 6
    paired = {r["model"]: r for r in data["paired"]}
    assert (paired["mild"]["flips_lost"], paired["mild"]["flips_gained"], paired["mild"]["flips_partial"]) == (1, 1, 0)
    assert paired["mild"]["mcnemar_p"] == pytest.approx(mcnemar([[17, 1], [1, 1]], exact=True).pvalue) == 1.0
    assert (paired["strong"]["flips_lost"], paired["strong"]["flips_gained"]) == (14, 0)
    assert paired["strong"]["mcnemar_p"] == pytest.approx(binomtest(14, 14, 0.5).pvalue)
    assert paired["strong"]["mcnemar_midp"] == pytest.approx(2 * 0.5**14 - 0.5**14)
    assert (paired["half"]["flips_lost"], paired["half"]["flips_partial"]) == (0, 20) and paired["half"]["mcnemar_p"] is None
    assert "partial credit" in paired["half"]["mcnemar_reason"]
    strong_row = next(line for line in lines if line.startswith("| strong | 1024 | niah_single_1 |"))
    assert "| 14 / 0 / 0 | < 0.001 (< 0.001) |" in strong_row
    assert "| 0 / 0 / 20 | none: partial credit |" in next(line for line in lines if line.startswith("| half | 1024 |"))


def test_a_prediction_powered_run_says_its_ranking_is_by_the_records_scores(tmp_path):
    from ctxeval.render.ruler import ranking_headline

    scores = {m: _scores(v) for m, v in (("full", [1.0] * 6), ("a", [1.0] * 5 + [0.0]), ("b", [0.0] * 6))}
    result = api.read_result(_ruler_folder(tmp_path / "ruler", scores, generated=False, replicates=100))
    notes = ranking_headline(result.ranking, result.ranking_pairs, "likelihood", ppi=True).notes
    assert notes[-1].startswith("Ranked by the records' scores (by likelihood") and notes[-1].endswith("not by the prediction-powered estimates above.")


def test_two_variants_give_no_ranking(tmp_path):
    run = _ruler_folder(tmp_path / "ruler", {"full": _scores([1.0, 0.0, 1.0]), "press": _scores([0.0, 0.0, 1.0])}, replicates=100)
    result = api.read_result(run)
    assert result.ranking.empty and result.ranking_pairs.empty
    assert result.markdown.splitlines()[2].startswith("**RULER, paired differences against full**")


def test_the_mean_ranks_the_pooled_tasks_and_leaves_out_a_variant_without_every_task():
    import pandas as pd

    from ctxeval.ruler.ranking import ranking_tables

    rng = np.random.default_rng(2)
    rows = []
    for model, rate in (("full", 0.9), ("a", 0.85), ("b", 0.3), ("partway", 0.9)):
        for task in ("t1", "t2"):
            if model == "partway" and task == "t2":
                continue
            for k in range(15):
                rows.append({"model": model, "task": task, "length": 1024, "sample": k, "prompt_sha256": f"{task}{k}",
                             "generation_score": float(rng.random() < rate)})
    samples = pd.DataFrame(rows)
    variants, pairs = ranking_tables(samples, "generation_score")
    mean = variants[variants["task"] == "mean"].set_index("model")
    assert not mean.loc["partway", "ranked"] and "lacks some of the first model's samples" in mean.loc["partway", "note"]
    pooled = {m: samples[samples["model"] == m].sort_values(["task", "sample"])["generation_score"].to_numpy() for m in ("full", "a", "b")}
    expected, _ = rank_cell(pooled)
    assert [r["model"] for r in expected] == list(mean[mean["ranked"].astype(bool)].index)
    assert mean.loc["b", "score"] == pytest.approx(100 * pooled["b"].mean())
    assert set(variants[variants["task"] == "t1"]["model"]) == {"full", "a", "b", "partway"}  # t1: all four ranked
    assert variants[variants["task"] == "t1"]["ranked"].all() and len(pairs[pairs["task"] == "t1"]) == 6


def test_prediction_powered_differences_count_flips_on_the_labelled_pairs_only():
    pytest.importorskip("ppi_py")
    from ctxeval.render.ruler_ppi import ppi_markdown
    from ctxeval.ruler.ppi import PREDICTED, ppi_tables
    from tests.test_ruler_ppi import _records

    records = _records(0.4, samples=40)
    _, differences = ppi_tables(records.drop(columns="truth"), 42)
    wide = records.pivot_table(index=["task", "sample"], columns="model", values=["generation_score", "method"], aggfunc="first")
    for task, row in differences.set_index("task").iterrows():
        part = wide if task == "mean" else wide.loc[task]
        labelled = part[(part[("method", "full")] != PREDICTED) & (part[("method", "pressed")] != PREDICTED)]
        full, pressed = labelled[("generation_score", "full")].astype(float), labelled[("generation_score", "pressed")].astype(float)
        lost, gained = int(((full == 1) & (pressed == 0)).sum()), int(((full == 0) & (pressed == 1)).sum())
        assert (row["labelled_pairs"], row["flips_lost"], row["flips_gained"], row["flips_partial"]) == (len(labelled), lost, gained, 0)
        assert row["mcnemar_p"] == pytest.approx(mcnemar([[0, lost], [gained, 0]], exact=True).pvalue)
    text = "\n".join(ppi_markdown(pd_scores(), differences, delta=5.0))
    mean = differences.set_index("task").loc["mean"]
    line = next(line for line in text.splitlines() if line.startswith("| pressed") and "flips" not in line and " / " in line and "| mean" in line)
    cells = [c.strip() for c in line.strip("|").split("|")]
    p = mcnemar([[0, mean["flips_lost"]], [mean["flips_gained"], 0]], exact=True).pvalue
    assert cells[3:5] == [str(mean["labelled_pairs"]), f"{mean['flips_lost']} / {mean['flips_gained']} / 0"] and cells[5].startswith(f"{p:.3f} (")


def pd_scores():
    """A one-row score table: the section's first table needs one."""
    import pandas as pd

    from ctxeval.stats.interval import Interval

    score = Interval(50.0, 40.0, 60.0, n=16, confidence=0.95, method="PPI++ stratified (t)").columns("score")
    return pd.DataFrame([{"model": "full", "task": "vt", "length": 1024, **score, "exact": 1, "generated": 10, "predicted": 5}])
