"""A command given another command's run directory says so in one line (exit code 2), and
reads the kinds it accepts: real small run directories written by the library's writers."""

from __future__ import annotations

import shutil

import pytest

from ctxeval.results.base import RESULT_FILE

from .conftest import run_cli
from .synthetic_runs import write_answer_quality_run, write_gain_run, write_retrieval_run, write_run

LM = "sweep/score"
PROBES = "scoring/context-gain/effective-length/retrieval"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("kinds")
    return {
        "sweep": write_run(root / "sweep", "tiny", [8, 16], 6, repeats=2),
        "score": write_run(root / "score", "tiny", [8, 16], 6, command="score"),
        "context-gain": write_gain_run(root / "gain", "tiny", summarise=True),
        "retrieval": write_retrieval_run(root / "retrieval", "tiny"),
        "meta-eval": write_answer_quality_run(root / "meta-eval", "meta-eval"),
        "pplqa": write_answer_quality_run(root / "pplqa", "pplqa"),
    }


@pytest.mark.parametrize(
    ("args", "wrong", "reader", "accepted"),
    [
        (["compare", "{sweep}", "{retrieval}"], "retrieval", "compare", LM),
        (["compare", "{pplqa}", "{sweep}"], "pplqa", "compare", LM),
        (["compare", "{context-gain}", "{context-gain}"], "context-gain", "compare", LM),
        (["trends", "{retrieval}"], "retrieval", "trends", LM),
        (["trends", "{meta-eval}"], "meta-eval", "trends", LM),
    ],
)
def test_another_commands_run_is_refused_in_one_line(runs, tmp_path, args, wrong, reader, accepted):
    args = [a.format(**runs) if a.startswith("{") else a for a in args] + (["--out", str(tmp_path / "out")] if reader != "summary" else [])
    r = run_cli(*args)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert r.stderr == f"ctxeval: error: {runs[wrong]} is a {wrong} run; {reader} reads {accepted} runs\n"
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("kind", "title"), [("retrieval", "# Line retrieval"), ("context-gain", "# Context gain")])
def test_summary_prints_another_kinds_tables_and_refuses_the_scoring_options(runs, kind, title):
    """`summary` reads any kind: its tables, rendered from its rows, as its Markdown holds them;
    the metric overrides are a scoring run's and are refused in one line."""
    printed = run_cli("summary", str(runs[kind]))
    assert printed.returncode == 0, printed.stderr
    assert printed.stdout.startswith(title) and "|" in printed.stdout and not printed.stderr
    refused = run_cli("summary", str(runs["meta-eval"]), "--cutoff", "full")
    assert refused.returncode == 2
    assert refused.stderr == f"ctxeval: error: --cutoff applies to sweep/score runs; {runs['meta-eval']} holds a meta-eval result\n"


def test_probe_report_refuses_another_result_in_one_line(runs, tmp_path):
    first = run_cli("probe-report", str(runs["sweep"]), "--out", str(tmp_path / "probes"))
    assert first.returncode == 0, first.stderr
    r = run_cli("probe-report", str(runs["sweep"]), str(tmp_path / "probes"), "--out", str(tmp_path / "out"))
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert r.stderr == f"ctxeval: error: {tmp_path / 'probes'} holds a probe-report result (from `ctxeval probe-report`); probe-report reads {PROBES} results\n"
    assert not (tmp_path / "out").exists()


def test_probe_report_refuses_a_folder_without_a_header_in_one_line(runs, tmp_path):
    old = tmp_path / "old"
    shutil.copytree(runs["context-gain"], old)
    (old / RESULT_FILE).unlink()  # as a ctxeval before output headers left it
    r = run_cli("probe-report", str(old), "--out", str(tmp_path / "out"))
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert r.stderr.startswith(f"ctxeval: error: {old} has no {RESULT_FILE}") and r.stderr.count("\n") == 1
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("reader", ["summary", "trends"])
@pytest.mark.parametrize("kind", ["sweep", "score"])
def test_scoring_runs_are_read(runs, tmp_path, reader, kind):
    r = run_cli(reader, str(runs[kind]), *(["--out", str(tmp_path / "t")] if reader == "trends" else []))
    assert r.returncode == 0, r.stderr


