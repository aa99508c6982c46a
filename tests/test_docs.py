"""The documentation describes the software as it is, and the results it stores speak the keys
the code writes today."""

from __future__ import annotations

import json
import re
from dataclasses import asdict
from pathlib import Path

import pytest

from ctxeval.qa.meta_eval import evaluate_picks
from ctxeval.qa.methods import HIGHER_IS_BETTER, METHODS, MethodConfig
from ctxeval.render.meta_eval import markdown_table

ROOT = Path(__file__).resolve().parents[1]
PROSE = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
STORED_META_EVAL = ROOT / "docs" / "meta_eval_mtbench_gemma270m.json"


@pytest.mark.parametrize("path", PROSE, ids=lambda p: str(p.relative_to(ROOT)))
def test_docs_tell_no_history_of_their_making(path):
    text = path.read_text(encoding="utf-8")
    for pattern in (r"\bissues? #?[0-9]+", r"this session", r"\bpreviously\b", r"\bno longer\b", r"\bearlier (rounds?|builds?|versions?)\b"):
        hits = [m.group(0) for m in re.finditer(pattern, text, re.IGNORECASE)]
        assert not hits, f"{path.name}: {hits}"


def test_stored_meta_eval_uses_the_writers_method_names_and_keys():
    """docs/meta_eval_mtbench_gemma270m.json holds the probability-weighted G-Eval: under the name
    `meta-eval` gives that form (`geval_weighted`), in the layout `evaluate_picks` writes."""
    stored = json.loads(STORED_META_EVAL.read_text(encoding="utf-8"))
    methods = list(stored["methods"])
    assert set(methods) <= set(METHODS)
    assert methods == stored["config"]["methods"] == ["pplqa", "gptscore", "geval_weighted"]
    assert stored["config"].keys() == asdict(MethodConfig(tuple(methods))).keys()
    written = evaluate_picks([{"label": label, **{f"{m}_pick": 1 for m in methods}} for label in (1, 2, 1)], tuple(methods), 10, 0)
    for method in methods:
        assert stored["methods"][method].keys() == written[method].keys(), method
        assert stored["methods"][method]["metrics"].keys() == written[method]["metrics"].keys(), method
        assert stored["methods"][method]["higher_is_better"] == HIGHER_IS_BETTER[method]
    assert stored["dataset"]["tie_policy"] == "none"  # LLMBar's MT-Bench subset has its ties removed upstream
    table = markdown_table(stored)
    assert "| metric | pplqa | gptscore | geval_weighted |" in table and "No human ties in the data." in table
