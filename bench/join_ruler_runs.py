"""Join `ruler` folders that ran one study's variants in separate processes into one folder.

Two one-thread processes, each on its own core with half the variants, finish a study nearly
twice as fast as one process on both cores (a batch-1 decode of a small model gains little from
a second thread). The validation scripts (`ppi_validation.py`, `ppi_until_simulation.py`) read
one folder whose variants are paired; this writes it. Refused unless the folders ran the same
tasks, lengths, samples, seed and essay, and every sample's prompt hash agrees across them (the
variants saw the same prompts). The first folder's first model stays first: the variant every
paired difference is taken against. The joined manifest's seconds are the folders' sum, the
compute the study took.

    python bench/join_ruler_runs.py RUN RUN [RUN ...] --out DIR
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ctxeval.errors import UserError
from ctxeval.ruler.merge import join_runs


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if len(args.runs) < 2:
        parser.error("give two or more folders")
    samples = join_runs(args.runs, args.out)
    print(f"{args.out}: {len(samples)} samples of {samples['model'].nunique()} variants")


if __name__ == "__main__":
    try:
        main()
    except UserError as exc:  # a folder that is not a (finished) run: one line, no traceback
        raise SystemExit(f"error: {exc}") from None
