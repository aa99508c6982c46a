"""RULER's tasks, scoring and `agreement`, without a model: generators against RULER's own
definitions (NVIDIA/RULER c3f5e3b), its scorer on hand-made predictions, seeded samples, and
the agreement command on synthetic runs against scipy."""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from scipy import stats

from ctxeval import api
from ctxeval.errors import UserError
from ctxeval.data.texts import demo_text_path
from ctxeval.metrics.ruler import match_all, postprocess_pred, string_match_all, string_match_part
from ctxeval.results.manifest import Manifest, write_manifest
from ctxeval.results.retrieval import CASES_FILE
from ctxeval.probes.retrieval_run import CASE_SCHEMA
from ctxeval.ruler.score import reference_text
from ctxeval.data.texts import RULER_HAYSTACK_NAME, load_text
from ctxeval.ruler.aggregation import Setting, common_words, cwe_capacity, cwe_words, fallback_words, frequent_words, fwe_vocabulary, variable_tracking, vt_body
from ctxeval.ruler.prompt import ChatTemplate, model_text
from ctxeval.ruler.paired import PairedSettings
from ctxeval.ruler.report import effective_length, ruler_result
from ctxeval.stats.paired import paired_bca
from ctxeval.stats.paired_binary import tango_interval
from ctxeval.ruler.run import SAMPLE_SCHEMA, essay_repeats
from ctxeval.results.ruler import SAMPLES_FILE
from ctxeval.ruler.samples import SampleSpec, build_sample, fit_size, render_sample, shared_prefix_order, sample_rng, vt_worked_example
from ctxeval.ruler.tasks import DEPTHS, NOISE, TASKS, essay_words, render_niah, sentences, split_answer_prefix
from ctxeval.pipeline.engine import save_result
from ctxeval.render.kinds import RENDERING
from ctxeval.probes.retrieval_report import retrieval_result
from tests.conftest import FIXTURES, run_cli

ESSAY = " ".join(f"Sentence number {i} is here. It has words." for i in range(400))


def words(text: str) -> int:
    """A stand-in tokenizer: one token per white-space word."""
    return len(text.split())


def niah(task: str, size: int, index: int = 0, length: int = 2048):
    return render_niah(sample_rng(42, task, length, index), size, Setting(TASKS[task].args, 42, length, ESSAY))


# --- the templates, word for word ---------------------------------------------------------

def test_single_needle_prompt_is_rulers_singular_template():
    sample = niah("niah_single_1", 10)
    key = re.search(r"for (\S+) is: (\d+)\.", sample.prompt).group(1)
    head = "A special magic number is hidden within the following text. Make sure to memorize it. I will quiz you about the number afterwards.\n"
    tail = (f"\nWhat is the special magic number for {key} mentioned in the provided text? "
            f"The special magic number for {key} mentioned in the provided text is")
    assert sample.prompt.startswith(head) and sample.prompt.endswith(tail)
    lines = sample.prompt[len(head) : -len(tail)].split("\n")
    assert len(lines) == 11 and lines.count(NOISE) == 10
    assert lines[[i for i, line in enumerate(lines) if line != NOISE][0]] == f"One of the special magic numbers for {key} is: {sample.answers[0]}."
    assert re.fullmatch(r"[1-9]\d{6}", sample.answers[0])


def test_multi_value_prompt_keeps_rulers_plural_template():
    sample = niah("niah_multivalue", 300)
    key = re.search(r"for (\S+) is: \d+\.", sample.prompt).group(1)
    assert sample.prompt.startswith("Some special magic numbers are hidden within the following text. Make sure to memorize it. I will quiz you about the numbers afterwards.\n")
    assert sample.prompt.endswith(f"\nWhat are all the special magic numbers for {key} mentioned in the provided text? "
                                  f"The special magic numbers for {key} mentioned in the provided text are")
    assert len(sample.answers) == 4
    for value in sample.answers:
        assert f"One of the special magic numbers for {key} is: {value}." in sample.prompt


def test_multi_query_asks_for_four_keys_joined_as_ruler_joins_them():
    sample = niah("niah_multiquery", 300)
    query = re.search(r"numbers for (.+) mentioned in the provided text\?", sample.prompt).group(1)
    keys = query.replace(", and ", ", ").split(", ")
    assert len(keys) == 4 and ", and " in query
    for key, value in zip(keys, sample.answers):
        assert f"for {key} is: {value}." in sample.prompt


def test_uuid_values_and_needle_haystack_of_distractors():
    sample = niah("niah_multikey_3", 12)
    assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", sample.answers[0])
    body = sample.prompt.split("\n")[1:-1]
    assert len(body) == 13 and all(re.fullmatch(r"One of the special magic uuids for [0-9a-f-]{36} is: [0-9a-f-]{36}\.", line) for line in body)
    assert "A special magic uuid is hidden" in sample.prompt


