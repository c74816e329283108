"""Tests of hierarchy.mechanisms.

Statistical tests and their false-failure rates
-----------------------------------------------
A correct sampler fails a statistical test only by bad luck. Each test states the probability of
that (its false-failure rate):

* goodness of fit (Pearson chi-square with pooled bins for integer samplers, Kolmogorov–Smirnov
  for continuous ones) rejects at p < 1e-4 in simulation mode: false-failure rate 1e-4 per test
  *over seeds*. The seeds are fixed, so a given checkout either passes or fails deterministically;
  the rate says how unlucky a seed would have to be.
* in release mode (unseedable) the threshold is p < 1e-6: false-failure rate 1e-6 per run.
* mean and variance checks allow 5 standard errors of the estimator (normal approximation:
  two-sided false-failure rate 5.7e-7 each).
"""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from hierarchy import mechanisms as mech
from hierarchy.errors import HierarchyError
from hierarchy.mechanisms import (
    DiscreteGaussian,
    Geometric,
    Mechanism,
    discrete_gaussian_logpmf,
    discrete_gaussian_pmf,
    discrete_gaussian_variance,
    gaussian_logpdf,
    get_mechanism,
    laplace_logpdf,
    round_up_to_rational,
    sample_discrete_gaussian,
    sample_discrete_laplace_exact,
    sample_gaussian,
    sample_laplace,
    sample_two_sided_geometric,
    two_sided_geometric_logpmf,
    two_sided_geometric_pmf,
    two_sided_geometric_variance,
)
from hierarchy.randomness import Randomness

P_SIMULATION = 1e-4   # reject threshold of seeded goodness-of-fit tests
P_RELEASE = 1e-6      # reject threshold of unseedable (release-mode) goodness-of-fit tests
N_SE = 5.0            # mean/variance tolerance in standard errors (two-sided rate 5.7e-7)


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------
def _support(pmf, half_width: int) -> tuple[np.ndarray, np.ndarray]:
    """Grid ``-half_width..half_width`` and its probabilities; leftover mass goes to the ends."""
    grid = np.arange(-half_width, half_width + 1)
    probs = pmf(grid)
    leftover = max(0.0, 1.0 - probs.sum())
    probs[0] += leftover / 2
    probs[-1] += leftover / 2
    return grid, probs


def chi_square_pvalue(draws: np.ndarray, pmf, half_width: int, *, bins: int = 400) -> float:
    """Pearson chi-square p-value of integer ``draws`` against ``pmf``.

    Consecutive integers are pooled from the left until a bin's expected count reaches
    ``target = max(5, n / bins)``; a pending bin with at least 5 expected is closed early rather
    than merged into a value that fills a bin by itself, and a remainder below 5 joins the last
    bin. Draws outside the grid count in the end bins, whose probabilities include all mass
    beyond the grid.
    """
    n = draws.size
    grid, probs = _support(pmf, half_width)
    expected_each = n * probs
    target = max(5.0, n / bins)
    starts, acc = [0], 0.0   # grid index where each bin starts
    for i, e in enumerate(expected_each):
        if acc >= 5.0 and e >= target:
            starts.append(i)
            acc = 0.0
        acc += e
        if acc >= target and i + 1 < grid.size:
            starts.append(i + 1)
            acc = 0.0
    if acc < 5.0 and len(starts) > 1:
        starts.pop()   # a short remainder joins the previous bin
    bounds = np.asarray(starts + [grid.size])
    cumulative = np.concatenate([[0.0], np.cumsum(expected_each)])
    expected = cumulative[bounds[1:]] - cumulative[bounds[:-1]]
    edges = grid[bounds[1:-1]]   # first value of bins 1, 2, ...
    observed = np.bincount(np.searchsorted(edges, draws, side="right"),
                           minlength=expected.size)
    assert expected.size >= 2 and observed.size == expected.size and expected.min() >= 5.0
    return float(stats.chisquare(observed, expected * n / expected.sum()).pvalue)


def moments(pmf, half_width: int) -> tuple[float, float]:
    """Variance and fourth central moment of a symmetric pmf on a grid."""
    grid, probs = _support(pmf, half_width)
    k = grid.astype(np.float64)
    return float(np.sum(k * k * probs)), float(np.sum(k ** 4 * probs))


