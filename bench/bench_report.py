"""The HTML report at scale: a synthetic 100K-token sweep run (written through the library's
own record writers, real schema, top-k 5), its report and a peer opened in headless Chromium.

Peer: the obvious way to look at records.parquet in a browser, `pandas.DataFrame.to_html` of
every token row (one table row per token, all rendered at load). ctxeval's report embeds the
same tokens as columnar typed arrays and renders one window at a time.

Measured per page, each in a fresh page of one Chromium (the order alternates between repeats):
file size; first contentful paint and load event (performance timing, ms from navigation
start); for ctxeval also `ctxeval-interactive` (the explorer built and the first window
drawn) and the time to open another window and to switch colour mode (in the page, ms).

Usage: python bench/bench_report.py [--tokens 100000] [--window 1000] [--repeats 3]
Prints a table with ctxeval / peer ratios. No assertion: timings depend on the machine.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ctxeval.results.records import read_records  # noqa: E402
from ctxeval.commands.compare import compare_models  # noqa: E402
from ctxeval.explorer import write_report  # noqa: E402
from tests.synthetic_runs import write_run  # noqa: E402

CHROMIUM = os.environ.get("CTXEVAL_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"]

TIMING_JS = """() => {
  const nav = performance.getEntriesByType('navigation')[0];
  const fcp = performance.getEntriesByName('first-contentful-paint')[0];
  const mark = performance.getEntriesByName('ctxeval-interactive')[0];
  return {fcp: fcp ? fcp.startTime : null, load: nav.loadEventEnd, interactive: mark ? mark.startTime : null};
}"""

INTERACTION_JS = """() => {
  const r = window.ctxevalReport, n = r.state.list.length;
  let t = performance.now();
  r.selectWindow(r.state.list[n - 1][0], r.state.list[n - 1][1]);
  const openWindow = performance.now() - t;
  const mode = document.getElementById('mode');
  t = performance.now();
  mode.value = 'rank'; mode.dispatchEvent(new Event('change'));
  const recolour = performance.now() - t;
  return {open_window: openWindow, recolour: recolour};
}"""


def measure(context, path: Path, ours: bool, timeout_ms: int) -> dict:
    """Timings of one page; for a page that does not load within `timeout_ms`, `timed_out`."""
    from playwright.sync_api import TimeoutError as PageTimeout

    page = context.new_page()
    try:
        page.goto(path.as_uri(), wait_until="load", timeout=timeout_ms)
    except PageTimeout:
        page.close()
        return {"timed_out": True}
    if ours:
        page.wait_for_function("window.ctxevalReport !== undefined", timeout=300_000)
    page.wait_for_timeout(200)  # let the paint entries land
    out = page.evaluate(TIMING_JS)
    if ours:
        out |= page.evaluate(INTERACTION_JS)
    page.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=100_000)
    parser.add_argument("--window", type=int, default=1000, help="targets per window")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=120, help="seconds a page may take to load before it counts as not loading")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    work = Path(tempfile.mkdtemp(prefix="ctxeval-bench-report-"))
    try:
        t = time.perf_counter()
        run = write_run(work / "run", "synthetic", [args.window], args.window, repeats=args.tokens // args.window, n_text_tokens=args.tokens + 2 * args.window)
        t_run = time.perf_counter() - t
        t = time.perf_counter()
        ours = write_report([run], work / "report.html", compare_models)
        t_ours = time.perf_counter() - t
        t = time.perf_counter()
        records = read_records(run)
        peer = work / "peer.html"
        peer.write_text(records.drop(columns=["topk_ids", "topk_logprobs"]).assign(topk=records["topk_ids"].map(list)).to_html(), encoding="utf-8")
        t_peer = time.perf_counter() - t
        results: dict[str, list[dict]] = {"ctxeval": [], "peer": []}
        with sync_playwright() as p:
            profile = tempfile.mkdtemp(prefix="ctxeval-chromium-")
            context = p.chromium.launch_persistent_context(profile, executable_path=CHROMIUM, headless=True, args=ARGS)
            for r in range(args.repeats):
                order = [("ctxeval", ours), ("peer", peer)]
                for name, path in order if r % 2 == 0 else order[::-1]:
                    results[name].append(measure(context, path, name == "ctxeval", int(args.timeout * 1000)))
            context.close()
            shutil.rmtree(profile, ignore_errors=True)
    finally:
        sizes = {"ctxeval": (work / "report.html").stat().st_size, "peer": (work / "peer.html").stat().st_size} if (work / "peer.html").exists() else {}
        shutil.rmtree(work, ignore_errors=True)

    def med(name: str, key: str) -> float | None:
        values = [x[key] for x in results[name] if x.get(key) is not None]
        return statistics.median(values) if values else None

    print(f"load average {os.getloadavg()[0]:.2f}; {len(records)} tokens in {len(records) // args.window} windows; "
          f"synthetic run written in {t_run:.1f} s; report rendered in {t_ours:.2f} s (peer to_html {t_peer:.2f} s); median of {args.repeats}")
    print("| quantity | ctxeval report | peer (DataFrame.to_html) | ctxeval / peer |")
    print("|---|---:|---:|---:|")
    rows = [("file size (MB)", sizes["ctxeval"] / 1e6, sizes["peer"] / 1e6)]
    for key, label in (("fcp", "first contentful paint (ms)"), ("load", "load event end (ms)")):
        rows.append((label, med("ctxeval", key), med("peer", key)))
    for label, a, b in rows:
        ratio = f"{a / b:.3f}" if a is not None and b else "—"
        shown = f"{b:.1f}" if b is not None else f"did not load in {args.timeout:.0f} s"
        print(f"| {label} | {a:.1f} | {shown} | {ratio} |")
    for key, label in (("interactive", "explorer interactive (ms)"), ("open_window", "open the last window (ms)"), ("recolour", "switch colour mode (ms)")):
        print(f"| {label} | {med('ctxeval', key):.1f} | — | — |")


if __name__ == "__main__":
    main()
