"""The Markdown of a per-sample comparison (compare.md of runs read from other tools): the
answer first, per measure the ordered runs with their tie groups (three runs or more), then each
run against the first, per task and over all tasks; and the tables the `ctxeval report` page
shows of it (the answer, the orders, the samples the runs score differently)."""

from __future__ import annotations

from ctxeval.render import intervals
from ctxeval.render.headline import Headline
from ctxeval.render.verdicts import verdict_words
from ctxeval.results.ruler import MEAN_TASK
from ctxeval.stats.interval import Interval

SHOWN_CONFLICTS = 5


def _numbers(row: dict, digits: int) -> str:
    """A stored interval row, signed, as every table writes one."""
    return intervals.numbers(Interval.from_row(row), digits, signed=True)


def _verdict(v: dict) -> str:
    """A stored verdict row in the one wording (render.verdicts); a lower run is worse."""
    return verdict_words(v["outcome"], v["low"], v["high"], v["delta"], v["samples_needed"], "sample", worse="lower")


def _to_best(v: dict) -> str:
    return "—" if v["order"] == 1 else _numbers(v["to_best"], 1)


def _rank(v: dict) -> str:
    low, high = int(v["rank"]["low"]), int(v["rank"]["high"])
    return str(low) if low == high else f"{low}–{high}"


def _p(value: float | None) -> str:
    return "—" if value is None else f"{value:.3g}"


def _task(task: str) -> str:
    return "all tasks (samples pooled)" if task == MEAN_TASK else task


def measure_lines(m: dict) -> list[str]:
    """One measure's tables."""
    name = m["measure"]
    if "left_out_reason" in m:
        return [f"## {name}", "", f"Not compared: {m['left_out_reason']}.", ""]
    left = ", ".join(f"{run} {n}" for run, n in m["left_out"].items() if n)
    lines = [f"## {name}: {m['paired_samples']} paired samples" + (f" (left out, not in every run: {left})" if left else ""), ""]
    if m["prompt_conflicts"]:
        shown = ", ".join(f"{c['task']}/{c['sample']} ({', '.join(c['runs'])})" for c in m["prompt_conflicts"][:SHOWN_CONFLICTS])
        more = f" and {len(m['prompt_conflicts']) - SHOWN_CONFLICTS} more" if len(m["prompt_conflicts"]) > SHOWN_CONFLICTS else ""
        lines += [f"Not paired: {len(m['prompt_conflicts'])} samples with the same id but another prompt than the first run's: {shown}{more}.", ""]
    for cell in m["ranking"]:
        pairs = cell["variants"][0]["pairs"]
        kinds = [(v["to_best"]["confidence"], v["to_best"]["method"]) for v in cell["variants"][1:]]
        together = "; ".join(f"simultaneous {intervals.level(1 - (1 - c) * pairs)}" for c in dict.fromkeys(c for c, _ in kinds))
        lines += [f"Order, {_task(cell['task'])} (Δ to the best: {intervals.header(dict.fromkeys(kinds))}, {together}; runs that share a letter are not told apart):", "",
                  f"| order | run | {name} % | Δ to the best, points | rank | group |", "|---:|---|---:|---|---|---|"]
        for v in cell["variants"]:
            lines.append(f"| {v['order']} | {v['model']} | {v['score']:.1f} | {_to_best(v)} | {_rank(v)} | {v['groups']} |")
        lines.append("")
    rows = m["against_first"]
    if rows:
        lines += [f"Against `{rows[0]['reference']}` ({intervals.header(dict.fromkeys((r['difference']['confidence'], r['difference']['method']) for r in rows))}):", "",
                  "| run | task | n | score % (first's) | Δ points [interval] | verdict | flips 1→0 / 0→1 / partial | McNemar p / mid-p | samples to settle |",
                  "|---|---|---:|---:|---|---|---|---|---:|"]
        for r in rows:
            d, v = r["difference"], r["verdict"]
            settle = "—" if v["samples_needed"] is None else str(v["samples_needed"])
            lines.append(f"| {r['run']} | {_task(r['task'])} | {r['n']} | {r['score']:.1f} ({r['reference_score']:.1f}) | {_numbers(d, 1)} | "
                         f"{_verdict(v)} | {r['flips_lost']} / {r['flips_gained']} / {r['flips_partial']} | {_p(r['mcnemar_p'])} / {_p(r['mcnemar_midp'])} | {settle} |")
        logp = [r for r in rows if r["answer_logp"] is not None]
        if logp:
            kinds = dict.fromkeys((r["answer_logp"]["difference"]["confidence"], r["answer_logp"]["difference"]["method"]) for r in logp)
            lines += ["", f"Answer log-probability among the choices (nats, {intervals.header(kinds)}):", "",
                      "| run | task | Δ log p [interval] | verdict |", "|---|---|---|---|"]
            for r in logp:
                d, v = r["answer_logp"]["difference"], r["answer_logp"]["verdict"]
                lines.append(f"| {r['run']} | {_task(r['task'])} | {_numbers(d, 3)} | {_verdict(v)} |")
        lines.append("")
    return lines


