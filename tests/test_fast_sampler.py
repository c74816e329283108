"""Tests of the fast discrete Gaussian sampler (hierarchy.mechanisms._fast) and of
``DiscreteGaussian(exact=False)``.

Statistical tests and their false-failure rates (as in ``test_mechanisms.py``)
-------------------------------------------------------------------------------
* goodness of fit: Pearson chi-square over pooled bins, rejecting at p < 1e-4 — false-failure
  rate 1e-4 per test over seeds (the seeds are fixed, so a checkout passes or fails for good);
* mean and variance: within 5 standard errors (two-sided false-failure rate 5.7e-7 each);
* the total variation bound is checked deterministically, against the pmf in 40-digit decimal
  arithmetic (no false failures).
"""

from __future__ import annotations

import math
from decimal import Context, Decimal

import numpy as np
import pytest
from scipy import stats

from hierarchy.errors import HierarchyError
from hierarchy.measurement import measure
from hierarchy.mechanisms import (
    DiscreteGaussian,
    Mechanism,
    _fast,
    discrete_gaussian_pmf,
    discrete_gaussian_variance,
    get_mechanism,
    sample_discrete_gaussian,
    sample_discrete_gaussian_fast,
)
from hierarchy.randomness import Randomness

from test_mechanisms import P_SIMULATION, check_mean_and_variance, chi_square_pvalue, moments

DRAWS = 100_000


def _half_width(sigma2: float) -> int:
    """A grid wide enough that the mass beyond it is below 1e-18."""
    return math.ceil(9.5 * math.sqrt(sigma2)) + 2


def _fit(draws: np.ndarray, sigma2: float) -> float:
    return chi_square_pvalue(draws, lambda k: discrete_gaussian_pmf(k, sigma2),
                             _half_width(sigma2))


# ---------------------------------------------------------------------------------------------
# the law drawn
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("sigma2, seed", [(0.3, 1), (2.5, 2), (5.05, 3), (100.0, 4),
                                          (3981.63, 5), (1e6, 6), (1e7, 7)])
def test_goodness_of_fit(sigma2, seed):
    # the table method up to 1e6, the envelope at 1e7; false-failure rate 1e-4
    draws = sample_discrete_gaussian_fast(sigma2, DRAWS, Randomness.simulation(seed))
    assert _fit(draws, sigma2) > P_SIMULATION


@pytest.mark.parametrize("sigma2, seed", [(1e4, 11), (1e5, 12), (1e6, 13)])
def test_envelope_goodness_of_fit_where_a_table_would_do(sigma2, seed):
    # the envelope method forced at σ² where the grid is small; false-failure rate 1e-4
    draws = _fast._sample(sigma2, DRAWS, Randomness.simulation(seed), "envelope")
    assert _fit(draws, sigma2) > P_SIMULATION


def test_goodness_of_fit_has_power():
    # the fast draws at σ² = 2.5 are told apart from N_Z(2.7) (p ~ 1e-50 at this size)
    draws = sample_discrete_gaussian_fast(2.5, DRAWS, Randomness.simulation(1))
    assert _fit(draws, 2.7) < 1e-20


@pytest.mark.parametrize("sigma2, seed", [(0.3, 21), (5.05, 22), (948.01, 23), (1e8, 24)])
def test_mean_and_variance(sigma2, seed):
    # 5 standard errors: false-failure rate 5.7e-7 each
    draws = sample_discrete_gaussian_fast(sigma2, DRAWS, Randomness.simulation(seed))
    if sigma2 <= 1e6:
        variance, fourth = moments(lambda k: discrete_gaussian_pmf(k, sigma2), _half_width(sigma2))
    else:   # N_Z(σ²) has variance σ² and fourth moment 3σ⁴ to double precision here
        variance, fourth = discrete_gaussian_variance(sigma2), 3 * sigma2 ** 2
    check_mean_and_variance(draws, variance, fourth)


def test_huge_variance_quantiles_and_cell_offsets():
    # σ² = 1e12 (the envelope's cells have 2**14 integers): 40 equiprobable bins of the normal
    # law (N_Z(σ²) differs from it by ~1e-12 per bin here), and the draws' position within a
    # cell in 32 bins, uniform to within 1e-4 relatively; false-failure rate 1e-4 each
    sigma2 = 1e12
    draws = sample_discrete_gaussian_fast(sigma2, DRAWS, Randomness.simulation(31))
    edges = stats.norm.ppf(np.arange(1, 40) / 40, scale=math.sqrt(sigma2))
    observed = np.bincount(np.searchsorted(np.rint(edges) - 0.5, draws), minlength=40)
    assert stats.chisquare(observed).pvalue > P_SIMULATION
    bits = _fast._table_for(sigma2, "envelope").bits
    offsets = (draws & ((1 << bits) - 1)) >> (bits - 5)
    assert stats.chisquare(np.bincount(offsets, minlength=32)).pvalue > P_SIMULATION
    assert np.all(draws % 2 == draws & 1) and np.unique(draws & 1).size == 2


