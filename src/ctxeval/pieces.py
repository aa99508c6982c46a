"""Token pieces of a run: the text of every token id its token records mention (targets, top-k
alternatives, greedy tokens), per model, in `pieces.parquet` beside `records.parquet` (a diff
keeps REF's pieces of the ids its `diff_records.parquet` mentions).

Records keep ids, and the text only of their targets; a reader (the HTML report) that shows a
top-k alternative or a greedy token never seen as a target needs its piece, and should not have
to load a tokenizer for it. The run writes this file once a model's passes are recorded, from
the scorer that tokenized the text (`token_bytes`), decoded as `target_text` is (UTF-8, a
partial character replaced by U+FFFD).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ctxeval.results.records import PARTS_DIR, TOKENS, RecordKind

PIECES_FILE = "pieces.parquet"
SCHEMA = pa.schema([("model", pa.string()), ("token_id", pa.int32()), ("piece", pa.string())])
TOKEN_COLUMNS = ("target_id", "greedy_id", "topk_ids")


def record_ids(run_dir: Path, model: str | None = None, *, kind: RecordKind = TOKENS, columns: Sequence[str] = TOKEN_COLUMNS) -> np.ndarray:
    """Sorted distinct ids (>= 0; APIs store -1 for ids they do not return) in the id `columns`
    (list columns flattened) of a run's records of `kind`: part files and the merged file.
    `model`: only that model's rows (token records hold several models)."""
    files = sorted((Path(run_dir) / PARTS_DIR).glob("part-*.parquet"))
    if (Path(run_dir) / kind.file).is_file():
        files.append(Path(run_dir) / kind.file)
    found = [np.zeros(0, dtype=np.int64)]
    for path in files:
        present = [c for c in columns if c in pq.read_schema(path).names]  # records of an earlier version may lack some
        table = pq.read_table(path, columns=present, filters=[("model", "=", model)] if model is not None else None)
        for name in present:
            column = table[name]
            if pa.types.is_list(column.type):
                column = pc.list_flatten(column)
            found.append(column.to_numpy(zero_copy_only=False).astype(np.int64))
    ids = np.unique(np.concatenate(found))
    return ids[ids >= 0]


def write_pieces(run_dir: Path, model: str, token_bytes: Callable[[int], bytes], ids: np.ndarray | None = None) -> None:
    """Write (replace) `model`'s pieces for `ids` (default: every id its token records mention),
    keeping other models'."""
    path = Path(run_dir) / PIECES_FILE
    ids = record_ids(run_dir, model) if ids is None else ids
    table = pa.table({"model": [model] * len(ids), "token_id": ids.astype(np.int32), "piece": [token_bytes(int(i)).decode("utf-8", errors="replace") for i in ids]}, schema=SCHEMA)
    if path.is_file():
        others = pq.read_table(path, schema=SCHEMA)
        table = pa.concat_tables([others.filter(pc.not_equal(others["model"], model)), table])
    tmp = path.with_suffix(".tmp")
    pq.write_table(table, tmp)
    tmp.replace(path)


def read_pieces(run_dir: Path, model: str) -> dict[int, str]:
    """id -> piece of `model` in a run; empty for a run written without the file."""
    path = Path(run_dir) / PIECES_FILE
    if not path.is_file():
        return {}
    table = pq.read_table(path, schema=SCHEMA, filters=[("model", "=", model)])
    return dict(zip(table["token_id"].to_pylist(), table["piece"].to_pylist()))


def has_pieces(run_dir: Path) -> bool:
    return (Path(run_dir) / PIECES_FILE).is_file()
