"""TopDown post-processing (docs/topdown.md).

``topdown(noisy, spec)`` fits and rounds level by level from the root; its options are one
record, :class:`~postproc.methods.topdown.options.TopDownOptions`. See
:mod:`postproc.methods.topdown.node` for one parent's problem and
:mod:`postproc.methods.topdown.run` for the level loop.
"""

from postproc.methods.topdown.node import NodeTask, QueryData, VerificationError, solve_node
from postproc.methods.topdown.options import TopDownOptions
from postproc.methods.topdown.run import topdown

__all__ = ["topdown", "TopDownOptions", "NodeTask", "QueryData", "solve_node",
           "VerificationError"]
