"""ruler and agreement: does a cheap likelihood number track task accuracy across models?"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

from ctxeval.backends.openai_options import OpenAIOptions
from ctxeval.commands import common
from ctxeval.commands.base import Command
from ctxeval.commands.diff import QuietDisplay, quiet_progress
from ctxeval.data.texts import RULER_HAYSTACK_NAME, load_text
from ctxeval.options import argument, comma_list, comma_ints, fail, greater_than_zero, group, joined, option, positive
from ctxeval.pipeline.executors import ExecutorOptions
from ctxeval.results.manifest import Manifest
from ctxeval.ruler.paired import DEFAULT_LOGP_DELTA, PairedSettings
from ctxeval.ruler.report import RULER_THRESHOLD, ruler_result
from ctxeval.ruler.generation import Generation
from ctxeval.ruler.run import RulerConfig, RulerRun, run_ruler
from ctxeval.ruler.until import Until, UntilConfig, parse_until, run_until, write_merged
from ctxeval.pipeline.engine import save_result
from ctxeval.render.kinds import RENDERING
from ctxeval.ruler.tasks import TASKS
from ctxeval.agreement.analysis import correlations, measure_table
from ctxeval.agreement.measures import READS, hold_out, measures_of
from ctxeval.agreement.reliability import ruler_reliability, with_ceilings
from ctxeval.results.agreement import AgreementResult
from ctxeval.results.base import read_result
from ctxeval.render.ruler import first_lines
from ctxeval.results.ruler import RulerResult

RULER_LENGTHS = (1024, 2048, 4096)
RULER_SEED = 42  # RULER's --random_seed


def api_identity(models: tuple[str, ...], openai: OpenAIOptions) -> str | None:
    """The API options that decide an API model's samples (None when no model is an API's)."""
    return json.dumps(openai.identity(), sort_keys=True) if any(common.model_spec(m).backend.remote for m in models) else None


def _tasks(value: str) -> tuple[str, ...]:
    """--tasks: 'all' or comma-separated task names."""
    return tuple(TASKS) if value.strip() == "all" else comma_list("--tasks", str.strip, "task names")(value)


def _tasks_check(values: tuple[str, ...]) -> str | None:
    unknown = [t for t in values if t not in TASKS]
    if not values:
        return "must name at least one task"
    return f"unknown task {unknown[0]!r}; RULER's synthetic tasks here: {', '.join(TASKS)}" if unknown else None


def _until_check(value: str | None) -> str | None:
    if value is None:
        return None
    try:
        parse_until(value, 1.0)
    except ValueError:
        return "must be a positive number of points, 'verdict' or 'verdict:D' with D > 0"
    return None


@dataclass(frozen=True)
class RulerSpec(common.ModelRunOptions):
    """RULER's synthetic tasks (NVIDIA/RULER): needle in a haystack (single, multi-key, multi-value,
    multi-query; noise, essay and needle haystacks; words, numbers and UUIDs), variable tracking,
    common- and frequent-words extraction, sized in each model's own tokens. Each sample is scored by
    greedy generation with RULER's string_match_all, and by likelihood (the answer teacher-forced
    after the prompt: log-probability, exact ranks, whether greedy decoding would produce it).
    Score per task and length with intervals, the mean of the run's tasks (11 of RULER's 13 offered), and RULER's effective length.
    Variants that answer the first model's prompts (the same tokenizer: presses, KV types, context limits) get paired differences against
    it first: the score with Tango's interval, the answer log p with a paired BCa interval, each with its verdict."""

    tasks: tuple[str, ...] = option("--tasks", "Comma-separated RULER tasks, or all (the 11 synthetic ones; the QA tasks need SQuAD/HotpotQA and are not offered).",
                                    tuple(TASKS), cli_type=str, shown="all", to_value=_tasks, check=_tasks_check)
    lengths: tuple[int, ...] = option("--lengths", "Comma-separated lengths in the model's tokens: prompt plus the task's tokens to generate (RULER runs 4K to 128K).",
                                      RULER_LENGTHS, cli_type=str, shown=joined(RULER_LENGTHS), to_value=comma_ints("--lengths"), check=positive)
    samples: int = option("--samples", "Seeded samples per (task, length) (RULER uses 500).", 25, check=positive)
    models: tuple[str, ...] = common.models(truncates=True)
    essay: str = option("--essay", "Text whose words make the essay haystacks: 'gutenberg', two bundled public-domain books, no sentence repeated within 128K tokens; "
                                   "'demo', the Chesterton excerpt (repeats beyond about 17.5K tokens); or a UTF-8 file, repeated where a haystack needs more words. "
                                   "RULER uses Paul Graham's essays, not shipped.", RULER_HAYSTACK_NAME)
    chat_template: bool = option("--chat-template", "Give each model RULER's input inside its own chat template (the user's turn, then the answer prefix), "
                                                    "as RULER's published runs do; not with a KV press.", False)
    likelihood_only: bool = option("--likelihood-only", "Score each sample by likelihood alone (the answer's log-probability, ranks and greedy prefix, "
                                                        "the numbers a generating run also records) and generate nothing: cheaper, no generated score.", False)
    full_generation: bool = option("--full-generation", "Generate every answer to its task's limit, as RULER does; by default a generation stops once every "
                                                        "answer is in its text (more text cannot change RULER's score; an API model generates in full).", False)
    generate_share: float | None = option("--generate-share", "P: score every sample by likelihood, generate only a seeded share P of the samples the likelihood "
                                                              "pass does not settle (settled ones are exact at no cost), predict the rest from their likelihood "
                                                              "numbers, and report PPI++ scores and paired differences with 95 % intervals (needs ppi-python).", None,
                                          check=lambda v: None if v is None or 0 < v <= 1 else "must lie in (0, 1]")
    generate_count: int | None = option("--generate", "N (10 or more): as --generate-share, but generate a seeded N of each task and length's --samples "
                                                       "(those the likelihood pass does not settle among them): a fixed generation budget per cell.", None,
                                        check=lambda v: None if v is None else positive(v))
    until: str | None = option("--until", "With --generate-share and --max-samples: add --samples new samples per task and length in rounds until each is answered: "
                                          "a number (every model's interval at most that many points on each side), or 'verdict' / 'verdict:D' (every variant's "
                                          "paired difference against the first model is within D points, default --delta, or hurts or gains by more than the budget could put within D; a decided variant, "
                                          "or one the budget would decide with under 10 % chance, 5 % at --generate-share 1, leaves the later rounds). At --generate-share 1 every "
                                          "look before the budget reads a 97.5 % betting confidence sequence, valid at every look at once, so --samples is a "
                                          "batch (2 is enough), and the look at the budget full generation's 95 % interval, so a variant still open ends with "
                                          "the fixed-n run's verdict; below 1, each look is at 95 % Bonferroni-corrected over the rounds.", None, check=_until_check)
    until_simultaneous: bool = option("--until-simultaneous", "With --until: split the 5 % error over every variant, task and length the run "
                                                              "stops on (Bonferroni), so all its verdicts hold at 95 % at once; by default each holds at 95 % "
                                                              "on its own, as a fixed-n run's, and the output says so.", False)
    max_samples: int | None = option("--max-samples", "With --until: the most samples per task and length (the budget); times the share, at least 10 (an interval's generations).", None, check=lambda v: None if v is None else positive(v))
    threshold: float = option("--threshold", "Effective length: the longest length whose score, and every shorter one's, reaches this (RULER: 85.6, Llama-2-7B at 4K).",
                              RULER_THRESHOLD, check=lambda v: None if 0 <= v <= 100 else "must lie between 0 and 100")
    delta: float = common.score_delta()
    delta_logp: float = option("--delta-logp", "Verdict margin of a variant's paired difference of the answer log p (mean per answer token) against the first --model, in nats.",
                               DEFAULT_LOGP_DELTA, check=greater_than_zero)
    replicates: int = common.replicates()
    seed: int = common.seed("Seed of the samples (RULER's default 42) and of the paired bootstrap.", RULER_SEED)
    openai: OpenAIOptions = group(OpenAIOptions)
    executor: ExecutorOptions = common.executor()

    def check(self) -> None:
        problem = common.budget_covering(self.models, min(self.lengths))
        if problem:
            raise fail(RulerSpec, "lengths", problem)
        if self.full_generation and self.likelihood_only:
            raise fail(RulerSpec, "full_generation", "sets how far generations run; --likelihood-only generates none: choose one")
        if (self.until is None) != (self.max_samples is None):
            missing = "until" if self.until is None else "max_samples"
            raise fail(RulerSpec, missing, "is missing: --until and --max-samples go together (--until needs a budget, --max-samples a target)")
        self.until_target()

    def generation(self) -> Generation:
        """The generation mode the options ask for, checked (FieldError where they conflict)."""
        return Generation.of(self.likelihood_only, self.generate_share, self.generate_count, self.samples)

    def until_target(self) -> Until | None:
        """The `--until` target and budget, checked; None without --until."""
        generation = self.generation()
        if self.until is None or self.max_samples is None:
            return None
        return Until.of(self.until, self.max_samples, self.samples, self.delta, generation, len(set(self.models)),
                        len(self.tasks) * len(self.lengths), self.until_simultaneous)


