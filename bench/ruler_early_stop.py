"""What does stopping generation once RULER's score is decided save, and does it change a score?
(docs/ruler.md, "Generation stops once the score is decided").

Per model (a population: its backend, its answers), the same `ruler` run twice in this process,
`--full-generation` first, then stopping once decided: per sample, both generated scores and
RULER's own evaluate.py score of each stored prediction (tests/ruler_evaluate.py, copied from
NVIDIA/RULER c3f5e3b); the tokens generated (the records' `generated_tokens`) and the runs'
recorded seconds. Only a right answer that the likelihood pass did not settle can stop early:
the table counts them, and a wrong or partial answer runs to the limit either way.

    python bench/ruler_early_stop.py [--models gemma-3-270m,hf:smollm2-135m] [--tasks niah_single_1,niah_multivalue]
        [--lengths 1024] [--samples 15] [--threads 1] --out DIR
"""

from __future__ import annotations

import argparse
import datetime
import platform
import subprocess
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).parent.parent))
from tests.ruler_evaluate import postprocess_pred, string_match_all  # noqa: E402

from ctxeval import api  # noqa: E402
from ctxeval.errors import UserError  # noqa: E402
from ctxeval.ruler.ppi import GENERATED  # noqa: E402
from ctxeval.results.manifest import read_manifest  # noqa: E402
from ctxeval.results.ruler import read_samples  # noqa: E402

KEYS = ["task", "length", "sample"]


def run_pair(model: str, tasks: tuple[str, ...], lengths: tuple[int, ...], samples: int, threads: int, out: Path) -> dict:
    """One population's two runs and what the early stop changed and saved."""
    folders = {}
    for full in (True, False):
        folder = out / f"{model.replace(':', '_').replace('/', '_')}-{'full' if full else 'stop'}"
        api.ruler(tasks=tasks, lengths=lengths, samples=samples, models=(model,), full_generation=full, n_threads=threads, progress=False, out=folder)
        folders[full] = folder
    full, stop = (read_samples(folders[f]).set_index(KEYS).sort_index() for f in (True, False))
    ruler_full = [string_match_all([postprocess_pred(p)], [list(a)]) for p, a in zip(full["prediction"], full["answers"])]
    ruler_stop = [string_match_all([postprocess_pred(p)], [list(a)]) for p, a in zip(stop["prediction"], stop["answers"])]
    generated = full["method"] == GENERATED
    right = generated & (full["generation_score"] == 1.0)
    seconds = {f: float(read_manifest(folders[f]).timing["seconds_this_session"]) for f in (True, False)}
    return {
        "population": model, "samples": len(full), "generated": int(generated.sum()), "right, generated": int(right.sum()),
        "stopped early": int((stop["generated_tokens"] < full["generated_tokens"]).sum()),
        "same scores": bool((full["generation_score"] == stop["generation_score"]).all() and ruler_full == ruler_stop
                            and [s / 100 for s in ruler_stop] == stop["generation_score"].tolist()),
        "tokens, full": int(full["generated_tokens"].sum()), "tokens, stop": int(stop["generated_tokens"].sum()),
        "tokens saved on right answers": int((full["generated_tokens"] - stop["generated_tokens"])[right].sum()),
        "seconds, full": round(seconds[True], 1), "seconds, stop": round(seconds[False], 1),
    }


def machine() -> str:
    """The CPU model (lscpu) and the date, which every measurement names."""
    cpu = next((line.split(":", 1)[1].strip() for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines()
                if line.startswith("Model name")), platform.processor())
    return f"{cpu}, {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="gemma-3-270m,hf:smollm2-135m")
    parser.add_argument("--tasks", default="niah_single_1,niah_multivalue")
    parser.add_argument("--lengths", default="1024")
    parser.add_argument("--samples", type=int, default=15)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    tasks, lengths = tuple(args.tasks.split(",")), tuple(int(n) for n in args.lengths.split(","))
    rows = [run_pair(m, tasks, lengths, args.samples, args.threads, args.out) for m in args.models.split(",")]
    table = pd.DataFrame(rows)
    text = "\n".join([f"{', '.join(tasks)} at {args.lengths} tokens, {args.samples} samples each, {args.threads} thread(s); {machine()}", "",
                      table.to_markdown(index=False), ""])
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "early_stop.md").write_text(text)


if __name__ == "__main__":
    try:
        main()
    except UserError as exc:
        raise SystemExit(f"error: {exc}") from None
