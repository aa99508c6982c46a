"""What an executor needs to know: where work runs (`ExecutorOptions`) and how a worker loads
its own copy of a model (a `Loadable`: `ScorerSpec` for scoring backends, the judge's chat
spec for chat models). A leaf module, so the executors can import it."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Protocol

from ctxeval.backends.base import ScorerBase
from ctxeval.backends.registry import ModelSpec
from ctxeval.errors import FieldError
from ctxeval.options import option

EXECUTORS = ("local", "ray")
# how long a Ray actor may wait to be placed: placing is the scheduler's decision, taken within
# seconds once a node has the resources free, however slow the machine; generous all the same
PLACEMENT_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class ExecutorOptions:
    """Where passes run. None of it decides records, so none of it is part of the run id."""

    kind: str = option("--executor", "Where passes run: local (this process, default) or ray (Ray actors, each holding a loaded model; records are the same).", "local")
    workers: int = option("--workers", "--executor ray: actors per model.", 1)
    address: str | None = option("--address", "--executor ray: the cluster's address (default: RAY_ADDRESS, else start a local cluster on 127.0.0.1).", None)
    threads_per_worker: int = option("--threads-per-worker", "--executor ray: CPU threads (and CPUs reserved) per actor.", 1)
    gpus_per_worker: float = option("--gpus-per-worker", "--executor ray: GPUs reserved per actor (hf: models with --device cuda).", 0.0)
    placement_timeout: float = option("--placement-timeout", "--executor ray: seconds an actor may wait for a node to offer its CPUs and GPUs before the run "
                                      "stops (an actor no node could ever hold stops it at once; a placed actor that loads slowly is waited for).", PLACEMENT_TIMEOUT_S)

    def check(self) -> None:
        """Refuse impossible settings with one clear line."""
        if self.kind not in EXECUTORS:
            raise FieldError("kind", f"unknown {{name}} {self.kind!r}; choose one of {', '.join(EXECUTORS)}")
        if self.workers < 1:
            raise FieldError("workers", f"must be a positive integer, got {self.workers}")
        if self.threads_per_worker < 1:
            raise FieldError("threads_per_worker", f"must be a positive integer, got {self.threads_per_worker}")
        if self.gpus_per_worker < 0:
            raise FieldError("gpus_per_worker", f"must not be negative, got {self.gpus_per_worker}")
        if not self.placement_timeout > 0:
            raise FieldError("placement_timeout", f"must be positive, got {self.placement_timeout}")
        if self.kind == "local" and (self.workers != 1 or self.address or self.gpus_per_worker or self.threads_per_worker != 1
                                     or self.placement_timeout != PLACEMENT_TIMEOUT_S):
            raise FieldError("kind", "{workers}, {address}, {threads_per_worker}, {gpus_per_worker} and {placement_timeout} apply to {name} ray only")


class WorkerModel(Protocol):
    """What an executor needs of a loaded model (a scorer, or a chat model)."""

    @property
    def name(self) -> str: ...

    concurrency: int  # requests it can usefully have in flight at once (1 for a local model)
    remote: bool  # it sends requests to a server (so `usage` says something)

    def describe(self) -> dict:
        """The model as a run manifest records it."""
        ...

    def usage(self) -> dict: ...

    def close(self) -> None: ...


class Loadable(Protocol):
    """How a worker loads its own copy of the driver's model; picklable."""

    def load(self, n_threads: int | None = None) -> WorkerModel: ...

    def per_server(self) -> list[Loadable]: ...


@dataclass(frozen=True)
class ScorerSpec:
    """How to load a scorer: the typed model and the settings a worker needs to load its own
    copy of the driver's model."""

    model: ModelSpec
    n_threads: int | None = None
    openai_options: Any = None  # OpenAIOptions for openai: models
    device: str | None = None
    dtype: str | None = None

    def load(self, n_threads: int | None = None) -> ScorerBase:
        """The scorer, with `n_threads` in place of the spec's own when given."""
        from ctxeval.backends.registry import load_scorer

        hf = {"device": self.device, "dtype": self.dtype} if self.model.backend.takes_device else {}
        return load_scorer(self.model, n_threads=n_threads or self.n_threads, openai_options=self.openai_options, **hf)

    def per_server(self) -> list[ScorerSpec]:
        """One spec per server of an API model given several (`--base-url` repeated), else itself."""
        if not self.model.backend.remote or self.openai_options is None or not self.openai_options.fanout:
            return [self]
        return [replace(self, openai_options=options) for options in self.openai_options.per_server()]