def run_ruler_tasks(spec: RulerSpec) -> RulerResult:
    """Build each model's samples from its tokenizer, score them both ways, and report."""
    essay = load_text(spec.essay)
    config = RulerConfig(tuple(dict.fromkeys(spec.tasks)), tuple(sorted(set(spec.lengths))), spec.samples, spec.seed, tuple(dict.fromkeys(spec.models)), essay.sha256,
                         device=spec.device, dtype=spec.dtype, api=api_identity(spec.models, spec.openai), chat_template=spec.chat_template,
                         generation=spec.generation(), full_generation=spec.full_generation)

    paired = PairedSettings(spec.delta, spec.delta_logp, spec.replicates, spec.seed)  # every round's and the merged result's

    def finish(run_dir: Path, manifest: Manifest) -> RulerResult:
        return ruler_result(run_dir, manifest, spec.threshold, paired)

    models = common.model_specs(config.models)

    def run_round(round_config: RulerConfig, out: Path) -> RulerResult:
        task = RulerRun(round_config, models, essay.content, finish, spec.n_threads, spec.openai)
        return run_ruler(task, out, spec.progress, spec.executor, render=RENDERING)

    until = spec.until_target()
    if until is None:
        return run_round(config, common.out_dir(spec.out, "ruler", config))
    whole = UntilConfig(config, until)
    out = common.out_dir(spec.out, "ruler", whole)
    announce = (lambda line: print(line, file=sys.stderr, flush=True)) if spec.progress else None
    samples, last, rounds = run_until(config, until, out, run_round, announce)
    manifest = write_merged(out, samples, last, whole, rounds)
    return save_result(out, ruler_result(out, manifest, spec.threshold, paired), "ruler", RENDERING)


