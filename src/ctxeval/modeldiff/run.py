"""Run a diff: REF and CAND score the same windows in lockstep, one record per scored token.

Windows are planned on REF's tokenization (the two models share one vocabulary, checked
before anything runs), passes are work for the executors like scoring passes, and records are
written in atomic parts and merged in plan order, so a killed diff resumes to the records of an
uninterrupted one. No logits are kept: each record holds the per-token comparison only.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from ctxeval.pipeline import windows
from ctxeval.config import config_id
from ctxeval.data.corpus import Corpus
from ctxeval.modeldiff.acted import check_plan_acts
from ctxeval.modeldiff.divergence import DiffScores
from ctxeval.modeldiff.pair import DiffTask, ModelPair, PairSpec
from ctxeval.backends.base import ScorerBase
from ctxeval.errors import FieldError, UserError
from ctxeval.pipeline.engine import Plan, RunSpec, Step
from ctxeval.pipeline.time_left import Load
from ctxeval.backends.registry import ModelSpec
from ctxeval.pipeline.executors import ScorerSpec, Work
from ctxeval.pipeline.executors.work import Job, one_per_unit, work_item
from ctxeval.results.fingerprint import FingerprintColumns
from ctxeval.results.manifest import Manifest
from ctxeval.pieces import has_pieces, record_ids, write_pieces
from ctxeval.results.diff import RECORDS_FILE
from ctxeval.results.records import RecordKind
from ctxeval.pipeline.tokens import TokenizedText, tokenize

DIFF_FILE = RECORDS_FILE
# fingerprints: REF's and CAND's scores of the same tokens, in the manifest's model order
DIFF_FINGERPRINTS = (FingerprintColumns("ref_logprob", "ref_rank", None), FingerprintColumns("cand_logprob", "cand_rank", None))
DIFF_RECORDS = RecordKind(DIFF_FILE, "pass_index", ("pass_index", "target_pos"), DIFF_FINGERPRINTS)
DIFF_SCHEMA = pa.schema(
    [
        ("pass_index", pa.int32()),
        ("text_id", pa.string()),
        ("window_id", pa.string()),
        ("context_len", pa.int32()),
        ("target_pos", pa.int32()),
        ("char_start", pa.int64()),
        ("char_end", pa.int64()),
        ("target_id", pa.int32()),
        ("kl", pa.float64()),
        ("kl_reverse", pa.float64()),  # null unless asked for
        ("ref_top1", pa.int32()),
        ("cand_top1", pa.int32()),
        ("same_top1", pa.bool_()),
        ("ref_rank", pa.int64()),
        ("cand_rank", pa.int64()),
        ("ref_logprob", pa.float64()),
        ("cand_logprob", pa.float64()),
        ("delta_p", pa.float64()),  # P_cand(target) - P_ref(target)
        ("topk_overlap", pa.float64()),
        ("ref_topk_ids", pa.list_(pa.int32())),  # REF's top-k ids, most likely first
        ("ref_topk_logprobs", pa.list_(pa.float32())),
        ("cand_topk_ids", pa.list_(pa.int32())),
        ("cand_topk_logprobs", pa.list_(pa.float32())),
    ]
)
TOPK_COLUMNS = ("ref_topk_ids", "ref_topk_logprobs", "cand_topk_ids", "cand_topk_logprobs")
PIECE_COLUMNS = ("target_id", "ref_top1", "cand_top1", "ref_topk_ids", "cand_topk_ids")
DEFAULT_BLOCK_ROWS = 128


@dataclass(frozen=True)
class DiffConfig:
    """Everything that decides a diff's records (its run id)."""

    ref: str
    cand: str
    texts: tuple[str, ...]  # sha256 of each document
    text_ids: tuple[str, ...]
    window: int
    stride: int  # == window: disjoint chunks
    max_tokens: int | None
    top_k: int  # size of the top-k sets whose overlap is recorded
    reverse: bool  # also KL(P_cand || P_ref)
    block_rows: int  # logit rows per block (decode batch of llama.cpp models)
    command: str = "diff"
    sample_windows: int = 0  # > 0: a seeded sample of that many windows (a noise floor), else all
    sample_seed: int = 0

    def run_id(self) -> str:
        config = asdict(self)
        if not self.sample_windows:  # a diff of every window keeps the id it had without sampling
            del config["sample_windows"], config["sample_seed"]
        return config_id(config)


