"""Token pieces kept with a run (pieces.parquet) and what the HTML report decodes from them."""

from __future__ import annotations

import pandas as pd

from ctxeval.explorer.data import arm_payload, load_runs
from ctxeval.pieces import read_pieces, record_ids, write_pieces
from ctxeval.results.records import BASE_SCHEMA, PartWriter, merge_parts

from .synthetic_runs import VOCAB, synthetic_piece, write_run


def _row(pass_index: int, model: str, target: int, greedy: int, topk: list[int]) -> dict:
    return {"pass_index": pass_index, "model": model, "text_id": "t", "method": "sweep", "context_mode": "exact", "nominal_len": 1,
            "repeat": 0, "window_id": "w", "context_len": 1, "target_pos": 1, "char_start": 0, "char_end": 1, "n_bytes": 1,
            "target_id": target, "target_text": "x", "logprob": -1.0, "rank": 1, "greedy_id": greedy, "topk_ids": topk,
            "topk_logprobs": [-1.0] * len(topk), "topk_returned": None}


def test_ids_of_targets_greedy_and_top_k_per_model_from_parts_and_merged_file(tmp_path):
    """Model m: target 3, greedy 5, top-k 5, 7 and an API's -1 (no id) -> {3, 5, 7}; a later
    part (after the merge) adds target 11; model n: {9}."""
    writer = PartWriter(tmp_path, BASE_SCHEMA)
    rows = [_row(0, "m", 3, 5, [5, 7, -1]), _row(1, "n", 9, -1, [-1, -1, -1])]
    writer.write(pd.DataFrame(rows).to_dict("list"))
    merge_parts(tmp_path, BASE_SCHEMA)
    PartWriter(tmp_path, BASE_SCHEMA).write(pd.DataFrame([_row(2, "m", 11, 3, [3, 11, 5])]).to_dict("list"))
    assert record_ids(tmp_path, "m").tolist() == [3, 5, 7, 11] and record_ids(tmp_path, "n").tolist() == [9]
    write_pieces(tmp_path, "m", lambda i: f"<{i}>".encode())
    write_pieces(tmp_path, "n", lambda i: b"\xe2\x82")  # a partial UTF-8 character: U+FFFD, as target_text
    write_pieces(tmp_path, "m", lambda i: f"[{i}]".encode())  # rewriting m keeps n
    assert read_pieces(tmp_path, "m") == {3: "[3]", 5: "[5]", 7: "[7]", 11: "[11]"}
    assert read_pieces(tmp_path, "n") == {9: "\ufffd"}


def test_report_decodes_alternatives_outside_the_text_and_falls_back_without_pieces(tmp_path):
    """With pieces.parquet every shown id has its text; a run without it (older ctxeval) knows
    only its targets, and the page shows the other ids as `#id`."""
    for name, pieces in (("new", True), ("old", False)):
        run = write_run(tmp_path / name, "m", [8], 10, pieces=pieces)
        _, (arm,) = load_runs([run])
        payload = arm_payload(arm, top_k_shown=5)
        shown = set(arm.records["target_id"]) | set(arm.records["greedy_id"]) | {int(i) for row in arm.records["topk_ids"] for i in row}
        outside = {i for i in shown if i >= len(VOCAB)}
        assert outside  # alternatives that never occur in the text
        vocab = {int(i): t for i, t in payload["vocab"].items()}
        if pieces:
            assert vocab == {i: synthetic_piece(i).decode() for i in shown}
        else:
            assert set(vocab) == set(arm.records["target_id"]) and not outside & set(vocab)
