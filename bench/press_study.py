"""The press study (docs/agreement.md): which cheap number orders KV-cache presses as RULER does.

On samples generation did not see, and at what cost; run through
`bench/agreement_study.py --study presses`.

Per family (hf:gemma-3-270m, hf:smollm2-135m) the variants are the full cache, a truncation
control `max_context=B` per budget B, and each press at each budget (`press=NAME&budget=B`).
Runs, each resumable (re-running continues the folders under --out):
- `ruler-gen-FAMILY`: RULER by generation (seed --seed), the task measure;
- `ruler-heldout-FAMILY`: the same tasks on another seed (--seed + 1), scored by likelihood only
  (`--likelihood-only`: nothing generated), whose answer log p is the held-out cheap measure (the two runs' prompts are checked to be disjoint);
- `diff-FAMILY-VARIANT`: KL of each variant against the full cache, sliding windows (--window,
  --stride) so that every scored target follows a context longer than the budget;
- `effective-length-FAMILY`: gain and log p over context lengths.
Then `ctxeval agreement` over them (the held-out run labelled by agreement itself) and the
press-study analysis (ctxeval.agreement.press_study) into --out/report.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import pandas as pd

import ctxeval
from ctxeval.agreement.measures import CHEAP, Measure, hold_out, measures_of
from ctxeval.agreement.analysis import measure_table
from ctxeval.agreement.press_study import compressed_kl, press_study_table, separation
from ctxeval.modeldiff.run import DIFF_FILE
from ctxeval.results.base import read_result
from ctxeval.results.manifest import read_manifest
from ctxeval.results.ruler import RulerResult

FAMILIES = ("hf:gemma-3-270m", "hf:smollm2-135m")
PRESSES = ("StreamingLLMPress", "SnapKVPress", "ExpectedAttentionPress", "KnormPress", "TOVAPress")
TASKS = ("niah_single_1", "niah_single_2", "niah_multikey_1", "niah_multivalue", "vt", "fwe")
BOOKS = ("austen-emma.txt",)
SMALL = {"families": "hf:smollm2-135m", "presses": "StreamingLLMPress,SnapKVPress", "budgets": "256", "tasks": "niah_single_1",
         "lengths": "1024", "samples": 2, "books": "austen-emma.txt", "window": 512, "stride": 128, "max_tokens": 1024,
         "el_lengths": "128,512", "starts": 1, "targets": 8}


def variants(family: str, presses: list[str], budgets: list[int]) -> list[str]:
    """The full cache, a truncation control per budget, every press at every budget."""
    return [family, *(f"{family}?max_context={b}" for b in budgets), *(f"{family}?press={p}&budget={b}" for b in budgets for p in presses)]


def _seconds(run: Path) -> float:
    timing = read_manifest(run).timing or {}
    return float(timing.get("seconds_all_sessions", timing.get("seconds_this_session", math.nan)))


def _slug(variant: str) -> str:
    return variant.split("?", 1)[1].replace("&", "-").replace("=", "") if "?" in variant else "full"


RUN_KINDS = ("ruler-gen", "ruler-heldout", "effective-length")


def run_folders(family: str, args: argparse.Namespace, out: Path) -> tuple[dict[str, Path], dict[str, Path]]:
    """Where a family's runs live under --out, for the runs and for --analyse-only alike: the
    RULER and effective-length runs by kind, the diff runs by pressed variant (diff takes no
    max_context, so the truncation controls have none)."""
    name = family.split(":")[1]
    runs = {kind: out / f"{kind}-{name}" for kind in RUN_KINDS}
    diffs = {v: out / f"diff-{name}-{_slug(v)}" for v in variants(family, args.presses, args.budgets) if "press=" in v}
    return runs, diffs


def estimate(args: argparse.Namespace, out: Path) -> float:
    """Seconds the study should take here, from two tiny timed RULER runs per family of the full
    cache and one press at the shortest length (--out/calibrate-FAMILY-N, 1 and 2 samples): their
    difference is the time of one sample per model without loading (t2 − t1 over the models), the
    rest is the fixed cost per run and model. On shared cores the difference can come out below
    zero or above t2's own share; then one sample costs t2's share, load included (an upper
    bound), and loading nothing more. Scaled by the study's samples (linear in length; the held-out
    run, which generates nothing, counted as a generating one: an upper bound), its runs' loads, and
    the tokens diff and effective-length score (a 1,024-token pass costing one sample)."""
    total = 0.0
    for family in args.families:
        models = (family, f"{family}?press={args.presses[0]}&budget={args.budgets[0]}")
        timed = []
        for n in (1, 2):
            run = out / f"calibrate-{family.split(':')[1]}-{n}"
            ctxeval.ruler(tasks=args.tasks[:1], lengths=args.lengths[:1], samples=n, models=models, seed=args.seed, out=run)
            timed.append(_seconds(run))
        upper = timed[1] / (2 * len(models))
        difference = (timed[1] - timed[0]) / len(models)
        sample = difference if 0 < difference <= upper else upper
        fixed = max(timed[0] / len(models) - sample, 0.0)
        per_sample = sample * 1024 / args.lengths[0]
        n_variants = len(variants(family, args.presses, args.budgets))
        ruler = 2 * n_variants * len(args.tasks) * args.samples * sum(n / 1024 for n in args.lengths)
        diff_windows = max(1, (args.max_tokens - args.window) // args.stride + 1) * len(args.books)
        n_pressed = len(args.presses) * len(args.budgets)
        diff = n_pressed * 2 * diff_windows * args.window / 1024
        el = n_variants * len(args.books) * args.starts * sum(n / 1024 for n in args.el_lengths)
        loads = (2 + 1) * n_variants + 2 * n_pressed  # two ruler runs and effective-length per variant, two models per diff
        total += per_sample * (ruler + diff + el) + fixed * loads
        print(f"{family}: {per_sample:.1f} s per 1,024-token RULER sample, {fixed:.0f} s per model loaded (timed here); {n_variants} variants",
              flush=True)
    return total


def _check_disjoint(gen: Path, held: Path) -> None:
    """The held-out run's prompts share none with the generation run's (different samples)."""
    a, b = (set(read_result(p).samples["prompt_sha256"]) for p in (gen, held))
    if a & b:
        raise SystemExit(f"{held} repeats {len(a & b)} prompts of {gen}: the seeds do not give disjoint samples")
    print(f"held-out samples: {len(b)} prompts, none of the {len(a)} generation prompts", flush=True)


def run_family(family: str, args: argparse.Namespace, data: Path, out: Path) -> None:
    """Every run of one family (resumable), in the folders `run_folders` names."""
    models = tuple(variants(family, args.presses, args.budgets))
    folders, diff_folders = run_folders(family, args, out)
    for kind, seed in (("gen", args.seed), ("heldout", args.seed + 1)):
        started = time.time()
        ctxeval.ruler(tasks=tuple(args.tasks), lengths=tuple(args.lengths), samples=args.samples, models=models, seed=seed,
                      out=folders[f"ruler-{kind}"], progress=True, likelihood_only=kind == "heldout")
        print(f"ruler ({kind}, seed {seed}) {family}: {time.time() - started:.0f} s this session", flush=True)
    _check_disjoint(folders["ruler-gen"], folders["ruler-heldout"])
    texts = tuple(str(data / b) for b in args.books)
    for variant, run in diff_folders.items():
        started = time.time()
        result = ctxeval.diff(family, variant, texts, window=args.window, stride=args.stride, max_tokens=args.max_tokens, out=run, progress=True)
        passes = compressed_kl(pd.read_parquet(run / DIFF_FILE), args.window - args.stride)
        print(f"diff {variant}: mean KL {result.report['summary']['all']['kl']['estimate']:.4f} over all targets, "
              f"{passes['kl'].mean():.4f} over the {len(passes)} compressed passes; {time.time() - started:.0f} s this session", flush=True)
    started = time.time()
    ctxeval.effective_length(texts, models=models, lengths=tuple(args.el_lengths), starts=args.starts, targets=args.targets,
                             out=folders["effective-length"], progress=True)
    print(f"effective-length {family}: {time.time() - started:.0f} s this session", flush=True)


def analyse(families: list[str], runs: list[Path], diffs: list[Path], out: Path, min_context: int, replicates: int) -> str:
    """agreement's measures (the held-out run kept apart), KL against the full cache over the diff
    passes scored against a compressed cache (the full cache: 0 by definition), diff costs as whole
    runs (one variant each), the press-study tables and the samples each measure needs."""
    measures, seeds, per_sample = [], {}, []
    for run in runs:
        result = read_result(run)
        measures += measures_of(result, str(run))
        if isinstance(result, RulerResult):
            seeds[str(run)] = int(result.manifest.config["seed"])
            s = result.samples
            column, label = ("generation_score", "RULER generated score") if run.name.startswith("ruler-gen") else ("mean_logprob", "RULER answer log p (held out)")
            per_sample.append(pd.DataFrame({"measure": label, "variant": s["model"], "sample": list(zip(s["task"], s["length"], s["sample"])),
                                            "value": s[column].astype(float)}))
    kl_name = "mean KL vs full cache (compressed passes)"
    for run in diffs:
        variant = read_result(run).report["cand"]["name"]
        passes = compressed_kl(pd.read_parquet(run / DIFF_FILE), min_context)
        if passes.empty:
            raise SystemExit(f"{run}: no pass follows {min_context} tokens of context; lengthen --max-tokens")
        kl = float((passes["kl"] * passes["targets"]).sum() / passes["targets"].sum())
        measures.append(Measure(variant, kl_name, CHEAP, -1, kl, str(run), _seconds(run)))
        keys = list(zip(passes["text_id"], passes["pass_index"]))
        family = next(f for f in families if variant.startswith(f))
        per_sample += [pd.DataFrame({"measure": "KL vs full cache per pass", "variant": variant, "sample": keys, "value": passes["kl"]}),
                       pd.DataFrame({"measure": "KL vs full cache per pass", "variant": family, "sample": keys, "value": 0.0})]
    measures += [Measure(f, kl_name, CHEAP, -1, 0.0, "(the full cache against itself)", 0.0) for f in families]
    table = measure_table(hold_out(measures, seeds))
    lines = []
    for task in sorted(m for m in set(table["measure"]) if m.startswith("RULER score at")):
        pairs = press_study_table(table, task, replicates, seed=0)
        lines += [f"## {task} (generated) against each cheap measure, {table[table['measure'] == task]['model'].nunique()} variants", "",
                  pairs[["cheap", "models", "spearman", "spearman.low", "spearman.high", "kendall", "kendall.low", "kendall.high",
                         "seconds_per_variant", "task_seconds_per_variant", "cost_share"]].to_markdown(index=False, floatfmt=".3g"), ""]
    samples = pd.concat(per_sample, ignore_index=True)
    sep = pd.concat([separation(samples[samples["variant"].str.startswith(f)], f) for f in families], ignore_index=True)
    lines += ["## Samples needed to tell each variant from the full cache (paired t, 95 %)", "", sep.to_markdown(index=False, floatfmt=".3g")]
    (out / "report").mkdir(parents=True, exist_ok=True)
    table.to_csv(out / "report" / "measures.csv", index=False)
    sep.to_csv(out / "report" / "samples_needed.csv", index=False)
    text = "\n".join(lines)
    (out / "report" / "press_study.md").write_text(text + "\n")
    return text


def main(argv: list[str], data: Path, out: Path) -> None:
    parser = argparse.ArgumentParser(prog="agreement_study.py --study presses", description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="one family, 2 presses, 1 budget, 1 task, 1,024 tokens, 2 samples: checks the script")
    parser.add_argument("--families", default=",".join(FAMILIES))
    parser.add_argument("--presses", default=",".join(PRESSES))
    parser.add_argument("--budgets", default="256,512")
    parser.add_argument("--tasks", default=",".join(TASKS))
    parser.add_argument("--lengths", default="1024,2048")
    parser.add_argument("--samples", type=int, default=1, help="RULER samples per (task, length), in each of the two seeds' runs")
    parser.add_argument("--seed", type=int, default=42, help="RULER's seed for generation; the held-out run uses seed + 1")
    parser.add_argument("--books", default=",".join(BOOKS), help="texts of diff and effective-length, under --data")
    parser.add_argument("--window", type=int, default=1024)
    parser.add_argument("--stride", type=int, default=256, help="diff's sliding stride: each target follows window − stride tokens or more")
    parser.add_argument("--max-tokens", type=int, default=2048, help="tokens of each book diff scores")
    parser.add_argument("--el-lengths", default="128,512,2048")
    parser.add_argument("--starts", type=int, default=1)
    parser.add_argument("--targets", type=int, default=16)
    parser.add_argument("--replicates", type=int, default=2000)
    parser.add_argument("--yes", action="store_true", help="run without a pause after the time estimate")
    parser.add_argument("--estimate-only", action="store_true", help="time the calibration runs, print the estimate and stop")
    parser.add_argument("--analyse-only", action="store_true", help="run nothing: analyse the finished runs of --families under --out")
    args = parser.parse_args(argv)
    if args.small:
        for key, value in SMALL.items():
            setattr(args, key, value)
    for key in ("families", "presses", "tasks", "books"):
        setattr(args, key, str(getattr(args, key)).split(","))
    for key in ("budgets", "lengths", "el_lengths"):
        setattr(args, key, [int(n) for n in str(getattr(args, key)).split(",")])
    if args.window - args.stride <= max(args.budgets):
        parser.error(f"--window − --stride ({args.window - args.stride}) must exceed the largest budget ({max(args.budgets)}) so that diff compresses every context")
    out.mkdir(parents=True, exist_ok=True)
    folders = [run_folders(f, args, out) for f in args.families]
    runs = [run for family_runs, _ in folders for run in family_runs.values()]
    diffs = [run for _, family_diffs in folders for run in family_diffs.values()]
    if args.analyse_only:
        print(analyse(args.families, runs, diffs, out, args.window - args.stride, args.replicates))
        return
    n_variants = sum(len(variants(f, args.presses, args.budgets)) for f in args.families)
    print(f"press study: {n_variants} variants over {', '.join(args.families)}; presses {', '.join(args.presses)} at budgets {args.budgets}; "
          f"RULER {', '.join(args.tasks)} at {args.lengths} tokens, {args.samples} samples each; timing one sample per family first", flush=True)
    seconds = estimate(args, out)
    print(f"estimated time: {seconds / 3600:.1f} h ({seconds:.0f} s) on this machine; runs already finished under {out} are skipped", flush=True)
    if args.estimate_only:
        return
    if not args.yes and not args.small:
        time.sleep(10)  # a moment to stop a study that would not fit
    for family in args.families:
        run_family(family, args, data, out)
    print(analyse(args.families, runs, diffs, out, args.window - args.stride, args.replicates))
