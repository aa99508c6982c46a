"""Token pieces of a run: the text of every token id its token records mention (targets, top-k
alternatives, greedy tokens), per model, in `pieces.parquet` beside `records.parquet`.

Records keep ids, and the text only of their targets; a reader (the HTML report) that shows a
top-k alternative or a greedy token never seen as a target needs its piece, and should not have
to load a tokenizer for it. The run writes this file once a model's passes are recorded, from
the scorer that tokenized the text (`token_bytes`), decoded as `target_text` is (UTF-8, a
partial character replaced by U+FFFD).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ctxeval.pipeline.records import PARTS_DIR, RECORDS_FILE

PIECES_FILE = "pieces.parquet"
SCHEMA = pa.schema([("model", pa.string()), ("token_id", pa.int32()), ("piece", pa.string())])


def record_ids(run_dir: Path, model: str) -> np.ndarray:
    """Sorted distinct ids (>= 0; APIs store -1 for ids they do not return) in `model`'s token
    records: part files and the merged file."""
    files = sorted((Path(run_dir) / PARTS_DIR).glob("part-*.parquet"))
    if (Path(run_dir) / RECORDS_FILE).is_file():
        files.append(Path(run_dir) / RECORDS_FILE)
    found = [np.zeros(0, dtype=np.int64)]
    for path in files:
        table = pq.read_table(path, columns=["target_id", "greedy_id", "topk_ids"], filters=[("model", "=", model)])
        for column in (table["target_id"], table["greedy_id"], pc.list_flatten(table["topk_ids"])):
            found.append(column.to_numpy(zero_copy_only=False).astype(np.int64))
    ids = np.unique(np.concatenate(found))
    return ids[ids >= 0]


def write_pieces(run_dir: Path, model: str, token_bytes: Callable[[int], bytes]) -> None:
    """Write (replace) `model`'s pieces for every id its records mention, keeping other models'."""
    path = Path(run_dir) / PIECES_FILE
    ids = record_ids(run_dir, model)
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
