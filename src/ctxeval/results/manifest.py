"""The run manifest: one typed, versioned object, read and written here only.

A manifest says what a run directory holds and how far it got. On disk it is JSON, kept readable
by earlier ctxeval versions and scripts:

- version 1 (no `version` key; `ctxeval_manifest: 1`): scoring runs kept `command` inside
  `config` only, retrieval runs at the top;
- version 2: `version` and `command` always at the top;
- version 3 (this module): `numeric_paths` (one `NumericPath` per model, in model order: how its
  numbers were computed) and `fingerprints` (one `Fingerprint` per model of a token-record run:
  a hash of its exact scores, results/fingerprint.py). Earlier versions read with both None;
  a later version is refused in one line naming it.

The `started` status is spelled `running` on disk, as every version has written it, so tools
that poll a run directory keep working. Keys this module does not know are kept as they are.
"""

from __future__ import annotations

import json
import time
from collections.abc import Collection
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ctxeval.results.numeric_path import NumericPath
from ctxeval.metrics.config import MetricConfig
from ctxeval.errors import FieldError, UserError, a_or_an
from ctxeval.results.fingerprint import Fingerprint

MANIFEST_FILE = "manifest.json"
MANIFEST_VERSION = 3
Status = Literal["started", "complete", "incomplete"]

_STATUS_ON_DISK: dict[str, str] = {"started": "running", "complete": "complete", "incomplete": "incomplete"}
_STATUS_FROM_DISK = {disk: status for status, disk in _STATUS_ON_DISK.items()}
_LEGACY_KEYS = ("ctxeval_manifest",)  # version 1's marker, replaced by `version`
SCORING_COMMANDS = ("sweep", "score")  # runs whose records summary, compare and trends read


@dataclass
class Manifest:
    """What a run is (id, command, config, models, texts, plan) and how far it got (status,
    timing, failed passes, API usage). `config` is the run's configuration as stored."""

    command: str
    run_id: str
    config: dict[str, Any]
    models: list[dict[str, Any]]
    status: Status = "started"
    version: int = MANIFEST_VERSION
    created: str | None = None
    texts: list[dict[str, Any]] | None = None
    text_handling: str | None = None
    bos: str | None = None
    rank_convention: str | None = None
    plan: dict[str, Any] | None = None
    lines_for_tokens: dict[str, dict[str, int]] | None = None
    corpus: dict[str, Any] | None = None  # a corpus input's options, counts of bad and skipped documents
    versions: dict[str, str] | None = None
    api_usage: dict[str, dict] | None = None
    api_usage_total: dict[str, dict] | None = None
    timing: dict[str, Any] | None = None
    failed_passes: list[dict[str, Any]] | None = None
    numeric_paths: list[NumericPath] | None = None  # one per model, in `models` order (version 3)
    fingerprints: list[Fingerprint] | None = None  # one per model of a token-record run, once finished (version 3)
    extra: dict[str, Any] = field(default_factory=dict)  # keys unknown to this version, kept

    @property
    def metrics(self) -> MetricConfig:
        """The metric settings the run was made with."""
        return MetricConfig.from_dict(self.config["metrics"])

    @property
    def temperatures(self) -> tuple[float, ...]:
        return tuple(self.config["temperatures"])

    @property
    def top_k(self) -> int:
        return int(self.config["top_k"])

    @property
    def model_names(self) -> list[str]:
        return [m["name"] for m in self.models]

    @property
    def lengths(self) -> tuple[int, ...]:
        """The context lengths a sweep or effective-length run scored, shortest first."""
        return tuple(self.config["lengths"])

    @property
    def max_contexts(self) -> dict[str, int | None]:
        """Each model's truncation control (`?max_context=N`; None: the model sees its whole context)."""
        return {m["name"]: m.get("max_context") for m in self.models}

    @property
    def vocab_sizes(self) -> dict[str, int]:
        """Vocabulary size of each model (the full-vocabulary rank cutoff)."""
        return {m["name"]: m["vocab_size"] for m in self.models}

    def numeric_path(self, model: str) -> NumericPath | None:
        """The numeric path of a model of this run (None: not recorded, a manifest before version 3)."""
        paths = dict(zip(self.model_names, self.numeric_paths or []))
        return paths.get(model)

    def fingerprint(self, model: str) -> Fingerprint | None:
        """The fingerprint of a model's records (None: not recorded)."""
        return {f.model: f for f in self.fingerprints or []}.get(model)

    @property
    def text_ids(self) -> list[str]:
        return [t["text_id"] for t in self.texts or []]

    @property
    def text_sha256(self) -> dict[str, str]:
        """Content hash of each text, by text id (what pairs windows across runs)."""
        return {t["text_id"]: t["sha256"] for t in self.texts or []}

    def to_json(self) -> dict[str, Any]:
        """The JSON object written to disk: unset optional fields left out, unknown keys last."""
        out: dict[str, Any] = {}
        for f in fields(self):
            if f.name == "extra":
                continue
            value = getattr(self, f.name)
            if f.name == "status":
                value = _STATUS_ON_DISK[value]
            elif f.name in _TYPED_LISTS and value is not None:
                value = [item.to_json() for item in value]
            if value is not None:
                out[f.name] = value
        return out | self.extra

    @staticmethod
    def from_json(data: dict[str, Any]) -> Manifest:
        """A manifest from its JSON object, of this version or an earlier one."""
        data = dict(data)
        version = int(data.pop("version", 1))
        if version > MANIFEST_VERSION:
            raise NewerManifest(f"manifest version {version} is newer than this ctxeval reads (up to {MANIFEST_VERSION}); upgrade ctxeval")
        for key, kind in _TYPED_LISTS.items():
            if data.get(key) is not None:
                data[key] = [kind.from_json(item) for item in data[key]]
        for key in _LEGACY_KEYS:
            data.pop(key, None)
        config = data.get("config") or {}
        data["command"] = data.get("command") or config.get("command", "")
        data["status"] = _STATUS_FROM_DISK.get(data.get("status", "running"), "started")
        known = {f.name for f in fields(Manifest)} - {"version", "extra"}
        missing = [key for key in ("run_id", "config", "models") if key not in data]
        if missing:
            raise ValueError(f"no {', '.join(missing)}")
        return Manifest(version=version, **{k: v for k, v in data.items() if k in known}, extra={k: v for k, v in data.items() if k not in known})

    def __getitem__(self, key: str) -> Any:
        """Read-only access by the on-disk key, for scripts written when `RunResult.manifest`
        was that JSON dict; ctxeval's own code uses the attributes."""
        return self.to_json()[key]


