"""`ctxeval leval` on the shared L-Eval prediction files: published numbers, independent
implementations of the definitions, length instructions, the CLI end to end, and the
correlation with a human ranking."""

from __future__ import annotations

import json
import math
import re
import string
from collections import Counter
from pathlib import Path

import pytest
from scipy import stats

from ctxeval.leval.corr import correlate
from ctxeval.leval.files import model_and_task, read_predictions, read_task
from ctxeval.leval.length import LENGTH_STYLES, leval_prompt, length_difference, length_instruction
from ctxeval.errors import UserError
from ctxeval.leval.score import score_file, score_predictions
from ctxeval.metrics import ngram
from tests.conftest import SHARED_DATA, run_cli

PRED = SHARED_DATA / "leval" / "predictions"
pytestmark = pytest.mark.skipif(not PRED.is_dir(), reason="shared L-Eval data not present")


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _truncate2(value: float) -> float:
    """L-Eval's published tables show scores cut (not rounded) to two decimals."""
    return math.floor(value * 100) / 100


# ---------------------------------------------------------------- published numbers


@pytest.mark.parametrize(
    "task,published",
    # L-Eval README (update of 2024-4-25), row "GPT4-32k (2023)": TOEFL, QuALITY, Coursera, GSM, CodeU
    [("tpo", 84.38), ("quality", 82.17), ("coursera", 75.58), ("gsm100", 96.00), ("codeU", 25.55)],
)
def test_exam_scores_reproduce_published_gpt4(task, published):
    score = score_file(read_predictions(PRED / "exam_eval" / "gpt4-32k" / f"{task}.pred.jsonl"))
    assert _truncate2(score.metrics["exact_match"]) == pytest.approx(published)


@pytest.mark.parametrize(
    "task,metric,published,delta_published",
    # L-Eval paper Table 2, row "Llama2-13b-chat + Length Instruction": SPACE R-L, QMSum R-L, NQ F-1
    [("review_summ", "rougeL", 19.23, -7), ("meeting_summ", "rougeL", 19.65, None), ("natural_question", "f1", 35.43, 6)],
)
def test_ngram_scores_reproduce_paper_table2(task, metric, published, delta_published):
    score = score_file(read_predictions(PRED / "ngram_eval" / "llama2-13b-chat-4k" / f"{task}.pred.jsonl"))
    assert _truncate2(score.metrics[metric]) == pytest.approx(published)
    if delta_published is not None:  # the paper's ΔL for QMSum (-1) is not reproduced by this file (-4.26)
        assert round(score.delta_len) == delta_published


# ---------------------------------------------------------------- independent implementations


def _plain_f1(prediction: str, reference: str) -> float:
    def tokens(text):
        text = text.lower()
        text = re.sub("[" + re.escape(string.punctuation) + "]", "", text)
        text = re.sub(r"\b(a|an|the)\b", " ", text)
        return text.split()

    p, r = tokens(prediction), tokens(reference)
    common = sum((Counter(p) & Counter(r)).values())
    return 0.0 if common == 0 else 2 * common / (len(p) + len(r))


def _f_measure(overlap: int, n_pred: int, n_ref: int) -> float:
    return 0.0 if overlap == 0 else 2 * overlap / (n_pred + n_ref)


def _plain_rouge(prediction: str, reference: str) -> dict[str, float]:
    p = re.findall(r"[a-z0-9]+", prediction.lower())
    r = re.findall(r"[a-z0-9]+", reference.lower())
    out = {}
    for n in (1, 2):
        gp = Counter(tuple(p[i : i + n]) for i in range(len(p) - n + 1))
        gr = Counter(tuple(r[i : i + n]) for i in range(len(r) - n + 1))
        out[f"rouge{n}"] = _f_measure(sum((gp & gr).values()), sum(gp.values()), sum(gr.values()))
    prev = [0] * (len(r) + 1)
    for a in p:
        cur = [0]
        for j, b in enumerate(r):
            cur.append(prev[j] + 1 if a == b else max(prev[j + 1], cur[j]))
        prev = cur
    out["rougeL"] = _f_measure(prev[-1], len(p), len(r))
    return out


