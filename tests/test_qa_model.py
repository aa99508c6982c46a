"""PPLqa, GPTScore and G-Eval on the embedded Gemma, and the meta-evaluation end to end."""

from __future__ import annotations

import csv
import json

import numpy as np
import pyarrow.parquet as pq
import pytest
from sklearn.metrics import f1_score, matthews_corrcoef

from ctxeval.data.mt_bench import load_mt_bench
from ctxeval.metrics.qa import ppl_qa
from ctxeval.qa.evaluator import DIGITS, Evaluator, PairScore, PassRequest, QATask, digit_logprobs, pair_score
from ctxeval.qa.prompts import geval_prompt, qa_prefix
from ctxeval.results.records import STOP_AFTER_PASSES_ENV
from tests.conftest import SHARED_DATA, needs_shared, run_cli

pytestmark = pytest.mark.model

# Six MT-Bench questions with short gpt-3.5-turbo answers (< 90 tokens); each answer is also
# paired with the next question of the list (cyclically) as a wrong question.
SHORT_IDS = ("89", "90", "93", "95", "101", "102")


def _pair(ev: Evaluator, prefix: str, continuation: str) -> PairScore:
    """One `pair` pass, made and scored as `pplqa` makes and scores it (here on the driver)."""
    p = ev.qa_pass(PassRequest("pair", prefix, continuation))
    return pair_score(QATask(len(p.input_ids))(ev.scorer, [p])[0])


def _digits(ev: Evaluator, prompt: str) -> tuple[list[float], int]:
    """One `digits` pass: the score tokens' log-probabilities after `prompt`, and the top-k used."""
    p = ev.qa_pass(PassRequest("digits", prompt))
    record = QATask(len(p.input_ids))(ev.scorer, [p])[0]
    return digit_logprobs(record), int(record["top_k"])


@needs_shared(SHARED_DATA / "mt_bench")
def test_relevant_answer_scores_lower_than_with_wrong_question(gemma):
    questions = {q.question_id: q for q in load_mt_bench(models=("gpt-3.5-turbo",))}
    items = [questions[i] for i in SHORT_IDS]
    ev = Evaluator(gemma)
    lower, conditional_lower, observed = 0, 0, []
    for k, q in enumerate(items):
        answer, wrong = q.answers["gpt-3.5-turbo"], items[(k + 1) % len(items)].question
        alone = _pair(ev, "", answer)
        right_pass, wrong_pass = _pair(ev, qa_prefix(q.question, None), answer), _pair(ev, qa_prefix(wrong, None), answer)
        right = ppl_qa(right_pass.prefix_sum, right_pass.n_prefix, right_pass.cont_sum, right_pass.n_cont, alone.cont_sum, "all")
        bad = ppl_qa(wrong_pass.prefix_sum, wrong_pass.n_prefix, wrong_pass.cont_sum, wrong_pass.n_cont, alone.cont_sum, "all")
        lower += right[2] < bad[2]
        # PPL of the answer given its own question vs given the wrong one (scope "answer")
        conditional_lower += right_pass.cont_sum > wrong_pass.cont_sum
        observed.append((q.question_id, round(right[2], 2), round(bad[2], 2)))
    print("PPLqa (relevant, wrong question):", observed)
    # observed numbers: see docs/answer_quality.md
    assert lower >= 5
    assert conditional_lower == len(items)


def test_pair_and_digit_scores_match_direct_scoring(gemma):
    ev = Evaluator(gemma)
    prefix, answer = "What is the capital of France?\n\n", "The capital of France is Paris."
    got = _pair(ev, prefix, answer)
    p_ids, a_ids = gemma.tokenize(prefix), gemma.tokenize(answer)
    ids = np.asarray([gemma.info.bos_id, *p_ids, *a_ids], dtype=np.int32)
    direct = gemma.score(ids, np.arange(len(ids) - 1), ids[1:], 0, ()).logprob
    assert (got.n_prefix, got.n_cont) == (len(p_ids), len(a_ids))
    assert got.prefix_sum == pytest.approx(direct[: len(p_ids)].sum(), abs=1e-9)
    assert got.cont_sum == pytest.approx(direct[len(p_ids) :].sum(), abs=1e-9)
    # the five score-token log-probabilities are exact: each equals a direct target score
    prompt = geval_prompt("What is 2+2?", "4")
    digits, top_k = _digits(ev, prompt)
    assert top_k == gemma.info.vocab_size
    p = np.asarray([gemma.info.bos_id, *gemma.tokenize(prompt)], dtype=np.int32)
    for digit, value in zip(DIGITS, digits):
        want = gemma.score(p, np.array([len(p) - 1]), np.array(gemma.tokenize(digit)), 0, ()).logprob[0]
        assert value == pytest.approx(want, abs=1e-5)  # top-k values are float32


