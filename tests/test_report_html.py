"""The HTML report, opened from disk in a real headless Chromium (Debian's /usr/bin/chromium via
Playwright): what a user sees must be what records.parquet holds, and hostile text must stay text."""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ctxeval import api
from ctxeval.metrics.keytokens import key_token_mask
from ctxeval.results.records import read_records
from ctxeval.explorer.data import load_runs
from ctxeval.commands.compare import compare_models
from ctxeval.explorer.pairs import all_pairs
from ctxeval.render.page import script_json

from .conftest import run_cli
from .synthetic_runs import VOCAB, XSS, synthetic_piece, write_gain_run, write_run

CHROMIUM = os.environ.get("CTXEVAL_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"]
HOSTILE_MODEL = '<script>alert(1)</script>" onmouseover="alert(1) {{ }}'


# ---- the colour specification of docs/report.md, written independently of explorer.js ----
def mix(a, b, t):
    return tuple(round(x + (y - x) * t) for x, y in zip(a, b))


WHITE, RED, BLUE, NA = (255, 255, 255), (178, 24, 43), (33, 102, 172), (221, 221, 221)


def expected_colour(mode: str, v: float) -> tuple[int, int, int]:
    if not math.isfinite(v):
        return NA
    if mode == "logprob":
        return mix(WHITE, (220, 50, 47), min(1.0, max(0.0, -v / 10)))
    if mode == "rank":
        return [(140, 220, 140), (200, 240, 160), (255, 236, 140), (255, 170, 140), (210, 160, 230)][0 if v == 1 else 1 if v <= 10 else 2 if v <= 100 else 3 if v <= 1000 else 4]
    if mode == "rel":
        return mix(WHITE, (255, 140, 0), 1 - min(1.0, max(0.0, v)))
    if mode in ("gain", "diff"):
        t = min(1.0, max(-1.0, v / 4))
        up, down = (BLUE, RED) if mode == "gain" else (RED, BLUE)
        return mix(WHITE, up, t) if t >= 0 else mix(WHITE, down, -t)
    if mode == "key":
        return (255, 215, 0) if v else WHITE
    raise AssertionError(mode)


def visible(text: str) -> str:
    out = text.replace(" ", "␣").replace("\t", "⇥").replace("\r", "␍").replace("\n", "⏎")
    return out or "∅"


def percent(p: float) -> str:
    """docs/report.md's probability format: 1 decimal from 10 %, 2 from 0.1 %, 2 significant
    digits from 0.001 %, below that `<0.001 %`."""
    v = 100 * p
    return (f"{v:.1f}" if v >= 10 else f"{v:.2f}" if v >= 0.1 else f"{v:#.2g}" if v >= 0.001 else "<0.001" if v > 0 else "0") + " %"


def rgb(css: str) -> tuple[int, int, int]:
    return tuple(int(x) for x in css[css.index("(") + 1 : css.index(")")].split(",")[:3])


# ---- fixtures ----
@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    a = write_run(root / "a", HOSTILE_MODEL, [8, 16, 32], 10, repeats=3)
    b = write_run(root / "b", "tiny-b", [8, 16, 32], 10, repeats=3, shift=0.3)
    gain = write_gain_run(root / "gain", "tiny-gain", summarise=True)
    out = api.report([a, b, gain], out=root / "report.html")
    return {"a": a, "b": b, "gain": gain, "html": out, "root": root}


@pytest.fixture(scope="module")
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:  # pragma: no cover - the test extra installs it
        pytest.skip(f"BROWSER TESTS SKIPPED: the playwright package is missing ({exc}); install the test extra")
    if not Path(CHROMIUM).exists():
        pytest.skip(f"BROWSER TESTS SKIPPED: no Chromium at {CHROMIUM}; scripts/test.sh installs Debian's chromium (apt-get install chromium)")
    profile = tempfile.mkdtemp(prefix="ctxeval-chromium-")
    with sync_playwright() as p:
        try:
            context = p.chromium.launch_persistent_context(profile, executable_path=CHROMIUM, headless=True, args=ARGS, viewport={"width": 1400, "height": 1000})
        except Exception as exc:  # noqa: BLE001 - any launch failure means no browser here
            pytest.skip(f"BROWSER TESTS SKIPPED: Chromium at {CHROMIUM} failed to start: {exc}")
        yield context
        context.close()
    shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture
def page(browser, runs):
    """The report opened from disk, with console errors, page errors and dialogs collected."""
    page = browser.new_page()
    events = {"errors": [], "dialogs": []}
    page.on("console", lambda m: events["errors"].append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: events["errors"].append(str(e)))

    def on_dialog(dialog):
        events["dialogs"].append(dialog.message)
        dialog.dismiss()

    page.on("dialog", on_dialog)
    page.goto(runs["html"].as_uri())
    page.wait_for_function("window.ctxevalReport !== undefined")
    page.events = events
    yield page
    assert events["errors"] == [], events["errors"]
    assert events["dialogs"] == [], events["dialogs"]
    page.close()


def arm_records(run_dir: Path, method: str | None = None) -> pd.DataFrame:
    r = read_records(run_dir)
    return r[r["method"] == method].sort_values("target_pos", kind="stable").reset_index(drop=True) if method else r


def token_colours(page) -> list[tuple[int, int, int]]:
    return [rgb(c) for c in page.eval_on_selector_all("#tokens .tok", "els => els.map(e => getComputedStyle(e).backgroundColor)")]


def select_window(page, arm: int, window: int) -> None:
    page.evaluate(f"window.ctxevalReport.selectWindow({arm}, {window})")


# ---- no browser needed ----
def test_script_json_cannot_close_its_script_element():
    value = {"t": "</script><script>alert(1)</script> <!-- & \u2028\u2029 {{ }}"}
    encoded = str(script_json(value))
    assert "<" not in encoded and ">" not in encoded and "&" not in encoded and "\u2028" not in encoded and "\u2029" not in encoded
    assert json.loads(encoded) == value


