"""The answer-quality methods compared in the PPLqa paper, each a score for one (question,
answer) with a direction: PPLqa (lower is better), GPTScore and G-Eval (higher is better).

`+prompt` variants put the question inside the aspect prompt (the paper's "with prompt").
`geval` is the paper's integer 1-5 score, `geval_weighted` G-Eval's probability-weighted one;
both come from the same evaluator pass.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ctxeval.errors import UserError
from ctxeval.metrics.qa import geval_score, gpt_score, ppl_qa
from ctxeval.qa.evaluator import PassRequest, digit_logprobs, pair_score
from ctxeval.qa.prompts import check_aspect, geval_prompt, qa_prefix

HIGHER_IS_BETTER = {"pplqa": False, "pplqa+prompt": False, "gptscore": True, "gptscore+prompt": True, "geval": True, "geval_weighted": True}
METHODS = tuple(HIGHER_IS_BETTER)
GEVAL_METHODS = ("geval", "geval_weighted")
QA_SCOPES = ("all", "answer")
DEFAULT_QA_SCOPE = "all"


@dataclass(frozen=True)
class MethodConfig:
    """Settings shared by all methods of one evaluation."""

    methods: tuple[str, ...] = ("pplqa", "gptscore", "geval", "geval_weighted")
    qa_scope: str = DEFAULT_QA_SCOPE
    aspect: str = "coherence"  # for +prompt variants and G-Eval

    def __post_init__(self) -> None:
        unknown = [m for m in self.methods if m not in HIGHER_IS_BETTER]
        if unknown or not self.methods:
            raise UserError(f"unknown method(s) {', '.join(unknown) or '(none)'}: choose from {', '.join(METHODS)}")
        check_aspect(self.aspect)


def parse_methods(value: str) -> tuple[str, ...]:
    return tuple(m.strip().lower() for m in value.split(",") if m.strip())


def answer_passes(question: str, answer: str, config: MethodConfig) -> list[PassRequest]:
    """The passes every requested method needs for one answer (PPL(a) once for all PPLqa forms,
    one G-Eval pass for both G-Eval forms)."""
    requests = [_alone(answer)] if any(m.startswith("pplqa") for m in config.methods) else []
    for method in config.methods:
        request = _geval(question, answer, config) if method in GEVAL_METHODS else _joint(question, answer, method, config)
        if request not in requests:
            requests.append(request)
    return requests


def score_answer(records: Callable[[PassRequest], dict], question: str, answer: str, config: MethodConfig) -> dict[str, float]:
    """Every requested method's score, plus PPL(q ⊕ a) and PPL(a) for PPLqa's, for one answer,
    from the records of its passes (`records(request)`)."""
    out: dict[str, float] = {}
    for method in config.methods:
        if method in GEVAL_METHODS:
            geval = geval_score(digit_logprobs(records(_geval(question, answer, config))))
            out[method] = geval.integer if method == "geval" else geval.weighted
            out["geval_digit_mass"] = geval.digit_mass
            continue
        joint = pair_score(records(_joint(question, answer, method, config)))
        if method.startswith("pplqa"):
            alone = pair_score(records(_alone(answer)))
            ppl_joint, ppl_answer, value = ppl_qa(joint.prefix_sum, joint.n_prefix, joint.cont_sum, joint.n_cont, alone.cont_sum, config.qa_scope, alone.n_cont)
            out[method], out[f"{method}:ppl_qa"], out[f"{method}:ppl_a"] = value, ppl_joint, ppl_answer
        else:
            out[method] = gpt_score(joint.cont_sum, joint.n_cont)
    return out


def _alone(answer: str) -> PassRequest:
    return PassRequest("pair", "", answer)


def _joint(question: str, answer: str, method: str, config: MethodConfig) -> PassRequest:
    return PassRequest("pair", qa_prefix(question, config.aspect if method.endswith("+prompt") else None), answer)


def _geval(question: str, answer: str, config: MethodConfig) -> PassRequest:
    return PassRequest("digits", geval_prompt(question, answer, config.aspect))
