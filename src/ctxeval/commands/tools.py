"""report, models and serve: the HTML report over finished runs, the models usable here, and
ctxeval's own OpenAI-compatible scoring server."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from ctxeval.backends.registry import ModelListing, list_model_options, list_models
from ctxeval.commands import common
from ctxeval.commands.base import Command
from ctxeval.commands.compare import compare_models
from ctxeval.explorer import DEFAULT_TOP_K_SHOWN, write_report
from ctxeval.options import argument, option
from ctxeval.server.settings import ServerSettings, server_settings


@dataclass(frozen=True)
class ReportSpec:
    """One offline, self-contained HTML report: run headers, headline numbers with intervals, charts and a
    per-token explorer (colour by logprob, rank bucket, probability vs top-1, context gain, key tokens, A−B)."""

    runs: tuple[Path, ...] = argument("Finished run directories of any kind: sweep, score, context-gain, effective-length, diff, retrieval, ruler, compare outputs, pplqa/meta-eval.", cli_type=list[Path], to_value=tuple)
    out: Path = common.out("The HTML file to write.", Path("report.html"))
    top_k_shown: int = option("--top-k-shown", "Top-k alternatives per token embedded for the hover card (at most the run's --top-k).", DEFAULT_TOP_K_SHOWN)


@dataclass(frozen=True)
class ModelsSpec:
    """List the models and backends usable here, and the options a model string takes after `?`
    (presses, max_context, KV types, flash attention, ...) with an example each and the extra each needs."""


@dataclass(frozen=True)
class ServeSpec:
    """Serve a model behind an OpenAI-compatible API scored by ctxeval's own exact scorers: prompt
    log-probabilities with exact ranks (echo, vLLM's prompt_logprobs), token-id prompts (lm-eval's
    local-completions); use it with --model openai:NAME --base-url (docs/serve.md)."""

    model: str = argument(common.MODEL_FORMS, ServerSettings.model)
    port: int = option("--port", "TCP port.", ServerSettings.port)
    host: str = option("--host", "Interface to listen on (0.0.0.0: every interface, for a fleet).", ServerSettings.host)
    n_ctx: int = option("--n-ctx", "Longest request in tokens (prompt + completion); longer ones are refused with 400.", ServerSettings.n_ctx)
    n_threads: int | None = common.threads()
    device: str | None = common.device()
    dtype: str | None = common.dtype()
    served_names: tuple[str, ...] = option("--served-model-name", "A name clients give as `model` (repeatable; default: the MODEL argument). Other names get 404.", (),
                                           cli_type=Optional[list[str]], shown=None, to_value=lambda v: tuple(v or ()))
    string_bos: str = option("--string-bos", "What precedes a string prompt's tokens: model (BOS when the model's tokenizer adds one) or none. Token-id prompts are always used verbatim.", ServerSettings.string_bos)
    api_key_env: str | None = option("--api-key-env", "Environment variable holding an API key that every request must send (Authorization: Bearer KEY).", None)
    max_queue: int = option("--max-queue", "Requests that may wait for the model; one more is answered 429.", ServerSettings.max_queue)
    max_body_bytes: int = option("--max-body-bytes", "Largest request body; a larger one is answered 413.", ServerSettings.max_body_bytes)
    max_logprobs: int = option("--max-logprobs", "Largest logprobs / prompt_logprobs / top_logprobs a request may ask for.", ServerSettings.max_logprobs)
    batch_tokens: int = option("--batch-tokens", "Waiting requests scored together in one batch, up to this many tokens.", ServerSettings.batch_tokens)
    chat_template: Path | None = option("--chat-template", "Jinja chat template for /v1/chat/completions when the model has none (or to replace its own).", None)


def run_report(spec: ReportSpec) -> Path:
    """One offline HTML file over any mix of finished runs: headers, headline numbers, charts
    and a per-token explorer (`top_k_shown` alternatives per token are embedded); pairs of
    sweep/score runs compared by compare's task with its defaults."""
    return write_report([Path(r) for r in spec.runs], Path(spec.out), compare_models, spec.top_k_shown)


def run_models(spec: ModelsSpec) -> ModelListing:
    """Models and backends usable on this machine, and the model options with what they need."""
    return ModelListing(list_models(), list_model_options())


def run_serve(spec: ServeSpec) -> None:
    """Serve the model behind ctxeval's OpenAI-compatible scoring server until interrupted
    (docs/serve.md); the server extra is imported on demand."""
    from ctxeval.server.launch import serve

    model = common.model_spec(spec.model)
    common.refuse_truncation(model, truncates=False)
    serve(server_settings(spec.model, spec.chat_template, spec.api_key_env, host=spec.host, port=spec.port, served_names=spec.served_names, n_ctx=spec.n_ctx,
                          n_threads=spec.n_threads, device=spec.device, dtype=spec.dtype, string_bos=spec.string_bos, max_queue=spec.max_queue,
                          max_body_bytes=spec.max_body_bytes, max_logprobs=spec.max_logprobs, batch_tokens=spec.batch_tokens), model)


def _echo_models(listing: ModelListing, spec: ModelsSpec, display: None) -> str:
    width = max(len(e.name) for e in listing.models) + 1
    lines = [f"{e.name:<{width}} {e.backend:<9} {'available' if e.available else 'missing':<10} {e.location}  — {e.note}" for e in listing.models]
    lines += ["", "Model options, after the model: MODEL?key=value&key=value (one example each; the extra each needs)"]
    for entry in listing.options:
        o = entry.option
        extras = " and ".join(o.extra) + (" extras" if len(o.extra) > 1 else " extra")
        need = "" if not o.extra else f"; needs the {extras}" + ("" if entry.available else f" (missing: {entry.install})")
        lines += [f"  {o.keys:<36} {o.takes}: {o.what}{need}", f"  {'':<36} e.g. {o.example}"]
    return "\n".join(lines)


def _echo_report(path: Any, spec: ReportSpec, display: None) -> str:
    return f"report: {path} ({path.stat().st_size / 1e6:.2f} MB)"


COMMANDS = (
    Command("report", ReportSpec, run_report, _echo_report, inputs=("runs",)),
    Command("models", ModelsSpec, run_models, _echo_models),
    Command("serve", ServeSpec, run_serve, lambda result, spec, display: "", inputs=("model",)),
)
