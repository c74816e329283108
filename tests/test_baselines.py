"""Baselines: each one's defining property.

The tree baselines and bottom-up are a measuring step and a reconciling step that reproduce the
one-call implementations they replaced draw for draw (reference kernels below), raking sums to
parents, ADPC is the mean of its runs, bottom-up margins are sums of noisy cells,
the closed-form least squares is consistent and equals an independent ``numpy.linalg.lstsq`` of
the stacked system (and Hay et al.'s published formulas on a regular tree), clipping leaves no
negatives, calibration hits the published totals, SRS is unbiased.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hierarchy.budget import Budget
from hierarchy.errors import HierarchyError
from hierarchy.measurement import measure
from hierarchy.mechanisms import sample_two_sided_geometric, two_sided_geometric_variance
from hierarchy.queries import Workload, e2e_workload, marginal
from hierarchy.randomness import Randomness, as_randomness
from hierarchy.schema import E2E_1940
from hierarchy.synth import synthesize_1940
from hierarchy.tabulation import tabulate
from postproc.errors import PostprocError
from postproc.methods import postprocess
from postproc.methods.baselines import (
    STRATEGIES,
    TREE_SCHEMA,
    TreeCounts,
    adpc,
    bottom_up,
    calibrate_to_totals,
    children_per_node,
    clip_negative,
    clip_tree,
    flaxman_population,
    gdpc,
    hay,
    hay_consistency,
    measure_bottom,
    measure_tree,
    rdpc,
    sample_counts,
    srs,
    tree_least_squares,
)
from postproc.result import Result

LEVELS = ["nation", "state", "county", "enum_dist"]


@pytest.fixture(scope="module")
def truth():
    data = synthesize_1940(30_000, seed=5)
    return tabulate(data.persons, schema=E2E_1940, levels=LEVELS, units=data.units)


@pytest.fixture(scope="module")
def population():
    return flaxman_population(300_000, levels=3, mean_leaf=20, rng=0)


# -- the population -------------------------------------------------------------------------------
def test_flaxman_population_shape_and_totals(population):
    c = children_per_node(300_000, 3, 20)
    assert population.children == c == 24                       # ⌊15000^(1/3)⌋ = ⌊24.66⌋
    assert [x.size for x in population.counts] == [1, c, c ** 2, c ** 3]
    assert all(int(x.sum()) == 300_000 for x in population.counts)
    assert abs(population.leaves.mean() - 300_000 / c ** 3) < 1e-9


def test_children_per_node_is_exact_at_powers():
    assert children_per_node(1000, 3, 1) == 10
    assert children_per_node(999, 3, 1) == 9
    with pytest.raises(PostprocError, match="fill no level"):
        children_per_node(10, 3, 20)


# -- GDPC, ADPC, RDPC -----------------------------------------------------------------------------
def test_gdpc_margins_are_sums_and_noise_has_the_geometric_variance(population):
    noisy = gdpc(population, 0.5, rng=1)
    c = population.children
    for j in range(population.depth):
        assert np.array_equal(noisy.counts[j], noisy.counts[j + 1].reshape(-1, c).sum(axis=1))
    error = noisy.leaves - population.leaves
    variance = two_sided_geometric_variance(0.5)
    # 13,824 leaves: the sample variance's sd is ≈ var·sqrt(kurtosis−1)/sqrt(n) < 0.03·var;
    # 0.1·var is > 3 sd (false-failure rate < 0.3 %).
    assert abs(error.var() - variance) < 0.1 * variance
    assert abs(error.mean()) < 5 * np.sqrt(variance / error.size)


def test_adpc_is_the_mean_of_p_gdpc_runs_with_the_same_seeds(population):
    runs = 4
    mean = adpc(population, 1.0, rng=7, runs=runs)
    parts = [gdpc(population, 1.0 / runs, Randomness.simulation(7).child(p))
             for p in range(runs)]
    for j in range(population.depth + 1):
        expected = np.mean([part.counts[j] for part in parts], axis=0)
        assert np.allclose(mean.counts[j], expected, rtol=0, atol=1e-9)
    assert mean.method == "adpc" and mean.provenance["runs"] == runs


def _raking_gap(tree: TreeCounts):
    """Largest |Σ children − parent| over all sibling groups, and the float bound it must meet."""
    c = tree.children
    gaps, bounds = [], []
    for j in range(tree.depth):
        groups = tree.counts[j + 1].reshape(-1, c)
        gaps.append(np.abs(groups.sum(axis=1) - tree.counts[j]))
        # C products and C − 1 additions, each ≤ 2^-53 relative: 4·C·2^-52 · Σ|child| is ample.
        bounds.append(4 * c * 2.0 ** -52 * np.abs(groups).sum(axis=1) + 1e-300)
    return np.concatenate(gaps), np.concatenate(bounds)


def test_raking_sums_to_parents_exactly_up_to_float_rounding(population):
    raked = rdpc(population, 1.0, rng=3)
    gap, bound = _raking_gap(raked)
    assert np.all(gap <= bound)
    assert raked.provenance["equal_splits"] == [0, 0, 0]
    assert raked.provenance["z_per_level"] == pytest.approx(1.0 / 4)


def test_raking_splits_equally_when_the_siblings_noisy_sum_is_not_positive():
    empty = TreeCounts.from_leaves(np.zeros(4 ** 3, dtype=np.int64), 4)
    raked = rdpc(empty, 0.05, rng=11)                 # noise sd ≈ 113 on counts of 0
    assert sum(raked.provenance["equal_splits"]) > 0
    gap, bound = _raking_gap(raked)
    assert np.all(gap <= bound)
    assert np.all(np.isfinite(raked.leaves))


def test_rdpc_on_a_chain_copies_the_root():
    chain = TreeCounts.from_leaves(np.array([50]), 1, depth=3)
    raked = rdpc(chain, 1.0, rng=2)
    assert all(np.allclose(level, raked.counts[0]) for level in raked.counts)


def test_clip_tree_has_no_negatives(population):
    clipped = clip_tree(gdpc(population, 0.05, rng=4))
    assert all((level >= 0).all() for level in clipped.counts)


@pytest.mark.parametrize("call, fragment", [
    (lambda p: gdpc(p, 0), "epsilon must be > 0"),
    (lambda p: adpc(p, 1, runs=0), "runs must be a positive integer"),
    (lambda p: rdpc(p, float("inf")), "epsilon must be a finite positive number"),
    (lambda p: TreeCounts(2, (np.array([1]), np.array([1, 2, 3]))), "has 2 units"),
    (lambda p: TreeCounts(0, (np.array([1]),)), "children must be a positive integer"),
    (lambda p: srs(p, 1.5), r"fraction must be in \(0, 1\]"),
])
def test_bad_arguments_are_rejected(population, call, fragment):
    with pytest.raises(PostprocError, match=fragment):
        call(population)


# -- measuring, then reconciling: the same numbers as the one-call kernels they replaced ----------
# The kernels of gdpc, adpc, rdpc (postproc/methods/baselines/tree.py) and bottom_up
# (postproc/methods/baselines/histograms.py) as of commit 59b7e9f, before they became a measuring
# step and a reconciling step; verbatim but for returning bare arrays. The compositions must give
# the same numbers from the same rng: same streams, same draws, same arithmetic.
def _reference_sums(leaves, children, depth):
    counts = [leaves]
    for _ in range(depth):
        counts.append(counts[-1].reshape(-1, children).sum(axis=1))
    return list(reversed(counts))


def _reference_gdpc(truth, epsilon, rng, sensitivity=1.0):
    rnd = as_randomness(rng)
    noise = sample_two_sided_geometric(epsilon / sensitivity, truth.leaves.size, rnd)
    return _reference_sums(truth.leaves.astype(np.int64) + noise, truth.children, truth.depth)


def _reference_adpc(truth, epsilon, rng, runs=4, sensitivity=1.0):
    rnd = as_randomness(rng)
    total = np.zeros(truth.leaves.size, dtype=np.float64)
    for p in range(runs):
        total += _reference_gdpc(truth, epsilon / runs, rnd.child(p), sensitivity)[-1]
    return _reference_sums(total / runs, truth.children, truth.depth)


def _reference_rdpc(truth, epsilon, rng, sensitivity=1.0):
    z = epsilon / (truth.depth + 1) / sensitivity
    rnd = as_randomness(rng)
    c = truth.children
    raked = [truth.counts[0].astype(np.float64) + sample_two_sided_geometric(z, 1, rnd.child(0))]
    equal_splits = []
    for j in range(1, truth.depth + 1):
        noisy = (truth.counts[j].astype(np.float64)
                 + sample_two_sided_geometric(z, truth.counts[j].size, rnd.child(j)))
        groups = noisy.reshape(-1, c)
        sums = groups.sum(axis=1)
        parent = raked[-1]
        bad = sums <= 0
        with np.errstate(divide="ignore", invalid="ignore"):
            child = groups * (parent / np.where(bad, 1.0, sums))[:, None]
        child[bad] = (parent[bad] / c)[:, None]
        raked.append(child.ravel())
        equal_splits.append(int(bad.sum()))
    return raked, equal_splits


def _reference_bottom_up(truth, epsilon, rng, sensitivity=2.0):
    rnd = as_randomness(rng)
    leaves = truth.counts[-1]
    out = [leaves.astype(np.int64)
           + sample_two_sided_geometric(epsilon / sensitivity, leaves.shape, rnd)]
    geo = truth.geography
    for li in range(geo.depth - 1, 0, -1):
        out.append(np.add.reduceat(out[-1], geo.child_offsets(li - 1)[:-1], axis=0))
    return list(reversed(out))


#: Every kind of rng, made afresh for each call (a seed, a stream of a seed, a caller's Generator).
RNGS = {"seed": lambda: 11, "stream": lambda: Randomness.simulation(3).child(2, 5),
        "generator": lambda: np.random.default_rng(8)}
#: (children, depth, mean leaf): C ≥ 8 (numpy sums sibling groups pairwise), C < 8, a chain, and
#: an empty tree (at small ε many sibling groups have a noisy sum ≤ 0: RDPC's equal splits).
FLAXMAN_TREES = {"C=9,J=3": (9, 3, 20), "C=3,J=4": (3, 4, 5), "chain": (1, 3, 50),
                 "empty": (4, 3, 0)}


def _tree(name):
    children, depth, mean = FLAXMAN_TREES[name]
    leaves = np.random.default_rng(1).poisson(mean, children ** depth).astype(np.int64)
    return TreeCounts.from_leaves(leaves, children, depth=depth)


def _same(mine, theirs):
    assert len(mine) == len(theirs)
    for a, b in zip(mine, theirs):
        assert a.dtype == b.dtype and np.array_equal(a, b)


@pytest.mark.parametrize("tree", FLAXMAN_TREES)
@pytest.mark.parametrize("rng", RNGS)
@pytest.mark.parametrize("epsilon, sensitivity", [(0.05, 1.0), (1.0, 1.0), (1.5, 2.0)])
def test_tree_baselines_reproduce_the_one_call_kernels_draw_for_draw(tree, rng, epsilon,
                                                                     sensitivity):
    truth, fresh = _tree(tree), RNGS[rng]
    _same(gdpc(truth, epsilon, fresh(), sensitivity=sensitivity).counts,
          _reference_gdpc(truth, epsilon, fresh(), sensitivity))
    for runs in (1, 2, 4, 8):       # the averaged leaves are binary fractions: sums are exact
        _same(adpc(truth, epsilon, fresh(), runs=runs, sensitivity=sensitivity).counts,
              _reference_adpc(truth, epsilon, fresh(), runs, sensitivity))
    raked = rdpc(truth, epsilon, fresh(), sensitivity=sensitivity)
    expected, splits = _reference_rdpc(truth, epsilon, fresh(), sensitivity)
    _same(raked.counts, expected)
    assert raked.provenance["equal_splits"] == splits
    if tree == "empty" and epsilon == 0.05:
        assert sum(splits) > 0                       # the equal-split branch is exercised


def test_adpc_with_runs_not_a_power_of_two_matches_to_float_rounding():
    # With P = 3 the averaged leaves are not binary fractions, so their sums depend on the order
    # of addition: the reference summed each sibling group with numpy's pairwise sum,
    # bottom_up_sums adds them left to right (np.add.reduceat). The leaves are the same numbers;
    # each sum of C = 9 terms over J = 3 levels is within J·C·2⁻⁵² of the other, relatively
    # (the counts are positive).
    truth = _tree("C=9,J=3")
    mine, theirs = adpc(truth, 1.0, 5, runs=3), _reference_adpc(truth, 1.0, 5, runs=3)
    assert np.array_equal(mine.leaves, theirs[-1])
    for a, b in zip(mine.counts, theirs):
        np.testing.assert_allclose(a, b, rtol=3 * 9 * 2.0 ** -52, atol=0)


@pytest.mark.parametrize("rng", RNGS)
def test_bottom_up_reproduces_the_one_call_kernel_draw_for_draw(truth, rng):
    for sensitivity in (2.0, 1.0):
        est = bottom_up(truth, 0.7, RNGS[rng](), sensitivity=sensitivity)
        _same(est.histograms, _reference_bottom_up(truth, 0.7, RNGS[rng](), sensitivity))
    assert est.method == "bottom_up" and est.randomness["mode"] == "simulation"


def test_the_baselines_keep_their_provenance(population):
    assert {"method", "epsilon", "z", "randomness"} <= set(gdpc(population, 1, 1).provenance)
    assert adpc(population, 1, 1, runs=3).provenance["runs"] == 3
    assert adpc(population, 1, 1).provenance["z_per_run"] == pytest.approx(1 / 4)
    raked = rdpc(population, 1, 1)
    assert raked.provenance["z_per_level"] == pytest.approx(1 / 4)
    assert (raked.provenance["measurement"], raked.provenance["reconciler"]) == \
        ("every_level", "rake_unclipped")


# -- the measuring step ---------------------------------------------------------------------------
def _measured(noisy):
    return [lv for lv in noisy.levels if noisy.queries(lv)]


def test_measure_tree_strategies_measure_what_they_say(population):
    leaves = measure_tree(population, 2.0, 1, strategy="leaves")
    assert _measured(leaves) == ["level3"] and leaves.schema == TREE_SCHEMA
    m = leaves.get("level3", "detailed")
    assert m.values.dtype == np.int64 and m.values.shape == (population.leaves.size, 1)
    assert np.all(m.variances == two_sided_geometric_variance(2.0))

    averaged = measure_tree(population, 2.0, 1, strategy="averaged_leaves", runs=5)
    m = averaged.get("level3", "detailed")
    assert _measured(averaged) == ["level3"] and m.values.dtype == np.float64
    assert np.array_equal(m.values * 5, np.round(m.values * 5))        # means of 5 integers
    assert m.variances[0, 0] == pytest.approx(two_sided_geometric_variance(2.0 / 5) / 5)

    every = measure_tree(population, 2.0, 1, strategy="every_level")
    assert _measured(every) == list(population.geography.levels)
    spent = sum(p["detailed"]["budget"] for p in every.provenance["parameters"].values())
    assert spent == pytest.approx(2.0)                 # ε/(J+1) on each of J+1 levels
    assert every.provenance["parameters"]["level0"]["detailed"]["z"] == pytest.approx(0.5)
    assert set(STRATEGIES) == {"leaves", "averaged_leaves", "every_level"}


def test_averaged_leaves_have_the_stated_variance(population):
    noisy = measure_tree(population, 1.0, 2, strategy="averaged_leaves")       # P = 4
    error = noisy.get("level3", "detailed").values[:, 0] - population.leaves
    variance = noisy.get("level3", "detailed").variances[0, 0]
    # 13,824 leaves; the mean of 4 discrete Laplace draws has kurtosis < 4, so the sample
    # variance's sd is < var·sqrt(3/13824) < 0.015·var: 0.1·var is > 6 sd (false failure < 1e-9).
    assert abs(error.var() - variance) < 0.1 * variance
    assert variance > two_sided_geometric_variance(1.0)          # more than GDPC's, at equal ε


@pytest.mark.parametrize("call, fragment", [
    (lambda p: measure_tree(p, 1, strategy="root"), "unknown measurement strategy 'root'"),
    (lambda p: measure_tree(p, 1, strategy="leaves", runs=2), "runs is an option of the "
                                                               "'averaged_leaves' strategy"),
    (lambda p: measure_tree(p, 1, strategy="averaged_leaves", runs=0), "runs must be a positive"),
    (lambda p: measure_tree(p, -1, strategy="leaves"), "epsilon must be a positive number"),
    (lambda p: measure_tree(p, 1, strategy="leaves", sensitivity=0), "sensitivity must be > 0"),
    (lambda p: measure_tree(p, "1", strategy="leaves"), "pass the number itself"),
    (lambda p: measure_tree(TreeCounts.from_leaves([0.5, 1.0], 2), 1, strategy="leaves"),
     "not whole numbers"),
])
def test_measure_tree_rejects_bad_arguments(population, call, fragment):
    with pytest.raises(PostprocError, match=fragment):
        call(population)


def test_tree_measurements_go_to_any_registered_post_processor(population):
    every = measure_tree(population, 1.0, 6, strategy="every_level")
    for method, baseline in (("rake_unclipped", rdpc), ("hay", hay)):
        tree = TreeCounts.from_result(postprocess(every, method))
        _same(tree.counts, baseline(population, 1.0, 6).counts)
    leaves = measure_tree(population, 1.0, 6, strategy="leaves")
    _same(TreeCounts.from_result(postprocess(leaves, "bottom_up")).counts,
          gdpc(population, 1.0, 6).counts)
    small = TreeCounts.from_leaves(np.arange(27), 3)
    integer = TreeCounts.from_result(postprocess(
        measure_tree(small, 1.0, 0, strategy="every_level"), "topdown"))
    assert integer.leaves.dtype.kind == "i" and (integer.leaves >= 0).all()
    assert np.array_equal(integer.counts[-2], integer.leaves.reshape(-1, 3).sum(axis=1))


def test_a_tree_is_a_one_cell_hierarchy_and_back(population):
    hierarchy = population.to_hierarchy()
    assert hierarchy.schema == TREE_SCHEMA and hierarchy.levels == ("level0", "level1",
                                                                    "level2", "level3")
    for j in range(population.depth + 1):
        assert np.array_equal(hierarchy.totals(j), population.counts[j])
        assert np.array_equal(hierarchy.geography.parents[j], population.parents(j))
    noisy = measure(hierarchy, Workload.from_expressions(TREE_SCHEMA, {"detailed": "detailed"}),
                    Budget("pure", 1, {lv: "1/4" for lv in hierarchy.levels}, {"detailed": 1}),
                    rng=3)
    tree = TreeCounts.from_result(postprocess(noisy, "hay"))
    assert tree.children == population.children and tree.method == "hay"
    assert population.geography is TreeCounts.from_leaves(population.leaves, 24).geography
    with pytest.raises(ValueError):
        population.geography.parents[1][0] = 5                  # shared, so read-only


def test_from_result_refuses_what_is_not_a_tree(truth, population):
    with pytest.raises(PostprocError, match="one count per unit; this result has 192 cells"):
        TreeCounts.from_result(bottom_up(truth, 1.0, rng=0))
    from hierarchy.geography import Geography
    uneven = Geography(("a", "b"), (np.array(["r"]), np.array(["x", "y", "z"])),
                       (np.array([-1]), np.array([0, 0, 0])))
    nested = Geography(("a", "b", "c"), (np.array(["r"]), np.array(["x", "y"]),
                                         np.array(["1", "2", "3"])),
                       (np.array([-1]), np.array([0, 0]), np.array([0, 0, 1])))
    hists = (np.ones((1, 1)), np.ones((2, 1)), np.ones((3, 1)))
    assert TreeCounts.from_result(Result("x", TREE_SCHEMA, uneven, Workload.from_expressions(
        TREE_SCHEMA, {"detailed": "detailed"}), hists[:1] + (np.ones((3, 1)),))).children == 3
    with pytest.raises(PostprocError, match="not a regular tree"):
        TreeCounts.from_result(Result("x", TREE_SCHEMA, nested, Workload.from_expressions(
            TREE_SCHEMA, {"detailed": "detailed"}), hists))
    with pytest.raises(PostprocError, match="not whole numbers"):
        rdpc(population, 1.0, rng=0).to_hierarchy()


def test_measure_bottom_measures_the_bottom_detailed_cells_only(truth):
    noisy = measure_bottom(truth, 1.0, 2)
    assert _measured(noisy) == ["enum_dist"] and noisy.queries("enum_dist") == ("detailed",)
    assert np.all(noisy.get("enum_dist", "detailed").variances
                  == two_sided_geometric_variance(0.5))              # z = ε/Δ, Δ = 2
    hhgq = Workload((marginal(E2E_1940, "hhgq", name="hhgq"),))
    assert measure_bottom(truth, 1.0, 2, workload=hhgq).workload.names == ("detailed", "hhgq")
    # a query named 'detailed' that is not: refused by the workload itself now
    with pytest.raises(HierarchyError, match="the query named 'detailed' is marginal"):
        measure_bottom(truth, 1.0, 2, workload=Workload((marginal(E2E_1940, "hhgq",
                                                                  name="detailed"),)))


# -- closed-form least squares --------------------------------------------------------------------
def _stacked_lstsq(parents, terms, cells):
    """Independent solve: the leaves' histograms by lstsq of √w·Q·(Σ leaves under u) = √w·y."""
    depth = len(parents)
    n_leaves = len(parents[-1])
    owner = [None] * depth
    owner[-1] = np.arange(n_leaves)
    for li in range(depth - 1, 0, -1):
        owner[li - 1] = np.asarray(parents[li])[owner[li]]
    rows, rhs = [], []
    for li, level_terms in enumerate(terms):
        for q, values, weights in level_terms:
            q = np.asarray(q.todense() if hasattr(q, "todense") else q, dtype=float)
            for u in range(values.shape[0]):
                member = (owner[li] == u).astype(float)
                block = np.kron(member, q)                     # answers × (leaves·cells)
                root_w = np.sqrt(np.broadcast_to(weights, values.shape)[u])
                rows.append(root_w[:, None] * block)
                rhs.append(root_w * values[u])
    theta = np.linalg.lstsq(np.vstack(rows), np.concatenate(rhs), rcond=None)[0]
    leaves = theta.reshape(n_leaves, cells)
    return [np.array([leaves[owner[li] == u].sum(axis=0) for u in range(len(parents[li]))])
            for li in range(depth)]


