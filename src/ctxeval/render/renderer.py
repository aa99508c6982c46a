"""What a result kind's renderer module declares (`RENDERER`), so render/kinds.py renders every
kind the catalog names without a hand-kept list: the texts a Result holds, its view on the
`ctxeval report` page and its figure, each from the Result alone."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ctxeval.render.views import Arm, RunView

View = Callable[[Any, str, int], tuple[RunView, list[Arm]]]  # (result, label, first arm) -> its view, its arms


@dataclass(frozen=True)
class Renderer:
    """`texts(result)`: the result with its Markdown (and page) rendered; `view(result, label,
    first_arm)`: what the report page shows of its folder (None: its manifest); `draw(result,
    out)`: its figure into folder `out` (None: it has none)."""

    texts: Callable[[Any], Any]
    view: View | None = None
    draw: Callable[[Any, Path], None] | None = None
