"""Generalized least squares on the hierarchy: the best linear unbiased estimate of every unit's
histogram with its covariance (:func:`gls`, registered as ``"gls"``; the two passes over the tree
in :func:`~postproc.methods.gls.tree.tree_gls`), and the methods built on it (``docs/gls.md``).
"""

from postproc.methods.gls.method import equalities_of, gls
from postproc.methods.gls.tree import Equalities, TreeGLS, tree_gls

__all__ = ["gls", "equalities_of", "tree_gls", "Equalities", "TreeGLS"]
