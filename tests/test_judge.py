"""LLM judge: L-Eval's pairwise prompt, both answer orders, verdict parsing and win rate, run
through the CLI against a scripted OpenAI-compatible chat server on 127.0.0.1."""

from __future__ import annotations

import json

import pytest

from ctxeval.errors import EXIT_INCOMPLETE
from ctxeval.results.records import STOP_AFTER_PASSES_ENV
from ctxeval.render.kinds import RENDERING
from ctxeval.judge import SYSTEM_PROMPT, JudgedFiles, leval_question_set, parse_verdict, read_predictions, run_judge, select_questions
from tests.conftest import SHARED_DATA, run_cli
from tests.servers.scripted import ScriptedServer

LEVAL = SHARED_DATA / "leval" / "predictions" / "llm_gpt4_eval"
HUMAN = SHARED_DATA / "leval" / "predictions" / "human_eval"


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
        # a failed request is failed work: the report counts it as an error, the run is incomplete
        assert result.returncode == EXIT_INCOMPLETE and "1 of 8 requests failed" in result.stderr, result.stderr
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


# ---------------------------------------------------------------- question sets


class _AlwaysA:
    """A judge that always prefers assistant A: the judged model wins exactly its model-first
    verdicts (it tests which questions are judged, not a chat model). Loaded by itself."""

    name = "always-a"
    concurrency = 1
    remote = False

    def chat(self, messages: list[dict[str, str]]) -> str:
        return "[[A]]"

    def describe(self) -> dict:
        return {"name": self.name, "backend": "test"}

    def usage(self) -> dict:
        return {}

    def close(self) -> None:
        pass

    def load(self, n_threads: int | None = None) -> _AlwaysA:
        return self

    def per_server(self) -> list[_AlwaysA]:
        return [self]


def test_question_set_follows_the_judge():
    assert leval_question_set("openai:gpt-4") == "gpt4" and leval_question_set("openai:gpt-4-turbo") == "gpt4"
    assert leval_question_set("openai:gpt-3.5-turbo-0613") == "turbo" and leval_question_set("gpt-35-turbo") == "turbo"
    assert leval_question_set("openai:local-judge") == "gpt4"  # L-Eval's default judge


def test_select_questions_by_evaluation():
    rows = [{"evaluation": e, "i": i} for i, e in enumerate(["LLM", "human", "f1", "LLM", "rouge"])] + [{"i": 5}]
    assert [r["i"] for r in select_questions(rows, "gpt4")] == [0, 3, 5]
    assert [r["i"] for r in select_questions(rows, "turbo")] == [0, 1, 3, 5]
    # llm_eval.py keeps only the f1/rouge rows of a file that has some, else every row
    assert [r["i"] for r in select_questions(rows, "file")] == [2, 4, 5]
    assert [r["i"] for r in select_questions(rows[:2], "file")] == [0, 1]


def _concat(paths: list, target):
    target.write_text("".join(p.read_text(encoding="utf-8") for p in paths), encoding="utf-8")
    return target


@pytest.mark.skipif(not HUMAN.exists(), reason="shared L-Eval predictions not present")
def test_gpt35_judge_sees_181_questions_gpt4_judge_96(tmp_path):
    # L-Eval's llm_turbo_eval file of a model = its 96 LLM rows + its 85 human rows
    files = {m: _concat([LEVAL / f"{m}.pred.jsonl", HUMAN / f"{m}.pred.jsonl"], tmp_path / f"{m}.pred.jsonl")
             for m in ("claude-100k", "turbo-16k-0613")}
    _, model_rows = read_predictions(files["claude-100k"])
    _, base_rows = read_predictions(files["turbo-16k-0613"])
    base_keys = {(r["query"], str(r["gt"])) for r in base_rows}
    for judge_name, kinds in (("openai:gpt-3.5-turbo", {"LLM", "human"}), ("openai:gpt-4", {"LLM"})):
        expected = sum(1 for r in model_rows if r["evaluation"] in kinds and (r["query"], str(r["gt"])) in base_keys)
        judge = _AlwaysA()
        report = run_judge(judge, judge_name, JudgedFiles(files["claude-100k"], files["turbo-16k-0613"]), tmp_path / judge_name, render=RENDERING).report
        totals = report["totals"]
        assert report["questions"] == ("turbo" if "3.5" in judge_name else "gpt4")
        assert totals["verdicts"] == 2 * expected and (totals["win"], totals["loss"]) == (expected, expected)
        assert expected == (181 if "3.5" in judge_name else 96)


