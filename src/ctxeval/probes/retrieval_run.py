"""Run a line-retrieval grid (lines x depths x samples) on one or more models, resumably.

Cases are planned with stable indices and run by the same executors as scoring passes (local,
or Ray actors each holding a loaded model); each finished case is a record (`CASES`: one row
per case) written in atomic Parquet parts, so an interrupted run loses at most the cases in
flight, and a re-run of the same command scores only the missing ones. At the end the parts
are merged into `cases.parquet` in plan order. The run's identity is a hash of everything that
decides the cases, as for scoring runs.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from ctxeval.backends.base import Scorer  # noqa: E402
from ctxeval.errors import UserError  # noqa: E402
from ctxeval.pipeline.engine import Plan, RunSpec, run  # noqa: E402
from ctxeval.pipeline.executors import ExecutorOptions, ScorerSpec, Work  # noqa: E402
from ctxeval.pipeline.executors.work import one_per_unit  # noqa: E402
from ctxeval.config import config_id  # noqa: E402
from ctxeval.pipeline.manifest import Manifest  # noqa: E402
from ctxeval.probes.retrieval import CaseSpec, RetrievalTask  # noqa: E402
from ctxeval.probes.retrieval_data import N_EXAMPLES, make_case  # noqa: E402
from ctxeval.pipeline.records import RecordKind, append_row  # noqa: E402
from ctxeval.report.outputs import json_rows  # noqa: E402

CASES_FILE = "cases.parquet"
LEGACY_CASES_FILE = "cases.jsonl"  # the case records of older run directories, still read
RESULTS_JSON = "results.json"
RESULTS_MD = "results.md"
HEATMAP_FILE = "retrieval_heatmap.png"

CASES = RecordKind(CASES_FILE, "case_index", ("case_index",))
CASE_SCHEMA = pa.schema(
    [
        ("case_index", pa.int32()),
        ("model", pa.string()),
        ("variant", pa.string()),
        ("tokens_target", pa.int32()),
        ("lines", pa.int32()),
        ("depth", pa.float64()),
        ("sample", pa.int32()),
        ("char_depth", pa.float64()),
        ("prompt_tokens", pa.int32()),
        ("correct", pa.bool_()),
        ("prediction", pa.string()),
        ("accuracy_method", pa.string()),
        ("min_margin", pa.float64()),
        ("first_rank", pa.int64()),
        ("value_logprob", pa.float64()),
        ("value_tokens", pa.int32()),
        ("answer_ranks", pa.list_(pa.int64())),
    ]
)


@dataclass(frozen=True)
class RetrievalConfig:
    """Everything that decides which cases are scored."""

    variant: str
    lines: tuple[int, ...]  # record sizes in lines, or () when `tokens` sets them per model
    depths: tuple[float, ...]
    samples: int
    seed: int
    models: tuple[str, ...]
    # 2: accuracy from generation's own kernel path (the batched teacher-forced shortcut of
    # protocol 1 could disagree with real generation on some CPUs)
    protocol: int = 2
    tokens: tuple[int, ...] = ()  # prompt sizes in tokens (NIAH/RULER style), lines chosen per model

    def run_id(self) -> str:
        return config_id(asdict(self))


@dataclass
class RetrievalResult:
    run_dir: Path
    cells: pd.DataFrame
    cases: pd.DataFrame
    markdown: str = ""  # what results.md holds

    def files(self) -> dict[str, Path]:
        """What the run wrote, by role."""
        return {"results": self.run_dir / RESULTS_JSON, "cases": self.run_dir / CASES_FILE, "heatmap": self.run_dir / HEATMAP_FILE, "report": self.run_dir / RESULTS_MD}


CaseJob = tuple[int, int | None, CaseSpec]  # (case index in the plan, token target, case)


class RetrievalRun:
    """The retrieval grid as a task of the engine: one record per (model, lines, depth, sample) case."""

    records = CASES
    schema = CASE_SCHEMA
    unit = "cases"
    finish_incomplete = False

    def __init__(self, config: RetrievalConfig, n_threads: int | None = None) -> None:
        self.config = config
        self._specs = [ScorerSpec(spec, n_threads) for spec in config.models]

    def load_specs(self) -> list[ScorerSpec]:
        return self._specs

    def plan(self, models: list[Scorer], done: set) -> Plan:
        config = self.config
        sizes = {s.info.name: record_sizes(s, config) for s in models}
        plans = _plan_cases(config, [s.info.name for s in models], sizes)
        task = RetrievalTask(config.variant, config.seed)
        work = [Work(task, one_per_unit([job for job in plan if job[0] not in done]), lambda job: job[2], lambda job: job[2].lines) for plan in plans]
        manifest = {"lines_for_tokens": {name: {str(t): n for t, n in size} for name, size in sizes.items()} if config.tokens else None,
                    "plan": {"cases": sum(len(p) for p in plans), "record_kind": "retrieval case", "records": CASES_FILE}}
        total = sum(len(p) for p in plans)
        return Plan(work, manifest, units=total, noun="cases", total=total, already=sum(job[0] in done for plan in plans for job in plan))

    def record(self, model: Scorer, job: CaseJob, result: object, columns: dict[str, list]) -> None:
        index, target, _ = job
        append_row(columns, {"case_index": index, "tokens_target": target, **result})

    def progress(self, model: Scorer, job: CaseJob) -> tuple[int, str]:
        case = job[2]
        return 1, f"{model.info.name} · {case.lines} lines · depth {case.depth:g}"

    def model_done(self, run_dir: Path, model: Scorer) -> None:
        """Nothing to keep from the loaded model."""

    def finish(self, run_dir: Path, manifest: Manifest) -> RetrievalResult:
        return write_results(run_dir, self.config)


def run_retrieval(config: RetrievalConfig, run_dir: Path, progress: bool = True, n_threads: int | None = None,
                  executor: ExecutorOptions | None = None) -> RetrievalResult:
    """Score every (model, lines, depth, sample) case not yet recorded, then summarise."""
    spec = RunSpec("retrieval", config.run_id(), asdict(config))
    return run(RetrievalRun(config, n_threads), spec, Path(run_dir), executor=executor, progress=progress)


def _plan_cases(config: RetrievalConfig, names: list[str], sizes: dict[str, list[tuple[int | None, int]]]) -> list[list[CaseJob]]:
    """Each model's cases in plan order, indexed across models."""
    plans, index = [], 0
    for name in names:
        grid = [(t, CaseSpec(n, d, k)) for t, n in sizes[name] for d in config.depths for k in range(config.samples)]
        plans.append([(index + i, t, case) for i, (t, case) in enumerate(grid)])
        index += len(grid)
    return plans


