"""MT-Bench questions and pre-generated answers (turn 1), and the human pairwise votes of
LLMBar's MT-Bench subset mapped back onto them, for multi-answer ranking.

The shared data holds no per-question human *ranking* of the six models. The only human
judgements are LLMBar's 200 pairwise votes (majority of MT-Bench human judgments, ties
removed); an answer of such a vote is attributed to a model when its text equals that model's
pre-generated answer exactly. The reference score of a model on a question is its net wins
(wins − losses) in those votes: a sparse, partial ranking over the models that were compared.
"""

from __future__ import annotations

import csv
import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from ctxeval.data.location import data_folder
from ctxeval.data.pairwise import load_llmbar
from ctxeval.errors import UserError

MT_BENCH_MODELS = ("alpaca-13b", "claude-v1", "gpt-3.5-turbo", "gpt-4", "llama-13b", "vicuna-13b-v1.3")


@dataclass(frozen=True)
class RankingQuestion:
    """One question and the answers of several models to rank."""

    question_id: str
    question: str
    answers: dict[str, str]  # model -> answer


def _jsonl(path: Path) -> list[dict]:
    try:
        with path.open(encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        raise UserError(f"file not found: {path}") from None
    except json.JSONDecodeError as exc:
        raise UserError(f"{path} is not valid JSON lines: {exc}") from None


def load_mt_bench(directory: Path | None = None, models: tuple[str, ...] = MT_BENCH_MODELS) -> list[RankingQuestion]:
    """Turn-1 questions with every listed model's turn-1 answer, in question order (`directory`:
    the MT-Bench folder, default `mt_bench` in the data folder of data/location.py)."""
    root = directory or data_folder("mt-bench") / "mt_bench"
    questions = {str(q["question_id"]): q["turns"][0] for q in _jsonl(root / "question.jsonl")}
    answers: dict[str, dict[str, str]] = defaultdict(dict)
    for model in models:
        for row in _jsonl(root / "model_answer" / f"{model}.jsonl"):
            answers[str(row["question_id"])][model] = row["choices"][0]["turns"][0]
    return [RankingQuestion(qid, text, {m: answers[qid][m] for m in models if m in answers[qid]}) for qid, text in questions.items() if answers[qid]]


def load_answer_file(path: Path) -> list[RankingQuestion]:
    """JSONL rows `{question_id, question, model, answer}` grouped by question."""
    grouped: dict[str, RankingQuestion] = {}
    for k, row in enumerate(_jsonl(path)):
        try:
            qid, question, model, answer = str(row["question_id"]), str(row["question"]), str(row["model"]), str(row["answer"])
        except KeyError:
            raise UserError(f"{path}: line {k + 1} needs question_id, question, model and answer") from None
        entry = grouped.setdefault(qid, RankingQuestion(qid, question, {}))
        if entry.question != question:
            raise UserError(f"{path}: question {qid} appears with two different texts")
        entry.answers[model] = answer
    return list(grouped.values())


def human_net_wins(questions: list[RankingQuestion], llmbar_path: Path | None = None) -> tuple[dict[str, dict[str, float]], dict]:
    """Per question, net human wins of each model whose answer appears in an LLMBar MT-Bench vote."""
    path = llmbar_path or data_folder("the human votes of mt-bench") / "pairwise_prefs" / "llmbar" / "MT-Bench.json"
    by_text = {q.question.strip(): q for q in questions}
    scores: dict[str, dict[str, float]] = defaultdict(dict)
    matched = unmatched = 0
    for item in load_llmbar(path).items:
        q = by_text.get(item.question.strip())
        owner = {text: model for model, text in q.answers.items()} if q else {}
        m1, m2 = owner.get(item.answer_1), owner.get(item.answer_2)
        if q is None or m1 is None or m2 is None:
            unmatched += 1
            continue
        matched += 1
        winner, loser = (m1, m2) if item.label == 1 else (m2, m1)
        for model, delta in ((winner, 1.0), (loser, -1.0)):
            scores[q.question_id][model] = scores[q.question_id].get(model, 0.0) + delta
    return dict(scores), {"votes_matched": matched, "votes_unmatched": unmatched, "source": str(path)}


def read_reference(path: Path) -> dict[str, dict[str, float]]:
    """Reference scores per question and model from a CSV `question_id,model,score` (higher = better)."""
    try:
        with path.open(newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
        table: dict[str, dict[str, float]] = {}
        for row in rows:
            table.setdefault(str(row["question_id"]), {})[row["model"]] = float(row["score"])
    except FileNotFoundError:
        raise UserError(f"reference file not found: {path}") from None
    except (KeyError, ValueError, TypeError):
        raise UserError(f"{path}: expected a CSV with columns question_id, model, score (a number)") from None
    return table