@pytest.mark.skipif(not HUMAN.exists(), reason="shared L-Eval predictions not present")
def test_judge_cli_question_flag(tmp_path):
    human, base = HUMAN / "claude-100k.pred.jsonl", HUMAN / "turbo-16k-0613.pred.jsonl"
    # the human-evaluation rows are not in the GPT-4 judge's set: one clear error line
    result = run_cli("judge", str(human), str(base), "--judge-model", "openai:gpt-4", "--cache", "none", "--out", str(tmp_path))
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "no row of question set gpt4" in result.stderr
    result = run_cli("judge", str(human), str(base), "--questions", "all", "--out", str(tmp_path))
    assert result.returncode == 2 and "--questions must be one of auto, gpt4, turbo, file" in result.stderr
    server = ScriptedServer({"/v1/chat/completions": [_chat("[[A]]"), _chat("[[A]]")]})
    try:
        result = run_cli("judge", str(human), str(base), "--judge-model", "openai:gpt-3.5-turbo", "--base-url", server.url,
                         "--concurrency", "1", "--cache", "none", "--limit", "1", "--out", str(tmp_path))
        assert result.returncode == 0, result.stderr
        report = json.loads((tmp_path / "judge.json").read_text())
        assert report["questions"] == "turbo" and report["totals"]["verdicts"] == 2
        assert "Questions: turbo (evaluation LLM or human), 1 judged." in (tmp_path / "judge.md").read_text()
    finally:
        server.close()


@pytest.mark.skipif(not LEVAL.exists(), reason="shared L-Eval predictions not present")
def test_judge_resumes_after_a_kill_and_retries_failed_requests(tmp_path):
    args = ("judge", str(LEVAL / "claude-100k.pred.jsonl"), str(LEVAL / "turbo-16k-0613.pred.jsonl"), "--judge-model", "openai:judge",
            "--concurrency", "1", "--cache", "none", "--limit", "3", "--out", str(tmp_path))
    server = ScriptedServer({"/v1/chat/completions": [
        _chat("[[A]]"),  # q1 model=A: win
        {"choices": []},  # q1 model=B: a failed request, not recorded
        _chat("[[C]]"),  # q2 model=A: tie; the second record, then the run is killed
        _chat("[[B]]"),  # second run: q1 model=B retried -> win
        {"choices": []},  # q2 model=B fails
        _chat("[[A]]"), _chat("[[A]]"),  # q3: win, loss
        _chat("[[B]]"),  # third run: q2 model=B retried -> win
    ]})
    sent = lambda: len(server.requests["/v1/chat/completions"])  # noqa: E731
    try:
        killed = run_cli(*args, "--base-url", server.url, env={STOP_AFTER_PASSES_ENV: "2"})
        assert killed.returncode == 130, killed.stderr
        assert sent() == 3
        second = run_cli(*args, "--base-url", server.url)
        assert second.returncode == EXIT_INCOMPLETE, second.stderr
        assert sent() == 7  # the failed request and the 3 never asked; none answered is asked again
        report = json.loads((tmp_path / "judge.json").read_text())
        assert [v["outcome"] for v in report["verdicts"]] == ["win", "win", "tie", "error", "win", "loss"]
        manifest = json.loads((tmp_path / "manifest.json").read_text())
        assert manifest["status"] == "incomplete" and len(manifest["failed_passes"]) == 1
        third = run_cli(*args, "--base-url", server.url)
        assert third.returncode == 0, third.stderr
        assert sent() == 8  # the failed request only
        report = json.loads((tmp_path / "judge.json").read_text())
        assert [v["outcome"] for v in report["verdicts"]] == ["win", "win", "tie", "win", "win", "loss"]
        assert json.loads((tmp_path / "manifest.json").read_text())["status"] == "complete"
        other = run_cli(*args[:-4], "--limit", "2", "--out", str(tmp_path), "--base-url", server.url)
        assert other.returncode == 2 and "different configuration" in other.stderr
    finally:
        server.close()


@pytest.mark.skipif(not LEVAL.exists(), reason="shared L-Eval predictions not present")
def test_judge_requests_dealt_over_two_servers(tmp_path):
    servers = [ScriptedServer({"/v1/chat/completions": [_chat("[[A]]")] * 3}) for _ in range(2)]
    try:
        result = run_cli("judge", str(LEVAL / "claude-100k.pred.jsonl"), str(LEVAL / "turbo-16k-0613.pred.jsonl"), "--judge-model", "openai:judge",
                         "--concurrency", "1", "--cache", "none", "--limit", "3", "--out", str(tmp_path),
                         "--base-url", servers[0].url, "--base-url", servers[1].url)
        assert result.returncode == 0, result.stderr
        assert [len(s.requests["/v1/chat/completions"]) for s in servers] == [3, 3]
        report = json.loads((tmp_path / "judge.json").read_text())
        assert [v["outcome"] for v in report["verdicts"]] == ["win", "loss"] * 3  # the judge always prefers A
        usage = json.loads((tmp_path / "manifest.json").read_text())["api_usage"]["openai:judge"]
        assert usage["requests"] == 6  # both servers counted
    finally:
        for server in servers:
            server.close()
