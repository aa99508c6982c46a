"""Turn a model string into its typed `ModelSpec` and a spec into a scorer, and list what can be
used on this machine.

A model string (`gemma-3-270m`, `x.gguf?max_context=128`, `hf:smollm2-135m?press=SnapKVPress&budget=256`,
`openai:MODEL`) is parsed by `parse_model_spec` alone, once, where the user gives it (the command
layer); checks, planning, executors and `load_scorer` receive the typed spec.

Each backend is a `Backend` entry: the prefix that names its models (or none: the backend of
model names and files), its scorer class by dotted path ("module:Class", as lm-eval registers its
models) and what it can do. Callers ask a spec's `backend` (or `backend_for(text)`) what a model
can do instead of reading its string. Backends are imported only when a model needs them: importing the registry loads no
backend, no torch, no llama.cpp and no HTTP client, and no backend module needs the registry
imported first.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, replace
from importlib import metadata
from pathlib import Path

from ctxeval.backends.base import Scorer
from ctxeval.backends.hf_embedded import SOURCE_FILE, cache_root, embedded_hf_dir
from ctxeval.backends.model_files import EMBEDDED, embedded_path
from ctxeval.backends.model_options import MODEL_OPTIONS, HfOptions, LlamaCppOptions, ModelOption, hf_options, pop_max_context, split_spec
from ctxeval.backends.openai_options import OpenAIOptions
from ctxeval.config import DEFAULT_MODEL
from ctxeval.errors import FieldError, UserError, install_hint

@dataclass(frozen=True)
class Backend:
    """One backend: how a `--model` spec names it, where its scorer class lives ("module:Class",
    imported only when a model needs it), and what it can do, which callers ask here instead of
    reading the spec."""

    name: str
    loader: str
    install_hint: str
    prefix: str | None  # "hf:"; None: the backend of everything no prefix claims (names, files)
    remote: bool  # a model behind an HTTP API: requests cost money, servers fan out
    full_distribution: bool  # gives every token's log-probability, not only a top-k
    takes_device: bool  # honours --device and --dtype
    tokenizer: bool  # its model can stand in as another backend's tokenizer (--tokenizer)
    chat: bool  # answers chat completions (a judge)

    def recognises(self, spec: str) -> bool:
        """Whether `spec` names a model of this backend (the prefixless backend takes any)."""
        return self.prefix is None or spec.startswith(self.prefix)

    def target(self, spec: str) -> str:
        """What the backend loads: `spec` without its prefix (options included)."""
        return spec[len(self.prefix):] if self.prefix is not None and spec.startswith(self.prefix) else spec


# in recognition order: prefixed backends first, the prefixless one last
BACKENDS: dict[str, Backend] = {
    "hf": Backend("hf", "ctxeval.backends.hf:HFScorer", f"the hf backend needs torch and transformers: {install_hint('hf')}",
                  prefix="hf:", remote=False, full_distribution=True, takes_device=True, tokenizer=False, chat=False),
    "openai": Backend("openai", "ctxeval.backends.openai:OpenAIScorer", f"the openai backend needs httpx: {install_hint('openai')}",
                      prefix="openai:", remote=True, full_distribution=False, takes_device=False, tokenizer=False, chat=True),
    "llamacpp": Backend("llamacpp", "ctxeval.backends.llamacpp:LlamaCppScorer", f"the llamacpp backend needs llama-cpp-python: {install_hint()}",
                        prefix=None, remote=False, full_distribution=True, takes_device=False, tokenizer=True, chat=False),
}


@dataclass(frozen=True)
class ModelEntry:
    """One usable model: how to name it, which backend runs it, and whether it is here."""

    name: str
    backend: str
    available: bool
    location: str
    note: str


def backend_for(spec: str) -> Backend:
    """The backend that runs the model `spec` names (a `--model` value, options included)."""
    return next(backend for backend in BACKENDS.values() if backend.recognises(spec))


def backend_class(name: str) -> type:
    """The scorer class of backend `name`, imported now (and only now) from its dotted path."""
    backend = BACKENDS[name]
    module_name, _, class_name = backend.loader.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        raise UserError(backend.install_hint) from None
    return getattr(module, class_name)


@dataclass(frozen=True)
class ModelSpec:
    """A model string parsed once: its backend, what it loads, its options as that backend takes
    them (checked), and its truncation control. Checks, planning, executors and loading read
    this; it pickles, so a Ray actor loads from it as the driver does."""

    text: str  # as given: names the model in outputs
    backend: Backend
    plain: str  # `text` without `max_context=N` (the loaded model's name before its cap)
    base: str  # without any option: the model name, file or directory (prefix included)
    options: LlamaCppOptions | HfOptions | None  # None: an API model (its server has the settings)
    max_context: int | None  # `?max_context=N`: the model sees at most N tokens before a target

    @property
    def suffix(self) -> str:
        """The options as given, max_context aside (they name the model apart from its plain file)."""
        return self.plain[len(self.base):]

    @property
    def pressed(self) -> bool:
        """Whether the model compresses its KV cache (`press=`, hf: models)."""
        return isinstance(self.options, HfOptions) and self.options.press is not None

    @property
    def press_budget(self) -> int | None:
        """The tokens a press keeps of every context (`budget=B`); None without a budget."""
        return self.options.press.budget if isinstance(self.options, HfOptions) and self.options.press is not None else None


def parse_model_spec(spec: str) -> ModelSpec:
    """`spec` parsed and its options checked as loading checks them, without loading anything
    (a bad second path is refused before a long first run)."""
    backend = backend_for(spec)
    plain, max_context = pop_max_context(spec)
    base, options = split_spec(plain)
    parsed: LlamaCppOptions | HfOptions | None = None
    if backend.name == "hf":
        parsed = hf_options(options, spec)
    elif backend.name == "llamacpp":
        parsed = LlamaCppOptions.parse(options, spec)
    elif "press" in options:
        raise UserError(f"{spec!r}: KV-cache presses run on hf: models only; an API model's cache is its server's")
    if max_context is not None and backend.remote:
        raise UserError(f"model option max_context of {spec!r} applies to local models only (an API chooses its own contexts)")
    return ModelSpec(spec, backend, plain, base, parsed, max_context)


def load_scorer(model: ModelSpec, n_threads: int | None = None, device: str | None = None, dtype: str | None = None, openai_options=None) -> Scorer:
    """A scorer for `model`: `gemma-3-270m` (the embedded default), a path to a .gguf file,
    `hf:gemma-3-270m` / `hf:DIR` (transformers; `device` and `dtype` apply to it only), or
    `openai:MODEL` (a model behind an OpenAI-compatible server, reached with `openai_options`).
    A local model's string may end in options, `?key=value&...` (backends/model_options.py).
    With `max_context=N` the scorer carries N in `info.max_context` (the manifest records it)
    and its name keeps the option; planners read N from the spec."""
    if not model.backend.takes_device and (device is not None or dtype is not None):
        raise FieldError("device", f"{{name}} and {{dtype}} apply to hf: models only, not {model.plain}")
    if model.backend.name == "hf":
        scorer = _load_hf_spec(model, n_threads, device, dtype)
    elif model.backend.name == "openai":
        scorer = _load_openai(model.plain, n_threads, openai_options)
    else:
        scorer = _load_llamacpp(model, n_threads)
    if model.max_context is not None:
        scorer.info = replace(scorer.info, name=scorer.info.name + ("&" if "?" in model.plain else "?") + f"max_context={model.max_context}",
                              max_context=model.max_context)
    return scorer


def _load_openai(spec: str, n_threads: int | None, openai_options) -> Scorer:
    model = BACKENDS["openai"].target(spec)
    if not model:
        raise UserError(f"{spec}: an openai: model needs a model name, e.g. openai:gpt-4o")
    return backend_class("openai")(model, openai_options or OpenAIOptions(), n_threads=n_threads)


def _load_llamacpp(model: ModelSpec, n_threads: int | None) -> Scorer:
    assert isinstance(model.options, LlamaCppOptions)
    return _load_gguf(model.base, model.plain, model.suffix, n_threads, model.options)


def load_vocabulary(name: str, n_threads: int | None = None) -> Scorer:
    """A GGUF model (an embedded name or a .gguf path, no options) loaded for its vocabulary
    alone: an API model's tokenizer, which needs no inference settings."""
    return _load_gguf(name, name, "", n_threads, LlamaCppOptions())


