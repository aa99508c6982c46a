"""Where the public datasets named by short names (`llmbar:NAME`, `pandalm`, `mt-bench`) live.

ctxeval ships none of them: their folder is given by path, in the environment variable
`CTXEVAL_SHARED_DATA` (layout: `pairwise_prefs/llmbar/NAME.json`,
`pairwise_prefs/pandalm/testset-v1.json`, `mt_bench/question.jsonl` and
`mt_bench/model_answer/MODEL.jsonl`, as docs/answer_quality.md lists). Any dataset can also be
given as the path of its file, which needs no folder at all.
"""

from __future__ import annotations

import os
from pathlib import Path

from ctxeval.errors import UserError

DATA_ENV = "CTXEVAL_SHARED_DATA"


def data_folder(name: str) -> Path:
    """The folder `CTXEVAL_SHARED_DATA` names, or a UserError saying how to give it (`name`: the
    short name that needs it, for the message)."""
    value = os.environ.get(DATA_ENV)
    if not value:
        raise UserError(f"{name} is read from the shared data folder: set {DATA_ENV} to it (see docs/answer_quality.md), or give the dataset's file path instead")
    root = Path(value)
    if not root.is_dir():
        raise UserError(f"{DATA_ENV}={value} is not a folder")
    return root
