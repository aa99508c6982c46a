"""Answer-quality arithmetic, dataset loaders and agreement tables, without a model."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef, precision_score, recall_score

from ctxeval.data.mt_bench import human_net_wins, load_mt_bench
from ctxeval.data.pairwise import load_dataset, load_llmbar, load_pandalm, majority_label
from ctxeval.errors import UserError
from ctxeval.metrics.qa import geval_score, gpt_score, perplexity, pick_winner, ppl_qa, rank_scores
from ctxeval.qa.meta_eval import evaluate_picks
from ctxeval.qa.ranking import tau_summary

from .conftest import SHARED_DATA, needs_shared


def test_pplqa_by_hand():
    # question tokens log p = [-2, -4], answer given question = [-1, -1, -1], answer alone = [-2, -2, -2]
    joint, alone, value = ppl_qa(-6.0, 2, -3.0, 3, -6.0, scope="all")
    assert joint == pytest.approx(math.exp(9 / 5))
    assert alone == pytest.approx(math.exp(2.0))
    assert value == pytest.approx(abs(math.exp(1.8) - math.exp(2.0)))
    joint, alone, value = ppl_qa(-6.0, 2, -3.0, 3, -6.0, scope="answer")
    assert joint == pytest.approx(math.e)
    assert value == pytest.approx(math.exp(2.0) - math.e)
    assert math.isnan(perplexity(0.0, 0))
    # a model without BOS scores one answer token fewer alone: PPL(a) uses its own count
    assert ppl_qa(-6.0, 2, -3.0, 3, -4.0, "answer", n_answer_alone=2)[1] == pytest.approx(math.exp(2.0))
    with pytest.raises(ValueError):
        ppl_qa(0, 1, 0, 1, 0, scope="question")


def test_gptscore_by_hand():
    assert gpt_score(-3.0, 4) == pytest.approx(-0.75)
    assert math.isnan(gpt_score(0.0, 0))


def test_geval_by_hand():
    # p(1..5) = 0.1, 0.2, 0.3, 0.2, 0.1 (mass 0.9): renormalised mean = (0.1+0.4+0.9+0.8+0.5)/0.9
    g = geval_score(np.log([0.1, 0.2, 0.3, 0.2, 0.1]))
    assert g.weighted == pytest.approx(2.7 / 0.9)
    assert g.integer == 3.0
    assert g.digit_mass == pytest.approx(0.9)
    # skewed: the most probable score is 4, the weighted score (0.05+0.2+0.6+1.6+0.75)/0.9 = 3.56
    g = geval_score(np.log([0.05, 0.10, 0.20, 0.40, 0.15]))
    assert (g.integer, g.weighted) == (4.0, pytest.approx(3.2 / 0.9))
    # a digit outside a top-k backend's list counts as probability 0
    g = geval_score([math.log(0.5), math.nan, math.nan, math.nan, math.log(0.25)])
    assert g.weighted == pytest.approx((1 * 0.5 + 5 * 0.25) / 0.75)
    assert g.integer == 1.0 and g.digit_mass == pytest.approx(0.75)
    # two equally probable scores: the lower one
    assert geval_score(np.log([0.1, 0.3, 0.3, 0.1, 0.1])).integer == 2.0
    nothing = geval_score([math.nan] * 5)
    assert math.isnan(nothing.integer) and math.isnan(nothing.weighted) and nothing.digit_mass == 0.0
    with pytest.raises(ValueError):
        geval_score([0.0, 0.0])


# Score-token probabilities p(1..5) of four hand-made evaluator answers
P_A = [0.05, 0.10, 0.20, 0.40, 0.15]  # integer 4, weighted 3.2 / 0.9 = 3.556
P_B = [0.10, 0.15, 0.20, 0.35, 0.10]  # integer 4, weighted 2.9 / 0.9 = 3.222
P_C = [0.10, 0.50, 0.20, 0.10, 0.05]  # integer 2, weighted 2.35 / 0.95 = 2.474
P_D = [0.02, 0.03, 0.05, 0.30, 0.55]  # integer 5, weighted 4.18 / 0.95 = 4.400


def test_integer_geval_ties_are_counted_as_tie_picks():
    items = [(1, P_A, P_B), (2, P_C, P_D), (2, P_A, P_B)]  # (human label, answer 1, answer 2)
    rows = []
    for label, p1, p2 in items:
        g1, g2 = geval_score(np.log(p1)), geval_score(np.log(p2))
        rows.append({"label": label, "geval_pick": pick_winner(g1.integer, g2.integer, True),
                     "geval_weighted_pick": pick_winner(g1.weighted, g2.weighted, True)})
    assert [r["geval_pick"] for r in rows] == [0, 2, 0]  # A and B both score 4: a tie, not a pick
    assert [r["geval_weighted_pick"] for r in rows] == [1, 2, 1]
    result = evaluate_picks(rows, ("geval", "geval_weighted"), replicates=50, seed=0)
    integer, weighted = result["geval"], result["geval_weighted"]
    assert integer["tie_picks"] == 2 and integer["picks"] == {"1": 0, "2": 1, "0": 2}
    assert integer["metrics"]["accuracy"] == pytest.approx(1 / 3)  # a tie is never right
    assert weighted["tie_picks"] == 0 and weighted["metrics"]["accuracy"] == pytest.approx(2 / 3)
    y_true = [r["label"] for r in rows]
    for method in ("geval", "geval_weighted"):
        y_pred = [r[f"{method}_pick"] for r in rows]
        assert result[method]["metrics"]["mcc"] == pytest.approx(matthews_corrcoef(y_true, y_pred))
        assert result[method]["metrics"]["recall_1"] == pytest.approx(recall_score(y_true, y_pred, labels=[1], average=None, zero_division=0)[0])


def test_tau_summary_counts_tied_integer_scores_as_the_paper_does():
    # q1: integer G-Eval gives all three answers 4 (tau-a 0); q2: [5, 2, 4] vs reference [3, 1, 2] (tau 1)
    items = [([4.0, 4.0, 4.0], [3.0, 2.0, 1.0]), ([5.0, 2.0, 4.0], [3.0, 1.0, 2.0])]
    paper = tau_summary(items)
    assert paper["tau_variant"] == "a" and paper["mean_tau"] == pytest.approx(0.5)
    assert (paper["items_used"], paper["items_constant"], paper["items_skipped"]) == (2, 1, 0)
    assert paper["random_baseline_nonnegative"] == pytest.approx(5 / 9)  # three answers, exact
    assert paper["random_baseline_method"].startswith("exact")
    tau_b = tau_summary(items, variant="b")
    assert tau_b["mean_tau"] == pytest.approx(1.0)
    assert (tau_b["items_used"], tau_b["items_constant"], tau_b["items_skipped"]) == (1, 1, 1)


def test_pick_winner_and_ranks():
    assert pick_winner(1.0, 2.0, higher_is_better=False) == 1
    assert pick_winner(1.0, 2.0, higher_is_better=True) == 2
    assert pick_winner(3.0, 3.0, higher_is_better=True) == 0
    assert pick_winner(math.nan, 2.0, higher_is_better=False) == 2
    assert pick_winner(math.nan, math.nan, higher_is_better=False) == 0
    assert rank_scores([0.5, 0.1, 0.5, math.nan], higher_is_better=False).tolist() == [2.5, 1.0, 2.5, 4.0]
    assert rank_scores([-1.0, -3.0, -2.0], higher_is_better=True).tolist() == [1.0, 3.0, 2.0]


def test_majority_vote():
    assert majority_label([2, 1, 2]) == (2, "majority")
    assert majority_label([0, 0, 1]) == (0, "majority tie")
    assert majority_label([1, 2, 0]) == (0, "no majority")


def test_pandalm_ties(tmp_path):
    rows = [
        {"idx": 0, "instruction": "Say hi", "input": "", "response1": "hi", "response2": "yo", "annotator1": 1, "annotator2": 1, "annotator3": 2},
        {"idx": 1, "instruction": "Add", "input": "2+2", "response1": "4", "response2": "5", "annotator1": "0", "annotator2": "0", "annotator3": "1"},
        {"idx": 2, "instruction": "Pick", "input": "", "response1": "a", "response2": "b", "annotator1": 1, "annotator2": 2, "annotator3": 0},
        {"idx": 3, "instruction": "Name", "input": "x", "response1": "a", "response2": "b", "annotator1": 2, "annotator2": 2, "annotator3": 0},
    ]
    path = tmp_path / "panda.json"
    path.write_text(json.dumps(rows))
    dropped = load_pandalm(path)
    assert [(it.item_id, it.label) for it in dropped.items] == [("pandalm-0", 1), ("pandalm-3", 2)]
    assert dropped.ties_dropped == 2
    assert dropped.items[1].question == "Name\n\nx"
    kept = load_dataset(str(path), ties="keep")  # layout detected from the keys
    assert [it.label for it in kept.items] == [1, 0, 0, 2]
    assert kept.notes["label_reasons"] == {"majority": 2, "majority tie": 1, "no majority": 1}


@needs_shared(SHARED_DATA / "pairwise_prefs")
def test_shared_pairwise_data():
    mt = load_dataset("llmbar:MT-Bench")
    assert len(mt.items) == 200 and {it.label for it in mt.items} == {1, 2}
    assert sum(it.label == 1 for it in mt.items) == 101
    panda = load_dataset("pandalm")
    # 999 items; 85 unanimous ties plus majority ties (0,0,x) are dropped
    reasons = panda.notes["label_reasons"]
    assert sum(reasons.values()) == 999 and len(panda.items) == reasons["majority"]
    assert panda.ties_dropped == reasons["majority tie"] + reasons.get("no majority", 0) >= 85


def test_loader_errors(tmp_path):
    llmbar = tmp_path / "data" / "pairwise_prefs" / "llmbar"
    llmbar.mkdir(parents=True)
    (llmbar / "Natural.json").write_text(json.dumps([{"input": "q", "output_1": "a", "output_2": "b", "label": 1}]))
    with pytest.raises(UserError, match="no LLMBar set 'Nope' in .*: choose from Natural"):
        load_dataset("llmbar:Nope", data_dir=tmp_path / "data")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"input": "q", "output_1": "a", "output_2": "b", "label": 3}]))
    with pytest.raises(UserError, match="label"):
        load_llmbar(bad)
    other = tmp_path / "other.json"
    other.write_text(json.dumps([{"x": 1}]))
    with pytest.raises(UserError, match="layout"):
        load_dataset(str(other))


@needs_shared(SHARED_DATA / "mt_bench")
def test_mt_bench_human_votes_map_to_models():
    questions = load_mt_bench()
    assert len(questions) == 80 and all(len(q.answers) == 6 for q in questions)
    ref, note = human_net_wins(questions)
    # both answers must match a pre-generated answer; vicuna-13b-v1.2 answers are not mirrored
    assert note["votes_matched"] + note["votes_unmatched"] == 200
    assert note["votes_matched"] > 100
    assert all(sum(v.values()) == 0 for v in ref.values())  # every vote is +1 / -1


def test_table_metrics_equal_sklearn():
    rng = np.random.default_rng(3)
    labels = rng.integers(1, 3, 60).tolist()
    rows = [{"label": y, "pplqa_pick": int(rng.choice([1, 2, 0], p=[0.45, 0.45, 0.1]))} for y in labels]
    result = evaluate_picks(rows, ("pplqa",), replicates=200, seed=1)["pplqa"]
    y_true, y_pred = labels, [r["pplqa_pick"] for r in rows]
    m = result["metrics"]
    assert m["mcc"] == pytest.approx(matthews_corrcoef(y_true, y_pred))
    assert m["accuracy"] == pytest.approx(accuracy_score(y_true, y_pred))
    for label in (1, 2):
        kw = {"labels": [label], "average": None, "zero_division": 0}
        assert m[f"f1_{label}"] == pytest.approx(f1_score(y_true, y_pred, **kw)[0])
        assert m[f"precision_{label}"] == pytest.approx(precision_score(y_true, y_pred, **kw)[0])
        assert m[f"recall_{label}"] == pytest.approx(recall_score(y_true, y_pred, **kw)[0])
    mcc = result["intervals"]["mcc"]
    assert mcc["low"] <= m["mcc"] <= mcc["high"] and mcc["high"] - mcc["low"] > 0
    assert (mcc["estimate"], mcc["n"], mcc["confidence"], mcc["method"]) == (m["mcc"], len(y_true), 0.95, "percentile bootstrap over items")
    assert result["tie_picks"] == sum(p == 0 for p in y_pred)