TREES = {
    "unbalanced": [[-1], [0, 0, 0], [0, 0, 1, 2, 2, 2, 2]],
    "deep chain": [[-1], [0], [0], [0], [0, 0]],
    "single unit": [[-1]],
    "wide": [[-1], [0] * 9],
}


@pytest.mark.parametrize("name", TREES)
def test_tree_least_squares_equals_an_independent_lstsq(name):
    rng = np.random.default_rng(len(name))
    parents = [np.array(p) for p in TREES[name]]
    queries = [np.eye(3), np.ones((1, 3)), np.array([[1.0, 1, 0], [0, 0, 1]])]
    terms = []
    for li, p in enumerate(parents):
        level_terms = []
        for qi, q in enumerate(queries):
            if li == 1 and qi == 0 and len(parents) > 2:
                continue                       # a level without the detailed query is fine
            values = rng.normal(20, 5, (p.size, q.shape[0]))
            weights = rng.uniform(0.2, 3.0, (p.size, q.shape[0]))
            level_terms.append((q, values, weights))
        terms.append(level_terms)
    x = tree_least_squares(parents, terms, 3)
    expected = _stacked_lstsq(parents, terms, 3)
    for li in range(len(parents)):
        assert np.allclose(x[li], expected[li], rtol=0, atol=1e-9)
    for li in range(1, len(parents)):                          # children sum to parents
        summed = np.zeros_like(x[li - 1])
        np.add.at(summed, parents[li], x[li])
        assert np.allclose(summed, x[li - 1], rtol=0, atol=1e-9)


