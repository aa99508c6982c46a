"""Run RULER's tasks (tasks x lengths x samples) on one or more models, resumably.

Each model's haystack sizes (and vt's worked example) come from its own tokenizer at plan time
and travel with each sample's spec, so a worker (local or a Ray actor) rebuilds the sample
alone. Every finished sample is a record (`samples.parquet`), written in atomic parts: a killed
run loses at most the samples in flight, and the same command scores only the missing ones.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import pyarrow as pa

from ctxeval.backends.base import Scorer
from ctxeval.config import config_id
from ctxeval.errors import FieldError
from ctxeval.pipeline.engine import Plan, Rendering, RunSpec, Step, run
from ctxeval.backends.registry import ModelSpec
from ctxeval.pipeline.executors import ExecutorOptions, ScorerSpec, Work
from ctxeval.pipeline.executors.work import one_per_unit
from ctxeval.pipeline.time_left import Cost, Load
from ctxeval.results.manifest import Manifest
from ctxeval.results.records import RecordKind, append_row
from ctxeval.results.ruler import SAMPLES_FILE
from ctxeval.ruler.generation import Generation
from ctxeval.ruler.score import RulerTask
from ctxeval.ruler.prompt import ChatTemplate, model_chat_template, token_counter
from ctxeval.ruler.samples import SampleSpec, fit_size, shared_prefix_order, vt_worked_example
from ctxeval.ruler.tasks import RULER_COMMIT, TASKS, essay_words

SAMPLES = RecordKind(SAMPLES_FILE, "sample_index", ("sample_index",))
SAMPLE_SCHEMA = pa.schema(
    [
        ("sample_index", pa.int32()),
        ("model", pa.string()),
        ("task", pa.string()),
        ("length", pa.int32()),
        ("sample", pa.int32()),
        ("haystack", pa.int32()),
        ("prompt_tokens", pa.int32()),
        ("depth", pa.float64()),
        ("answers", pa.list_(pa.string())),
        ("prompt_sha256", pa.string()),
        ("prediction", pa.string()),
        ("method", pa.string()),
        ("generation_score", pa.float64()),
        ("likelihood_score", pa.float64()),
        ("answer_logprob", pa.float64()),
        ("answer_tokens", pa.int32()),
        ("mean_logprob", pa.float64()),
        ("first_rank", pa.int64()),
        ("mean_log2_rank", pa.float64()),
        ("greedy_prefix", pa.int32()),
        ("reference_tokens", pa.int32()),
        ("min_margin", pa.float64()),
        ("prompt_tail", pa.string()),
        ("answer_ranks", pa.list_(pa.int64())),
        ("generated_tokens", pa.int32()),
    ]
)


@dataclass(frozen=True)
class RulerConfig:
    """Everything that decides which samples are scored and how."""

    tasks: tuple[str, ...]
    lengths: tuple[int, ...]
    samples: int
    seed: int
    models: tuple[str, ...]
    essay_sha256: str  # the essay haystack's text
    ruler_commit: str = RULER_COMMIT
    device: str | None = None  # hf: models' device and dtype (they change the numbers)
    dtype: str | None = None
    api: str | None = None  # an API model's options that decide its samples (base URL, mode, tokenizer, top logprobs)
    chat_template: bool = False  # each model's own chat template around the input, as RULER's published runs
    generation: Generation = Generation()  # which samples are generated (every one, none, a share of the unsettled, a count per cell)
    full_generation: bool = False  # generate to each task's limit, as RULER does; else stop once the score is decided
    first_sample: int = 0  # the samples are first_sample ... first_sample + samples - 1 (a round of `--until`)
    cells: tuple[tuple[str, int], ...] | None = None  # only these (task, length) pairs; None: every one
    skip: tuple[tuple[str, str, int], ...] | None = None  # (model name, task, length) left out: variants `--until verdict` closed

    def as_dict(self) -> dict[str, Any]:
        """The manifest's config: the fields, the generation mode as its flat fields in its place."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            out |= value.config() if isinstance(value, Generation) else {f.name: value}
        return out

    def run_id(self) -> str:
        """The hash of the settings; defaults that earlier runs did not record (device, dtype, api, no chat template, generation, every sample generated, every cell from sample 0) are left out of it,
        and so is full-length generation, what earlier runs did (a run that stops generating once the score is decided has an id of its own)."""
        return config_id({k: v for k, v in self.as_dict().items()
                          if not (k in ("device", "dtype", "api", "generate_share", "generate_count", "cells", "skip") and v is None or k in ("chat_template", "likelihood_only") and not v
                                  or k == "first_sample" and v == 0 or k == "full_generation" and (v or not self.generation.generates))})


def essay_repeats(sizes: dict[str, dict[str, dict[str, int]]], words: int) -> dict[str, dict[str, list[int]]]:
    """Per model and essay task, the lengths whose haystack needs more words than the essay's
    `words` (the text repeats from its start there), from the plan's haystack sizes."""
    out: dict[str, dict[str, list[int]]] = {}
    for model, tasks in sizes.items():
        for task, by_length in tasks.items():
            longer = [int(n) for n, size in by_length.items() if TASKS[task].args.get("type_haystack") == "essay" and size > words]
            if longer:
                out.setdefault(model, {})[task] = longer
    return out


def generation_length(config: RulerConfig, scorer: Scorer) -> str:
    """How far a model's generations run, as the manifest says it: an API model's server cannot
    be told to stop, so it generates in full even where the run stops once the score is decided."""
    if not config.generation.generates:
        return "none"
    if config.full_generation:
        return "to the limit"
    return "until the score is decided" if scorer.capabilities.generation else "to the limit (an API model cannot stop server-side)"


