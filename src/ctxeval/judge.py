"""Pairwise LLM judge of long-document answers, as in L-Eval (An et al., 2023).

Each question is judged twice, once with the model's answer as assistant A and once as B, so
position bias cancels; the judge sees the question, the human reference answer and the two
answers (not the long document) and ends with "[[A]]", "[[B]]" or "[[C]]" (tie). Verdicts are
parsed as L-Eval does ("[[A]]" checked first, then "[[B]]", then "[[C]]"); anything else is a
parse failure, counted and reported, never guessed. Requests that fail after retries are
errors too. Win rate = (wins + ½ ties) / (verdicts that are not errors).

Judge requests are a generation pass kind: they run through the same executors as scoring (a
local thread pool of `--concurrency` requests, or Ray actors, over one or several servers), and
each answered request is a record (`verdicts.parquet`, written in atomic parts) so an
interrupted judge resumes without asking again; requests that failed are retried by a re-run.

Which questions are judged follows L-Eval's two judges (`Baselines/LEval_config.py` builds the
judges' prediction files from each row's ``evaluation``): GPT-4 sees the 96-question subset
(``LLM`` rows), GPT-3.5 the 181 questions of both subsets (``LLM`` and ``human`` rows).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Protocol

import pyarrow as pa
import pyarrow.parquet as pq

from ctxeval.backends.model_files import file_sha256
from ctxeval.config import config_id
from ctxeval.errors import FieldError, ScoringFailed, UserError
from ctxeval.pipeline.engine import Plan, Rendering, RunSpec, Step, run
from ctxeval.pipeline.executors import ExecutorOptions, Loadable, Work
from ctxeval.pipeline.executors.work import one_per_unit
from ctxeval.results.manifest import Manifest
from ctxeval.results.records import RecordKind, append_row
from ctxeval.results.judge import QUESTION_SETS, JudgeResult, describe_questions

# L-Eval's "pair-v2" judge prompt (Evaluation/llm_eval.py), used for its GPT-4 judged tasks
SYSTEM_PROMPT = (
    "Please act as an impartial judge and evaluate the quality of the responses provided by two AI assistants "
    "to the user question about the content of a long document.  You will be given a reference answer written "
    "by human, assistant A's answer, and assistant B's answer. Your job is to evaluate which assistant's answer "
    "is better. Begin your evaluation by comparing both assistants' answers with the reference answer. "
    "Additional details or information that are not mentioned in reference answer cannot be considered as "
    "advantages and do not let them sway your judgment. Your evaluation should also consider the relevance to "
    "user's question but it is more important to avoid factual errors according to the reference answer. Avoid "
    "any position biases and ensure that the order in which the responses were presented does not influence "
    "your decision. Do not allow the length of the responses to influence your evaluation. Do not favor certain "
    "names of the assistants. Be as objective as possible. After providing your explanation, output your final "
    'verdict by strictly following this format: "[[A]]" if assistant A is better, "[[B]]" if assistant B is '
    'better, and "[[C]]" for a tie.'
)
USER_TEMPLATE = (
    "[User Question]\n{question}\n\n[The Start of Reference Answer]\n{ref_answer}\n[The End of Reference Answer]\n\n"
    "[The Start of Assistant A's Answer]\n{answer_a}\n[The End of Assistant A's Answer]\n\n"
    "[The Start of Assistant B's Answer]\n{answer_b}\n[The End of Assistant B's Answer]"
)


VERDICTS = RecordKind("verdicts.parquet", "job_index", ("job_index",))
VERDICT_SCHEMA = pa.schema([("job_index", pa.int32()), ("query", pa.string()), ("order", pa.string()), ("outcome", pa.string()), ("raw", pa.string())])
ORDERS = ("model_first", "base_first")
JudgeJob = tuple[int, "Pair", str]  # (request index, the pair, the answer order)


class ChatGenerator(Protocol):
    """A chat model an executor can run: messages in, text out (raises ScoringFailed on failure)."""

    @property
    def name(self) -> str: ...

    concurrency: int
    remote: bool

    def chat(self, messages: list[dict[str, str]]) -> str: ...

    def describe(self) -> dict: ...

    def usage(self) -> dict: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class Pair:
    """One question with the judged model's answer and the baseline's answer."""

    query: str
    reference: str
    model_answer: str
    base_answer: str


@dataclass
class Verdict:
    query: str
    order: str  # "model_first" (model = A) or "base_first" (model = B)
    outcome: str  # "win", "loss", "tie" (for the judged model) or "error"
    raw: str  # the judge's text, or the request error


def parse_verdict(judgment: str) -> str:
    """'A', 'B', 'tie' or 'error', checked in L-Eval's order."""
    if "[[A]]" in judgment:
        return "A"
    if "[[B]]" in judgment:
        return "B"
    if "[[C]]" in judgment:
        return "tie"
    return "error"