_TYPED_LISTS: dict[str, Any] = {"numeric_paths": NumericPath, "fingerprints": Fingerprint}


class NewerManifest(ValueError):
    """A manifest written by a later ctxeval, whose fields this one cannot vouch for."""


def now() -> str:
    """Creation time as manifests record it (UTC, seconds)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def read_manifest(run_dir: Path) -> Manifest:
    """The manifest of a run directory, or a UserError if there is none or it is unreadable."""
    path = Path(run_dir) / MANIFEST_FILE
    if not path.is_file():
        raise UserError(f"{run_dir} is not a ctxeval run directory (no {MANIFEST_FILE})")
    try:
        return Manifest.from_json(json.loads(path.read_text()))
    except NewerManifest as exc:
        raise UserError(f"{path}: {exc}") from None
    except (json.JSONDecodeError, ValueError, TypeError, AttributeError):
        raise UserError(f"{path} is not a valid ctxeval manifest") from None


def require_command(manifest: Manifest, run_dir: Path, reader: str, accepted: Collection[str]) -> Manifest:
    """The manifest, if `reader` (a command) can read a run of its command; otherwise one line
    naming both, e.g. "runs/r is a retrieval run; compare reads sweep/score runs"."""
    if manifest.command not in accepted:
        kind = a_or_an(manifest.command) if manifest.command else "an unknown kind of"
        raise UserError(f"{run_dir} is {kind} run; {reader} reads {'/'.join(accepted)} runs")
    return manifest


def existing_manifest(run_dir: Path, run_id: str | None = None, what: str = "run", command: str | None = None) -> Manifest | None:
    """The manifest a run directory already holds (a resumed or repeated run), None for a new
    one. With `run_id`, a directory of another configuration is refused rather than mixed in;
    the refusal names the kind of run found there when it is not `command`'s, so a user who
    pointed --out at another command's run reads what is there, not "another configuration"."""
    if Path(run_dir).exists() and not Path(run_dir).is_dir():
        raise FieldError("out", f"{{name}} {run_dir} is a file, not a folder; choose another {{name}} or remove it")
    if not (Path(run_dir) / MANIFEST_FILE).exists():
        return None
    previous = read_manifest(run_dir)
    if run_id is not None and previous.run_id != run_id:
        if command is not None and previous.command != command:
            found = f"{a_or_an(previous.command)} run" if previous.command else "a run of an unknown kind"
            raise FieldError("out", f"{run_dir} holds {found}, not a {command} run; choose another {{name}} or remove it")
        raise FieldError("out", f"{run_dir} holds a {what} with a different configuration; choose another {{name}} or remove it")
    return previous


def write_manifest(run_dir: Path, manifest: Manifest) -> None:
    """Write atomically (temporary file, then rename), so a killed run never leaves half a manifest."""
    path = Path(run_dir) / MANIFEST_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(manifest.to_json(), indent=2, default=_json_default))
    tmp.replace(path)


def _json_default(value: object) -> int | float:
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    raise TypeError(f"cannot serialise {type(value)}")
