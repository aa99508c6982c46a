"""Which tokens lm-eval's `hf` backend scores in `loglikelihood_rolling`, and what that does to
word perplexity, on the same weights as `ctxeval score`.

Documents: the paragraphs of the WikiText-2 test head in tests/fixtures (as bench/bench_serve.py).
Per document, five numbers (Σ log-likelihood in nats):
- lm-eval `HFLM` with its defaults on the converted checkpoint (`hf:gemma-3-270m`);
- lm-eval `HFLM` with `add_bos_token=False`;
- ctxeval's hf scorer on the windows lm-eval's defaults build (recomputed by ctxeval);
- ctxeval's hf scorer on `ctxeval score`'s window: BOS, then the text, BOS never scored;
- ctxeval's llama.cpp scorer (the Q4_K_M GGUF) on that same window.

    PYTHONPATH=src python bench/bench_lmeval_bos.py [--max-length 512] [--threads 2]
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_serve import documents  # noqa: E402


def ctxeval_sums(scorer, windows: list[tuple[list[int], list[int]]]) -> list[float]:
    """Σ logprob of each (input, targets) window, the targets being the input's last predictions."""
    passes = []
    for inp, pred in windows:
        arr = np.asarray(inp, dtype=np.int32)
        passes.append((arr, np.arange(len(arr) - len(pred), len(arr)), np.asarray(pred, dtype=np.int32)))
    return [float(s.logprob.sum()) for s in scorer.score_batch(passes, 1, (1.0,))]


def lmeval_sums(path: str, docs: list[str], max_length: int, **kwargs) -> tuple[list[float], object]:
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM

    lm = HFLM(pretrained=path, device="cpu", dtype="float32", batch_size=4, max_length=max_length, **kwargs)
    requests = [Instance(request_type="loglikelihood_rolling", doc={}, arguments=(d,), idx=0) for d in docs]
    return [float(x) for x in lm.loglikelihood_rolling(requests, disable_tqdm=True)], lm


def word_ppl(sums: list[float], docs: list[str]) -> float:
    """lm-eval's word_perplexity: exp(−Σ ll / Σ words), words = re.split(r"\\s+", doc)."""
    return math.exp(-sum(sums) / sum(len(re.split(r"\s+", d)) for d in docs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-length", type=int, default=512)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    import torch
    from lm_eval.utils import get_rolling_token_windows, make_disjoint_window

    from ctxeval.backends.registry import load_scorer, parse_model_spec

    torch.set_num_threads(args.threads)
    docs = documents()
    hf = load_scorer(parse_model_spec("hf:gemma-3-270m"), n_threads=args.threads)
    bos = hf.info.bos_id
    ids = [hf.tokenize(d) for d in docs]
    assert all(len(x) + 1 <= args.max_length for x in ids), "every document must fit one window"

    default, lm = lmeval_sums(str(hf.info.path), docs, args.max_length)
    encoded = [lm.tok_encode(d) for d in docs]
    assert all(e == [bos] + x for e, x in zip(encoded, ids)), "lm-eval's tok_encode = [BOS] + ctxeval's tokens"
    lm_windows = [make_disjoint_window(w) for e in encoded for w in get_rolling_token_windows(e, lm.prefix_token_id, args.max_length, 1)]
    print(f"lm-eval defaults: prefix_token_id {lm.prefix_token_id} (BOS {bos}), add_bos_token {lm.add_bos_token}, "
          f"first window of document 0: input {lm_windows[0][0][:4]}…, targets {lm_windows[0][1][:3]}…")
    no_bos, _ = lmeval_sums(str(hf.info.path), docs, args.max_length, add_bos_token=False)
    del lm

    hf_lm_windows = ctxeval_sums(hf, [(c + p[:-1], p) for c, p in lm_windows])
    own = [([bos] + x[:-1], x) for x in ids]
    hf_own = ctxeval_sums(hf, own)
    bos_after_bos = ctxeval_sums(hf, [([bos], [bos])])[0]
    hf.close()
    llama = load_scorer(parse_model_spec("gemma-3-270m"), n_threads=args.threads)
    llama_own = ctxeval_sums(llama, own)
    llama.close()

    n_tokens = sum(len(x) for x in ids)
    print(f"{len(docs)} documents, {n_tokens} tokens, max_length {args.max_length}; log p(BOS | BOS) = {bos_after_bos:.4f} nats\n")
    rows = [
        ("lm-eval hf, defaults ([BOS] + [BOS] + text, the second BOS scored)", default),
        ("ctxeval hf on those windows", hf_lm_windows),
        ("lm-eval hf, add_bos_token=False ([BOS] + text)", no_bos),
        ("ctxeval score, hf:gemma-3-270m (float32)", hf_own),
        ("ctxeval score, gemma-3-270m (llama.cpp, Q4_K_M)", llama_own),
    ]
    print("| path | Σ log-likelihood | word perplexity | max \\|Δ\\| per document vs ctxeval score hf |")
    print("|---|---:|---:|---:|")
    for name, sums in rows:
        delta = max(abs(a - b) for a, b in zip(sums, hf_own))
        print(f"| {name} | {sum(sums):.3f} | {word_ppl(sums, docs):.2f} | {delta:.4f} |")
    print("\nper document, lm-eval defaults − ctxeval score hf (nats): " + " ".join(f"{a - b:.3f}" for a, b in zip(default, hf_own)))
    print("per document, llama.cpp − hf, ctxeval score windows (nats): " + " ".join(f"{a - b:+.3f}" for a, b in zip(llama_own, hf_own)))


if __name__ == "__main__":
    main()