def test_token_differences_average_to_compares_delta(runs, tmp_path):
    """Δ per token (log p_A − log p_B) averaged over every paired token is compare's Δ log-NLL
    (its windows are all paired here, so the token-weighted mean of window deltas is the token
    mean), and the pair's numbers are those `ctxeval compare` writes."""
    _, arms = load_runs([runs["a"], runs["b"]])
    (pair,) = all_pairs(arms, compare_models)
    assert np.isfinite(pair.delta).all()
    compared = api.compare(runs["a"], runs["b"], out=tmp_path / "cmp").report
    assert pair.delta.mean() == pytest.approx(compared["primary_metric"]["delta_log_nll"]["estimate"], abs=1e-12)
    for key in ("primary_metric", "secondary_metrics", "by_length", "paired_windows"):
        assert pair.comparison.report[key] == compared[key]


def test_the_ratio_per_length_is_the_token_mean_of_that_lengths_differences(runs):
    """Each length's ratio B/A (compare's `by_length`, the report's chart) against an independent
    computation from the records: exp of the mean over that length's tokens of log p_A − log p_B
    (the runs score the same targets in every window, so the token-weighted window mean is the
    token mean)."""
    _, arms = load_runs([runs["a"], runs["b"]])
    (pair,) = all_pairs(arms, compare_models)
    a, b = read_records(runs["a"]), read_records(runs["b"])
    rows = pair.by_length
    assert rows["nominal_len"].tolist() == [8, 16, 32] and rows["windows"].tolist() == [3, 3, 3]
    for length, ratio, lo, hi in zip(rows["nominal_len"], rows["ratio"], rows["lo"], rows["hi"]):
        la, lb = a[a["nominal_len"] == length]["logprob"].to_numpy(), b[b["nominal_len"] == length]["logprob"].to_numpy()
        assert ratio == pytest.approx(math.exp(np.mean(la - lb)), rel=1e-12) and lo <= ratio <= hi


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.attributes = [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attributes += [name for name, _ in attrs]


def test_report_html_holds_no_raw_hostile_text(runs):
    """Parsed as a browser's tokenizer would: no injected element or attribute anywhere."""
    html = runs["html"].read_text()
    assert "<script>alert(1)" not in html
    tags = _Tags()
    tags.feed(html)
    assert tags.tags.count("script") == 2  # the data block and the explorer, nothing else
    assert "onmouseover" not in tags.attributes
    assert "http://" not in html.replace("http://www.w3.org/2000/svg", "") and "https://" not in html  # offline: no CDN


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["report", "/nonexistent/run"], "is not a directory"),
        (["report", "{tmp}"], "is not a ctxeval output folder"),
        (["report", "{a}", "--out", "{tmp}"], "is a directory"),
        (["report", "{a}", "--top-k-shown", "-1"], "--top-k-shown"),
    ],
)
def test_bad_input_ends_with_one_line_and_exit_code_2(runs, tmp_path, args, message):
    args = [x.format(tmp=tmp_path, a=runs["a"]) for x in args]
    result = run_cli(*args, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and message in result.stderr


def test_incomplete_run_is_refused(runs, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(runs["a"], broken)
    manifest = json.loads((broken / "manifest.json").read_text())
    (broken / "manifest.json").write_text(json.dumps(manifest | {"status": "running"}))
    result = run_cli("report", str(broken), "--out", str(tmp_path / "r.html"))
    assert result.returncode == 2 and "not complete" in result.stderr
    assert not (tmp_path / "r.html").exists()


# ---- in the browser ----
def test_hostile_text_shows_literally_and_runs_nothing(page):
    texts = page.eval_on_selector_all("#tokens .tok", "els => els.slice(0, 4).map(e => e.textContent)")
    assert texts == [visible(x) for x in XSS]
    assert HOSTILE_MODEL in page.inner_text("#runs")
    assert HOSTILE_MODEL in page.inner_text("#windows")
    assert page.evaluate("document.querySelectorAll('script').length") == 2
    assert page.evaluate("document.querySelectorAll('[onmouseover]').length") == 0
    page.hover("#tokens .tok[data-i='1']")  # the attribute break-out token
    assert page.events["dialogs"] == []


def test_hovering_a_token_shows_what_the_records_hold(page, runs):
    records = arm_records(runs["a"])
    for i in (0, 5, 9):
        page.hover(f"#tokens .tok[data-i='{i}']")
        row = records.iloc[i]
        assert page.is_visible("#card")
        assert page.inner_text("#card-id") == str(row["target_id"])
        assert page.text_content("#card-token") == visible(row["target_text"])
        assert page.inner_text("#card-logprob") == f"{row['logprob']:.3f}"
        assert page.inner_text("#card-prob") == percent(math.exp(row["logprob"]))
        assert page.inner_text("#card-rank") == str(row["rank"])
        assert page.inner_text("#card-ctx") == str(row["context_len"])
        assert page.inner_text("#card-greedy").endswith(f"(id {row['greedy_id']})")
        items = page.eval_on_selector_all("#card-topk li", "els => els.map(e => [Number(e.dataset.id), e.textContent])")
        assert [x[0] for x in items] == list(row["topk_ids"])
        for (token_id, text), lp in zip(items, row["topk_logprobs"]):
            # every alternative as its text, also the ids that never occur in the text (from pieces.parquet)
            assert text == f"{visible(synthetic_piece(token_id).decode())}  {percent(math.exp(lp))}  (log p {float(np.float32(lp)):.3f}, id {token_id})"


def test_alternatives_outside_the_text_show_their_strings(page, runs):
    """Top-k ids that never occur in the text (ids >= len(VOCAB)) show their pieces, not `#id`."""
    records = arm_records(runs["a"])
    outside = [(i, j) for i in range(10) for j, t in enumerate(records.iloc[i]["topk_ids"]) if t >= len(VOCAB)]
    assert outside, "the synthetic run should hold alternatives outside the text"
    for i, j in outside[:3]:
        page.hover(f"#tokens .tok[data-i='{i}']")
        text = page.eval_on_selector_all("#card-topk li", "els => els.map(e => e.textContent)")[j]
        token_id = records.iloc[i]["topk_ids"][j]
        assert text.startswith(f"␣w{token_id}  ") and "#" not in text


def test_card_numbers_are_formatted_for_people(page, runs):
    """Rank mode shows the rank as an integer with its GLTR bucket (not `122.0000`); the
    probability relative to the top-1 as a percentage."""
    records = arm_records(runs["a"])
    page.select_option("#mode", "rank")
    buckets = {1: "1", 10: "≤10", 100: "≤100", 1000: "≤1000"}
    for i in range(10):
        page.hover(f"#tokens .tok[data-i='{i}']")
        rank = int(records.iloc[i]["rank"])
        bucket = next((label for top, label in buckets.items() if rank <= top), ">1000")
        assert page.inner_text("#card-mode") == f"{rank} (bucket {bucket})"
    page.select_option("#mode", "rel")
    row = records.iloc[2]
    page.hover("#tokens .tok[data-i='2']")
    top1 = max(float(np.float32(row["topk_logprobs"][0])), row["logprob"])
    assert page.inner_text("#card-mode") == percent(math.exp(row["logprob"] - top1))


@pytest.mark.parametrize("mode", ["logprob", "rank", "rel"])
def test_colour_modes_follow_the_specification(page, runs, mode):
    records = arm_records(runs["a"])
    window = records[records["window_id"] == "L8-r0"]
    page.select_option("#mode", mode)
    values = {
        "logprob": window["logprob"].to_numpy(),
        "rank": window["rank"].to_numpy(dtype=float),
        "rel": np.exp(window["logprob"].to_numpy() - np.maximum([lp[0] for lp in window["topk_logprobs"]], window["logprob"].to_numpy())),
    }[mode]
    assert token_colours(page) == [expected_colour(mode, v) for v in values]


def test_context_gain_and_key_token_modes(page, runs):
    records = read_records(runs["gain"])
    long_ = records[records["method"] == "chunked"].set_index("target_pos")
    short = records[records["method"] == "truncated"].set_index("target_pos")
    gain = (long_["logprob"] - short["logprob"].reindex(long_.index).fillna(long_["logprob"])).to_numpy()
    key = key_token_mask(long_["logprob"].to_numpy(), long_["logprob"].to_numpy() - gain)
    assert key.any(), "the synthetic run should hold key tokens"
    gain_arm = 2
    n_windows = len(long_) // 32
    for w in range(n_windows):
        select_window(page, gain_arm, w)
        rows = slice(32 * w, 32 * (w + 1))
        page.select_option("#mode", "gain")
        assert token_colours(page) == [expected_colour("gain", float(np.float32(g))) for g in gain[rows]]
        page.select_option("#mode", "key")
        assert token_colours(page) == [expected_colour("key", k) for k in key[rows]]


def test_difference_mode_matches_compares_pairing(page, runs):
    a, b = arm_records(runs["a"]), arm_records(runs["b"])
    merged = a.merge(b, on=["window_id", "char_start", "char_end"], suffixes=("_a", "_b"))
    page.select_option("#mode", "diff")
    for w, window_id in enumerate(dict.fromkeys(a["window_id"])):
        select_window(page, 0, w)
        delta = merged[merged["window_id"] == window_id]
        expected = delta["logprob_a"] - delta["logprob_b"]
        assert token_colours(page) == [expected_colour("diff", float(np.float32(d))) for d in expected]
    select_window(page, 0, 0)
    page.hover("#tokens .tok[data-i='3']")
    first = merged[merged["window_id"] == "L8-r0"].iloc[3]
    shown, unit = page.inner_text("#card-mode").split()
    assert unit == "nats" and float(shown) == pytest.approx(first["logprob_a"] - first["logprob_b"], abs=5e-4)  # float32 on the page, 3 decimals
    select_window(page, 1, 0)  # arm B has no A−B of its own: grey
    assert set(token_colours(page)) == {NA}


def test_keyboard_navigation_and_worst_tokens(page, runs):
    records = arm_records(runs["a"])
    page.focus("#tokens .tok[data-i='0']")
    page.keyboard.press("ArrowRight")
    assert page.evaluate("document.activeElement.dataset.i") == "1"
    page.keyboard.press("End")
    assert page.evaluate("document.activeElement.dataset.i") == "9"
    page.keyboard.press("w")
    assert int(page.evaluate("document.activeElement.dataset.i")) == int(records.iloc[:10]["logprob"].idxmin())
    assert page.is_visible("#card")
    page.keyboard.press("]")
    assert "L8-r1" in page.inner_text("#window-title")
    worst = page.eval_on_selector_all("#worst button", "els => els.map(e => Number(e.dataset.i))")
    window = records[records["window_id"] == "L8-r1"]
    assert worst == window["logprob"].sort_values(kind="stable").index.tolist()[:10]


def test_filters_and_screenshot(page, runs, tmp_path):
    page.select_option("#f-len", "16")
    lengths = page.eval_on_selector_all("#windows tbody tr", "els => els.map(e => e.children[2].textContent)")
    assert lengths and set(lengths) == {"16"}
    page.select_option("#f-len", "")
    page.fill("#f-text", " dog")
    n_dog = len(page.query_selector_all("#windows tbody tr"))
    all_windows = pd.concat([arm_records(runs["a"]), arm_records(runs["b"]), arm_records(runs["gain"], "chunked")])
    expected = sum(" dog" in "".join(g["target_text"]) for _, g in all_windows.groupby(["model", "window_id"]))
    assert n_dog == expected
    page.fill("#f-text", "")
    page.hover("#tokens .tok[data-i='4']")
    shot = Path(os.environ.get("CTXEVAL_TEST_ARTIFACTS", tmp_path)) / "report-explorer.png"
    shot.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(shot), full_page=True)
    print(f"screenshot: {shot}")
    assert shot.stat().st_size > 10_000


# ---- the report of `ctxeval diff` (tiny random-weight transformers models, no GGUF) ----
KL_RED = (178, 24, 43)


def expected_kl_colour(kl: float) -> tuple[int, int, int]:
    """docs/diff.md's scale: white at or below 1e-4 nats, full red from 10 nats, log10 between."""
    t = 0.0 if kl <= 0 else min(1.0, max(0.0, (math.log10(kl) + 4) / 5))
    return mix(WHITE, KL_RED, t)


@pytest.fixture(scope="module")
def diff_run(tmp_path_factory):
    pytest.importorskip("transformers")
    from ctxeval.data.texts import load_text
    from ctxeval.pieces import read_pieces
    from tests.hf_tiny import tiny_llama_dir

    root, text = tmp_path_factory.mktemp("diff"), load_text("demo").content[:20000]
    a = tiny_llama_dir(root / "a", text, seed=0, max_positions=256)
    b = tiny_llama_dir(root / "b", text, seed=1, max_positions=256)
    result = api.diff(f"hf:{a}", f"hf:{b}", ["demo"], window=48, max_tokens=96, top_k=5, out=root / "d", bootstrap=api.Bootstrap(replicates=200))
    records = pd.read_parquet(root / "d" / "diff_records.parquet")
    return {"html": result.paths()["html"], "records": records, "pieces": read_pieces(root / "d", "hf:a")}


@pytest.fixture
def diff_page(browser, diff_run):
    page = browser.new_page()
    errors = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(diff_run["html"].as_uri())
    page.wait_for_function("window.ctxevalDiff !== undefined")
    yield page
    assert errors == [], errors
    page.close()


def test_diff_tokens_are_coloured_by_kl_and_flips_marked(diff_page, diff_run):
    records = diff_run["records"]
    for w, window_id in enumerate(dict.fromkeys(records["window_id"])):
        diff_page.evaluate(f"window.ctxevalDiff.selectWindow({w})")
        rows = records[records["window_id"] == window_id]
        assert token_colours(diff_page) == [expected_kl_colour(kl) for kl in rows["kl"]]
        flips = diff_page.eval_on_selector_all("#tokens .tok", "els => els.map(e => e.classList.contains('flip'))")
        assert flips == (~rows["same_top1"]).tolist()
    assert "top-1 flipped" in diff_page.inner_text("#legend") and "≥10" in diff_page.inner_text("#legend")


def test_diff_keyboard_moves_through_tokens_worst_kl_and_windows(diff_page, diff_run):
    """The diff page's keys (common.js `wireWindowKeys`, as on the report page): → and End move
    in the open window, w goes to its largest KL, ] and [ open the next and previous window."""
    records = diff_run["records"]
    windows = list(dict.fromkeys(records["window_id"]))
    first = records[records["window_id"] == windows[0]]

    def active() -> int:
        return int(diff_page.evaluate("document.activeElement.dataset.i"))

    diff_page.focus("#tokens .tok[data-i='0']")
    diff_page.keyboard.press("ArrowRight")
    assert active() == 1
    diff_page.keyboard.press("End")
    assert active() == len(first) - 1
    diff_page.keyboard.press("w")
    assert active() == int(np.argmax(first["kl"].to_numpy())) and diff_page.is_visible("#card")
    diff_page.keyboard.press("]")
    assert windows[1] in diff_page.inner_text("#window-title") and active() == len(first)
    diff_page.keyboard.press("[")
    assert windows[0] in diff_page.inner_text("#window-title") and active() == 0


def test_diff_card_shows_both_models_top_k_side_by_side(diff_page, diff_run):
    records, pieces = diff_run["records"], diff_run["pieces"]
    for i, use_click in ((0, False), (7, True), (30, False)):
        diff_page.keyboard.press("Escape")
        if use_click:
            diff_page.click(f"#tokens .tok[data-i='{i}']")
            assert diff_page.evaluate("document.activeElement.dataset.i") == str(i)
        else:
            diff_page.hover(f"#tokens .tok[data-i='{i}']")
        assert diff_page.is_visible("#card")
        row = records.iloc[i]
        assert diff_page.text_content("#card-token") == visible(pieces[row["target_id"]])
        assert diff_page.inner_text("#card-id") == str(row["target_id"])
        assert diff_page.inner_text("#card-ctx") == str(row["context_len"])
        assert diff_page.inner_text("#card-kl") == f"{row['kl']:.6f} nats"
        assert diff_page.inner_text("#card-dp") == f"{row['delta_p']:+.6f}"
        for side in ("ref", "cand"):
            lp = row[f"{side}_logprob"]
            assert diff_page.inner_text(f"#card-{side}-logprob") == f"{lp:.3f}"
            assert diff_page.inner_text(f"#card-{side}-prob") == percent(math.exp(lp))
            assert diff_page.inner_text(f"#card-{side}-rank") == str(row[f"{side}_rank"])
            top1 = row[f"{side}_top1"]
            assert diff_page.text_content(f"#card-{side}-top1") == f"{visible(pieces[top1])} (id {top1})"
            items = diff_page.eval_on_selector_all(f"#card-{side}-topk li", "els => els.map(e => [Number(e.dataset.id), e.textContent])")
            assert [x[0] for x in items] == list(row[f"{side}_topk_ids"])
            for (token_id, text), tlp in zip(items, row[f"{side}_topk_logprobs"]):
                assert text == f"{visible(pieces[token_id])} {percent(math.exp(float(tlp)))}"
        # the two columns sit side by side: REF's list left of CAND's, on the same line
        ref_box, cand_box = (diff_page.locator(f"#card-{s}-topk").bounding_box() for s in ("ref", "cand"))
        assert ref_box["x"] + ref_box["width"] <= cand_box["x"] and abs(ref_box["y"] - cand_box["y"]) < 1


def test_compare_headline_formats_estimate_and_bounds_alike(tmp_path):
    """A ratio 1.0077 with CI [1.0004, 1.0164] reads "1.0077 [1.0004, 1.0164]" (4 decimals for
    both, not "[1, 1.016]"); a rank-score difference +0.0023 with CI [-0.0000518, 0.005293] reads
    "+0.0023 [-0.0001, +0.0053]" (signed, 4 decimals, not "[-5.18e-05, 0.005293]")."""
    from ctxeval.render.views import compare_view
    from ctxeval.results.comparison import Comparison

    level = {"se": None, "n": 40, "confidence": 0.9, "method": "BCa", "reason": ""}
    report = {"runs": {"a": "A", "b": "B"}, "profile": "dev",
              "primary_metric": {"ratio": {"estimate": 1.00771, "low": 1.00041, "high": 1.01638, **level}},
              "secondary_metrics": {"avg": {"difference": {"estimate": 0.00231, "low": -5.18e-05, "high": 0.005293, **level}}}}
    view, arms = compare_view(Comparison(report, tmp_path, []), "cmp", 0)
    headline = view.headline
    assert [(h["value"], h["interval"]) for h in headline] == [("1.0077", "[1.0004, 1.0164]"), ("+0.0023", "[-0.0001, +0.0053]")]
    assert view.interval_header == "90 % BCa interval"  # the level and method the rows hold


@pytest.mark.parametrize(("method", "stride", "shown"), [("chunked", 0, "chunked window 512"), ("fixed", 0, "fixed window 512"),
                                                         ("sliding", 128, "sliding window 512 stride 128")])
def test_score_header_names_a_stride_only_for_sliding_windows(method, stride, shown):
    """Chunked and fixed windows have no stride (their config records 0): the header shows none."""
    from ctxeval.render.views import header

    manifest = {"run_id": "r", "models": [], "config": {"method": method, "window": 512, "stride": stride}}
    assert header(manifest, "score")["windows"] == shown


@pytest.mark.model
def test_effective_length_curves_l_star_and_retrieval_show_together(browser, tmp_path):
    """An effective-length run (a model and its truncation control) and a retrieval run sized in
    tokens, in one report: the headline holds each L* and the retrieval effective length, the
    chart draws one curve per model with its band and names its L*, and nothing errs."""
    control = "gemma-3-270m?max_context=32"
    el = api.effective_length(["demo"], models=("gemma-3-270m", control), lengths=(16, 32, 64, 128), starts=3, targets=8, unit="span",
                              replicates=200, out=tmp_path / "el")
    retrieval = api.retrieval(tokens=(256, 512), depths=(0.0, 1.0), samples=1, out=tmp_path / "retrieval")
    html = api.report([el.run_dir, retrieval.run_dir], out=tmp_path / "report.html")
    page = browser.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(html.as_uri())
    page.wait_for_function("window.ctxevalReport !== undefined")
    rows = page.eval_on_selector_all("tr", "els => els.map(e => e.innerText)")
    star = el.effective_length(control)
    assert any(f"L* {control}" in r and f"{star['value']} [{star['low']}, {star['high']}]" in r for r in rows), rows
    assert any("L* gemma-3-270m" in r for r in rows) and any("retrieval effective length gemma-3-270m" in r for r in rows)
    titles = page.eval_on_selector_all("svg.chart", "els => els.map(e => e.querySelector('title').textContent)")
    chart = next(i for i, t in enumerate(titles) if "log p gain over the shortest length" in t)
    text = page.eval_on_selector_all("svg.chart", f"els => els[{chart}].textContent")
    assert f"{control} · L* {star['value']}" in text and "gemma-3-270m · L* " in text
    assert page.eval_on_selector_all("svg.chart", f"els => els[{chart}].querySelectorAll('polyline').length") >= 2
    page.screenshot(path=str(tmp_path / "effective_length.png"), full_page=True)
    page.close()
    assert errors == [], errors


@pytest.mark.parametrize("which", ["report", "diff"])
def test_a_window_row_opens_on_click_and_on_enter(which, request):
    """Both pages list their windows with the same pager (common.js `renderPage`): a row opens
    its window on a click and on Enter, and the open one is marked."""
    page = request.getfixturevalue("page" if which == "report" else "diff_page")

    def selected() -> list[bool]:
        return page.eval_on_selector_all("#windows tbody tr", "els => els.map(e => e.classList.contains('selected'))")

    n = len(selected())
    assert n >= 2 and page.inner_text("#w-page").startswith("windows 1–")
    page.click("#windows tbody tr:nth-child(2)")
    assert selected() == [i == 1 for i in range(n)]
    title = page.inner_text("#window-title")
    page.focus("#windows tbody tr:nth-child(1)")
    page.keyboard.press("Enter")
    assert selected() == [i == 0 for i in range(n)] and page.inner_text("#window-title") != title


# ---- charts: no text overlaps another or leaves its figure; the explorer holds every run's tokens ----
LONG_NAME = "smollm2-135m-instruct-with-a-long-model-name"


@pytest.fixture(scope="module")
def chart_runs(tmp_path_factory):
    """An effective-length run of a model with a long name and its truncation control, and a
    diff of one 1,024-token window (its last context bucket is labelled "512–1K"), on tiny
    random-weight transformers models; the report of both."""
    pytest.importorskip("transformers")
    from ctxeval.data.texts import load_text
    from tests.hf_tiny import tiny_llama_dir

    root, text = tmp_path_factory.mktemp("charts"), load_text("demo").content[:20000]
    a = tiny_llama_dir(root / LONG_NAME, text, seed=0, max_positions=1100)
    b = tiny_llama_dir(root / "b", text, seed=1, max_positions=1100)
    el = api.effective_length(["demo"], models=(f"hf:{a}", f"hf:{a}?max_context=64"), lengths=(16, 32, 64, 128, 256), starts=3, targets=8,
                              unit="span", replicates=200, out=root / "el")
    diff = api.diff(f"hf:{a}", f"hf:{b}", ["demo"], window=1024, max_tokens=1024, top_k=5, out=root / "d", bootstrap=api.Bootstrap(replicates=200))
    report = api.report([el.run_dir, diff.run_dir], out=root / "report.html")
    return {"el": el, "diff": diff, "report": report, "diff_html": diff.paths()["html"]}


# every text element of every chart: its box, the figure's box, its legend entry (-1: none)
CHART_TEXT = """svgs => svgs.map(svg => {
  const box = r => ({left: r.left, top: r.top, right: r.right, bottom: r.bottom});
  return {
    figure: box(svg.getBoundingClientRect()),
    title: svg.querySelector('title').textContent,
    series: [...svg.querySelectorAll('g.series > title')].map(t => t.textContent),
    legend: [...svg.querySelectorAll('g.legend-entry')].map(g => [...g.querySelectorAll('text')].map(t => t.textContent)),
    texts: [...svg.querySelectorAll('text')].filter(t => t.textContent.length).map(t => ({text: t.textContent, box: box(t.getBoundingClientRect())})),
  };
})"""


def chart_text_problems(page) -> list[str]:
    """What is wrong with the text of the page's charts: a text box outside its figure, two text
    boxes that intersect, a legend entry whose lines are not its series' whole label."""
    problems = []
    for chart in page.eval_on_selector_all("svg.chart", CHART_TEXT):
        fig, texts = chart["figure"], chart["texts"]
        for t in texts:
            b = t["box"]
            if b["left"] < fig["left"] - 0.5 or b["right"] > fig["right"] + 0.5 or b["top"] < fig["top"] - 0.5 or b["bottom"] > fig["bottom"] + 0.5:
                problems.append(f"{chart['title']}: {t['text']!r} leaves the figure")
        for i, s in enumerate(texts):
            for t in texts[i + 1 :]:
                a, b = s["box"], t["box"]
                if a["left"] < b["right"] and b["left"] < a["right"] and a["top"] < b["bottom"] and b["top"] < a["bottom"]:
                    problems.append(f"{chart['title']}: {s['text']!r} overlaps {t['text']!r}")
        shown = [" ".join(lines) for lines in chart["legend"]]
        if chart["series"] and shown != [" ".join(label.split()) for label in chart["series"]]:
            problems.append(f"{chart['title']}: legend {shown} is not the series {chart['series']}")
    return problems


@pytest.mark.parametrize("which", ["report", "diff_html"])
def test_chart_text_neither_overlaps_nor_is_clipped(browser, chart_runs, which, tmp_path):
    """The effective-length run's report (a long model name in its legend) and the diff's page
    (its last x label "512–1K"): in Chromium, no title, tick, axis or legend text intersects
    another or leaves its figure, and every legend entry reads its series' whole label."""
    page = browser.new_page()
    page.goto(chart_runs[which].as_uri())
    charts = page.eval_on_selector_all("svg.chart", CHART_TEXT)
    texts = [t["text"] for c in charts for t in c["texts"]]
    if which == "report":
        assert any("log p gain over the shortest length" in c["title"] for c in charts)
        assert any(f"hf:{LONG_NAME}?max_context=64 · L* " in label for c in charts for label in c["series"])
    else:
        assert "512–1K" in texts
    assert chart_text_problems(page) == []
    page.screenshot(path=str(Path(os.environ.get("CTXEVAL_TEST_ARTIFACTS", tmp_path)) / f"charts-{which}.png"), full_page=True)
    page.close()


def test_chart_text_check_finds_overlap_and_clipping(browser):
    """The check above is not vacuous: a title on its top tick, a clipped legend label and a
    half-drawn x label are each found."""
    page = browser.new_page()
    page.set_content("""<svg class="chart" viewBox="0 0 200 100" width="200" height="100"><title>t</title>
      <text x="100" y="16" text-anchor="middle">a title on the tick</text><text x="60" y="18">0.5</text>
      <g class="series"><title>a long model name · L* ≥ 1024 [64, ≥ 1024]</title></g>
      <g class="legend"><g class="legend-entry"><text x="150" y="60">a long model name · L* ≥ 1024 [64, ≥ 1024]</text></g></g>
      <text x="200" y="90" text-anchor="middle">512–1K</text></svg>""")
    problems = chart_text_problems(page)
    page.close()
    assert any("overlaps" in p for p in problems)
    assert any("'512–1K' leaves the figure" in p for p in problems)
    assert any("a long model name · L* ≥ 1024 [64, ≥ 1024]' leaves the figure" in p for p in problems)


def test_effective_length_and_diff_runs_add_their_tokens_to_the_explorer(chart_runs):
    """Each model of the effective-length run is an arm holding every record (each target at
    each length), its gain the record's log p minus the same target's at the shortest length;
    the diff adds REF's and CAND's numbers of every scored token, with REF's token texts, and
    their difference per token."""
    from ctxeval.explorer.data import arm_payload
    from ctxeval.pieces import read_pieces

    el, diff = chart_runs["el"], chart_runs["diff"]
    (_, diff_view), arms = load_runs([el.run_dir, diff.run_dir])
    records = read_records(el.run_dir)
    models = list(dict.fromkeys(records["model"]))
    assert [a.model for a in arms[:2]] == models and [a.kind for a in arms] == ["effective-length"] * 2 + ["diff"] * 2
    full = arms[0].records  # the untruncated model scores each target once per length
    assert len(full) == (records["model"] == models[0]).sum() == 5 * 3 * 8
    shortest = full[full["nominal_len"] == 16].set_index(["repeat", "target_pos"])["logprob"]
    expected = [lp - shortest[(r, p)] for lp, r, p in zip(full["logprob"], full["repeat"], full["target_pos"])]
    assert arms[0].gain == pytest.approx(expected, abs=1e-6) and (arms[0].gain[full["nominal_len"] == 16] == 0).all()
    payload = arm_payload(arms[0], 5)
    assert payload["n"] == len(full) and sorted(set(payload["windows"]["nominal_len"])) == [16, 32, 64, 128, 256]
    diff_records = pd.read_parquet(diff.run_dir / "diff_records.parquet")
    ref, cand = arms[2], arms[3]
    assert (ref.model, cand.model) == (diff.report["ref"]["name"], diff.report["cand"]["name"])
    assert ref.records["logprob"].tolist() == diff_records["ref_logprob"].tolist() and cand.records["logprob"].tolist() == diff_records["cand_logprob"].tolist()
    assert cand.records["rank"].tolist() == diff_records["cand_rank"].tolist()
    (pair,) = diff_view.pairs  # the explorer's A − B: REF − CAND, token by token
    assert (pair.a, pair.b) == (ref, cand) and pair.delta.tolist() == (diff_records["ref_logprob"] - diff_records["cand_logprob"]).tolist()
    pieces = read_pieces(diff.run_dir, ref.model)
    vocab = arm_payload(cand, 5)["vocab"]
    assert all(vocab[str(i)] == pieces[i] for i in diff_records["target_id"].head(50))


def test_effective_length_report_pages_through_its_tokens(browser, chart_runs):
    """In the browser the report counts the runs' tokens and opens the first window of the
    effective-length run, its tokens' log p as its records hold them."""
    page = browser.new_page()
    page.goto(chart_runs["report"].as_uri())
    page.wait_for_function("window.ctxevalReport !== undefined")
    records = read_records(chart_runs["el"].run_dir)
    diff_tokens = len(pd.read_parquet(chart_runs["diff"].run_dir / "diff_records.parquet"))
    assert f"{len(records) + 2 * diff_tokens} scored tokens" in page.inner_text("header")
    assert "effective-length" in page.inner_text("#window-title") and "L=16" in page.inner_text("#window-title")
    first = records[(records["model"] == records["model"].iloc[0]) & (records["window_id"] == records["window_id"].iloc[0])]
    assert len(page.query_selector_all("#tokens .tok")) == len(first) == 8
    diff = pd.read_parquet(chart_runs["diff"].run_dir / "diff_records.parquet")
    assert page.eval_on_selector_all("#pair option", "els => els.map(e => e.textContent)") == [f"A d · {chart_runs['diff'].report['ref']['name']} − B d · {chart_runs['diff'].report['cand']['name']}"]
    page.select_option("#mode", "diff")
    select_window(page, 2, 0)  # REF's first window
    delta = (diff["ref_logprob"] - diff["cand_logprob"]).to_numpy()[:8]
    assert token_colours(page)[:8] == [expected_colour("diff", float(np.float32(v))) for v in delta]
    page.close()


def test_effective_length_figure_text_neither_overlaps_nor_is_clipped(chart_runs):
    """effective_length.png (matplotlib): every visible text — title, tick labels, axis labels,
    legend entries with the long model name — lies inside the figure and intersects no other."""
    from matplotlib.text import Text

    from ctxeval.render.figures import curves_figure

    fig = curves_figure(chart_runs["el"].summary)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    page = fig.bbox
    ticks = [(tick, axis) for ax in fig.axes for axis in (ax.xaxis, ax.yaxis) for tick in axis.get_major_ticks() + axis.get_minor_ticks()]
    # a tick outside its axis's view is not drawn (matplotlib keeps its label object, unplaced)
    drawn = [tick.label1 for tick, axis in ticks if min(axis.get_view_interval()) <= tick.get_loc() <= max(axis.get_view_interval())]
    labels = {id(tick.label1) for tick, _ in ticks} | {id(tick.label2) for tick, _ in ticks}
    texts = [t for t in fig.findobj(Text) if id(t) not in labels] + drawn
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in texts if t.get_visible() and t.get_text().strip()]
    assert any(LONG_NAME in text for text, _ in boxes) and any("gain with its band (95 % BCa)" in text for text, _ in boxes)
    outside = [text for text, b in boxes if b.x0 < page.x0 - 0.5 or b.x1 > page.x1 + 0.5 or b.y0 < page.y0 - 0.5 or b.y1 > page.y1 + 0.5]
    overlapping = [(s, t) for i, (s, a) in enumerate(boxes) for t, b in boxes[i + 1 :] if a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1]
    assert (outside, overlapping) == ([], [])


