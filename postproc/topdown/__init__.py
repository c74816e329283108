"""TopDown post-processing (SPEC §4).

``topdown(noisy, spec)`` fits and rounds level by level from the root; see
:mod:`postproc.topdown.node` for one parent's problem and :mod:`postproc.topdown.run` for the
level loop.
"""

from postproc.topdown.node import NodeTask, QueryData, VerificationError, solve_node
from postproc.topdown.run import topdown

__all__ = ["topdown", "NodeTask", "QueryData", "solve_node", "VerificationError"]
