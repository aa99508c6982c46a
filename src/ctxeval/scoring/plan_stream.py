"""Plan a run one document at a time, and give the executor each document's passes lazily.

A corpus can be far larger than memory, and a document's token arrays (ids and four offset
arrays: 36 bytes per token) are larger than its text. So planning tokenizes one document
under every model, plans it, keeps only its passes and counts, and drops the arrays; the
executor re-tokenizes a document when its first pending pass comes up (tokenizing is
deterministic, so the tokens are the same). Documents planned while fewer than
`HOLD_TOKENS` tokens are held keep their token arrays for the executor, so a small input is
tokenized once (an API model's tokenizer is a request per text). Pass indices are those of the whole plan
([model][document][pass] order), so resuming works exactly as before.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence

from ctxeval.backends.base import ModelInfo, Scorer
from ctxeval.data.texts import Text
from ctxeval.errors import UserError
from ctxeval.pipeline.tokens import TokenizedText, tokenize
from ctxeval.pipeline.windows import Pass, for_model, run_order

HOLD_TOKENS = 4_000_000  # about 150 MB of token arrays kept from planning for the executor

Planner = Callable[[list[ModelInfo], list[list[TokenizedText]]], tuple[list[list[list[Pass]]], dict]]


def plan_documents(planner: Planner, scorers: list[Scorer], caps: Sequence[int | None], texts: Iterable[Text]) -> tuple[list[list[list[Pass]]], dict, list[dict], dict[int, list[TokenizedText]]]:
    """plan[model][document][pass], the planner's facts merged over documents, one manifest
    entry per document, and the tokenized documents held for the executor
    ({document index: [per model]}, up to HOLD_TOKENS tokens). Each model's passes are
    fitted to it here, whatever the planner (`windows.for_model`: a model without BOS predicts no first token;
    capped at its spec's `max_context`, `caps[model]`). A document the planner refuses (too short for a requested
    length, say) is skipped and its entry says why; if every document is refused, the first
    refusal is raised, so a single text fails exactly as it always did."""
    infos = [s.info for s in scorers]
    plan: list[list[list[Pass]]] = [[] for _ in scorers]
    facts: list[tuple[str, dict]] = []
    entries: list[dict] = []
    first_refusal: UserError | None = None
    held: dict[int, list[TokenizedText]] = {}
    held_tokens = 0
    for doc_index, text in enumerate(texts):
        entry = {"text_id": text.text_id, "source": text.source, "sha256": text.sha256, "n_chars": len(text.content), "n_bytes": text.n_bytes}
        try:
            tokenized = [tokenize(scorer, text) for scorer in scorers]
            entry["n_tokens"] = {s.info.name: len(tt) for s, tt in zip(scorers, tokenized)}
            doc_plan, doc_facts = planner(infos, [[tt] for tt in tokenized])
        except UserError as exc:
            first_refusal = first_refusal or exc
            entry["skipped"] = str(exc)
            for per_model in plan:
                per_model.append([])
        else:
            for per_model, doc, info, cap in zip(plan, doc_plan, infos, caps, strict=True):
                per_model.append(for_model(doc[0], info.uses_bos, cap))
            facts.append((text.text_id, doc_facts))
            n_tokens = sum(len(tt) for tt in tokenized)
            if held_tokens + n_tokens <= HOLD_TOKENS:
                held[doc_index] = tokenized
                held_tokens += n_tokens
        entries.append(entry)
    if not facts:
        raise first_refusal or UserError("no text given")
    return plan, merge_facts(facts), entries, held


def merge_facts(facts: list[tuple[str, dict]]) -> dict:
    """One dict of planning facts from per-document ones: dicts are merged, values equal in
    every document kept once, other values given per document id."""
    if len(facts) == 1:
        return facts[0][1]
    out: dict = {}
    for key in dict.fromkeys(k for _, f in facts for k in f):
        values = [(text_id, f[key]) for text_id, f in facts if key in f]
        if all(isinstance(v, dict) for _, v in values):
            out[key] = {k: x for _, v in values for k, x in v.items()}
        elif all(v == values[0][1] for _, v in values):
            out[key] = values[0][1]
        else:
            out[key] = dict(values)
    return out


def document_jobs(
    scorer: Scorer, per_model: list[list[Pass]], texts: Iterable[Text], first_index: int, done: set[int], held: dict[int, TokenizedText]
) -> Iterator[tuple[int, TokenizedText, Pass]]:
    """(pass index, tokenized document, pass) of every pending pass of one model, in
    `run_order`, tokenizing each document only when it has a pending pass and is not `held`
    from planning."""
    index = first_index
    texts_iter = iter(texts)
    for doc_index, passes in enumerate(per_model):
        text = next(texts_iter)
        pending = [(index + j, passes[j]) for j in run_order(passes) if index + j not in done]
        index += len(passes)
        if not pending:
            continue
        tt = held[doc_index] if doc_index in held else tokenize(scorer, text)
        for pass_index, p in pending:
            yield pass_index, tt, p
