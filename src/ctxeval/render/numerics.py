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
        return [f"numeric paths and fingerprints not recorded (manifest version {manifest.version})"]
    fingerprints = manifest.fingerprints or []
    paths = manifest.numeric_paths or []
    lines = []
    for i, name in enumerate(manifest.model_names):
        path = paths[i] if i < len(paths) else None
        fingerprint = fingerprints[i] if i < len(fingerprints) else None
        lines.append(f"{name}: {model_line(path, fingerprint)}")
    return lines


def run_markdown(manifest: Manifest) -> str:
    """The summary's section on how its numbers were computed."""
    return "## Numeric path and fingerprint\n\n" + "\n".join(f"- {line}" for line in run_lines(manifest)) + "\n"


def markdown_lines(numerics: dict[str, Any] | None) -> list[str]:
    """The Markdown of a `pair_numerics` result (nothing for a report written without one)."""
    if not numerics:
        return []
    return ["", "Numeric paths and fingerprints (all of each arm model's records in its run):", "",
            *(f"- {line}" for line in numerics["lines"]), "", "  \n".join(numerics["notes"])]
