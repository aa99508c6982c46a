"""`--until`'s level and its family: each verdict on its own by default, the error split over
every (variant, task, length) with --until-simultaneous (Bonferroni), and the output's first line
saying which."""

from __future__ import annotations

import pytest

from ctxeval.render.ruler_ppi import family_line, rounds_markdown
from ctxeval.ruler.generation import Generation
from ctxeval.ruler.until import Until


def test_the_family_splits_the_error_over_variants_tasks_and_lengths():
    """Three models (two variants) on 2 tasks × 3 lengths: 12 verdicts. Rounds of 10 in 40 (4
    looks): 1 − 0.05 / 4 on its own, 1 − 0.05 / (4 · 12) simultaneous; at share 1 the last look
    1 − 0.05 / 12 and the sequence 1 − 0.025 / 12. A half-width target counts every model."""
    share = Generation.of(False, 0.5, None, 10)
    own = Until.of("verdict", 40, 10, 5.0, share, 3, 6)
    both = Until.of("verdict", 40, 10, 5.0, share, 3, 6, simultaneous=True)
    assert (own.cells, own.family, both.family) == (12, 1, 12)
    assert own.confidence == pytest.approx(1 - 0.05 / 4) and both.confidence == pytest.approx(1 - 0.05 / 48)
    full = Until.of("verdict", 40, 2, 5.0, Generation.of(False, 1.0, None, 2), 3, 6, simultaneous=True)
    assert full.confidence == pytest.approx(1 - 0.05 / 12) and full.early_confidence == pytest.approx(1 - 0.025 / 12)
    assert Until.of("3", 40, 10, 5.0, share, 3, 6).cells == 18
    assert Until.from_config({"until": both.as_dict()}) == both  # the manifest keeps the family


def test_the_output_leads_with_the_level_and_its_family():
    share = Generation.of(False, 0.5, None, 10)
    own = Until.of("verdict", 40, 10, 5.0, share, 3, 6).as_dict()
    both = Until.of("verdict", 40, 10, 5.0, share, 3, 6, simultaneous=True).as_dict()
    assert family_line(own) == ("Level: 95 % for each verdict on its own (variant, task and length), as a fixed-n run's; all 12 at once at least "
                                "40 % (union bound); --until-simultaneous makes it 95 % for all at once.")
    assert family_line(both).startswith("Level: 95 % for all 12 verdicts at once (variants × tasks × lengths")
    assert rounds_markdown(both, [])[0] == family_line(both)


def test_the_level_line_reads_the_runs_level_from_its_looks():
    """A run whose looks held at 1 − 0.01 / 4 (four rounds) holds at 99 %; at share 1 a last look
    at 0.99 and a sequence at 0.995 hold at 99 %, 98.5 % by the union bound: read from `until`,
    not from a default."""
    rounds = {"half_width": None, "cells": 2, "rounds": 4, "confidence": 1 - 0.01 / 4, "looks": "rounds"}
    assert family_line(rounds).startswith("Level: 99 % for each verdict on its own") and "all 2 at once at least 98 %" in family_line(rounds)
    assert family_line(rounds).endswith("--until-simultaneous makes it 99 % for all at once.")
    sequence = {"half_width": None, "cells": 1, "rounds": 20, "confidence": 0.99, "early_confidence": 0.995, "looks": "sequence"}
    assert family_line(sequence).startswith("Level: 99 % as simulated (98.5 % by the union bound of the sequence's 0.5 % and the last look's 1 %)")
    both = rounds | {"simultaneous": True, "confidence": 1 - 0.01 / 8}
    assert family_line(both).startswith("Level: 99 % for all 2 verdicts at once") and "split the 1 % error" in family_line(both)
