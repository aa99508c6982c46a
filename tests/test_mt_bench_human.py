"""MT-Bench human judgments (the PPLqa paper's Table 3 data): the loader on a fixture in the
public split's schema, and how human ties enter accuracy, recalls, precisions and MCC."""

from __future__ import annotations

import json
import math

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sklearn.metrics import accuracy_score, matthews_corrcoef, precision_recall_fscore_support

from ctxeval.data.pairwise import load_dataset
from ctxeval.errors import UserError
from ctxeval.qa.meta_eval import evaluate_picks
from ctxeval.render.meta_eval import tie_policy_line
from ctxeval.stats.bootstrap import classification_metrics

from .conftest import FIXTURES, run_cli

HUMAN = FIXTURES / "mt_bench_human" / "human.jsonl"


def _rows() -> list[dict]:
    return [json.loads(line) for line in HUMAN.read_text().splitlines()]


def test_every_vote_is_an_item_with_ties_kept_by_default():
    data = load_dataset(str(HUMAN))
    assert data.tie_policy == "keep" and data.ties_dropped == 0
    assert [it.label for it in data.items] == [1, 0, 2, 1, 0, 2]  # model_a, tie, model_b, model_a, tie, model_b
    assert data.notes == {"winners": {"model_a": 2, "tie": 2, "model_b": 2}, "turns": {"1": 4, "2": 2}}
    first, turn2 = data.items[0], data.items[3]
    assert first.question == "Name the largest planet in the Solar System and one fact about it."
    assert first.answer_1.startswith("Jupiter") and first.answer_2 == "Saturn. It has rings."
    assert first.meta == {"question_id": 901, "model_a": "model-x", "model_b": "model-y", "judge": "expert_0", "turn": 1}
    # turn 2: the second user message and each conversation's second assistant message
    assert turn2.question == "Rewrite your tips as a short poem."
    assert turn2.answer_1.startswith("Ask first") and turn2.answer_2 == "Emails are good."


def test_ties_can_be_dropped_and_are_counted():
    data = load_dataset(str(HUMAN), ties="drop")
    assert [it.label for it in data.items] == [1, 2, 1, 2]
    assert data.ties_dropped == 2 and data.tie_policy == "drop"
    assert tie_policy_line({"tie_policy": "drop", "ties_dropped": 2}) == "Human ties dropped (2 items): binary labels."


def test_parquet_and_json_exports_of_the_split_read_alike(tmp_path):
    rows = _rows()
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "human.parquet")  # as `datasets`' to_parquet writes it
    (tmp_path / "human.json").write_text(json.dumps(rows))
    want = [(it.question, it.answer_1, it.answer_2, it.label) for it in load_dataset(str(HUMAN)).items]
    for name in ("human.parquet", "human.json"):
        assert [(it.question, it.answer_1, it.answer_2, it.label) for it in load_dataset(str(tmp_path / name)).items] == want


@pytest.mark.parametrize("change,message", [
    ({"winner": "model_c"}, "winner"),
    ({"turn": 3}, "turn"),
    ({"conversation_b": [{"role": "user", "content": "another question"}, {"role": "assistant", "content": "x"}]}, "different questions"),
])
def test_malformed_rows_are_refused_with_their_row(tmp_path, change, message):
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(json.dumps(r | change if k == 2 else r) for k, r in enumerate(_rows())) + "\n")
    with pytest.raises(UserError, match=f"row 2.*{message}"):
        load_dataset(str(path))


def test_named_sets_need_the_data_folder(monkeypatch):
    monkeypatch.delenv("CTXEVAL_SHARED_DATA")
    with pytest.raises(UserError, match="llmbar:MT-Bench is read from the shared data folder: set CTXEVAL_SHARED_DATA"):
        load_dataset("llmbar:MT-Bench")


