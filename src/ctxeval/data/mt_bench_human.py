"""MT-Bench human judgments (lmsys/mt_bench_human_judgments, split `human`): the data of the
PPLqa paper's Table 3, row by row as the public release has them.

One row is one expert's vote on one turn of two models' conversations: `question_id`,
`model_a`, `model_b`, `winner` ("model_a", "model_b" or "tie"), `judge`, `turn` (1 or 2),
`conversation_a`/`conversation_b` (lists of `{role, content}` messages: user, assistant, user,
assistant). Every row is an item, as in the paper, so a pair voted on by several judges counts
once per vote (its scores are computed once: passes are keyed by their texts).

The item's question is the user message of the voted turn and its answers are the two
assistant messages of that turn. For turn 2 the first exchange is not part of the question:
the two conversations differ there (each holds its own model's first answer), and an item has
one question for both answers.

Human ties are kept by default as label 0, as the paper keeps them: its accuracy (0.511 for
PPLqa) lies below both per-label recalls (0.672, 0.660), which only a third true class that
no method predicts can do (docs/answer_quality.md works the column out).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from ctxeval.data.pairwise import PairDataset, PairItem, check_ties, read_rows
from ctxeval.errors import UserError

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
