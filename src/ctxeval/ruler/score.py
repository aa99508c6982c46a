"""Score one RULER sample two ways: by generation, as RULER does, and by likelihood.

Likelihood: the reference answer (`reference_text`: the answers in the form the task's prompt
invites) is teacher-forced after the prompt in one pass; its log-probability, every token's
exact rank, and the greedy prefix (how many reference tokens are the model's top choice in a
row). An answer is *likelihood-correct* when its tokens lie inside the greedy prefix: greedy
generation then produces it, word for word. The likelihood score is the share of answers that
are, a continuous companion of RULER's `string_match_all`.

Generation: on a backend that generates (llama.cpp, hf), the reference is scored on generation's
own kernel path (`score_then_generate`), so when the whole reference is the greedy continuation
the generated text starts with it and scores 1 without being generated (the record's prediction
is then the reference, so that RULER's evaluate.py re-scores it alike); otherwise the model
generates the task's `tokens_to_generate` greedily (continuing from where the greedy chain left
the reference, the prompt decoded once) and RULER's scorer reads the text. A sample
can be correct by generation and not by likelihood (the model answered in another form: other
order, other separators, a preamble); never the reverse on the generation path. An hf: model
with a KV press takes the same path with its context compressed: the task's instruction and
haystack are prefilled inside the press, and the question, the answer prefix, the reference and
every generated token run against the compressed cache (probes/context_split.py). An API model generates
text (temperature 0) and scores the reference with what the API returns: exact ranks where the
server gives vLLM's prompt_logprobs (`ctxeval serve` does), else ranks within its top-k.

Likelihood only (`--likelihood-only`): the reference is scored on the same path and nothing is
generated; the records hold the same likelihood numbers as a generating run's, no generated score.

Generation stops once the score is decided (`score_decided`: every answer is in the text of the
whole generation so far, and RULER's cleaning and containment only grow as text is appended), so
the stored prediction is the text up to there and its score is the full-length generation's; a
wrong or partial answer runs to the task's limit. `--full-generation` runs every generation to the
limit, as RULER does. An API model generates in full (the server cannot be told to stop).

A generated share (`--generate-share P`): every sample's likelihood pass; a sample greedy decoding
would answer with the reference is settled without generating; of the others, the seeded draw
of ruler/ppi.py picks those generated, and the rest are recorded as predicted. A generated
count (`--generate N`) draws N samples of each task and length alike, the same for every model.
"""

from __future__ import annotations

import codecs
import hashlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from ctxeval.backends.base import Scorer, Stop
from ctxeval.backends.logits import BlockScores
from ctxeval.errors import FieldError
from ctxeval.metrics.ruler import match_all, postprocess_pred, score_decided
from ctxeval.probes.answer_tokens import answer_cover, min_margin
from ctxeval.probes.context_split import context_end as split_at, ruler_context_chars
from ctxeval.ruler.aggregation import Rendered
from ctxeval.ruler.generation import Generation
from ctxeval.ruler.ppi import PREDICTED, drawn, drawn_of_count
from ctxeval.ruler.prompt import ChatTemplate, model_text, text_ids, token_counter
from ctxeval.ruler.samples import SampleSpec, build_sample
from ctxeval.ruler.tasks import TASKS

PROMPT_TAIL = 400  # characters of the prompt's end each record keeps (the question and the answer prefix, for the report)


def reference_text(family: str, answers: tuple[str, ...]) -> str:
    """The continuation teacher-forced after the answer prefix, in the form the prompt invites:
    the needle tasks as their needles state a value ("...is: 7512152."), values comma-separated;
    cwe numbered as its worked example; vt's names space-separated right after the prefix's
    trailing space; fwe's coded words space-separated, as in its text."""
    if family == "niah":
        return ": " + ", ".join(answers) + "."
    if family == "common_words_extraction":
        return " " + " ".join(f"{i + 1}. {w}" for i, w in enumerate(answers))
    if family == "variable_tracking":
        return " ".join(answers)
    return " " + " ".join(answers)


@dataclass(frozen=True)
class SampleResult:
    """What one model did on one sample (a record of the run)."""

    model: str
    task: str
    length: int
    sample: int
    haystack: int  # haystack units used (lines, words, distractor needles)
    prompt_tokens: int  # prompt tokens the model saw, BOS included
    depth: float | None  # needle tasks: where the first answer's needle starts in the context (share of characters)
    answers: list[str]
    prompt_sha256: str  # of the text the model was given (render_sample on task, length, sample, haystack rebuilds it)
    prediction: str  # RULER-postprocessed: the generated text; the reference where the likelihood pass settled it ("generation path"); "" without generation
    method: str  # how it was scored: "greedy generation", "generation path" (settled by likelihood), "likelihood only (no generation)"
    generation_score: float | None  # RULER's string_match_all for this sample, in [0, 1]
    likelihood_score: float  # share of answers inside the greedy prefix
    answer_logprob: float  # summed log-probability of the reference tokens that cover the answers
    answer_tokens: int
    mean_logprob: float  # answer_logprob / answer_tokens
    first_rank: int  # exact rank of the reference's first answer token (1 = top choice; 0 = beyond an API's top-k)
    mean_log2_rank: float  # over the tokens covering the answers
    greedy_prefix: int  # leading reference tokens that are the top choice
    reference_tokens: int
    min_margin: float  # smallest top-1 minus runner-up log-probability over the greedy prefix and the token that leaves it
    prompt_tail: str  # the last PROMPT_TAIL characters of the text the model was given (the report shows them)
    answer_ranks: list[int]  # exact rank of each reference token that covers the answers, in order
    generated_tokens: int | None  # tokens the backend generated (0: the likelihood pass settled it); None: not generated here, or an API's text

    def to_row(self) -> dict:
        return asdict(self)


