"""The typed manifest: round trip, earlier versions, unknown keys, and old run directories."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from ctxeval import api
from ctxeval.metrics.config import MetricConfig
from ctxeval.errors import UserError
from ctxeval.results.rows import frame
from ctxeval.results.scoring import v1_rows
from ctxeval.results.manifest import MANIFEST_FILE, MANIFEST_VERSION, Manifest, read_manifest, write_manifest

V1_RUN = Path(__file__).parent / "fixtures" / "run-v1"


def _manifest(**changes) -> Manifest:
    base = dict(
        command="score",
        run_id="abc",
        config={"command": "score", "top_k": 5, "temperatures": [0.5, 1.0], "metrics": {"cutoff": None, "alphas": [0.1], "approx_k": 5, "penalty": 3.0}},
        models=[{"name": "m1", "vocab_size": 10}, {"name": "m2", "vocab_size": 7}],
        texts=[{"text_id": "t", "sha256": "ff"}],
    )
    return Manifest(**(base | changes))


def test_round_trip_through_disk_keeps_every_field(tmp_path):
    m = _manifest(status="incomplete", failed_passes=[{"pass_index": 3}], api_usage={"m1": {"requests": np.int64(2)}}, timing={"resumed": True})
    write_manifest(tmp_path, m)
    back = read_manifest(tmp_path)
    assert back.version == MANIFEST_VERSION == 3
    assert back.status == "incomplete" and back.failed_passes == [{"pass_index": 3}]
    assert back.api_usage == {"m1": {"requests": 2}} and back.timing == {"resumed": True}
    assert back == Manifest.from_json(json.loads((tmp_path / MANIFEST_FILE).read_text()))
    assert back.to_json() == json.loads((tmp_path / MANIFEST_FILE).read_text())


def test_started_is_written_as_running_and_unset_fields_are_left_out(tmp_path):
    write_manifest(tmp_path, _manifest())
    on_disk = json.loads((tmp_path / MANIFEST_FILE).read_text())
    assert on_disk["status"] == "running"  # as every earlier version wrote it
    assert on_disk["version"] == 3 and on_disk["command"] == "score"
    assert "timing" not in on_disk and "failed_passes" not in on_disk and "extra" not in on_disk
    assert read_manifest(tmp_path).status == "started"


def test_typed_views_of_the_config():
    m = _manifest()
    assert m.metrics == MetricConfig(None, (0.1,), 5, 3.0)
    assert m.temperatures == (0.5, 1.0) and m.top_k == 5
    assert m.model_names == ["m1", "m2"] and m.vocab_sizes == {"m1": 10, "m2": 7}
    assert m.text_ids == ["t"] and m.text_sha256 == {"t": "ff"}


def test_unknown_keys_are_kept_through_a_rewrite(tmp_path):
    data = _manifest().to_json() | {"from_the_future": {"x": [1, 2]}}
    (tmp_path / MANIFEST_FILE).write_text(json.dumps(data))
    m = read_manifest(tmp_path)
    assert m.extra == {"from_the_future": {"x": [1, 2]}}
    m.status = "complete"
    write_manifest(tmp_path, m)
    assert json.loads((tmp_path / MANIFEST_FILE).read_text())["from_the_future"] == {"x": [1, 2]}


def test_a_version_1_manifest_reads_as_version_1():
    """Version 1 had no `version`, a `ctxeval_manifest` marker, and a sweep's command only in its config."""
    m = read_manifest(V1_RUN)
    raw = json.loads((V1_RUN / MANIFEST_FILE).read_text())
    assert "version" not in raw and raw["ctxeval_manifest"] == 1 and "command" not in raw
    assert m.version == 1 and m.command == "sweep" and m.status == "complete"
    assert m.run_id == raw["run_id"] and m.plan == raw["plan"] and m.extra == {}


def test_version_1_running_and_retrieval_manifests():
    running = Manifest.from_json({"ctxeval_manifest": 1, "run_id": "r", "status": "running", "config": {"command": "score"}, "models": []})
    assert (running.version, running.status, running.command) == (1, "started", "score")
    retrieval = Manifest.from_json({"ctxeval_manifest": 1, "command": "retrieval", "run_id": "r", "status": "complete", "config": {}, "models": [], "lines_for_tokens": None})
    assert retrieval.command == "retrieval" and retrieval.lines_for_tokens is None