def test_multikey_essay_has_three_distractor_needles_at_sentence_boundaries():
    sample = niah("niah_multikey_1", 500)
    needles = re.findall(r"One of the special magic numbers for \S+ is: \d+\.", sample.prompt)
    assert len(needles) == 4 and sum(sample.answers[0] in n for n in needles) == 1
    context = sample.prompt.split("\n")[1]
    for needle in needles:  # each needle sits between whole essay sentences
        before = context[: context.index(needle)].rstrip()
        assert before == "" or before.endswith((".", "!", "?"))


def test_essay_needle_depths_are_rulers_forty_depths():
    assert DEPTHS[:5] == [0, 3, 5, 8, 10] and DEPTHS[-3:] == [95, 97, 100] and len(DEPTHS) == 40
    depths = [niah("niah_single_2", 400, index=i).depth for i in range(40)]
    assert 0 <= min(depths) < 0.15 and max(depths) > 0.85


def test_sentence_splitting():
    assert sentences('He said "go." Then it rained! Why? End') == ['He said "go."', "Then it rained!", "Why?", "End"]


def test_variable_tracking_chain_and_worked_example():
    setting = Setting(TASKS["vt"].args, 42, 2048)
    text, names = vt_body(sample_rng(42, "t"), 30, setting)
    assert len(names) == 5 and all(re.fullmatch(r"[A-Z]{5}", n) for n in names)
    value = re.search(rf"VAR {names[0]} = (\d{{5}})\n", text).group(1)
    for a, b in zip(names, names[1:]):
        assert f"VAR {b} = VAR {a} \n" in text
    assert text.endswith(f"Question: Find all variables that are assigned the value {value} in the text above. Answer: According to the chain(s) of "
                         f"variable assignment in the text above, 5 variables are assigned the value {value}, they are: ")
    example = vt_worked_example(words, 42, TASKS["vt"].args)
    assert words(example) <= 500 + 6 and "12345" in example and re.search(r"they are:  [A-Z]{3} [A-Z]{3} [A-Z]{3} [A-Z]{3} [A-Z]{3}\n$", example)
    sample = variable_tracking(sample_rng(42, "s"), 30, Setting(TASKS["vt"].args, 42, 2048, example=example))
    assert "12345" not in sample.prompt and sample.prompt.count("Memorize and track") == 2  # the example's value and names are redrawn


def test_common_words_frequencies_follow_rulers_short_and_long_settings():
    for length, common, rare in ((2048, 6, 1), (4096, 30, 3)):
        sample = common_words(sample_rng(42, "c", length), 60, Setting(TASKS["cwe"].args, 42, length))
        listed = sample.prompt.split("\n")[-2]
        counts = Counter(re.findall(r"\d+\. (\S+)", listed))
        assert len(counts) == 60 and all(counts[w] == common for w in sample.answers) and len(sample.answers) == 10
        assert set(counts.values()) == {common, rare}
        assert sample.prompt.endswith("Question: What are the 10 most common words in the above list? Answer: The top 10 words that appear most often in the list are:")


def test_cwe_beyond_wonderwords_samples_the_fallback_list():
    vocabulary, fallback = cwe_words(42), fallback_words()
    assert len(fallback) > len(vocabulary) and fallback == tuple(sorted(fallback)) and all(re.fullmatch(r"[a-z]+", w) for w in fallback)
    assert cwe_capacity() == len(fallback)
    for size, source in ((len(vocabulary), set(vocabulary)), (len(vocabulary) + 1, set(fallback))):
        sample = common_words(sample_rng(42, "c"), size, Setting(TASKS["cwe"].args, 42, 65536))
        listed = Counter(re.findall(r"\d+\. (.+?)(?= \d+\. |$)", sample.prompt.split("\n")[-2]))  # some wonderwords hold a space
        assert len(listed) == size and set(listed) <= source and set(sample.answers) <= source
    with pytest.raises(UserError, match=f"a cwe list of {len(fallback) + 1} distinct words exceeds the fallback list's {len(fallback)}"):
        common_words(sample_rng(42, "c"), len(fallback) + 1, Setting(TASKS["cwe"].args, 42, 65536))


def test_cwe_search_finds_the_largest_size_that_fits_up_to_the_longest_lengths():
    """RULER's bisection: the size fits and the next does not (or has no word list); at 128K the
    stand-in tokenizer (about 6 tokens a word) asks for more words than the lists hold."""
    def tokens(size: int, length: int) -> int:
        return words(TASKS["cwe"].render(sample_rng(42, "size", "cwe", length), size, Setting(TASKS["cwe"].args, 42, length)).prompt)

    for length in (4096, 32768, 131072):
        size = fit_size("cwe", length, 42, ESSAY, words, "m")
        assert tokens(size, length) + 120 <= length
        assert size == cwe_capacity() or tokens(size + 1, length) + 120 > length
    assert fit_size("cwe", 131072, 42, ESSAY, words, "m") == cwe_capacity()


