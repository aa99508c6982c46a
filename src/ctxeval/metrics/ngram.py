"""Reference-based n-gram scores of an answer: SQuAD token F1 and ROUGE-1/2/L F-measure.

Two variants, because published numbers depend on them:

- ``leval`` — L-Eval's ``Evaluation/f1.py`` and ``rouge.py``: F1 over SQuAD-normalised words,
  ROUGE from Google's ``rouge-score`` without stemming (its tokenizer keeps only ``[a-z0-9]``).
- ``longbench`` — LongBench's ``metrics.py``: the same F1 for English, ROUGE from the ``rouge``
  package (sentences split on ".", no lower-casing, summary-level LCS for ROUGE-L), and for
  Chinese rows jieba words with Chinese punctuation removed.

Both tokenisers score Chinese (and, for ``rouge-score``, any non-Latin script) as 0 or nearly
so. ``tokenize="plain"`` (the default) keeps that, because published L-Eval numbers include such
rows scored so; ``tokenize="unicode"`` tokenises rows written mainly in such scripts differently
(see `row_script`): CJK characters and Unicode words (``leval``) or jieba words for CJK rows
(``longbench``). Callers count and report those rows either way.

All functions return fractions in [0, 1]; callers multiply by 100.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache

VARIANTS = ("leval", "longbench")
TOKENIZE = ("plain", "unicode")
ROUGE_KEYS = ("rouge1", "rouge2", "rougeL")

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_ASCII_PUNCT = frozenset(string.punctuation)
# LongBench's list of Chinese punctuation (normalize_zh_answer), plus ASCII punctuation.
_CJK_PUNCT = frozenset("！？｡。＂＃＄％＆＇（）＊＋，－／：；＜＝＞＠［＼］＾＿｀｛｜｝～｟｠｢｣､、〃》「」『』【】〔〕〖〗〘〙〚〛〜〝〞〟〰〾〿–—‘’‛“”„‟…‧﹏.")
_ALL_PUNCT = _ASCII_PUNCT | _CJK_PUNCT
# Han (incl. extension A and compatibility), kana, Hangul syllables.
_CJK_CHAR = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]")
# A CJK character alone, or a run of letters/digits of any other script.
_UNICODE_TOKEN = re.compile(_CJK_CHAR.pattern + r"|(?:(?!" + _CJK_CHAR.pattern + r")[^\W_])+")


def script(text: str) -> str:
    """"latin" unless at least half of the text's letters belong to another script; then "cjk"
    when most of those are Chinese/Japanese/Korean, else "other" (Cyrillic, Greek, Arabic...).

    A stray Greek letter or Chinese name in an English answer keeps the text "latin", so English
    data is tokenised exactly as L-Eval does."""
    letters = [ch for ch in text if ch.isalpha()]
    foreign = [ch for ch in letters if not ch.isascii() and not unicodedata.name(ch, "").startswith("LATIN")]
    if not foreign or 2 * len(foreign) < len(letters):
        return "latin"
    cjk = sum(1 for ch in foreign if _CJK_CHAR.match(ch))
    return "cjk" if 2 * cjk >= len(foreign) else "other"


def row_script(*texts: str) -> str:
    """The script that decides a (prediction, references) row's tokenisation: "cjk" if any text
    is CJK, else "other" if any is non-Latin, else "latin"."""
    scripts = {script(t) for t in texts}
    return "cjk" if "cjk" in scripts else "other" if "other" in scripts else "latin"


def word_count(text: str, tokenize: str = "plain") -> int:
    """Words as L-Eval counts them (``len(text.split())``); with ``unicode`` tokenisation each
    CJK character of a CJK text counts as one word and punctuation standing alone is not counted
    (CJK text has no spaces, so whitespace words would be whole sentences)."""
    if tokenize == "plain" or script(text) != "cjk":
        return len(text.split())
    rest = [w for w in _CJK_CHAR.sub(" ", text).split() if not set(w) <= _ALL_PUNCT]
    return len(_CJK_CHAR.findall(text)) + len(rest)


# ---------------------------------------------------------------- token F1


def squad_normalize(text: str) -> str:
    """SQuAD answer normalisation: lower-case, drop ASCII punctuation, drop the articles
    a/an/the, collapse whitespace (L-Eval f1.py and LongBench normalize_answer)."""
    text = "".join(ch for ch in text.lower() if ch not in _ASCII_PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


def _cjk_char_tokens(text: str) -> list[str]:
    """Lower-case, drop ASCII and CJK punctuation and the English articles, then one token per
    CJK character and one per run of other non-space characters."""
    text = "".join(ch for ch in text.lower() if ch not in _ALL_PUNCT)
    text = _ARTICLES.sub(" ", text)
    tokens: list[str] = []
    for chunk in text.split():
        tokens.extend(t for t in re.split(f"({_CJK_CHAR.pattern})", chunk) if t)
    return tokens


def _jieba_tokens(text: str) -> list[str]:
    """LongBench's qa_f1_zh_score tokens: jieba words, each lower-cased with punctuation and
    whitespace removed, empty ones dropped."""
    tokens = []
    for word in _jieba().cut(text, cut_all=False):
        word = "".join(ch for ch in word.lower() if ch not in _ALL_PUNCT)
        word = "".join(word.split())
        if word:
            tokens.append(word)
    return tokens


def token_f1(prediction_tokens: Sequence[str], reference_tokens: Sequence[str]) -> float:
    """Harmonic mean of precision and recall of the multiset of shared tokens; 0 if none shared."""
    same = sum((Counter(prediction_tokens) & Counter(reference_tokens)).values())
    if same == 0:
        return 0.0
    precision = same / len(prediction_tokens)
    recall = same / len(reference_tokens)
    return 2 * precision * recall / (precision + recall)


def f1_tokens(text: str, variant: str = "leval", cjk: bool = False) -> list[str]:
    """The tokens F1 compares: SQuAD-normalised words, or for CJK rows characters (``leval``)
    or jieba words (``longbench``)."""
    if not cjk:
        return squad_normalize(text).split()
    return _cjk_char_tokens(text) if variant == "leval" else _jieba_tokens(text)


def f1(prediction: str, reference: str, variant: str = "leval", tokenize: str = "plain") -> float:
    """Token F1 of one prediction against one reference."""
    cjk = tokenize == "unicode" and row_script(prediction, reference) == "cjk"
    return token_f1(f1_tokens(prediction, variant, cjk), f1_tokens(reference, variant, cjk))


# ---------------------------------------------------------------- ROUGE


class _UnicodeTokenizer:
    """rouge-score tokenizer for non-Latin rows: lower-case, one token per CJK character and
    one per run of letters/digits of any script. On ASCII text it gives exactly rouge-score's
    own tokens (runs of [a-z0-9])."""

    def tokenize(self, text: str) -> list[str]:
        return _UNICODE_TOKEN.findall(text.lower())


@lru_cache(maxsize=2)
def _rouge_scorer(unicode_tokens: bool):
    from rouge_score import rouge_scorer

    tokenizer = _UnicodeTokenizer() if unicode_tokens else None
    return rouge_scorer.RougeScorer(list(ROUGE_KEYS), use_stemmer=False, tokenizer=tokenizer)


@lru_cache(maxsize=1)
def _jieba():
    try:
        import jieba
    except ImportError:  # pragma: no cover - depends on the install
        from ctxeval.errors import UserError, install_hint

        raise UserError(f"the longbench variant needs jieba for Chinese text: {install_hint('longbench')}") from None
    jieba.setLogLevel(60)
    return jieba


@lru_cache(maxsize=1)
def _rouge_package():
    try:
        from rouge import Rouge
    except ImportError:  # pragma: no cover - depends on the install
        from ctxeval.errors import UserError, install_hint

        raise UserError(f"the longbench variant needs the 'rouge' package: {install_hint('longbench')}") from None
    return Rouge()


def rouge(prediction: str, reference: str, variant: str = "leval", tokenize: str = "plain") -> dict[str, float]:
    """ROUGE-1, ROUGE-2 and ROUGE-L F-measures of one prediction against one reference."""
    kind = row_script(prediction, reference) if tokenize == "unicode" else "latin"
    if variant == "leval":
        scores = _rouge_scorer(kind != "latin").score(reference, prediction)
        return {key: scores[key].fmeasure for key in ROUGE_KEYS}
    if kind == "cjk":
        prediction = " ".join(_jieba().cut(prediction, cut_all=False))
        reference = " ".join(_jieba().cut(reference, cut_all=False))
    try:
        scores = _rouge_package().get_scores([prediction], [reference], avg=True)
    except (ValueError, RecursionError):
        # LongBench scores a pair the rouge package rejects (empty text, LCS recursion too deep) as 0
        return dict.fromkeys(ROUGE_KEYS, 0.0)
    return {"rouge1": scores["rouge-1"]["f"], "rouge2": scores["rouge-2"]["f"], "rougeL": scores["rouge-l"]["f"]}


def max_over_references(scores: Sequence[dict[str, float]]) -> dict[str, float]:
    """Per key, the best score over a row's references (L-Eval and LongBench both take the max)."""
    return {key: max(s[key] for s in scores) for key in scores[0]}