@dataclass(frozen=True)
class JudgeTask:
    """Asks a worker's chat model each request: its text, or the request's failure."""

    def __call__(self, model: ChatGenerator, items: list[list[dict[str, str]]]) -> list[object]:
        out: list[object] = []
        for messages in items:
            try:
                out.append(model.chat(messages))
            except ScoringFailed as exc:
                out.append(exc)
        return out


def judge_messages(pair: Pair, order: str) -> list[dict[str, str]]:
    """L-Eval's pair-v2 request with the judged model's answer as A (`model_first`) or B."""
    a, b = (pair.model_answer, pair.base_answer) if order == "model_first" else (pair.base_answer, pair.model_answer)
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": USER_TEMPLATE.format(question=pair.query, ref_answer=pair.reference, answer_a=a, answer_b=b)},
    ]


def outcome(judgment: str, order: str) -> str:
    """The judged model's result in one verdict: win, loss, tie, or error (no verdict found)."""
    winner = parse_verdict(judgment)
    model_letter = "A" if order == "model_first" else "B"
    return "error" if winner == "error" else "tie" if winner == "tie" else "win" if winner == model_letter else "loss"


class JudgeRun:
    """Both answer orders of every pair as a task of the engine. Answered requests are records
    (a re-run asks only the rest); failed ones are error verdicts in the report, listed in the
    manifest and not recorded, so a re-run retries them. `finish` returns what `result` makes of
    the verdicts, in request order (the engine writes it)."""

    records = VERDICTS
    schema = VERDICT_SCHEMA
    unit = "requests"
    finish_incomplete = True  # the report counts failed requests as errors

    def __init__(self, load_spec: Loadable, pairs: Sequence[Pair], result: Callable[[list[Verdict]], JudgeResult]) -> None:
        self.load_spec = load_spec
        self.jobs = [(2 * i + k, pair, order) for i, pair in enumerate(pairs) for k, order in enumerate(ORDERS)]
        self.result = result

    def load_specs(self) -> list[Loadable]:
        return [self.load_spec]

    def plan(self, models: list[ChatGenerator], done: set) -> Plan:
        pending = [j for j in self.jobs if j[0] not in done]
        work = Work(JudgeTask(), one_per_unit(pending), lambda job: judge_messages(job[1], job[2]), lambda job: len(job[1].model_answer) + len(job[1].base_answer))
        manifest = {"plan": {"requests": len(self.jobs), "record_kind": "judge verdict", "records": VERDICTS.file}}
        return Plan([work], manifest, units=len(self.jobs), noun="requests", total=len(self.jobs), already=len(self.jobs) - len(pending))

    def record(self, model: ChatGenerator, job: JudgeJob, result: object, columns: dict[str, list]) -> dict | None:
        index, pair, order = job
        if isinstance(result, ScoringFailed):
            return {"job_index": index, "query": pair.query, "order": order, "error": str(result)}
        append_row(columns, {"job_index": index, "query": pair.query, "order": order, "outcome": outcome(result, order), "raw": result})
        return None

    def progress(self, model: ChatGenerator, job: JudgeJob) -> Step:
        return Step(1, f"{model.name} · {job[2]}")

    def model_done(self, run_dir: Path, model: ChatGenerator) -> None:
        """Nothing to keep from the loaded model."""

    def finish(self, run_dir: Path, manifest: Manifest) -> JudgeResult:
        recorded = {r["job_index"]: Verdict(r["query"], r["order"], r["outcome"], r["raw"]) for r in pq.read_table(run_dir / VERDICTS.file).to_pylist()}
        failed = {f["job_index"]: Verdict(f["query"], f["order"], "error", f"request failed: {f['error']}") for f in manifest.failed_passes or []}
        return self.result([recorded[i] if i in recorded else failed[i] for i, _, _ in self.jobs])


