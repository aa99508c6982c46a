"""How much of a RULER run is generated: one typed mode, validated once, written to the manifest
and read back from it.

- every sample (RULER's own way, the default);
- none (`--likelihood-only`): the reference is scored, nothing is generated;
- a share (`--generate-share P`): of the samples the likelihood pass does not settle, a seeded
  share P is generated and the rest predicted (prediction-powered scores, `ruler/ppi.py`);
- a count (`--generate N`): a seeded N of each cell's samples are drawn for generation.

The manifest keeps the three flat fields earlier runs recorded (`likelihood_only`,
`generate_share`, `generate_count`), so a run folder's id and its resumption do not change;
`Generation.from_config` is the one reader of them.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ctxeval.errors import FieldError, install_hint
from ctxeval.stats.ppi import MIN_GENERATED

Mode = Literal["all", "none", "share", "count"]


@dataclass(frozen=True)
class Generation:
    """Which samples of a RULER run are generated (`share` with mode "share", `count` with "count")."""

    mode: Mode = "all"
    share: float | None = None
    count: int | None = None

    @property
    def generates(self) -> bool:
        return self.mode != "none"

    @property
    def prediction_powered(self) -> bool:
        """Whether some samples are predicted, not generated: the run reports PPI++ scores."""
        return self.mode in ("share", "count")

    def config(self) -> dict[str, Any]:
        """The manifest's fields of the mode."""
        return {"likelihood_only": self.mode == "none", "generate_share": self.share, "generate_count": self.count}

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> Generation:
        """The mode a run's manifest config records (fields absent in earlier runs: every sample)."""
        fields = {name: config.get(name) for name in ("likelihood_only", "generate_share", "generate_count")}
        if fields["likelihood_only"]:
            return cls("none")
        if fields["generate_share"] is not None:
            return cls("share", share=float(fields["generate_share"]))
        if fields["generate_count"] is not None:
            return cls("count", count=int(fields["generate_count"]))
        return cls()

    @classmethod
    def of(cls, likelihood_only: bool, share: float | None, count: int | None, samples: int) -> Generation:
        """The mode the options ask for; a FieldError where they exclude each other or cannot be met
        (`samples`: each task and length's samples)."""
        if share is not None and likelihood_only:
            raise FieldError("generate_share", "generates a share of the samples; {likelihood_only} generates none: choose one")
        if count is not None:
            if share is not None or likelihood_only:
                raise FieldError("generate_count", "draws the samples to generate; {generate_share} and {likelihood_only} say otherwise: choose one")
            if count > samples:
                raise FieldError("generate_count", f"must be at most {{samples}} ({samples}), the samples of each task and length")
            if count < MIN_GENERATED:
                raise FieldError("generate_count", f"must be at least {MIN_GENERATED}: with fewer generated samples a cell with an unsettled sample has no interval")
        mode = cls("none") if likelihood_only else cls("share", share=share) if share is not None else cls("count", count=count) if count is not None else cls()
        if mode.prediction_powered and importlib.util.find_spec("ppi_py") is None:
            raise FieldError("generate_share" if mode.mode == "share" else "generate_count", f"needs ppi-python: {install_hint('ppi')}")
        return mode
