"""Prediction-powered RULER scores: ppi_py's interval against its closed form, the strata's
variance against a hand computation and a coverage simulation, cross-fitting that never sees a
label it corrects, the estimator pipeline on constructed records, and a --generate-share run
whose settled samples cost no generation."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

pytest.importorskip("ppi_py")

from ctxeval import api  # noqa: E402
from ctxeval.data.texts import demo_text_path  # noqa: E402
from ctxeval.ruler.ppi import GENERATED, PREDICTED, SETTLED, drawn, drawn_of_count, fold_of, ppi_tables  # noqa: E402
from ctxeval.ruler.samples import sample_rng  # noqa: E402
from ctxeval.results.base import read_result  # noqa: E402
from ctxeval.stats.crossfit import cross_fit, fit_predict  # noqa: E402
from ctxeval.stats.ppi import stratified_ppi, unsettled_mean  # noqa: E402
from ctxeval.stats.pseudo_labels import pseudo_label_interval  # noqa: E402
from tests.conftest import run_cli  # noqa: E402

Z = stats.norm.ppf(0.975)


def _closed_form(y: np.ndarray, f: np.ndarray, f_unlabelled: np.ndarray) -> tuple[float, float]:
    """PPI++ for a mean by hand: lambda = cov(Y, f) / ((1 + n/N) var(f over all)), clipped to
    [0, 1]; theta = lambda mean(f_unl) + mean(Y - lambda f); se^2 = lambda^2 var(f_unl)/N + var(Y - lambda f)/n."""
    n, big_n = len(y), len(f_unlabelled)
    cov = ((y - y.mean()) * (f - f.mean())).sum() / n
    lam = min(1.0, max(0.0, cov / ((1 + n / big_n) * np.var(np.concatenate([f, f_unlabelled]), ddof=1))))
    theta = lam * f_unlabelled.mean() + (y - lam * f).mean()
    se = math.sqrt(lam**2 * np.var(f_unlabelled) / big_n + np.var(y - lam * f) / n)
    return theta, se


def _augmented(y: np.ndarray, f: np.ndarray, f_unlabelled: np.ndarray, count: int = 2, ends: tuple[float, float] = (0.0, 1.0)) -> tuple[np.ndarray, np.ndarray]:
    """The labelled samples with `count` pseudo-labels at each end, predicted at the mean of all predictions."""
    centre = np.concatenate([f, f_unlabelled]).mean()
    return np.concatenate([y, np.full(count, ends[0]), np.full(count, ends[1])]), np.concatenate([f, np.full(2 * count, centre)])


def test_ppi_pythons_interval_equals_its_closed_form_on_a_hand_made_case():
    from ppi_py import ppi_mean_ci

    y = np.array([1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 0.0, 1.0, 1.0])
    f = np.array([0.9, 0.2, 0.7, 0.6, 0.4, 0.8, 0.75, 0.35, 0.55, 0.1, 0.95, 0.5])
    f_unlabelled = np.array([0.1, 0.95, 0.3, 0.85, 0.5, 0.6, 0.2, 0.75])
    theta, se = _closed_form(y, f, f_unlabelled)
    low, high = ppi_mean_ci(y, f, f_unlabelled, alpha=0.05)
    assert (float(low[0]), float(high[0])) == pytest.approx((theta - Z * se, theta + Z * se), abs=1e-12)
    estimate, standard_error = unsettled_mean(y, f, f_unlabelled)
    assert estimate == pytest.approx(theta, abs=1e-12) and standard_error == pytest.approx(se, abs=1e-12)
    # no exact stratum: the cell's estimate is the unsettled one; its interval is PPI++ on the labels with two
    # pseudo-labels at 0 and two at 1 (predicted at the mean prediction), Bessel-corrected, Student's t (11 df)
    cell = stratified_ppi(np.concatenate([y, np.full(8, np.nan)]), np.concatenate([f, f_unlabelled]), np.zeros(20, bool), np.arange(20) < 12)
    centre, se_aug = _closed_form(*_augmented(y, f, f_unlabelled), f_unlabelled)
    half = stats.t.ppf(0.975, 11) * se_aug * math.sqrt(16 / 15)
    assert (cell.estimate, cell.low, cell.high) == pytest.approx((theta, centre - half, centre + half), abs=1e-12)
    assert (cell.exact, cell.generated, cell.predicted, cell.df) == (0, 12, 8, 11)


def test_the_strata_combine_by_the_law_of_total_variance():
    y_exact = np.array([1.0, 1.0, 0.5])
    y = np.array([1.0, 0.0, 0.0, 1.0])
    f = np.array([0.8, 0.3, 0.1, 0.6])
    f_unlabelled = np.array([0.2, 0.9, 0.4])
    theta, _ = _closed_form(y, f, f_unlabelled)
    _, se = _closed_form(*_augmented(y, f, f_unlabelled), f_unlabelled)  # the interval's: 2 pseudo-labels at each end
    n, w_e, w_u = 10, 0.3, 0.7
    want = w_e * y_exact.mean() + w_u * theta
    want_se = math.sqrt(w_e**2 * np.var(y_exact, ddof=1) / 3 + w_u**2 * se**2 * 8 / 7 + w_e * w_u * (y_exact.mean() - theta) ** 2 / n)
    cell = stratified_ppi(np.concatenate([y_exact, y, np.full(3, np.nan)]), np.concatenate([np.zeros(3), f, f_unlabelled]),
                          np.arange(10) < 3, (np.arange(10) >= 3) & (np.arange(10) < 7))
    assert cell.estimate == pytest.approx(want, abs=1e-12) and cell.se == pytest.approx(want_se, abs=1e-12)
    assert (cell.exact, cell.generated, cell.predicted) == (3, 4, 3) and math.isnan(cell.low)  # 4 generated: fewer than MIN_GENERATED
    # too few generated where some are needed: no estimate; none needed: the exact mean
    assert math.isnan(stratified_ppi(np.array([1.0, 1.0, np.nan]), np.zeros(3), np.array([1, 1, 0], bool), np.array([0, 0, 1], bool)).low)
    assert stratified_ppi(np.array([1.0, 0.0]), np.zeros(2), np.ones(2, bool), np.zeros(2, bool)).estimate == 0.5


def test_equal_labels_keep_an_interval_of_the_pseudo_labels_width_not_zero():
    """30 generated labels all 1 (10 predicted): the spread would be 0 and the interval a point;
    the pseudo-labels (two at 0, two at 1; a paired difference's one at -1 and one at +1) keep
    a spread, PPI++ on the augmented labels in closed form, Bessel-corrected, Student's t with
    29 df, its upper bound clipped at 1 (a score cannot pass 100 %). The point estimate stays
    the labels' own."""
    n, generated, f = 40, np.arange(40) < 30, np.linspace(0.5, 0.9, 40)
    y = np.where(generated, 1.0, np.nan)
    cell = stratified_ppi(y, f, np.zeros(n, bool), generated)
    centre, se = _closed_form(*_augmented(np.ones(30), f[:30], f[30:]), f[30:])
    half = stats.t.ppf(0.975, 29) * se * math.sqrt(34 / 33)
    assert centre + half > 1.0
    assert cell.estimate == pytest.approx(1.0) and (cell.low, cell.high) == pytest.approx((centre - half, 1.0), rel=1e-9)
    assert 0.85 < cell.low < 0.95
    difference = stratified_ppi(np.where(generated, 0.0, np.nan), f - 0.7, np.zeros(n, bool), generated, label_range=(-1.0, 1.0))
    centre, se = _closed_form(*_augmented(np.zeros(30), f[:30] - 0.7, f[30:] - 0.7, 1, (-1.0, 1.0)), f[30:] - 0.7)
    assert difference.estimate == 0.0 and difference.half_width == pytest.approx(stats.t.ppf(0.975, 29) * se * math.sqrt(32 / 31), rel=1e-9)


def test_settled_pairs_that_all_agree_keep_an_interval_wider_than_delta():
    """10 paired differences, every one settled by likelihood and 0 (both variants answer each
    alike), nothing unsettled: without the floor the interval is [0, 0] and a verdict "within 5
    points" for any press; with it, the settled stratum's variance is that of the ten 0s with -1
    and +1 added (2/11 over 12), Student's t with 9 df: about ±28 points, too few to tell."""
    n = 10
    difference = stratified_ppi(np.zeros(n), np.zeros(n), np.ones(n, bool), np.zeros(n, bool), label_range=(-1.0, 1.0))
    assert difference.estimate == 0.0
    assert difference.half_width == pytest.approx(stats.t.ppf(0.975, 9) * math.sqrt(2 / 11 / 12), rel=1e-9)
    assert difference.half_width > 0.05
    spread = stratified_ppi(np.arange(n) % 2 * 1.0, np.zeros(n), np.ones(n, bool), np.zeros(n, bool))
    full = pseudo_label_interval(np.arange(n) % 2 * 1.0)  # every sample labelled: the full-generation interval
    assert (spread.estimate, spread.low, spread.high, spread.se) == pytest.approx((0.5, full.low, full.high, full.se), rel=1e-12)


def test_the_interval_covers_the_population_mean_in_simulation():
    """1,000 cells of 60 samples from a population with a settled share, a 0.3 generated share
    (about 15 generated) and an informative but imperfect prediction: the 95 % interval covers
    the population's mean generated score in 93-99 % of them (ppi_py's normal interval alone:
    0.907; the pseudo-labels make it conservative here, 0.98 in a 4,000-cell run of the bench's mirror)."""
    rng = np.random.default_rng(7)
    covered = runs = 0
    for _ in range(1000):
        x = rng.normal(size=60)
        settled = x > 1.0
        p = 1 / (1 + np.exp(-2 * x))
        y = np.where(settled, 1.0, (rng.random(60) < p).astype(float))
        generated = ~settled & (rng.random(60) < 0.3)
        prediction = np.clip(p + rng.normal(0, 0.15, 60), 0, 1)
        cell = stratified_ppi(np.where(settled | generated, y, np.nan), prediction, settled, generated)
        if not math.isnan(cell.low):  # a cell with fewer than MIN_GENERATED generated samples has no interval
            runs += 1
            covered += cell.low <= TRUE_MEAN <= cell.high
    assert runs > 900 and 0.93 <= covered / runs <= 0.99


def _true_mean() -> float:
    """The simulated population's mean generated score, by quadrature over x ~ N(0, 1)."""
    from scipy import integrate

    def expected(x: float) -> float:
        return stats.norm.pdf(x) * (1.0 if x > 1.0 else 1 / (1 + math.exp(-2 * x)))

    return integrate.quad(expected, -10, 1.0)[0] + integrate.quad(expected, 1.0, 10)[0]


TRUE_MEAN = _true_mean()


def test_cross_fitting_never_predicts_a_label_from_itself():
    """Poison one label: no prediction in its fold moves (its own included), labelled predictions
    in the other folds do; a fit that saw the label would move its own prediction."""
    rng = np.random.default_rng(3)
    n, k = 80, 5
    x = rng.normal(size=(n, 2))
    labels = (rng.random(n) < 1 / (1 + np.exp(-2 * x[:, 0]))).astype(float)
    labelled = rng.random(n) < 0.6
    folds = rng.integers(0, k, n)
    before = cross_fit(x, labels, labelled, folds, k)
    j = int(np.flatnonzero(labelled)[0])
    poisoned = labels.copy()
    poisoned[j] = 1 - poisoned[j]
    after = cross_fit(x, poisoned, labelled, folds, k)
    same_fold = labelled & (folds == folds[j])
    other_folds = labelled & (folds != folds[j])
    assert np.array_equal(before[same_fold], after[same_fold])
    assert not np.allclose(before[other_folds], after[other_folds])
    assert not np.allclose(before[~labelled], after[~labelled])  # the unlabelled rows average all K fold models
    # a leaky fit (one fold: every model sees every label) moves the poisoned row's own prediction
    leaky_before, leaky_after = (fit_predict(x[labelled], lab[labelled], x[[j]])[0] for lab in (labels, poisoned))
    assert leaky_before != leaky_after
    # the labels of unlabelled rows are never read
    noise = labels.copy()
    noise[~labelled] = rng.random(int((~labelled).sum()))
    assert np.array_equal(cross_fit(x, noise, labelled, folds, k), before)


def _records(share: float, seed: int = 42, samples: int = 30) -> pd.DataFrame:
    """Constructed records of two variants on two tasks: likelihood numbers, a settled share,
    each unsettled sample generated where its seeded draw falls below `share`."""
    rng = np.random.default_rng(0)
    rows = []
    for model, shift in (("full", 0.0), ("pressed", -1.0)):
        for task in ("niah_single_1", "vt"):
            for k in range(samples):
                logp = rng.normal(-1 + shift, 1)
                settled = logp > 0.3
                y = 1.0 if settled else float(rng.random() < 1 / (1 + math.exp(-2 * (logp + 1))))
                method = SETTLED if settled else GENERATED if drawn(seed, task, 1024, k, share) else PREDICTED
                rows.append({"model": model, "task": task, "length": 1024, "sample": k, "prompt_sha256": f"{task}/{k}", "method": method,
                             "generation_score": np.nan if method == PREDICTED else y, "truth": y, "mean_logprob": logp,
                             "first_rank": 1 if logp > -1 else 4, "likelihood_score": float(settled)})
    return pd.DataFrame(rows)


def test_the_estimator_pipeline_on_constructed_records():
    full = _records(1.0)
    scores, differences = ppi_tables(full.drop(columns="truth"), 42)
    # every sample labelled: the scores and paired differences are the plain means
    cells = scores.set_index(["model", "task"])
    for (model, task), part in full.groupby(["model", "task"]):
        assert cells.loc[(model, task), "score"] == pytest.approx(100 * part["truth"].mean())
        assert cells.loc[(model, task), "predicted"] == 0
    truth = full.pivot_table(index=["task", "sample"], columns="model", values="truth")
    paired = (truth["pressed"] - truth["full"]) * 100
    mean_row = differences[differences["task"] == "mean"].iloc[0]
    assert mean_row["diff"] == pytest.approx(paired.groupby("task").mean().mean())
    assert set(differences["reference"]) == {"full"} and set(differences["model"]) == {"pressed"}
    # a share: the same draws for both variants, so a pair is labelled on the samples drawn
    part = _records(0.4, samples=60)
    scores, differences = ppi_tables(part.drop(columns="truth"), 42)
    counts = scores[scores["task"] != "mean"]
    assert counts["samples"].sum() == len(part) and counts["predicted"].sum() == (part["method"] == PREDICTED).sum()
    assert counts["generated"].sum() == (part["method"] == GENERATED).sum()
    assert (scores["score.low"] < scores["score"]).all() and (scores["score"] < scores["score.high"]).all()
    d = differences.set_index("task")
    assert d.loc["mean", "samples"] == 2 * 60 and d.loc["mean", "diff.low"] < d.loc["mean", "diff"] < d.loc["mean", "diff.high"]
    assert all(0 <= fold_of(42, "vt", 1024, s) < 5 for s in range(30))


def test_bad_generate_share_is_one_line_and_exit_code_2(tmp_path):
    cases = [(["--generate-share", "0"], "--generate-share must lie in (0, 1]"),
             (["--generate-share", "0.2", "--likelihood-only"], "--likelihood-only generates none"),
             (["--generate", "3", "--generate-share", "0.2"], "--generate draws the samples to generate"),
             (["--generate", "9", "--samples", "4"], "--generate must be at most --samples (4)"),
             (["--generate", "10", "--samples", "10", "--generate-share", "0.2", "--until", "5", "--max-samples", "80"], "--generate draws"),
             (["--generate", "10", "--samples", "10", "--until", "5", "--max-samples", "80"], "--until needs --generate-share (its rounds are prediction-powered): --generate is a count per run"),
             (["--generate", "5", "--samples", "20"], "--generate must be at least 10")]
    for args, message in cases:
        proc = run_cli("ruler", *args, "--out", str(tmp_path / "out"))
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and message in proc.stderr, proc.stderr


def test_a_count_draws_that_many_samples_of_each_cell_the_same_for_every_model():
    """`--generate N` takes the N smallest of the uniforms `--generate-share` compares: a share
    draws a sample whenever a count of the same size would, in expectation."""
    for count in (1, 4, 12):
        picked = [k for k in range(12) if drawn_of_count(42, "vt", 1024, k, count, 12)]
        assert len(picked) == count
        uniforms = sorted(sample_rng(42, "generate-share", "vt", 1024, k).random() for k in range(12))
        assert all(drawn(42, "vt", 1024, k, uniforms[count - 1] + 1e-12) for k in picked)
    assert [drawn_of_count(42, "vt", 1024, k, 4, 12) for k in range(12)] != [drawn_of_count(42, "vt", 2048, k, 4, 12) for k in range(12)]


@pytest.mark.parametrize("draw", [{"generate_share": 0.5, "samples": 12}, {"generate_count": 10, "samples": 24}])
def test_a_share_run_generates_only_drawn_unsettled_samples_and_settled_ones_cost_nothing(tmp_path, monkeypatch, draw):
    """A tiny random model made to settle every other prompt (its greedy ids set to the
    reference): settled samples are labelled without a generate call, drawn unsettled ones
    (by share or by count) generate once each, the others are predicted; the result carries
    the PPI tables."""
    pytest.importorskip("transformers")
    from ctxeval.backends.hf import HFScorer
    from tests.hf_tiny import tiny_llama_dir

    calls = []
    stepwise, generate = HFScorer.score_stepwise, HFScorer.generate

    def settling(self, prompt_ids, continuation_ids, *args, **kwargs):
        scores = stepwise(self, prompt_ids, continuation_ids, *args, **kwargs)
        return dataclasses.replace(scores, greedy_id=np.asarray(continuation_ids, np.int32)) if len(prompt_ids) % 2 == 0 else scores

    def counted(self, *args, **kwargs):
        calls.append(1)
        return generate(self, *args, **kwargs)

    monkeypatch.setattr(HFScorer, "score_stepwise", settling)
    monkeypatch.setattr(HFScorer, "generate", counted)
    model = f"hf:{tiny_llama_dir(tmp_path / 'llama', demo_text_path().read_text()[:20000], vocab_size=512)}"
    result = api.ruler(tasks=("niah_single_1",), lengths=(512,), models=(model,), out=tmp_path / "run", **draw)
    s = result.samples
    methods = s["method"].value_counts().to_dict()
    assert set(methods) <= {SETTLED, GENERATED, PREDICTED} and methods.get(SETTLED, 0) > 0 and methods.get(PREDICTED, 0) > 0
    assert len(calls) == methods.get(GENERATED, 0)  # one generation per drawn unsettled sample, none for a settled one
    settled = s[s["method"] == SETTLED]
    assert (settled["generation_score"] == 1.0).all() and (settled["greedy_prefix"] == settled["reference_tokens"]).all()
    unsettled = s[s["method"] != SETTLED]
    chosen = ([drawn(42, "niah_single_1", 512, int(k), 0.5) for k in unsettled["sample"]] if "generate_share" in draw
              else [drawn_of_count(42, "niah_single_1", 512, int(k), 10, 24) for k in unsettled["sample"]])
    assert [m == GENERATED for m in unsettled["method"]] == chosen
    assert s.loc[s["method"] == PREDICTED, "generation_score"].isna().all()
    assert result.ppi is not None and result.markdown.startswith("# RULER, prediction-powered (PPI++)")
    again = read_result(tmp_path / "run")
    assert again.ppi["score"].tolist() == pytest.approx(result.ppi["score"].tolist(), nan_ok=True)


def test_the_calibrations_logistic_fit_equals_scikit_learns():
    """Fractional labels as weighted successes and failures, L2 penalty C = 1 on the slopes only."""
    sklearn = pytest.importorskip("sklearn.linear_model")
    from ctxeval.stats.crossfit import logistic_fit

    rng = np.random.default_rng(1)
    x = rng.normal(size=(50, 3))
    y = (rng.random(50) < 1 / (1 + np.exp(-2 * x[:, 0]))).astype(float)
    y[:5] = 0.5
    rows, targets, weights = np.concatenate([x, x]), np.r_[np.ones(50), np.zeros(50)], np.r_[y, 1 - y]
    keep = weights > 0
    model = sklearn.LogisticRegression(C=1.0, tol=1e-10, max_iter=10000).fit(rows[keep], targets[keep], sample_weight=weights[keep])
    assert logistic_fit(np.column_stack([np.ones(50), x]), y) == pytest.approx(np.r_[model.intercept_, model.coef_[0]], abs=1e-5)


def test_the_ppi_section_gives_each_difference_its_verdict_and_shows_intervals_within_the_scores_range():
    """A press whose interval excludes 0 past δ *hurts* (by more than δ), one inside ±δ is *within
    δ*, one crossing 0 past δ is *too few samples to tell*, with the samples that would settle it,
    each with the smallest margin it is within; a score interval past 100 is shown ending at 100, a
    difference's past −100 at −100."""
    from ctxeval.render.ruler_ppi import ppi_markdown
    from ctxeval.ruler.ppi import difference_row
    from ctxeval.stats.ppi import PPIEstimate

    def estimate(value: float, low: float, high: float, se: float = 1.0) -> PPIEstimate:
        """In shares, as the estimator gives it; the tables hold percent."""
        return PPIEstimate(value / 100, low / 100, high / 100, se / 100, 60, exact=0, generated=11, predicted=49, df=10.0)

    def row(model: str, value: float, low: float, high: float) -> dict:
        return {"model": model, "task": "niah_single_2", "length": 1024, **estimate(value, low, high).scaled(100).columns("score"), "samples": 60,
                "exact": 0, "generated": 11, "predicted": 49, "df": 10.0}

    def difference(model: str, value: float, low: float, high: float, se: float = 1.0) -> dict:
        return difference_row(model, "niah_single_2", 1024, estimate(value, low, high, se), "full", 5.0)

    scores = pd.DataFrame([row("full", 100.0, 82.9, 117.1), row("hurting", 53.9, 36.2, 71.6), row("alike", 99.0, 95.0, 103.0),
                           row("unclear", 90.0, 70.0, 110.0)])
    differences = pd.DataFrame([difference("hurting", -46.1, -63.7, -28.4), difference("alike", -1.0, -4.0, 2.0),
                                difference("unclear", -10.0, -130.0, 10.0, se=10.2)])
    text = "\n".join(ppi_markdown(scores, differences, delta=5.0))
    assert "100.0 [82.9, 100.0]" in text and "99.0 [95.0, 100.0]" in text
    assert "117.1" not in text and "103.0" not in text
    assert "-46.1 [-63.7, -28.4] hurts, by more than δ (within ±63.7)" in text
    assert "-1.0 [-4.0, +2.0] within δ (within ±4)" in text
    settle = math.ceil((stats.norm.ppf(0.975) * 10.2 * math.sqrt(60) / 10.0) ** 2)  # the interval's se at n samples, scaled as 1/√n
    assert f"-10.0 [-100.0, +10.0] too few samples to tell (within ±130; about {settle} would settle it)" in text
    assert "verdict at δ = 5 points: within δ where the interval lies inside ±δ" in text
    assert "verdict at δ = 2 points" in "\n".join(ppi_markdown(scores, differences, delta=5.0, until={"delta": 2.0, "half_width": None, "max_samples": 40,
                                                                                                      "round_size": 10, "confidence": 0.9875, "rounds": 4}))


def test_a_cell_without_an_interval_names_why_and_the_options_that_would_give_one():
    """The remedy of a cell lacking an interval: the samples at the run's share whose expected
    generated unsettled samples (share × unsettled share × samples) first reach MIN_GENERATED,
    or a share at these samples, or every unsettled one generated (share 1: every sample
    labelled, an interval at any n ≥ 2); a count run, a larger count (at most every sample). The
    step-1 cell of the issue (10 samples, 3 unsettled, share 0.3) needs 112 samples at 0.3, or
    share 1 at these samples; the rendered cell says so with its reason."""
    from ctxeval.render.ruler_ppi import ppi_markdown
    from ctxeval.ruler.generation import Generation
    from ctxeval.ruler.ppi import remedy, with_remedies
    from ctxeval.stats.ppi import MIN_GENERATED

    def expected(samples: int, n: int, unsettled: int, share: float) -> float:
        return share * unsettled / n * samples

    share = Generation("share", share=0.3)
    assert remedy(10, 3, share) == [{"samples": 112}, {"generate_share": 1.0}]
    assert expected(112, 10, 3, 0.3) >= MIN_GENERATED > expected(111, 10, 3, 0.3)
    assert remedy(40, 20, share) == [{"samples": 67}, {"generate_share": 0.5}]  # 20 unsettled: half of them drawn reach 10
    assert remedy(40, 0, share) == []  # nothing to generate: every sample settled
    assert remedy(20, 20, Generation("share", share=0.5)) == [{"generate_share": 1.0}]  # its settings reach 10 in expectation: the draw fell short
    assert remedy(24, 12, Generation("count", count=10)) == [{"generate_count": 20}]
    assert remedy(12, 6, Generation("count", count=10)) == [{"generate_count": 12}]  # every sample drawn: all labelled

    records = _records(0.3, samples=10)
    scores, differences = ppi_tables(records.drop(columns="truth"), 42)
    scores, differences = with_remedies(scores, share), with_remedies(differences, share)
    for _, row in scores[scores["score.low"].isna()].iterrows():
        unsettled = int(row["generated"] + row["predicted"])
        if row["task"] != "mean":
            assert row["remedy"] == remedy(int(row["samples"]), unsettled, share)
            assert row["score.reason"] == f"{int(row['generated'])} of its {unsettled} unsettled samples generated, an interval needs {MIN_GENERATED}"
    assert scores["score.low"].isna().any() and all(r for r, low in zip(scores["remedy"], scores["score.low"]) if low != low)
    assert all(r == [] for r, low in zip(scores["remedy"], scores["score.low"]) if low == low)
    text = "\n".join(ppi_markdown(scores, differences, delta=5.0))
    row = scores[(scores["task"] == "mean") & (scores["model"] == "full")].iloc[0]
    worst = max((r for r in scores.loc[(scores["model"] == "full") & (scores["task"] != "mean"), "remedy"] if r), key=lambda r: r[0]["samples"])
    flags = ", or ".join(" ".join(f"{'--samples' if k == 'samples' else '--generate-share'} {v:g}" for k, v in o.items()) for o in worst)
    assert f"{row['score']:.1f}, no interval: a task without an interval; {flags} would give one" in text
    shown = text.replace("exact, not generated", "").replace("McNemar's exact p", "").replace("McNemar p, exact", "")  # the settled samples are never called exact
    assert "| model | task | length | score | settled | generated | predicted |" in text and "exact" not in shown
    # a difference without an interval claims no sample count from a spread it does not have
    assert differences.loc[differences["diff.low"].isna(), "diff.samples_needed"].isna().all()
    assert "would settle it" not in "".join(line for line in text.splitlines() if "no interval" in line)


def test_non_numeric_share_is_refused_in_ctxevals_words(tmp_path):
    proc = run_cli("ruler", "--generate-share", "abc", "--out", str(tmp_path / "out"))
    assert proc.returncode == 2 and proc.stderr == "ctxeval: error: --generate-share must be a number, got 'abc'\n", proc.stderr
    proc = run_cli("ruler", "--samples=1.5", "--out", str(tmp_path / "out"))
    assert proc.returncode == 2 and proc.stderr == "ctxeval: error: --samples must be an integer, got '1.5'\n", proc.stderr