def _load_gguf(base: str, plain: str, suffix: str, n_threads: int | None, options: LlamaCppOptions) -> Scorer:
    if base in EMBEDDED:
        return backend_class("llamacpp")(embedded_path(base), base + suffix, n_threads=n_threads, options=options)
    path = Path(base)
    if path.suffix.lower() == ".gguf":
        if not path.is_file():
            raise UserError(f"model file not found: {base}")
        return backend_class("llamacpp")(path, path.name + suffix, n_threads=n_threads, options=options)
    raise UserError(unknown_model(plain))


def _load_hf_spec(model: ModelSpec, n_threads: int | None, device: str | None, dtype: str | None) -> Scorer:
    options = model.options
    assert isinstance(options, HfOptions)
    scorer = _load_hf(BACKENDS["hf"].target(model.base), n_threads, options.device or device, options.dtype or dtype, options)
    if options.given:  # named apart from the same model without them, as llama.cpp models are
        scorer.info = replace(scorer.info, name=scorer.info.name + model.suffix)
    return scorer


def _load_hf(target: str, n_threads: int | None, device: str | None, dtype: str | None, options: HfOptions) -> Scorer:
    scorer_class = backend_class("hf")
    if target in EMBEDDED:
        path, provenance = embedded_hf_dir(target)
        return scorer_class(path, f"hf:{target}", device, dtype, n_threads, details=provenance, press=options.press, prefix_reuse=options.prefix_reuse)
    path = Path(target).expanduser()
    if not path.is_dir():
        raise UserError(f"hf model directory not found: {target} (use hf:{DEFAULT_MODEL}, hf:smollm2-135m or hf:DIR with config.json and weights)")
    return scorer_class(path, f"hf:{path.name}", device, dtype, n_threads, press=options.press, prefix_reuse=options.prefix_reuse)


