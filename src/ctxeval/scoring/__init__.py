"""Token scoring (sweep, score, context-gain): the planners, the engine task and its work."""

from ctxeval.scoring.run import Finish, ScoringRun, scoring_spec

__all__ = ["Finish", "ScoringRun", "scoring_spec"]
