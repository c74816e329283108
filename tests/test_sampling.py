"""Conditional sampling under invariants (docs/conditional_sampling.md): exact algebra, both
samplers against exact conditional pmfs, invariants, tuning, errors, reproducibility.

Statistical tests use fixed seeds, so they are deterministic; each states the false-failure rate
it would have with a fresh seed if the sampler were exactly right.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from hierarchy.randomness import Randomness
from postproc.errors import PostprocError
from postproc.methods.sampling import (
    acceptance_curve,
    bareiss_determinant,
    choose_index_set,
    conditional_target,
    effective_sample_size,
    integer_kernel_basis,
    mis_index_set,
    move_structure,
    read_count_table,
    row_basis,
    sample_conditional,
    sample_lattice,
    sample_mis,
    table_target,
)
from postproc.methods.sampling.mis import MISKernel
from postproc.methods.sampling.target import log_noise_density

DATA = Path(__file__).resolve().parents[1] / "examples" / "data" / "gong_sex_age.csv"
INVARIANTS = ["total", "marginal(sex)", "marginal(voting_age)"]
ALPHA = 1e-3   # chi-square tests: false-failure rate 0.1 % per test for a fresh seed


@pytest.fixture(scope="module")
def gong():
    return table_target(read_count_table(DATA), INVARIANTS, epsilon=0.5)


# ------------------------------------------------------------------------------------------------
# exact linear algebra
# ------------------------------------------------------------------------------------------------
def test_bareiss_matches_numpy_on_random_integer_matrices():
    rng = np.random.default_rng(0)
    for size in range(1, 7):
        for _ in range(20):
            M = rng.integers(-4, 5, (size, size))
            assert bareiss_determinant(M.tolist()) == round(np.linalg.det(M))


def test_bareiss_is_exact_beyond_float_precision():
    M = [[10**12, 1], [1, 10**12 + 1]]
    assert bareiss_determinant(M) == 10**24 + 10**12 - 1


def test_row_basis_drops_implied_rows_and_names_contradictions():
    A = [[1, 1, 1, 1], [1, 1, 0, 0], [0, 0, 1, 1], [1, 0, 1, 0]]
    assert row_basis(A, [10, 4, 6, 5]).tolist() == [0, 1, 3]
    with pytest.raises(PostprocError, match="'male' = 7 contradicts .* imply 6"):
        row_basis(A, [10, 4, 7, 5], labels=["total", "female", "male", "young"])


def test_index_set_is_unimodular_and_solves_exactly_for_marginal_invariants(gong):
    ix = mis_index_set(gong)
    assert ix.basic.size == 3 and ix.free.size == 43 and abs(ix.determinant) == 1
    block = gong.A[np.ix_(ix.rows, ix.basic)]
    assert abs(bareiss_determinant(block.tolist())) == 1
    # any integer s_I gives an integer s_{I^c} with A s = a
    rng = np.random.default_rng(1)
    s_free = rng.integers(-5, 20, (50, ix.free.size))
    s = np.zeros((50, gong.n), dtype=np.int64)
    s[:, ix.free] = s_free
    s[:, ix.basic] = ix.solve(gong.a, s_free)
    assert np.array_equal(s @ gong.A.T, np.broadcast_to(gong.a, (50, gong.a.size)))
    # the basic cells are the largest counts (fewest negative proposals)
    assert set(gong.centre[ix.basic]) <= set(np.sort(gong.centre)[-6:])


def test_index_set_for_random_nested_marginals_is_verified():
    rng = np.random.default_rng(2)
    for _ in range(10):
        shape = tuple(rng.integers(2, 4, 3))
        n = int(np.prod(shape))
        cells = np.indices(shape).reshape(3, -1)
        rows = [np.ones(n, int)]
        for axis in range(2):
            for level in range(shape[axis]):
                rows.append((cells[axis] == level).astype(int))
        A = np.array(rows)
        ix = choose_index_set(A, prefer=list(rng.permutation(n)))
        assert abs(bareiss_determinant(A[np.ix_(ix.rows, ix.basic)].tolist())) == 1
        K = integer_kernel_basis(A)
        assert K.shape == (n, n - np.linalg.matrix_rank(A))
        assert not np.any(A @ K)


def test_no_valid_index_set_is_a_clear_error():
    with pytest.raises(PostprocError, match="no proposal index set I exists.*searched all 1"):
        choose_index_set(np.array([[1, 1], [1, -1]]))
    # the MIS refuses it too, before sampling
    t = conditional_target([[1, 1], [1, -1]], [4, 0], centre=[2, 2], epsilon=1.0)
    with pytest.raises(PostprocError, match="no proposal index set"):
        sample_mis(t, draws=10, rng=0)


def test_continuous_index_set_only_needs_invertibility():
    ix = choose_index_set(np.array([[2.0, 1.0, 0.0], [0.0, 1.0, 3.0]]), integer=False)
    assert not ix.integer and abs(ix.determinant) > 0
    x = ix.solve([3.0, 4.0], [[0.5]])
    s = np.zeros(3)
    s[ix.free], s[ix.basic] = 0.5, x[0]
    assert np.allclose(np.array([[2, 1, 0], [0, 1, 3]]) @ s, [3, 4])


def test_move_structure_of_gong_table_is_four_classes_and_the_swap(gong):
    ms = move_structure(gong.A)
    assert sorted(np.bincount(ms.cell_class).tolist()) == [4, 4, 19, 19]
    assert ms.class_kernel.shape == (4, 1)
    assert sorted(ms.class_kernel[:, 0].tolist()) == [-1, -1, 1, 1]


# ------------------------------------------------------------------------------------------------
# targets and validation
# ------------------------------------------------------------------------------------------------
def test_target_rejects_bad_input_with_messages():
    with pytest.raises(PostprocError, match="exactly one of epsilon"):
        conditional_target([[1, 1]], [2], centre=[1, 1])
    with pytest.raises(PostprocError, match="must hold integers"):
        conditional_target([[1, 1]], [2], centre=[0.5, 1.5], epsilon=1.0)
    with pytest.raises(PostprocError, match="unknown mechanism"):
        conditional_target([[1, 1]], [2], centre=[1, 1], mechanism="poisson", epsilon=1.0)
    with pytest.raises(PostprocError, match="A has shape"):
        conditional_target([[1, 1, 1]], [2], centre=[1, 1], epsilon=1.0)


def test_unsatisfiable_invariants_are_clear_errors():
    # equalities contradict each other
    A = [[1, 1, 1, 1], [1, 1, 0, 0], [0, 0, 1, 1]]
    t = conditional_target(A, [10, 4, 7], centre=[1, 2, 3, 4], epsilon=0.5,
                           row_labels=["total", "female", "male"])
    with pytest.raises(PostprocError, match="unsatisfiable: 'male' = 7 contradicts"):
        sample_lattice(t, draws=10, rng=0)
    with pytest.raises(PostprocError, match="unsatisfiable"):
        sample_mis(t, draws=10, rng=0, proposal_epsilon=0.6)
    # consistent equalities, but no nonnegative solution
    t = conditional_target(A, [10, 12, -2], centre=[1, 2, 3, 4], epsilon=0.5)
    with pytest.raises(PostprocError, match="unsatisfiable: no integer s satisfies"):
        sample_conditional(t, draws=10, rng=0)


def test_start_is_the_l1_closest_point_when_the_centre_is_outside():
    t = conditional_target([[1, 1, 1]], [6], centre=[5, 5, 5], epsilon=1.0)
    s = t.start()
    assert s.sum() == 6 and np.abs(s - 5).sum() == 9 and bool(t.feasible(s))


# ------------------------------------------------------------------------------------------------
# exact conditional pmfs on enumerable tables, both samplers
# ------------------------------------------------------------------------------------------------
def _enumerate(target):
    """All states of S* (nonnegative, A s = a) and their exact conditional pmf."""
    total = int(target.a[0])
    grids = np.stack(np.meshgrid(*[np.arange(total + 1)] * target.n, indexing="ij"), -1)
    states = grids.reshape(-1, target.n)
    states = states[np.all(states @ target.A.T == target.a, axis=1)]
    logp = target.log_density(states)
    p = np.exp(logp - logp.max())
    return states, p / p.sum()


def _chi_square(draws, states, pmf):
    base = int(max(states.max(), draws.max())) + 1
    code = lambda s: (s * base ** np.arange(s.shape[1])).sum(axis=1)
    index = {c: i for i, c in enumerate(code(states).tolist())}
    observed = np.zeros(len(states))
    for c in code(draws).tolist():
        observed[index[c]] += 1          # a KeyError would mean a draw outside S*
    expected = pmf * draws.shape[0]
    small = expected < 5                 # pool sparse states so the chi-square law applies
    obs = np.concatenate([observed[~small], [observed[small].sum()]])
    exp = np.concatenate([expected[~small], [expected[small].sum()]])
    keep = exp > 0
    return stats.chisquare(obs[keep], exp[keep]).pvalue


def _small_total():
    return conditional_target([[1, 1, 1, 1, 1]], [7], centre=[3, 1, 0, 2, 1], epsilon=0.7)


def _small_margins(mechanism="geometric"):
    # sex x 3 ages; ages 1 and 2 are voting age: invariants total, female, voting age
    A = [[1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0], [0, 1, 1, 0, 1, 1]]
    centre = np.array([2, 1, 2, 1, 2, 1])
    kw = {"epsilon": 0.5} if mechanism == "geometric" else {"rho": 0.1}
    return conditional_target(A, np.array(A) @ centre, centre=centre, mechanism=mechanism, **kw)


@pytest.mark.parametrize("make", [_small_total, _small_margins,
                                  lambda: _small_margins("discrete_gaussian")],
                         ids=["total", "margins", "margins-dgauss"])
def test_lattice_matches_exact_conditional_pmf(make):
    """3000 independent chains, 150 sweeps each: final states are (near) iid draws. Chi-square
    over states (sparse states pooled), alpha 1e-3."""
    target = make()
    states, pmf = _enumerate(target)
    res = sample_lattice(target, draws=150, burn_in=0, thin=150, chains=3000, rng=11,
                         diagnostics=False)
    assert bool(np.all(target.feasible(res.final_states)))
    assert _chi_square(res.final_states, states, pmf) > ALPHA


@pytest.mark.parametrize("make", [_small_total, _small_margins,
                                  lambda: _small_margins("discrete_gaussian")],
                         ids=["total", "margins", "margins-dgauss"])
def test_mis_matches_exact_conditional_pmf(make):
    """One MIS chain of 800k iterations thinned to 4000 states (thinning ≫ the autocorrelation
    time, checked), chi-square as above, alpha 1e-3."""
    target = make()
    states, pmf = _enumerate(target)
    res = sample_mis(target, draws=800_000, burn_in=2000, thin=200, rng=12,
                     proposal_epsilon=1.2 * (target.parameter if target.mechanism == "geometric"
                                             else 1.0))
    draws = res.chain[0]
    assert bool(np.all(target.feasible(draws)))
    ess = effective_sample_size(draws)
    assert np.nanmin(ess) > 0.5 * draws.shape[0]      # thinned states are nearly independent
    assert _chi_square(draws, states, pmf) > ALPHA


def test_proposal_law_is_the_two_sided_geometric():
    """The MIS proposal noise against the exact pmf (chi-square, alpha 1e-3)."""
    target = conditional_target([[1] * 6], [30], centre=[5] * 6, epsilon=0.5)
    kernel = MISKernel(target, mis_index_set(target), 0.8)
    d_free, _, _, _ = kernel.propose(50_000, Randomness.simulation(5))
    values = d_free.ravel()
    q = math.exp(-0.8)
    ks = np.arange(-8, 9)
    pmf = (1 - q) / (1 + q) * q ** np.abs(ks)
    observed = np.array([(values == k).sum() for k in ks] + [(np.abs(values) > 8).sum()])
    expected = np.concatenate([pmf, [1 - pmf.sum()]]) * values.size
    assert stats.chisquare(observed, expected).pvalue > ALPHA


# ------------------------------------------------------------------------------------------------
# the 46-cell example: invariants, acceptance curve, ESS, reproducibility
# ------------------------------------------------------------------------------------------------
def test_every_draw_satisfies_the_invariants_exactly(gong):
    mis = sample_mis(gong, draws=50_000, rng=1, proposal_epsilon=0.6)
    lat = sample_lattice(gong, draws=500, rng=1)
    for res in (mis, lat):
        states = res.chain.reshape(-1, gong.n)
        assert states.dtype == np.int64
        assert np.array_equal(states @ gong.A.T,
                              np.broadcast_to(gong.a, (len(states), gong.a.size)))
        assert (states >= 0).all()
        assert res.invariants_hold
        assert np.array_equal(res.released @ gong.A.T, gong.a)
    assert mis.acceptance_rate > 0.005 and lat.acceptance_rate > 0.2


def test_acceptance_curve_peaks_slightly_above_epsilon(gong):
    """Gong & Meng: acceptance is highest with ε̃ a little above ε. Tolerance: the best grid point
    lies in [ε, 1.6 ε]. With 100k proposals per point the acceptance at 1.3 ε (≈ 1.6 %) exceeds
    those at 0.8 ε, 2 ε (< 0.6 %) by more than ten standard errors."""
    grid = 0.5 * np.array([0.8, 1.0, 1.2, 1.3, 1.4, 1.6, 2.0])
    curve = acceptance_curve(gong, grid, rng=3, proposals=100_000)
    assert 0.5 <= curve.best <= 0.8
    acc = np.asarray(curve.acceptance)
    assert acc[0] < acc.max() / 2 and acc[-1] < acc.max() / 2


def test_tuner_picks_a_proposal_near_the_peak(gong):
    from postproc.methods.sampling import tune_proposal_epsilon

    tuning = tune_proposal_epsilon(gong, rng=4, proposals=40_000)
    assert 0.45 <= tuning.best <= 0.85
    res = sample_mis(gong, draws=20_000, rng=4)          # tuned automatically
    assert res.settings["tuned"] and res.settings["proposal_epsilon"] == tuning.best


def test_mis_that_never_moves_refuses_to_release_the_start(gong):
    with pytest.raises(PostprocError, match="never left its start"):
        sample_mis(gong, draws=20_000, rng=1, proposal_epsilon=0.3)


def test_seeded_runs_are_reproducible_and_labelled(gong):
    a = sample_mis(gong, draws=20_000, rng=9, proposal_epsilon=0.6)
    b = sample_mis(gong, draws=20_000, rng=9, proposal_epsilon=0.6)
    assert np.array_equal(a.chain, b.chain) and np.array_equal(a.released, b.released)
    c = sample_lattice(gong, draws=200, rng=9)
    d = sample_lattice(gong, draws=200, rng=9)
    assert np.array_equal(c.chain, d.chain)
    assert a.mode == "simulation" and not a.safe_for_release
    assert "NOT SAFE" in a.randomness["label"]


def test_release_mode_works_and_says_so(gong):
    for res in (sample_mis(gong, draws=20_000, rng=None, proposal_epsilon=0.6),
                sample_lattice(gong, draws=100, rng=None)):
        assert res.mode == "release" and res.safe_for_release
        assert "release mode" in res.randomness["label"]
        assert res.invariants_hold


def test_ess_estimator_on_known_processes():
    rng = np.random.default_rng(0)
    iid = rng.standard_normal((4, 5000, 3))
    ess = effective_sample_size(iid)
    assert np.all((ess > 15_000) & (ess < 25_000))
    # AR(1) with phi = 0.5: ESS = N (1 - phi) / (1 + phi)
    x = np.zeros(20_000)
    e = rng.standard_normal(20_000)
    for t in range(1, x.size):
        x[t] = 0.5 * x[t - 1] + e[t]
    assert abs(effective_sample_size(x)[0] / (x.size / 3) - 1) < 0.2
    # two chains stuck at different values: the multi-chain ESS is tiny
    stuck = np.concatenate([np.zeros((1, 100, 1)), np.ones((1, 100, 1))]) + \
        rng.normal(0, 0.01, (2, 100, 1))
    assert effective_sample_size(stuck)[0] < 10


def test_continuous_laplace_target_both_samplers():
    A = [[1.0, 1.0, 1.0, 1.0]]
    t = conditional_target(A, [10.0], centre=[3.0, 2.5, 2.5, 2.0], mechanism="laplace",
                           epsilon=1.0)
    for res in (sample_mis(t, draws=20_000, rng=2, proposal_epsilon=1.2),
                sample_lattice(t, draws=300, rng=2)):
        assert res.released.dtype == np.float64
        assert res.invariants_hold
        assert abs(res.released.sum() - 10.0) < 1e-9


def test_sample_conditional_dispatch_and_errors(gong):
    assert sample_conditional(gong, draws=50, rng=0).sampler == "lattice"
    with pytest.raises(PostprocError, match="unknown sampler"):
        sample_conditional(gong, sampler="gibbs", draws=10, rng=0)
    with pytest.raises(PostprocError, match="takes no option 'proposal_epsilon'"):
        sample_conditional(gong, draws=10, rng=0, proposal_epsilon=0.6)


@pytest.mark.parametrize("mechanism, parameter", [
    ("geometric", 0.3), ("discrete_gaussian", 2.0), ("discrete_gaussian", 0.75),
    ("laplace", 1.7), ("gaussian", 3.0)])
def test_the_target_density_is_the_registry_mechanisms_law(mechanism, parameter):
    """log π(s) − Σ log pmf(s − c) is one constant over states: the target's noise law is the
    registry's, up to its normalizing constant."""
    from hierarchy.mechanisms import get_mechanism

    law = get_mechanism(mechanism)
    centre = np.array([3, 0, 5, 2])
    target = conditional_target([[1, 1, 1, 1]], [10], centre=centre, mechanism=mechanism,
                                parameter=parameter)
    assert target.noise == law and target.integer == law.discrete
    states = np.array([[3, 0, 5, 2], [0, 0, 10, 0], [1, 2, 3, 4], [10, 0, 0, 0], [2, 2, 3, 3]])
    if not law.discrete:
        states = states + np.array([0.5, -0.25, -0.25, 0.0])
    gap = target.log_density(states) - law.logpmf(states - centre, parameter).sum(axis=1)
    assert np.allclose(gap, gap[0], rtol=0, atol=1e-9)
    k = np.arange(-6, 7)
    kernel = log_noise_density(mechanism, k, parameter)
    assert np.allclose(kernel - kernel[6], law.logpmf(k, parameter) - law.logpmf(0, parameter))


