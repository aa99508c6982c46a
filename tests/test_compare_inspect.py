"""`ctxeval compare` on inspect_ai logs written by inspect's own runner (`mockllm/model` with
fixed outputs: the right sum, or a wrong one on every fifth question), as a .eval log (a zip of
Zstandard-compressed JSON) and a .json log: the paired difference, flips and McNemar's p equal a
recomputation from the logs, a clear loss fails `--fail-on hurts` with exit 1, epochs are
averaged per sample, and reading a log does not import inspect."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from scipy import stats

from ctxeval import api
from tests.conftest import run_cli

N = 100
WRONG = set(range(0, N, 5))  # 20 questions


def _model(wrong: set[int], wrong_from_epoch: int):
    """mockllm/model answering question i with 7 + i, or 7 + i + 1 where i is in `wrong` from its
    `wrong_from_epoch`-th answer to that question on."""
    from inspect_ai.model import ModelOutput, ModelUsage, get_model

    asked: Counter[int] = Counter()

    def answer(messages, tools, tool_choice, config):
        i = int(messages[-1].text.split("+ ")[1].rstrip("?"))
        asked[i] += 1
        out = ModelOutput.from_content(model="mockllm/model", content=str(7 + i + (i in wrong and asked[i] >= wrong_from_epoch)))
        out.usage = ModelUsage(input_tokens=8, output_tokens=1, total_tokens=9)  # mockllm would count tokens with tiktoken (a download)
        return out

    return get_model("mockllm/model", custom_outputs=answer)


def _log(root: Path, wrong: set[int], fmt: str, epochs: int = 1, wrong_from_epoch: int = 1) -> Path:
    from inspect_ai import Task, eval as inspect_eval
    from inspect_ai.dataset import Sample
    from inspect_ai.scorer import match
    from inspect_ai.solver import generate

    samples = [Sample(input=f"What is 7 + {i}?", target=str(7 + i), id=f"q{i}") for i in range(N)]
    task = Task(dataset=samples, solver=generate(), scorer=match(), name="sums", epochs=epochs)
    (log,) = inspect_eval(task, model=_model(wrong, wrong_from_epoch), log_dir=str(root), log_format=fmt, display="none", max_samples=1)
    assert log.status == "success"
    (path,) = root.glob(f"*.{fmt}")
    return path


@pytest.fixture(scope="module")
def logs(tmp_path_factory) -> dict[str, Path]:
    pytest.importorskip("inspect_ai")
    root = tmp_path_factory.mktemp("byor-inspect")
    return {"right": _log(root / "right", set(), "eval"), "wrong": _log(root / "wrong", WRONG, "json"),
            "epochs": _log(root / "epochs", WRONG, "eval", epochs=2, wrong_from_epoch=2)}


def test_a_clear_loss_between_two_inspect_logs_fails_the_gate(logs, tmp_path):
    done = run_cli("compare", str(logs["right"]), str(logs["wrong"]), "--out", str(tmp_path / "cmp"), "--fail-on", "hurts")
    assert done.returncode == 1, done.stderr
    assert f"ctxeval: --fail-on hurts failed: {logs['wrong'].stem} against {logs['right'].stem} on match: hurts" in done.stderr
    report = api.compare(logs["right"], logs["wrong"], out=tmp_path / "again").report
    (m,) = report["measures"]
    (row,) = m["against_first"]
    assert (m["measure"], m["paired_samples"], row["task"]) == ("match", N, "sums")
    assert row["difference"]["estimate"] == pytest.approx(-100 * len(WRONG) / N)
    assert (row["flips_lost"], row["flips_gained"], row["flips_partial"]) == (len(WRONG), 0, 0)
    assert row["mcnemar_p"] == pytest.approx(stats.binomtest(len(WRONG), len(WRONG), 0.5).pvalue)
    assert row["verdict"]["outcome"] == "hurts" and row["difference"]["high"] < 0
    assert run_cli("compare", str(logs["right"]), str(logs["right"]), "--out", str(tmp_path / "same"), "--fail-on", "hurts").returncode == 0


def test_epochs_are_averaged_per_sample(logs, tmp_path):
    (m,) = api.compare(logs["right"], logs["epochs"], out=tmp_path / "cmp").report["measures"]
    (row,) = m["against_first"]
    # every fifth question right in epoch 1 and wrong in epoch 2: a score of 0.5, a partial pair
    assert row["difference"]["estimate"] == pytest.approx(-100 * 0.5 * len(WRONG) / N)
    assert (row["flips_lost"], row["flips_gained"], row["flips_partial"], row["mcnemar_p"]) == (0, 0, len(WRONG), None)


def test_reading_a_log_does_not_import_inspect(logs):
    code = ("import sys; from ctxeval.byor.inspect_log import read_inspect; "
            f"df = read_inspect(__import__('pathlib').Path({str(logs['right'])!r}), 'a'); "
            "assert len(df) == 100 and df['score'].eq(1).all(); assert 'inspect_ai' not in sys.modules; print('ok')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "ok", done.stderr
