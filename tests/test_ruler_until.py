"""`ruler --until`: the Bonferroni-over-rounds stopping rule keeps its coverage (simulated), its
options are checked before any model loads, and a resumed run equals an uninterrupted one."""

from __future__ import annotations

import dataclasses
import json
import math
import shutil

import numpy as np
import pytest

pytest.importorskip("ppi_py")

from ctxeval import api  # noqa: E402
from ctxeval.data.texts import demo_text_path  # noqa: E402
from ctxeval.ruler.generation import Generation  # noqa: E402
from ctxeval.ruler.run import RulerConfig  # noqa: E402
from ctxeval.ruler.until import Until, parse_until  # noqa: E402
from ctxeval.stats.ppi import stratified_ppi  # noqa: E402
from tests.conftest import run_cli  # noqa: E402


def _population_mean() -> float:
    from scipy import integrate, stats

    def expected(x: float) -> float:
        return stats.norm.pdf(x) * (1.0 if x > 1.0 else 1 / (1 + math.exp(-2 * x)))

    return integrate.quad(expected, -10, 1.0)[0] + integrate.quad(expected, 1.0, 10)[0]


def _stops(rng: np.random.Generator, until: Until, share: float, target: float) -> tuple[float, float]:
    """One sequential run: rounds of samples, stopping once the half-width (shares) reaches the
    target or the budget is spent; the interval it stops on, at `until`'s per-look confidence."""
    x = np.empty(0)
    for _ in range(until.rounds):
        x = np.concatenate([x, rng.normal(size=until.round_size)])
        n = len(x)
        rng_labels = np.random.default_rng(rng.integers(1 << 32))
        settled = x > 1.0
        p = 1 / (1 + np.exp(-2 * x))
        y = np.where(settled, 1.0, (rng_labels.random(n) < p).astype(float))
        generated = ~settled & (rng_labels.random(n) < share)
        prediction = np.clip(p + rng_labels.normal(0, 0.15, n), 0, 1)
        cell = stratified_ppi(np.where(settled | generated, y, np.nan), prediction, settled, generated, until.confidence)
        if not math.isnan(cell.low) and cell.half_width <= target:
            break
    return cell.low, cell.high



def _settling_model(tmp_path, monkeypatch) -> str:
    """A tiny random-weight hf Llama whose likelihood pass settles every other prompt (fewer
    generations, labels that vary), as its model string."""
    from ctxeval.backends.hf import HFScorer
    from tests.hf_tiny import tiny_llama_dir

    stepwise = HFScorer.score_stepwise

    def settling(self, prompt_ids, continuation_ids, *args, **kwargs):
        scores = stepwise(self, prompt_ids, continuation_ids, *args, **kwargs)
        return dataclasses.replace(scores, greedy_id=np.asarray(continuation_ids, np.int32)) if len(prompt_ids) % 2 == 0 else scores

    monkeypatch.setattr(HFScorer, "score_stepwise", settling)
    return f"hf:{tiny_llama_dir(tmp_path / 'llama', demo_text_path().read_text()[:20000], vocab_size=512)}"

def test_the_stopping_rule_keeps_its_coverage_in_simulation():
    """400 runs of rounds of 40 samples up to 160, share 0.5, stopping at a half-width of 0.11
    (most runs stop early, on the looks that happen to be narrow): the interval they stop on
    covers the population mean in at least 94 % with Bonferroni over the 4 looks."""
    truth = _population_mean()
    until = Until(11.0, None, 160, 40)
    assert until.rounds == 4 and until.confidence == pytest.approx(0.9875)
    rng = np.random.default_rng(11)
    intervals = [_stops(rng, until, 0.5, 0.11) for _ in range(400)]
    shown = [(lo, hi) for lo, hi in intervals if not math.isnan(lo)]
    coverage = np.mean([lo <= truth <= hi for lo, hi in shown])
    assert len(shown) >= 390 and coverage >= 0.94


