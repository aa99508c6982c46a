"""L-Eval n-gram metrics and exam rules: hand-computed cases, rouge-score / rouge directly,
and L-Eval's exam extraction rules case by case."""

from __future__ import annotations

import pytest
from rouge_score import rouge_scorer

from ctxeval.leval.length import add_length_instruction, length_difference, leval_prompt, length_instruction
from ctxeval.metrics import exam, ngram

# ---------------------------------------------------------------- F1


def test_squad_normalize():
    assert ngram.squad_normalize("The  Cat, (sat) on A mat!") == "cat sat on mat"
    assert ngram.squad_normalize("April 25 , 2018") == ngram.squad_normalize("April 25, 2018") == "april 25 2018"
    # articles only as whole words
    assert ngram.squad_normalize("Theatre and another") == "theatre and another"


def test_f1_hand_computed():
    # prediction tokens [cat, sat, on, mat], reference [cat, sat]: P = 2/4, R = 2/2, F1 = 2/3
    assert ngram.f1("The cat sat on the mat.", "A cat sat.") == pytest.approx(2 / 3)
    # repeated tokens count as a multiset: pred [x, x, y], ref [x, y, y] -> common 2, P = R = 2/3
    assert ngram.f1("x x y", "x y y") == pytest.approx(2 / 3)
    assert ngram.f1("nothing shared", "other words") == 0.0
    assert ngram.f1("", "anything") == 0.0
    assert ngram.f1("April 25, 2018", "April 25 , 2018") == 1.0


def test_f1_variants_agree_on_english():
    pairs = [("The cat sat on the mat.", "A cat sat."), ("It was 1984, in London", "London 1984")]
    for p, r in pairs:
        assert ngram.f1(p, r, "longbench") == ngram.f1(p, r, "leval")


# ---------------------------------------------------------------- ROUGE


def test_rouge_hand_computed():
    s = ngram.rouge("the cat ran", "the cat sat")
    # unigrams: 2 of 3 shared; bigrams: "the cat" of 2; LCS "the cat" = 2 of 3
    assert s["rouge1"] == pytest.approx(2 / 3)
    assert s["rouge2"] == pytest.approx(1 / 2)
    assert s["rougeL"] == pytest.approx(2 / 3)
    # LCS is in-order: "a b c d" vs "d c b a" -> LCS 1, P = R = 1/4
    assert ngram.rouge("w x y z", "z y x w")["rougeL"] == pytest.approx(1 / 4)


SENTENCES = [
    ("The staff were friendly, and the room was clean.", "Friendly staff; clean rooms, but dated decor."),
    ("Speaker mn005 will mark overlapping speech regions.", "To save time, speaker mn005 will only mark overlapping speech."),
    ("Running runners ran", "run runner running"),  # no stemming: only "running" matches
    ("", "empty prediction"),
]


@pytest.mark.parametrize("prediction,reference", SENTENCES)
def test_rouge_equals_rouge_score_without_stemming(prediction, reference):
    direct = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=False).score(reference, prediction)
    ours = ngram.rouge(prediction, reference)
    for key in ngram.ROUGE_KEYS:
        assert ours[key] == direct[key].fmeasure


def test_rouge_max_over_references():
    refs = ["the dog barked", "the cat sat"]
    best = ngram.max_over_references([ngram.rouge("the cat sat down", r) for r in refs])
    assert best == ngram.rouge("the cat sat down", "the cat sat")


@pytest.mark.parametrize("prediction,reference", SENTENCES[:3])
def test_longbench_rouge_equals_rouge_package(prediction, reference):
    from rouge import Rouge

    direct = Rouge().get_scores([prediction], [reference], avg=True)
    ours = ngram.rouge(prediction, reference, "longbench")
    assert ours == {"rouge1": direct["rouge-1"]["f"], "rouge2": direct["rouge-2"]["f"], "rougeL": direct["rouge-l"]["f"]}


def test_longbench_rouge_empty_prediction_is_zero():
    # LongBench catches the rouge package's "Hypothesis is empty" and scores 0
    assert ngram.rouge("", "reference", "longbench") == {"rouge1": 0.0, "rouge2": 0.0, "rougeL": 0.0}


# ---------------------------------------------------------------- non-Latin text