def test_chat_template_wraps_the_input_and_keeps_rulers_answer_prefix():
    template = ChatTemplate((FIXTURES / "gemma3-chat-template.jinja").read_text(), "<eos>")
    sample = niah("niah_single_1", 3)
    text, prefix = split_answer_prefix("niah", sample.prompt)
    assert prefix.startswith(" The special magic number for ") and prefix.endswith(" mentioned in the provided text is") and text + prefix == sample.prompt
    assert template.wrap("niah_single_1", sample.prompt) == f"<start_of_turn>user\n{text}<end_of_turn>\n<start_of_turn>model\n{prefix}"
    fwe = frequent_words(sample_rng(42, "f"), 300, Setting(TASKS["fwe"].args, 42, 1024))
    assert template.wrap("fwe", fwe.prompt).endswith("coded text?<end_of_turn>\n<start_of_turn>model\n Answer: According to the coded text above, "
                                                     "the three most frequently appeared words are:")
    assert model_text("fwe", fwe.prompt, None) == fwe.prompt


def test_the_bundled_haystack_repeats_no_sentence():
    """Every sentence of the bundled haystack once (its 128K tokens are counted on the real
    tokenizers in test_ruler_model.py), and a needle haystack of all its words repeats none."""
    essay = load_text(RULER_HAYSTACK_NAME).content
    kept = essay.splitlines()
    assert len(kept) == len(set(kept)) and sentences(essay.replace("\n", " ")) == kept
    assert kept[0].startswith("[The Man Who Was Thursday by G.") and any(line.startswith("[Moby Dick by Herman Melville 1851]") for line in kept)
    size = len(essay_words(essay))
    sample = render_niah(sample_rng(42, "niah_single_2", 131072, 0), size, Setting(TASKS["niah_single_2"].args, 42, 131072, essay))
    context = sample.prompt.split("\n")[1]
    found = sentences(context)
    assert len(found) == len(kept) + 1 and len(set(found)) == len(found)  # the essay's sentences and the needle


def test_the_plan_names_where_an_essay_repeats():
    sizes = {"m": {"niah_single_2": {"1024": 700, "4096": 3000}, "niah_single_1": {"4096": 9000}, "fwe": {"4096": 9000}}}
    assert essay_repeats(sizes, 2000) == {"m": {"niah_single_2": [4096]}}  # noise and coded-word haystacks are no essay
    assert essay_repeats(sizes, 3000) == {}


def test_frequent_words_counts_follow_the_zeta_law():
    setting = Setting(TASKS["fwe"].args, 42, 1024)
    sample = frequent_words(sample_rng(42, "f"), 500, setting)
    vocab = fwe_vocabulary(sample_rng(42, "f"), setting)
    assert len(vocab) == (1024 - 50) // 50 and vocab[0] == "..." and sample.answers == tuple(vocab[1:4])
    text = sample.prompt[sample.prompt.index("coded words. ") + len("coded words. ") : sample.prompt.index("\nQuestion:")]
    counts = Counter(text.split(" "))
    for k, word in enumerate(vocab, start=1):
        assert counts[word] == int(500 * k**-2.0 / (np.pi**2 / 6))


# --- sizing and seeds -----------------------------------------------------------------------

def test_samples_fit_the_length_and_are_seeded():
    for task in ("niah_single_1", "niah_single_2", "niah_multikey_2", "cwe", "fwe"):
        size = fit_size(task, 1024, 42, ESSAY, words, "m")
        first, used = build_sample(SampleSpec(task, 1024, 3, size), 42, ESSAY, words)
        again, _ = build_sample(SampleSpec(task, 1024, 3, size), 42, ESSAY, words)
        assert first == again and words(first.prompt) + TASKS[task].tokens_to_generate <= 1024
        bigger = TASKS[task].render(sample_rng(42, "size", task, 1024), size + max(1, TASKS[task].increment(1024)), Setting(TASKS[task].args, 42, 1024, ESSAY))
        assert words(bigger.prompt) + TASKS[task].tokens_to_generate > 1024 - 40  # the size is about the largest that fits
        other, _ = build_sample(SampleSpec(task, 1024, 4, size), 42, ESSAY, words)
        assert other.answers != first.answers


