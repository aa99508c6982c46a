"""inspect_ai evaluation logs, read without inspect: a `.eval` log (a zip of JSON: `header.json`
and one `samples/<id>_epoch_<n>.json` per sample and epoch) or a `.json` log (one object with
`eval` and `samples`).

Each scorer's value is a measure (a scorer that returns a dict of values gives one measure per
key, `scorer/key`), mapped to a number as inspect's `value_to_float` maps it: C (correct) 1,
P (partial) 0.5, I (incorrect) and N (no answer) 0, "yes"/"true" 1, "no"/"false" 0, a number
as it is. Epochs are averaged per sample; samples pair by task and sample id, and the sample's
input is the prompt's identity. inspect compresses a .eval log's members with Zstandard (zip
method 93), which Python's zipfile does not read before 3.14: such a member's raw bytes are
decompressed with the `zstandard` package (the `inspect` extra).
"""

from __future__ import annotations

import io
import json
import struct
import zipfile
from pathlib import Path

import pandas as pd

from ctxeval.byor.table import cluster_of, digest, frame, unreadable
from ctxeval.errors import install_hint

_LETTERS = {"C": 1.0, "P": 0.5, "I": 0.0, "N": 0.0}
_WORDS = {"yes": 1.0, "true": 1.0, "no": 0.0, "false": 0.0}
ZSTD = 93  # the zip compression method of Zstandard
_LOCAL_HEADER = struct.Struct("<4s22xHH")  # signature, then (past the fixed fields) the name's and the extra field's lengths


def is_inspect(path: Path) -> bool:
    """An .eval log, or a .json log holding an inspect eval (its `eval` and `samples` keys)."""
    if path.suffix == ".eval":
        return path.is_file()
    if path.suffix != ".json" or not path.is_file():
        return False
    try:
        head = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        return False
    return isinstance(head, dict) and "eval" in head and "samples" in head


def value_number(value: object, file: Path) -> float:
    """A score value as a number, as inspect's `value_to_float` maps it."""
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        if value in _LETTERS:
            return _LETTERS[value]
        if value.lower() in _WORDS:
            return _WORDS[value.lower()]
        try:
            return float(value)
        except ValueError:
            pass
    raise unreadable(file, f"score value {value!r} is not C/I/P/N, yes/no or a number")


def member(z: zipfile.ZipFile, info: zipfile.ZipInfo, path: Path) -> bytes:
    """A zip member's bytes, Zstandard-compressed ones included."""
    if info.compress_type != ZSTD:
        return z.read(info)
    try:
        import zstandard
    except ImportError:
        raise unreadable(path, f"its members are Zstandard-compressed; reading them needs the zstandard package ({install_hint('inspect')})") from None
    with path.open("rb") as f:
        f.seek(info.header_offset)
        signature, name_length, extra_length = _LOCAL_HEADER.unpack(f.read(_LOCAL_HEADER.size))
        if signature != b"PK\x03\x04":
            raise unreadable(path, f"member {info.filename} has no local header")
        f.seek(name_length + extra_length, io.SEEK_CUR)
        raw = f.read(info.compress_size)
    return zstandard.ZstdDecompressor().stream_reader(io.BytesIO(raw), read_across_frames=True).read()


def _log(path: Path) -> tuple[dict, list[dict]]:
    """(eval spec, samples) of a log."""
    if path.suffix == ".eval":
        try:
            with zipfile.ZipFile(path) as z:
                members = {info.filename: info for info in z.infolist()}
                if "header.json" not in members:
                    raise unreadable(path, "no header.json in the .eval log (an unfinished run?)")
                header = json.loads(member(z, members["header.json"], path))
                samples = [json.loads(member(z, info, path)) for name, info in sorted(members.items()) if name.startswith("samples/") and name.endswith(".json")]
        except zipfile.BadZipFile:
            raise unreadable(path, "not a zip file (an inspect .eval log is one)") from None
    else:
        header = json.loads(path.read_text(encoding="utf-8"))
        samples = header.get("samples") or []
    if "eval" not in header:
        raise unreadable(path, "no eval spec (not an inspect log)")
    if not samples:
        raise unreadable(path, "no samples (inspect writes them unless run with --no-log-samples)")
    return header["eval"], samples


def read_inspect(path: Path, run: str, cluster: str | None = None) -> pd.DataFrame:
    """Every scorer's per-sample value of one inspect log, epochs averaged; `cluster` names the
    sample metadata field that samples sharing a document share."""
    spec, samples = _log(path)
    task = str(spec.get("task", path.stem)).split("/")[-1]
    rows = []
    for sample in samples:
        if "id" not in sample or "scores" not in sample:
            raise unreadable(path, f"a sample has no {'id' if 'id' not in sample else 'scores'}")
        prompt = digest(json.dumps(sample.get("input", ""), sort_keys=True))
        group = cluster_of(sample.get("metadata") or {}, cluster, path, sample["id"])
        for scorer, score in (sample["scores"] or {}).items():
            value = score.get("value") if isinstance(score, dict) else None
            values = {f"{scorer}/{k}": v for k, v in value.items()} if isinstance(value, dict) else {scorer: value}
            for measure, v in values.items():
                rows.append({"run": run, "task": task, "measure": measure, "sample": sample["id"], "score": value_number(v, path), "prompt_hash": prompt, "cluster": group})
    df = frame(rows, path)
    return df.groupby(["run", "task", "measure", "sample", "prompt_hash", "cluster"], sort=False, as_index=False)[["score", "answer_logp"]].mean()[df.columns]
