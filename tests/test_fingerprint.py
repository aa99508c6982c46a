"""Fingerprints of token records: canonical order, per-document hashes, per-model splits, and
what `compare`/`diff` say about two arms' numeric paths and fingerprints. No model runs."""

from __future__ import annotations

import hashlib
from dataclasses import replace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from ctxeval.pipeline.machine_path import numeric_path
from ctxeval.results.numeric_path import NumericPath, differences
from ctxeval.results.fingerprint import Fingerprint, FingerprintColumns, differing_documents, fingerprint, header, run_fingerprints
from ctxeval.results.records import TOKENS, PartWriter, merge_parts
from ctxeval.report.numerics import pair_numerics

SCHEMA = pa.schema([("pass_index", pa.int32()), ("model", pa.string()), ("text_id", pa.string()), ("context_len", pa.int32()),
                    ("target_pos", pa.int32()), ("target_id", pa.int32()), ("logprob", pa.float64()), ("rank", pa.int64())])
COLUMNS = FingerprintColumns()


def _records(documents: tuple[str, ...] = ("a", "b", "c"), per_pass: int = 7, passes_per_document: int = 3, model: str = "m", seed: int = 0) -> dict[str, list]:
    """Seeded token records in plan order: each document's passes, `per_pass` targets each."""
    rng = np.random.default_rng(seed)
    out: dict[str, list] = {name: [] for name in SCHEMA.names}
    index = 0
    for doc in documents:
        for p in range(passes_per_document):
            for t in range(per_pass):
                out["pass_index"].append(index)
                out["model"].append(model)
                out["text_id"].append(doc)
                out["context_len"].append(16 + t)
                out["target_pos"].append(p * per_pass + t)
                out["target_id"].append(int(rng.integers(0, 1000)))
                out["logprob"].append(float(-rng.exponential(2.0)))
                out["rank"].append(int(rng.integers(1, 50)))
            index += 1
    return out


def _table(columns: dict[str, list]) -> pa.Table:
    return pa.Table.from_pydict(columns, schema=SCHEMA)


def test_the_hash_is_sha256_of_the_header_and_the_rows_in_plan_order():
    """An independent computation: the row bytes built one record at a time with `struct`-like
    numpy scalars, in (pass_index, target_pos) order."""
    table = _table(_records(documents=("a",), passes_per_document=2, per_pass=3))
    expected = hashlib.sha256(header(pa.float64()))
    for row in table.to_pylist():
        expected.update(np.int32(row["target_pos"]).tobytes() + np.int32(row["context_len"]).tobytes() + np.int32(row["target_id"]).tobytes()
                        + np.float64(row["logprob"]).tobytes() + np.int64(row["rank"]).tobytes())
    got = fingerprint(table, COLUMNS, TOKENS.order, "m")
    assert got.sha256 == expected.hexdigest() and got.tokens == 6
    assert got.documents == {"a": expected.hexdigest()}  # one document: its rows are the run's


def test_shuffled_rows_and_parts_give_the_same_fingerprint(tmp_path):
    """Canonical order: rows are sorted by the record key, not by the order parts were written."""
    table = _table(_records())
    reference = fingerprint(table, COLUMNS, TOKENS.order, "m")
    shuffled = table.take(np.random.default_rng(1).permutation(table.num_rows))
    assert fingerprint(shuffled, COLUMNS, TOKENS.order, "m") == reference
    # the same rows written as parts in another order (whole passes per part, last pass first),
    # then merged as the engine merges them
    writer = PartWriter(tmp_path, SCHEMA)
    passes = sorted(set(table.column("pass_index").to_pylist()), reverse=True)
    for group in (passes[:2], passes[2:5], passes[5:]):
        part = table.filter(pc.is_in(table.column("pass_index"), pa.array(group, pa.int32())))
        writer.write(part.to_pydict())
    merged = merge_parts(tmp_path, SCHEMA, TOKENS)
    assert run_fingerprints(merged, TOKENS.fingerprint, TOKENS.order, ["m"]) == [reference]


def test_identical_records_have_equal_fingerprints_and_one_changed_bit_names_its_document():
    a = _records()
    b = _records()
    assert fingerprint(_table(a), COLUMNS, TOKENS.order, "m") == fingerprint(_table(b), COLUMNS, TOKENS.order, "m")
    row = a["text_id"].index("b") + 4
    b["logprob"][row] = float(np.nextafter(b["logprob"][row], 0.0))  # one ulp
    fa, fb = (fingerprint(_table(x), COLUMNS, TOKENS.order, "m") for x in (a, b))
    assert fa.sha256 != fb.sha256
    assert differing_documents(fa, fb) == ["b"]
    assert fa.documents["a"] == fb.documents["a"] and fa.documents["c"] == fb.documents["c"]
    # a changed rank or target id is found the same way
    c = _records()
    c["rank"][a["text_id"].index("c")] += 1
    assert differing_documents(fa, fingerprint(_table(c), COLUMNS, TOKENS.order, "m")) == ["c"]


