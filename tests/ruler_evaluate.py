"""RULER's own scoring, copied word for word (but for the unused `task_config` argument's
removal) from NVIDIA/RULER at commit c3f5e3b4f87f97e048793bb510a3a6b19a46bf3a:
`string_match_part` and `string_match_all` from scripts/eval/synthetic/constants.py,
`postprocess_pred` from scripts/eval/evaluate.py. The tests re-score ctxeval's records with
them, as RULER's evaluate.py would (`pred` = the record's prediction, `outputs` = its answers).
"""

import re

import pandas as pd


def string_match_part(preds, refs):
    score = sum([max([1.0 if r.lower() in pred.lower() else 0.0 for r in ref]) for pred, ref in zip(preds, refs)]) / len(preds) * 100
    return round(score, 2)


def string_match_all(preds, refs):
    score = sum([sum([1.0 if r.lower() in pred.lower() else 0.0 for r in ref]) / len(ref) for pred, ref in zip(preds, refs)]) / len(preds) * 100
    return round(score, 2)


def postprocess_pred(predict_str: str):

    predict_str = predict_str.strip()

    # Remove all non-printable characters
    np_pattern = re.compile(r'[\x00-\x1f]')
    predict_str = np_pattern.sub('\n', predict_str).strip()

    return predict_str


def rescored(samples: pd.DataFrame) -> dict[tuple[str, str, int], float]:
    """RULER's score of every (model, task, length) of a run's records: evaluate.py's
    postprocess, then string_match_all (every synthetic task's metric)."""
    out = {}
    for (model, task, length), part in samples.groupby(["model", "task", "length"], sort=False):
        preds = [postprocess_pred(p) for p in part["prediction"]]
        out[(model, task, int(length))] = string_match_all(preds, [list(a) for a in part["answers"]])
    return out
