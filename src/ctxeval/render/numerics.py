"""How a run's numbers were computed, in Markdown: each model's numeric path and fingerprint
(`summary`, the HTML report), and what two arms' paths and fingerprints say about each other
(`compare`, `diff`, from `report.numerics.pair_numerics`)."""

from __future__ import annotations

from typing import Any

from ctxeval.results.manifest import Manifest
from ctxeval.results.numeric_path import model_line


def run_lines(manifest: Manifest) -> list[str]:
    """One line per model of a run: its name, numeric path and fingerprint."""
    if manifest.numeric_paths is None and manifest.fingerprints is None:
        return [_none_recorded(manifest)]
    fingerprints = manifest.fingerprints or []
    paths = manifest.numeric_paths or []
    lines = []
    for i, name in enumerate(manifest.model_names):
        path = paths[i] if i < len(paths) else None
        fingerprint = fingerprints[i] if i < len(fingerprints) else None
        lines.append(f"{name}: {model_line(path, fingerprint)}")
    return lines


def _none_recorded(manifest: Manifest) -> str:
    """Why a manifest holds no numeric path or fingerprint, as information: manifests record them
    from version 3 on, for the models a run loads."""
    if manifest.version < 3:
        return f"numeric paths and fingerprints are recorded from manifest version 3 on; this run's manifest is version {manifest.version}"
    if not manifest.models:
        return "no model ran here (computed from finished outputs), so there is no numeric path or fingerprint to record"
    return "this run's manifest holds no numeric path or fingerprint (they are recorded for the models a run loads)"


def run_markdown(manifest: Manifest) -> str:
    """The summary's section on how its numbers were computed."""
    return "## Numeric path and fingerprint\n\n" + "\n".join(f"- {line}" for line in run_lines(manifest)) + "\n"


def markdown_lines(numerics: dict[str, Any] | None) -> list[str]:
    """The Markdown of a `pair_numerics` result (nothing for a report written without one)."""
    if not numerics:
        return []
    return ["", "Numeric paths and fingerprints (all of each arm model's records in its run):", "",
            *(f"- {line}" for line in numerics["lines"]), "", "  \n".join(numerics["notes"])]