def test_probe_report_and_report_read_every_kind_they_name(runs, tmp_path):
    probes = run_cli("probe-report", *(str(runs[k]) for k in ("sweep", "context-gain", "retrieval")), "--out", str(tmp_path / "probes"))
    assert probes.returncode == 0, probes.stderr
    everything = run_cli("report", *(str(d) for d in runs.values()), "--out", str(tmp_path / "report.html"))
    assert everything.returncode == 0, everything.stderr
    assert (tmp_path / "report.html").is_file()


def _headerless(runs, tmp_path, kind):
    """A copy of a run as ctxeval wrote it before output folders carried a header."""
    import shutil

    old = tmp_path / f"old-{kind}"
    shutil.copytree(runs[kind], old)
    (old / "result.json").unlink()
    return old


@pytest.mark.parametrize(("reader", "kind"), [("probe-report", "sweep"), ("probe-report", "context-gain"), ("probe-report", "retrieval"),
                                              ("report", "sweep"), ("report", "pplqa"), ("report", "meta-eval")])
def test_a_folder_from_before_headers_is_refused_in_one_line(runs, tmp_path, reader, kind):
    old = _headerless(runs, tmp_path, kind)
    out = tmp_path / ("out.html" if reader == "report" else "out")
    r = run_cli(reader, str(old), "--out", str(out))
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert r.stderr.count("\n") == 1 and "no result.json" in r.stderr and "re-run the command that made it" in r.stderr, r.stderr
    assert not out.exists()


@pytest.mark.parametrize("reader", ["summary", "trends"])
def test_records_of_a_scoring_run_from_before_headers_still_read(runs, tmp_path, reader):
    """summary, compare and trends read a scoring run's records and manifest, which did not
    change: a run written before results carried a header works as it did."""
    old = _headerless(runs, tmp_path, "sweep")
    r = run_cli(reader, str(old), *(["--out", str(tmp_path / "t")] if reader == "trends" else []))
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize(
    ("args", "target"),
    [
        (["compare", "{sweep}", "{score}"], "retrieval"),
        (["trends", "{sweep}"], "pplqa"),
        (["probe-report", "{sweep}"], "score"),
    ],
)
def test_an_out_holding_another_commands_output_is_refused_before_any_work(runs, tmp_path, args, target):
    import shutil

    taken = tmp_path / "taken"
    shutil.copytree(runs[target], taken)
    before = sorted(p.name for p in taken.iterdir())
    r = run_cli(*[a.format(**runs) if a.startswith("{") else a for a in args], "--out", str(taken))
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert r.stderr.count("\n") == 1 and f"holds a {target} run" in r.stderr and "choose another --out" in r.stderr, r.stderr
    assert sorted(p.name for p in taken.iterdir()) == before


@pytest.mark.parametrize("args", [
    ["score", "demo", "--window", "64"], ["sweep", "demo", "--lengths", "16"], ["context-gain", "demo", "--window", "64", "--short", "8"],
    ["effective-length", "demo", "--lengths", "16,32", "--starts", "2", "--targets", "4"], ["retrieval", "--lines", "8"],
    ["diff", "gemma-3-270m", "gemma-3-270m?n_batch=7", "demo", "--window", "64"],
])
def test_out_naming_a_regular_file_is_one_line_and_exit_2(args, tmp_path):
    target = tmp_path / "a-file"
    target.write_text("not a folder")
    result = run_cli(*args, "--out", str(target))
    assert result.returncode == 2 and result.stderr.strip() == f"ctxeval: error: --out {target} is a file, not a folder; choose another --out or remove it"


def test_refusals_name_a_kind_with_its_article(tmp_path):
    from ctxeval.errors import a_or_an

    assert a_or_an("effective-length") == "an effective-length" and a_or_an("sweep") == "a sweep" and a_or_an("retrieval") == "a retrieval"