Finish = Callable[[Path, Manifest], Any]
SampleJob = tuple[int, SampleSpec]


class RulerRun:
    """RULER as a task of the engine: one record per (model, task, length, sample)."""

    records = SAMPLES
    schema = SAMPLE_SCHEMA
    unit = "samples"
    finish_incomplete = False

    def __init__(self, config: RulerConfig, models: list[ModelSpec], essay: str, finish: Finish, n_threads: int | None = None, openai: Any = None) -> None:
        self.config = config
        self._essay = essay
        self._finish = finish
        # score_sample cuts the prompt to max_context
        self._specs = [ScorerSpec(model, n_threads, openai, config.device, config.dtype) for model in models]

    def load_specs(self) -> list[ScorerSpec]:
        return self._specs

    def plan(self, models: list[Scorer], done: set) -> Plan:
        config = self.config
        plans, sizes, tasks, index = [], {}, [], 0
        for scorer in models:
            chat = model_chat_template(scorer) if config.chat_template else None
            jobs, sizes[scorer.info.name] = self._model_jobs(scorer, index, chat)
            plans.append(jobs)
            tasks.append(RulerTask(config.seed, self._essay, chat, config.generation, cell_samples=config.first_sample + config.samples,
                                   full_generation=config.full_generation))
            index += len(jobs)
        work = [Work(task, one_per_unit([j for j in jobs if j[0] not in done]), lambda job: job[1], lambda job: job[1].length) for task, jobs in zip(tasks, plans)]
        total = sum(len(p) for p in plans)
        manifest = {"plan": {"samples": total, "record_kind": "RULER sample", "records": SAMPLES_FILE, "haystack_sizes": sizes,
                             "essay_words": len(essay_words(self._essay)), "essay_repeated": essay_repeats(sizes, len(essay_words(self._essay))),
                             "generation": {s.info.name: generation_length(config, s) for s in models}}}
        return Plan(work, manifest, units=total, noun="samples", total=total, already=sum(j[0] in done for p in plans for j in p),
                    load=Load.of(self._cost(j[1]) for p in plans for j in p if j[0] not in done))

    def _model_jobs(self, scorer: Scorer, first: int, chat: ChatTemplate | None) -> tuple[list[SampleJob], dict[str, dict[str, int]]]:
        """This model's samples (numbered in plan order: task, length, sample; run in the order that
        shares prompt prefixes) and its haystack sizes; a length the model cannot hold is refused
        before any sample runs."""
        config, info = self.config, scorer.info
        too_long = [n for n in config.lengths if n > info.n_ctx_train]
        if too_long:
            raise FieldError("lengths", f"{too_long[0]} is beyond {info.name}'s training context of {info.n_ctx_train} tokens")
        if info.uses_bos and config.lengths[-1] == info.n_ctx_train:
            raise FieldError("lengths", f"{info.n_ctx_train} is {info.name}'s whole training context: a sample that fills it, as RULER's rule allows, "
                                        f"needs one more token for BOS; choose at most {info.n_ctx_train - 1}")

        def count(text: str) -> int:
            return len(scorer.tokenize(text))

        example = vt_worked_example(count, config.seed, TASKS["vt"].args) if "vt" in config.tasks else ""
        jobs, sizes = [], {}
        for name in config.tasks:
            extra = example if name == "vt" else ""
            counter = token_counter(scorer, name, chat)
            sizes[name] = {str(n): fit_size(name, n, config.seed, self._essay, counter, info.name, extra) for n in config.lengths}
            for n in config.lengths:
                if config.cells is not None and (name, n) not in config.cells or config.skip is not None and (info.name, name, n) in config.skip:
                    continue
                specs = [SampleSpec(name, n, k, sizes[name][str(n)], extra) for k in range(config.first_sample, config.first_sample + config.samples)]
                jobs += [(first + len(jobs) + i, spec) for i, spec in enumerate(specs)]
        return shared_prefix_order(jobs, config.seed, self._essay), sizes

    def record(self, model: Scorer, job: SampleJob, result: object, columns: dict[str, list]) -> None:
        append_row(columns, {"sample_index": job[0], **result})

    def progress(self, model: Scorer, job: SampleJob) -> Step:
        spec = job[1]
        return Step(1, f"{model.info.name} · {spec.task} · {spec.length} tokens", self._cost(spec))

    def _cost(self, spec: SampleSpec) -> Cost:
        """A sample's prompt fills its length; it may generate the task's tokens (a budget: a
        sample its likelihood pass settles, or one not drawn, generates none)."""
        return Cost(spec.length, spec.length, TASKS[spec.task].tokens_to_generate if self.config.generation.generates else 0)

    def model_done(self, run_dir: Path, model: Scorer) -> None:
        """Nothing to keep from the loaded model."""

    def finish(self, run_dir: Path, manifest: Manifest) -> Any:
        return self._finish(run_dir, manifest)


def run_ruler(task: RulerRun, run_dir: Path, progress: bool = True, executor: ExecutorOptions | None = None, *, render: Rendering) -> Any:
    """Score every (model, task, length, sample) of `task` not yet recorded, then return its
    finisher's result (rendered by `render`)."""
    config = task.config
    spec = RunSpec("ruler", config.run_id(), config.as_dict())
    return run(task, spec, Path(run_dir), render=render, executor=executor, progress=progress)