def win_rate(verdicts: Sequence[Verdict]) -> dict[str, float | int]:
    """Counts and (wins + ties / 2) / non-error verdicts (NaN when every verdict is an error)."""
    counts = {k: sum(v.outcome == k for v in verdicts) for k in ("win", "loss", "tie", "error")}
    valid = counts["win"] + counts["loss"] + counts["tie"]
    rate = (counts["win"] + 0.5 * counts["tie"]) / valid if valid else float("nan")
    return counts | {"verdicts": len(verdicts), "valid": valid, "win_rate": rate}


def read_predictions(path: Path) -> tuple[str, list[dict]]:
    """An L-Eval `*.pred.jsonl`: rows with `query`, `gt`, `<model>_pred`; returns the model name and rows."""
    try:
        rows = [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
    except (OSError, json.JSONDecodeError) as exc:
        raise UserError(f"cannot read predictions {path}: {exc}") from None
    keys = [k for k in (rows[0] if rows else {}) if k.endswith("_pred")]
    if not keys or any(k not in r or "query" not in r or "gt" not in r for r in rows for k in keys[:1]):
        raise UserError(f"{path} is not an L-Eval prediction file (rows need query, gt and <model>_pred)")
    return keys[0][: -len("_pred")], rows


# Rows each question set keeps, by `evaluation` (None: every row). L-Eval's llm_gpt4_eval files
# hold the LLM rows, its llm_turbo_eval files the LLM and human rows; `file` is what
# Evaluation/llm_eval.py reads from any file: every row, or only the f1/rouge rows if it has some.
QUESTION_CHOICES = ("auto", *QUESTION_SETS)
_NGRAM_KINDS = ("f1", "rouge")


def leval_question_set(judge_name: str) -> str:
    """The set L-Eval judges with this model: `turbo` (181) for GPT-3.5, else `gpt4` (96) — GPT-4
    is L-Eval's default judge and the one its tables report, so other judges follow it."""
    return "turbo" if re.search(r"gpt-?3\.?5", judge_name.lower()) else "gpt4"


def select_questions(rows: list[dict], questions: str) -> list[dict]:
    """The rows of one prediction file that the question set judges. Rows without an
    `evaluation` field are always kept (such files carry no subset marker)."""
    if questions not in QUESTION_SETS:
        raise UserError(f"unknown question set {questions!r}; choose one of {', '.join(QUESTION_CHOICES)}")
    kinds = QUESTION_SETS[questions]
    if kinds is None:
        if any(r.get("evaluation") in _NGRAM_KINDS for r in rows):
            kinds = _NGRAM_KINDS
        else:
            return list(rows)
    return [r for r in rows if r.get("evaluation", kinds[0]) in kinds]


def pair_predictions(model_rows: list[dict], model: str, base_rows: list[dict], base: str) -> list[Pair]:
    """Pair questions by (query, reference), as L-Eval does (a repeated question takes the base
    file's last answer)."""
    base_answers = {(str(r["query"]), str(r["gt"])): r[f"{base}_pred"] for r in base_rows}
    pairs = []
    for r in model_rows:
        key = (str(r["query"]), str(r["gt"]))
        if key in base_answers:
            pairs.append(Pair(key[0], key[1], str(r[f"{model}_pred"]), str(base_answers[key])))
    if not pairs:
        raise UserError("the two prediction files share no question (matched on query and reference answer)")
    return pairs


def judge_result(out: Path, model: str, base: str, judge_name: str, questions: str, verdicts: list[Verdict], unmatched: int) -> JudgeResult:
    """The result of a judge run in `out`: every verdict and the totals, overall and per order."""
    totals = win_rate(verdicts)
    by_order = {order: win_rate([v for v in verdicts if v.order == order]) for order in ("model_first", "base_first")}
    report = {"model": model, "base": base, "judge": judge_name, "prompt": "L-Eval pair-v2", "questions": questions,
              "totals": totals, "by_order": by_order, "unmatched_questions": unmatched, "verdicts": [asdict(v) for v in verdicts]}
    return JudgeResult(report, Path(out))


@dataclass(frozen=True)
class JudgedFiles:
    """What a judge run compares: a model's L-Eval predictions against a base model's, on a
    question set (`auto`: the one L-Eval uses for the judge), the first `limit` pairs only when given."""

    predictions: Path
    base_predictions: Path
    questions: str = "auto"
    limit: int | None = None


def run_judge(load_spec: Loadable, judge_name: str, judged: JudgedFiles, out: Path, executor: ExecutorOptions | None = None,
              max_tokens: int | None = None, *, render: Rendering) -> JudgeResult:
    """Judge a model's L-Eval predictions against a base model's; return the result (rendered by
    `render`; the engine has written it). A run directory holds one configuration (files, judge,
    question set, limit), as for every command."""
    predictions, base_predictions, limit = Path(judged.predictions), Path(judged.base_predictions), judged.limit
    questions = leval_question_set(judge_name) if judged.questions == "auto" else judged.questions
    model, model_rows = read_predictions(predictions)
    base, base_rows = read_predictions(base_predictions)
    considered = select_questions(model_rows, questions)
    if not considered:
        raise FieldError("questions", f"{predictions} has no row of question set {describe_questions(questions)}; choose another with {{name}}")
    pairs = pair_predictions(considered, model, base_rows, base)
    if limit is not None:
        pairs = pairs[:limit]
    config = {"predictions": file_sha256(predictions), "base_predictions": file_sha256(base_predictions), "judge": judge_name,
              "questions": questions, "limit": limit, "max_tokens": max_tokens, "prompt": "L-Eval pair-v2"}
    unmatched = len(considered) - len(pairs) if limit is None else 0
    task = JudgeRun(load_spec, pairs, lambda verdicts: judge_result(out, model, base, judge_name, questions, verdicts, unmatched))
    return run(task, RunSpec("judge", config_id(config), config, "judge run"), out, render=render, executor=executor)


def run_api_judge(judged: JudgedFiles, judge_model: str, options, max_tokens: int, out: Path, executor: ExecutorOptions | None = None, *,
                  render: Rendering) -> JudgeResult:
    """Judge with an `openai:` chat model (the `ctxeval judge` command); returns the result."""
    from ctxeval.backends.registry import backend_for

    backend = backend_for(judge_model)
    if not backend.chat or not backend.target(judge_model):
        raise FieldError("judge_model", f"must be openai:MODEL, got {judge_model!r}")
    if judged.limit is not None and judged.limit < 1:
        raise FieldError("limit", f"must be a positive integer, got {judged.limit}")
    if judged.questions not in QUESTION_CHOICES:
        raise FieldError("questions", f"must be one of {', '.join(QUESTION_CHOICES)}, got {judged.questions!r}")
    from ctxeval.backends.openai_chat import ChatSpec

    spec = ChatSpec(backend.target(judge_model), options, max_tokens)
    return run_judge(spec, judge_model, judged, out, executor, max_tokens, render=render)