def _echo_ruler(result: RulerResult, spec: RulerSpec, display: QuietDisplay) -> str:
    files = result.paths()
    return display.echo(first_lines(result), f"results: {files['results']}, samples: {files['samples']}, plot: {files['plot']}")


@dataclass(frozen=True)
class AgreementSpec:
    """Which cheap number tracks task accuracy across models? From finished effective-length, diff,
    RULER and retrieval runs of several models or variants (matched by model name): the rank correlation
    across models between every cheap likelihood measure (L*, gain, key-token gain and L*, mean KL,
    RULER by likelihood) and every task measure (RULER score per length and its effective length,
    retrieval accuracy), Spearman and Kendall with bootstrap intervals over models, a scatter per pair,
    and each run's cost. A model's later RULER run with another seed gives its cheap measures
    "held out" (on samples its generated score did not see)."""

    runs: tuple[Path, ...] = argument("Finished run directories: effective-length, diff, ruler and retrieval runs.", cli_type=list[Path], to_value=tuple)
    out: Path = common.out("Directory for agreement.json/.md/.html and the scatter.", Path("runs/agreement-report"))
    replicates: int = common.replicates()
    seed: int = common.seed()


def run_agreement(spec: AgreementSpec) -> AgreementResult:
    """Read every run's measures, correlate each cheap measure with each task measure, write the report."""
    measures, seeds, reliability = [], {}, {}
    for path in spec.runs:
        result = read_result(path, reader="agreement", kinds=READS)
        measures += measures_of(result, str(path))
        if isinstance(result, RulerResult):
            reliability[str(path)] = ruler_reliability(result)
            if "seed" in result.manifest.config:
                seeds[str(path)] = int(result.manifest.config["seed"])
    table = measure_table(hold_out(measures, seeds))
    pairs = with_ceilings(correlations(table, spec.replicates, spec.seed), table, reliability)
    return AgreementResult(Path(spec.out), [str(p) for p in spec.runs], table, pairs, spec.replicates, spec.seed)


def _echo_agreement(result: AgreementResult, spec: AgreementSpec, display: None) -> str:
    files = result.paths()
    return f"{result.markdown}\nreport: {files['report']}, {files['json']}, {files['html']}, scatter: {files['scatter']}"


COMMANDS = (
    Command("ruler", RulerSpec, run_ruler_tasks, _echo_ruler, QuietDisplay, quiet_progress),
    Command("agreement", AgreementSpec, run_agreement, _echo_agreement, inputs=("runs",), posthoc=lambda spec: (spec.out, spec.runs)),
)
