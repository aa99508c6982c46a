"""What two arms' numeric paths and fingerprints say about each other (`compare`, `diff`): a
different numeric path explains differences in the last digits; equal fingerprints mean
bit-identical scores (docs/numerics.md)."""

from __future__ import annotations

from typing import Any

from ctxeval.results.numeric_path import NumericPath, differences, model_line
from ctxeval.results.fingerprint import Fingerprint, differing_documents
from ctxeval.results.manifest import Manifest

NAMED_DOCUMENTS = 5  # differing documents a note names


def arm(manifest: Manifest, index: int) -> tuple[NumericPath | None, Fingerprint | None]:
    """The numeric path and fingerprint of a run's model number `index`."""
    paths, fingerprints = manifest.numeric_paths or [], manifest.fingerprints or []
    return (paths[index] if index < len(paths) else None, fingerprints[index] if index < len(fingerprints) else None)


def pair_numerics(a: tuple[NumericPath | None, Fingerprint | None], b: tuple[NumericPath | None, Fingerprint | None], labels: tuple[str, str]) -> dict[str, Any]:
    """What two arms' numeric paths and fingerprints say: `differing_fields` (None where a path
    is not recorded), `bit_identical` (None where a fingerprint is not), the documents whose
    records differ, and the notes reports print (`notes`) after each arm's line (`lines`)."""
    (path_a, fp_a), (path_b, fp_b) = a, b
    la, lb = labels
    fields = differences(path_a, path_b) if path_a and path_b else None
    notes = []
    if fields is None:
        notes.append(f"Numeric paths: not recorded for {' and '.join(l for l, p in ((la, path_a), (lb, path_b)) if p is None)} (a manifest before version 3).")
    elif fields:
        shown = ", ".join(f"{f} ({_value(getattr(path_a, f))} vs {_value(getattr(path_b, f))})" for f in fields)
        notes.append(f"{la} and {lb} ran on different numeric paths: {shown}; some or all of the difference between their numbers can come from that alone.")
    else:
        notes.append(f"{la} and {lb} ran on the same numeric path.")
    identical, documents = None, []
    if fp_a is None or fp_b is None:
        notes.append(f"Fingerprints: not recorded for {' and '.join(l for l, f in ((la, fp_a), (lb, fp_b)) if f is None)}.")
    elif fp_a.sha256 == fp_b.sha256:
        identical = True
        notes.append(f"The records of {la} and {lb} are bit-identical (fingerprint {fp_a.short}, {fp_a.tokens} tokens).")
    else:
        identical = False
        documents = differing_documents(fp_a, fp_b)
        named = ", ".join(documents[:NAMED_DOCUMENTS]) + (f" and {len(documents) - NAMED_DOCUMENTS} more" if len(documents) > NAMED_DOCUMENTS else "")
        where = (f"{len(documents)} of {len(set(fp_a.documents) | set(fp_b.documents))} documents differ: {named}" if documents
                 else "every document's records agree, in another plan order")
        notes.append(f"The records of {la} and {lb} differ (fingerprints {fp_a.short} and {fp_b.short}): {where}.")
    return {
        labels[0]: {"numeric_path": path_a.to_json() if path_a else None, "fingerprint": fp_a.sha256 if fp_a else None},
        labels[1]: {"numeric_path": path_b.to_json() if path_b else None, "fingerprint": fp_b.sha256 if fp_b else None},
        "differing_fields": fields,
        "bit_identical": identical,
        "differing_documents": documents,
        "lines": [f"{la}: {model_line(path_a, fp_a)}", f"{lb}: {model_line(path_b, fp_b)}"],
        "notes": notes,
    }


def compare_numerics(manifest_a: Manifest, model_a: str, manifest_b: Manifest, model_b: str) -> dict[str, Any]:
    """`pair_numerics` of the models two runs' arms compare (A and B)."""
    return pair_numerics((manifest_a.numeric_path(model_a), manifest_a.fingerprint(model_a)),
                         (manifest_b.numeric_path(model_b), manifest_b.fingerprint(model_b)), ("A", "B"))


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, (tuple, list)):
        return "/".join(str(v) for v in value) or "none"
    if isinstance(value, dict):
        return ", ".join(f"{k} {v}" for k, v in value.items()) or "none"
    return "none" if value is None else str(value)
