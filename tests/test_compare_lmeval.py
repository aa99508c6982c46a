"""`ctxeval compare` on lm-evaluation-harness output folders written by lm-eval itself (its
`dummy` model, which answers with random log-likelihoods, on a local multiple-choice task, with
lm-eval's EvaluationTracker writing `samples_<task>_<date>.jsonl` as `--output_path
--log_samples` does): the paired difference, flips, McNemar's p and the answer log p difference
equal a recomputation from the samples files; three folders lead with the ordered runs and
their tie groups; a run made with a limit pairs on the common samples; a changed prompt is named."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from ctxeval import api
from ctxeval.errors import UserError
from tests.conftest import run_cli

N_QUESTIONS = 60
LIMIT = 40


def _write_task(root: Path) -> Path:
    questions = [{"question": f"Question {i}: which word is right?", "choices": ["alpha", "beta", "gamma"], "answer": i % 3} for i in range(N_QUESTIONS)]
    data = root / "mc.jsonl"
    data.write_text("".join(json.dumps(q) + "\n" for q in questions))
    tasks = root / "tasks"
    tasks.mkdir()
    (tasks / "byor_mc.yaml").write_text(
        f"task: byor_mc\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: {data}\n"
        "output_type: multiple_choice\ntest_split: test\ndoc_to_text: '{{question}}'\ndoc_to_choice: '{{choices}}'\n"
        "doc_to_target: '{{answer}}'\nmetric_list:\n  - metric: acc\n"
    )
    return tasks


_LM_EVAL_RUN = """
import sys
from lm_eval import simple_evaluate
from lm_eval.loggers import EvaluationTracker
from lm_eval.tasks import TaskManager

tasks, out, seed, limit = sys.argv[1], sys.argv[2], int(sys.argv[3]), None if sys.argv[4] == "-" else int(sys.argv[4])
tracker = EvaluationTracker(output_path=out)
results = simple_evaluate(model="dummy", tasks=["byor_mc"], task_manager=TaskManager(include_path=tasks), log_samples=True,
                          bootstrap_iters=0, random_seed=seed, limit=limit, evaluation_tracker=tracker)
samples = results.pop("samples")
tracker.save_results_aggregated(results=results, samples=samples)
for task in results["configs"]:
    tracker.save_results_samples(task_name=task, samples=samples[task])