@dataclass(frozen=True)
class OptionEntry:
    """A model option and whether what it needs is installed here."""

    option: ModelOption
    available: bool
    install: str  # how to install its extras ("" when it needs none)


@dataclass(frozen=True)
class ModelListing:
    """What `ctxeval models` lists: the models and backends, then the options a model string takes."""

    models: list[ModelEntry]
    options: list[OptionEntry]


# the packages of an extra that its model options need, asked for their versions (installed or not)
_EXTRA_PACKAGES = {"hf": ("torch", "transformers"), "kvpress": ("kvpress",)}


def list_model_options() -> list[OptionEntry]:
    """Every model option with its example and whether its extra is installed."""
    entries = []
    for option in MODEL_OPTIONS:
        available = True
        for package in (p for extra in option.extra for p in _EXTRA_PACKAGES[extra]):
            try:
                metadata.version(package)
            except metadata.PackageNotFoundError:
                available = False
        entries.append(OptionEntry(option, available, install_hint(",".join(option.extra)) if option.extra else ""))
    return entries


def unknown_model(plain: str) -> str:
    """The error line of a model string no backend knows: every form a model can take."""
    embedded = ", ".join(EMBEDDED)
    hf = ", ".join(f"hf:{name}" for name in EMBEDDED)
    return (f"unknown model {plain!r}: use an embedded model ({embedded}), a path to a .gguf file, {hf} or hf:DIR (transformers), "
            "or openai:MODEL (an OpenAI-compatible server); `ctxeval models` lists them")


def list_models() -> list[ModelEntry]:
    """The models and backends this installation can use."""
    embedded = []
    for model in EMBEDDED.values():
        note = ("default; " if model.name == DEFAULT_MODEL else "") + model.note
        try:
            embedded.append(ModelEntry(model.name, "llamacpp", True, f"PyPI package {model.package} {metadata.version(model.package)}", note))
        except metadata.PackageNotFoundError:
            embedded.append(ModelEntry(model.name, "llamacpp", False, install_hint(model.extra), note + " (not installed)"))
    try:
        llama_version = metadata.version("llama-cpp-python")
        gguf = ModelEntry("PATH.gguf", "llamacpp", True, f"llama-cpp-python {llama_version}", "any GGUF file")
    except metadata.PackageNotFoundError:
        gguf = ModelEntry("PATH.gguf", "llamacpp", False, install_hint(), "any GGUF file")
    try:
        httpx_version = metadata.version("httpx")
        api = ModelEntry("openai:MODEL", "openai", True, f"httpx {httpx_version}", "OpenAI-compatible server: --base-url URL")
    except metadata.PackageNotFoundError:
        api = ModelEntry("openai:MODEL", "openai", False, install_hint("openai"), "OpenAI-compatible server")
    return [*embedded, gguf, *_hf_entries(), api]


def _hf_entries() -> list[ModelEntry]:
    try:
        versions = f"torch {metadata.version('torch')}, transformers {metadata.version('transformers')}"
    except metadata.PackageNotFoundError:
        missing = install_hint("hf")
        return [*(ModelEntry(f"hf:{name}", "hf", False, missing, f"embedded {name} via transformers") for name in EMBEDDED),
                ModelEntry("hf:DIR", "hf", False, missing, "any transformers checkpoint directory")]
    entries = []
    for name in EMBEDDED:
        converted = (cache_root() / name / SOURCE_FILE).is_file()
        note = f"embedded {name} GGUF dequantized to float32 safetensors" + ("" if converted else "; converted on first use (1-2 min)")
        entries.append(ModelEntry(f"hf:{name}", "hf", True, str(cache_root() / name), note))
    return [*entries, ModelEntry("hf:DIR", "hf", True, versions, "any local transformers checkpoint directory")]