def test_a_registered_mechanism_samples_without_touching_the_target_module():
    """A user's mechanism (a discrete Laplace with its own class) is sampled by name: its
    chain's draws are feasible and its target density is its own log pmf."""
    from dataclasses import dataclass

    from hierarchy.mechanisms import (
        Mechanism,
        register_mechanism,
        sample_two_sided_geometric,
        two_sided_geometric_logpmf,
        two_sided_geometric_variance,
        unregister_mechanism,
    )

    @dataclass(frozen=True)
    class MyDiscreteLaplace(Mechanism):
        name = "my_discrete_laplace"
        accounting = "pure"
        discrete = True
        parameter_name = "z"

        def _parameter(self, budget, sensitivity):
            return budget / sensitivity

        def variance(self, parameter):
            return two_sided_geometric_variance(parameter)

        def sample(self, parameter, size, rng=None):
            return sample_two_sided_geometric(parameter, size, rng)

        def logpmf(self, k, parameter):
            return two_sided_geometric_logpmf(k, parameter)

    register_mechanism(MyDiscreteLaplace)
    try:
        centre = np.array([4, 1, 0, 5])
        target = conditional_target([[1, 1, 0, 0], [0, 0, 1, 1]], [5, 5], centre=centre,
                                    mechanism="my_discrete_laplace", epsilon=0.5)
        reference = conditional_target([[1, 1, 0, 0], [0, 0, 1, 1]], [5, 5], centre=centre,
                                       mechanism="geometric", epsilon=0.5)
        states = np.array([[4, 1, 0, 5], [0, 5, 5, 0], [2, 3, 1, 4]])
        gap = target.log_density(states) - reference.log_density(states)
        assert np.allclose(gap, gap[0]) and target.integer and target.parameter == 0.5
        result = sample_conditional(target, draws=60, rng=3)
        draws = np.asarray(result.chain).reshape(-1, 4)
        assert target.feasible(draws).all() and result.acceptance_rate > 0
        assert len({tuple(d) for d in draws}) > 1          # the chain moved
        # the MIS kernel reads the law from the registry too: its weights for the user's
        # mechanism (the geometric law under another name) equal the built-in fast path's
        from postproc.methods.sampling.mis_kernel import MISKernel, mis_index_set, reference_epsilon
        assert reference_epsilon(target) == pytest.approx(reference_epsilon(reference))
        mine = MISKernel(target, mis_index_set(target), 0.7)
        built_in = MISKernel(reference, mis_index_set(reference), 0.7)
        d = np.random.default_rng(0).integers(-6, 7, size=(50, 4)).astype(np.float64)
        w_mine = mine.log_weight(d[:, mine.free], d[:, mine.basic])
        w_ref = built_in.log_weight(d[:, built_in.free], d[:, built_in.basic])
        assert np.allclose(w_mine - w_mine[0], w_ref - w_ref[0])
    finally:
        unregister_mechanism("my_discrete_laplace")


@pytest.mark.slow
def test_lattice_and_mis_agree_on_the_46_cell_table(gong):
    """Posterior means per cell from both samplers agree within 5 Monte Carlo standard errors."""
    mis = sample_mis(gong, draws=4_000_000, rng=21, proposal_epsilon=0.65, thin=20)
    lat = sample_lattice(gong, draws=20_000, rng=22, chains=8)
    for a, b in ((mis, lat),):
        ma, mb = a.chain.reshape(-1, gong.n).mean(0), b.chain.reshape(-1, gong.n).mean(0)
        va = a.chain.reshape(-1, gong.n).var(0) / a.ess
        vb = b.chain.reshape(-1, gong.n).var(0) / b.ess
        assert np.all(np.abs(ma - mb) < 5 * np.sqrt(va + vb))
