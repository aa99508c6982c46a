"""Corpora as input: reading (txt, folders, JSON lines, Parquet), choosing documents, bad input,
document-level intervals, and runs over corpora that match runs over the same .txt files."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ctxeval.data.corpus import CorpusOptions, open_corpus
from ctxeval.errors import UserError
from ctxeval.pairing import pair_windows
from ctxeval.scoring.plan_stream import merge_facts
from ctxeval.report.compare import build_report
from ctxeval.results.records import STOP_AFTER_PASSES_ENV
from ctxeval.stats.cluster import cluster_bootstrap

from .conftest import FIXTURES, run_cli


def _head(path, n_chars: int) -> str:
    """The first n_chars characters of a fixture file, byte-exactly (CRLF kept)."""
    with open(path, encoding="utf-8", newline="") as f:
        return f.read(n_chars)


@pytest.fixture(scope="module")
def docs() -> dict[str, str]:
    """The openings of three real documents (tests/fixtures/README.md): two books and WikiText-2
    (CRLF line ends)."""
    return {
        "hamlet": _head(FIXTURES / "shakespeare-hamlet-head.txt", 1500),
        "wiki": _head(FIXTURES / "wikitext2-test-head.txt", 1500),
        "emma": _head(FIXTURES / "austen-emma-head.txt", 1500),
    }


@pytest.fixture(scope="module")
def corpus_files(tmp_path_factory, docs):
    """The same documents as .txt files, a folder, JSON lines and Parquet."""
    d = tmp_path_factory.mktemp("corpus")
    folder = d / "folder"
    folder.mkdir()
    for name, text in docs.items():
        (folder / f"{name}.txt").write_bytes(text.encode("utf-8"))
    rows = [{"id": name, "text": text, "extra": 1} for name, text in docs.items()]
    (d / "docs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    pq.write_table(pa.table({"id": [r["id"] for r in rows], "text": [r["text"] for r in rows]}), d / "docs.parquet")
    return d


def _texts(corpus):
    return [(t.text_id, t.content, t.sha256) for t in corpus]


def test_the_same_documents_read_alike_from_txt_folder_jsonl_and_parquet(corpus_files, docs):
    txt = open_corpus([corpus_files / "folder" / f"{n}.txt" for n in docs])
    folder = open_corpus([corpus_files / "folder"])
    jsonl = open_corpus([corpus_files / "docs.jsonl"], CorpusOptions(id_field="id"))
    parquet = open_corpus([corpus_files / "docs.parquet"], CorpusOptions(id_field="id"))
    assert _texts(txt) == _texts(jsonl) == _texts(parquet)
    assert sorted(_texts(folder)) == sorted(_texts(txt))  # a folder is listed in name order
    assert [t[1] for t in _texts(txt)] == list(docs.values())  # byte-exact: WikiText's CRLFs kept
    assert "\r\n" in docs["wiki"]
    assert [r.source for r in jsonl.refs] == [f"{corpus_files / 'docs.jsonl'}:{i}" for i in (1, 2, 3)]
    assert [r.source for r in parquet.refs] == [f"{corpus_files / 'docs.parquet'}#row{i}" for i in (0, 1, 2)]


def test_default_ids_are_file_stem_and_row_and_stay_unique(corpus_files, tmp_path):
    jsonl = open_corpus([corpus_files / "docs.jsonl"])
    assert [r.text_id for r in jsonl.refs] == ["docs:0", "docs:1", "docs:2"]
    (tmp_path / "docs.jsonl").write_bytes((corpus_files / "docs.jsonl").read_bytes())
    both = open_corpus([corpus_files / "docs.jsonl", tmp_path / "docs.jsonl"])
    ids = [r.text_id for r in both.refs]
    assert len(set(ids)) == 6 and ids[3:] == ["docs:0-2", "docs:1-2", "docs:2-2"]


def test_max_docs_and_a_seeded_sample_are_reproducible(tmp_path):
    path = tmp_path / "many.jsonl"
    path.write_text("".join(json.dumps({"text": f"document number {i}"}) + "\n" for i in range(50)))
    assert [r.text_id for r in open_corpus([path], CorpusOptions(max_docs=3)).refs] == ["many:0", "many:1", "many:2"]
    a = [r.text_id for r in open_corpus([path], CorpusOptions(sample=5, seed=7)).refs]
    b = [r.text_id for r in open_corpus([path], CorpusOptions(sample=5, seed=7)).refs]
    c = [r.text_id for r in open_corpus([path], CorpusOptions(sample=5, seed=8)).refs]
    assert a == b and a != c and len(set(a)) == 5
    assert a == sorted(a, key=lambda i: int(i.split(":")[1]))  # file order kept
    within = [r.text_id for r in open_corpus([path], CorpusOptions(max_docs=10, sample=4, seed=0)).refs]
    assert all(int(i.split(":")[1]) < 10 for i in within) and len(within) == 4


def test_iterating_a_corpus_reads_one_document_at_a_time(corpus_files):
    corpus = open_corpus([corpus_files / "docs.jsonl"], CorpusOptions(id_field="id"))
    it = iter(corpus)
    first = next(it)
    assert first.text_id == "hamlet"
    # a generator: the later documents have not been read yet (changing them now is noticed)
    assert not isinstance(it, (list, tuple))


def test_a_corpus_file_changed_between_scan_and_run_is_refused(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text(json.dumps({"text": "one"}) + "\n")
    corpus = open_corpus([path])
    path.write_text(json.dumps({"text": "two"}) + "\n")
    with pytest.raises(UserError, match="changed"):
        list(corpus)


def test_skip_bad_skips_and_counts(tmp_path):
    path = tmp_path / "mixed.jsonl"
    lines = [json.dumps({"text": "good one"}), "{not json", json.dumps({"body": "x"}), json.dumps({"text": 3}), json.dumps({"text": "  "}), json.dumps({"text": "good two"})]
    path.write_text("\n".join(lines) + "\n")
    corpus = open_corpus([path], CorpusOptions(skip_bad=True))
    assert [r.text_id for r in corpus.refs] == ["mixed:0", "mixed:5"]
    assert [b["source"] for b in corpus.bad] == [f"{path}:{i}" for i in (2, 3, 4, 5)]
    assert corpus.facts()["bad_documents"] == 4


def test_merge_facts_keeps_dicts_and_common_values_and_lists_the_rest():
    facts = [("a", {"start_chars": {"a": {"L8": 3}}, "n": 5, "k": 1}), ("b", {"start_chars": {"b": {"L8": 0}}, "n": 7, "k": 1})]
    assert merge_facts(facts) == {"start_chars": {"a": {"L8": 3}, "b": {"L8": 0}}, "n": {"a": 5, "b": 7}, "k": 1}
    assert merge_facts(facts[:1]) == facts[0][1]


# --- bad input through the CLI: one line naming the file and line/row, exit code 2 ---------


@pytest.fixture(scope="module")
def bad_corpora(tmp_path_factory):
    d = tmp_path_factory.mktemp("badcorpora")
    good = json.dumps({"text": "A good document with some words."})
    (d / "malformed.jsonl").write_text(good + "\n" + '{"text": "unterminated\n')
    (d / "missing.jsonl").write_text(good + "\n" + json.dumps({"body": "no text field"}) + "\n")
    (d / "nonstring.jsonl").write_text(good + "\n" + good + "\n" + json.dumps({"text": ["a", "list"]}) + "\n")
    (d / "empty.jsonl").write_text(good + "\n" + json.dumps({"text": " \n "}) + "\n")
    folder = d / "folder"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.txt").write_text("fine text")
    (folder / "sub" / "latin1.txt").write_bytes("caf\xe9 au lait".encode("latin-1"))
    pq.write_table(pa.table({"body": ["x"]}), d / "nocolumn.parquet")
    pq.write_table(pa.table({"text": ["fine", None]}), d / "nullrow.parquet")
    return d


@pytest.mark.parametrize(
    "args,message",
    [
        (["score", "{d}/malformed.jsonl"], "malformed.jsonl:2: malformed JSON"),
        (["score", "{d}/missing.jsonl"], "missing.jsonl:2: missing field 'text'"),
        (["score", "{d}/nonstring.jsonl"], "nonstring.jsonl:3: field 'text' is not a string (got list)"),
        (["score", "{d}/empty.jsonl"], "empty.jsonl:2: empty document"),
        (["sweep", "{d}/folder"], "latin1.txt: not valid UTF-8"),
        (["context-gain", "{d}/folder", "--window", "64", "--short", "8"], "latin1.txt: not valid UTF-8"),
        (["score", "{d}/nocolumn.parquet"], "nocolumn.parquet: missing field 'text'"),
        (["score", "{d}/nullrow.parquet"], "nullrow.parquet#row1: field 'text' is not a string (got null)"),
        (["score", "{d}/missing.jsonl", "--text-field", "body"], "missing.jsonl:1: missing field 'body'"),
        (["score", "{d}/missing.jsonl", "--id-field", "id"], "missing.jsonl:1: missing id field 'id'"),
        (["score", "{d}/folder", "--glob", "*.md"], "no file matching --glob"),
        (["score", "{d}/missing.jsonl", "--max-docs", "0"], "--max-docs must be a positive integer"),
        (["score", "{d}/nowhere.jsonl"], "not found"),
    ],
)
def test_bad_corpus_input_gives_one_line_and_exit_code_2(bad_corpora, tmp_path, args, message):
    args = [a.format(d=bad_corpora) for a in args] + ["--quiet", "--out", str(tmp_path / "out")]
    r = run_cli(*args)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("ctxeval: error:") and message in lines[0], lines[0]
    assert not (tmp_path / "out").exists()  # refused before anything was written


# --- document-level intervals --------------------------------------------------------------


def _reference_cluster_bootstrap(values, clusters, replicates, seed, confidence=0.95):
    """Hand-written: draw documents with the same generator, pool their tokens, take the mean."""
    labels = sorted(set(clusters))
    tokens_of = {c: [v for v, k in zip(values, clusters) if k == c] for c in labels}
    draws = np.random.default_rng(seed).integers(0, len(labels), size=(replicates, len(labels)))
    means = []
    for row in draws:
        pooled = [v for i in row for v in tokens_of[labels[i]]]
        means.append(sum(pooled) / len(pooled))
    alpha = 100 * (1 - confidence) / 2
    return np.percentile(means, [alpha, 100 - alpha])


def test_cluster_bootstrap_agrees_with_a_hand_written_reference_on_a_toy_corpus():
    values = [1.0, 2.0, 3.0, 0.5, 0.5, 4.0, 4.5, 4.0, 4.2, 1.0]
    clusters = ["a", "a", "a", "b", "b", "c", "c", "c", "c", "d"]
    got = cluster_bootstrap(np.array(values), np.array(clusters), replicates=300, seed=3)
    low, high = _reference_cluster_bootstrap(values, clusters, 300, 3)
    assert got.estimate == pytest.approx(np.mean(values), rel=1e-12)  # token-weighted
    assert (got.low, got.high) == (pytest.approx(low, rel=1e-12), pytest.approx(high, rel=1e-12))
    assert got.n == 4 and got.confidence == 0.95 and got.method == "cluster percentile bootstrap" and (got.replicates, got.seed) == (300, 3)
    single = cluster_bootstrap(np.array([1.0, 2.0]), np.array(["a", "a"]))
    assert math.isnan(single.low) and math.isnan(single.high) and single.estimate == 1.5


def coverage_simulation(n_sims=200, n_docs=30, replicates=400, seed=0) -> tuple[float, float]:
    """Coverage of nominal 95 % intervals of the corpus mean when tokens of a document are
    correlated (a document effect, sd 1, plus token noise, sd 1), documents of 2..10 windows
    of 16 tokens. Window-level: resample windows; document-level: resample documents."""
    rng = np.random.default_rng(seed)
    hits = {"window": 0, "document": 0}
    for _ in range(n_sims):
        n_windows = rng.integers(2, 11, size=n_docs)
        doc_of_window = np.repeat(np.arange(n_docs), n_windows)
        window_of_token = np.repeat(np.arange(len(doc_of_window)), 16)
        doc_of_token = doc_of_window[window_of_token]
        values = rng.normal(0.0, 1.0, n_docs)[doc_of_token] + rng.normal(0.0, 1.0, len(doc_of_token))
        # the true token-weighted mean is 0 for every draw of the documents' sizes
        for kind, labels in (("window", window_of_token), ("document", doc_of_token)):
            ci = cluster_bootstrap(values, labels, replicates, int(rng.integers(1 << 31)))
            hits[kind] += ci.low <= 0.0 <= ci.high
    return hits["window"] / n_sims, hits["document"] / n_sims


def test_document_level_intervals_cover_and_window_level_ones_are_too_narrow():
    window_level, document_level = coverage_simulation()
    assert 0.88 <= document_level <= 0.99, document_level
    assert window_level < 0.85, window_level


def _windows(sha, spans, loss):
    return pd.DataFrame([{"text_sha256": sha, "nominal_len": 8, "repeat": 0, "span_start": a, "span_end": b, "window_id": f"w{a}", "tokens": 50, "loss": loss + 0.01 * a, "avg": 0.5} for a, b in spans])


def test_compare_pairs_by_document_counts_documents_and_resamples_them_by_default():
    spans = [(0, 9), (10, 19), (20, 29)]
    a = pd.concat([_windows(s, spans, 2.0) for s in ("d1", "d2", "d3", "d5")], ignore_index=True)
    b = pd.concat([_windows(s, spans, 2.0 + 0.1 * i) for i, s in enumerate(("d1", "d2", "d4", "d5"))], ignore_index=True)
    report = build_report(pair_windows(a, b), ("A", "B"), 500, 0, None, ["avg"])
    st = report["dataset"]["windows"]["stats"]
    assert (st["paired_documents"], st["documents_a"], st["documents_b"], st["paired_windows"]) == (3, 4, 4, 9)
    assert st["bootstrap"]["resampling_unit"] == "text" and st["bootstrap"]["method"] == "BCa-cluster" and st["bootstrap"]["resampling_units"] == 3
    two = build_report(pair_windows(a[a.text_sha256 != "d5"], b[b.text_sha256 != "d5"]), ("A", "B"), 500, 0, None, ["avg"])
    assert two["dataset"]["windows"]["stats"]["bootstrap"]["resampling_unit"] == "window"  # too few documents to resample
    one_doc = build_report(pair_windows(a[a.text_sha256 == "d2"], b[b.text_sha256 == "d2"]), ("A", "B"), 500, 0, None, ["avg"])
    assert one_doc["dataset"]["windows"]["stats"]["bootstrap"]["resampling_unit"] == "window"


# --- runs over corpora (embedded model) -----------------------------------------------------

SCORE = ["--method", "chunked", "--window", "64", "--max-tokens", "128", "--quiet"]


@pytest.mark.model
def test_jsonl_and_parquet_corpora_give_the_same_records_as_txt_files(corpus_files, docs, tmp_path):
    runs = {
        "folder": ["score", str(corpus_files / "folder")],
        "jsonl": ["score", str(corpus_files / "docs.jsonl"), "--text-field", "text", "--id-field", "id"],
        "parquet": ["score", str(corpus_files / "docs.parquet"), "--id-field", "id"],
    }
    records, manifests = {}, {}
    for name, args in runs.items():
        r = run_cli(*args, *SCORE, "--out", str(tmp_path / name))
        assert r.returncode == 0, r.stderr
        records[name] = pq.read_table(tmp_path / name / "records.parquet").to_pandas()
        manifests[name] = json.loads((tmp_path / name / "manifest.json").read_text())
    # the folder lists files by name (emma, hamlet, wiki); order the row inputs the same way
    key = ["text_id", "target_pos"]
    folder = records["folder"].drop(columns="pass_index").sort_values(key).reset_index(drop=True)
    for name in ("jsonl", "parquet"):
        other = records[name].drop(columns="pass_index").sort_values(key).reset_index(drop=True)
        pd.testing.assert_frame_equal(folder, other)
        assert {t["text_id"]: t["sha256"] for t in manifests[name]["texts"]} == {t["text_id"]: t["sha256"] for t in manifests["folder"]["texts"]}
    assert sorted(records["jsonl"].text_id.unique()) == sorted(docs)
    # a single .txt of the same document gives that document's records
    single = run_cli("score", str(corpus_files / "folder" / "wiki.txt"), *SCORE, "--out", str(tmp_path / "single"))
    assert single.returncode == 0, single.stderr
    alone = pq.read_table(tmp_path / "single" / "records.parquet").to_pandas().drop(columns="pass_index")
    wiki = folder[folder.text_id == "wiki"].reset_index(drop=True)
    pd.testing.assert_frame_equal(alone, wiki)
    # corpus-level summary: token-weighted over the documents, intervals resample documents
    corpus = json.loads((tmp_path / "jsonl" / "corpus_summary.json").read_text())["corpus"]
    assert len(corpus) == 1 and corpus[0]["n_documents"] == 3 and corpus[0]["n"] == 3 * 128
    nll = -records["jsonl"]["logprob"].mean()
    assert corpus[0]["nll"] == pytest.approx(nll, rel=1e-9)
    ppl = corpus[0]["ppl"]
    assert ppl["low"] < ppl["estimate"] < ppl["high"] and ppl["estimate"] == pytest.approx(math.exp(nll), rel=1e-9)
    assert (ppl["n"], ppl["confidence"], ppl["method"]) == (3, 0.95, "cluster percentile bootstrap")


@pytest.mark.model
def test_resume_in_the_middle_of_a_corpus_gives_identical_records(corpus_files, tmp_path):
    args = ["score", str(corpus_files / "docs.jsonl"), "--id-field", "id", *SCORE]
    killed = tmp_path / "killed"
    env = dict(os.environ, **{STOP_AFTER_PASSES_ENV: "3"})  # 2 passes per document: stops inside the second
    proc = subprocess.run([sys.executable, "-m", "ctxeval.cli", *args, "--out", str(killed)], capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 130, proc.stderr
    on_disk = pq.read_table(killed / "parts", columns=["pass_index"]).column(0).unique().to_pylist()
    assert sorted(on_disk) == [0, 1, 2]
    assert run_cli(*args, "--out", str(killed)).returncode == 0
    assert run_cli(*args, "--out", str(tmp_path / "clean")).returncode == 0
    a = pq.read_table(killed / "records.parquet").to_pandas()
    b = pq.read_table(tmp_path / "clean" / "records.parquet").to_pandas()
    pd.testing.assert_frame_equal(a, b)
    assert a.pass_index.nunique() == 6 and a.text_id.unique().tolist() == ["hamlet", "wiki", "emma"]


@pytest.mark.model
def test_documents_too_short_for_a_length_are_skipped_and_counted(tmp_path, docs):
    path = tmp_path / "c.jsonl"
    rows = [{"text": docs["hamlet"]}, {"text": "Too short."}, {"text": 5}, {"text": docs["wiki"]}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    r = run_cli("sweep", str(path), "--lengths", "32", "--n-compare", "2", "--skip-bad", "--out", str(tmp_path / "s"))
    assert r.returncode == 0, r.stderr
    assert "3 read, 1 bad skipped, 1 skipped by the plan" in r.stdout
    manifest = json.loads((tmp_path / "s" / "manifest.json").read_text())
    assert manifest["corpus"]["bad_documents"] == 1 and manifest["corpus"]["skipped_documents"] == 1
    skipped = [t for t in manifest["texts"] if "skipped" in t]
    assert [t["text_id"] for t in skipped] == ["c:1"] and "needs at least 34" in skipped[0]["skipped"]
    rec = pq.read_table(tmp_path / "s" / "records.parquet").to_pandas()
    assert sorted(rec.text_id.unique()) == ["c:0", "c:3"]