def check_mean_and_variance(draws: np.ndarray, variance: float, fourth: float) -> None:
    """Sample mean within 5 SE of 0; sample variance within 5 SE of ``variance``.

    SE(mean) = sqrt(var / n); SE(sample variance) = sqrt((mu4 - var²) / n) (large-n).
    """
    n = draws.size
    x = draws.astype(np.float64)
    assert abs(x.mean()) <= N_SE * math.sqrt(variance / n)
    assert abs(x.var() - variance) <= N_SE * math.sqrt((fourth - variance ** 2) / n)


def test_chi_square_helper_has_power():
    # draws of N_Z(2.5) against the pmf of N_Z(2.7): rejected (p ~ 1e-59 with this seed)
    draws = sample_discrete_gaussian(2.5, 100_000, Randomness.simulation(1))
    assert chi_square_pvalue(draws, lambda k: discrete_gaussian_pmf(k, 2.5), 20) > P_SIMULATION
    assert chi_square_pvalue(draws, lambda k: discrete_gaussian_pmf(k, 2.7), 20) < 1e-20


def geometric_width(z: float) -> int:
    return int(math.ceil(45 / z)) + 2            # mass beyond is < e^-45


def gaussian_width(sigma2: float) -> int:
    return int(math.ceil(math.sqrt(90 * float(sigma2)))) + 2   # mass beyond is < e^-45


# ---------------------------------------------------------------------------------------------
# two-sided geometric
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("z, seed", [(0.01, 1), (0.25, 2), (1.0, 3), (5.0, 4)])
def test_geometric_goodness_of_fit(z, seed):
    # false-failure rate 1e-4 (chi-square) + 2 x 5.7e-7 (moments)
    draws = sample_two_sided_geometric(z, 200_000, Randomness.simulation(seed))
    pmf = lambda k: two_sided_geometric_pmf(k, z)  # noqa: E731
    assert chi_square_pvalue(draws, pmf, geometric_width(z)) > P_SIMULATION
    variance, fourth = moments(pmf, geometric_width(z))
    assert variance == pytest.approx(two_sided_geometric_variance(z), rel=1e-9)
    check_mean_and_variance(draws, variance, fourth)


@pytest.mark.parametrize("z, seed", [(0.05, 5), (0.5, 6), (3.0, 7)])
def test_geometric_exact_goodness_of_fit(z, seed):
    # the integer-only sampler behind exact=True; false-failure rate 1e-4
    draws = sample_two_sided_geometric(z, 100_000, Randomness.simulation(seed), exact=True)
    pmf = lambda k: two_sided_geometric_pmf(k, z)  # noqa: E731
    assert chi_square_pvalue(draws, pmf, geometric_width(z)) > P_SIMULATION


@pytest.mark.parametrize("scale, seed", [(Fraction(1, 3), 8), (2.5, 9), (Fraction(7, 2), 10)])
def test_discrete_laplace_exact_goodness_of_fit(scale, seed):
    # covers s > 1 (scale 1/3, 7/2) in CKS Algorithm 2; false-failure rate 1e-4
    draws = sample_discrete_laplace_exact(scale, 100_000, Randomness.simulation(seed))
    z = 1 / float(scale)
    pmf = lambda k: two_sided_geometric_pmf(k, z)  # noqa: E731
    assert chi_square_pvalue(draws, pmf, geometric_width(z)) > P_SIMULATION


def test_discrete_laplace_object_arithmetic_goodness_of_fit():
    # the Python-int fallback of Algorithm 2; false-failure rate 1e-4
    draws = sample_discrete_laplace_exact(Fraction(5, 2), 20_000, Randomness.simulation(12),
                                          arithmetic="object")
    pmf = lambda k: two_sided_geometric_pmf(k, 0.4)  # noqa: E731
    assert chi_square_pvalue(draws, pmf, geometric_width(0.4)) > P_SIMULATION


def test_geometric_pmf_logpmf_and_variance():
    z = 0.7
    grid = np.arange(-200, 201)
    assert two_sided_geometric_pmf(grid, z).sum() == pytest.approx(1.0, rel=1e-12)
    assert np.allclose(np.exp(two_sided_geometric_logpmf(grid, z)),
                       two_sided_geometric_pmf(grid, z))
    assert two_sided_geometric_pmf(0.5, z) == 0.0
    # the spec's variance, and not its reciprocal (a typo in one seed paper)
    assert two_sided_geometric_variance(z) == pytest.approx(
        2 * math.exp(-z) / (1 - math.exp(-z)) ** 2)
    assert two_sided_geometric_logpmf(0, 1e-9) < 0   # no overflow or NaN for tiny z
    assert np.isfinite(two_sided_geometric_logpmf([0, 3], 700.0)).all()