def test_until_values_and_bad_combinations_are_refused_in_one_line(tmp_path):
    assert parse_until("verdict", 5.0) == (None, 5.0) and parse_until("verdict:2.5", 5.0) == (None, 2.5) and parse_until("4", 5.0) == (4.0, None)
    for bad in ("0", "-1", "verdict:0", "soon"):
        with pytest.raises(ValueError):
            parse_until(bad, 5.0)
    cases = [(["--until", "soon", "--max-samples", "50", "--generate-share", "0.3"], "--until must be a positive number of points"),
             (["--until", "5", "--generate-share", "0.3"], "--max-samples is missing: --until and --max-samples go together"),
             (["--until", "verdict", "--generate-share", "1", "--tasks", "niah_single_1", "--lengths", "512"], "--max-samples is missing"),
             (["--max-samples", "50", "--generate-share", "0.3"], "--until is missing"),
             (["--until", "5", "--max-samples", "50"], "--until needs --generate-share"),
             (["--until", "5", "--max-samples", "10", "--samples", "20", "--generate-share", "0.3"], "--max-samples must be at least --samples (20)"),
             (["--until", "verdict", "--max-samples", "50", "--generate-share", "0.3"], "give at least two"),
             (["--until", "5", "--max-samples", "40", "--samples", "10", "--generate-share", "0.2"],
              "--max-samples at --generate-share 0.2 draws about 8 generations per task and length, fewer than the 10 an interval needs"),
             (["--until", "5", "--max-samples", "40", "--samples", "10", "--generate-share", "0.2"], "give at least 50 samples or a larger share")]
    for args, message in cases:
        proc = run_cli("ruler", *args, "--out", str(tmp_path / "out"))
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and message in proc.stderr, proc.stderr


def test_a_resumed_until_run_equals_an_uninterrupted_one(tmp_path, monkeypatch):
    """Two rounds of 10 samples (a 1-point target no round reaches); the second run loses its
    second round and its merged files, and resumes to the same records and scores."""
    pytest.importorskip("transformers")
    model = _settling_model(tmp_path, monkeypatch)
    settings = dict(tasks=("niah_single_1",), lengths=(512,), samples=10, models=(model,), generate_share=0.5, until="1", max_samples=20)
    whole = api.ruler(**settings, out=tmp_path / "whole")
    rounds = whole.manifest.plan["rounds"]
    assert [r["first_sample"] for r in rounds] == [0, 10] and all(r["closed"] == [] for r in rounds)
    assert sorted(whole.samples["sample"]) == list(range(20)) and whole.manifest.config["until"]["confidence"] == pytest.approx(0.975)
    assert "Sampled until a half-width of 1 points" in whole.markdown and "budget spent, not answered: niah_single_1 at 512" in whole.markdown

    api.ruler(**settings, out=tmp_path / "resumed")
    shutil.rmtree(tmp_path / "resumed" / "round-2")
    for path in (tmp_path / "resumed").iterdir():
        if path.is_file():
            path.unlink()
    resumed = api.ruler(**settings, out=tmp_path / "resumed")
    assert whole.samples.equals(resumed.samples)
    for column in ("score", "score.low", "score.high", "exact", "generated", "predicted"):
        assert whole.ppi[column].tolist() == pytest.approx(resumed.ppi[column].tolist(), nan_ok=True), column
    assert [r["closed"] for r in whole.manifest.plan["rounds"]] == [r["closed"] for r in resumed.manifest.plan["rounds"]]