class DiffRun:
    """A diff as a task of the engine (`pipeline.engine.run`): one worker model, the pair;
    windows planned on REF's tokenization once the vocabularies are checked equal; one record
    per scored token. `finish` returns what the `finish` given makes of the run (a diff: its
    result, which the engine writes), or the manifest without one (a noise floor's run)."""

    records = DIFF_RECORDS
    schema = DIFF_SCHEMA
    unit = "tokens"
    finish_incomplete = False

    def __init__(self, config: DiffConfig, corpus: Corpus, pair: tuple[ModelSpec, ModelSpec], n_threads: int | None = None,
                 finish: Callable[[Path, Manifest], Any] | None = None) -> None:
        self.config = config
        self.corpus = corpus
        self._finish = finish
        ref, cand = pair
        self._spec = PairSpec(ScorerSpec(ref, n_threads), ScorerSpec(cand, n_threads))

    def spec(self) -> RunSpec:
        return RunSpec("diff", self.config.run_id(), asdict(self.config), "diff")

    def load_specs(self) -> list[PairSpec]:
        return [self._spec]

    def plan(self, models: list[ModelPair], done: set) -> Plan:
        (pair,) = models
        config = self.config
        vocabulary = check_pair(pair, config.window)
        docs = [tokenize(pair.ref, text) for text in self.corpus]
        plan = sample_windows([windows.for_model(plan_windows(len(tt), config), pair.ref.info.uses_bos) for tt in docs], config.sample_windows, config.sample_seed)
        flat = [p for per in plan for p in per]
        compressed = check_plan_acts((self._spec.ref.model, self._spec.cand.model), [p.target_start - p.context_start for p in flat])
        task = DiffTask(config.top_k, config.reverse, config.block_rows)
        work = Work(task, one_per_unit(_jobs(docs, plan, done)), lambda job: work_item(pair.ref.info, job[1], job[2]), lambda job: job[2].n_input)
        manifest = {
            "models": [pair.ref.describe(), pair.cand.describe()],
            "texts": [{"text_id": tt.text.text_id, "source": tt.text.source, "sha256": tt.text.sha256, "n_tokens": len(tt)} for tt in docs],
            "bos": "every pass starts with the models' BOS token when they use one; BOS is never counted as context and never scored",
            "rank_convention": "rank = 1 + number of vocabulary entries with a strictly larger logit",
            "plan": {"passes": len(flat), "targets": sum(p.n_targets for p in flat), "record_kind": "diff token", "records": DIFF_FILE,
                     "vocabulary_sha256": vocabulary},
            "corpus": self.corpus.facts(),
        }
        if compressed is not None:
            manifest["plan"]["compressed_passes"] = compressed
        return Plan([work], manifest, units=len(flat), noun="passes", total=sum(p.n_targets for p in flat),
                    already=sum(p.n_targets for i, p in enumerate(flat) if i in done), load=Load.of(p.cost() for i, p in enumerate(flat) if i not in done))

    def record(self, model: ModelPair, job: Job, result: DiffScores, columns: dict[str, list]) -> None:
        index, tt, p = job
        _append_rows(columns, index, tt, p, result)

    def progress(self, model: ModelPair, job: Job) -> Step:
        _, tt, p = job
        return Step(p.n_targets, f"{tt.text.text_id} · {p.window_id}", p.cost())

    def model_done(self, run_dir: Path, model: ModelPair) -> None:
        """Keep the text of every token id the records mention (pieces.parquet, under REF's
        name: the two models' token tables are byte-identical, `check_pair`)."""
        _write_ref_pieces(run_dir, model.ref)

    def finish(self, run_dir: Path, manifest: Manifest) -> Any:
        if not has_pieces(run_dir):  # a complete run written without them: REF's tokenizer, nothing scored
            ref = self._spec.ref.load()
            try:
                _write_ref_pieces(run_dir, ref)
            finally:
                ref.close()
        return manifest if self._finish is None else self._finish(run_dir, manifest)


def plan_windows(n_tokens: int, config: DiffConfig) -> list[windows.Pass]:
    """The passes of one document: disjoint chunks, or sliding windows when stride < window."""
    n = min(n_tokens, config.max_tokens or n_tokens)
    if config.stride == config.window:
        return windows.chunked(n, config.window)
    return windows.sliding(n, config.window, config.stride)