def test_a_length_too_short_for_a_task_is_refused_with_its_shortfall_in_tokens():
    example = vt_worked_example(words, 42, TASKS["vt"].args)
    smallest = words(render_sample(SampleSpec("vt", 300, 0, 0, example), 42, ESSAY, TASKS["vt"].smallest_size()).prompt)
    assert smallest > 300  # the example alone has about 500 words
    with pytest.raises(UserError, match=rf"lengths 300 is too short for vt with m: its smallest prompt has {smallest} tokens and 30 are generated, "
                                        rf"{smallest + 30} in all, {smallest + 30 - 300} more than 300$"):
        fit_size("vt", 300, 42, ESSAY, words, "m", example)
    # the smallest needle prompt, counted by hand: 23 + 25 words of template, one noise line (19), one needle (10)
    with pytest.raises(UserError, match=r"lengths 10 is too short for niah_single_1 with m: its smallest prompt has 77 tokens and 128 are generated, 205 in all, 195 more than 10$"):
        fit_size("niah_single_1", 10, 42, ESSAY, words, "m")
    with pytest.raises(UserError, match=r"lengths 200 is too short for fwe: its vocabulary of \(length - 50\) / 50 coded words needs at least 4, a length of 250 tokens, 50 more than 200$"):
        fit_size("fwe", 200, 42, ESSAY, words, "m")
    for task in TASKS:  # no length gives a negative shortfall or a traceback
        with pytest.raises(UserError, match=r"lengths 10 is too short for \w+[^:]*: .* more than 10$"):
            fit_size(task, 10, 42, ESSAY, words, "m", example if task == "vt" else "")


# --- scoring --------------------------------------------------------------------------------

def test_string_match_all_and_part_on_hand_made_predictions():
    refs = [["7512152"], ["ABCDE", "FGHIJ", "KLMNO", "PQRST", "UVWXY"], ["alpha", "beta", "gamma"], ["9"]]
    preds = ["The number is 7512152.", "abcde fghij and then klmno", "Gamma, ALPHA", "none"]
    # per sample: 1, 3/5, 2/3, 0 -> mean 0.5667 -> 56.67 %
    assert string_match_all(preds, refs) == 56.67
    assert [match_all(p, r) for p, r in zip(preds, refs)] == [1.0, 0.6, 2 / 3, 0.0]
    assert string_match_part(preds, refs) == 75.0
    assert postprocess_pred("  \x00 answer\x07 is\x1f 7 \n") == "answer\n is\n 7"


def test_reference_forms():
    assert reference_text("niah", ("1", "2")) == ": 1, 2."
    assert reference_text("common_words_extraction", ("a", "b")) == " 1. a 2. b"
    assert reference_text("variable_tracking", ("A", "B")) == "A B"
    assert reference_text("freq_words_extraction", ("x", "y")) == " x y"


def test_effective_length_is_the_longest_length_before_the_first_fall():
    assert effective_length(pd.Series({1024: 90.0, 2048: 86.0, 4096: 70.0, 8192: 90.0})) == {"value": 2048, "at_least": False, "threshold": 85.6}
    assert effective_length(pd.Series({1024: 85.6, 2048: 99.0}))["at_least"] is True
    assert effective_length(pd.Series({1024: 50.0, 2048: 99.0}))["value"] is None


# --- paired differences against the first model ---------------------------------------------

def _ruler_folder(path: Path, scores: dict[str, tuple[list[float], list[float], list[float]]], generated: bool = True,
                  own_prompts: tuple[str, ...] = (), task: str = "niah_single_1", **settings) -> Path:
    """A finished RULER folder whose samples carry the given (generation, likelihood, mean log p)
    per model; sample k is the same prompt for every model but those of `own_prompts` (another
    tokenizer); `settings`: the paired differences' (PairedSettings)."""
    rows, index = [], 0
    for model, (gen, lik, logp) in scores.items():
        for k, (g, l, p) in enumerate(zip(gen, lik, logp)):
            prompt = hashlib.sha256(f"{task} {k} {model if model in own_prompts else ''}".encode()).hexdigest()
            rows.append({"sample_index": index, "model": model, "task": task, "length": 1024, "sample": k, "haystack": 10, "prompt_tokens": 900,
                         "depth": 0.5, "answers": ["1"], "prompt_sha256": prompt, "prediction": "", "method": "greedy generation" if generated else "likelihood only (no generation)",
                         "generation_score": g if generated else None, "likelihood_score": l, "answer_logprob": p, "answer_tokens": 1, "mean_logprob": p,
                         "first_rank": 1, "mean_log2_rank": -p, "greedy_prefix": 1, "reference_tokens": 2, "min_margin": 1.0})
            index += 1
    path.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=SAMPLE_SCHEMA), path / SAMPLES_FILE)
    manifest = Manifest(command="ruler", run_id="synthetic", config={"ruler_commit": "c3f5e3b"}, models=[{"name": m} for m in scores], status="complete",
                        timing={"seconds_this_session": 10.0, "seconds_all_sessions": 60.0})
    write_manifest(path, manifest)
    save_result(path, ruler_result(path, manifest, 85.6, PairedSettings(**settings)), "ruler", RENDERING)
    return path


