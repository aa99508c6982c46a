"""Fingerprints and numeric paths of real runs of the embedded model: equal for two identical
runs, different with flash attention on (docs/numerics.md), and what `compare` says of each."""

from __future__ import annotations

import json

import pytest

from ctxeval import api
from ctxeval.results.manifest import read_manifest

from .conftest import run_cli

SCORE = ["score", "demo", "--window", "128", "--max-tokens", "300", "--quiet"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("fingerprints")
    for name, model in (("a", "gemma-3-270m"), ("b", "gemma-3-270m"), ("flash", "gemma-3-270m?flash_attn=1")):
        result = run_cli(*SCORE, "--model", model, "--out", str(root / name))
        assert result.returncode == 0, result.stderr
    return root


@pytest.mark.model
def test_identical_runs_have_equal_fingerprints_and_flash_attention_changes_it(runs):
    a, b, flash = (read_manifest(runs / name) for name in ("a", "b", "flash"))
    (fa,), (fb,), (ff,) = a.fingerprints, b.fingerprints, flash.fingerprints
    assert fa.tokens == ff.tokens == 300
    assert fa == fb
    assert ff.sha256 != fa.sha256 and ff.documents["demo"] != fa.documents["demo"]
    path_a, path_flash = a.numeric_paths[0], flash.numeric_paths[0]
    assert path_a.backend == "llamacpp" and path_a.flash_attention is False and path_flash.flash_attention is True
    assert path_a.n_batch == 512 and path_a.kv_cache_type == "f16" and path_a.threads and path_a.libraries["llama-cpp-python"]


@pytest.mark.model
def test_compare_says_bit_identical_or_names_the_differing_path_and_document(runs, tmp_path):
    same = api.compare(runs / "a", runs / "b", out=tmp_path / "same", replicates=200)
    assert same.report["numerics"]["bit_identical"] is True and same.report["numerics"]["differing_fields"] == []
    assert "The records of A and B are bit-identical" in same.markdown
    other = api.compare(runs / "a", runs / "flash", out=tmp_path / "flash", replicates=200)
    numerics = json.loads((tmp_path / "flash" / "compare.json").read_text())["numerics"]
    assert numerics["differing_fields"] == ["flash_attention"] and numerics["bit_identical"] is False
    assert numerics["differing_documents"] == ["demo"]
    assert "different numeric paths: flash_attention (off vs on)" in other.markdown and "documents differ: demo" in other.markdown


@pytest.mark.model
def test_summary_shows_the_numeric_path_and_fingerprint(runs):
    result = run_cli("summary", str(runs / "a"))
    assert result.returncode == 0, result.stderr
    short = read_manifest(runs / "a").fingerprints[0].short
    assert "n_batch 512 · flash attn off" in result.stdout and f"fingerprint {short}" in result.stdout