def test_chinese_plain_is_leval_and_unicode_gives_credit():
    pred, ref = "北京是中国的首都。", "中国的首都是北京"
    # plain (default): L-Eval's f1.py sees one whitespace "word" each, rouge-score keeps no token -> 0
    assert ngram.f1(pred, ref) == 0.0 and ngram.rouge(pred, ref) == dict.fromkeys(ngram.ROUGE_KEYS, 0.0)
    assert ngram.f1(pred, ref, "longbench") == 0.0
    # an identical Chinese answer is one shared "word": L-Eval gives it full F1
    assert ngram.f1(ref, ref) == 1.0
    # unicode: character level, the same 8 characters in another order (punctuation dropped)
    assert ngram.f1(pred, ref, tokenize="unicode") == 1.0
    assert ngram.rouge(pred, ref, tokenize="unicode")["rouge1"] == 1.0
    # longbench + unicode: jieba words [北京, 是, 中国, 的, 首都] in both
    assert ngram.f1(pred, ref, "longbench", "unicode") == 1.0
    assert ngram.rouge(pred, ref, "longbench", "unicode")["rouge1"] > 0.5


def test_plain_f1_on_mixed_text_is_leval_f1():
    # "gdp增长了" is one token for L-Eval (whitespace split, ASCII punctuation only): shared {gdp增长了} -> P = 1/2, R = 1/1
    assert ngram.f1("GDP增长了 很多。", "gdp增长了") == pytest.approx(2 / 3)
    # the full-width stop "。" is not ASCII punctuation, so it stays part of its word: nothing shared
    assert ngram.f1("增长。", "增长") == 0.0


def test_unicode_tokens_split_cjk_from_other_letters():
    from ctxeval.metrics.ngram import _UnicodeTokenizer

    tokens = _UnicodeTokenizer().tokenize("GDP增长abc北京 Москва_x, café 42")
    assert tokens == ["gdp", "增", "长", "abc", "北", "京", "москва", "x", "café", "42"]
    # on ASCII text it is rouge-score's own tokenizer
    from rouge_score import tokenize

    text = "It's 5 o'clock: the staff_room (B-12) was clean!"
    assert _UnicodeTokenizer().tokenize(text) == tokenize.tokenize(text, None)


def test_other_scripts_use_unicode_words():
    s = ngram.rouge("Москва столица России", "Столица России Москва", tokenize="unicode")
    assert s["rouge1"] == 1.0 and s["rougeL"] == pytest.approx(2 / 3)
    # rouge-score itself keeps only [a-z0-9]: Cyrillic vanishes
    assert ngram.rouge("Москва столица России", "Столица России Москва")["rouge1"] == 0.0


def test_script_detection_keeps_english_rows_plain():
    assert ngram.script("The α parameter of the model is 0.5") == "latin"
    assert ngram.script("北京是中国的首都") == "cjk"
    assert ngram.script("Москва столица") == "other"
    assert ngram.row_script("English answer", "北京是中国的首都") == "cjk"


def test_word_count():
    assert ngram.word_count("The staff are  friendly.\nVery clean") == 6
    assert ngram.word_count("北京是中国的首都。 GDP 很高") == 3  # L-Eval: len(split())
    # unicode, CJK text: one word per character, stand-alone punctuation not counted, other words counted
    assert ngram.word_count("北京是中国的首都。 GDP 很高", "unicode") == 8 + 1 + 2
    assert length_difference("北京是中国的首都", ["北京 首都"]) == -1
    assert length_difference("北京是中国的首都", ["北京 首都"], "unicode") == 8 - 4


# ---------------------------------------------------------------- length instruction, ΔL


def test_length_instruction_wordings():
    ref = "The staff are friendly and exceptional."
    assert length_instruction(ref) == "The suggested output length is around 6 words."
    assert add_length_instruction("Summarize.", ref, "answer-with") == "Summarize. \nAnswer this question with 6 words."
    # the paper's wording (L-Eval Section 4.1: "We need a 50-word summary")
    assert add_length_instruction("Summarize.", ref, "paper") == "Summarize. We need a 6-word summary."
    assert leval_prompt("DOC", "Summarize.", ref, "paper").endswith("Instruction: Summarize. We need a 6-word summary. Output: ")
    prompt = leval_prompt("DOC", "Summarize.", ref)
    assert prompt.endswith("Document is as follows. DOC Instruction: Summarize. The suggested output length is around 6 words. Output: ")
    assert leval_prompt("DOC", "Q?", None, None).endswith("Instruction: Q? Output: ")


def test_length_difference():
    assert length_difference("one two three four", ["a b"]) == 2
    assert length_difference("one", ["a b c", "a"]) == -1  # mean reference length 2


# ---------------------------------------------------------------- exam rules