@needs_shared(SHARED_DATA / "pairwise_prefs")
def test_meta_eval_end_to_end_matches_sklearn(tmp_path):
    out = tmp_path / "meta"
    args = ("meta-eval", "--dataset", "llmbar:LLMBar_Adversarial_Neighbor", "--limit", "3", "--out", str(out), "--replicates", "200", "--quiet")
    done = run_cli(*args)
    assert done.returncode == 0, done.stderr
    result = json.loads((out / "meta_eval.json").read_text())
    table = (out / "meta_eval.md").read_text()
    assert "| MCC |" in table and "| F1 (label 2) |" in table
    with (out / "items.csv").open() as f:
        rows = list(csv.DictReader(f))
    y_true = [int(r["label"]) for r in rows]
    assert y_true == [2, 2, 1]
    for method in ("pplqa", "gptscore", "geval", "geval_weighted"):
        y_pred = [int(r[f"{method}_pick"]) for r in rows]
        assert result["methods"][method]["tie_picks"] == y_pred.count(0)
        m = result["methods"][method]["metrics"]
        assert m["mcc"] == pytest.approx(matthews_corrcoef(y_true, y_pred))
        for label in (1, 2):
            assert m[f"f1_{label}"] == pytest.approx(f1_score(y_true, y_pred, labels=[label], average=None, zero_division=0)[0])
    assert result["timing"]["passes_run_this_session"] == 3 * 2 * 3  # both G-Eval forms share one pass
    assert all(float(r[f"geval_{k}"]) in (1.0, 2.0, 3.0, 4.0, 5.0) for r in rows for k in (1, 2))
    again = run_cli(*args)  # resumes from the cache: no model pass, same table
    assert again.returncode == 0, again.stderr
    rerun = json.loads((out / "meta_eval.json").read_text())
    assert rerun["timing"]["passes_run_this_session"] == 0
    assert rerun["methods"] == result["methods"]


@needs_shared(SHARED_DATA / "pairwise_prefs")
def test_bad_method_is_one_line_error(tmp_path):
    done = run_cli("meta-eval", "--dataset", "llmbar:MT-Bench", "--methods", "pplqa,bleu", "--out", str(tmp_path))
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "unknown method" in done.stderr


def test_pplqa_command_ranks_answers_and_compares_with_reference(tmp_path):
    rows = [
        {"question_id": "q1", "question": "What is the capital of France?", "model": "good", "answer": "The capital of France is Paris."},
        {"question_id": "q1", "question": "What is the capital of France?", "model": "off", "answer": "Bananas are rich in potassium."},
        {"question_id": "q2", "question": "How many legs does a spider have?", "model": "good", "answer": "A spider has eight legs."},
        {"question_id": "q2", "question": "How many legs does a spider have?", "model": "off", "answer": "The stock market closed higher today."},
    ]
    answers = tmp_path / "answers.jsonl"
    answers.write_text("".join(json.dumps(r) + "\n" for r in rows))
    reference = tmp_path / "ref.csv"
    reference.write_text("question_id,model,score\nq1,good,2\nq1,off,1\nq2,good,2\nq2,off,1\n")
    out = tmp_path / "rank"
    done = run_cli("pplqa", str(answers), "--methods", "pplqa,gptscore", "--reference", str(reference), "--out", str(out), "--quiet")
    assert done.returncode == 0, done.stderr
    result = json.loads((out / "pplqa.json").read_text())
    with (out / "scores.csv").open() as f:
        scores = list(csv.DictReader(f))
    assert len(scores) == 4 and {"pplqa", "pplqa_rank", "gptscore_rank"} <= scores[0].keys()
    # per question, ranks are 1 and 2, and tau against the reference follows from them
    for method in ("pplqa", "gptscore"):
        taus = []
        for qid in ("q1", "q2"):
            good = next(float(r[f"{method}_rank"]) for r in scores if r["question_id"] == qid and r["model"] == "good")
            taus.append(1.0 if good == 1.0 else -1.0)
        agreement = result["agreement"][f"{method} vs reference"]
        assert agreement["mean_tau"] == pytest.approx(np.mean(taus))
        assert agreement["random_baseline_nonnegative"] > 0
    assert "pplqa vs gptscore" in result["agreement"]
    print("pplqa ranking demo:", {r["question_id"] + "/" + r["model"]: round(float(r["pplqa"]), 2) for r in scores})


def test_a_killed_pplqa_resumes_to_the_uninterrupted_scores(short_mt_bench, tmp_path):
    args = ("pplqa", str(short_mt_bench), "--methods", "pplqa,geval", "--quiet", "--threads", "1")  # 1 question, 6 answers
    whole = run_cli(*args, "--out", str(tmp_path / "whole"))
    assert whole.returncode == 0, whole.stderr
    killed = run_cli(*args, "--out", str(tmp_path / "killed"), env={STOP_AFTER_PASSES_ENV: "5"})
    assert killed.returncode == 130, killed.stderr
    assert pq.read_table(tmp_path / "killed" / "parts").num_rows == 5
    resumed = run_cli(*args, "--out", str(tmp_path / "killed"))
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads((tmp_path / "killed" / "pplqa.json").read_text())["timing"]["passes_run_this_session"] == 6 * 3 - 5
    assert pq.read_table(tmp_path / "killed" / "passes.parquet").equals(pq.read_table(tmp_path / "whole" / "passes.parquet"))
    assert (tmp_path / "killed" / "scores.csv").read_text() == (tmp_path / "whole" / "scores.csv").read_text()
