"""The numerics noise floor: the same model on a second numeric path, on a seeded sample of windows.

llama.cpp and torch pick kernels by CPU, batch shape, flash attention and dtype, so one model
scored twice on two paths differs in the last digits, and near-tied argmaxes flip
(docs/numerics.md). A `diff` or `compare` result no larger than that difference says nothing
about the model. `noise_floor` re-scores a seeded sample of the run's windows with the model on
a second path (`?flash_attn=1`, `?n_batch=7`, `hf:` on the same weights …) through `diff`'s own
lockstep comparison, so the floor is in the same units as a diff: max and mean |Δ log-probability|,
rank changes, top-1 flips, and the KL between the two paths, overall and by context position.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import pandas as pd

from ctxeval.backends.model_options import with_options
from ctxeval.errors import FieldError
from ctxeval.options import option, positive, shared

NOISE_DIR = "noise_floor"  # the floor's own diff run, inside the run it belongs to
DEFAULT_NOISE_WINDOWS = 8


def _second_path(path: str) -> str | None:
    return None if path and path != "?" else "needs a second numeric path: model options such as '?flash_attn=1' or a model spec"


@dataclass(frozen=True)
class NoiseFloor:
    """A second numeric path and how many windows to re-score on it. `path` is either model
    options added to the run's model spec (`?flash_attn=1`, `?n_batch=7`) or a whole model spec
    for the same weights (`hf:gemma-3-270m`)."""

    path: str = option("--noise-floor", "Re-score a seeded sample of the windows with the model (diff: REF) on a second numeric path and compare token by token: model options added to the model ('?flash_attn=1', '?n_batch=7', '?threads=1') or a model spec on the same weights ('hf:gemma-3-270m'). Reports max |delta logprob|, rank changes, top-1 flips and the KL between the paths: the floor below which a difference is numerics, not the model.", shown=None, cli_type=Optional[str], check=_second_path)
    windows: int = option("--noise-windows", "Windows in --noise-floor's seeded sample (seed: --seed).", DEFAULT_NOISE_WINDOWS, check=positive)
    seed: int = field(default=0, metadata=shared("seed"))  # the command's --seed

    def second_spec(self, model: str) -> str:
        """The model string of the second path: `model` with the options added, or `path` itself
        (the command layer parses it as it parses every model string)."""
        if not self.path.startswith("?"):
            return self.path
        second = with_options(model, self.path)
        if second is None:
            raise FieldError("path", f"{self.path!r} leaves {model!r} on the same numeric path; name an option that changes it")
        return second


def floor_summary(records: pd.DataFrame, ref: str, cand: str, summary: dict) -> dict:
    """The floor's numbers from its diff records and that diff's summary (by-position KL cells)."""
    delta = (records["cand_logprob"] - records["ref_logprob"]).abs()
    return {
        "ref": ref,
        "cand": cand,
        "windows": int(records["pass_index"].nunique()),
        "tokens": int(len(records)),
        "max_abs_logprob_diff": float(delta.max()),
        "mean_abs_logprob_diff": float(delta.mean()),
        "rank_changes_pct": float(100 * (records["ref_rank"] != records["cand_rank"]).mean()),
        "top1_flips_pct": float(100 * (~records["same_top1"].astype(bool)).mean()),
        "kl_mean": float(records["kl"].mean()),
        "kl_max": float(records["kl"].max()),
        "buckets": summary["buckets"],
    }


def floor_dir(run_dir: Path) -> Path:
    return Path(run_dir) / NOISE_DIR
