"""Options several commands share, each declared once here (a function, since a dataclass field
cannot be shared): its flag, help, default and check. A command that needs another default or
a help text of its own says so where it uses it. A model string becomes its typed `ModelSpec`
here (`model_spec`), and only here."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Optional, Protocol

from ctxeval.backends.model_files import EMBEDDED
from ctxeval.backends.model_options import TRUNCATING
from ctxeval.backends.registry import ModelSpec, parse_model_spec
from ctxeval.config import DEFAULT_MODEL, DEFAULT_TOP_K
from ctxeval.data.corpus import CorpusOptions
from ctxeval.errors import UserError
from ctxeval.metrics.keytokens import DEFAULT_ALPHA, DEFAULT_BETA
from ctxeval.metrics.config import MetricConfig, parse_cutoff
from ctxeval.options import Flag, at_least, comma_floats, give_faces, greater_than_zero, group, non_negative, one_of, option, positive, python_only, replicates_option
from ctxeval.pipeline.executors.spec import ExecutorOptions
from ctxeval.stats.defaults import DEFAULT_SEED
from ctxeval.stats.gates import PROFILES

TEXT_INPUTS = "UTF-8 text files ('demo' for the bundled excerpt), corpus folders, .jsonl/.json or .parquet corpora."
# the one help text of --model (and of serve's MODEL): every backend's forms and the options a model string takes
MODEL_FORMS = (f"Model: {' or '.join(EMBEDDED)} (embedded, llama.cpp; {DEFAULT_MODEL} the default), a .gguf path, "
               f"{', '.join('hf:' + name for name in EMBEDDED)} or hf:DIR (transformers), or openai:MODEL (an OpenAI-compatible server, --base-url). "
               "Options follow a ? joined by &: max_context=N (a truncation control), type_k=q8_0 type_v=q8_0 flash_attn=1 (llama.cpp KV types), "
               "press=SnapKVPress budget=256 (hf:, a kvpress press), e.g. hf:smollm2-135m?press=SnapKVPress&budget=256; `ctxeval models` lists every option. "
               "Repeatable where a command compares models (the first is the reference); a form a command cannot use is refused before any model loads.")


@cache
def model_spec(text: str) -> ModelSpec:
    """The typed spec of a model string: the one place a model string is parsed (once per
    string: checks, planning and loading of a run all reuse it)."""
    return parse_model_spec(text)


def model_specs(texts: Iterable[str]) -> list[ModelSpec]:
    """Several model strings typed, in order."""
    return [model_spec(text) for text in texts]


def models(truncates: bool = False) -> Any:
    """--model repeated: several models on the same work. `truncates`: the command plans
    `?max_context=N`."""
    return option("--model", MODEL_FORMS, (DEFAULT_MODEL,), cli_type=Optional[list[str]], shown=None,
                  to_value=lambda v: tuple(v) if v else (DEFAULT_MODEL,), check=lambda v: _some("must name at least one model")(v) or _models_checked(v, truncates))


def model(truncates: bool = False) -> Any:
    """--model once: the command's one model."""
    return option("--model", MODEL_FORMS, DEFAULT_MODEL, check=lambda v: _models_checked((v,), truncates))


def _models_checked(texts: tuple[str, ...], truncates: bool) -> None:
    """Every model parsed and its options checked as loading checks them (an unknown press, a
    ratio out of range), before any model of the run loads; a truncation control is refused
    where no planner honours it."""
    for text in texts:
        refuse_truncation(model_spec(text), truncates)


def refuse_truncation(model: ModelSpec, truncates: bool) -> None:
    """Stop when `model` asks for `max_context=N` and the command plans no truncation."""
    if model.max_context is not None and not truncates:
        raise UserError(f"model option max_context of {model.text!r} applies to {TRUNCATING} only")


def refuse_api_models(models: Iterable[ModelSpec], command: str, needs: str) -> None:
    """Stop before any request when a command needs what no OpenAI-compatible API returns
    (`needs` says what: a first token's log-probability, the full distribution, ...)."""
    for model in models:
        if not model.backend.full_distribution:
            raise UserError(f"{command} cannot use {model.text}: it needs {needs}, which OpenAI-compatible APIs do not return; "
                            "use a local model (a .gguf path or hf:MODEL)")