def test_an_old_run_directory_summarises_to_its_stored_summary(tmp_path):
    """Summaries recomputed from a version-1 run equal those the old code wrote (same records,
    same summary code: equal to 1e-12 relative), its intervals read as the scoring result's
    version 1 (`<metric>_lo`/`_hi`) is read."""
    run = tmp_path / "old"
    shutil.copytree(V1_RUN, run)
    groups = frame(json.loads((V1_RUN / "summary.json").read_text())["groups"])
    assert {"ppl_lo", "ppl_hi", "interval"} <= set(groups.columns)
    result = api.summary(run)
    stored = v1_rows(groups, result.metrics, groups["interval"]).to_dict(orient="records")
    assert result.manifest.version == 1
    rows = result.summary.to_dict(orient="records")
    assert len(rows) == len(stored)
    for row, old in zip(rows, stored):
        assert set(old) <= set(row)
        for key, value in old.items():
            if isinstance(value, float) and math.isnan(value):
                assert math.isnan(row[key]) or key.endswith(".se"), key  # a bootstrap's standard error: its replicates were not kept
            elif isinstance(value, float):
                assert row[key] == pytest.approx(value, rel=1e-12), key
            elif value is None:
                assert row[key] is None or (isinstance(row[key], float) and math.isnan(row[key])), key
            else:
                assert row[key] == value, key


def test_run_result_manifest_still_reads_by_key():
    m = _manifest(api_usage={"m1": {"requests": 2}})
    assert m["api_usage"]["m1"]["requests"] == 2 and m["run_id"] == "abc"


@pytest.mark.parametrize("content", ["{not json", json.dumps({"run_id": "x"}), json.dumps([1, 2])])
def test_a_broken_manifest_is_a_user_error(tmp_path, content):
    (tmp_path / MANIFEST_FILE).write_text(content)
    with pytest.raises(UserError, match="not a valid ctxeval manifest"):
        read_manifest(tmp_path)


def test_a_directory_without_manifest_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="not a ctxeval run directory"):
        read_manifest(tmp_path)


def test_the_tables_a_result_carries_are_the_tables_written(tmp_path):
    run = tmp_path / "old"
    shutil.copytree(V1_RUN, run)
    result = api.summary(run, write=True)
    assert result.tables and (run / "tables.md").read_text() == result.tables
    assert result.paths()["tables"] == run / "tables.md" and result.paths()["records"].is_file()


def test_version_3_keeps_typed_numeric_paths_and_fingerprints(tmp_path):
    from ctxeval.results.numeric_path import NumericPath
    from ctxeval.results.fingerprint import Fingerprint

    paths = [NumericPath("llamacpp", {"llama-cpp-python": "0.3.36"}, "cpu", "AMD EPYC", ("avx2",), ("AVX2",), None, "Q4_K_M", 512, False, "f16", 2),
             NumericPath("openai", device="remote", processor="http://h/v1", model="m2")]
    prints = [Fingerprint("m1", 3, "ab" * 32, {"t": "cd" * 32}), Fingerprint("m2", 3, "ef" * 32, {"t": "ef" * 32})]
    write_manifest(tmp_path, _manifest(numeric_paths=paths, fingerprints=prints))
    on_disk = json.loads((tmp_path / MANIFEST_FILE).read_text())
    assert on_disk["numeric_paths"][0]["cpu_flags"] == ["avx2"] and on_disk["fingerprints"][1]["sha256"] == "ef" * 32
    back = read_manifest(tmp_path)
    assert back.numeric_paths == paths and back.fingerprints == prints
    assert back.numeric_path("m2") == paths[1] and back.fingerprint("m1") == prints[0] and back.fingerprint("m3") is None


def test_a_version_2_manifest_reads_without_numeric_paths_or_fingerprints():
    m = Manifest.from_json({"version": 2, "command": "score", "run_id": "r", "config": {}, "models": [{"name": "m"}]})
    assert m.version == 2 and m.numeric_paths is None and m.fingerprints is None and m.numeric_path("m") is None


def test_a_manifest_of_a_later_version_is_refused_in_one_line_naming_it(tmp_path):
    (tmp_path / MANIFEST_FILE).write_text(json.dumps({"version": MANIFEST_VERSION + 1, "command": "score", "run_id": "r", "config": {}, "models": []}))
    with pytest.raises(UserError, match=f"manifest version {MANIFEST_VERSION + 1} is newer than this ctxeval reads") as err:
        read_manifest(tmp_path)
    assert "\n" not in str(err.value)