def test_paired_differences_against_the_first_model_come_first_with_their_verdicts(tmp_path):
    rng = np.random.default_rng(4)
    full_logp = rng.normal(-1.0, 0.3, 9)
    press_logp = full_logp - 0.5 + rng.normal(0, 0.05, 9)
    scores = {"full": ([1.0] * 9, [1.0] * 9, list(full_logp)), "full?press=S": ([1.0] + [0.0] * 8, [0.0] * 9, list(press_logp)),
              "other": ([1.0] * 9, [1.0] * 9, list(full_logp))}
    run = _ruler_folder(tmp_path / "ruler", scores, own_prompts=("other",), replicates=500, seed=3)
    result = api.read_result(run)
    paired = result.paired.set_index("model")
    row = paired.loc["full?press=S"]
    low, high = tango_interval(0, 8, 9)
    assert row["score_diff"] == pytest.approx(-800 / 9) and (row["score_diff.low"], row["score_diff.high"]) == pytest.approx((100 * low, 100 * high))
    bca = paired_bca(press_logp - full_logp, np.ones(9), replicates=500, seed=3)
    assert (row["logp_diff"], row["logp_diff.low"], row["logp_diff.high"]) == pytest.approx((bca.estimate, bca.low, bca.high))
    assert row["score_diff.outcome"] == row["logp_diff.outcome"] == "hurts" and row["reference"] == "full"
    assert not paired.loc["other", "paired"] and "prompts differ from full's" in paired.loc["other", "note"]
    lines = result.markdown.splitlines()
    assert lines[2].startswith("**RULER, paired differences against full**") and "δ = 5 points" in lines[2] and "δ = 0.1 nats" in lines[2]
    assert lines[6].startswith("| full?press=S | 1024 | niah_single_1 | 9 | -88.9 [") and f"| hurts, by more than δ (within ±{-100 * low:.3g}) |" in lines[6]
    assert lines[6].endswith(f"| hurts, by more than δ (within ±{-row['logp_diff.low']:.3g}) |")
    assert any(line.startswith("other: not paired") for line in lines[7:10])
    assert result.paired_settings == {"score_delta": 5.0, "logp_delta": 0.1, "replicates": 500, "seed": 3, "confidence": 0.95}


def test_paired_verdicts_within_delta_and_too_few_samples_to_tell(tmp_path):
    rng = np.random.default_rng(5)
    logp = rng.normal(-1.0, 0.3, 200)
    near = {"full": ([1.0] * 200, [1.0] * 200, list(logp)), "same": ([1.0] * 200, [1.0] * 200, list(logp + rng.normal(0, 0.01, 200)))}
    within = api.read_result(_ruler_folder(tmp_path / "within", near, replicates=200)).paired.iloc[0]
    assert within["score_diff.outcome"] == within["logp_diff.outcome"] == "within δ" and within["score_diff.high"] < 5
    few = {"full": ([1.0] * 9, [1.0] * 9, list(logp[:9])), "one lost": ([0.0] + [1.0] * 8, [1.0] * 9, list(logp[:9] + rng.normal(0, 0.3, 9)))}
    row = api.read_result(_ruler_folder(tmp_path / "few", few, replicates=200)).paired.iloc[0]
    assert row["score_diff.outcome"] == row["logp_diff.outcome"] == "too few samples to tell"
    assert row["score_diff.low"] < -5 < 0 < row["score_diff.high"] and row["score_diff.samples_needed"] > 9 and row["logp_diff.samples_needed"] > 9


def test_one_model_has_no_paired_table_and_version_1_results_read_without_one(tmp_path):
    run = _ruler_folder(tmp_path / "ruler", {"only": ([1.0, 0.0], [1.0, 0.0], [-1.0, -2.0])})
    assert api.read_result(run).paired.empty
    data = json.loads((run / "results.json").read_text())
    del data["paired"], data["paired_settings"]
    (run / "results.json").write_text(json.dumps(data))
    header = json.loads((run / "result.json").read_text())
    (run / "result.json").write_text(json.dumps(header | {"version": 1}))
    old = api.read_result(run)
    assert old.paired.empty and old.paired_settings == {}


# --- the agreement command on synthetic runs -------------------------------------------------

