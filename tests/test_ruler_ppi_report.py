"""A prediction-powered RULER run of three variants: its likelihood tables (another measure) open
with what they measure and why they may disagree, and never with a tie statement of their own."""

from __future__ import annotations

import pytest

pytest.importorskip("ppi_py")
pytest.importorskip("transformers")

from ctxeval import api  # noqa: E402
from ctxeval.data.texts import demo_text_path  # noqa: E402
from ctxeval.render.ruler import LIKELIHOOD_SECTION, view  # noqa: E402
from tests.hf_tiny import tiny_llama_dir  # noqa: E402

TIED = "which variants are tied"


def test_the_likelihood_tables_of_a_share_run_open_with_what_they_measure_not_with_a_ranking(tmp_path):
    model = f"hf:{tiny_llama_dir(tmp_path / 'llama', demo_text_path().read_text()[:20000], vocab_size=512)}"
    models = (model, f"{model}?max_context=256", f"{model}?max_context=128")
    result = api.ruler(tasks=("niah_single_1",), lengths=(512,), models=models, generate_share=0.5, samples=10, out=tmp_path / "run")
    assert result.ppi is not None and not result.ranking.empty  # three variants on the same prompts: a ranking exists
    text = result.markdown
    assert text.startswith("# RULER, prediction-powered (PPI++)")
    records = text[text.index(LIKELIHOOD_SECTION[0]):]
    assert records.startswith(f"{LIKELIHOOD_SECTION[0]}\n\n{LIKELIHOOD_SECTION[1]}\n")
    assert "ties and effective lengths below are likelihood's" in LIKELIHOOD_SECTION[1]
    first_table = records.split("\n\n", 2)[2].split("\n", 1)[0]
    assert first_table.startswith("**RULER, paired differences against") and TIED not in first_table
    assert "## Which variants are tied, per task" in records  # the ranking is kept, after the tables
    # the report page: the PPI++ tables lead, likelihood's ranking comes last among its tables
    run, _ = view(result, "run", 0)
    titles = [run.answer.title, *(h.title for h in run.more)]
    assert titles[0].startswith("RULER, prediction-powered")
    likelihood = [t for t in titles if "another measure" in t]
    assert likelihood and TIED not in likelihood[0] and TIED in likelihood[-1]