def test_tiny_variance_draws_only_zero():
    # P[X != 0] = 2 e^-50 / Z < 2**-60 at σ² = 0.01: the table keeps 0 alone
    draws = sample_discrete_gaussian_fast(0.01, 1000, Randomness.simulation(1))
    assert not draws.any()


def _reference_pmf(sigma2: float, values: range, ctx: Context) -> dict[int, Decimal]:
    """``N_Z(σ²)`` on ``values`` in ``ctx``'s precision (σ² read exactly from its float)."""
    twice = ctx.multiply(2, Decimal(sigma2))
    cut = 2 * max(abs(values.start), abs(values.stop)) + 50
    kernel = {k: ctx.exp(ctx.minus(ctx.divide(k * k, twice))) for k in range(-cut, cut + 1)}
    total = sum(kernel.values(), Decimal(0))
    return {k: ctx.divide(kernel[k], total) for k in values}


def _tv(law: dict[int, Decimal], sigma2: float, ctx: Context) -> Decimal:
    """Total variation distance of ``law`` (on consecutive integers) to ``N_Z(σ²)``."""
    low, high = min(law), max(law)
    pmf = _reference_pmf(sigma2, range(low, high + 1), ctx)
    outside = 1 - sum(pmf.values(), Decimal(0))   # mass the law leaves out
    return (sum((abs(law.get(k, Decimal(0)) - p) for k, p in pmf.items()), Decimal(0))
            + outside) / 2


@pytest.mark.parametrize("sigma2", [0.3, 5.05, 3981.63, 1e6])
def test_table_law_within_the_stated_distance(sigma2):
    ctx = Context(prec=40)
    table = _fast._table_for(sigma2, "table")
    law = {table.low + i: ctx.divide(w, 1 << 64) for i, w in enumerate(table.weights())}
    assert sum(table.weights()) == 1 << 64
    assert _tv(law, sigma2, ctx) < Decimal(_fast.TV_BOUND)


@pytest.mark.parametrize("sigma2", [1e4, 1e5])
def test_envelope_law_within_the_stated_distance(sigma2):
    # the law of a kept draw: P[cell j] * P[keep k | k proposed] over the cells, normalized,
    # with the keep probability exactly as the sampler computes it (53-bit uniform < exp(-x))
    ctx = Context(prec=40)
    envelope = _fast._table_for(sigma2, "envelope")
    width = 1 << envelope.bits
    law: dict[int, Decimal] = {}
    for i, weight in enumerate(envelope.cells.weights()):
        cell = envelope.cells.low + i
        k = np.arange(cell * width, (cell + 1) * width)
        nearest = envelope.nearest[cell - envelope.first]
        exponent = ((np.abs(k) - nearest).astype(np.float64)
                    * (np.abs(k) + nearest).astype(np.float64)) / (2.0 * sigma2)
        keep = np.ceil(np.ldexp(np.exp(-exponent), 53)).astype(np.int64)   # of 2**53 uniforms
        for value, kept in zip(k.tolist(), keep.tolist()):
            law[value] = Decimal(weight) * kept
    total = sum(law.values(), Decimal(0))
    law = {k: ctx.divide(v, total) for k, v in law.items()}
    assert _tv(law, sigma2, ctx) < Decimal(_fast.TV_BOUND)


# ---------------------------------------------------------------------------------------------
# streams, shapes, arguments
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("sigma2", [2.5, 1e9])
def test_deterministic_for_a_seed(sigma2):
    first = sample_discrete_gaussian_fast(sigma2, 5000, Randomness.simulation(8))
    again = sample_discrete_gaussian_fast(sigma2, 5000, Randomness.simulation(8))
    other = sample_discrete_gaussian_fast(sigma2, 5000, Randomness.simulation(9))
    assert np.array_equal(first, again) and not np.array_equal(first, other)


def test_table_method_uses_one_word_per_draw():
    # so the first n draws do not depend on how many more are asked for
    source = Randomness.simulation(4)
    short = sample_discrete_gaussian_fast(30.0, 70_000, source)
    after = source.random_raw(3)
    fresh = Randomness.simulation(4)
    fresh.random_raw(70_000)
    assert np.array_equal(after, fresh.random_raw(3))
    long = sample_discrete_gaussian_fast(30.0, 200_000, Randomness.simulation(4))
    assert np.array_equal(short, long[:70_000])


@pytest.mark.parametrize("size, shape", [(7, (7,)), ((3, 4), (3, 4)), (0, (0,)),
                                         ((2, 0, 3), (2, 0, 3)), ((), ())])
@pytest.mark.parametrize("sigma2", [4.0, 1e10])
def test_shapes_and_dtype(size, shape, sigma2):
    draws = sample_discrete_gaussian_fast(sigma2, size, Randomness.simulation(2))
    assert draws.shape == shape and draws.dtype == np.int64