def _hay_published(noisy_levels, k):
    """Hay et al. (2010) §4: the two-pass closed form for a k-ary tree, equal variances."""
    depth = len(noisy_levels)
    z = [None] * depth
    z[-1] = noisy_levels[-1].astype(float)
    for li in range(depth - 2, -1, -1):
        ell = depth - li                                        # height: leaves have 1
        a = (k ** ell - k ** (ell - 1)) / (k ** ell - 1)
        b = (k ** (ell - 1) - 1) / (k ** ell - 1)
        z[li] = a * noisy_levels[li] + b * z[li + 1].reshape(-1, k).sum(axis=1)
    h = [z[0]]
    for li in range(1, depth):
        parent_gap = h[-1] - z[li].reshape(-1, k).sum(axis=1)
        h.append(z[li] + np.repeat(parent_gap / k, k))
    return h


def test_hay_equals_the_published_two_pass_formulas():
    pop = TreeCounts.from_leaves(np.random.default_rng(2).integers(0, 40, 3 ** 4), 3)
    est = hay(pop, 2.0, rng=9)
    rnd = Randomness.simulation(9)
    from hierarchy.mechanisms import sample_two_sided_geometric
    z = 2.0 / 5
    noisy = [c + sample_two_sided_geometric(z, c.size, rnd.child(j))
             for j, c in enumerate(pop.counts)]
    for mine, theirs in zip(est.counts, _hay_published(noisy, 3)):
        assert np.allclose(mine, theirs, rtol=0, atol=1e-9)


