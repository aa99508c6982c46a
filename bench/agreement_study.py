"""The agreement study (docs/agreement.md): which cheap likelihood number tracks RULER accuracy
across variants of the two embedded model families, on a CPU.

Twelve llama.cpp variants, six per family: the model, a q4_0 KV cache, RoPE frequency scale 0.5,
a file requantized to Q3_K_S (made here with llama.cpp's quantizer; SmolLM2's 576-wide tensors
fall back to q4_0), and two truncation controls (max_context 256 and 512). Per family one RULER
run (six tasks, 1,024 and 2,048 tokens; 6 samples per cell for Gemma, 3 for the slower SmolLM2) and one effective-length run (four Gutenberg books),
then `ctxeval agreement` over all of them (into --out/report). Every run is resumable: re-running this script
continues where it stopped (the folders under --out), across sessions.

    python bench/agreement_study.py --data ../shared/data/gutenberg --out runs/agreement

`--study presses` runs the press study instead (bench/press_study.py, docs/agreement.md): hf
models under kvpress presses, RULER by generation against answer log p on held-out samples,
KL against the full cache and effective-length's gain.
"""

from __future__ import annotations

import argparse
import ctypes
import time
from pathlib import Path

import ctxeval
from ctxeval.backends.model_files import embedded_path

FAMILIES = ("gemma-3-270m", "smollm2-135m")
TASKS = ("niah_single_1", "niah_single_2", "niah_multikey_1", "niah_multivalue", "vt", "fwe")
BOOKS = ("austen-emma.txt", "melville-moby_dick.txt", "chesterton-thursday.txt", "shakespeare-hamlet.txt")


def requantized(name: str, out: Path) -> Path:
    """The family's file requantized to Q3_K_S (made once)."""
    import llama_cpp

    path = out / f"{name}-q3_k_s.gguf"
    if not path.is_file():
        lib = llama_cpp.llama_cpp
        params = lib.llama_model_quantize_default_params()
        params.ftype, params.allow_requantize, params.nthread = lib.LLAMA_FTYPE_MOSTLY_Q3_K_S, True, 2
        if lib.llama_model_quantize(str(embedded_path(name)).encode(), str(path).encode(), ctypes.byref(params)) != 0:
            raise SystemExit(f"requantizing {name} failed")
    return path


def variants(name: str, out: Path) -> list[str]:
    return [name, f"{name}?type_k=q4_0&type_v=q4_0&flash_attn=1", f"{name}?rope_freq_scale=0.5", str(requantized(name, out)),
            f"{name}?max_context=256", f"{name}?max_context=512"]


def main() -> None:
    study = argparse.ArgumentParser(add_help=False)  # the study first: the press study's options share names with this one's
    study.add_argument("--study", choices=("variants", "presses"), default="variants")
    study.add_argument("--data", type=Path, default=Path("../shared/data/gutenberg"))
    study.add_argument("--out", type=Path, default=None)
    chosen, rest = study.parse_known_args()
    if chosen.study == "presses":
        from press_study import main as press_main  # bench/ is the script's own folder, first on sys.path

        press_main(rest, data=chosen.data, out=chosen.out or Path("runs/press-study"))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], add_help=False)
    parser.add_argument("-h", "--help", action="store_true", help="this help (with --study presses: the press study's options)")
    parser.add_argument("--data", type=Path, default=Path("../shared/data/gutenberg"))
    parser.add_argument("--out", type=Path, default=None, help="runs/agreement (variants) or runs/press-study (presses)")
    parser.add_argument("--samples", default="6,3", help="RULER samples per (task, length), per family in --families order")
    parser.add_argument("--lengths", default="1024,2048")
    parser.add_argument("--families", default=",".join(FAMILIES))
    parser.add_argument("--only", choices=("ruler", "effective-length", "all"), default="all")
    parser.add_argument("--study", choices=("variants", "presses"), default="variants",
                        help="variants: the llama.cpp study above; presses: the press study (see bench/press_study.py --help)")
    args = parser.parse_args()
    if args.help:
        parser.print_help()
        return
    args.out = args.out or Path("runs/agreement")
    args.out.mkdir(parents=True, exist_ok=True)
    lengths = tuple(int(n) for n in args.lengths.split(","))
    runs = []
    samples = [int(n) for n in args.samples.split(",")]
    for name, n_samples in zip(args.families.split(","), samples):
        models = tuple(variants(name, args.out))
        if args.only in ("ruler", "all"):
            started = time.time()
            ctxeval.ruler(tasks=TASKS, lengths=lengths, samples=n_samples, models=models, out=args.out / f"ruler-{name}", progress=True)
            print(f"ruler {name}: {time.time() - started:.0f} s this session", flush=True)
            runs.append(args.out / f"ruler-{name}")
        if args.only in ("effective-length", "all"):
            started = time.time()
            ctxeval.effective_length(tuple(str(args.data / b) for b in BOOKS), models=models, lengths=(128, 256, 512, 1024, 2048), starts=3, targets=16,
                                     out=args.out / f"effective-length-{name}", progress=True)
            print(f"effective-length {name}: {time.time() - started:.0f} s this session", flush=True)
            runs.append(args.out / f"effective-length-{name}")
    print("runs:", " ".join(map(str, runs)))
    if args.only == "all":
        result = ctxeval.agreement(runs, out=args.out / "report")
        print(result.markdown)


if __name__ == "__main__":
    main()