def sample_windows(plan: list[list[windows.Pass]], n: int, seed: int) -> list[list[windows.Pass]]:
    """A seeded sample of `n` windows over all documents, in plan order (all when n is 0 or
    at least the number of windows); the same seed and plan always give the same sample."""
    flat = [(d, p) for d, passes in enumerate(plan) for p in passes]
    if not n or n >= len(flat):
        return plan
    picked = np.sort(np.random.default_rng(seed).choice(len(flat), size=n, replace=False))
    out: list[list[windows.Pass]] = [[] for _ in plan]
    for i in picked:
        d, p = flat[i]
        out[d].append(p)
    return out


def check_pair(pair: ModelPair, window: int) -> str:
    """Refuse what a KL cannot be computed for: two vocabularies (sizes, BOS, or the text of any
    token, control tokens spelled out: llama.cpp gives them no bytes in running text, transformers
    their text), or a window beyond a model's context. Returns the shared token table's sha256."""
    ref, cand = pair.ref, pair.cand
    for scorer in (ref, cand):
        needed = window + (1 if scorer.info.uses_bos else 0)
        if needed > scorer.info.n_ctx_train:
            raise FieldError("window", f"{window} needs {needed} tokens per pass, beyond {scorer.name}'s training context of {scorer.info.n_ctx_train}")
    if ref.info.vocab_size != cand.info.vocab_size or ref.info.bos_id != cand.info.bos_id:
        raise UserError(f"{ref.name} and {cand.name} have different vocabularies ({ref.info.vocab_size} and {cand.info.vocab_size} tokens, "
                        f"BOS {ref.info.bos_id} and {cand.info.bos_id}); a KL divergence needs one vocabulary")
    digest = hashlib.sha256()
    for token in range(ref.info.vocab_size):
        piece = ref.token_text(token)
        if piece != cand.token_text(token):
            raise UserError(f"{ref.name} and {cand.name} have different vocabularies (token {token} is {piece!r} "
                            f"and {cand.token_text(token)!r}); a KL divergence needs one vocabulary")
        digest.update(len(piece).to_bytes(4, "little") + piece)
    return digest.hexdigest()


def _write_ref_pieces(run_dir: Path, ref: ScorerBase) -> None:
    write_pieces(run_dir, ref.info.name, ref.token_bytes, record_ids(run_dir, kind=DIFF_RECORDS, columns=PIECE_COLUMNS))


def _jobs(docs: list[TokenizedText], plan: list[list[windows.Pass]], done: set) -> Iterator[Job]:
    index = 0
    for tt, passes in zip(docs, plan):
        for p in passes:
            if index not in done:
                yield index, tt, p
            index += 1


def _append_rows(out: dict[str, list], pass_index: int, tt: TokenizedText, p: windows.Pass, scores: DiffScores) -> None:
    targets = np.arange(p.target_start, p.target_end)
    n = len(targets)
    out["pass_index"].extend([pass_index] * n)
    out["text_id"].extend([tt.text.text_id] * n)
    out["window_id"].extend([p.window_id] * n)
    out["context_len"].extend(p.context_lens().tolist())
    out["target_pos"].extend(targets.tolist())
    out["char_start"].extend(tt.char_starts[targets].tolist())
    out["char_end"].extend(tt.char_ends[targets].tolist())
    out["target_id"].extend(tt.ids[targets].tolist())
    out["kl"].extend(scores.kl.tolist())
    out["kl_reverse"].extend(None if np.isnan(x) else x for x in scores.kl_reverse.tolist())
    out["ref_top1"].extend(scores.ref_top1.tolist())
    out["cand_top1"].extend(scores.cand_top1.tolist())
    out["same_top1"].extend((scores.ref_top1 == scores.cand_top1).tolist())
    out["ref_rank"].extend(scores.ref_rank.tolist())
    out["cand_rank"].extend(scores.cand_rank.tolist())
    out["ref_logprob"].extend(scores.ref_logprob.tolist())
    out["cand_logprob"].extend(scores.cand_logprob.tolist())
    out["delta_p"].extend((np.exp(scores.cand_logprob) - np.exp(scores.ref_logprob)).tolist())
    out["topk_overlap"].extend(scores.topk_overlap.tolist())
    for column in TOPK_COLUMNS:
        out[column].extend(getattr(scores, column).tolist())