def test_hay_consistency_of_e2e_measurements_equals_lstsq():
    # nation → 2 states → 3 counties, 192 cells: 576 unknowns, small enough for dense lstsq
    rng = np.random.default_rng(4)
    n = 2_000
    county = rng.integers(0, 3, n)
    persons = pd.DataFrame({"state": (county // 2).astype(str), "county": county.astype(str),
                            "hhgq": rng.choice([0, 2, 3], n), "votingage": rng.integers(0, 2, n),
                            "hispanic": rng.integers(0, 2, n), "cenrace": rng.integers(0, 6, n)})
    levels = ["nation", "state", "county"]
    small = tabulate(persons, schema=E2E_1940, levels=levels)
    noisy = measure(small, e2e_workload(E2E_1940), Budget.e2e(1, levels), rng=5)
    est = hay_consistency(noisy)
    terms = [[(noisy.workload[q].matrix, noisy.get(lv, q).values.astype(float),
               noisy.get(lv, q).weights) for q in noisy.queries(lv)] for lv in levels]
    expected = _stacked_lstsq(small.geography.parents, terms, 192)
    for li in range(3):
        assert np.allclose(est.histograms[li], expected[li], rtol=0, atol=1e-7)
    assert np.allclose(small.geography.aggregate(est.histograms[2], 2, 1), est.histograms[1],
                       atol=1e-8)
    assert est.method == "hay"


# -- clipping, bottom-up, calibration -------------------------------------------------------------
def test_clip_negative_of_noisy_measurements(truth):
    noisy = measure(truth, e2e_workload(E2E_1940), Budget.e2e(0.5, LEVELS), rng=6)
    clipped = clip_negative(noisy)
    for li, level in enumerate(LEVELS):
        values = noisy.get(level, "detailed").values
        assert (values < 0).any() and (clipped.histograms[li] >= 0).all()
        assert np.array_equal(clipped.histograms[li], np.maximum(values, 0))


def test_bottom_up_margins_are_sums_of_the_noisy_cells(truth):
    est = bottom_up(truth, 1.0, rng=8)
    geo = truth.geography
    for li in range(len(LEVELS) - 1):
        summed = geo.aggregate(est.histograms[-1], len(LEVELS) - 1, li)
        assert np.array_equal(est.histograms[li], summed)             # exact integers
    assert np.array_equal(est.answers("county", "va_hisp_race"),
                          e2e_workload(E2E_1940)["va_hisp_race"].answer(est.histograms[2]))
    error = est.histograms[-1] - truth.counts[-1]
    variance = two_sided_geometric_variance(0.5)                      # z = ε / Δ, Δ = 2
    assert abs(error.var() - variance) < 0.1 * variance               # > 10 sd of 40k cells


@pytest.mark.parametrize("method", ["additive", "proportional"])
def test_calibration_hits_the_published_totals(truth, method):
    raw = bottom_up(truth, 0.2, rng=1)
    est = calibrate_to_totals(raw, "state", truth.totals("state"), method=method)
    assert np.allclose(est.histograms[1].sum(axis=1), truth.totals("state"), atol=1e-6)
    assert np.allclose(est.histograms[0].sum(), truth.totals("nation")[0])
    geo = truth.geography
    assert np.allclose(geo.aggregate(est.histograms[3], 3, 2), est.histograms[2])
    if method == "proportional":
        assert all((h >= 0).all() for h in est.histograms)
    else:                       # the same shift for every cell of a state: least squares
        shift = est.histograms[3] - raw.histograms[3]
        state_of = geo.parents[2][geo.parents[3]]
        for s in range(3):
            assert np.allclose(shift[state_of == s], shift[state_of == s][0, 0])
    with pytest.raises(PostprocError, match="3 totals for the 49 units"):
        calibrate_to_totals(est, "state", [1, 2, 3])


def test_estimate_validates_shapes(truth):
    with pytest.raises(PostprocError, match="expected"):
        Result("x", E2E_1940, truth.geography, e2e_workload(E2E_1940),
                 tuple(np.zeros((1, 192)) for _ in LEVELS))


# -- simple random sampling -----------------------------------------------------------------------
def test_sample_is_without_replacement_and_of_the_right_size():
    counts = np.array([[5, 0, 7], [100, 3, 0]])
    for seed in range(20):
        s = sample_counts(counts, 0.4, rng=seed)
        assert s.sum() == round(0.4 * counts.sum()) and (0 <= s).all() and (s <= counts).all()
    assert np.array_equal(sample_counts(counts, 1.0, rng=0), counts)


def test_srs_is_unbiased():
    # 20 leaves, N = 1000, f = 0.3 (fN = 300 exactly): E[ĉ] = c. Over R = 2000 samples the mean's
    # sd is sqrt(Var ĉ / R) with the hypergeometric variance; |z| < 4.5 for all 20 cells fails by
    # chance with probability < 20 · 6.8e-6 ≈ 1.4e-4.
    leaves = np.random.default_rng(0).multinomial(1000, np.full(20, 0.05))
    pop = TreeCounts.from_leaves(leaves, 20)
    f, n_total, reps = 0.3, 1000, 2000
    generator = np.random.default_rng(1)
    draws = np.array([srs(pop, f, rng=generator).leaves for _ in range(reps)])
    n = f * n_total
    var = leaves * (n_total - leaves) / n_total * (n_total - n) / (n_total - 1) * n / n_total
    var = var / f ** 2
    z = (draws.mean(axis=0) - leaves) / np.sqrt(var / reps)
    assert np.all(np.abs(z[var > 0]) < 4.5)
    assert np.allclose(draws.sum(axis=1), n_total)        # the weighted total is exact


def test_srs_on_the_hierarchy_sums_up(truth):
    est = srs(truth, 0.25, rng=2)
    assert est.method == "srs f=0.25"
    assert np.allclose(est.histograms[0].sum(), truth.totals("nation")[0])
    geo = truth.geography
    assert np.allclose(est.histograms[2], geo.aggregate(est.histograms[3], 3, 2))
