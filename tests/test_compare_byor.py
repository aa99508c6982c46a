"""`ctxeval compare` on NVIDIA RULER prediction folders, kvpress results folders and plain
CSV/Parquet tables of per-sample scores.

The RULER and kvpress fixtures are written the way those tools write them: RULER's
`scripts/pred/call_api.py` appends one `json.dumps` line per sample ({index, pred, input,
outputs, others, truncation, length}) to `pred/<task>.jsonl`; kvpress's `evaluation/evaluate.py`
writes `<dataset>__<data_dir>__<model>__<press>__<ratio>/predictions.csv` with pandas
(`to_csv(index=False)` of the dataset's columns but the context, the references an array column
as `datasets.to_pandas()` gives it) and `metrics.json` (`json.dump(..., indent=4)` of
{task: {"string_match": percent rounded to 2}}). Expected scores are RULER's string-match rules
re-typed here from their definition."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from ctxeval import api
from ctxeval.errors import UserError
from tests.conftest import run_cli


def _match_all(pred: str, refs: list[str]) -> float:
    return sum(r.lower() in pred.lower() for r in refs) / len(refs)


def _match_part(pred: str, refs: list[str]) -> float:
    return float(any(r.lower() in pred.lower() for r in refs))


def _ruler_samples(n: int) -> dict[str, list[dict]]:
    """Per task, n samples with their references: one-needle, multi-value (partial credit) and QA."""
    return {
        "niah_single_1": [{"input": f"... the special magic number for key-{i} is? ", "outputs": [str(1000 + i)]} for i in range(n)],
        "vt": [{"input": f"Find all variables assigned {i}. ", "outputs": [f"X{i}A", f"X{i}B", f"X{i}C"]} for i in range(n)],
        "qa_1": [{"input": f"Question {i}: who? ", "outputs": [f"Person {i}", f"P. {i}"]} for i in range(n)],
    }


def _ruler_pred(root: Path, preds: dict[str, list[str]], n: int) -> Path:
    pred = root / "pred"
    pred.mkdir(parents=True)
    for task, samples in _ruler_samples(n).items():
        with open(pred / f"{task}.jsonl", "at", encoding="utf-8", buffering=1) as fout:
            for index, (sample, text) in enumerate(zip(samples, preds[task])):
                fout.write(json.dumps({"index": index, "pred": text, "input": sample["input"], "outputs": sample["outputs"], "others": {},
                                       "truncation": -1, "length": 4096}) + "\n")
    return root


def test_two_ruler_pred_folders_equal_a_recomputation(tmp_path):
    n = 30
    samples = _ruler_samples(n)
    full = {"niah_single_1": [f" {s['outputs'][0]}." for s in samples["niah_single_1"]],
            "vt": [" ".join(s["outputs"]) for s in samples["vt"]],
            "qa_1": [f"It was {s['outputs'][1]}" for s in samples["qa_1"]]}
    press = {"niah_single_1": [f" {s['outputs'][0]}." if i % 4 else " 7" for i, s in enumerate(samples["niah_single_1"])],
             "vt": [" ".join(s["outputs"][: 3 - i % 3]) for i, s in enumerate(samples["vt"])],
             "qa_1": [f"\x00It was {s['outputs'][0].upper()}" if i % 6 else "nobody" for i, s in enumerate(samples["qa_1"])]}
    a = _ruler_pred(tmp_path / "full" / "synthetic" / "4096", full, n)
    b = _ruler_pred(tmp_path / "press" / "synthetic" / "4096", press, n)
    report = api.compare(a, b, out=tmp_path / "cmp", replicates=200).report
    (m,) = report["measures"]
    assert m["measure"] == "string_match" and m["paired_samples"] == 3 * n
    rows = {r["task"]: r for r in m["against_first"]}
    assert list(rows) == ["mean", "niah_single_1", "qa_1", "vt"]
    pooled_a, pooled_b = [], []
    for task, samples_of in samples.items():
        score = _match_part if task.startswith("qa") else _match_all
        sa = np.array([score(p.strip(), s["outputs"]) for p, s in zip(full[task], samples_of)])
        sb = np.array([score(p.replace("\x00", "\n").strip(), s["outputs"]) for p, s in zip(press[task], samples_of)])
        pooled_a.append(sa), pooled_b.append(sb)
        assert rows[task]["difference"]["estimate"] == pytest.approx(100 * (sb - sa).mean())
        whole = np.isin(sa, (0, 1)) & np.isin(sb, (0, 1))
        assert rows[task]["flips_lost"] == int(((sa == 1) & (sb == 0)).sum())
        assert rows[task]["flips_partial"] == int((~whole & (sa != sb)).sum())
        if whole.all():
            lost, gained = rows[task]["flips_lost"], rows[task]["flips_gained"]
            assert rows[task]["mcnemar_p"] == pytest.approx(stats.binomtest(lost, lost + gained, 0.5).pvalue)
    assert rows["vt"]["flips_partial"] == 20 and rows["vt"]["mcnemar_p"] is None
    assert rows["mean"]["difference"]["estimate"] == pytest.approx(100 * (np.concatenate(pooled_b) - np.concatenate(pooled_a)).mean())
    assert rows["niah_single_1"]["verdict"]["outcome"] == "hurts"  # 8 of 30 lost, none gained


def _kvpress_config(root: Path, press: str, ratio: float, right: np.ndarray, seed: int) -> Path:
    """A config folder as kvpress's evaluate.py writes it, for RULER at 4096 (data_dir)."""
    folder = root / "__".join(["ruler", "4096", "Qwen/Qwen3-8B".replace("/", "--"), press, f"{ratio:.2f}"])
    folder.mkdir(parents=True)
    n = len(right)
    tasks = ["niah_single_1"] * (n // 2) + ["qa_1"] * (n - n // 2)
    answers = [np.array([f"{7000 + i}"], dtype=object) if t.startswith("niah") else np.array([f"Ann {i}", f"A. {i}"], dtype=object) for i, t in enumerate(tasks)]
    predicted = [(f" The number is {a[0]}." if ok else " I do not know.") for a, ok in zip(answers, right)]
    df = pd.DataFrame({"context": ["long context"] * n, "question": [f"Question {i}?" for i in range(n)], "answer_prefix": ["Answer:"] * n,
                       "answer": answers, "task": tasks, "max_new_tokens": [32] * n, "predicted_answer": predicted, "compression_ratio": [ratio] * n})
    df[list(set(df.columns) - {"context"})].to_csv(str(folder / "predictions.csv"), index=False)
    metrics = {}
    for task, part in df.groupby("task"):
        rule = _match_part if task.split("_")[0] == "qa" else _match_all
        metrics[task] = {"string_match": round(sum(rule(p.strip(), list(a)) for p, a in zip(part["predicted_answer"], part["answer"])) / len(part) * 100, 2)}
    with open(str(folder / "metrics.json"), "w") as f:
        json.dump(metrics, f, indent=4)
    return folder


@pytest.fixture
def kvpress_results(tmp_path) -> Path:
    i = np.arange(200)
    base = i % 10 != 0  # 90 % right
    mild = base & ~np.isin(i, (1, 102))  # two right answers lost, one per task: about 1 %
    strong = base & (i % 3 != 0)  # a third of them lost
    root = tmp_path / "results"
    _kvpress_config(root, "no_press", 0.0, base, 0)
    _kvpress_config(root, "knorm", 0.25, mild, 1)
    _kvpress_config(root, "knorm", 0.75, strong, 2)
    return root


def test_a_kvpress_folder_of_three_configs_gives_order_intervals_and_ties(kvpress_results, tmp_path):
    report = api.compare(kvpress_results / "ruler__4096__Qwen--Qwen3-8B__no_press__0.00", kvpress_results / "ruler__4096__Qwen--Qwen3-8B__knorm__0.25",
                         kvpress_results / "ruler__4096__Qwen--Qwen3-8B__knorm__0.75", out=tmp_path / "cmp").report
    whole = api.compare(kvpress_results, out=tmp_path / "whole").report  # the results folder itself: one run per config
    assert [r["run"] for r in whole["runs"]] == sorted(p.name for p in kvpress_results.iterdir())
    assert [v["model"] for v in whole["measures"][0]["ranking"][0]["variants"]][-1] == "ruler__4096__Qwen--Qwen3-8B__knorm__0.75"
    (m,) = report["measures"]
    mean = m["ranking"][0]
    assert mean["task"] == "mean"
    order = [v["model"] for v in mean["variants"]]
    assert order == ["ruler__4096__Qwen--Qwen3-8B__no_press__0.00", "ruler__4096__Qwen--Qwen3-8B__knorm__0.25", "ruler__4096__Qwen--Qwen3-8B__knorm__0.75"]
    groups = [v["groups"] for v in mean["variants"]]
    assert groups[0] == groups[1] == "a" and groups[2] == "b"  # the mild press is tied with the full cache, the strong one apart
    scores = {}
    for folder in kvpress_results.iterdir():
        df = pd.read_csv(folder / "predictions.csv")
        scores[folder.name] = 100 * np.mean(["I do not know" not in p for p in df["predicted_answer"]])
    for v in mean["variants"]:
        assert v["score"] == pytest.approx(scores[v["model"]])
        if v["order"] > 1:
            assert v["to_best"]["low"] <= v["to_best"]["estimate"] <= v["to_best"]["high"] and v["to_best"]["confidence"] > 0.95
    assert mean["variants"][2]["to_best"]["high"] < 0
    rows = {(r["run"], r["task"]): r for r in m["against_first"]}
    assert rows[(order[2], "mean")]["verdict"]["outcome"] == "hurts"


def test_a_kvpress_config_whose_metrics_disagree_is_refused(kvpress_results, tmp_path):
    folder = kvpress_results / "ruler__4096__Qwen--Qwen3-8B__knorm__0.25"
    metrics = json.loads((folder / "metrics.json").read_text())
    metrics["qa_1"]["string_match"] += 3
    (folder / "metrics.json").write_text(json.dumps(metrics))
    done = run_cli("compare", str(kvpress_results / "ruler__4096__Qwen--Qwen3-8B__no_press__0.00"), str(folder), "--out", str(tmp_path / "cmp"))
    assert done.returncode == 2
    assert done.stderr.strip().startswith(f"ctxeval: error: {folder / 'metrics.json'}: qa_1's string_match")
    assert len(done.stderr.strip().splitlines()) == 1


def _table(path: Path, scores: list[float], **columns) -> Path:
    df = pd.DataFrame({"sample": [f"s{i}" for i in range(len(scores))], "score": scores, **columns})
    df.to_parquet(path) if path.suffix == ".parquet" else df.to_csv(path, index=False)
    return path


def test_fail_on_gates_a_loss_and_an_undecided_verdict(tmp_path):
    a = _table(tmp_path / "a.csv", [1.0] * 100)
    worse = _table(tmp_path / "worse.parquet", [0.0] * 20 + [1.0] * 80)
    close = _table(tmp_path / "close.csv", [0.0] + [1.0] * 99)
    assert run_cli("compare", str(a), str(worse), "--out", str(tmp_path / "c1")).returncode == 0
    hurt = run_cli("compare", str(a), str(worse), "--out", str(tmp_path / "c2"), "--fail-on", "hurts")
    assert hurt.returncode == 1 and "worse against a on score: hurts (Δ -20.0 points" in hurt.stderr
    assert run_cli("compare", str(a), str(close), "--out", str(tmp_path / "c3"), "--fail-on", "hurts").returncode == 0
    undecided = run_cli("compare", str(a), str(close), "--out", str(tmp_path / "c4"), "--fail-on", "undecided", "--delta", "0.5")
    assert undecided.returncode == 1 and "close against a on score: too few samples to tell" in undecided.stderr


def test_fewer_than_two_common_samples_is_refused(tmp_path):
    a = _table(tmp_path / "a.csv", [1.0, 0.0, 1.0])
    b = tmp_path / "b.csv"
    pd.DataFrame({"sample": ["s0", "x1", "x2"], "score": [1.0, 1.0, 0.0]}).to_csv(b, index=False)
    with pytest.raises(UserError, match=r"^score: the runs share 1 samples with the same prompt \(they hold a 3, b 3\): at least 2 are needed to pair$"):
        api.compare(a, b, out=tmp_path / "cmp")


def test_cluster_resamples_whole_documents(tmp_path):
    rng = np.random.default_rng(0)
    docs = np.repeat(np.arange(20), 5)
    a = _table(tmp_path / "a.csv", list((rng.random(100) < 0.8).astype(float)), doc=[f"d{d}" for d in docs])
    b = _table(tmp_path / "b.csv", list((rng.random(100) < 0.7).astype(float)), doc=[f"d{d}" for d in docs])
    (m,) = api.compare(a, b, out=tmp_path / "cmp", cluster="doc", replicates=500).report["measures"]
    (row,) = m["against_first"]
    assert row["difference"]["method"] == "BCa-cluster" and row["difference"]["n"] == 20
    sa, sb = pd.read_csv(a)["score"].to_numpy(), pd.read_csv(b)["score"].to_numpy()
    assert row["difference"]["estimate"] == pytest.approx(100 * (sb - sa).mean())
    with pytest.raises(UserError, match="no column 'page' to cluster by"):
        api.compare(a, b, out=tmp_path / "cmp2", cluster="page")


def test_one_run_alone_is_refused(tmp_path):
    a = _table(tmp_path / "a.csv", [1.0, 0.0])
    done = run_cli("compare", str(a), "--out", str(tmp_path / "cmp"))
    assert done.returncode == 2 and done.stderr.strip() == f"ctxeval: error: compare needs at least two runs; {a} holds one: give another"


def test_an_unknown_path_is_one_line(tmp_path):
    other = tmp_path / "notes.txt"
    other.write_text("hello")
    done = run_cli("compare", str(other), str(other), "--out", str(tmp_path / "cmp"))
    assert done.returncode == 2 and done.stderr.strip().startswith(f"ctxeval: error: {other}: not a run ctxeval reads")


def test_the_report_shows_a_compare_run_with_flips_ties_and_samples(tmp_path):
    a = _table(tmp_path / "a.csv", [1.0] * 30)
    b = _table(tmp_path / "b.csv", [0.0, 0.0] + [1.0] * 28)
    c = _table(tmp_path / "c.csv", [1.0, 0.0] + [1.0] * 28)
    api.compare(a, b, c, out=tmp_path / "cmp")
    html = (api.report([tmp_path / "cmp"], out=tmp_path / "report.html").parent / "report.html").read_text()
    assert "Paired comparison of 3 runs" in html and "Order on score, all</strong>" in html
    assert "Samples scored differently on score" in html and "all 2 (of 30 paired)" in html
    cells = ["all", "s0", "1", "0", "1"]  # sample s0: right in a and c, wrong in b
    assert "".join(f'<td class="{"name" if i == 0 else "num"}"><span class="phrase">{c}</span></td>' for i, c in enumerate(cells)) in html
    assert "2 / 0 / 0" in html  # b's flips against a
