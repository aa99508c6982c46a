"""bench/until_sequence_simulation.py's `--budget`: the same rates priced at another fixed-n
budget. At the population's own size it is the default run; at a larger one each run draws that
many samples a cell and its compute is priced against that budget's fixed-n run."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import until_sequence_simulation as sim  # noqa: E402

SMALL = ["--only", "4,096", "--replicates", "20", "--old-replicates", "0", "--oracle-replicates", "10", "--planned-replicates", "0", "--check", "1"]


def _cells(text: str) -> list[list[str]]:
    """The markdown tables' cells, without their padding and rule lines."""
    return [[c.strip() for c in line.split("|")] for line in text.splitlines() if line and not line.startswith("|:")]


def test_a_budget_of_the_populations_size_is_the_default_run():
    default = sim.main(SMALL)
    budgeted = sim.main([*SMALL, "--budget", "40"])
    assert _cells(budgeted.replace("; budget 40 a cell", "")) == _cells(default)


def test_a_larger_budget_draws_that_many_and_each_run_pays_for_what_it_drew():
    """SmolLM2 at 1,024 tokens, 100 a cell: TOVA equals the full cache on niah_single_2, so
    "within δ" needs most of the 100, past the population's 40; a run costs a pass per sample it
    stopped at and a generation per unsettled one."""
    pop = next(p for p in sim.POPULATIONS if "1,024" in p.name and "SmolLM2" in p.name)
    table = sim.population_table(pop)
    arrays = sim._arrays(table)
    scores, diffs = sim.truths(table)
    until = sim.Until(None, pop.delta, 100, 2, sim.SEQUENCE)
    rng = np.random.default_rng(0)
    ids = {t: rng.integers(0, pop.size, 100) for t in sim.TASKS}
    run = sim.sequence_run(pop, arrays, ids, until, {"scores": scores, "diffs": diffs})
    assert pop.size < run["stops"]["niah_single_2"]["TOVA 512"] <= 100
    assert run["verdicts"][("TOVA 512", "niah_single_2")] == run["fixed"][("TOVA 512", "niah_single_2")] == "within δ"
    expected = 0.0
    for task, stop_at in run["stops"].items():
        for model, n in stop_at.items():
            expected += n + pop.cost_ratio * arrays[(model, task)][1][ids[task][:n]].sum()
    assert np.isclose(run["units"], expected)