def record_sizes(scorer: Scorer, config: RetrievalConfig) -> list[tuple[int | None, int]]:
    """(token target, lines) per record size: `--lines` as given, or for each `--tokens` target
    the most lines whose prompt (BOS included) fits in that many of this model's tokens."""
    if not config.tokens:
        return [(None, n) for n in config.lines]
    sizes = [(t, lines_for_tokens(scorer, config.variant, t, config.seed)) for t in config.tokens]
    lines = [n for _, n in sizes]
    if len(set(lines)) < len(lines):
        raise UserError(f"--tokens {','.join(map(str, config.tokens))} give records of {lines} lines for {scorer.info.name}: choose targets further apart")
    return sizes


def lines_for_tokens(scorer: Scorer, variant: str, target: int, seed: int) -> int:
    """The largest line count whose mid-depth record prompt has at most `target` tokens.

    Prompt length grows with the line count (each line adds 15-25 tokens), so a doubling
    search then a bisection finds it in about 2 log2(lines) tokenizations."""

    def size(n: int) -> int:
        return int(scorer.info.uses_bos) + len(scorer.tokenize(make_case(variant, n, 0.5, 0, seed).prompt))

    low = N_EXAMPLES + 1
    if size(low) > target:
        raise UserError(f"--tokens {target} is too small: the smallest {variant} record ({low} lines) has {size(low)} tokens for {scorer.info.name}")
    high = 2 * low
    while size(high) <= target:
        low, high = high, 2 * high
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if size(middle) <= target else (low, middle)
    return low