def evaluator() -> Any:
    """--evaluator: the model whose scores pick key tokens (None: the first --model)."""
    return option("--evaluator", "Model that picks the key tokens (default: the first --model; context-gain adds it to the run if it is not one of them); "
                                 "other models get them as character spans.", None)


def key_alpha() -> Any:
    """--alpha of LongPPL's key-token rule (log p gain above alpha nats)."""
    return option("--alpha", "Key token (LongPPL's rule): its log p with the long context (effective-length: the longest length) exceeds its log p "
                             "with the short one (the shortest) by more than alpha nats ...", DEFAULT_ALPHA)


def key_beta() -> Any:
    """--beta of LongPPL's key-token rule (log p with the long context above beta)."""
    return option("--beta", "... and its log p with the long context exceeds beta.", DEFAULT_BETA)


def profile() -> Any:
    """--profile: the gates of compare and diff (stats/gates.py)."""
    return option("--profile", "Gates: dev (diff: only --max-kl / --min-same-top; compare: none, report everything); ci / release: also at least "
                               "20 / 100 compared windows and 2000 / 20000 tokens per arm, and for compare a complete pairing (equal window and token "
                               "counts, no overlapping or excluded window). A failed gate exits with code 1.", "dev", check=one_of(tuple(PROFILES)))


def min_windows() -> Any:
    """--min-windows: overrides a gate profile's minimum compared windows."""
    return option("--min-windows", "Override the profile's minimum compared windows per arm (ci 20, release 100; dev: recorded, not gated).", None)


def min_tokens() -> Any:
    """--min-tokens: overrides a gate profile's minimum compared tokens."""
    return option("--min-tokens", "Override the profile's minimum compared tokens per arm (ci 2000, release 20000; dev: recorded, not gated).", None)


def stride() -> Any:
    """--stride of sliding windows (score's --method sliding, diff)."""
    return option("--stride", "Stride S < W: sliding windows, each target scored once with between W - S and W tokens of context "
                              "(score: with --method sliding); default: disjoint chunks of W.", None, check=positive)


def limit() -> Any:
    """--limit: the first N items of a question or judgment set."""
    return option("--limit", "Only the first N items (questions, judgment pairs, paired predictions).", None, check=positive)


# the metric settings' flags (MetricConfig lives in metrics/, which imports nothing of the face)
give_faces(MetricConfig,
           cutoff=Flag("--cutoff", "Rank cutoff l of the rank scores: a positive integer, or 'full' for the whole vocabulary (a rank an API read from a shorter top-k list is scored with l = that list's length).",
                       cli_type=str, shown="20", to_value=lambda v: parse_cutoff(v, "--cutoff"), check=positive),
           alphas=Flag("--alphas", "Comma-separated alphas of the non-linear score e^(-alpha (r-1)).", cli_type=str, shown="0.1,0.3", to_value=comma_floats("--alphas"),
                       check=lambda a: "must be positive" if any(x <= 0 for x in a) else None),
           approx_k=Flag("--approx-k", "k of the approximate perplexity (an API's top-k).", check=positive),
           penalty=Flag("--penalty", "Penalty subtracted from log p_k for tokens outside the top-k.", check=non_negative))

SEED_HELP = "Seed of every random draw of the run (samples, spans or starts, --sample, --noise-floor's windows, the bootstrap): the same seed gives the same numbers."


def seed(help: str = SEED_HELP, default: int = DEFAULT_SEED) -> Any:
    """--seed; a command whose seed has another default (RULER's 42) says what it seeds there."""
    return option("--seed", help, default)


def score_delta() -> Any:
    """--delta of a paired score difference in points (ruler's variants, compare's per-sample runs)."""
    from ctxeval.ruler.paired import DEFAULT_SCORE_DELTA

    return option("--delta", "Verdict margin of a paired score difference against the first variant (ruler: the first --model; compare: the first run), in points: "
                             "within ±delta is 'within δ'; an interval that crosses 0 and reaches past it is 'too few samples to tell'.", DEFAULT_SCORE_DELTA, check=greater_than_zero)