# ---- RULER runs: a --generate-share run of a model and its truncation control, and a plain run ----
@pytest.fixture(scope="module")
def ruler_report(tmp_path_factory):
    """A prediction-powered RULER run (a tiny random-weight Llama and the same model truncated
    to 256 tokens, so paired on the same prompts) and a plain run (every sample generated),
    and the report of both."""
    pytest.importorskip("transformers")
    pytest.importorskip("ppi_py")
    from ctxeval.data.texts import demo_text_path
    from tests.hf_tiny import tiny_llama_dir

    root = tmp_path_factory.mktemp("ruler")
    model = f"hf:{tiny_llama_dir(root / 'gemma-3-270m', demo_text_path().read_text()[:20000], vocab_size=512)}"
    share = api.ruler(tasks=("niah_single_1",), lengths=(512,), models=(model, f"{model}?max_context=256"), samples=12, generate_share=0.5,
                      out=root / "share")
    plain = api.ruler(tasks=("niah_single_1",), lengths=(512,), models=(model,), samples=3, out=root / "plain")
    return {"share": share, "plain": plain, "html": api.report([share.run_dir, plain.run_dir], out=root / "report.html")}


# every answer table's phrases and first cells: how many lines each is drawn on, and whether a cell clips its text
ANSWER_TEXT = """els => els.map(e => ({text: e.textContent, lines: e.getClientRects().length,
  clipped: e.tagName === 'TD' && e.scrollWidth > e.clientWidth + 1}))"""