def test_documents_only_one_run_holds_are_named_too():
    fa = fingerprint(_table(_records(documents=("a", "b"))), COLUMNS, TOKENS.order, "m")
    fb = fingerprint(_table(_records(documents=("a", "b", "z"))), COLUMNS, TOKENS.order, "m")
    assert differing_documents(fa, fb) == ["z"]


def test_each_model_of_a_run_gets_the_fingerprint_of_its_own_rows():
    one = _records(model="m1", seed=1)
    two = _records(model="m2", seed=2)
    both = {k: one[k] + two[k] for k in one}
    both["pass_index"] = one["pass_index"] + [i + 100 for i in two["pass_index"]]  # pass indices run on across models
    got = run_fingerprints(_table(both), TOKENS.fingerprint, TOKENS.order, ["m1", "m2"])
    assert [f.model for f in got] == ["m1", "m2"]
    assert got[1] == fingerprint(_table(two), COLUMNS, TOKENS.order, "m2")  # as if m2 had run alone
    assert got[0].sha256 != got[1].sha256


def test_a_diff_fingerprints_ref_and_cand_from_their_own_columns():
    """A diff's records hold both models' scores of the same tokens: REF's fingerprint equals a
    token-record run's holding REF's values."""
    from ctxeval.modeldiff.run import DIFF_RECORDS

    base = _records(documents=("a", "b"))
    cand_lp = [x - 0.01 for x in base["logprob"]]
    diff = pa.table({"pass_index": pa.array(base["pass_index"], pa.int32()), "text_id": base["text_id"],
                     "context_len": pa.array(base["context_len"], pa.int32()), "target_pos": pa.array(base["target_pos"], pa.int32()),
                     "target_id": pa.array(base["target_id"], pa.int32()), "ref_logprob": base["logprob"], "ref_rank": base["rank"],
                     "cand_logprob": cand_lp, "cand_rank": base["rank"]})
    ref, cand = run_fingerprints(diff, DIFF_RECORDS.fingerprint, DIFF_RECORDS.order, ["ref", "cand"])
    assert ref.sha256 == fingerprint(_table(base), COLUMNS, TOKENS.order, "ref").sha256
    assert cand.sha256 == fingerprint(_table(base | {"logprob": cand_lp}), COLUMNS, TOKENS.order, "cand").sha256
    assert differing_documents(ref, cand) == ["a", "b"]


def test_unknown_ranks_and_missing_log_probabilities_hash_deterministically():
    records = _records(documents=("a",))
    records["rank"][0] = None  # an API target beyond its top-k
    records["logprob"][1] = None
    first = fingerprint(_table(records), COLUMNS, TOKENS.order, "m")
    assert first == fingerprint(_table(records), COLUMNS, TOKENS.order, "m")
    records["rank"][0] = 1
    assert fingerprint(_table(records), COLUMNS, TOKENS.order, "m").sha256 != first.sha256


def test_fingerprints_round_trip_through_json():
    fp = fingerprint(_table(_records()), COLUMNS, TOKENS.order, "m")
    assert Fingerprint.from_json(fp.to_json()) == fp and fp.short == fp.sha256[:16]


LLAMA = NumericPath("llamacpp", {"llama-cpp-python": "0.3.36"}, "cpu", "AMD EPYC", ("avx2", "avx512f"), ("AVX2", "AVX512"), None, "Q4_K_M", 512, False, "f16", 2)


def test_compact_line_and_differences_of_numeric_paths():
    assert LLAMA.compact() == "llama.cpp 0.3.36 · AMD EPYC AVX-512 · Q4_K_M · f16 KV · n_batch 512 · flash attn off · 2 threads"
    flash = replace(LLAMA, flash_attention=True, threads=1)
    assert differences(LLAMA, flash) == ["flash_attention", "threads"]
    assert differences(LLAMA, NumericPath.from_json(LLAMA.to_json())) == []
    fresh = replace(LLAMA, prefix_reuse=False)
    assert fresh.compact().endswith("2 threads · no prefix reuse") and differences(replace(LLAMA, prefix_reuse=True), fresh) == ["prefix_reuse"]
    assert numeric_path({"backend": "llamacpp", "details": {"prefix_reuse": False}}).prefix_reuse is False
    # a cache that cannot be cut back (a press's: None) has no reuse to differ in
    assert differences(replace(LLAMA, prefix_reuse=True), replace(LLAMA, prefix_reuse=None)) == []
    assert numeric_path({"backend": "hf", "details": {"prefix_reuse": True, "device": "cpu"}}).prefix_reuse is True