def test_agreement_equals_scipy_on_the_same_table(tmp_path):
    rng = np.random.default_rng(1)
    scores = {}
    for m in range(6):
        gen = list((rng.random(8) < (m + 1) / 7).astype(float))
        scores[f"model-{m}"] = (gen, [g * (rng.random() < 0.8) for g in gen], list(rng.normal(-1 + m / 5, 0.3, 8)))
    run = _ruler_folder(tmp_path / "ruler", scores)
    result = api.agreement([run], out=tmp_path / "agreement", replicates=500)
    table = result.measures.pivot(index="model", columns="measure", values="value")
    row = result.correlations.set_index(["cheap", "task"]).loc[("RULER answer log p at 1024", "RULER score at 1024")]
    assert row["spearman"] == pytest.approx(stats.spearmanr(table["RULER answer log p at 1024"], table["RULER score at 1024"]).statistic)
    assert row["kendall"] == pytest.approx(stats.kendalltau(table["RULER answer log p at 1024"], table["RULER score at 1024"]).statistic)
    assert row["spearman.low"] <= row["spearman"] <= row["spearman.high"] and row["models"] == 6
    rank = result.correlations.set_index(["cheap", "task"]).loc[("RULER answer log2 rank at 1024", "RULER score at 1024")]
    assert rank["spearman"] == pytest.approx(row["spearman"])  # rank is oriented (lower is better): -(-log p) orders as log p
    assert result.measures["seconds_per_model"].iloc[0] == 10.0
    again = api.read_result(tmp_path / "agreement")
    pd.testing.assert_frame_equal(again.correlations, result.correlations, check_dtype=False)
    html = (tmp_path / "agreement" / "agreement.html").read_text()
    assert 'src="agreement_scatter.png"' in html and "Spearman" in html and (tmp_path / "agreement" / "agreement_scatter.png").stat().st_size > 1000


def test_fewer_than_four_models_give_no_interval(tmp_path):
    run = _ruler_folder(tmp_path / "ruler", {f"m{i}": ([float(i > 0)] * 4, [0.0] * 4, [-1.0 - i] * 4) for i in range(3)})
    result = api.agreement([run], out=tmp_path / "agreement", replicates=200)
    c = result.correlations
    assert c["spearman.low"].isna().all() and c[c["spearman"].notna()]["note"].str.contains("at least 4").all()
    assert c[c["spearman"].isna()]["note"].str.contains("the cheap measure is the same for all 3 models").all()  # likelihood score 0 for all


def _retrieval_folder(path: Path, accuracy: dict[str, list[bool]]) -> Path:
    """A finished retrieval folder with the given correctness per case and model."""
    rows, index = [], 0
    for model, correct in accuracy.items():
        for k, c in enumerate(correct):
            rows.append({"case_index": index, "model": model, "variant": "cat", "tokens_target": None, "lines": 20, "depth": 0.5, "sample": k, "char_depth": 0.5,
                         "prompt_tokens": 500, "correct": c, "prediction": "", "accuracy_method": "generation path", "min_margin": 1.0, "first_rank": 1,
                         "value_logprob": -1.0, "value_tokens": 2, "answer_ranks": [1, 1]})
            index += 1
    path.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=CASE_SCHEMA), path / CASES_FILE)
    manifest = Manifest(command="retrieval", run_id="synthetic", config={"variant": "cat"}, models=[{"name": m} for m in accuracy], status="complete")
    write_manifest(path, manifest)
    save_result(path, retrieval_result(path, manifest), "retrieval", RENDERING)
    return path


def test_bad_input_is_one_line_and_exit_code_2(tmp_path):
    likelihood_only = _ruler_folder(tmp_path / "lik", {"a": ([0.0], [1.0], [-1.0]), "b": ([0.0], [0.0], [-2.0])}, generated=False)
    retrieval = _retrieval_folder(tmp_path / "retrieval", {"c": [True, False], "d": [False, False]})
    (tmp_path / "scoring").mkdir()
    (tmp_path / "scoring" / "result.json").write_text(json.dumps({"kind": "scoring", "version": 1, "command": "score", "files": []}))
    cases = [
        (["agreement", str(tmp_path / "scoring")], "holds a scoring result (from `ctxeval score`); agreement reads effective-length/ruler/retrieval/diff results"),
        (["agreement", str(likelihood_only)], "the runs give no task (RULER with generation, retrieval) measure"),
        (["agreement", str(likelihood_only), str(retrieval)], "the runs' models do not overlap"),
        (["ruler", "--tasks", "niah_single_1,nope"], "unknown task 'nope'"),
        (["ruler", "--threshold", "120"], "--threshold must lie between 0 and 100"),
        (["ruler", "--delta", "0"], "--delta must be positive, got 0"),
    ]
    for args, message in cases:
        proc = run_cli(*args, "--out", str(tmp_path / "out"))
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.count("\n") == 1 and message in proc.stderr, proc.stderr


# --- a pressed hf model generates against its compressed cache -------------------------------