def test_decided_and_futile_variants_leave_the_later_rounds_while_the_others_are_sampled(tmp_path):
    """`--until verdict` with four models on one (task, length), every sample generated, a budget
    of 40 in rounds of 10: a variant that always fails (−80 points) is decided at the first look
    and left out of the later rounds; one 10 points below the first model, which 40 samples
    cannot tell from it, is closed as futile once its conditional power falls below 10 %; one 35
    points below runs on with the first model until it is decided (hurts). The rounds say what
    each left out, decided and found futile."""
    import pandas as pd

    from ctxeval.ruler.ppi import GENERATED
    from ctxeval.ruler.until import run_until
    from ctxeval.render.ruler_ppi import rounds_markdown
    from ctxeval.results.manifest import Manifest

    success = {"full": 0.8, "noisy": 0.7, "weaker": 0.45, "broken": 0.0}
    configs = []

    def run_round(config: RulerConfig, out):
        configs.append(config)
        rows = []
        for model in config.models:
            if config.skip and (model, "vt", 1024) in config.skip:
                continue
            for k in range(config.first_sample, config.first_sample + config.samples):
                rng = np.random.default_rng([k, sum(map(ord, model))])
                y = float(rng.random() < success[model])
                rows.append({"model": model, "task": "vt", "length": 1024, "sample": k, "prompt_sha256": f"vt/{k}", "method": GENERATED,
                             "generation_score": y, "mean_logprob": -2.0 + y, "first_rank": 1 if y else 4, "likelihood_score": 0.0})
        return dataclasses.make_dataclass("Round", ["samples", "manifest"])(
            pd.DataFrame(rows), Manifest(command="ruler", run_id="round", config={}, models=[], status="complete", timing={"seconds_all_sessions": 1.0}))

    config = RulerConfig(("vt",), (1024,), 10, 42, tuple(success), "essay", generation=Generation("share", share=1.0))
    until = Until(None, 5.0, 40, 10)
    samples, _, rounds = run_until(config, until, tmp_path, run_round)
    assert [r["decided"] for r in rounds] == [[["broken", "vt", 1024]], [], [["weaker", "vt", 1024]]]
    assert [r["futile"] for r in rounds] == [[], [["noisy", "vt", 1024]], []]
    assert [c.skip for c in configs] == [None, (("broken", "vt", 1024),), (("broken", "vt", 1024), ("noisy", "vt", 1024))]
    assert samples.groupby("model")["sample"].count().to_dict() == {"full": 30, "noisy": 20, "weaker": 30, "broken": 10}
    assert [r["closed"] for r in rounds] == [[], [], [["vt", 1024]]]  # answered before the budget
    text = "\n".join(rounds_markdown(until.as_dict(), rounds))
    assert "- round 1: samples 0–9 of 1 cell(s); decided: broken on vt at 1024; answered: none" in text
    assert "- round 2: samples 10–19 of 1 cell(s) (left out, closed: broken on vt at 1024); the budget cannot decide: noisy on vt at 1024; answered: none" in text


def test_conditional_power_equals_a_simulation_of_the_remaining_samples():
    """The futility rule's chance of a verdict at the budget, against a Monte Carlo draw of the
    budget's estimate (today's samples fixed, the rest normal around today's estimate) and the
    interval narrowed at 1/√n: within the simulation's error at four points."""
    from scipy import stats

    from ctxeval.stats.sequential import conditional_power

    rng = np.random.default_rng(5)
    confidence, delta = 0.9875, 5.0
    z = stats.norm.ppf(1 - (1 - confidence) / 2)
    for estimate, half_width, n, budget in [(-20.0, 60.0, 10, 40), (-1.0, 20.0, 20, 40), (-8.0, 12.0, 30, 120), (2.0, 6.0, 10, 20)]:
        sd = half_width / z * math.sqrt(n)  # one sample's sd
        rest = rng.normal(estimate, sd / math.sqrt(budget - n), 200_000)  # the mean of the samples to come
        final = (n * estimate + (budget - n) * rest) / budget
        h = z * sd / math.sqrt(budget)
        simulated = np.mean((np.abs(final) > h) | (np.abs(final) <= delta - h))
        assert conditional_power(estimate, half_width, n, budget, delta, confidence) == pytest.approx(simulated, abs=0.005)