@pytest.mark.parametrize("model", ["turbo-16k-0613", "llama2-13b-chat-4k"])
def test_f1_task_equals_plain_implementation(model):
    path = PRED / "ngram_eval" / model / "natural_question.pred.jsonl"
    pf = read_predictions(path)
    rows = _rows(path)
    expected = 100 * sum(_plain_f1(r[pf.pred_key], r["gt"]) for r in rows) / len(rows)
    expected_delta = sum(len(r[pf.pred_key].split()) - len(r["gt"].split()) for r in rows) / len(rows)
    score = score_file(pf)
    assert score.n == len(rows) and score.non_latin == 0  # all-English rows: L-Eval's plain rules apply
    assert score.metrics["f1"] == pytest.approx(expected, abs=1e-9)
    assert score.delta_len == pytest.approx(expected_delta, abs=1e-12)


@pytest.mark.parametrize("task,non_latin", [("scientific_qa", 6), ("natural_question", 1)])
def test_f1_with_chinese_rows_equals_leval_f1(task, non_latin):
    # vicuna answered some English questions in Chinese (and one in Arabic): L-Eval's f1.py scores
    # them by whitespace words, and so does the default; --tokenize unicode changes only those rows
    path = PRED / "ngram_eval" / "vicuna-13b-16k" / f"{task}.pred.jsonl"
    pf = read_predictions(path)
    rows = _rows(path)
    expected = 100 * sum(_plain_f1(r[pf.pred_key], r["gt"]) for r in rows) / len(rows)
    expected_delta = sum(len(r[pf.pred_key].split()) - len(r["gt"].split()) for r in rows) / len(rows)
    plain = score_file(pf)
    assert plain.non_latin == non_latin
    assert plain.metrics["f1"] == pytest.approx(expected, abs=1e-9)
    assert plain.delta_len == pytest.approx(expected_delta, abs=1e-12)
    unicode = score_file(pf, tokenize="unicode")
    assert unicode.non_latin == non_latin and unicode.metrics["f1"] >= plain.metrics["f1"]

    def row(r, tokenize):
        return ngram.f1(r.output, r.references[0], tokenize=tokenize), length_difference(r.output, r.references, tokenize)

    changed = [r for r in pf.rows if row(r, "unicode") != row(r, "plain")]
    assert changed and all(ngram.row_script(r.output, *r.references) != "latin" for r in changed)


def test_rouge_task_equals_plain_implementation():
    path = PRED / "ngram_eval" / "llama2-13b-chat-4k" / "tv_show_summ.pred.jsonl"
    pf = read_predictions(path)
    rows = _rows(path)
    per_row = [_plain_rouge(r[pf.pred_key], r["gt"]) for r in rows]
    score = score_file(pf)
    for key in ("rouge1", "rouge2", "rougeL"):
        assert score.metrics[key] == pytest.approx(100 * sum(s[key] for s in per_row) / len(rows), abs=1e-9)


def test_single_choice_exam_equals_plain_implementation():
    path = PRED / "exam_eval" / "turbo-16k-0613" / "quality.pred.jsonl"
    pf = read_predictions(path)
    rows = _rows(path)

    def letter(output: str) -> str:  # single-answer rule: the first capital A-D, else guess "A"
        if not output.strip():
            return "None"
        return next((ch for ch in output if ch in "ABCD"), "A")

    hits = sum(letter(r[pf.pred_key]) == re.sub("[^A-D]", "", r["gt"].split()[0]) for r in rows)
    assert score_file(pf).metrics["exact_match"] == pytest.approx(100 * hits / len(rows))


# ---------------------------------------------------------------- length instructions


def test_length_instruction_reproduces_prompts_of_the_shared_files():
    styles_seen = set()
    for model in ("llama2-13b-chat-4k", "vicuna-13b-16k", "xgen-7b-8k-inst"):
        for task in ("natural_question", "meeting_summ", "review_summ"):
            for r in _rows(PRED / "ngram_eval" / model / f"{task}.pred.jsonl"):
                # one of L-Eval's two wordings, with N = words of this row's reference
                found = [style for style in LENGTH_STYLES if length_instruction(r["gt"], style) in r["prompt"]]
                assert len(found) == 1, (model, task, r["prompt"][-120:])
                styles_seen.update(found)
    assert styles_seen == {"suggested", "answer-with"}  # the scripts' wordings; "paper" is the paper's own


def test_task_file_items_and_prompts_match_the_prediction_files():
    items = read_task(SHARED_DATA / "leval" / "data" / "natural_question.jsonl")
    assert len(items) == 109
    f1_items = [i for i in items if i.evaluation == "f1"]
    rows = _rows(PRED / "ngram_eval" / "vicuna-13b-16k" / "natural_question.pred.jsonl")
    assert [(i.instruction, i.reference) for i in f1_items] == [(r["query"], r["gt"]) for r in rows]
    prompt = leval_prompt(f1_items[0].document, f1_items[0].instruction, f1_items[0].reference)
    assert prompt.endswith(f"Instruction: {f1_items[0].instruction} The suggested output length is around 4 words. Output: ")
    assert f1_items[0].document[:200] in prompt


