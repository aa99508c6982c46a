"""Model files written once into ctxeval's cache: two users of one cache at the same moment (Ray
actors on one node, parallel test workers) get one conversion, and neither reads it half written."""

import json
import threading
import time
from pathlib import Path

from ctxeval.backends import hf_embedded
from ctxeval.backends.model_files import cache_base


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
