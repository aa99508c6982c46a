"""diff.md: the headline (KL, perplexity ratio, same top-1, the gates), the summary tables, the
key tokens, the noise floor and the numeric paths, from the report diff.json holds."""

from __future__ import annotations

from ctxeval.render.headline import Headline
from ctxeval.render.intervals import bounds, header
from ctxeval.render.numerics import markdown_lines
from ctxeval.render.verdicts import verdict_words


def floor_line(floor: dict) -> str:
    """One line for the CLI and the Markdown reports."""
    return (f"noise floor ({floor['cand']} vs {floor['ref']}, {floor['windows']} windows, {floor['tokens']} tokens): "
            f"max |Δ logprob| {floor['max_abs_logprob_diff']:.4g}, mean {floor['mean_abs_logprob_diff']:.3g}, "
            f"rank changed {floor['rank_changes_pct']:.1f} %, top-1 flipped {floor['top1_flips_pct']:.2f} %, "
            f"KL mean {floor['kl_mean']:.3g} (max {floor['kl_max']:.3g}) nats")


def intervals(cell: dict) -> str:
    """The level and method a summary cell's intervals hold at, from its rows ('95 % BCa')."""
    return header([(cell["kl"]["confidence"], cell["kl"]["method"])])


def headline(report: dict) -> Headline:
    """How far CAND is from REF: the verdict first, then the mean KL (with the numeric path's own
    share where a noise floor was measured), the perplexity ratio and the share of tokens whose
    top-1 both models agree on, each with its interval; a press's uncompressed targets apart,
    and the gates."""
    overall = report["summary"]["all"]
    kl, same, ratio = overall["kl"], overall["same_top1"], overall["ppl_ratio"]
    rows = [verdict_row(report)] if "verdict" in report else []
    rows.append(("mean KL(P_ref ‖ P_cand), nats/token", f"{kl['estimate']:.5f}", bounds(kl, ".5f")))
    floor = report.get("noise_floor")
    if floor is not None:
        rows.append((f"  of which the numeric path ({floor['cand']} vs REF)", f"{floor['kl_mean']:.5f}", bounds(floor["kl"], ".5f")))
    rows += [("perplexity ratio CAND/REF", f"{ratio['ratio']['estimate']:.4f}", bounds(ratio["ratio"], ".4f")),
             ("same top-1 token", f"{same['estimate']:.2f} %", bounds(same, ".2f"))]
    notes = [f"Verdict: {report['verdict']['reason']}."] if report.get("verdict", {}).get("reason") else []
    compressed = report["summary"].get("compressed")
    if compressed is not None:
        notes.append(compressed_line(compressed))
    if floor is not None:
        notes.append(f"KL {kl['estimate']:.3g}, of which the numeric path {floor['kl_mean']:.3g} (REF on CAND's numeric path, {floor['windows']} seeded windows"
                     + (f"; measured because CAND sets {floor['automatic']}" if floor.get("automatic") else "") + ").")
        if kl["estimate"] <= floor["kl_mean"]:
            notes.append(f"The mean KL is within the noise floor ({floor['kl_mean']:.3g} nats): this difference is numerics, not the model.")
    if report.get("whole_numeric_path"):
        notes.append("CAND is REF with numeric-path options only (flash_attn, n_batch, threads, device): the whole difference is that path's.")
    gates = report["gates"]
    if gates["failures"]:
        notes.append(f"Gates ({gates['profile']}) failed: " + "; ".join(gates["failures"]) + ".")
    elif gates["profile"] != "dev" or gates["max_kl"] is not None or gates["min_same_top"] is not None:
        notes.append(f"Gates ({gates['profile']}) passed.")
    return Headline(f"CAND {report['cand']['name']} against REF {report['ref']['name']}", f"{overall['tokens']} tokens, {overall['windows']} windows "
                    f"of {overall['documents']} document(s)", ("quantity", "value", f"{intervals(overall)} interval"), tuple(rows), tuple(notes))


def verdict_row(report: dict) -> tuple[str, str, str]:
    """The verdict on CAND's mean Δ log-loss, the headline's first row: outcome, estimate and
    paired interval, and the samples (windows or documents) that would settle an undecided one."""
    v = report["verdict"]
    unit = report["summary"]["all"]["resampling_unit"]
    interval = "no interval" if v["low"] is None else f"[{v['low']:+.4g}, {v['high']:+.4g}]"
    text = f"Δ log-loss CAND − REF {v['estimate']:+.4g} nats/token {interval}, {v['n']} {unit}s"
    return f"verdict (δ = ±{v['delta']:g} nats/token)", verdict_words(v["outcome"], v["low"], v["high"], v["delta"], v["samples_needed"], unit), text