def replicates() -> Any:
    return replicates_option()


def top_k(help: str = "How many top tokens (ids, logprobs) to store per target.", default: int = DEFAULT_TOP_K) -> Any:
    return option("--top-k", help, default, check=positive)


def temperatures() -> Any:
    return option("--temperatures", "Comma-separated temperatures at which to also compute log-probabilities (1 is always included).", (1.0,),
                  cli_type=str, shown="1", to_value=comma_floats("--temperatures"), check=_positive_numbers)


def max_tokens(low: int = 1) -> Any:
    return option("--max-tokens", "Use only the first N tokens of each text.", None, check=at_least(low) if low > 1 else positive)


def out(help: str = "Run directory. Default: runs/<command>-<run id>. Re-running the same command resumes it.", default: Path | None = None) -> Any:
    """--out: a command writing elsewhere than a run directory (a report, a post-hoc folder) says where."""
    return option("--out", help, default, cli_type=Optional[Path] if default is None else Path)


def threads() -> Any:
    return option("--threads", "CPU threads for the model (default: the cores this process may run on; llama.cpp leaves out those other processes keep busy when the model loads: a thread on a busy core stalls every decode step).", None, check=positive)


def device() -> Any:
    return option("--device", "hf: models only: cpu (default), cuda or mps.", None)


def dtype() -> Any:
    return option("--dtype", "hf: models only: float32 (default), bfloat16, float16 or float64 (slow reference).", None)


def corpus() -> Any:
    """How inputs are read as corpora (--glob, --sample, ...)."""
    return group(CorpusOptions)


def executor(gpus: bool = False) -> Any:
    """--executor and its Ray settings; `gpus`: the command's models may run on GPUs
    (--gpus-per-worker), else they run on CPUs only."""
    return group(ExecutorOptions) if gpus else group(ExecutorOptions, only=("kind", "workers", "address", "threads_per_worker", "placement_timeout"))


def progress() -> Any:
    """Python callers ask for a progress bar; the CLI shows one unless --quiet."""
    return python_only(False)


@dataclass(frozen=True, kw_only=True)
class ModelRunOptions:
    """Where a model-backed run writes, its progress bar and how its local models run (threads;
    device and dtype for hf: models): declared once for sweep, score, effective-length and ruler.
    A spec inherits them as flat fields, so a Python caller passes `out=`, `n_threads=`,
    `device=` (an option group would take them as one object); the CLI lists them after the
    command's own options."""

    out: Path | None = out()
    progress: bool = progress()
    n_threads: int | None = threads()
    device: str | None = device()
    dtype: str | None = dtype()


def dry_run() -> Any:
    return option("--dry-run", "Print the requests and tokens the run would send to API models, send nothing.", False)


def quiet() -> Any:
    return option("--quiet", "No progress bar and no tables.", False)


def _positive_numbers(values: tuple[float, ...]) -> str | None:
    bad = [v for v in values if v <= 0]
    return f"must be positive, got {', '.join(f'{t:g}' for t in values)}" if bad else None


def _some(message: str) -> Any:
    def check(values: tuple) -> str | None:
        return None if values else message
    return check


class Identified(Protocol):
    """A run's configuration: whatever hashes to its run id (RunConfig, RetrievalConfig, RulerConfig)."""

    def run_id(self) -> str: ...


def out_dir(out: str | Path | None, command: str, config: Identified) -> Path:
    """Default run directory: named by the run id, so the same command resumes the same run."""
    return Path(out) if out is not None else Path("runs") / f"{command}-{config.run_id()[:8]}"


def budget_covering(models: tuple[str, ...], size: int) -> str | None:
    """What is wrong when a pressed model's budget keeps every token of a generation's context at
    prompt size `size` (its context is shorter): nothing would be compressed (None: nothing)."""
    for spec in models:
        budget = model_spec(spec).press_budget
        if budget is not None and budget >= size:
            return (f"{size} is within {spec}'s press budget of {budget} tokens: the press would keep every token of a context (shorter than "
                    "the prompt) and compress nothing; use longer prompts or a smaller budget")
    return None
