"""judge.md: win rates over both answer orders and per order."""

from __future__ import annotations

from dataclasses import replace

from ctxeval.render.renderer import Renderer
from ctxeval.results.judge import describe_questions, JudgeResult


def markdown(report: dict) -> str:
    """`judge.md`: win rates over both answer orders and per order."""
    totals, by_order = report["totals"], report["by_order"]
    lines = [
        f"# {report['model']} vs {report['base']}, judged by {report['judge']}",
        "",
        f"Questions: {describe_questions(report['questions'])}, {len(report['verdicts']) // 2} judged.",
        "",
        "| order | verdicts | wins | losses | ties | parse/request errors | win rate |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, t in [("both orders", totals), *by_order.items()]:
        lines.append(f"| {name} | {t['verdicts']} | {t['win']} | {t['loss']} | {t['tie']} | {t['error']} | {t['win_rate']:.4f} |")
    lines += ["", "win rate = (wins + ½ ties) / verdicts that are not errors; errors are reported, not scored."]
    return "\n".join(lines) + "\n"


def texts(r: JudgeResult) -> JudgeResult:
    """judge.md, from the report."""
    return replace(r, markdown=markdown(r.report))


RENDERER = Renderer(texts)
