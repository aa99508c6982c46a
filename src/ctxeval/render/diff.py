"""diff.md: the summary tables, the key tokens, the noise floor, the gates and the numeric paths,
from the report diff.json holds."""

from __future__ import annotations

from ctxeval.render.compare import interval_text
from ctxeval.render.numerics import markdown_lines


def floor_line(floor: dict) -> str:
    """One line for the CLI and the Markdown reports."""
    return (f"noise floor ({floor['cand']} vs {floor['ref']}, {floor['windows']} windows, {floor['tokens']} tokens): "
            f"max |Δ logprob| {floor['max_abs_logprob_diff']:.4g}, mean {floor['mean_abs_logprob_diff']:.3g}, "
            f"rank changed {floor['rank_changes_pct']:.1f} %, top-1 flipped {floor['top1_flips_pct']:.2f} %, "
            f"KL mean {floor['kl_mean']:.3g} (max {floor['kl_max']:.3g}) nats")


def render_markdown(report: dict) -> str:
    """diff.md: the summary tables, the key tokens, the noise floor, the gates and the numeric paths."""
    s = report["settings"]
    conf = f"{100 * s['confidence']:.0f} %"
    lines = [
        "# ctxeval diff",
        "",
        f"REF: `{report['ref']['name']}`  ",
        f"CAND: `{report['cand']['name']}`",
        "",
        f"Window {s['window']}, stride {s['stride']}; intervals: {conf} BCa, {s['replicates']} replicates, seed {s['seed']}. "
        f"KL(P_ref ‖ P_cand) in nats over the full vocabulary; same-top = both argmaxes agree; "
        f"PPL ratio = CAND/REF (paper 001); Δp = P_cand(target) − P_ref(target).",
        "",
        *_table([report["summary"]["all"], *report["summary"]["buckets"]]),
    ]
    key = report["summary"].get("key_tokens")
    if key is not None:
        lines += ["", f"Key tokens of `{key['run']}` (evaluator `{key['evaluator']}`: gain > {key['alpha']:g} nats and log p_long > {key['beta']:g}): {key['tokens']} tokens."]
        if key["tokens"]:
            lines += ["", *_table([key["all"], *key["buckets"]])]
    overall = report["summary"]["all"]
    lines += ["", f"PPL REF {overall['ppl_ratio']['ppl_ref']:.3f}, CAND {overall['ppl_ratio']['ppl_cand']:.3f}; "
              f"{overall['windows']} windows of {overall['documents']} documents; intervals resample {overall['resampling_unit']}s "
              f"({overall['resampling_reason']})."]
    if overall["warning"]:
        lines.append(f"Warning: {overall['warning']}.")
    if overall["interval"] == "none":
        lines.append(f"{overall['interval_note'][0].upper()}{overall['interval_note'][1:]}.")
    degenerate = [name for name in ("kl", "same_top1", "ppl_ratio", "delta_p") if overall[name]["degenerate"]]
    if degenerate:
        lines.append(f"Degenerate ({', '.join(degenerate)}): all window means are equal; the interval is collapsed to the point.")
    if "kl_reverse" in overall:
        rev = overall["kl_reverse"]
        lines.append(f"Reverse KL(P_cand ‖ P_ref): mean {rev['mean']:.5f} {interval_text(rev['ci'], '.5f')}, p99 {rev['p99']:.4f}, max {rev['max']:.4f}.")
    if "noise_floor" in report:
        floor = report["noise_floor"]
        below = " The mean KL is within the noise floor: this difference is numerics, not the model." if overall["kl"]["mean"] <= floor["kl_mean"] else ""
        lines += ["", f"Noise floor: {floor_line(floor)}.{below}"]
    gates = report["gates"]
    if gates["failures"]:
        lines.append(f"Gates ({gates['profile']}) failed: " + "; ".join(gates["failures"]) + ".")
    elif gates["profile"] != "dev" or gates["max_kl"] is not None or gates["min_same_top"] is not None:
        lines.append(f"Gates ({gates['profile']}) passed.")
    lines += markdown_lines(report.get("numerics"))
    return "\n".join(lines) + "\n"


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
            f"| {cell['bucket']} | {cell['tokens']} | {kl['mean']:.5f} | {interval_text(kl['ci'], '.5f')} | {kl['p50']:.5f} | {kl['p99']:.4f} | "
            f"{kl['p99_9']:.4f} | {kl['max']:.4f} | {same['percent']:.2f} | {interval_text(same['ci'], '.2f')} | {ratio['ratio']:.4f} | "
            f"{interval_text(ratio['display_ci'], '.4f')} | {cell['delta_p']['mean']:+.5f} | {cell['topk_overlap']:.3f} |"
        )
    return lines