def test_numeric_paths_of_api_models_and_ray_workers_record_only_what_is_known():
    api = numeric_path({"name": "openai:gpt-x", "backend": "openai", "path": "http://h/v1", "details": {"api": {"base_url": "http://h/v1"}}})
    assert api.device == "remote" and api.processor == "http://h/v1" and api.model == "gpt-x"
    assert api.threads is None and api.cpu_flags == () and api.n_batch is None
    assert api.compact() == "openai API · remote http://h/v1 · model gpt-x"
    hf = {"name": "hf:x", "backend": "hf", "details": {"device": "cpu", "dtype": "float32", "torch": "2.1", "transformers": "4.5",
                                                      "attn_implementation": "sdpa", "n_threads": 4, "rows_per_block": 64}}
    local = numeric_path(hf)
    assert local.device == "cpu" and local.processor and local.threads == 4 and local.n_batch == 64 and local.flash_attention == "sdpa"
    on_ray = numeric_path(hf, "ray", threads_per_worker=2)
    assert on_ray.device == "ray workers" and on_ray.processor is None and on_ray.cpu_flags == () and on_ray.threads == 2


def test_pair_notes_name_differing_fields_bit_identity_and_differing_documents():
    fa = fingerprint(_table(_records()), COLUMNS, TOKENS.order, "m")
    changed = _records()
    changed["logprob"][changed["text_id"].index("c")] += 1e-9
    fb = fingerprint(_table(changed), COLUMNS, TOKENS.order, "m")
    flash = replace(LLAMA, flash_attention=True)
    notes = pair_numerics((LLAMA, fa), (flash, fb), ("A", "B"))
    assert notes["differing_fields"] == ["flash_attention"] and notes["bit_identical"] is False
    assert notes["differing_documents"] == ["c"]
    assert "flash_attention (off vs on)" in notes["notes"][0] and "1 of 3 documents differ: c" in notes["notes"][1]
    same = pair_numerics((LLAMA, fa), (LLAMA, fa), ("A", "B"))
    assert same["differing_fields"] == [] and same["bit_identical"] is True
    assert "bit-identical" in same["notes"][1] and fa.short in same["notes"][1]
    old = pair_numerics((None, None), (LLAMA, fa), ("REF", "CAND"))
    assert old["differing_fields"] is None and old["bit_identical"] is None and "not recorded for REF" in old["notes"][0]


@pytest.mark.parametrize("n_documents", [1, 400])
def test_a_hundred_thousand_rows_hash_in_one_vectorised_pass(n_documents):
    """100k rows, one or many documents: every document gets its hash, in any row order."""
    n = 100_000
    rng = np.random.default_rng(0)
    docs = np.repeat(np.arange(n_documents), n // n_documents)
    table = pa.table({"pass_index": pa.array(np.arange(n) // 50, pa.int32()), "text_id": pa.array([f"d{d:04d}" for d in docs]),
                      "context_len": pa.array(np.full(n, 64), pa.int32()), "target_pos": pa.array(np.arange(n) % 50, pa.int32()),
                      "target_id": pa.array(rng.integers(0, 262_144, n), pa.int32()), "logprob": -rng.exponential(2.0, n), "rank": rng.integers(1, 1000, n)})
    fp = fingerprint(table.take(rng.permutation(n)), COLUMNS, TOKENS.order, "m")
    assert fp.tokens == n and len(fp.documents) == n_documents
    assert fp == fingerprint(table, COLUMNS, TOKENS.order, "m")


@pytest.mark.parametrize(("version", "models", "says"), [
    (2, [{"name": "m"}], "recorded from manifest version 3 on; this run's manifest is version 2"),
    (3, [], "no model ran here (computed from finished outputs)"),
    (3, [{"name": "m"}], "holds no numeric path or fingerprint (they are recorded for the models a run loads)"),
])
def test_a_manifest_without_numeric_paths_says_why_as_information(version, models, says):
    """What the summary and the report show where a manifest holds neither a numeric path nor a
    fingerprint: the reason, never a bare "not recorded" that reads as a fault."""
    from ctxeval.render.numerics import run_lines
    from ctxeval.render.views import header
    from ctxeval.results.manifest import Manifest

    manifest = Manifest(command="sweep", run_id="r", config={}, models=models, version=version)
    (line,) = run_lines(manifest)
    assert says in line and "not recorded" not in line
    assert says in header(manifest.to_json() | {"version": version}, "sweep")["numerics"]
