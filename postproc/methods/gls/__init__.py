"""Generalized least squares on the hierarchy: the best linear unbiased estimate of every unit's
histogram with its covariance (:func:`gls`, registered as ``"gls"``; the two passes over the tree
in :func:`~postproc.methods.gls.tree.tree_gls`), and BlueDown built on it (:func:`bluedown`,
registered as ``"bluedown"``). ``docs/gls.md`` states them.
"""

from postproc.methods.gls.bluedown import bluedown
from postproc.methods.gls.method import equalities_of, gls, solve_gls
from postproc.methods.gls.tree import Equalities, TreeGLS, tree_gls

__all__ = ["gls", "bluedown", "solve_gls", "equalities_of", "tree_gls", "Equalities", "TreeGLS"]
