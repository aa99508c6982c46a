"""Restrict a diff to key tokens: the tokens a context-gain run's evaluator found to need
distant context (LongPPL's rule, probes/keytokens.py), taken by character span, so the
evaluator's tokenizer need not be REF's."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from ctxeval.errors import UserError
from ctxeval.pipeline.manifest import Manifest, read_manifest
from ctxeval.probes.context_gain import gain_table, key_spans
from ctxeval.probes.gain_report import SUMMARY_JSON
from ctxeval.probes.keytokens import tokens_within
from ctxeval.pipeline.records import read_records


def check_gain_run(gain_run: Path) -> Manifest:
    """The manifest of `gain_run` if it is a finished context-gain run, else one line naming
    what it is (checked before a diff starts, so a wrong --key-tokens costs no model work)."""
    try:
        manifest = read_manifest(gain_run)
    except UserError as exc:
        raise UserError(f"--key-tokens {exc}") from None
    if manifest.command != "context-gain":
        raise UserError(f"--key-tokens {gain_run}: a {manifest.command} run, not a context-gain run")
    if not (gain_run / SUMMARY_JSON).is_file():
        raise UserError(f"--key-tokens {gain_run}: an unfinished context-gain run (no {SUMMARY_JSON})")
    return manifest


def key_token_mask(records: pd.DataFrame, texts: list[dict], gain_run: Path) -> tuple[np.ndarray, dict]:
    """True for each diff record that is a key token of the finished context-gain run
    `gain_run` (texts matched by content hash), and what picked them."""
    gain_run = Path(gain_run)
    manifest = check_gain_run(gain_run)
    rule = json.loads((gain_run / SUMMARY_JSON).read_text())["key_tokens"]
    gain_records = read_records(gain_run)
    gain_ids = {t["sha256"]: t["text_id"] for t in manifest.texts or [] if "skipped" not in t}
    mask = np.zeros(len(records), dtype=bool)
    for text in texts:
        if text["sha256"] not in gain_ids:
            raise UserError(f"--key-tokens {gain_run} did not score text {text['text_id']}")
        spans = key_spans(gain_table(gain_records, rule["evaluator"], gain_ids[text["sha256"]]), rule["alpha"], rule["beta"])
        rows = (records["text_id"] == text["text_id"]).to_numpy()
        mask[rows] = tokens_within(records["char_start"].to_numpy()[rows], records["char_end"].to_numpy()[rows], spans)
    return mask, {"run": str(gain_run), "evaluator": rule["evaluator"], "alpha": rule["alpha"], "beta": rule["beta"], "tokens": int(mask.sum())}