def answer_lines(report: dict) -> list[str]:
    """The answer in a line per measure and run: with three or more runs the order and tie groups
    (over all tasks), then each run against the first, over all tasks."""
    lines = []
    for m in report["measures"]:
        if "left_out_reason" in m:
            continue
        overall = MEAN_TASK if len(m["tasks"]) > 1 else m["tasks"][0]
        for cell in m["ranking"]:
            if cell["task"] == overall:
                lines.append(f"- {m['measure']}: order (runs sharing a letter are tied) " + " > ".join(f"{v['model']} ({v['groups']})" for v in cell["variants"]))
        for r in m["against_first"]:
            if r["task"] == overall:
                d, v = r["difference"], r["verdict"]
                mcnemar = f", McNemar p {_p(r['mcnemar_p'])}" if r["mcnemar_p"] is not None else ""
                lines.append(f"- {m['measure']}: {r['run']} − {r['reference']} = {_numbers(d, 1)} points, {_verdict(v)}; "
                             f"{r['flips_lost']} right → wrong, {r['flips_gained']} wrong → right{mcnemar}")
    return lines


def render_samples_markdown(report: dict) -> str:
    """compare.md of a per-sample comparison: the answer first."""
    settings = report["settings"]
    runs = report["runs"]
    lines = [f"# Paired comparison of {len(runs)} runs, per sample", "", *answer_lines(report), ""]
    lines += ["Runs:", ""] + [f"- `{r['run']}`: {r['format']}, {r['samples']} samples in {len(r['tasks'])} task{'s' if len(r['tasks']) != 1 else ''} ({r['path']})" for r in runs]
    lines += ["", f"Verdicts against ±{settings['delta']:g} points (answer log p: ±{settings['logp_delta']:g} nats)"
              + ("; intervals resample whole clusters of samples (--cluster)." if settings["cluster"] else "."), ""]
    for m in report["measures"]:
        lines += measure_lines(m)
    gates = report["gates"]
    if gates["fail_on"]:
        lines.append(f"--fail-on {gates['fail_on']}: " + ("passed." if gates["passed"] else "FAILED: " + "; ".join(gates["failures"]) + "."))
    return "\n".join(lines).rstrip() + "\n"


SHOWN_SAMPLES = 500


def _overall(m: dict) -> str:
    return MEAN_TASK if len(m["tasks"]) > 1 else m["tasks"][0]


def answer_headline(report: dict) -> Headline:
    """The report page's answer: each run against the first on every measure, over all tasks."""
    rows = []
    for m in report["measures"]:
        for r in m.get("against_first", []):
            if r["task"] == _overall(m):
                d, v = r["difference"], r["verdict"]
                rows.append((m["measure"], r["run"], str(r["n"]), f"{r['score']:.1f} ({r['reference_score']:.1f})", _numbers(d, 1),
                             _verdict(v), f"{r['flips_lost']} / {r['flips_gained']} / {r['flips_partial']}", f"{_p(r['mcnemar_p'])} / {_p(r['mcnemar_midp'])}"))
    first = report["runs"][0]["run"]
    return Headline(f"Paired comparison of {len(report['runs'])} runs", f"each run against {first}, all tasks, scores in points",
                    ("measure", "run", "n", "score (first's)", "Δ [interval]", "verdict", "flips 1→0 / 0→1 / partial", "McNemar p / mid-p"), tuple(rows),
                    (f"Verdicts against ±{report['settings']['delta']:g} points.",))


def order_headlines(report: dict) -> list[Headline]:
    """Per measure and task, the ordered runs with their tie groups (three runs or more)."""
    out = []
    for m in report["measures"]:
        for cell in m.get("ranking", []):
            rows = tuple((str(v["order"]), v["model"], f"{v['score']:.1f}", _to_best(v), _rank(v), v["groups"]) for v in cell["variants"])
            out.append(Headline(f"Order on {m['measure']}, {_task(cell['task'])}", "simultaneous intervals; runs that share a letter are not told apart",
                                ("order", "run", "score", "Δ to the best", "rank", "group"), rows))
    return out


def differing_samples(report: dict) -> list[Headline]:
    """Per measure, the samples on which the runs' scores differ (the flips), the report's
    sample explorer."""
    out = []
    runs = [r["run"] for r in report["runs"]]
    for m in report["measures"]:
        differing = [s for s in m.get("samples", []) if len({s[r] for r in runs}) > 1]
        if not differing:
            continue
        rows = tuple((str(s["task"]), str(s["sample"]), *(f"{s[r]:g}" for r in runs)) for s in differing[:SHOWN_SAMPLES])
        shown = f"the first {SHOWN_SAMPLES} of {len(differing)}" if len(differing) > SHOWN_SAMPLES else f"all {len(differing)}"
        out.append(Headline(f"Samples scored differently on {m['measure']}", f"{shown} (of {m['paired_samples']} paired)", ("task", "sample", *runs), rows))
    return out