def test_ties_are_a_true_class_no_method_predicts_by_hand():
    """Ten items, two human ties; the method picks 1 or 2 everywhere. By hand: recall 3/4 for both
    labels, but accuracy 6/10 = 0.6 (the ties are always wrong: below both recalls, the
    paper's pattern); precision_1 = 3 / (3 + 1 wrong + 1 tie) = 0.6; MCC (Gorodkin's
    K-class form over true {1, 2, tie}): c = 6, s = 10, predicted (5, 5, 0), true (4, 4, 2):
    (6·10 − (5·4 + 5·4)) / (√(100 − 50) · √(100 − 36)) = 20 / (√50 · 8) = 0.35355."""
    truth = [1, 1, 1, 1, 2, 2, 2, 2, 0, 0]
    picks = [1, 1, 1, 2, 2, 2, 2, 1, 1, 2]
    got = evaluate_picks([{"label": t, "pplqa_pick": p} for t, p in zip(truth, picks)], ("pplqa",), 0, 0)["pplqa"]["metrics"]
    assert got["recall_1"] == got["recall_2"] == 0.75
    assert got["precision_1"] == got["precision_2"] == 0.6
    assert got["accuracy"] == 0.6
    assert got["mcc"] == pytest.approx(20 / (math.sqrt(50) * 8), abs=1e-12)
    assert got["mcc"] == pytest.approx(matthews_corrcoef(truth, picks), abs=1e-12)  # scikit-learn, independently
    # the same picks with the ties left out: binary, accuracy between the recalls
    binary = classification_metrics(truth[:8], picks[:8], [1, 2], [1, 2])
    assert binary["accuracy"] == 0.75 and binary["mcc"] == pytest.approx((9 - 1) / 16, abs=1e-12)


def test_paper_table3_pplqa_column_is_ties_kept_as_a_class():
    """Paper 003, Table 3, PPLqa without prompts: precision 0.510, 0.513; recall 0.672, 0.660;
    F1 0.580, 0.577; accuracy 0.511; MCC 0.223 over the 3,355 votes. This confusion matrix
    (true model_a / model_b / tie × picked a / b) reproduces all eight numbers to the printed
    three decimals with ties kept; dropping the 779 ties instead gives accuracy 0.666 and MCC
    0.332, which the paper does not print."""
    counts = {(1, 1): 827, (1, 2): 403, (2, 1): 457, (2, 2): 889, (0, 1): 337, (0, 2): 442}
    truth = [t for (t, _), n in counts.items() for _ in range(n)]
    picks = [p for (_, p), n in counts.items() for _ in range(n)]
    assert len(truth) == 3355
    got = evaluate_picks([{"label": t, "pplqa_pick": p} for t, p in zip(truth, picks)], ("pplqa",), 0, 0)["pplqa"]["metrics"]
    paper = {"precision_1": 0.510, "precision_2": 0.513, "recall_1": 0.672, "recall_2": 0.660, "f1_1": 0.580, "f1_2": 0.577, "accuracy": 0.511, "mcc": 0.223}
    assert {k: round(got[k], 3) for k in paper} == paper
    precision, recall, f1, _ = precision_recall_fscore_support(truth, picks, labels=[1, 2], zero_division=0)
    assert [got["precision_1"], got["precision_2"], got["recall_1"], got["recall_2"]] == pytest.approx([*precision, *recall], abs=1e-12)
    assert got["accuracy"] == pytest.approx(accuracy_score(truth, picks), abs=1e-12)
    binary = classification_metrics([t for t in truth if t], [p for t, p in zip(truth, picks) if t], [1, 2], [1, 2])
    assert (round(binary["accuracy"], 3), round(binary["mcc"], 3)) == (0.666, 0.332)


@pytest.mark.model
def test_meta_eval_on_the_fixture_reports_the_tie_policy(tmp_path):
    out = tmp_path / "run"
    r = run_cli("meta-eval", "--dataset", str(HUMAN), "--methods", "pplqa", "--replicates", "100", "--out", str(out), "--quiet", "--threads", "1")
    assert r.returncode == 0, r.stderr
    result = json.loads((out / "meta_eval.json").read_text())
    assert result["dataset"]["tie_policy"] == "keep" and result["dataset"]["labels"] == {"0": 2, "1": 2, "2": 2}
    import csv

    rows = list(csv.DictReader((out / "items.csv").open()))
    truth, picks = [int(r["label"]) for r in rows], [int(r["pplqa_pick"]) for r in rows]
    assert result["methods"]["pplqa"]["metrics"]["accuracy"] == sum(t == p for t, p in zip(truth, picks)) / 6
    assert result["methods"]["pplqa"]["metrics"]["mcc"] == pytest.approx(matthews_corrcoef(truth, picks), abs=1e-12)
    assert "Human ties kept as a third class (2 items)" in (out / "meta_eval.md").read_text()
