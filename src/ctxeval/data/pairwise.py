"""Pairwise human-preference datasets: (question, answer 1, answer 2, human label).

Label 1 or 2 names the better answer; 0 is a human tie. Supported layouts:
- LLMBar (`[{input, output_1, output_2, label}]`, label 1|2; its MT-Bench subset has ties removed);
- PandaLM test set (`[{instruction, input, response1, response2, annotator1..3}]`, each
  annotator 1|2|0 with 0 = tie). The label is the majority of the three annotators. An item is a
  tie when the majority says tie (0) or when there is no majority (three different votes).
  Ties are dropped by default (PandaLM's own evaluation is binary);
- MT-Bench human judgments (`load_mt_bench_human`): ties kept by default, as the PPLqa
  paper's Table 3 keeps them.

A kept tie has label 0, which no method predicts except by giving both answers equal scores.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.parquet as pq

from ctxeval.data.location import data_folder
from ctxeval.errors import UserError

TIE_POLICIES = ("drop", "keep")


@dataclass(frozen=True)
class PairItem:
    """One human comparison of two answers to the same question."""

    item_id: str
    question: str
    answer_1: str
    answer_2: str
    label: int  # 1, 2, or 0 for a tie
    meta: dict = field(default_factory=dict)


@dataclass(frozen=True)
class PairDataset:
    name: str
    items: list[PairItem]
    source: str
    ties_dropped: int = 0
    notes: dict = field(default_factory=dict)
    tie_policy: str = "none"  # "drop" or "keep" human ties; "none": the data hold no ties


def check_ties(ties: str) -> str:
    if ties not in TIE_POLICIES:
        raise UserError(f"ties must be one of {', '.join(TIE_POLICIES)}, got {ties!r}")
    return ties


def read_rows(path: Path) -> list[dict]:
    """The rows of a dataset file: a JSON list of objects, JSON lines, or Parquet (a Hugging
    Face split exported with `to_parquet`/`to_json`)."""
    try:
        if path.suffix == ".parquet":
            data = pq.read_table(path).to_pylist()
        elif path.suffix == ".jsonl":
            with path.open(encoding="utf-8") as f:
                data = [json.loads(line) for line in f if line.strip()]
        else:
            data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"dataset file not found: {path}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"{path} is not valid JSON{' lines' if path.suffix == '.jsonl' else ''}: {exc}") from None
    except OSError as exc:  # pyarrow: not a Parquet file
        raise UserError(f"{path} cannot be read as Parquet: {exc}") from None
    if not isinstance(data, list) or not data or not all(isinstance(r, dict) for r in data):
        raise UserError(f"{path}: expected a non-empty list of objects")
    return data


def majority_label(votes: list[int]) -> tuple[int, str]:
    """The majority of annotator votes (1, 2 or 0 = tie) and why: 'majority', 'majority tie',
    or 'no majority' (every vote differs, counted as a tie)."""
    counts = Counter(votes)
    label, n = counts.most_common(1)[0]
    if n * 2 <= len(votes):
        return 0, "no majority"
    return label, "majority tie" if label == 0 else "majority"


def load_llmbar(path: Path) -> PairDataset:
    rows = read_rows(path)
    items = []
    for k, row in enumerate(rows):
        try:
            label = int(row["label"])
            item = PairItem(f"{path.stem}-{k}", str(row["input"]), str(row["output_1"]), str(row["output_2"]), label)
        except (KeyError, TypeError, ValueError):
            raise UserError(f"{path}: item {k} lacks input/output_1/output_2/label") from None
        if label not in (1, 2):
            raise UserError(f"{path}: item {k} has label {row['label']!r}, expected 1 or 2")
        items.append(item)
    return PairDataset(f"llmbar:{path.stem}", items, str(path))


def load_pandalm(path: Path, ties: str = "drop") -> PairDataset:
    check_ties(ties)
    rows = read_rows(path)
    items, dropped, reasons = [], 0, Counter()
    for k, row in enumerate(rows):
        try:
            votes = [int(row[f"annotator{j}"]) for j in (1, 2, 3)]
            instruction, extra = str(row["instruction"]), str(row.get("input") or "")
            answers = str(row["response1"]), str(row["response2"])
        except (KeyError, TypeError, ValueError):
            raise UserError(f"{path}: item {k} lacks instruction/response1/response2/annotator1..3") from None
        if any(v not in (0, 1, 2) for v in votes):
            raise UserError(f"{path}: item {k} has annotator votes {votes}, expected 0, 1 or 2")
        label, reason = majority_label(votes)
        reasons[reason] += 1
        if label == 0 and ties == "drop":
            dropped += 1
            continue
        question = instruction if not extra.strip() else f"{instruction}\n\n{extra}"
        meta = {"votes": votes, "cmp_key": row.get("cmp_key"), "label_reason": reason}
        items.append(PairItem(f"pandalm-{row.get('idx', k)}", question, *answers, label, meta))
    return PairDataset(f"pandalm:{path.stem}", items, str(path), dropped, {"label_reasons": dict(reasons)}, ties)


# MT-Bench human judgments (lmsys/mt_bench_human_judgments, split `human`): the PPLqa paper's Table 3 data.
#
# One row is one expert's vote on one turn of two models' conversations: `question_id`,
# `model_a`, `model_b`, `winner` ("model_a", "model_b" or "tie"), `judge`, `turn` (1 or 2),
# `conversation_a`/`conversation_b` (lists of `{role, content}` messages: user, assistant, user,
# assistant). Every row is an item, as in the paper, so a pair voted on by several judges counts
# once per vote (its scores are computed once: passes are keyed by their texts).
#
# The item's question is the user message of the voted turn and its answers are the two
# assistant messages of that turn. For turn 2 the first exchange is not part of the question:
# the two conversations differ there (each holds its own model's first answer), and an item has
# one question for both answers.
#
# Human ties are kept by default as label 0, as the paper keeps them: its accuracy (0.511 for
# PPLqa) lies below both per-label recalls (0.672, 0.660), which only a third true class that
# no method predicts can do (docs/answer_quality.md works the column out).
MT_BENCH_HUMAN_KEYS = frozenset({"question_id", "model_a", "model_b", "winner", "turn", "conversation_a", "conversation_b"})
WINNER_LABELS = {"model_a": 1, "model_b": 2, "tie": 0}


def turn_messages(conversation: list, turn: int) -> tuple[str, str]:
    """(user message, assistant message) of `turn` (1-based) in a list of {role, content}."""
    users = [m["content"] for m in conversation if m["role"] == "user"]
    assistants = [m["content"] for m in conversation if m["role"] == "assistant"]
    if len(users) < turn or len(assistants) < turn:
        raise ValueError(f"no turn {turn}")
    return str(users[turn - 1]), str(assistants[turn - 1])


def load_mt_bench_human(path: Path, ties: str = "keep") -> PairDataset:
    """Every vote of the file as an item (label 1: model_a's answer better, 2: model_b's, 0: tie);
    `ties="drop"` leaves the tie votes out and counts them."""
    check_ties(ties)
    items, dropped, winners, turns = [], 0, Counter(), Counter()
    for k, row in enumerate(read_rows(path)):
        try:
            turn = int(row["turn"])
            question, answer_1 = turn_messages(row["conversation_a"], turn)
            question_b, answer_2 = turn_messages(row["conversation_b"], turn)
            label = WINNER_LABELS[row["winner"]]
        except (KeyError, TypeError, ValueError):
            raise UserError(f"{path}: row {k} is not an MT-Bench human judgment: it needs turn, winner ({', '.join(WINNER_LABELS)}) "
                            "and conversation_a/_b holding that turn's user and assistant messages") from None
        if question != question_b:
            raise UserError(f"{path}: row {k} asks conversation_a and conversation_b different questions in turn {turn}")
        winners[row["winner"]] += 1
        turns[turn] += 1
        if label == 0 and ties == "drop":
            dropped += 1
            continue
        meta = {key: row.get(key) for key in ("question_id", "model_a", "model_b", "judge", "turn")}
        items.append(PairItem(f"mtbench-human-{k}", question, answer_1, answer_2, label, meta))
    notes = {"winners": dict(winners), "turns": {str(t): n for t, n in sorted(turns.items())}}
    return PairDataset(f"mt-bench-human:{path.stem}", items, str(path), dropped, notes, ties)


def load_dataset(spec: str, ties: str | None = None, data_dir: Path | None = None) -> PairDataset:
    """`llmbar:NAME` or `pandalm` (files of the data folder: `data_dir`, else the one
    CTXEVAL_SHARED_DATA names), or the path of a file in the LLMBar, PandaLM or MT-Bench
    human-judgment layout. `ties` None: the layout's own policy (PandaLM drop, MT-Bench keep)."""
    if ties is not None:
        check_ties(ties)
    if spec.startswith("llmbar:"):
        name = spec.split(":", 1)[1]
        path = (data_dir or data_folder(spec)) / "pairwise_prefs" / "llmbar" / f"{name}.json"
        if not path.is_file():
            known = sorted(p.stem for p in path.parent.glob("*.json")) if path.parent.is_dir() else []
            raise UserError(f"no LLMBar set {name!r} in {path.parent}" + (f": choose from {', '.join(known)}" if known else ""))
        return load_llmbar(path)
    if spec == "pandalm":
        return load_pandalm((data_dir or data_folder(spec)) / "pairwise_prefs" / "pandalm" / "testset-v1.json", ties or "drop")
    path = Path(spec)
    if not path.is_file():
        raise UserError(f"unknown dataset {spec!r}: use llmbar:NAME, pandalm, or the path of a JSON, JSON lines or Parquet file")
    first = read_rows(path)[0]
    if {"input", "output_1", "output_2", "label"} <= first.keys():
        return load_llmbar(path)
    if {"instruction", "response1", "response2", "annotator1"} <= first.keys():
        return load_pandalm(path, ties or "drop")
    if MT_BENCH_HUMAN_KEYS <= first.keys():
        return load_mt_bench_human(path, ties or "keep")
    raise UserError(f"{path}: neither the LLMBar, the PandaLM nor the MT-Bench human-judgment layout (see docs/answer_quality.md)")