def score_sample(scorer: Scorer, rendered: Rendered, spec: SampleSpec, haystack: int, chat: ChatTemplate | None = None,
                 generate: bool = True, settle: bool = False, full_generation: bool = False) -> SampleResult:
    """Both scores of one rendered sample on a loaded model; the likelihood scores alone when
    `generate` is False (the same numbers a generating run records, without its cost). With
    `settle`, a sample not generated is still labelled where greedy decoding produces the whole
    reference (its generated score is then known), else recorded as predicted. Generation stops
    once its score is decided, unless `full_generation`."""
    task = TASKS[spec.task]
    info = scorer.info
    bos = [info.bos_id] if info.uses_bos else []
    given = model_text(spec.task, rendered.prompt, chat)
    whole = text_ids(scorer, given, chat)
    prompt_sha256 = hashlib.sha256(given.encode("utf-8")).hexdigest()
    # a truncation control sees the prompt's last N tokens
    prompt_ids = whole[-info.max_context :] if info.max_context is not None else whole
    context_end = None
    if scorer.compresses_context:  # the instruction and haystack compressed; the question on runs against the cache (no chat template with a press)
        chars = ruler_context_chars(task.family, given)
        context_end = split_at(scorer, given, whole, chars, len(bos)) - (len(whole) - len(prompt_ids))
    reference = reference_text(task.family, rendered.answers)
    reference_ids = scorer.tokenize(reference)  # as generation would produce it: tokens after the prompt's
    need = len(bos) + len(prompt_ids) + max(len(reference_ids), task.tokens_to_generate)
    if need > info.n_ctx_train:
        raise FieldError("lengths", f"{spec.length} needs {need} tokens of {info.name}, beyond its training context of {info.n_ctx_train}")
    prompt = np.asarray(bos + prompt_ids, dtype=np.int32)
    answer = np.asarray(reference_ids, dtype=np.int32)
    text: str | None = None
    n_generated: int | None = None
    if scorer.capabilities.generation and not generate:  # generation's own kernel path, so the numbers equal a generating run's
        scores = scorer.score_stepwise(prompt, answer, top_k=2, temperatures=(1.0,), context_end=context_end)
    elif scorer.capabilities.generation:
        stop = None if full_generation else stop_when_decided(scorer, rendered.answers)
        scores, generated = scorer.score_then_generate(prompt, answer, task.tokens_to_generate, top_k=2, temperatures=(1.0,), context_end=context_end, stop=stop)
        n_generated = 0 if generated is None else len(generated)
        if generated is not None:
            text = scorer.text_of(generated)
    else:  # an API model
        # it re-tokenizes text: the answer is scored as the server splits prompt + answer
        # (a token may straddle the two: "is" ":" can become "is:"), the prompt generated from as given
        scored_prompt, answer, reference = _joint_split(scorer, bos + prompt_ids, reference)
        reference_ids = [int(t) for t in answer]
        scores = _teacher_forced(scorer, scored_prompt, answer)
    covers = answer_cover(scorer, reference_ids, reference, rendered.answers)
    # the top choice: the greedy id where the backend gives ids; an API gives ranks (within its top-k)
    top = scores.rank == 1 if scorer.remote else scores.greedy_id == answer
    prefix = int(len(answer) if top.all() else np.argmin(top))
    if not scorer.capabilities.generation and generate and not (settle and prefix == len(answer)):  # an API model generates apart (not a settled sample of a share run)
        text = scorer.generate_text(prompt, task.tokens_to_generate)
    inside = [bool(c.any()) and int(np.flatnonzero(c)[-1]) < prefix for c in covers]
    likelihood = sum(inside) / len(inside)
    if text is not None:
        method, prediction = "greedy generation", postprocess_pred(text)
        generation = match_all(prediction, rendered.answers)
    elif scorer.capabilities.generation and generate:  # generation would produce the reference first: it stands for the generated text
        method, prediction = "generation path", postprocess_pred(reference)
        generation = match_all(prediction, rendered.answers)
    elif settle and prefix == len(answer):  # greedy decoding would produce the reference: labelled at no cost
        method, prediction = "generation path", postprocess_pred(reference)
        generation = match_all(prediction, rendered.answers)
    elif settle:
        method, prediction, generation = PREDICTED, "", None
    else:
        method, prediction, generation = "likelihood only (no generation)", "", None
    any_cover = np.any(covers, axis=0)
    logprob = float(scores.logprob[any_cover].sum())
    n_cover = int(any_cover.sum())
    first = int(np.flatnonzero(covers[0])[0]) if covers[0].any() else 0
    return SampleResult(
        model=info.name, task=spec.task, length=spec.length, sample=spec.index, haystack=haystack, prompt_tokens=len(prompt),
        depth=rendered.depth, answers=list(rendered.answers), prompt_sha256=prompt_sha256, prediction=prediction, method=method, generation_score=generation,
        likelihood_score=likelihood, answer_logprob=logprob, answer_tokens=n_cover, mean_logprob=logprob / max(1, n_cover),
        first_rank=int(scores.rank[first]), mean_log2_rank=_mean_log2_rank(scores.rank[any_cover]),
        greedy_prefix=prefix, reference_tokens=len(answer), min_margin=round(min_margin(scores.rows(0, prefix + 1)), 6),
        prompt_tail=given[-PROMPT_TAIL:], answer_ranks=[int(r) for r in scores.rank[any_cover]], generated_tokens=n_generated,
    )


