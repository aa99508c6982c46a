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

from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Optional

import pandas as pd

from ctxeval.backends.model_options import with_options
from ctxeval.backends.registry import ModelSpec
from ctxeval.errors import FieldError
from ctxeval.options import option, positive, shared
from ctxeval.stats.interval import Interval

NOISE_DIR = "noise_floor"  # the floor's own diff run, inside the run it belongs to
DEFAULT_NOISE_WINDOWS = 8
OFF = "off"  # diff: no noise floor, not even the automatic one
# model options that change how a model's numbers are computed, not what it computes: a diff
# whose CAND sets one of them measures REF on CAND's values of them (its numeric path's share)
NUMERIC_PATH_OPTIONS = ("flash_attn", "n_batch", "threads", "device")


def _second_path(path: str) -> str | None:
    return None if path and path != "?" else "needs a second numeric path: model options such as '?flash_attn=1' or a model spec, or 'off'"


@dataclass(frozen=True)
class NoiseFloor:
    """A second numeric path and how many windows to re-score on it. `path` is either model
    options added to the run's model spec (`?flash_attn=1`, `?n_batch=7`) or a whole model spec
    for the same weights (`hf:gemma-3-270m`)."""

    path: str = option("--noise-floor", "Re-score a seeded sample of the windows with the model (diff: REF) on a second numeric path and compare token by token: model options added to the model ('?flash_attn=1', '?n_batch=7', '?threads=1') or a model spec on the same weights ('hf:gemma-3-270m'). Reports max |delta logprob|, rank changes, top-1 flips and the KL between the paths: the floor below which a difference is numerics, not the model. diff measures one by default when CAND sets flash_attn, n_batch, threads or device apart from REF ('off': none).", shown=None, cli_type=Optional[str], check=_second_path)
    windows: int = option("--noise-windows", "Windows in --noise-floor's seeded sample (seed: --seed).", DEFAULT_NOISE_WINDOWS, check=positive)
    seed: int = field(default=0, metadata=shared("seed"))  # the command's --seed
    why: str = ""  # set when the floor was chosen automatically: the numeric-path options it copies from CAND

    @property
    def off(self) -> bool:
        return self.path == OFF

    def second_spec(self, model: str) -> str:
        """The model string of the second path: `model` with the options added, or `path` itself
        (the command layer parses it as it parses every model string)."""
        if not self.path.startswith("?"):
            return self.path
        second = with_options(model, self.path)
        if second is None:
            raise FieldError("path", f"{self.path!r} leaves {model!r} on the same numeric path; name an option that changes it")
        return second


def candidate_path(ref: ModelSpec, cand: ModelSpec, windows: int, seed: int) -> NoiseFloor | None:
    """The floor a diff measures by default: REF with the numeric-path options (flash attention,
    n_batch, threads, device) that CAND sets apart from REF, the rest of REF unchanged. None when
    CAND sets none of them apart, or when they are all CAND changes (REF on CAND's path is CAND:
    the whole diff is the numeric path's, said by `whole_path`)."""
    changed = _path_changes(ref, cand)
    if not changed or whole_path(ref, cand):
        return None
    spelled = "&".join(f"{k}={_spell(v)}" for k, v in changed.items())
    return NoiseFloor("?" + spelled, windows, seed, why=spelled.replace("&", ", "))


def whole_path(ref: ModelSpec, cand: ModelSpec) -> bool:
    """Whether CAND is REF with numeric-path options only (the diff measures that path alone)."""
    changed = _path_changes(ref, cand)
    return bool(changed) and ref.max_context == cand.max_context and replace(ref.options, **changed) == cand.options


def _path_changes(ref: ModelSpec, cand: ModelSpec) -> dict[str, Any]:
    """The numeric-path options CAND sets apart from REF on the same weights and backend."""
    if ref.base != cand.base or type(ref.options) is not type(cand.options) or ref.options is None:
        return {}
    names = {f.name for f in fields(ref.options)}
    return {k: getattr(cand.options, k) for k in NUMERIC_PATH_OPTIONS if k in names and getattr(cand.options, k) != getattr(ref.options, k)}


def _spell(value: Any) -> str:
    return ("1" if value else "0") if isinstance(value, bool) else str(value)


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
        "kl": Interval.from_row(summary["all"]["kl"]).to_row(),  # the mean KL's interval, as the diff's summary drew it
        "delta_log_nll": summary["all"]["ppl_ratio"]["delta_log_nll"]["estimate"],
        "kl_max": float(records["kl"].max()),
        "buckets": summary["buckets"],
    }


def floor_dir(run_dir: Path) -> Path:
    return Path(run_dir) / NOISE_DIR