def test_ruler_runs_show_ppi_scores_verdicts_chart_and_samples(browser, ruler_report, tmp_path):
    """The report of a --generate-share run and a plain run: the PPI++ scores and differences as
    ppi.json holds them, each cell with its interval or why it has none and what would give one,
    each difference with its verdict; the likelihood tables titled as another measure; a chart
    per run; the header counting samples; the sample explorer showing a sample as
    samples.parquet holds it. No console error, no phrase broken over two lines, no cell
    clipping its text, no chart text overlapping or leaving its figure."""
    share, plain = ruler_report["share"], ruler_report["plain"]
    page = browser.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(ruler_report["html"].as_uri())
    page.wait_for_function("window.ctxevalSamples !== undefined")
    n = len(share.samples) + len(plain.samples)
    assert page.inner_text("header .sub").startswith(f"2 run(s), {n} RULER samples.")
    assert page.query_selector("#explorer") is None  # no token records: no empty token explorer
    answers = page.inner_text("#answers")
    assert "RULER, prediction-powered (PPI++)" in answers and "another measure" in answers
    for _, row in share.ppi.iterrows():
        shown = f"{row['score']:.1f} [" if row["score.low"] == row["score.low"] else f"{row['score']:.1f}, no interval: {row['score.reason']}"
        assert shown in answers, shown
        if row["score.low"] != row["score.low"]:
            assert "would give one" in answers and "--samples" in answers
    ((_, difference),) = share.ppi_differences.iterrows()
    assert difference["diff.outcome"] in answers and f"{difference['diff']:+.1f}" in answers
    titles = page.eval_on_selector_all("svg.chart", "els => els.map(e => e.querySelector('title').textContent)")
    assert any("share: RULER niah_single_1, PPI++ score" in t for t in titles) and any("plain: RULER niah_single_1, score by generation" in t for t in titles)
    assert chart_text_problems(page) == []
    drawn = page.eval_on_selector_all("#answers .phrase, #answers td.name", ANSWER_TEXT)
    assert drawn and [d["text"] for d in drawn if d["lines"] != 1 or d["clipped"]] == []

    rows = page.eval_on_selector_all("#sample-list tbody tr", "els => els.map(e => Number(e.dataset.i))")
    assert rows == list(range(min(n, 50)))
    records = pd.concat([share.samples.assign(run="share"), plain.samples.assign(run="plain")], ignore_index=True)
    kinds = {"greedy generation": "generated", "generation path": "settled", "predicted (not drawn for generation)": "predicted"}
    for kind in ("generated", "predicted"):
        i = next(i for i, m in enumerate(records["method"]) if kinds[m] == kind)
        page.click(f"#sample-list tbody tr[data-i='{i}']")
        r = records.iloc[i]
        assert page.inner_text("#sample-title") == f"{r['run']} · {r['model']} · niah_single_1 · L=512 · sample {r['sample']} · {kind}"
        assert page.text_content("#sample-prompt") == "…" + r["prompt_tail"] and r["prompt_tail"].endswith("mentioned in the provided text is")
        assert page.text_content("#sample-answers") == ", ".join(r["answers"])
        generated = page.text_content("#sample-generated")
        assert generated == r["prediction"] if kind == "generated" else generated.startswith("predicted: not drawn for generation")
        assert page.text_content("#sample-ranks") == " ".join(str(x) for x in r["answer_ranks"]) and len(r["answer_ranks"]) == r["answer_tokens"]
        assert page.text_content("#sample-prefix") == f"the model's greedy choice follows the reference for {r['greedy_prefix']} of its {r['reference_tokens']} token(s)"
        assert page.text_content("#sample-logp").startswith(f"{r['answer_logprob']:.3f} over {r['answer_tokens']} token(s)")
    page.select_option("#s-kind", "predicted")
    shown = page.eval_on_selector_all("#sample-list tbody tr", "els => els.map(e => e.children[4].textContent)")
    assert shown and set(shown) == {"predicted"} and len(shown) == sum(m == "predicted (not drawn for generation)" for m in records["method"])
    page.screenshot(path=str(Path(os.environ.get("CTXEVAL_TEST_ARTIFACTS", tmp_path)) / "report-ruler.png"), full_page=True)
    page.close()
    assert errors == [], errors


