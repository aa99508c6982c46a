"""render/kinds.py: every result kind's texts are rendered from the Result alone, so a result read
back from its folder renders to the very bytes its folder holds (a re-rendered or resumed run
writes the same files), and every kind's renderer (texts, view, figure) is the one its catalog line names."""

from __future__ import annotations

import numpy as np
import pytest

from ctxeval import api, catalog
from ctxeval.render.kinds import RENDERING, renderer
from ctxeval.render.renderer import Renderer
from ctxeval.results.base import read_result

from .synthetic_runs import write_answer_quality_run, write_gain_run, write_retrieval_run, write_run
from .test_ruler import _ruler_folder

# the text each kind holds, as its folder holds it (attribute -> file)
TEXT_FILES = {"scoring": {"tables": "tables.md"}, "comparison": {"markdown": "compare.md"}, "trends": {"markdown": "trends.md"},
              "context-gain": {"markdown": "context_gain.md"}, "retrieval": {"markdown": "results.md"}, "ruler": {"markdown": "results.md"},
              "agreement": {"markdown": "agreement.md", "html": "agreement.html"}, "probe-report": {"markdown": "probe_report.md"},
              "pplqa": {"markdown": "pplqa.md"}, "meta-eval": {"markdown": "meta_eval.md"}}


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """One finished folder per kind above, written through the CLI's write path (the engine's
    save_result with render/'s Rendering) or the API."""
    root = tmp_path_factory.mktemp("kinds")
    a, b = write_run(root / "a", "tiny", [8, 16], 6, repeats=3), write_run(root / "b", "tiny", [8, 16], 6, repeats=3, shift=0.2)
    gain, retrieval = write_gain_run(root / "gain", "tiny", summarise=True), write_retrieval_run(root / "retrieval", "tiny")
    rng = np.random.default_rng(1)
    ruler = _ruler_folder(root / "ruler", {f"model-{m}": (list((rng.random(6) < (m + 1) / 5).astype(float)), [0.0] * 6, list(rng.normal(-1, 0.3, 6))) for m in range(4)})
    api.compare(a, b, out=root / "compare", replicates=200)
    api.trends(a, out=root / "trends")
    api.agreement([ruler], out=root / "agreement", replicates=200)
    api.probe_report([a, gain, retrieval], out=root / "probe-report")
    return {"scoring": a, "comparison": root / "compare", "trends": root / "trends", "context-gain": gain, "retrieval": retrieval, "ruler": ruler,
            "agreement": root / "agreement", "probe-report": root / "probe-report",
            "pplqa": write_answer_quality_run(root / "pplqa", "pplqa"), "meta-eval": write_answer_quality_run(root / "meta-eval", "meta-eval")}


def test_every_result_kind_has_its_renderer():
    # every kind holds a text: a new kind without its renderer would write it empty
    assert set(catalog.RENDERERS) == set(catalog.RESULTS)
    assert all(isinstance(renderer(kind), Renderer) for kind in catalog.RESULTS)


@pytest.mark.parametrize("kind", sorted(TEXT_FILES))
def test_a_result_read_back_renders_to_the_bytes_its_folder_holds(folders, kind):
    stored = read_result(folders[kind])
    assert stored.KIND == kind
    rendered = RENDERING.texts(stored)
    for attribute, name in TEXT_FILES[kind].items():
        text = getattr(rendered, attribute)
        assert text and text.encode() == (folders[kind] / name).read_bytes(), (kind, attribute)
