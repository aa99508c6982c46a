"""Reading L-Eval prediction files (``<model>/<task>.pred.jsonl``) and task files.

A prediction file has one query per line: ``query``, ``gt`` (reference; a list of references is
also accepted), ``<name>_pred`` (the model's output), ``evaluation`` (exam | f1 | rouge | LLM |
human) and usually ``prompt``. The ``<name>`` of the ``_pred`` field is not always the model's
folder name in L-Eval's own files (``gpt4-32k/`` holds ``gpt4-x_pred``), so the model is named
by the layout and the field is only located.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ctxeval.errors import UserError

CLOSED_ENDED_TASKS = ("coursera", "quality", "topic_retrieval_longchat", "tpo", "gsm100", "codeU", "sci_fi")
OPEN_ENDED_TASKS = (
    "financial_qa", "gov_report_summ", "legal_contract_qa", "meeting_summ", "multidoc_qa", "narrative_qa",
    "natural_question", "news_summ", "paper_assistant", "patent_summ", "review_summ", "scientific_qa", "tv_show_summ",
)
# Folders in which L-Eval keeps one file per model (<folder>/<model>.pred.jsonl, tasks mixed).
SUBSET_FOLDERS = ("llm_gpt4_eval", "llm_turbo_eval", "human_eval")
SUFFIX = ".pred.jsonl"


@dataclass(frozen=True)
class Row:
    """One scored query: its position in the file, output, references and evaluation kind."""

    index: int
    output: str
    references: tuple[str, ...]
    evaluation: str


@dataclass(frozen=True)
class PredictionFile:
    path: Path
    model: str
    task: str
    pred_key: str
    rows: tuple[Row, ...]


def model_and_task(path: Path) -> tuple[str, str]:
    """(model, task) from the path: ``<model>/<task>.pred.jsonl``, or for L-Eval's subset
    folders ``<subset>/<model>.pred.jsonl`` (task = the subset's folder name)."""
    name = path.name[: -len(SUFFIX)] if path.name.endswith(SUFFIX) else path.stem
    folder = path.resolve().parent.name
    if name not in CLOSED_ENDED_TASKS + OPEN_ENDED_TASKS and folder in SUBSET_FOLDERS:
        return name, folder
    return folder, name


def discover(path: Path) -> list[Path]:
    """The prediction files at `path`: the file itself, or every ``*.pred.jsonl`` below a folder."""
    if not path.exists():
        raise UserError(f"{path}: no such file or directory")
    if path.is_file():
        return [path]
    files = sorted(p for p in path.rglob(f"*{SUFFIX}") if p.is_file())
    if not files:
        raise UserError(f"{path}: no *{SUFFIX} files found below it")
    return files


def _pred_key(record: dict, model: str, where: str) -> str:
    keys = [k for k in record if k.endswith("_pred")]
    if len(keys) == 1:
        return keys[0]
    if f"{model}_pred" in keys:
        return f"{model}_pred"
    if not keys:
        raise UserError(f"{where}: no '<model>_pred' field (fields: {', '.join(record)})")
    raise UserError(f"{where}: several prediction fields ({', '.join(keys)}) and none is '{model}_pred'")


def _references(value, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise UserError(f"{where}: 'gt' must be a string or a non-empty list of strings")


def read_predictions(path: Path) -> PredictionFile:
    """Parse one prediction file; any malformed line is a UserError naming file and line."""
    model, task = model_and_task(path)
    rows: list[Row] = []
    pred_key = ""
    for where, line in _lines(path):
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UserError(f"{where}: not valid JSON ({exc.msg})") from None
        if not isinstance(record, dict):
            raise UserError(f"{where}: a line must be a JSON object")
        pred_key = pred_key or _pred_key(record, model, where)
        output = record.get(pred_key)
        if not isinstance(output, str):
            raise UserError(f"{where}: '{pred_key}' missing or not a string")
        if "gt" not in record:
            raise UserError(f"{where}: no 'gt' (reference) field")
        evaluation = record.get("evaluation")
        if not isinstance(evaluation, str):
            raise UserError(f"{where}: no 'evaluation' field (exam, f1, rouge, LLM or human)")
        rows.append(Row(len(rows), output, _references(record["gt"], where), evaluation))
    if not rows:
        raise UserError(f"{path}: no predictions in the file")
    return PredictionFile(path, model, task, pred_key, tuple(rows))


@dataclass(frozen=True)
class TaskItem:
    """One instruction of an L-Eval task file with its reference."""

    document: str
    instruction: str
    reference: str
    evaluation: str
    source: str


def read_task(path: Path) -> list[TaskItem]:
    """Flatten an L-Eval task file (one document per line with lists ``instructions`` and
    ``outputs``) into one item per instruction."""
    if not path.is_file():
        raise UserError(f"{path}: no such file")
    items: list[TaskItem] = []
    for where, line in _lines(path):
        try:
            record = json.loads(line)
            document, instructions, outputs = record["input"], record["instructions"], record["outputs"]
        except (json.JSONDecodeError, KeyError, TypeError):
            raise UserError(f"{where}: expected a JSON object with 'input', 'instructions' and 'outputs'") from None
        if len(instructions) != len(outputs):
            raise UserError(f"{where}: {len(instructions)} instructions but {len(outputs)} outputs")
        for instruction, reference in zip(instructions, outputs):
            items.append(TaskItem(document, instruction, reference, record.get("evaluation", ""), record.get("source", "")))
    if not items:
        raise UserError(f"{path}: no instructions in the file")
    return items


def _lines(path: Path) -> Iterator[tuple[str, str]]:
    """The non-blank lines of a JSON-lines file, each with its `file:line` for the error that names it."""
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if line.strip():
                yield f"{path}:{number}", line
