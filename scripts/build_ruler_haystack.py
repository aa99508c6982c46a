"""Build the bundled RULER essay haystack, src/ctxeval/data/ruler/haystack.txt.

RULER's essay haystack is Paul Graham's essays, downloaded; ctxeval bundles public-domain books
instead: Chesterton's *The Man Who Was Thursday* whole, then Melville's *Moby-Dick*, as NLTK's
Gutenberg corpus has them (../shared/data/gutenberg). Their white space is collapsed, they are cut
into sentences as ctxeval's niah generator cuts a haystack, and each sentence is kept at its first
occurrence only ("Yes." once), one per line. The text stops at the first sentence after which both
tokenizers (Gemma 3's and SmolLM2's, read from their GGUFs without the weights) count at least
128K tokens and MARGIN more, so no 128K-token haystack repeats a sentence.

    /work/main/.venv/bin/python scripts/build_ruler_haystack.py ../shared/data/gutenberg
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from ctxeval.backends.model_files import embedded_model_path, smollm2_path
from ctxeval.ruler.tasks import sentences

BOOKS = ("chesterton-thursday.txt", "melville-moby_dick.txt")
TOKENS = 128 * 1024
MARGIN = 2048
OUT = Path(__file__).resolve().parents[1] / "src" / "ctxeval" / "data" / "ruler" / "haystack.txt"


def vocab_counter(path: Path):
    """Token count of a text under a GGUF's tokenizer, the weights not loaded."""
    import llama_cpp
    from llama_cpp._internals import LlamaModel

    params = llama_cpp.llama_model_default_params()
    params.vocab_only = True
    model = LlamaModel(path_model=str(path), params=params, verbose=False)
    return lambda text: len(model.tokenize(text.encode("utf-8"), add_bos=False, special=False))


def unique_sentences(folder: Path) -> list[str]:
    """The books' sentences in order, each at its first occurrence."""
    seen: dict[str, None] = {}
    for name in BOOKS:
        for sentence in sentences(re.sub(r"\s+", " ", (folder / name).read_text(encoding="utf-8"))):
            seen.setdefault(sentence, None)
    return list(seen)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("gutenberg", type=Path, help="folder holding NLTK's Gutenberg texts")
    args = parser.parse_args()
    kept = unique_sentences(args.gutenberg)
    counters = [vocab_counter(embedded_model_path()), vocab_counter(smollm2_path())]

    def enough(n: int) -> bool:
        text = " ".join(kept[:n])
        return all(count(text) >= TOKENS + MARGIN for count in counters)

    low, high = 1, len(kept)  # the fewest sentences that are enough, by bisection
    while low < high:
        middle = (low + high) // 2
        low, high = (low, middle) if enough(middle) else (middle + 1, high)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text("\n".join(kept[:low]) + "\n", encoding="utf-8")
    text = " ".join(kept[:low])
    print(f"{OUT}: {low} sentences, {len(text.split())} words, tokens {[count(text) for count in counters]}")


if __name__ == "__main__":
    main()