def test_rng_forms_are_accepted():
    seeded = sample_discrete_gaussian_fast(9.0, 10, 5)
    assert np.array_equal(seeded, sample_discrete_gaussian_fast(9.0, 10, Randomness.simulation(5)))
    assert sample_discrete_gaussian_fast(9.0, 10, np.random.default_rng(5)).shape == (10,)


@pytest.mark.parametrize("rng", [None, Randomness.release()])
def test_release_mode_refused(rng):
    with pytest.raises(HierarchyError, match="refused in release mode.*sample_discrete_gaussian"):
        sample_discrete_gaussian_fast(2.0, 10, rng)


@pytest.mark.parametrize("sigma2", [0, -1.0, float("nan"), float("inf"), "2", 1e31])
def test_bad_sigma2_refused(sigma2):
    with pytest.raises(HierarchyError, match="sigma2"):
        sample_discrete_gaussian_fast(sigma2, 10, Randomness.simulation(1))


@pytest.mark.parametrize("size", [-1, 2.0, (3, -2), True])
def test_bad_size_refused(size):
    with pytest.raises(HierarchyError, match="size"):
        sample_discrete_gaussian_fast(2.0, size, Randomness.simulation(1))


def test_fraction_sigma2_is_its_float():
    from fractions import Fraction
    assert np.array_equal(sample_discrete_gaussian_fast(Fraction(5, 2), 100, 3),
                          sample_discrete_gaussian_fast(2.5, 100, 3))


# ---------------------------------------------------------------------------------------------
# the registry: DiscreteGaussian(exact=...)
# ---------------------------------------------------------------------------------------------
def test_exact_is_the_default_and_keeps_its_streams():
    mechanism = get_mechanism("discrete_gaussian")
    assert mechanism.exact is True and mechanism == DiscreteGaussian()
    assert np.array_equal(mechanism.sample(2.5, 300, Randomness.simulation(6)),
                          sample_discrete_gaussian(2.5, 300, Randomness.simulation(6)))


def test_fast_option_samples_the_rounded_sigma2():
    # the fast sampler draws with the σ² that variance() and logpmf() describe: 0.31 rounded up
    # to a denominator of at most 10 is 1/3
    mechanism = get_mechanism("discrete_gaussian", exact=False, max_denominator=10)
    sampled = mechanism._sampled(0.31)
    assert sampled == pytest.approx(1 / 3)
    assert np.array_equal(mechanism.sample(0.31, 500, Randomness.simulation(3)),
                          sample_discrete_gaussian_fast(sampled, 500, Randomness.simulation(3)))
    assert mechanism.variance(0.31) == discrete_gaussian_variance(sampled)


def test_fast_option_refused_in_release_mode_at_sampling():
    mechanism = DiscreteGaussian(exact=False)
    with pytest.raises(HierarchyError, match="refused in release mode"):
        mechanism.sample(4.0, 10, Randomness.release())
    assert DiscreteGaussian().sample(4.0, 10, Randomness.release()).shape == (10,)


def test_exact_option_must_be_a_bool():
    with pytest.raises(HierarchyError, match="'exact' must be a bool"):
        DiscreteGaussian(exact="no")
    with pytest.raises(HierarchyError, match="'exact' must be a bool"):
        get_mechanism("discrete_gaussian", exact=0)


def test_fast_option_round_trips_through_to_dict():
    mechanism = DiscreteGaussian(max_denominator=1000, exact=False)
    description = mechanism.to_dict()
    assert description["exact"] is False
    assert Mechanism.from_dict(description) == mechanism
    assert Mechanism.from_dict({"name": "discrete_gaussian"}).exact is True


def test_measure_with_the_fast_option():
    import pandas as pd

    from hierarchy.budget import Budget
    from hierarchy.queries import e2e_workload
    from hierarchy.schema import E2E_1940
    from hierarchy.tabulation import tabulate
    persons = pd.DataFrame({"state": ["01", "02", "02"], "hhgq": [0, 0, 3],
                            "votingage": [1, 1, 0], "hispanic": [0, 0, 1], "cenrace": [0, 1, 2]})
    truth = tabulate(persons, schema=E2E_1940, levels=["nation", "state"])
    workload, budget = e2e_workload(E2E_1940), Budget.e2e(1, ["nation", "state"], kind="zcdp")
    fast = DiscreteGaussian(exact=False)
    noisy = measure(truth, workload, budget, fast, Randomness.simulation(3))
    again = measure(truth, workload, budget, fast, Randomness.simulation(3))
    exact = measure(truth, workload, budget, "discrete_gaussian", Randomness.simulation(3))
    for level in ("nation", "state"):
        for name in budget.queries(level):
            values = noisy.get(level, name).values
            assert values.dtype == np.int64
            assert np.array_equal(values, again.get(level, name).values)
            assert np.array_equal(noisy.get(level, name).variances,
                                  exact.get(level, name).variances)
    assert noisy.provenance["mechanism"]["exact"] is False
    with pytest.raises(HierarchyError, match="refused in release mode"):
        measure(truth, workload, budget, fast, Randomness.release(), accounted_elsewhere=True)
