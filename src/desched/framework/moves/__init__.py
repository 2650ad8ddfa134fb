"""Moves without downtime (docs/moves.md): the policy's `moves` block, and how the Evictor
carries a plugin's evictions out as surge-first restarts, paced evictions or plain ones."""

from desched.framework.moves.args import MovesArgs
from desched.framework.moves.planner import MovePlanner
from desched.framework.moves.tracker import MoveTracker

__all__ = ["MovePlanner", "MoveTracker", "MovesArgs"]
