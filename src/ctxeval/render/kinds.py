"""Each result kind rendered by the renderer module the catalog names for it (`Kind.render`,
declaring a `renderer.Renderer`): its texts (the Markdown, and a page, a Result holds are built
there, not by the task that computed it), its figure and its view on the `ctxeval report` page.
`RENDERING` (texts and figure) is what the command layer hands the engine, so the one write path
renders every kind while neither tasks nor the engine import render/."""

from __future__ import annotations

from importlib import import_module
from pathlib import Path

from ctxeval import catalog
from ctxeval.render.renderer import Renderer
from ctxeval.results.base import Result


def renderer(kind: str) -> Renderer | None:
    """The renderer of `kind` (its module imported on first use); None for a kind without one."""
    module = catalog.RENDERERS.get(kind)
    return None if module is None else import_module(module).RENDERER


class KindRendering:
    """render/'s `Rendering` (pipeline/engine.py): every kind's texts and figure."""

    def texts(self, result: Result) -> Result:
        """`result` with the texts it holds rendered from its data (a kind without text as is)."""
        found = renderer(result.KIND)
        return found.texts(result) if found is not None else result

    def draw(self, result: Result, out: Path) -> None:
        """Draw `result`'s figure into `out` (nothing for a kind without one)."""
        found = renderer(result.KIND)
        if found is not None and found.draw is not None:
            found.draw(result, Path(out))


RENDERING = KindRendering()