def compressed_line(compressed: dict) -> str:
    """How many targets a press acted on; the others' numbers apart, never averaged in."""
    text = f"{compressed['targets']} of {compressed['of']} targets scored against a compressed cache ({compressed['presses']}); the numbers above are theirs."
    rest = compressed["uncompressed"]
    if rest is not None:
        text += (f" The other {rest['tokens']} (windows with no context before their targets to compress) are reported apart: mean KL {rest['kl']['estimate']:.5f}, "
                 f"perplexity ratio {rest['ppl_ratio']['ratio']['estimate']:.4f}.")
    return text


def render_markdown(report: dict) -> str:
    """diff.md: the headline, the summary table (by distance where there is more than one
    bucket), the key tokens, the noise floor, the gates and the numeric paths."""
    s = report["settings"]
    lines = [
        "# ctxeval diff",
        "",
        *headline(report).markdown(),
        "",
        f"Window {s['window']}, stride {s['stride']}; intervals: {intervals(report['summary']['all'])}, {s['replicates']} replicates, seed {s['seed']}. "
        f"KL(P_ref ‖ P_cand) in nats over the full vocabulary; same-top = both argmaxes agree; "
        f"PPL ratio = CAND/REF (paper 001); Δp = P_cand(target) − P_ref(target).",
        "",
        *_table(_cells(report["summary"])),
    ]
    key = report["summary"].get("key_tokens")
    if key is not None:
        lines += ["", f"Key tokens of `{key['run']}` (evaluator `{key['evaluator']}`: gain > {key['alpha']:g} nats and log p_long > {key['beta']:g}): {key['tokens']} tokens."]
        if key["tokens"]:
            lines += ["", *_table(_cells(key))]
    overall = report["summary"]["all"]
    lines += ["", f"PPL REF {overall['ppl_ratio']['ppl_ref']:.3f}, CAND {overall['ppl_ratio']['ppl_cand']:.3f}; "
              f"{overall['windows']} windows of {overall['documents']} documents; intervals resample {overall['resampling_unit']}s "
              f"({overall['resampling_reason']})."]
    if overall["warning"]:
        lines.append(f"Warning: {overall['warning']}.")
    if overall["interval"] == "none":
        lines.append(f"{overall['interval_note'][0].upper()}{overall['interval_note'][1:]}.")
    metrics = {"kl": overall["kl"], "same_top1": overall["same_top1"], "ppl_ratio": overall["ppl_ratio"]["delta_log_nll"], "delta_p": overall["delta_p"]}
    degenerate = [name for name, metric in metrics.items() if metric["degenerate"]]
    if degenerate:
        lines.append(f"Degenerate ({', '.join(degenerate)}): all window means are equal; the interval is collapsed to the point.")
    if "kl_reverse" in overall:
        rev = overall["kl_reverse"]
        lines.append(f"Reverse KL(P_cand ‖ P_ref): mean {rev['estimate']:.5f} {bounds(rev, '.5f')}, p99 {rev['p99']:.4f}, max {rev['max']:.4f}.")
    if "noise_floor" in report:
        lines += ["", f"Noise floor: {floor_line(report['noise_floor'])}."]
    lines += markdown_lines(report.get("numerics"))
    return "\n".join(lines) + "\n"


def _cells(summary: dict) -> list[dict]:
    """All tokens, and each distance bucket where there are several (one would repeat all)."""
    return [summary["all"], *summary["buckets"]] if len(summary["buckets"]) > 1 else [summary["all"]]


def _table(cells: list[dict]) -> list[str]:
    lines = [
        "| context | tokens | mean KL | CI | median | p99 | p99.9 | max | same top-1 % | CI | PPL ratio | CI | mean Δp | top-k overlap |",
        "|---|---:|---:|---|---:|---:|---:|---:|---:|---|---:|---|---:|---:|",
    ]
    for cell in cells:
        if not cell["tokens"]:
            lines.append(f"| {cell['bucket']} | 0 | | | | | | | | | | | | |")
            continue
        kl, same, ratio = cell["kl"], cell["same_top1"], cell["ppl_ratio"]
        lines.append(
            f"| {cell['bucket']} | {cell['tokens']} | {kl['estimate']:.5f} | {bounds(kl, '.5f')} | {kl['p50']:.5f} | {kl['p99']:.4f} | "
            f"{kl['p99_9']:.4f} | {kl['max']:.4f} | {same['estimate']:.2f} | {bounds(same, '.2f')} | {ratio['ratio']['estimate']:.4f} | "
            f"{bounds(ratio['ratio'], '.4f')} | {cell['delta_p']['estimate']:+.5f} | {cell['topk_overlap']:.3f} |"
        )
    return lines