def write_results(run_dir: Path, config: RetrievalConfig) -> RetrievalResult:
    """results.json (per model and (lines or token target, depth): accuracy, mean_rank, n, ...), results.md, heatmap."""
    cases = read_cases(run_dir)
    cells = cell_table(cases)
    models = list(dict.fromkeys(cases["model"]))
    payload = {
        "variant": config.variant,
        "model": models[0],
        "cells": json_rows(cells[cells["model"] == models[0]].drop(columns="model")),
        "by_model": {m: json_rows(cells[cells["model"] == m].drop(columns="model")) for m in models},
        "definitions": {
            "accuracy": "share of cases whose greedy answer equals the value exactly",
            "mean_rank": "mean full-vocabulary rank of the answer's first token after the prompt (1 = the model's top choice)",
            "mean_value_logprob": "mean over cases of the summed log-probability of the value's tokens (teacher forcing)",
            "generated": "cases whose accuracy needed real greedy generation (the answer left generation's greedy chain)",
            "tokens_target": "with --tokens: the prompt size asked for; lines is the most lines that fit it for this model",
        },
    }
    (run_dir / RESULTS_JSON).write_text(json.dumps(payload, indent=2))
    markdown = f"# Line retrieval ({config.variant})\n\n" + cells.to_markdown(index=False, floatfmt=".3f") + "\n"
    (run_dir / RESULTS_MD).write_text(markdown)
    plot_heatmaps(cells, run_dir / HEATMAP_FILE)
    return RetrievalResult(run_dir, cells, cases, markdown)


def cell_table(cases: pd.DataFrame) -> pd.DataFrame:
    """Aggregate cases per (model, lines, depth), or per (model, token target, lines, depth)."""
    keys = ["model", "tokens_target", "lines", "depth"] if cases["tokens_target"].notna().any() else ["model", "lines", "depth"]
    grouped = cases.groupby(keys, sort=True)
    cells = grouped.agg(
        n=("correct", "size"),
        accuracy=("correct", "mean"),
        mean_rank=("first_rank", "mean"),
        median_rank=("first_rank", "median"),
        top1=("first_rank", lambda r: float((r == 1).mean())),
        mean_value_logprob=("value_logprob", "mean"),
        mean_prompt_tokens=("prompt_tokens", "mean"),
        mean_char_depth=("char_depth", "mean"),
        generated=("accuracy_method", lambda m: int((m == "greedy generation").sum())),
    ).reset_index()
    return cells


def plot_heatmaps(cells: pd.DataFrame, path: Path) -> None:
    """Per model: accuracy and log2 mean rank over (lines x depth)."""
    models = list(dict.fromkeys(cells["model"]))
    fig, axes = plt.subplots(len(models), 2, figsize=(11, 3.8 * len(models)), squeeze=False, constrained_layout=True)
    for row, model in zip(axes, models):
        part = cells[cells["model"] == model]
        for ax, column, title, cmap, transform in (
            (row[0], "accuracy", "accuracy (greedy exact match)", "viridis", lambda x: x),
            (row[1], "mean_rank", "log2 mean rank of the answer", "magma_r", np.log2),
        ):
            size = "tokens_target" if "tokens_target" in part else "lines"
            pivot = part.pivot(index="depth", columns=size, values=column).sort_index()
            values = transform(pivot.to_numpy(dtype=float))
            image = ax.imshow(values, aspect="auto", cmap=cmap, origin="lower", vmin=0 if column == "accuracy" else None, vmax=1 if column == "accuracy" else None)
            ax.set_xticks(range(len(pivot.columns)), [str(c) for c in pivot.columns])
            ax.set_yticks(range(len(pivot.index)), [f"{d:g}" for d in pivot.index])
            ax.set_xlabel("prompt tokens (target)" if size == "tokens_target" else "lines in the record")
            ax.set_ylabel("depth of the queried line")
            ax.set_title(f"{model}: {title}")
            for (i, j), v in np.ndenumerate(pivot.to_numpy(dtype=float)):
                r, g, b, _ = image.cmap(image.norm(values[i, j]))
                ink = "black" if 0.299 * r + 0.587 * g + 0.114 * b > 0.5 else "white"
                ax.text(j, i, f"{v:.2f}" if column == "accuracy" else f"{v:.0f}", ha="center", va="center", color=ink, fontsize=8)
            fig.colorbar(image, ax=ax)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def read_cases(run_dir: Path) -> pd.DataFrame:
    """The recorded cases of a finished retrieval run (also of one written before cases were
    Parquet records: its `cases.jsonl`), in plan order; empty if it has none yet."""
    run_dir = Path(run_dir)
    if (run_dir / CASES_FILE).is_file():
        return pq.read_table(run_dir / CASES_FILE).to_pandas().drop(columns="case_index")
    legacy = run_dir / LEGACY_CASES_FILE
    lines = legacy.read_text(encoding="utf-8").splitlines() if legacy.is_file() else []
    rows = []
    for line in lines:
        try:
            rows.append({"tokens_target": None, **json.loads(line)})
        except json.JSONDecodeError:
            break  # a torn last line of an interrupted run
    return pd.DataFrame(rows)
