"""LLM judge: L-Eval's pairwise prompt, both answer orders, verdict parsing and win rate, run
through the CLI against a scripted OpenAI-compatible chat server on 127.0.0.1."""

from __future__ import annotations

import json

import pytest

from ctxeval.judge import SYSTEM_PROMPT, parse_verdict, read_predictions
from tests.conftest import SHARED_DATA, run_cli
from tests.servers.scripted import ScriptedServer

LEVAL = SHARED_DATA / "leval" / "predictions" / "llm_gpt4_eval"


def _chat(text: str) -> dict:
    return {"choices": [{"message": {"role": "assistant", "content": text}}], "usage": {"prompt_tokens": 100, "completion_tokens": 5}}


def test_parse_verdict_follows_leval_order():
    assert parse_verdict("reasoning... [[A]]") == "A"
    assert parse_verdict("[[B]]") == "B" and parse_verdict("[[C]]") == "tie"
    assert parse_verdict("[[B]] but first [[A]]") == "A"  # L-Eval checks [[A]] first
    assert parse_verdict("Assistant A is better.") == "error" and parse_verdict("[A]") == "error"


def test_prompt_keeps_the_reference_rule():
    assert "Additional details or information that are not mentioned in reference answer cannot be considered as advantages" in SYSTEM_PROMPT


@pytest.mark.skipif(not LEVAL.exists(), reason="shared L-Eval predictions not present")
def test_judge_cli_exact_win_rate(tmp_path):
    model, rows = read_predictions(LEVAL / "claude-100k.pred.jsonl")
    assert model == "claude-100k" and len(rows) == 96
    # one request at a time, so verdicts arrive in order: q1 (model as A, then as B), q2, ...
    server = ScriptedServer({"/v1/chat/completions": [
        _chat("Assistant A matches the reference. [[A]]"),  # q1 model=A -> win
        _chat("[[A]]"),  # q1 model=B -> loss
        _chat("Equally good. [[C]]"),  # q2 -> tie
        _chat("Assistant B is better. [[B]]"),  # q2 model=B -> win
        _chat("I cannot decide."),  # q3 -> parse failure
        b'{"choices": [ {"message": ',  # q3: malformed JSON -> retried ...
        _chat("[[B]]"),  # ... and answered: model=B -> win
        {"choices": []},  # q4 model=A: no message -> request error
        _chat("[[C]]"),  # q4 -> tie
    ]})
    try:
        result = run_cli("judge", str(LEVAL / "claude-100k.pred.jsonl"), str(LEVAL / "turbo-16k-0613.pred.jsonl"),
                         "--judge-model", "openai:judge", "--base-url", server.url, "--concurrency", "1", "--cache", "none",
                         "--limit", "4", "--out", str(tmp_path))
        assert result.returncode == 0, result.stderr
        report = json.loads((tmp_path / "judge.json").read_text())
        totals = report["totals"]
        assert (totals["win"], totals["loss"], totals["tie"], totals["error"]) == (3, 1, 2, 2)
        assert totals["win_rate"] == pytest.approx((3 + 0.5 * 2) / 6)
        assert [v["outcome"] for v in report["verdicts"]] == ["win", "loss", "tie", "win", "error", "win", "error", "tie"]
        assert report["model"] == "claude-100k" and report["base"] == "turbo-16k-0613"
        # both orders were asked: the answers swap places between the two requests of a question
        first, second = server.requests["/v1/chat/completions"][:2]
        assert "[The Start of Assistant A's Answer]\nCara is being followed" in first["messages"][1]["content"]
        assert "[The Start of Assistant B's Answer]\nCara is being followed" in second["messages"][1]["content"]
        assert first["temperature"] == 0
        assert "| both orders | 8 | 3 | 1 | 2 | 2 | 0.6667 |" in (tmp_path / "judge.md").read_text()
    finally:
        server.close()