def test_geometric_draws_are_a_prefix_of_longer_runs():
    short = sample_two_sided_geometric(0.3, 1000, Randomness.simulation(5))
    long = sample_two_sided_geometric(0.3, 200_000, Randomness.simulation(5))
    assert np.array_equal(short, long[:1000])


# ---------------------------------------------------------------------------------------------
# exact discrete Gaussian
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("sigma2, seed", [(0.3, 21), (1, 22), (2.5, 23), (40, 24), (1e4, 25)])
def test_discrete_gaussian_goodness_of_fit(sigma2, seed):
    # int64 path; false-failure rate 1e-4 (chi-square) + 2 x 5.7e-7 (moments)
    draws = sample_discrete_gaussian(sigma2, 100_000, Randomness.simulation(seed))
    pmf = lambda k: discrete_gaussian_pmf(k, sigma2)  # noqa: E731
    assert chi_square_pvalue(draws, pmf, gaussian_width(sigma2)) > P_SIMULATION
    variance, fourth = moments(pmf, gaussian_width(sigma2))
    assert discrete_gaussian_variance(sigma2) == pytest.approx(variance, rel=1e-10)
    check_mean_and_variance(draws, variance, fourth)


@pytest.mark.parametrize("sigma2, seed", [(0.3, 31), (2.5, 32), (40, 33)])
def test_discrete_gaussian_object_arithmetic_goodness_of_fit(sigma2, seed):
    # forced Python-int fallback (every bound drawn by multi-word rejection); rate 1e-4
    draws = sample_discrete_gaussian(sigma2, 20_000, Randomness.simulation(seed),
                                     arithmetic="object")
    pmf = lambda k: discrete_gaussian_pmf(k, sigma2)  # noqa: E731
    assert chi_square_pvalue(draws, pmf, gaussian_width(sigma2)) > P_SIMULATION