def test_layout_names():
    assert model_and_task(PRED / "ngram_eval" / "gpt4-32k" / "quality.pred.jsonl") == ("gpt4-32k", "quality")
    assert model_and_task(PRED / "human_eval" / "claude-100k.pred.jsonl") == ("claude-100k", "human_eval")
    assert model_and_task(Path("/x/my-model/my_task.pred.jsonl")) == ("my-model", "my_task")
    # the model is named by the folder even when the field is named otherwise (gpt4-x_pred)
    pf = read_predictions(PRED / "exam_eval" / "gpt4-32k" / "gsm100.pred.jsonl")
    assert (pf.model, pf.pred_key) == ("gpt4-32k", "gpt4-x_pred")


# ---------------------------------------------------------------- CLI end to end


def _slice(root: Path, source: Path, target: Path, rows: int) -> None:
    target = root / target
    target.parent.mkdir(parents=True, exist_ok=True)
    lines = source.read_text(encoding="utf-8").splitlines()[:rows]
    target.write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.fixture(scope="module")
def small_slice(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("leval_slice")
    for model in ("turbo-16k-0613", "llama2-13b-chat-4k", "vicuna-13b-16k"):
        for task in ("natural_question", "meeting_summ"):
            _slice(root, PRED / "ngram_eval" / model / f"{task}.pred.jsonl", Path(model) / f"{task}.pred.jsonl", 12)
    _slice(root, PRED / "exam_eval" / "turbo-16k-0613" / "quality.pred.jsonl", Path("turbo-16k-0613/quality.pred.jsonl"), 12)
    _slice(root, PRED / "human_eval" / "claude-100k.pred.jsonl", Path("human_eval/claude-100k.pred.jsonl"), 6)
    return root


def test_cli_scores_json_shape(small_slice, tmp_path):
    out = tmp_path / "out"
    result = run_cli("leval", "--predictions", str(small_slice), "--out", str(out), "--quiet")
    assert result.returncode == 0, result.stderr
    scores = json.loads((out / "scores.json").read_text())
    assert set(scores) == {"turbo-16k-0613", "llama2-13b-chat-4k", "vicuna-13b-16k", "claude-100k"}
    assert set(scores["turbo-16k-0613"]) == {"natural_question", "meeting_summ", "quality"}
    assert set(scores["turbo-16k-0613"]["natural_question"]) == {"n", "f1", "delta_len"}
    assert set(scores["turbo-16k-0613"]["meeting_summ"]) == {"n", "rouge1", "rouge2", "rougeL", "delta_len"}
    assert set(scores["turbo-16k-0613"]["quality"]) == {"n", "exact_match"}
    assert set(scores["claude-100k"]) == {"human_eval"}
    assert set(scores["claude-100k"]["human_eval"]) == {"n", "f1", "rouge1", "rouge2", "rougeL", "delta_len"}
    assert scores["turbo-16k-0613"]["natural_question"]["n"] == 12
    assert scores["claude-100k"]["human_eval"]["n"] == 6
    # values equal the library's on the same file
    nq = score_file(read_predictions(small_slice / "llama2-13b-chat-4k" / "natural_question.pred.jsonl"))
    assert scores["llama2-13b-chat-4k"]["natural_question"] == {"n": 12, "f1": nq.metrics["f1"], "delta_len": nq.delta_len}
    assert "| turbo-16k-0613 | quality | 12 |" in (out / "scores.md").read_text()


@pytest.mark.parametrize(
    "content,message",
    [
        ('{"gt": "x", "evaluation": "f1", "query": "q"}\n', "no '<model>_pred' field"),
        ('{"gt": "x", "m_pred": "y", "evaluation": "f1"}\n{"gt": "x", "m_pred": "y", "evaluation": "rouge"}\n', "mixes evaluation kinds"),
        ('{"gt": "x", "m_pred": "y", "evaluation": "bleu"}\n', "unknown evaluation kind"),
        ('{"m_pred": "y", "evaluation": "f1"}\n', "no 'gt'"),
    ],
)
def test_bad_prediction_files_are_user_errors(tmp_path, content, message):
    bad = tmp_path / "m" / "task.pred.jsonl"
    bad.parent.mkdir()
    bad.write_text(content)
    with pytest.raises(UserError, match=re.escape(message)):
        score_predictions(bad, progress=False)


def test_cli_tokenize_option(tmp_path):
    source = _rows(PRED / "ngram_eval" / "vicuna-13b-16k" / "scientific_qa.pred.jsonl")
    folder = tmp_path / "vicuna-13b-16k"
    folder.mkdir()
    (folder / "scientific_qa.pred.jsonl").write_text("".join(json.dumps(r) + "\n" for r in source[100:125]), encoding="utf-8")
    pf = read_predictions(folder / "scientific_qa.pred.jsonl")
    for tokenize in ("plain", "unicode"):
        out = tmp_path / tokenize
        result = run_cli("leval", "--predictions", str(tmp_path / "vicuna-13b-16k"), "--out", str(out), "--quiet", "--tokenize", tokenize)
        assert result.returncode == 0, result.stderr
        scores = json.loads((out / "scores.json").read_text())["vicuna-13b-16k"]["scientific_qa"]
        expected = score_file(pf, tokenize=tokenize)
        assert (scores["f1"], scores["delta_len"]) == (expected.metrics["f1"], expected.delta_len)
        assert "4 of 25 rows are mainly in a non-Latin script" in result.stderr
        assert f"tokenize: {tokenize}" in (out / "scores.md").read_text()
    result = run_cli("leval", "--predictions", str(tmp_path / "vicuna-13b-16k"), "--out", str(tmp_path / "x"), "--quiet", "--tokenize", "cjk")
    assert result.returncode == 2 and result.stderr.strip() == "ctxeval: error: unknown tokenize 'cjk'; choose one of plain, unicode"


def test_cli_bad_input_is_one_line_exit_2(tmp_path):
    bad = tmp_path / "m" / "task.pred.jsonl"
    bad.parent.mkdir()
    bad.write_text('{"gt": "x", "m_pred": "y", "evaluation": "f1"}\n{not json\n')
    cases = ((bad, "task.pred.jsonl:2: not valid JSON"), (tmp_path / "nope", "no such file or directory"))
    for path, message in cases:
        result = run_cli("leval", "--predictions", str(path), "--out", str(tmp_path / "out"), "--quiet")
        assert result.returncode == 2
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("ctxeval: error:") and message in lines[0], result.stderr


# ---------------------------------------------------------------- correlation with humans


def test_kendall_tau_hand_computed(tmp_path):
    human = {"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0}
    table = tmp_path / "metrics.json"
    table.write_text(json.dumps({"a": {"m": 1}, "b": {"m": 2}, "c": {"m": 4}, "d": {"m": 3}}))
    (result,) = correlate(human, [f"judge={table}"])
    # 6 pairs, one discordant (c, d): tau = (5 - 1) / 6
    assert result.metric == "judge:m"
    assert result.tau == pytest.approx(2 / 3)
    assert result.models == ("a", "b", "c", "d")


def test_cli_corr_equals_scipy_on_model_averages(small_slice, tmp_path):
    out = tmp_path / "scores"
    assert run_cli("leval", "--predictions", str(small_slice), "--out", str(out), "--quiet").returncode == 0
    human = tmp_path / "human.csv"
    human.write_text("model,human\nturbo-16k-0613,4.1\nllama2-13b-chat-4k,3.0\nvicuna-13b-16k,3.5\n")
    result = run_cli("leval-corr", f"lie={out}", "--human", str(human), "--out", str(tmp_path / "corr"))
    assert result.returncode == 0, result.stderr
    corr = {c["metric"]: c for c in json.loads((tmp_path / "corr" / "corr.json").read_text())["correlations"]}
    scores = json.loads((out / "scores.json").read_text())
    models = ["llama2-13b-chat-4k", "turbo-16k-0613", "vicuna-13b-16k"]
    # F1 exists only for natural_question, ROUGE-L only for meeting_summ (tasks all three share)
    for metric, task in (("f1", "natural_question"), ("rougeL", "meeting_summ")):
        expected = stats.kendalltau([scores[m][task][metric] for m in models], [4.1 if m.startswith("turbo") else 3.0 if m.startswith("llama") else 3.5 for m in models])
        assert corr[f"lie:{metric}"]["tau"] == pytest.approx(expected.statistic)
        assert corr[f"lie:{metric}"]["models"] == models and corr[f"lie:{metric}"]["tasks"] == 1
    assert "lie:exact_match" not in corr  # only one human-rated model has exam scores
