"""scripts/test_part.sh, one part of scripts/test.sh: a pytest-xdist worker that dies costs only the
test it was running; the part's other tests still run, and the summary reports each death."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_a_part_whose_workers_die_still_runs_its_other_tests_and_reports_the_deaths(tmp_path):
    """Two deaths in one part (as a loaded machine gave): before, the second ended the part
    (`--max-worker-restart 1`) with the modules' other tests unrun, and each module's crashed
    test was dealt again to the new worker."""
    (tmp_path / "test_first.py").write_text("import os\n\n\ndef test_ends_its_worker():\n    os._exit(1)\n\n\ndef test_after_it():\n    pass\n\n\ndef test_last():\n    pass\n")
    (tmp_path / "test_second.py").write_text("import os\n\n\ndef test_before_it():\n    pass\n\n\ndef test_ends_its_worker_too():\n    os._exit(1)\n\n\ndef test_after_it():\n    pass\n")
    (tmp_path / "test_third.py").write_text("def test_elsewhere():\n    pass\n")
    result = subprocess.run(["bash", "scripts/test_part.sh", "1", str(tmp_path), "-p", "no:cacheprovider", "-q"], cwd=ROOT, capture_output=True,
                            text=True, timeout=600, env=dict(os.environ, CTXEVAL_TEST_WALL="0"))
    out = result.stdout
    assert result.returncode == 1, out + result.stderr
    assert "2 failed, 5 passed" in out, out
    deaths = out.split("2 pytest workers died; the other tests of their modules ran on new workers")[1]
    for name in ("test_first.py::test_ends_its_worker", "test_second.py::test_ends_its_worker_too"):
        assert f"crashed while running '{name}'" in deaths, out