def test_discrete_gaussian_large_denominator_uses_exact_big_integers():
    # 2 a b t² is about 2e24 > 2**62, so the acceptance step runs in Python ints on its own
    sigma2 = Fraction(10**12 + 1, 10**6)
    a, b = sigma2.numerator, sigma2.denominator
    t = math.isqrt(a // b) + 1
    assert 2 * a * b * t * t > 1 << 62
    draws = sample_discrete_gaussian(sigma2, 20_000, Randomness.simulation(34))
    pmf = lambda k: discrete_gaussian_pmf(k, sigma2)  # noqa: E731
    assert chi_square_pvalue(draws, pmf, gaussian_width(sigma2)) > P_SIMULATION   # rate 1e-4


def test_discrete_gaussian_int64_rounds_with_overflowing_rows():
    # sigma2 = 1.5e9: int64 arithmetic, but |Y| b t - a overflows sqrt(2**63) for about a third
    # of the proposals, which then take the per-round Python-int route; false-failure rate 1e-4
    sigma2 = 1_500_000_000
    t = math.isqrt(sigma2) + 1
    assert 2 * sigma2 * t * t <= 1 << 62
    assert (mech._SQRT_INT64 - sigma2) // t < 2 * t
    draws = sample_discrete_gaussian(sigma2, 20_000, Randomness.simulation(35))
    pmf = lambda k: discrete_gaussian_pmf(k, sigma2)  # noqa: E731
    assert chi_square_pvalue(draws, pmf, gaussian_width(sigma2), bins=100) > P_SIMULATION


def test_gamma_parts_matches_python_integers():
    rng = np.random.default_rng(0)
    sigma2 = Fraction(1_500_000_000, 7)
    a, b = sigma2.numerator, sigma2.denominator
    t = math.isqrt(a // b) + 1
    den = 2 * a * b * t * t
    abs_y = rng.integers(0, 40 * t, 5000)
    q, r = mech._gamma_parts(abs_y, a, b * t, den, big=False)
    expected = [divmod((int(y) * b * t - a) ** 2, den) for y in abs_y]
    assert [(int(x), int(y)) for x, y in zip(q, r)] == expected
    assert r.dtype == np.int64


def test_float_sigma2_is_rounded_up():
    # 0.31 -> 1/3, the smallest fraction >= 0.31 with denominator <= 10: same draws as 1/3
    rounded = round_up_to_rational(0.31, max_denominator=10)
    assert rounded == Fraction(1, 3)
    from_float = sample_discrete_gaussian(0.31, 500, Randomness.simulation(3), max_denominator=10)
    from_fraction = sample_discrete_gaussian(Fraction(1, 3), 500, Randomness.simulation(3))
    assert np.array_equal(from_float, from_fraction)
    # the mechanism reports the variance of what it actually samples
    mechanism = DiscreteGaussian(max_denominator=10)
    assert mechanism.variance(0.31) == discrete_gaussian_variance(1 / 3)
    # decimal floats come back as the decimal; irrational-looking ones round strictly up
    assert round_up_to_rational(0.3) == Fraction(3, 10)
    root = round_up_to_rational(math.sqrt(2))
    assert root > Fraction(math.sqrt(2)) and root.denominator <= 10**6


def test_round_up_to_rational_is_the_smallest_upper_bound():
    rng = np.random.default_rng(1)
    for _ in range(300):
        limit = int(rng.integers(1, 40))
        x = Fraction(int(rng.integers(1, 10**9)), int(rng.integers(1, 10**9)))
        best = min(Fraction(math.ceil(x * q), q) for q in range(1, limit + 1))
        assert round_up_to_rational(x, max_denominator=limit) == best
    assert round_up_to_rational(7) == 7
    assert round_up_to_rational(Fraction(2, 3), max_denominator=3) == Fraction(2, 3)


@pytest.mark.parametrize("sigma2", [0.01, 0.3, 1.0, 1.0000001, 2.5, 40.0, 1e4])
def test_discrete_gaussian_pmf_normalized_and_variance(sigma2):
    grid = np.arange(-gaussian_width(sigma2), gaussian_width(sigma2) + 1)
    pmf = discrete_gaussian_pmf(grid, sigma2)
    assert pmf.sum() == pytest.approx(1.0, rel=1e-12)
    brute = float(np.sum(grid.astype(float) ** 2 * np.exp(-grid ** 2 / (2 * sigma2))))
    brute /= float(np.sum(np.exp(-grid ** 2 / (2 * sigma2))))
    assert discrete_gaussian_variance(sigma2) == pytest.approx(brute, rel=1e-12)
    assert np.allclose(discrete_gaussian_logpmf(grid[:5], sigma2), np.log(pmf[:5]))


def test_discrete_gaussian_variance_small_and_large_sigma2():
    assert discrete_gaussian_variance(0.3) < 0.3                     # not sigma2
    assert discrete_gaussian_variance(0.01) == pytest.approx(2 * math.exp(-50), rel=1e-9)
    # the closed form used above 1e8 joins the summation continuously
    assert discrete_gaussian_variance(1e8) == pytest.approx(1e8, rel=1e-12)
    assert discrete_gaussian_variance(1.0000001e8) == pytest.approx(1.0000001e8, rel=1e-12)


# ---------------------------------------------------------------------------------------------
# exact primitives
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("big", [False, True])
@pytest.mark.parametrize("q, r, den", [(0, 1, 2), (1, 0, 7), (2, 7, 10), (0, 999, 1000)])
def test_bernoulli_exp_neg_frequency(big, q, r, den):
    # binomial count within 5 SE of n exp(-gamma): false-failure rate 5.7e-7
    n = 40_000
    source = Randomness.simulation(100 + q + r)
    qs = np.full(n, q, dtype=object if big else np.int64)
    rs = np.full(n, r, dtype=object if big else np.int64)
    hits = mech._bernoulli_exp_neg(qs, rs, den, source, big).sum()
    p = math.exp(-(q + r / den))
    assert abs(hits - n * p) <= N_SE * math.sqrt(n * p * (1 - p))


def test_bernoulli_ratio_split_for_large_denominators():
    # den * k > 2**62 takes the (1/k)(r/den) split; frequency within 5 SE (rate 5.7e-7)
    n, den, k = 40_000, (1 << 61) + 1, 3
    r = np.full(n, den // 2, dtype=np.int64)
    hits = mech._bernoulli_ratio(r, den, k, Randomness.simulation(9), big=False).sum()
    p = (den // 2) / den / k
    assert abs(hits - n * p) <= N_SE * math.sqrt(n * p * (1 - p))


@pytest.mark.parametrize("bound", [1, 7, (1 << 70) + 3])
def test_uniform_below_big(bound):
    draws = mech._uniform_below_big(bound, 30_000, Randomness.simulation(bound % 97))
    assert draws.dtype == object
    assert all(0 <= int(v) < bound for v in draws)
    if bound > 1:
        # deciles of the bound: chi-square, false-failure rate 1e-4
        cells = np.array([int(v) * 10 // bound for v in draws])
        observed = np.bincount(cells, minlength=10)
        ceil_tenth = [-(-i * bound // 10) for i in range(11)]   # ceil(i * bound / 10)
        expected = np.array([(ceil_tenth[i + 1] - ceil_tenth[i]) / bound * draws.size
                             for i in range(10)])
        keep = expected > 0
        assert stats.chisquare(observed[keep], expected[keep]).pvalue > P_SIMULATION


# ---------------------------------------------------------------------------------------------
# continuous Laplace and Gaussian
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("scale, seed", [(0.01, 41), (1.0, 42), (250.0, 43)])
def test_laplace_goodness_of_fit(scale, seed):
    # KS test, false-failure rate 1e-4; moments within 5 SE (mu4 = 24 b^4), rate 5.7e-7 each
    draws = sample_laplace(scale, 100_000, Randomness.simulation(seed))
    assert stats.kstest(draws, "laplace", args=(0, scale)).pvalue > P_SIMULATION
    check_mean_and_variance(draws, 2 * scale ** 2, 24 * scale ** 4)


@pytest.mark.parametrize("sigma2, seed", [(1e-4, 51), (1.0, 52), (1e6, 53)])
def test_gaussian_goodness_of_fit(sigma2, seed):
    # KS test, false-failure rate 1e-4; moments within 5 SE (mu4 = 3 sigma^4), rate 5.7e-7 each
    draws = sample_gaussian(sigma2, 100_001, Randomness.simulation(seed))   # odd size
    assert draws.size == 100_001
    assert stats.kstest(draws, "norm", args=(0, math.sqrt(sigma2))).pvalue > P_SIMULATION
    check_mean_and_variance(draws, sigma2, 3 * sigma2 ** 2)


def test_continuous_log_densities():
    x = np.linspace(-5, 5, 11)
    assert np.allclose(laplace_logpdf(x, 2.0), stats.laplace.logpdf(x, scale=2.0))
    assert np.allclose(gaussian_logpdf(x, 3.0), stats.norm.logpdf(x, scale=math.sqrt(3.0)))


# ---------------------------------------------------------------------------------------------
# release mode (cannot be seeded: threshold p < 1e-6)
# ---------------------------------------------------------------------------------------------
def test_release_mode_geometric():
    draws = sample_two_sided_geometric(0.4, 100_000, Randomness.release())
    pmf = lambda k: two_sided_geometric_pmf(k, 0.4)  # noqa: E731
    assert chi_square_pvalue(draws, pmf, geometric_width(0.4)) > P_RELEASE   # rate 1e-6


def test_release_mode_discrete_laplace_exact():
    draws = sample_discrete_laplace_exact(2, 50_000, None)   # None means release
    pmf = lambda k: two_sided_geometric_pmf(k, 0.5)  # noqa: E731
    assert chi_square_pvalue(draws, pmf, geometric_width(0.5)) > P_RELEASE   # rate 1e-6


def test_release_mode_discrete_gaussian():
    draws = sample_discrete_gaussian(2.5, 50_000, Randomness.release())
    pmf = lambda k: discrete_gaussian_pmf(k, 2.5)  # noqa: E731
    assert chi_square_pvalue(draws, pmf, gaussian_width(2.5)) > P_RELEASE   # rate 1e-6


def test_release_mode_refuses_continuous_noise():
    """Floating-point samples leak through their rounding (Mironov 2012): release mode refuses
    them; simulations keep them (their laws are tested above)."""
    for sampler in (sample_laplace, sample_gaussian):
        with pytest.raises(HierarchyError, match="refused in release mode.*Mironov"):
            sampler(1.5, 10, Randomness.release())
        with pytest.raises(HierarchyError, match="refused in release mode"):
            sampler(1.5, 10, None)


# ---------------------------------------------------------------------------------------------
# reproducibility
# ---------------------------------------------------------------------------------------------
SAMPLERS = [
    lambda rng: sample_two_sided_geometric(0.5, 300, rng),
    lambda rng: sample_two_sided_geometric(0.5, 300, rng, exact=True),
    lambda rng: sample_discrete_laplace_exact(1.5, 300, rng),
    lambda rng: sample_discrete_gaussian(3.0, 300, rng),
    lambda rng: sample_discrete_gaussian(3.0, 300, rng, arithmetic="object"),
    lambda rng: sample_laplace(1.0, 300, rng),
    lambda rng: sample_gaussian(1.0, 300, rng),
]


@pytest.mark.parametrize("draw", SAMPLERS)
def test_same_seed_same_draws(draw):
    assert np.array_equal(draw(Randomness.simulation(17)), draw(Randomness.simulation(17)))
    assert np.array_equal(draw(17), draw(17))   # an int is a simulation seed
    assert not np.array_equal(draw(Randomness.simulation(17)), draw(Randomness.simulation(18)))


@pytest.mark.parametrize("draw", SAMPLERS)
def test_child_streams_are_reproducible(draw):
    root = Randomness.simulation(4)
    first = draw(root.child(2))
    root.random_raw(1000)                    # using the parent does not move its children
    assert np.array_equal(first, draw(Randomness.simulation(4).child(2)))
    assert not np.array_equal(first, draw(Randomness.simulation(4).child(3)))
    assert np.array_equal(draw(root.child(2, 5)), draw(Randomness.simulation(4).child(2).child(5)))


def test_release_mode_is_not_repeatable():
    first = sample_two_sided_geometric(0.1, 100, Randomness.release())
    assert not np.array_equal(first, sample_two_sided_geometric(0.1, 100, Randomness.release()))


def test_size_may_be_a_shape():
    for draw in (sample_two_sided_geometric, sample_discrete_gaussian, sample_laplace,
                 sample_gaussian, sample_discrete_laplace_exact):
        out = draw(1.0, (3, 0, 2), 1)
        assert out.shape == (3, 0, 2)
        assert draw(1.0, (4, 5), 1).shape == (4, 5)
        assert draw(1.0, 0, 1).shape == (0,)


# ---------------------------------------------------------------------------------------------
# validation
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf"), "1", None, True, [1.0]])
@pytest.mark.parametrize("function, name", [
    (sample_two_sided_geometric, "z"), (sample_discrete_gaussian, "sigma2"),
    (sample_discrete_laplace_exact, "scale"), (sample_laplace, "scale"),
    (sample_gaussian, "sigma2")])
def test_bad_parameter_raises(function, name, bad):
    with pytest.raises(HierarchyError, match=name):
        function(bad, 3, 1)


@pytest.mark.parametrize("function, name", [
    (two_sided_geometric_pmf, "z"), (two_sided_geometric_logpmf, "z"),
    (discrete_gaussian_pmf, "sigma2"), (discrete_gaussian_logpmf, "sigma2"),
    (laplace_logpdf, "scale"), (gaussian_logpdf, "sigma2")])
def test_bad_density_parameter_raises(function, name):
    with pytest.raises(HierarchyError, match=name):
        function([0, 1], -2.0)


@pytest.mark.parametrize("bad_size", [-1, 2.0, (3, -1), (2, "a"), True, None])
def test_bad_size_raises(bad_size):
    with pytest.raises(HierarchyError, match="size"):
        sample_two_sided_geometric(1.0, bad_size, 1)


def test_out_of_range_parameters_raise():
    with pytest.raises(HierarchyError, match="z"):
        sample_two_sided_geometric(1e-16, 3, 1)
    with pytest.raises(HierarchyError, match="sigma2"):
        sample_discrete_gaussian(1e31, 3, 1)
    with pytest.raises(HierarchyError, match="scale"):
        sample_discrete_laplace_exact(1e16, 3, 1)
    with pytest.raises(HierarchyError, match="arithmetic"):
        sample_discrete_gaussian(1.0, 3, 1, arithmetic="int32")
    with pytest.raises(HierarchyError, match="max_denominator"):
        sample_discrete_gaussian(1.0, 3, 1, max_denominator=0)
    with pytest.raises(HierarchyError, match="rng"):
        sample_two_sided_geometric(1.0, 3, "seed")


# ---------------------------------------------------------------------------------------------
# mechanism objects
# ---------------------------------------------------------------------------------------------
def test_registry_and_parameters():
    assert set(mech.MECHANISMS) == {"geometric", "discrete_gaussian", "laplace", "gaussian"}
    geometric = get_mechanism("geometric")
    assert (geometric.accounting, geometric.discrete, geometric.parameter_name) == \
        ("pure", True, "z")
    assert geometric.parameter(0.5, 2) == 0.25
    laplace = get_mechanism("laplace")
    assert (laplace.accounting, laplace.discrete, laplace.parameter_name) == \
        ("pure", False, "scale")
    assert laplace.parameter(0.5, 2) == 4.0
    for name in ("discrete_gaussian", "gaussian"):
        mechanism = get_mechanism(name)
        assert mechanism.accounting == "zcdp" and mechanism.parameter_name == "sigma2"
        assert mechanism.parameter(0.25, 2) == 8.0   # Δ²/(2ρ)
    assert get_mechanism("discrete_gaussian").discrete
    assert not get_mechanism("gaussian").discrete
    assert get_mechanism(geometric) is geometric


@pytest.mark.parametrize("name", ["geometric", "discrete_gaussian", "laplace", "gaussian"])
def test_mechanism_interface(name):
    mechanism = get_mechanism(name)
    parameter = mechanism.parameter(1.0, 1.0)
    draws = mechanism.sample(parameter, (10, 3), Randomness.simulation(0))
    assert draws.shape == (10, 3)
    assert draws.dtype == (np.int64 if mechanism.discrete else np.float64)
    assert mechanism.variance(parameter) > 0
    if mechanism.discrete:
        grid = np.arange(-400, 401)
        assert np.exp(mechanism.logpmf(grid, parameter)).sum() == pytest.approx(1.0)
    else:
        grid = np.linspace(-60, 60, 240_001)
        density = np.exp(mechanism.logpmf(grid, parameter))
        assert density.sum() * (grid[1] - grid[0]) == pytest.approx(1.0, rel=1e-6)
    description = json.loads(json.dumps(mechanism.to_dict()))
    assert description["name"] == name
    assert Mechanism.from_dict(description) == mechanism


def test_mechanism_options_round_trip():
    exact = get_mechanism("geometric", exact=True)
    assert exact == Geometric(exact=True)
    assert Mechanism.from_dict(exact.to_dict()) == exact
    dg = get_mechanism("discrete_gaussian", max_denominator=1000)
    assert Mechanism.from_dict(json.loads(json.dumps(dg.to_dict()))) == dg


def test_mechanisms_are_frozen():
    with pytest.raises(AttributeError):
        get_mechanism("geometric").exact = True


def test_mechanism_errors():
    with pytest.raises(HierarchyError, match="'geometric', 'discrete_gaussian'"):
        get_mechanism("gauss")
    with pytest.raises(HierarchyError, match="valid options"):
        get_mechanism("laplace", exact=True)
    with pytest.raises(HierarchyError, match="exact"):
        Geometric(exact="yes")
    with pytest.raises(HierarchyError, match="max_denominator"):
        DiscreteGaussian(max_denominator=-3)
    with pytest.raises(HierarchyError, match="epsilon"):
        get_mechanism("geometric").parameter(0, 1)
    with pytest.raises(HierarchyError, match="rho"):
        get_mechanism("gaussian").parameter(-1.0, 1)
    with pytest.raises(HierarchyError, match="sensitivity"):
        get_mechanism("laplace").parameter(1.0, float("inf"))
    with pytest.raises(HierarchyError, match="z"):
        get_mechanism("geometric").sample(-1.0, 3, 1)
    with pytest.raises(HierarchyError, match="accounting"):
        Mechanism.from_dict({"name": "gaussian", "accounting": "pure"})
    with pytest.raises(HierarchyError, match="unknown option"):
        Mechanism.from_dict({"name": "gaussian", "colour": "blue"})
    with pytest.raises(HierarchyError, match="name"):
        Mechanism.from_dict({"accounting": "pure"})


# ---------------------------------------------------------------------------------------------
# heavier variants (pytest -m slow)
# ---------------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("sigma2, seed", [(0.3, 61), (1, 62), (2.5, 63), (40, 64), (1e4, 65),
                                          (Fraction(1, 7), 66), (1e9, 67)])
def test_discrete_gaussian_goodness_of_fit_large(sigma2, seed):
    # 2M draws; false-failure rate 1e-4 per case
    draws = sample_discrete_gaussian(sigma2, 2_000_000, Randomness.simulation(seed))
    pmf = lambda k: discrete_gaussian_pmf(k, sigma2)  # noqa: E731
    assert chi_square_pvalue(draws, pmf, gaussian_width(sigma2)) > P_SIMULATION


@pytest.mark.slow
@pytest.mark.parametrize("sigma2, seed", [(0.3, 71), (40, 72), (Fraction(10**12 + 1, 10**6), 73)])
def test_discrete_gaussian_object_goodness_of_fit_large(sigma2, seed):
    draws = sample_discrete_gaussian(sigma2, 300_000, Randomness.simulation(seed),
                                     arithmetic="object")
    pmf = lambda k: discrete_gaussian_pmf(k, sigma2)  # noqa: E731
    assert chi_square_pvalue(draws, pmf, gaussian_width(sigma2)) > P_SIMULATION   # rate 1e-4


@pytest.mark.slow
@pytest.mark.parametrize("z, seed", [(0.001, 81), (0.1, 82), (2.0, 83), (10.0, 84)])
def test_geometric_goodness_of_fit_large(z, seed):
    # 10M draws; false-failure rate 1e-4 (chi-square) + 2 x 5.7e-7 (moments)
    draws = sample_two_sided_geometric(z, 10_000_000, Randomness.simulation(seed))
    pmf = lambda k: two_sided_geometric_pmf(k, z)  # noqa: E731
    assert chi_square_pvalue(draws, pmf, geometric_width(z)) > P_SIMULATION
    check_mean_and_variance(draws, *moments(pmf, geometric_width(z)))


# ---------------------------------------------------------------------------------------------
# exact inversion sampler of the two-sided geometric (release mode's sampler)
# ---------------------------------------------------------------------------------------------
def _exp_bounds(x: Fraction, terms: int = 60) -> tuple[Fraction, Fraction]:
    """Rational bounds of exp(-x) for 0 < x <= 1 from the Taylor series of exp(x)."""
    partial, term = Fraction(0), Fraction(1)
    for j in range(terms):
        partial += term
        term = term * x / (j + 1)
    upper_exp = partial + 3 * term          # the remainder is below 3 x^N / N! for x <= 1
    return 1 / upper_exp, 1 / partial


@pytest.mark.parametrize("x", [Fraction(1, 2), Fraction(1), Fraction(3, 7)])
@pytest.mark.parametrize("k", [0, 5, 40])
@pytest.mark.parametrize("bits", [64, 128])
def test_inversion_thresholds_are_exact_floors(x, k, bits):
    """floor(T(k) 2^bits) with T(k) = 2 q^(k+1) / (1 + q), checked against rational bounds of
    q = exp(-x) computed independently (Taylor series in exact fractions)."""
    from hierarchy.mechanisms._inversion import tail_floor

    q_lo, q_hi = _exp_bounds(x)
    lo = 2 * q_lo ** (k + 1) / (1 + q_hi)      # T is increasing in q
    hi = 2 * q_hi ** (k + 1) / (1 + q_lo)
    a, b = math.floor(lo * 2 ** bits), math.floor(hi * 2 ** bits)
    assert a == b, "the reference bounds are too wide to decide"
    assert tail_floor(x, k, bits) == a


@pytest.mark.parametrize("word_bits", [1, 3, 8, 64])
@pytest.mark.parametrize("z", [Fraction(1, 7), Fraction(1, 2), Fraction(3, 2)])
def test_inversion_sampler_matches_the_pmf_even_when_every_draw_ties(word_bits, z):
    """With 1- to 8-bit first words most draws take the exact tie-breaking path; the law must
    not change. Seeded chi-square, threshold p < 1e-6 (fixed seeds: deterministic)."""
    from hierarchy.mechanisms._inversion import sample_two_sided_geometric_inversion

    x = sample_two_sided_geometric_inversion(z, 60_000, Randomness.simulation(word_bits),
                                             word_bits=word_bits)
    assert x.dtype == np.int64
    pmf = lambda k: np.exp(two_sided_geometric_logpmf(k, float(z)))  # noqa: E731
    assert chi_square_pvalue(x, pmf, 150) > P_RELEASE


def test_inversion_sampler_extreme_parameters():
    from hierarchy.mechanisms._inversion import sample_two_sided_geometric_inversion

    # z = 50: T(0) < 2**-64, an empty table: every draw is 0 except with probability ~1e-22
    assert not sample_two_sided_geometric_inversion(Fraction(50), 10_000,
                                                    Randomness.simulation(1)).any()
    x = sample_two_sided_geometric(0.003, 20_000, Randomness.release())   # ~15,000 thresholds
    var = 2 * math.exp(-0.003) / (1 - math.exp(-0.003)) ** 2
    # the sample variance of 20,000 draws is within 10 % of the law's (its sd is ~1.7 %)
    assert abs(x.var() / var - 1) < 0.1
