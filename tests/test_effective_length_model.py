"""effective-length end to end on the embedded model: truncation controls are exactly the model
with its last N tokens, they are recovered on a real book, a killed run resumes to the same
records, and bad input is one line."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from ctxeval import api
from ctxeval.results.records import STOP_AFTER_PASSES_ENV, read_records

from .conftest import FIXTURES, SHARED_DATA, needs_shared, run_cli

pytestmark = pytest.mark.model

WIKI = FIXTURES / "wikitext2-test-head.txt"
BOOK = SHARED_DATA / "gutenberg" / "austen-emma.txt"
CONTROL = "gemma-3-270m?max_context=32"


@pytest.fixture(scope="module")
def wiki_head(tmp_path_factory):
    """The first 800 characters of WIKI (about 190 tokens, CRLFs kept): room for the 2 spans of 8
    targets after 128 tokens of context, and a short text for `score --method fixed`, which makes
    one pass per token up to the last target (the whole 6,000-character file put the spans near
    token 1,280: 1,250 passes)."""
    with open(WIKI, encoding="utf-8", newline="") as f:
        head = f.read(800)
    path = tmp_path_factory.mktemp("wiki") / "wikitext2-test-head-800.txt"
    path.write_bytes(head.encode("utf-8"))
    return path


@pytest.fixture(scope="module")
def wiki_run(tmp_path_factory, wiki_head):
    out = tmp_path_factory.mktemp("el") / "run"
    return api.effective_length([str(wiki_head)], models=("gemma-3-270m", CONTROL), lengths=(16, 32, 64, 128), starts=2, targets=8,
                                replicates=200, out=out, n_threads=1)


def test_a_control_scores_each_capped_target_exactly_as_a_fixed_window_of_n_tokens(wiki_run, wiki_head, tmp_path):
    """A capped target's pass is BOS + its last N tokens, the very pass `score --method fixed
    --head skip` makes: the records are equal bit for bit (docs/numerics.md)."""
    records = read_records(wiki_run.run_dir)
    control = records[(records["model"] == CONTROL) & (records["context_len"] == 32)].set_index("target_pos")
    assert len(control) == 2 * 8  # every target of both spans once, whatever the length
    last = int(control.index.max()) + 1
    fixed = api.score([str(wiki_head)], method="fixed", window=32, head="skip", max_tokens=last, out=tmp_path / "fixed", n_threads=1)
    reference = read_records(fixed.run_dir).set_index("target_pos").loc[control.index]
    np.testing.assert_array_equal(control["logprob"].to_numpy(), reference["logprob"].to_numpy())
    np.testing.assert_array_equal(control["rank"].to_numpy(), reference["rank"].to_numpy())


def test_a_control_below_its_cap_scores_as_the_model(wiki_run):
    """Targets whose context is already at most N are scored in a pass cut after them: the same
    context as the model's pass, a shorter batch; measured equal within 1e-5 nats (AMD AVX-512)."""
    targets = wiki_run.targets
    base = targets[targets["model"] == "gemma-3-270m"].set_index(["text_id", "span", "j", "length"])
    control = targets[targets["model"] == CONTROL].set_index(["text_id", "span", "j", "length"])
    below = control["context_len"] < 32
    delta = (control.loc[below, "logprob"] - base.loc[control.index[below], "logprob"]).abs()
    assert len(delta) > 0 and delta.max() < 1e-5
    capped = control[~below]
    assert (capped["context_len"] == 32).all() and (base.loc[capped.index, "context_len"] >= 32).all()


def test_the_result_reads_back_and_every_target_has_every_length(wiki_run):
    again = api.read_result(wiki_run.run_dir)
    assert again.summary == json.loads(json.dumps(wiki_run.summary))
    t = again.targets
    assert len(t) == 2 * 2 * 8 * 4 and set(t["length"]) == {16, 32, 64, 128}
    assert {"logprob", "rank", "avg", "key", "context_len"} <= set(t.columns)
    assert (t.loc[t["model"] == "gemma-3-270m", "context_len"] == t.loc[t["model"] == "gemma-3-270m", "length"] + t.loc[t["model"] == "gemma-3-270m", "j"]).all()


@needs_shared(BOOK)
def test_controls_are_recovered_on_a_real_book(tmp_path):
    # The book's first 100,000 characters (its first chapters, about 25,000 tokens; tokenizing all
    # 887,000 for each model took a tenth of the run), lengths to 256: two lengths past the
    # control's cap show its curve flat (512 took a fifth of the run).
    with open(BOOK, encoding="utf-8", newline="") as f:
        head = f.read(100_000)
    book = tmp_path / BOOK.name
    book.write_bytes(head.encode("utf-8"))
    result = api.effective_length([str(book)], models=("gemma-3-270m", "gemma-3-270m?max_context=64"), lengths=(16, 32, 64, 128, 256),
                                  starts=6, targets=16, unit="span", replicates=1000, out=tmp_path / "book")
    control = result.effective_length("gemma-3-270m?max_context=64")
    assert control["value"] == 64 and control["low"] <= 64 <= control["high"]
    assert result.effective_length("gemma-3-270m")["value"] >= 64


def test_a_killed_run_resumes_to_the_uninterrupted_records(tmp_path):
    args = ("effective-length", str(WIKI), "--lengths", "16,64", "--starts", "2", "--targets", "8", "--replicates", "200", "--quiet", "--threads", "1",
            "--model", "gemma-3-270m", "--model", CONTROL)
    whole = run_cli(*(a for a in args if a != "--quiet"), "--out", str(tmp_path / "whole"))
    assert whole.returncode == 0, whole.stderr
    # the answer first: the control's verdict, L* per model (not measurable from one document), and
    # the control's gain lost and share kept against the reference
    head = whole.stdout.splitlines()[:12]
    assert head[0] == "# Effective context length" and head[2].startswith("**Effective context length**: 2 spans of 8 targets in 1 document(s)")
    reference = next(line for line in head if line.startswith("| gemma-3-270m |"))
    control = next(line for line in head if line.startswith(f"| {CONTROL} |"))
    assert reference.endswith("| reference | — |") and "no interval" in reference
    cells = [c.strip() for c in control.strip("|").split("|")]
    assert len(cells) == 7 and cells[1] == "too few samples to tell" and cells[2] == "not measurable at this size"
    assert all("no interval" in cells[i] for i in (4, 5))  # one document: no interval for the gain or the gain lost
    assert float(cells[3]) < 0  # the mean log-probability at the longest length
    assert "(no interval (one document)" in cells[6] or cells[6] == "undefined (the reference gains nothing)"
    killed = run_cli(*args, "--out", str(tmp_path / "killed"), env={STOP_AFTER_PASSES_ENV: "3"})
    assert killed.returncode == 130, killed.stderr
    assert not (tmp_path / "killed" / "records.parquet").exists()
    resumed = run_cli(*args, "--out", str(tmp_path / "killed"))
    assert resumed.returncode == 0, resumed.stderr
    pd.testing.assert_frame_equal(read_records(tmp_path / "killed"), read_records(tmp_path / "whole"))
    assert pq.read_table(tmp_path / "killed" / "targets.parquet").equals(pq.read_table(tmp_path / "whole" / "targets.parquet"))


@pytest.mark.parametrize("args, message", [
    (("SHORT", "--lengths", "512,1024"), "tokens; 8 spans of 32 targets after 1024 tokens of context need at least 1280"),
    (("demo", "--lengths", "1024,65536"), "context length 65536 with --targets 32 needs 65569 tokens per pass, beyond gemma-3-270m's training context of 32768"),
])
def test_bad_input_is_one_line_and_exit_code_2(args, message, tmp_path):
    short = tmp_path / "short.txt"
    short.write_text(" ".join(["word"] * 600))
    proc = run_cli("effective-length", *(str(short) if a == "SHORT" else a for a in args), "--out", str(tmp_path / "x"))
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and message in proc.stderr


def test_sweep_and_score_honour_a_truncation_control(tmp_path):
    """`?max_context=N` is planned for every token-scoring command: no target sees more than N
    tokens, and every planned target is still scored once per window."""
    sweep = api.sweep(["demo"], models=("gemma-3-270m?max_context=24",), lengths=(16, 48), n_compare=8, context_mode="approx", out=tmp_path / "sweep")
    records = read_records(sweep.run_dir)
    assert records["context_len"].max() == 24 and sorted(set(records["nominal_len"])) == [16, 48]
    assert records.groupby("window_id").size().tolist() == [8, 8]
    score = api.score(["demo"], model="gemma-3-270m?max_context=24", method="chunked", window=64, max_tokens=128, out=tmp_path / "score")
    scored = read_records(score.run_dir)
    assert len(scored) == 128 and scored["context_len"].max() == 24 and scored["target_pos"].is_unique
