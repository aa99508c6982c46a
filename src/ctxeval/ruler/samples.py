"""RULER samples sized in a model's own tokens: the haystack size per (task, length), then each
sample from its own seeded generator, shrunk by the task's step until it fits.

RULER's rule: the prompt's tokens (input and answer prefix, no BOS) plus the task's
`tokens_to_generate` fit in the length. RULER searches the size with a fresh random sample per
probe; ctxeval probes with one fixed sample per (task, length, seed), so the size is a pure
function of the model's tokenizer and the settings, and a resumed run rebuilds every sample.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from itertools import groupby

from ctxeval.errors import FieldError, UserError
from ctxeval.ruler.aggregation import Rendered, Setting, cwe_capacity, fwe_vocabulary_size, vt_body, vt_example
from ctxeval.ruler.tasks import TASKS, TaskDef
from ctxeval.probes.sizing import largest_fitting, largest_fitting_between

CountTokens = Callable[[str], int]
VT_EXAMPLE_LENGTH = 500  # RULER sizes vt's worked example to 500 tokens, with nothing to generate
VT_EXAMPLE_STEP = 5
CWE_ESTIMATE_WORDS = 4096  # RULER estimates cwe's tokens per word on a list of 4,096 words


@dataclass(frozen=True)
class SampleSpec:
    """Which sample to build, with everything a worker needs (picklable)."""

    task: str
    length: int
    index: int
    size: int  # the fitted haystack size for this model
    example: str = ""  # vt's worked example for this model


def sample_rng(seed: int, *parts: object) -> random.Random:
    """A generator for one purpose, a pure function of the seed and `parts`."""
    return random.Random("/".join(map(str, (seed, *parts))))


def setting_for(task: TaskDef, length: int, seed: int, essay: str, example: str = "") -> Setting:
    return Setting(task.args, seed, length, essay, example)


def vt_worked_example(count: CountTokens, seed: int, args: dict) -> str:
    """vt's worked example for this tokenizer: 3-letter names, value 12345, sized to 500 tokens."""
    setting = Setting(args, seed, VT_EXAMPLE_LENGTH)

    def body(size: int) -> tuple[str, list[str]]:
        return vt_body(sample_rng(seed, "vt-example", size), size, setting, is_icl=True)

    size = largest_fitting(lambda n: count(body(n)[0]) <= VT_EXAMPLE_LENGTH, VT_EXAMPLE_STEP)
    return vt_example(*body(size or VT_EXAMPLE_STEP))


def fit_size(task_name: str, length: int, seed: int, essay: str, count: CountTokens, model: str, example: str = "") -> int:
    """The haystack size of (task, length) for this tokenizer: the largest whose probe sample fits
    (RULER starts its search at the task's step, which at 512 tokens can exceed a UUID haystack;
    ctxeval starts at the task's smallest size). cwe: RULER's bisection between the smallest size
    and twice the words its tokens per word at 4,096 words allow, sizes beyond the word lists not
    fitting. fwe: RULER's own upward search in steps of (length - 50) / 32 words."""
    task = TASKS[task_name]
    setting = setting_for(task, length, seed, essay, example)
    budget = length - task.tokens_to_generate

    def tokens(size: int) -> int:
        return count(task.render(sample_rng(seed, "size", task_name, length), size, setting).prompt)

    if task.family == "freq_words_extraction":
        fwe_vocabulary_size(length)  # refuses a length too short for the vocabulary
        step = task.increment(length)
        size = budget // 6
        while tokens(size) < budget:
            size += step
        size -= step
        if size < 1:
            _too_short(task_name, length, model, tokens(1))
        return size
    smallest = task.smallest_size()
    if task.family == "common_words_extraction":
        estimate = int(length // (tokens(CWE_ESTIMATE_WORDS) / CWE_ESTIMATE_WORDS)) * 2
        size = largest_fitting_between(lambda n: tokens(n) <= budget, smallest, min(max(estimate, 2 * smallest), cwe_capacity()))
    else:
        size = largest_fitting(lambda n: tokens(n) <= budget, smallest)
    if size is None:
        _too_short(task_name, length, model, tokens(smallest))
    return size


def _too_short(task_name: str, length: int, model: str, prompt_tokens: int) -> None:
    """Refuse a length below the task's smallest sample, saying by how many tokens."""
    generate = TASKS[task_name].tokens_to_generate
    need = prompt_tokens + generate
    raise FieldError("lengths", f"{length} is too short for {task_name} with {model}: its smallest prompt has {prompt_tokens} tokens and "
                                f"{generate} are generated, {need} in all, {need - length} more than {length}")


def render_sample(spec: SampleSpec, seed: int, essay: str, size: int) -> Rendered:
    """Sample `spec.index` of (task, length) with `size` haystack units: what a record's task,
    length, sample and haystack rebuild (with the run's seed, essay and, for vt, the example)."""
    task = TASKS[spec.task]
    return task.render(sample_rng(seed, spec.task, spec.length, spec.index), size, setting_for(task, spec.length, seed, essay, spec.example))


def shared_prefix_order(jobs: list[tuple[int, SampleSpec]], seed: int, essay: str) -> list[tuple[int, SampleSpec]]:
    """`jobs` with the samples of each (task, length) whose haystack is shared (noise lines, the
    essay) in the order of their prompts' text, the groups in place: neighbours in sorted order
    share the longest prefixes (sorting maximises the summed common prefix of neighbours), which
    the llama.cpp backend decodes once (backends/llamacpp_prefix.py). Other tasks' haystacks are
    drawn per sample and keep their order."""
    out: list[tuple[int, SampleSpec]] = []
    for _, group in groupby(jobs, key=lambda job: (job[1].task, job[1].length)):
        group_jobs = list(group)
        if TASKS[group_jobs[0][1].task].args.get("type_haystack") in ("noise", "essay"):
            group_jobs.sort(key=lambda job: render_sample(job[1], seed, essay, job[1].size).prompt)
        out += group_jobs
    return out


def build_sample(spec: SampleSpec, seed: int, essay: str, count: CountTokens) -> tuple[Rendered, int]:
    """The sample and the haystack size it got: RULER's per-sample loop, shrinking by the task's
    step while the prompt and the tokens to generate exceed the length."""
    task = TASKS[spec.task]
    step = task.increment(spec.length)
    size = spec.size
    while True:
        rendered = render_sample(spec, seed, essay, size)
        need = count(rendered.prompt) + task.tokens_to_generate
        if need <= spec.length:
            return rendered, size
        if size <= task.smallest_size():
            raise UserError(f"{spec.task} sample {spec.index} does not fit in {spec.length} tokens: at its smallest it needs {need}, {need - spec.length} more")
        size = max(task.smallest_size(), size - step)