def test_a_round_whose_variant_left_one_task_out_has_paired_rows_for_the_others_only():
    """A round of `--until verdict` after a variant was closed on one task: the variant has no
    samples there. Its paired table gives the task it ran, no row for the one it left out and no
    mean over tasks (which would average a subset)."""
    import pandas as pd

    from ctxeval.ruler.paired import paired_table
    from ctxeval.results.ruler import MEAN_TASK

    rows = []
    for model, tasks in (("full", ("vt", "niah_single_1")), ("pressed", ("niah_single_1",))):
        for task in tasks:
            for k in range(12):
                y = float(k % 3 > 0) if model == "full" else float(k % 2)
                rows.append({"model": model, "task": task, "length": 1024, "sample": k, "prompt_sha256": f"{task}/{k}",
                             "generation_score": y, "mean_logprob": -1.0 + y})
    table = paired_table(pd.DataFrame(rows), "generation_score")
    assert table[["model", "task"]].values.tolist() == [["pressed", "niah_single_1"]]
    assert MEAN_TASK not in set(table["task"]) and bool(table["paired"].iloc[0]) and int(table["n"].iloc[0]) == 12


def _capital_loop(x: np.ndarray, m: float, confidence: float, horizon: int, truncation: float) -> list[float]:
    """The hedged capital K_t(m) of Waudby-Smith and Ramdas (2024) written out sample by sample
    (their eq. 26–27 and Theorem 3, PrPl bets tuned for `horizon`): the independent computation
    the grid of stats.confseq is checked against."""
    plus = minus = 1.0
    total, squares, out = 0.0, 0.0, []
    mean, var = 0.5, 0.25
    for t, value in enumerate(x, start=1):
        bet = math.sqrt(2 * math.log(2 / (1 - confidence)) / (var * horizon))
        plus *= 1 + min(bet, truncation / m) * (value - m)
        minus *= 1 - min(bet, truncation / (1 - m)) * (value - m)
        out.append(max(0.5 * plus, 0.5 * minus))
        total += value
        mean = (0.5 + total) / (t + 1)
        squares += (value - mean) ** 2
        var = (0.25 + squares) / (t + 1)
    return out