def test_hf_models_generate_and_a_pressed_one_generates_against_its_compressed_cache(tmp_path):
    pytest.importorskip("kvpress")
    from tests.hf_tiny import tiny_llama_dir

    model = f"hf:{tiny_llama_dir(tmp_path / 'llama', demo_text_path().read_text()[:20000], vocab_size=512)}"
    pressed = f"{model}?press=StreamingLLMPress&budget=64"
    result = api.ruler(tasks=("niah_single_1", "fwe"), lengths=(512,), samples=2, models=(model, pressed), out=tmp_path / "run")
    s = result.samples
    plain, squeezed = (s[s["model"] == m] for m in sorted(set(s["model"]), key=len))
    assert len(plain) == len(squeezed) == 4 and (plain["prompt_tokens"].to_numpy() == squeezed["prompt_tokens"].to_numpy()).all()
    for part in (plain, squeezed):
        assert part["generation_score"].notna().all() and set(part["method"]) <= {"generation path", "greedy generation"}
        assert (part["generation_score"] >= part["likelihood_score"]).all()
    # a random-weight model never produces the reference: every sample generated its own text
    assert (squeezed["method"] == "greedy generation").all() and (squeezed["prediction"] != "").all()
    scored_by = result.table.drop_duplicates("model").set_index("model")["scored_by"]
    assert set(scored_by) == {"generation"}
    assert "RULER's string_match_all on the greedy generation" in result.markdown
    assert (s["answer_tokens"] > 0).all() and np.isfinite(s["answer_logprob"]).all() and (s["first_rank"] >= 1).all()
    assert not np.allclose(plain["answer_logprob"], squeezed["answer_logprob"])
    assert plain["prediction"].tolist() != squeezed["prediction"].tolist()


def test_likelihood_only_records_the_generating_runs_likelihood_numbers_and_generates_nothing(tmp_path):
    pytest.importorskip("kvpress")
    from tests.hf_tiny import tiny_llama_dir

    model = f"hf:{tiny_llama_dir(tmp_path / 'llama', demo_text_path().read_text()[:20000], vocab_size=512)}"
    models = (model, f"{model}?press=StreamingLLMPress&budget=64")
    settings = dict(tasks=("niah_single_1", "fwe"), lengths=(512,), samples=2, models=models)
    both = api.ruler(**settings, out=tmp_path / "both")
    alone = api.ruler(**settings, likelihood_only=True, out=tmp_path / "alone")
    assert alone.manifest.run_id != both.manifest.run_id
    a, b = (r.samples.sort_values(["model", "task", "sample"]).reset_index(drop=True) for r in (alone, both))
    assert a["generation_score"].isna().all() and set(a["method"]) == {"likelihood only (no generation)"} and (a["prediction"] == "").all()
    for column in ("prompt_sha256", "likelihood_score", "answer_logprob", "first_rank", "greedy_prefix", "mean_log2_rank"):
        assert a[column].tolist() == b[column].tolist(), column  # the same computation on the same path
    assert set(alone.table["scored_by"]) == {"likelihood"} and set(both.table["scored_by"]) == {"generation"}


# --- records that RULER's evaluate.py re-scores, prompts rebuilt from them ------------------

def test_records_rescore_with_rulers_evaluate_and_rebuild_their_prompts(tmp_path):
    from ctxeval.backends.registry import load_scorer, parse_model_spec
    from tests.hf_tiny import tiny_llama_dir
    from tests.ruler_evaluate import rescored

    model = f"hf:{tiny_llama_dir(tmp_path / 'llama', demo_text_path().read_text()[:20000], vocab_size=512)}"
    result = api.ruler(tasks=("niah_single_1", "niah_single_2", "niah_multivalue", "fwe"), lengths=(1024,), samples=1, models=(model,), out=tmp_path / "run")
    s, table = result.samples, result.table.set_index(["model", "task", "length"])
    for key, score in rescored(s).items():
        assert score == round(table.loc[key, "score"], 2)
    assert "| mean of 4 tasks (RULER has 13) |" in result.markdown
    scorer = load_scorer(parse_model_spec(model))
    essay = load_text(RULER_HAYSTACK_NAME).content
    for row in s.itertuples():  # (vt's worked example, sized by the tokenizer, is rebuilt in test_ruler_model.py)
        spec = SampleSpec(row.task, row.length, row.sample, row.haystack)
        text = render_sample(spec, 42, essay, row.haystack).prompt
        assert hashlib.sha256(text.encode()).hexdigest() == row.prompt_sha256 and 1 + len(scorer.tokenize(text)) == row.prompt_tokens
    assert result.manifest.plan["essay_words"] == len(essay_words(essay)) and result.manifest.plan["essay_repeated"] == {}


def test_a_pressed_model_with_chat_template_is_one_line_and_exit_code_2(tmp_path):
    pytest.importorskip("kvpress")
    from tests.hf_tiny import tiny_llama_dir

    model = f"hf:{tiny_llama_dir(tmp_path / 'llama', demo_text_path().read_text()[:20000], vocab_size=512)}"
    args = ("--tasks", "niah_single_1", "--lengths", "512", "--samples", "1", "--chat-template", "--out", str(tmp_path / "x"))
    proc = run_cli("ruler", *args, "--model", f"{model}?press=StreamingLLMPress&budget=64")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "--chat-template is not offered with a KV press" in proc.stderr, proc.stderr
    with pytest.raises(UserError, match="^chat_template=: hf:llama has no chat template$"):  # the tiny tokenizer has none
        api.ruler(tasks=("niah_single_1",), lengths=(512,), samples=1, models=(model,), chat_template=True, out=tmp_path / "x")
    assert not (tmp_path / "x" / "samples.parquet").exists()


