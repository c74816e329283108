"""``bluedown``: without binding inequalities and rounding its node fit is the GLS estimate
exactly (the projection identity of ``docs/gls.md``); as a method it keeps TopDown's promises,
checked in exact integers by the registry; what it cannot take it refuses by name."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from hierarchy.budget import Budget
from hierarchy.measurement import measure
from hierarchy.queries import e2e_workload
from hierarchy.schema import E2E_1940
from hierarchy.synth import synthesize_1940
from hierarchy.tabulation import tabulate
from invariants.spec import Spec
from postproc.errors import PostprocError
from postproc.infra.solvers import DEFAULT_QP_CHAIN
from postproc.methods import postprocess
from postproc.methods.gls.bluedown import precision
from postproc.methods.gls.tree import tree_gls
from postproc.methods.topdown.node import fit_passes
from postproc.methods.topdown.rows import Layout
from postproc.methods.topdown.task import NodeTask, QueryData


@pytest.mark.parametrize("seed", range(5))
def test_the_node_fit_on_subtree_estimates_is_the_gls_estimate(seed):
    """A root and 2–5 children of 4 cells with large counts (no bound binds): the children's
    subtree estimates weighted by their inverse covariances, fitted under the parent's GLS
    estimate, give the children's GLS estimates (to the solver's 1e-6)."""
    rng = np.random.default_rng(seed)
    k, n = int(rng.integers(2, 6)), 4
    truth = rng.integers(500, 2000, (k, n)).astype(float)
    some = (rng.random((2, n)) < 0.5).astype(float)
    terms = []
    for counts, queries in ((truth.sum(axis=0, keepdims=True), (np.ones((1, n)), some)),
                            (truth, (np.eye(n), some))):
        level_terms = []
        for q in queries:
            weights = rng.uniform(0.01, 0.5, (counts.shape[0], q.shape[0]))
            values = counts @ q.T + rng.normal(size=weights.shape) / np.sqrt(weights)
            level_terms.append((q, values, weights))
        terms.append(level_terms)
    fit = tree_gls([[-1], np.zeros(k, int)], terms, n)
    weights = np.stack([precision(fit.subtree_covariance(i)) for i in fit.subtree_ids(1)])
    task = NodeTask("child", "root", fit.means[0][0], np.array([str(c) for c in range(k)]),
                    (QueryData("subtree", sp.identity(n, format="csr"), fit.subtree_means(1),
                               weights),),
                    sp.csr_matrix((0, n), dtype=np.int64), np.zeros((k, 0)), np.zeros((k, 0)),
                    np.zeros((k, n), bool))
    x, _, _ = fit_passes(task, Layout.of(task), DEFAULT_QP_CHAIN)
    np.testing.assert_allclose(x, fit.means[1], rtol=1e-6, atol=1e-6 * truth.max())


@pytest.fixture(scope="module")
def measured():
    levels = ["nation", "state", "county"]
    data = synthesize_1940(3_000, seed=2)
    truth = tabulate(data.persons, schema=E2E_1940, levels=levels, units=data.units)
    spec = Spec.e2e(levels)
    return measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, levels), rng=6, spec=spec), spec


def test_bluedown_keeps_topdown_s_promises(measured):
    """Through the registry: integer, nonnegative, consistent, the spec kept — verified in
    exact integer arithmetic by ``check_promises`` — and labelled as BlueDown."""
    noisy, spec = measured
    result = postprocess(noisy, "bluedown", spec)
    assert result.method == "bluedown" and result.integer
    assert result.provenance.details["gls"]["structure"] == "split"
    assert int(result.histograms[0].sum()) == int(noisy.invariants["nation"]["tot"][0])


def test_what_bluedown_cannot_take_is_refused(measured):
    noisy, spec = measured
    with pytest.raises(PostprocError, match="passes"):
        postprocess(noisy, "bluedown", spec, passes=[["total"], ["detailed"]])


def test_precision_is_positive_definite_and_inverts_the_covariance():
    """On the covariance's range it is the inverse; where the covariance is 0 it is positive."""
    basis = np.linalg.qr(np.random.default_rng(1).normal(size=(4, 4)))[0]
    covariance = (basis[:, :3] * [1.0, 2.0, 4.0]) @ basis[:, :3].T
    w = precision(covariance)
    assert np.linalg.eigvalsh(w).min() > 0
    np.testing.assert_allclose(covariance @ w @ covariance, covariance, atol=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_the_split_node_fit_is_the_gls_estimate_too(seed):
    """The same with the succinct path's weights (a query per race with ``P_c`` and one of race
    totals with ``G``): 2–3 groups × 3–4 races, queries that keep the races apart or sum them,
    a group fixed at 0 in some children, the root's total held; the fit equals the children's
    GLS estimates."""
    from postproc.methods.gls.bluedown import split_measurements
    from postproc.methods.gls.symmetry import SymmetricCovariance, Symmetry
    from postproc.methods.gls.tree import Equalities

    rng = np.random.default_rng(seed)
    a, r, k = int(rng.integers(2, 4)), int(rng.integers(3, 5)), int(rng.integers(2, 5))
    n = a * r
    zero = np.zeros((k, a), bool)
    zero[0, 0] = True
    truth = rng.integers(500, 2000, (k, a, r)).astype(float)
    truth[zero] = 0
    truth = truth.reshape(k, n)
    sliced = np.kron((rng.random((2, a)) < 0.6).astype(float), np.eye(r))
    summed = np.kron(np.eye(a), np.ones((1, r)))
    terms = []
    for counts, queries in ((truth.sum(axis=0, keepdims=True), (summed, sliced)),
                            (truth, (np.eye(n), summed))):
        level_terms = []
        for q in queries:
            groups = rng.uniform(0.01, 0.5, (counts.shape[0], q.shape[0] // r or 1))
            weights = np.repeat(groups, r, axis=1) if q.shape[0] % r == 0 and q is not summed \
                else rng.uniform(0.01, 0.5, (counts.shape[0], q.shape[0]))
            values = counts @ q.T + rng.normal(size=weights.shape) / np.sqrt(weights)
            level_terms.append((q, values, weights))
        terms.append(level_terms)
    cell_zero = np.repeat(zero, r, axis=1)
    equalities = [Equalities(np.ones((1, n)), truth.sum(keepdims=True)),
                  Equalities(np.zeros((0, n)), np.zeros((k, 0)), cell_zero)]
    sym = Symmetry(a, r)
    parts = [sym.split_terms(level) for level in terms]
    eqs = [sym.split_equalities(eq, units) for eq, units in zip(equalities, (1, k))]
    fits = [tree_gls([[-1], np.zeros(k, int)], [p[i] for p in parts], a, [e[i] for e in eqs])
            for i in (0, 1)]
    covariance = SymmetricCovariance(sym, *fits)
    expected = sym.join(fits[0].means[1], fits[1].means[1])
    parent = sym.join(fits[0].means[0], fits[1].means[0])[0]
    units = slice(0, k)
    queries = tuple(QueryData(name, matrix, m.values[units], m.weights_of(units))
                    for name, matrix, m in split_measurements(covariance, 1))
    task = NodeTask("child", "root", parent, np.array([str(c) for c in range(k)]), queries,
                    sp.csr_matrix((0, n), dtype=np.int64), np.zeros((k, 0)), np.zeros((k, 0)),
                    cell_zero)
    x, _, _ = fit_passes(task, Layout.of(task), DEFAULT_QP_CHAIN)
    np.testing.assert_allclose(x, expected, rtol=1e-6, atol=1e-6 * truth.max())


def test_without_the_split_bluedown_takes_a_dense_weight_per_child(measured, monkeypatch):
    """With the succinct path switched off, BlueDown fits each child's subtree estimate with
    its dense weight matrix (192 × 192 on the 1940 workload), keeps every promise, and lands
    within a person per cell of the split run on average at the states."""
    from postproc.methods.gls import method as gls_method

    noisy, spec = measured
    split = postprocess(noisy, "bluedown", spec)
    monkeypatch.setattr(gls_method, "find_symmetry", lambda *args: (None, "switched off"))
    dense = postprocess(noisy, "bluedown", spec)
    assert dense.provenance.details["gls"]["structure"] == "general"
    assert np.abs(dense.histograms[1] - split.histograms[1]).mean() < 1.0


def test_a_large_histogram_that_does_not_split_is_refused_with_the_reason():
    """More than 512 cells on the general path would need a dense weight per child: refused,
    naming the attribute, the reason the GLS did not split and the cells (checked before any
    part of a run in parts is measured)."""
    from hierarchy.presets.pl94 import PL94_2020
    from postproc.methods.gls.bluedown import check_weight_cells

    with pytest.raises(PostprocError, match=r"do not split by cenrace \(a query of one race\)"
                       r".*2,016 × 2,016"):
        check_weight_cells({"structure": "general", "why_not_split": "a query of one race"},
                           PL94_2020)
    check_weight_cells({"structure": "split"}, PL94_2020)