# each table's right edge, and that of the box it scrolls in (null: none), in the page's coordinates
TABLE_EDGES = """els => els.map(t => { let box = t.parentElement;
  while (box && !['auto', 'scroll'].includes(getComputedStyle(box).overflowX)) box = box.parentElement;
  return {id: t.id || t.className, right: t.getBoundingClientRect().right, box: box ? box.getBoundingClientRect().right : null}; })"""


def test_at_1400_pixels_every_table_fits_or_scrolls_inside_its_box_and_the_sample_list_shows_every_column(browser, ruler_report):
    """The RULER report at a 1,400-pixel window: the page itself never scrolls sideways; a table
    wider than the page (long variant names) scrolls inside its own box; the sample list shows
    all its columns, "scored" and the scores included, without scrolling."""
    page = browser.new_page()
    page.goto(ruler_report["html"].as_uri())
    page.wait_for_function("window.ctxevalSamples !== undefined")
    width = page.evaluate("document.documentElement.clientWidth")
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    tables = page.eval_on_selector_all("table", TABLE_EDGES)
    assert tables and all(t["right"] <= width or (t["box"] is not None and t["box"] <= width) for t in tables), tables
    listed = next(t for t in tables if t["id"] == "sample-list")
    assert listed["right"] <= listed["box"] + 1, listed
    page.close()


def test_answer_cells_break_only_between_phrases():
    from ctxeval.render.page import phrase_list

    assert phrase_list("−30.0 [−60.3, +6.1] too few samples to tell (about 10 would settle it)") == [
        "−30.0", "[−60.3, +6.1]", "too few samples to tell", "(about 10 would settle it)"]
    assert phrase_list("≥ 1024 [128, ≥ 1024]") == ["≥ 1024", "[128, ≥ 1024]"]
    assert phrase_list("gemma-3-270m") == ["gemma-3-270m"] and phrase_list("") == [""]