def stop_when_decided(scorer: Scorer, answers: Sequence[str]) -> Stop:
    """Stop once more text cannot change RULER's score, judged on the whole generation so far (an
    answer may span tokens), its complete characters only: a character that the next token
    completes reads as U+FFFD alone, which the longer text does not hold."""

    def stop(ids: list[int]) -> bool:
        text = codecs.getincrementaldecoder("utf-8")("replace").decode(b"".join(scorer.token_bytes(t) for t in ids))
        return score_decided(text, answers)

    return stop


def _teacher_forced(scorer: Scorer, prompt: np.ndarray, answer: np.ndarray) -> BlockScores:
    """The answer's scores in one pass over the prompt and the answer (its last token as target only)."""
    return scorer.score(np.concatenate([prompt, answer[:-1]]), np.arange(len(prompt) - 1, len(prompt) + len(answer) - 1), answer, top_k=2, temperatures=(1.0,))


def _joint_split(scorer: Scorer, prompt_ids: list[int], reference: str) -> tuple[np.ndarray, np.ndarray, str]:
    """(prompt ids, answer ids, answer text) of prompt + reference tokenized as one text: the
    prompt's tokens up to the first that differs, the rest as the answer."""
    n_bos = 1 if scorer.info.uses_bos else 0
    text = scorer.text_of(prompt_ids[n_bos:]) + reference
    joint = prompt_ids[:n_bos] + scorer.tokenize(text)
    k = next((i for i, (a, b) in enumerate(zip(prompt_ids, joint)) if a != b), min(len(prompt_ids), len(joint)))
    answer_text = scorer.text_of(joint[k:])
    return np.asarray(joint[:k], dtype=np.int32), np.asarray(joint[k:], dtype=np.int32), answer_text


def _mean_log2_rank(ranks: np.ndarray) -> float:
    """Mean log2 rank of the answer tokens; NaN where a rank is unknown (0: beyond an API's top-k)."""
    return float(np.log2(ranks).mean()) if len(ranks) and (ranks > 0).all() else float("nan")


@dataclass(frozen=True)
class RulerTask:
    """Scoring RULER samples on a worker's model: one SampleResult row per SampleSpec."""

    seed: int
    essay: str
    chat: ChatTemplate | None = None
    generation: Generation = Generation()
    cell_samples: int = 0  # a cell's samples, 0 ... cell_samples - 1 (the draw of a generated count)
    full_generation: bool = False  # every generation to the task's limit (RULER's); else it stops once its score is decided

    def _drawn(self, spec: SampleSpec) -> bool:
        """Whether a sample the likelihood pass does not settle is generated."""
        mode = self.generation
        if mode.count is not None:
            return drawn_of_count(self.seed, spec.task, spec.length, spec.index, mode.count, self.cell_samples)
        return mode.share is None or drawn(self.seed, spec.task, spec.length, spec.index, mode.share)

    def __call__(self, model: Scorer, items: list[SampleSpec]) -> list[object]:
        rows = []
        prediction_powered = self.generation.prediction_powered
        for spec in items:
            # one context per length (BOS and the decode's spare token on top): a context grown
            # for a longer prompt would drop the previous prompt's cache (prefix reuse)
            model.prepare(min(spec.length + 2, model.info.n_ctx_train))
            rendered, haystack = build_sample(spec, self.seed, self.essay, token_counter(model, spec.task, self.chat))
            generate = self.generation.generates and self._drawn(spec)
            rows.append(score_sample(model, rendered, spec, haystack, self.chat, generate, settle=prediction_powered, full_generation=self.full_generation).to_row())
        return rows