@pytest.mark.parametrize(
    "output,multiple,expected",
    [
        ("B", False, "B"),
        ("(D)", False, "D"),
        ("The answer is C. because", False, "C"),  # first capital A-D anywhere ("T" is not one)
        ("I think so", False, "A"),  # nothing readable: L-Eval's guess "A"
        ("   ", False, "None"),  # empty: never correct
        ("BC", True, "BC"),  # a substring of "ABCD" is returned as is
        ("CA and more", True, "AC"),  # leading run of letters, sorted
        ("A. foo", True, "A"),
        ("A, C.", True, "AC"),  # letters standing alone before space/"."/")"
        ("A, C", True, "A"),  # L-Eval quirk: the final "C" has nothing after it, so it is not read
        ("Options B) and D) are right. Question 2: A)", True, "BD"),  # stops at "Question"
        ("xxBDyy", True, "BD"),  # no stand-alone letters: first run of A-D
    ],
)
def test_choice_prediction(output, multiple, expected):
    assert exam.choice_prediction(output, multiple) == expected


def test_choice_reference():
    assert exam.choice_reference("(B) Their subconscious knew") == "B"
    assert exam.choice_reference("AC") == "AC"
    assert exam.choice_reference("unknown") == "A"


@pytest.mark.parametrize(
    "prediction,reference,expected",
    [
        ("AC", "AC", 1.0),
        ("A", "AC", 0.25),  # partial credit: the prediction's letters are a subset of the reference's
        ("AB", "AC", 0.0),
        ("AB", "BA", 0.25),  # em.py compares strings first, then letter sets: same set, other order
        ("", "AC", 0.25),  # em.py alone: the empty set is a subset (the task rules never pass "" on)
        ("None", "A", 0.0),
        ("18", "18", 1.0),
        ("18.0", "18", 1.0),  # numbers compared as numbers
        ("", "18", 0.0),
        ("The topic was The Role Of Art.", "the role of art", 1.0),  # containment, case and spaces ignored
        ("art", "the role of art", 0.0),
    ],
)
def test_exact_match(prediction, reference, expected):
    assert exam.exact_match(prediction, reference) == expected


def test_math_answer():
    assert exam.math_answer("So she makes 9 * 2 = $18.\nThe answer is $1,250.50 dollars") == "1250"
    assert exam.math_answer("She has 3 apples and 4 pears, total 7 fruits.\n\nLater 99") == "7"
    assert exam.math_answer("no number") == ""


def test_code_rules():
    assert exam.code_reference("[6, 15]") == "[6 15]"
    assert exam.code_reference("[[1 2]\n [3 4]]") == "[[1 2][3 4]]"
    out = "The function returns a list. Therefore the final output is [6, 15] and more text here"
    # "is" deleted everywhere, window of len(ref)+3 = 5 words after "the final output"
    assert exam.code_prediction(out, "[6 15]") == " [6 15] and more"
    assert exam.exact_match(exam.code_prediction(out, "[6 15]"), exam.code_reference("[6 15]")) == 1.0
    assert exam.code_prediction("first second third fourth fifth sixth", "x") == "third fourth fifth sixth"


def test_sci_fi_rules():
    assert exam.judge_reference("True [fact: False]") == ("true", "false")
    assert exam.judge_prediction("Yes, it is true. [fact: It's false.]") == ("true", "false")
    assert exam.judge_prediction("Unclear. [fact: maybe]") == ("<error>", "<error>")
    score = exam.exam_score("sci_fi", ["True [fact: True]", "False [fact: False]"], ["True [fact: False]"] * 2, [0, 1])
    assert score == pytest.approx((50 + 50) / 2)


def test_topic_retrieval_averages_the_three_positions():
    outs = ["t1", "x", "t3", "t1", "t2", "t3", "t1", "t2", "x"]
    refs = ["t1", "t2", "t3"] * 3
    # first topic 3/3, second 2/3, third 2/3 -> mean of the three group scores
    got = exam.exam_score("topic_retrieval_longchat", outs, refs, list(range(9)))
    assert got == pytest.approx((100 + 200 / 3 + 200 / 3) / 3)


def test_empty_choice_output_scores_zero_through_the_task_rules():
    # auto_eval.py (since 2024-07-09) maps an empty or blank output to "None" before em.py: 0, not 0.25
    assert exam.exam_score("quality", ["", " \n"], ["B", "(C) text"], [0, 1]) == 0.0
    assert exam.exam_score("coursera", [""], ["AC"], [0]) == 0.0


def test_exam_dispatch_by_task_name():
    # coursera reads several options, quality only the first
    assert exam.exam_score("coursera", ["AC"], ["AC"], [0]) == 100.0
    assert exam.exam_score("quality", ["(C) and (A)"], ["(C) text"], [0]) == 100.0
    assert exam.exam_score("coursera", ["A"], ["AC"], [0]) == 25.0
    assert exam.exam_score("gsm100", ["The answer is 18."], ["Janet... The answer is 18"], [0]) == 100.0