def test_the_betting_sequence_equals_its_capital_process_written_out():
    """Every grid point the sequence keeps after t values is one whose capital stayed below 1/α
    at every look up to t, and every one it drops crossed it, by the loop above (bounded values
    in [0, 1] and paired differences in [−1, 1], rescaled as the module does)."""
    from ctxeval.stats.confseq import GRID, TRUNCATION, betting_bounds

    rng = np.random.default_rng(3)
    for low, high, x in [(0.0, 1.0, (rng.random(30) < 0.7).astype(float)), (-1.0, 1.0, rng.choice([-1.0, 0.0, 1.0], 40, p=[0.5, 0.4, 0.1])),
                         (0.0, 1.0, rng.beta(0.5, 0.5, 25))]:
        lows, highs = betting_bounds(x, 0.95, low, high, horizon=len(x))
        unit = (x - low) / (high - low)
        for t in (1, 5, len(x) // 2, len(x)):
            for m in np.linspace(0, 1, GRID)[1:-1:37]:
                crossed = max(_capital_loop(unit[:t], m, 0.95, len(x), TRUNCATION)) >= 20
                value = low + (high - low) * m
                step = (high - low) / (GRID - 1)
                if not crossed:
                    assert lows[t - 1] <= value <= highs[t - 1], (t, m)
                elif lows[t - 1] + step < value < highs[t - 1] - step:  # inside the hull: a dropped point between kept ones
                    raise AssertionError((t, m, lows[t - 1], highs[t - 1]))


def test_the_betting_sequence_covers_at_every_look_on_the_hardest_populations():
    """400 sequences of 40 values each from scores near 0, ½ and 1 (cells) and paired
    differences near −1, 0 and of the largest spread: the mean lies inside the interval at
    every one of the 40 looks at once (time-uniform coverage, what a rule that may stop at any
    look needs) in at least 0.93 of them (the nominal 0.95 less the simulation's error)."""
    from ctxeval.stats.confseq import betting_bounds

    rng = np.random.default_rng(17)
    populations = [((0.0, 1.0), [0.0, 1.0], [0.98, 0.02]), ((0.0, 1.0), [0.0, 1.0], [0.5, 0.5]), ((0.0, 1.0), [0.0, 1.0], [0.02, 0.98]),
                   ((-1.0, 1.0), [-1.0, 0.0, 1.0], [0.97, 0.03, 0.0]), ((-1.0, 1.0), [-1.0, 0.0, 1.0], [0.02, 0.96, 0.02]),
                   ((-1.0, 1.0), [-1.0, 0.0, 1.0], [0.45, 0.1, 0.45])]
    for (low, high), values, p in populations:
        truth = float(np.dot(values, p))
        covered = []
        for _ in range(400):
            x = rng.choice(values, 40, p=p)
            lows, highs = betting_bounds(x, 0.95, low, high, horizon=40)
            covered.append(bool(np.all((lows <= truth + 1e-12) & (truth - 1e-12 <= highs))))
        assert np.mean(covered) >= 0.93, (values, p, np.mean(covered))


def test_until_at_share_one_reads_a_confidence_sequence_and_below_it_rounds():
    from ctxeval.ruler.until import ROUNDS, SEQUENCE

    sequence = Until.of("verdict", 40, 2, 5.0, Generation("share", share=1.0), 2)
    rounds = Until.of("verdict", 40, 10, 5.0, Generation("share", share=0.5), 2)
    assert sequence.looks == SEQUENCE and sequence.confidence == 0.95 and sequence.rounds == 20
    assert rounds.looks == ROUNDS and rounds.confidence == pytest.approx(0.9875)
    old = {"until": {"half_width": None, "delta": 5.0, "max_samples": 40, "round_size": 10}}  # a manifest from before the sequence
    assert Until.from_config(old).looks == ROUNDS
    assert Until.from_config({"until": sequence.as_dict()}) == sequence


def test_a_share_one_run_stops_each_variant_at_the_batch_that_decides_it(tmp_path):
    """`--until verdict` at share 1 in batches of 2 up to 40, two tasks: a variant that fails
    every sample is decided (hurts) at the first batch whose 97.5 % sequence (bets tuned for 10
    samples, a quarter of the budget) lies below 0 (8 losses), on each task, and leaves the later
    batches; a variant equal to the first
    model, which 40 samples cannot put within δ = 5, closes as futile at the first look from a
    quarter of the budget; the first model runs while a variant of its cell is open. The tables
    are the sequences' own: each difference's bounds equal betting_bounds on its pairs in sample
    order, the mean over tasks averages each task's at 1 − 0.05 / 2; the rounds carry the
    compute against the fixed-n run."""
    import pandas as pd

    from ctxeval.ruler.ppi import GENERATED
    from ctxeval.ruler.until import run_until, sequence_tables
    from ctxeval.render.ruler_ppi import rounds_markdown
    from ctxeval.results.manifest import Manifest
    from ctxeval.results.ruler import MEAN_TASK
    from ctxeval.stats.confseq import betting_bounds

    success = {"full": 1.0, "same": 1.0, "broken": 0.0}
    tasks = ("vt", "niah_single_1")

    def run_round(config: RulerConfig, out):
        rows = []
        for task, length in config.cells or [(t, 1024) for t in tasks]:
            for model in config.models:
                if config.skip and (model, task, length) in config.skip:
                    continue
                for k in range(config.first_sample, config.first_sample + config.samples):
                    y = success[model]
                    rows.append({"model": model, "task": task, "length": length, "sample": k, "prompt_sha256": f"{task}/{k}", "method": GENERATED,
                                 "generation_score": y, "mean_logprob": -2.0 + y, "first_rank": 1, "likelihood_score": 0.0, "prompt_tokens": 1000,
                                 "generated_tokens": 4 if model == "broken" else 6})
        return dataclasses.make_dataclass("Round", ["samples", "manifest"])(
            pd.DataFrame(rows), Manifest(command="ruler", run_id="round", config={}, models=[], status="complete", timing={"seconds_all_sessions": 1.0}))

    config = RulerConfig(tasks, (1024,), 2, 42, tuple(success), "essay", generation=Generation("share", share=1.0))
    until = Until.of("verdict", 40, 2, 5.0, config.generation, 3)
    announced: list[str] = []
    samples, _, rounds = run_until(config, until, tmp_path, run_round, announced.append)
    assert announced[0] == "--until: round 1 of at most 20, samples 0–1 of at most 40; 2 of 2 task and length cell(s) open"
    assert announced[4] == "--until: round 5 of at most 20, samples 8–9 of at most 40; 2 of 2 task and length cell(s) open, 2 variant(s) there closed"
    assert len(announced) == len(rounds)
    counts = samples.groupby(["model", "task"])["sample"].count().to_dict()
    assert until.early_confidence == 0.975 and until.horizon == 10
    assert next(t for t in range(2, 41, 2) if betting_bounds(-np.ones(t), 0.975, -1.0, 1.0, horizon=10)[1][-1] < 0) == 8
    assert counts == {("broken", "vt"): 8, ("broken", "niah_single_1"): 8, ("same", "vt"): 10, ("same", "niah_single_1"): 10,
                      ("full", "vt"): 10, ("full", "niah_single_1"): 10}
    assert rounds[3]["decided"] == [["broken", "vt", 1024], ["broken", "niah_single_1", 1024]]
    assert rounds[4]["futile"] == [["same", "vt", 1024], ["same", "niah_single_1", 1024]] and len(rounds) == 5
    scores, differences = sequence_tables(samples, until)
    broken = differences[(differences["model"] == "broken") & (differences["task"] == "vt")].iloc[0]
    lows, highs = betting_bounds(-np.ones(8), 0.975, -1.0, 1.0, horizon=10)
    assert (broken["diff.low"], broken["diff.high"], broken["diff.outcome"]) == (pytest.approx(100 * lows[-1]), pytest.approx(100 * highs[-1]), "hurts")
    assert broken["diff.confidence"] == 0.975 and broken["diff.delta"] == 5.0
    mean = differences[(differences["model"] == "broken") & (differences["task"] == MEAN_TASK)].iloc[0]
    joint_lows, _ = betting_bounds(-np.ones(8), 1 - 0.05 / 2, -1.0, 1.0, horizon=10)
    assert mean["diff.low"] == pytest.approx(100 * joint_lows[-1]) and mean["samples"] == 8
    assert rounds[-1]["compute"] == {"passes": 56, "generations": 56, "prompt_tokens": 56_000, "generated_tokens": 16 * 4 + 40 * 6,
                                     "fixed_passes": 240, "fixed_generations": 240.0, "fixed_prompt_tokens": 240_000, "fixed_generated_tokens": 80 * 4 + 160 * 6}
    text = "\n".join(rounds_markdown(until.as_dict(), rounds))
    assert "in batches of 2; each look before the budget reads a 97.5% betting confidence sequence" in text
    # the tables state the level each row holds at: the early looks' 97.5 % sequence, the mean over two tasks' at 1 − 0.05 / 2
    from ctxeval.render.ruler_ppi import ppi_markdown
    tables = "\n".join(ppi_markdown(scores, differences, 5.0, until.as_dict()))
    sequence = "betting confidence sequence (Waudby-Smith & Ramdas 2024)"
    assert f"intervals: 97.5 % {sequence}; 95 % {sequence}" in tables
    assert "- round 4: samples 6–7 of 2 cell(s); decided: broken on vt at 1024, broken on niah_single_1 at 1024; answered: none" in text
    assert "56 likelihood passes against 240 (56,000 prompt tokens against about 240,000), 0.23x; 56 generations against about 240" in text
    assert "304 generated tokens against about 1,280 (at each cell's mean per generation), 0.24x." in text


def test_a_resumed_share_one_run_equals_an_uninterrupted_one(tmp_path, monkeypatch):
    """At --generate-share 1 the looks read the confidence sequence: two batches of 5 samples (a
    1-point target no batch reaches); the second run loses its second batch and its merged
    files, and resumes to the same records, sequence bounds and batches."""
    pytest.importorskip("transformers")
    model = _settling_model(tmp_path, monkeypatch)
    settings = dict(tasks=("niah_single_1",), lengths=(512,), samples=5, models=(model,), generate_share=1.0, until="1", max_samples=10)
    whole = api.ruler(**settings, out=tmp_path / "whole")
    assert whole.manifest.config["until"]["looks"] == "sequence" and whole.manifest.config["until"]["confidence"] == 0.95
    assert [r["first_sample"] for r in whole.manifest.plan["rounds"]] == [0, 5] and "betting confidence sequence" in whole.markdown
    api.ruler(**settings, out=tmp_path / "resumed")
    shutil.rmtree(tmp_path / "resumed" / "round-2")
    for path in (tmp_path / "resumed").iterdir():
        if path.is_file():
            path.unlink()
    resumed = api.ruler(**settings, out=tmp_path / "resumed")
    assert whole.samples.equals(resumed.samples)
    for column in ("score", "score.low", "score.high", "generated"):
        assert whole.ppi[column].tolist() == pytest.approx(resumed.ppi[column].tolist(), nan_ok=True), column
    assert whole.manifest.plan["rounds"] == resumed.manifest.plan["rounds"] or \
        [{k: v for k, v in r.items() if k != "seconds"} for r in whole.manifest.plan["rounds"]] == \
        [{k: v for k, v in r.items() if k != "seconds"} for r in resumed.manifest.plan["rounds"]]


def test_the_look_at_the_budget_reads_full_generations_intervals():
    """At share 1 a variant that reaches the budget ends with full generation's verdict on the
    same samples: at the budget the difference is Tango's 95 % interval exactly as the paired
    table gives it (per task and pooled over tasks), a score is the pseudo-label t interval of
    the cell table; one sample short of it, both still read the 97.5 % sequence."""
    import pandas as pd

    from ctxeval.ruler.paired import PairedSettings, paired_table
    from ctxeval.ruler.ppi import GENERATED
    from ctxeval.ruler.until import sequence_tables
    from ctxeval.results.ruler import MEAN_TASK
    from ctxeval.stats.confseq import betting_bounds
    from ctxeval.stats.pseudo_labels import pseudo_label_interval

    rng = np.random.default_rng(7)
    rows = []
    for task in ("vt", "niah_single_1"):
        ref = (rng.random(20) < 0.8).astype(float)
        scores = {"full": ref, "press": np.where(rng.random(20) < 0.3, 0.0, ref)}
        for model, y in scores.items():
            rows += [{"model": model, "task": task, "length": 1024, "sample": k, "prompt_sha256": f"{task}/{k}", "method": GENERATED,
                      "generation_score": y[k], "mean_logprob": -1.0, "first_rank": 1, "likelihood_score": 0.0} for k in range(20)]
    samples = pd.DataFrame(rows)
    until = Until.of("verdict", 20, 2, 5.0, Generation("share", share=1.0), 2)
    scores, differences = sequence_tables(samples, until)
    paired = paired_table(samples, "generation_score", PairedSettings(score_delta=5.0)).set_index("task")
    for _, r in differences.iterrows():
        assert (r["diff.low"], r["diff.high"], r["diff.outcome"], r["diff.confidence"]) == (
            pytest.approx(paired.loc[r["task"], "score_diff.low"]), pytest.approx(paired.loc[r["task"], "score_diff.high"]),
            paired.loc[r["task"], "score_diff.outcome"], paired.loc[r["task"], "score_diff.confidence"]), r["task"]
    cell = scores[(scores["model"] == "press") & (scores["task"] == "vt")].iloc[0]
    expected = pseudo_label_interval(samples.query("model == 'press' and task == 'vt'")["generation_score"].to_numpy(float)).scaled(100)
    assert (cell["score.low"], cell["score.high"]) == (pytest.approx(expected.low), pytest.approx(expected.high))
    short = samples[samples["sample"] < 19]
    scores, differences = sequence_tables(short, until)
    vt = differences[differences["task"] == "vt"].iloc[0]
    d = (short.query("model == 'press' and task == 'vt'")["generation_score"].to_numpy() - short.query("model == 'full' and task == 'vt'")["generation_score"].to_numpy())
    lows, highs = betting_bounds(d, 0.975, -1.0, 1.0, horizon=5)
    assert (vt["diff.low"], vt["diff.high"], vt["diff.confidence"]) == (pytest.approx(100 * lows[-1]), pytest.approx(100 * highs[-1]), 0.975)
    assert MEAN_TASK in set(differences["task"])


def test_an_until_runs_merged_result_reads_the_runs_delta_replicates_and_seed(tmp_path, monkeypatch):
    """`--until verdict --delta 20` (two models at share 1, two batches of 5): the merged result's
    paired settings and verdicts are the run's (δ = 20 points, its --delta-logp, replicates and
    seed), as every round's are, not the defaults."""
    pytest.importorskip("transformers")
    model = _settling_model(tmp_path, monkeypatch)
    result = api.ruler(tasks=("niah_single_1",), lengths=(512,), samples=5, models=(model, f"{model}?prefix_reuse=0"), generate_share=1.0,
                       until="verdict", max_samples=10, delta=20.0, delta_logp=0.3, replicates=150, seed=7, out=tmp_path / "run")
    asked = {"score_delta": 20.0, "logp_delta": 0.3, "replicates": 150, "seed": 7}
    assert {k: result.paired_settings[k] for k in asked} == asked and result.manifest.config["until"]["delta"] == 20.0
    assert "δ = 20 points" in result.markdown and "δ = 5 points" not in result.markdown
    stored = json.loads((tmp_path / "run" / "results.json").read_text())
    assert {k: stored["paired_settings"][k] for k in asked} == asked


def test_a_variant_stops_only_on_a_verdict_the_budget_would_reach_too():
    """`is_final`: within δ is final; hurts is final only where the interval lies wholly beyond
    δ − h, h the budget's half-width (at share 1 z·se narrowed to the budget, in rounds the look's
    own half-width narrowed); at h ≥ δ excluding 0 is; at the budget every verdict is."""
    from ctxeval.ruler.until import ROUNDS, SEQUENCE, budget_half_width, is_final

    until = Until(None, 5.0, 500, 2, SEQUENCE)
    z = 1.959963984540054
    assert budget_half_width(-12.0, -3.0, 3.0, 100, until) == pytest.approx(z * 3.0 * math.sqrt(100 / 500))  # 2.63: the line at 2.37
    assert is_final("within δ", -4.9, -0.1, 3.0, 100, until)
    assert is_final("hurts", -12.0, -3.0, 3.0, 100, until) and not is_final("hurts", -12.0, -1.0, 3.0, 100, until)
    assert is_final("gains", 3.0, 12.0, 3.0, 100, until) and not is_final("gains", 1.0, 12.0, 3.0, 100, until)
    assert is_final("hurts", -12.0, -1.0, 10.0, 100, until)  # h = 8.8 > δ: the budget can put nothing within δ
    assert is_final("hurts", -12.0, -1.0, 3.0, 500, until)  # the look at the budget
    assert not is_final("too few samples to tell", -12.0, 1.0, 3.0, 500, until)
    rounds = Until(None, 5.0, 40, 10, ROUNDS)
    assert budget_half_width(-12.0, -2.0, 99.0, 10, rounds) == pytest.approx(5.0 * math.sqrt(10 / 40))  # 2.5: the line at 2.5
    assert not is_final("hurts", -12.0, -2.0, 99.0, 10, rounds)  # reaches nearer 0 than 2.5
    assert is_final("hurts", -14.0, -3.0, 99.0, 10, rounds)  # h = 2.75: the line at 2.25
