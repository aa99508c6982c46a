"""Token-scoring runs (sweep, score, context-gain) as a task of the engine (`pipeline.engine`).

The planner turns the models and the texts as tokenized by each ([model][text]) into passes
([model][text][pass]) and facts about the plan for the manifest (plan_stream.Planner), one
document at a time; each scored pass becomes token records (one row per target), and the
finisher the command supplies builds its result (the scoring summaries, or the context-gain
report), which the engine writes. The run directory's identity is the run id (a hash of everything that decides the
records): re-running the same command into the same directory scores only the missing passes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from ctxeval.backends.base import ScheduledScores, Scorer
from ctxeval.config import RunConfig
from ctxeval.metrics.config import MetricConfig
from ctxeval.data.texts import Text
from ctxeval.errors import ScoringFailed
from ctxeval.pieces import has_pieces, write_pieces
from ctxeval.pipeline.engine import Plan, RunSpec, Step
from ctxeval.pipeline.time_left import Load
from ctxeval.backends.registry import ModelSpec
from ctxeval.pipeline.executors import ScorerSpec
from ctxeval.pipeline.executors.work import Job
from ctxeval.scoring.work import scoring_work
from ctxeval.results.manifest import Manifest
from ctxeval.scoring.plan_stream import Planner, document_jobs, plan_documents
from ctxeval.results.records import TOKENS, schema_for, temperature_column
from ctxeval.pipeline.tokens import TokenizedText
from ctxeval.pipeline.windows import Pass

Finish = Callable[[Path, Manifest, MetricConfig], Any]


def scoring_spec(config: RunConfig) -> RunSpec:
    """The engine's view of a scoring run's identity."""
    return RunSpec(config.command, config.run_id(), asdict(config))


class ScoringRun:
    """Score every planned pass of every model; `finish` returns the command's result (the
    engine writes it). `texts` is read again for each pass over it (a list, or a lazy `Corpus`): planning
    and scoring hold one document at a time (plan_stream). `input_facts` (a corpus's options
    and skipped bad documents) go into the manifest as `corpus`."""

    records = TOKENS
    unit = "tokens"
    finish_incomplete = False

    def __init__(self, config: RunConfig, texts: Iterable[Text], model_specs: list[ModelSpec], planner: Planner, finish: Finish, *,
                 n_threads: int | None = None, openai_options: Any = None, input_facts: dict | None = None) -> None:
        self.config = config
        self.texts = texts
        self.planner = planner
        self._finish = finish
        self.input_facts = input_facts
        self.schema = schema_for(config.temperatures)
        self._specs = [ScorerSpec(model, n_threads, openai_options, config.device, config.dtype) for model in model_specs]
        self.passes: list[list[list[Pass]]] = []
        self.done: set = set()

    def load_specs(self) -> list[ScorerSpec]:
        return self._specs

    def plan(self, models: list[Scorer], done: set) -> Plan:
        caps = [spec.model.max_context for spec in self._specs]
        plan, plan_facts, text_entries, held = plan_documents(self.planner, models, caps, self.texts)
        self.passes, self.done = plan, done
        manifest: dict[str, Any] = {
            "texts": text_entries,
            "text_handling": "files decoded as UTF-8 byte-exactly: no newline translation, no normalisation",
            "bos": "every pass starts with the model's BOS token when it uses one; BOS is never counted as context and never scored",
            "rank_convention": "rank = 1 + number of vocabulary entries with a strictly larger logit",
            "plan": plan_facts | {"passes": sum(len(t) for m in plan for t in m), "targets": sum(p.n_targets for m in plan for t in m for p in t)},
        }
        if self.input_facts is not None:
            manifest["corpus"] = self.input_facts | {"skipped_documents": sum(1 for t in text_entries if "skipped" in t)}
        work, first = [], 0
        for model_index, (scorer, per_model) in enumerate(zip(models, plan)):
            jobs = document_jobs(scorer, per_model, self.texts, first, done, {d: per[model_index] for d, per in held.items()})
            first += sum(len(passes) for passes in per_model)
            work.append(scoring_work(scorer, self.config, jobs))
        indexed = list(enumerate(p for per_model in plan for per_text in per_model for p in per_text))
        return Plan(work, manifest, units=len(indexed), noun="passes", total=sum(p.n_targets for _, p in indexed),
                    already=sum(p.n_targets for i, p in indexed if i in done), load=Load.of(p.cost() for i, p in indexed if i not in done))

    def record(self, model: Scorer, job: Job, result: object, columns: dict[str, list]) -> dict | None:
        index, tt, p = job
        if isinstance(result, ScoringFailed):
            return {"pass_index": index, "model": model.info.name, "text_id": tt.text.text_id, "window_id": p.window_id, "error": str(result)}
        _append_rows(model, self.config, tt, p, index, result, columns)
        return None

    def progress(self, model: Scorer, job: Job) -> Step:
        _, tt, p = job
        return Step(p.n_targets, f"{model.info.name} · {tt.text.text_id} · {p.window_id}", p.cost())

    def model_done(self, run_dir: Path, model: Scorer) -> None:
        """Keep the text of every token id the model's records mention (pieces.parquet)."""
        write_pieces(run_dir, model.info.name, model.token_bytes)

    def finish(self, run_dir: Path, manifest: Manifest) -> Any:
        if not has_pieces(run_dir):  # a complete run written without them: tokenizers only, nothing scored
            for spec in self._specs:
                scorer = spec.load()
                try:
                    write_pieces(run_dir, scorer.info.name, scorer.token_bytes)
                finally:
                    scorer.close()
        return self._finish(run_dir, manifest, self.config.metrics)

    def estimate(self, models: list[Scorer], _plan: Plan) -> dict:
        """What scoring the missing passes would send: requests and tokens per API model (upper
        bounds for the generation paths, whose reuse is only known afterwards)."""
        config = self.config
        out: dict[str, dict] = {}
        index = 0
        for scorer, per_model in zip(models, self.passes):
            totals = {"passes": 0, "requests": 0, "prompt_tokens": 0, "completion_tokens": 0}
            for per_text in per_model:
                for p in per_text:
                    if index not in self.done and scorer.remote:
                        if p.context_mode == "thesis":
                            requests, prompt_tokens, completion_tokens = scorer.estimate_thesis(p.nominal_len, p.n_targets, config.n_compare, config.exhaustive)
                        else:
                            requests, prompt_tokens, completion_tokens = scorer.estimate(p.n_input, p.n_targets)
                        totals["passes"] += 1
                        totals["requests"] += requests
                        totals["prompt_tokens"] += prompt_tokens
                        totals["completion_tokens"] += completion_tokens
                    index += 1
            if scorer.remote:
                out[scorer.info.name] = totals | {"mode": scorer.api_mode or "prompt (assumed; give --api-mode)"}
        return out