def test_samples_sharing_a_haystack_run_in_the_order_of_their_prompts():
    """niah and vt samples of one (task, length) run sorted by prompt text, so neighbours share
    the longest prefixes (the llama.cpp backend decodes a shared prefix once); a haystack drawn
    per sample keeps its order; the sample indices stay those of the plan."""
    essay = demo_text_path().read_text()
    jobs = [(i, SampleSpec(task, 1024, k, 60)) for i, (task, k) in enumerate((t, k) for t in ("niah_single_2", "niah_multikey_2") for k in range(5))]
    ordered = shared_prefix_order(jobs, 42, essay)
    assert sorted(ordered) == jobs and [j[1].task for j in ordered] == [j[1].task for j in jobs]
    prompts = [render_sample(spec, 42, essay, spec.size).prompt for _, spec in ordered[:5]]
    assert prompts == sorted(prompts) and ordered[5:] == jobs[5:]

    def shared(order):
        texts = [render_sample(spec, 42, essay, spec.size).prompt for _, spec in order]
        return sum(len(os.path.commonprefix([a, b])) for a, b in zip(texts, texts[1:]))

    assert shared(ordered[:5]) >= shared(jobs[:5])


def test_the_agreement_line_counts_what_each_scoring_found_on_the_samples_with_a_generated_score():
    """Four generated samples whose answers generation found where the teacher-forced reference
    left the greedy choice before them (the 4K case of the issue: equal on none, generation
    higher on all, on a task that scored 100) and two settled ones, which agree by construction;
    a predicted sample has no generated score and is not counted."""
    from ctxeval.render.ruler import agreement_line
    from ctxeval.ruler.report import agreement

    methods = ["greedy generation"] * 4 + ["generation path"] * 2 + ["predicted (not drawn for generation)"]
    samples = pd.DataFrame({"method": methods, "generation_score": [1.0] * 6 + [np.nan], "likelihood_score": [0.0] * 4 + [1.0] * 2 + [0.0]})
    agree = agreement(samples)
    assert (agree["samples"], agree["settled"], agree["generated"]) == (6, 2, 4)
    assert (agree["agree"], agree["answered_in_another_form"], agree["likelihood_above_generation"]) == (2 / 6, 4 / 6, 0.0)
    line = agreement_line(agree)
    assert line.startswith("Generation against likelihood, on the 6 samples with a generated score (2 settled by likelihood, which agree by construction; 4 generated): "
                           "the two scores are equal on 2 (33.3%); generation is higher on 4 (66.7%)")
    assert line.endswith("likelihood is higher on 0 (0.0%).")
    older = {k: v for k, v in agree.items() if k not in ("settled", "generated")}  # results.json of a run written before
    assert agreement_line(older).startswith("Generation against likelihood, on the 6 samples with a generated score: the two scores are equal on 2")


def test_the_sample_explorer_shows_a_dash_for_what_older_records_do_not_keep():
    """Records written before `prompt_tail` and `answer_ranks` existed give None for both (the
    page shows "—" and the first token's rank); a record that keeps them gives them whole."""
    from ctxeval.render.ruler import sample_entries

    row = {"model": "m", "task": "vt", "length": 512, "sample": 3, "method": "greedy generation", "answers": np.array(["AAAAA", "BBBBB"]),
           "prediction": "AAAAA BBBBB", "generation_score": 1.0, "likelihood_score": 0.5, "answer_logprob": -2.5, "mean_logprob": -1.25,
           "answer_tokens": 2, "first_rank": 1, "greedy_prefix": 0, "reference_tokens": 3}
    (old,) = sample_entries(pd.DataFrame([row]))
    assert (old["prompt_tail"], old["answer_ranks"], old["kind"], old["generated"], old["answers"]) == (None, None, "generated", "AAAAA BBBBB", ["AAAAA", "BBBBB"])
    (new,) = sample_entries(pd.DataFrame([row | {"prompt_tail": "... they are: ", "answer_ranks": np.array([1, 7])}]))
    assert (new["prompt_tail"], new["answer_ranks"]) == ("... they are: ", [1, 7])
    (predicted,) = sample_entries(pd.DataFrame([row | {"method": "predicted (not drawn for generation)", "prediction": "", "generation_score": np.nan}]))
    assert (predicted["kind"], predicted["generated"], predicted["generation_score"]) == ("predicted", None, None)