"""


def _run_lm_eval(tasks: Path, out: Path, seed: int, limit: int | None, env: dict[str, str]) -> Path:
    """One lm-eval run of the dummy model, written as the lm_eval CLI writes it, in its own
    process as the CLI runs: huggingface_hub reads HF_HUB_OFFLINE when it is imported, so in a
    test process that imported it earlier the dummy model's tokenizer lookup went to the network
    and waited out its retries (45 s a run)."""
    proc = subprocess.run([sys.executable, "-c", _LM_EVAL_RUN, str(tasks), str(out), str(seed), "-" if limit is None else str(limit)],
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return out


@pytest.fixture(scope="module")
def lm_runs(tmp_path_factory) -> dict[str, Path]:
    pytest.importorskip("lm_eval")
    root = tmp_path_factory.mktemp("byor-lmeval")
    env = dict(os.environ, HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1", HF_DATASETS_CACHE=str(root / "hf-datasets"))
    tasks = _write_task(root)
    return {name: _run_lm_eval(tasks, root / name, seed, limit, env) for name, seed, limit in (("a", 1, None), ("b", 2, None), ("c", 3, None), ("short", 4, LIMIT))}


def _lines(run: Path) -> dict[int, dict]:
    (file,) = run.rglob("samples_byor_mc_*.jsonl")
    return {line["doc_id"]: line for line in map(json.loads, file.read_text().splitlines())}


def _answer_logp(line: dict) -> float:
    lls = np.array([float(r[0]) for r in line["filtered_resps"]])
    return float(lls[int(line["target"])] - np.log(np.exp(lls).sum()))


def test_two_lm_eval_folders_equal_a_recomputation_from_the_samples(lm_runs, tmp_path):
    a, b = _lines(lm_runs["a"]), _lines(lm_runs["b"])
    acc_a = np.array([a[i]["acc"] for i in range(N_QUESTIONS)])
    acc_b = np.array([b[i]["acc"] for i in range(N_QUESTIONS)])
    assert (acc_a != acc_b).any()  # the two seeds answer differently
    lost, gained = int(((acc_a == 1) & (acc_b == 0)).sum()), int(((acc_a == 0) & (acc_b == 1)).sum())

    result = api.compare(lm_runs["a"], lm_runs["b"], out=tmp_path / "cmp", replicates=500)
    (acc,) = result.report["measures"]
    assert acc["measure"] == "acc" and acc["paired_samples"] == N_QUESTIONS and acc["ranking"] == []
    (row,) = acc["against_first"]
    assert row["task"] == "byor_mc" and row["n"] == N_QUESTIONS
    assert row["difference"]["estimate"] == pytest.approx(100 * (acc_b.mean() - acc_a.mean()), abs=1e-9)
    assert (row["score"], row["reference_score"]) == (pytest.approx(100 * acc_b.mean()), pytest.approx(100 * acc_a.mean()))
    assert (row["flips_lost"], row["flips_gained"], row["flips_partial"]) == (lost, gained, 0)
    assert row["mcnemar_p"] == pytest.approx(stats.binomtest(lost, lost + gained, 0.5).pvalue, rel=1e-9)
    low, high = row["difference"]["low"], row["difference"]["high"]
    assert low < row["difference"]["estimate"] < high and row["difference"]["method"] == "Tango score"
    expected = "within δ" if -5 <= low and high <= 5 else "hurts" if high < 0 else "gains" if low > 0 else "too few samples to tell"  # the field's order
    assert row["verdict"]["outcome"] == expected
    logp = np.array([_answer_logp(b[i]) - _answer_logp(a[i]) for i in range(N_QUESTIONS)])
    assert row["answer_logp"]["difference"]["estimate"] == pytest.approx(logp.mean(), abs=1e-12)
    assert row["answer_logp"]["difference"]["low"] < logp.mean() < row["answer_logp"]["difference"]["high"]
    answer = result.markdown.splitlines()[2]  # the answer first: the line under the title
    assert answer.startswith(f"- acc: b − a = {100 * (acc_b.mean() - acc_a.mean()):+.1f} [{low:+.1f}, {high:+.1f}] points, {expected}")
    assert answer.endswith(f"; {lost} right → wrong, {gained} wrong → right, McNemar p {row['mcnemar_p']:.3g}")
    md = (tmp_path / "cmp" / "compare.md").read_text()
    assert f"| b | byor_mc | {N_QUESTIONS} |" in md and f"{lost} / {gained} / 0" in md


def test_three_lm_eval_folders_lead_with_the_order_and_tie_groups(lm_runs, tmp_path):
    result = api.compare(lm_runs["a"], lm_runs["b"], lm_runs["c"], out=tmp_path / "cmp", replicates=200)
    (acc,) = result.report["measures"]
    (cell,) = acc["ranking"]
    means = {name: 100 * np.mean([line["acc"] for line in _lines(lm_runs[name]).values()]) for name in "abc"}
    order = [v["model"] for v in cell["variants"]]
    assert order == sorted(means, key=lambda n: -means[n])
    for v in cell["variants"]:
        assert v["score"] == pytest.approx(means[v["model"]])
        assert v["groups"] and 1 <= v["rank"]["low"] <= v["rank"]["high"] <= 3
    assert [r["run"] for r in acc["against_first"]] == ["b", "c"]
    letters = " > ".join(f"{v['model']} ({v['groups']})" for v in cell["variants"])
    assert result.markdown.splitlines()[2] == f"- acc: order (runs sharing a letter are tied) {letters}"
    first = result.markdown.split("## acc", 1)[1].lstrip().splitlines()
    assert first[2].startswith("Order, byor_mc (Δ to the best: 98.33 % Tango's score interval, Bonferroni over 3 pairs, simultaneous 95 %")
    assert first[6].startswith(f"| 1 | {order[0]} |")


def test_a_run_with_a_limit_pairs_on_the_common_samples(lm_runs, tmp_path):
    result = api.compare(lm_runs["a"], lm_runs["short"], out=tmp_path / "cmp", replicates=200)
    (acc,) = result.report["measures"]
    assert acc["paired_samples"] == LIMIT and acc["left_out"] == {"a": N_QUESTIONS - LIMIT, "short": 0}
    a, short = _lines(lm_runs["a"]), _lines(lm_runs["short"])
    expected = 100 * np.mean([short[i]["acc"] - a[i]["acc"] for i in short])
    assert acc["against_first"][0]["difference"]["estimate"] == pytest.approx(expected)
    assert f"left out, not in every run: a {N_QUESTIONS - LIMIT}" in result.markdown


def test_the_same_doc_id_with_another_prompt_is_named_not_paired(lm_runs, tmp_path):
    changed = tmp_path / "b-changed"
    shutil.copytree(lm_runs["b"], changed)
    (file,) = changed.rglob("samples_*.jsonl")
    lines = [json.loads(t) for t in file.read_text().splitlines()]
    lines[3]["prompt_hash"] = "0" * 64
    file.write_text("".join(json.dumps(line) + "\n" for line in lines))
    result = api.compare(lm_runs["a"], changed, out=tmp_path / "cmp", replicates=200)
    (acc,) = result.report["measures"]
    assert acc["paired_samples"] == N_QUESTIONS - 1
    assert acc["prompt_conflicts"] == [{"task": "byor_mc", "sample": "3", "runs": ["b-changed"]}]
    assert "Not paired: 1 samples with the same id but another prompt than the first run's: byor_mc/3 (b-changed)" in result.markdown


def test_a_samples_file_without_doc_id_is_one_line_and_exit_2(lm_runs, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(lm_runs["b"], broken)
    (file,) = broken.rglob("samples_*.jsonl")
    lines = file.read_text().splitlines()
    first = json.loads(lines[0])
    del first["doc_id"]
    file.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    done = run_cli("compare", str(lm_runs["a"]), str(broken), "--out", str(tmp_path / "cmp"))
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [f"ctxeval: error: {file}: line 1 has no doc_id (not an lm-eval 0.4 samples line)"]


def test_a_folder_of_several_models_runs_is_refused(lm_runs, tmp_path):
    both = tmp_path / "both"
    shutil.copytree(lm_runs["a"], both / "a")
    shutil.copytree(lm_runs["b"], both / "b")
    with pytest.raises(UserError, match=r"holds the samples of several runs \(a/\w+, b/\w+\): pass each folder as a run$"):
        api.compare(both, lm_runs["c"], out=tmp_path / "cmp")