def _append_rows(scorer: Scorer, config: RunConfig, tt: TokenizedText, p: Pass, pass_index: int, result, out: dict[str, list]) -> None:
    """Append the records of one scored pass to `out`, with each target's actual context length."""
    info = scorer.info
    if isinstance(result, ScheduledScores):
        scores, context_lens = result.scores, result.context_len
    else:
        scores, context_lens = result, p.context_lens()
    targets = np.arange(p.target_start, p.target_start + len(scores.logprob))
    target_ids = tt.ids[targets]
    n = len(targets)
    out["pass_index"].extend([pass_index] * n)
    out["model"].extend([info.name] * n)
    out["text_id"].extend([tt.text.text_id] * n)
    out["method"].extend([p.method] * n)
    out["context_mode"].extend([p.context_mode] * n)
    out["nominal_len"].extend([p.nominal_len] * n)
    out["repeat"].extend([p.repeat] * n)
    out["window_id"].extend([p.window_id] * n)
    out["context_len"].extend(context_lens.tolist())
    out["target_pos"].extend(targets.tolist())
    out["char_start"].extend(tt.char_starts[targets].tolist())
    out["char_end"].extend(tt.char_ends[targets].tolist())
    out["n_bytes"].extend(tt.n_bytes[targets].tolist())
    out["target_id"].extend(target_ids.tolist())
    out["target_text"].extend(scorer.token_bytes(int(t)).decode("utf-8", errors="replace") for t in target_ids)
    # an API backend knows neither a rank beyond its top-k (rank 0) nor the log-probability of
    # a generated-path reference outside the returned tokens (NaN): both are stored as null
    out["logprob"].extend(None if math.isnan(x) else x for x in scores.logprob.tolist())
    out["rank"].extend(r if r > 0 else None for r in scores.rank.tolist())
    out["greedy_id"].extend(scores.greedy_id.tolist())
    out["topk_ids"].extend(scores.topk_ids.tolist())
    out["topk_logprobs"].extend(scores.topk_logprobs.tolist())
    out["topk_returned"].extend(n if n >= 0 else None for n in scores.listed.tolist())
    for j, t in enumerate(config.temperatures):
        if t != 1.0:
            out[temperature_column(t)].extend(scores.temp_logprobs[:, j].tolist())
