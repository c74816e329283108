"""Noise mechanisms: samplers, densities and the mechanism registry (docs/measurement.md).

Every sampler draws *all* of its randomness through :func:`hierarchy.randomness.as_randomness`
and only its methods ``random_raw``, ``uniform`` and ``integers_below``. Release mode (OS CSPRNG
bits) and simulation mode (seeded PCG64 bits) therefore run exactly the same sampling code.

Samplers
--------
* :func:`sample_two_sided_geometric` — inverse CDF on 53-bit uniforms (fast; what the spec and
  Clark–Dajani describe), or ``exact=True`` for the integer-only sampler below.
* :func:`sample_discrete_laplace_exact` — Canonne–Kamath–Steinke (2020) Algorithm 2, exact.
* :func:`sample_discrete_gaussian` — CKS Algorithms 1–3, exact: only integer comparisons of
  uniform integers, no floating point anywhere in the sampling.
* :func:`sample_discrete_gaussian_fast` — inversion of 64-bit words through cached tables, for
  simulations only (refused in release mode): 50 to 100 times faster than the exact sampler
  (``benchmarks/bench_samplers.py``), within total variation ``2**-45`` of the same law
  (``DiscreteGaussian(exact=False)``).
* :func:`sample_laplace`, :func:`sample_gaussian` — continuous, floating point.

Modules
-------
* :mod:`~hierarchy.mechanisms._exact` — exact integer arithmetic: rational parameters, uniform
  big integers, Bernoulli(exp(−γ)), the CKS discrete Laplace and discrete Gaussian samplers.
* :mod:`~hierarchy.mechanisms.distributions` — the inverse-CDF and Box–Muller samplers and every
  pmf, density and variance.
* :mod:`~hierarchy.mechanisms._fast` — the fast discrete Gaussian sampler: its tables, their
  total variation bound.
* :mod:`~hierarchy.mechanisms.registry` — the :class:`Mechanism` dataclasses and their registry.

Every public name is importable from :mod:`hierarchy.mechanisms` itself.

Mechanisms
----------
:func:`get_mechanism` returns one of the frozen dataclasses registered in :data:`MECHANISMS`
(``'geometric'``, ``'discrete_gaussian'``, ``'laplace'``, ``'gaussian'``), each with
``parameter(budget, sensitivity)``, ``variance``, ``sample``, ``logpmf``, ``log_kernel`` and
``to_dict``; :func:`register_mechanism` adds a user's own. This registry is the one source of
the noise laws: the samplers, inference and SafeTab read them from it.

Examples
--------
>>> from hierarchy.randomness import Randomness
>>> mech = get_mechanism("geometric")
>>> z = mech.parameter(0.5, 2)          # epsilon 0.5, sensitivity 2
>>> z, round(mech.variance(z), 3)
(0.25, 31.834)
>>> noise = mech.sample(z, (2, 3), Randomness.simulation(0))
>>> noise.shape, noise.dtype
((2, 3), dtype('int64'))
"""

from __future__ import annotations

# private helpers that tests/test_mechanisms.py reaches as ``hierarchy.mechanisms._name``
from hierarchy.mechanisms._exact import (  # noqa: F401
                                         _SQRT_INT64,
                                         DEFAULT_MAX_DENOMINATOR,
                                         _bernoulli_exp_neg,
                                         _bernoulli_ratio,
                                         _gamma_parts,
                                         _uniform_below_big,
                                         round_up_to_rational,
                                         sample_discrete_gaussian,
                                         sample_discrete_laplace_exact,
)
from hierarchy.mechanisms._fast import sample_discrete_gaussian_fast
from hierarchy.mechanisms.distributions import (
    discrete_gaussian_logpmf,
    discrete_gaussian_pmf,
    discrete_gaussian_variance,
    gaussian_logpdf,
    gaussian_variance,
    laplace_logpdf,
    laplace_variance,
    sample_gaussian,
    sample_laplace,
    sample_two_sided_geometric,
    two_sided_geometric_logpmf,
    two_sided_geometric_pmf,
    two_sided_geometric_variance,
)
from hierarchy.mechanisms.registry import (
    MECHANISMS,
    DiscreteGaussian,
    Gaussian,
    Geometric,
    Laplace,
    Mechanism,
    get_mechanism,
    register_mechanism,
    unregister_mechanism,
)

__all__ = [
    "DEFAULT_MAX_DENOMINATOR", "round_up_to_rational",
    "sample_two_sided_geometric", "two_sided_geometric_pmf", "two_sided_geometric_logpmf",
    "two_sided_geometric_variance",
    "sample_discrete_laplace_exact",
    "sample_discrete_gaussian", "sample_discrete_gaussian_fast", "discrete_gaussian_pmf",
    "discrete_gaussian_logpmf", "discrete_gaussian_variance",
    "sample_laplace", "laplace_logpdf", "laplace_variance",
    "sample_gaussian", "gaussian_logpdf", "gaussian_variance",
    "Mechanism", "Geometric", "DiscreteGaussian", "Laplace", "Gaussian",
    "MECHANISMS", "get_mechanism", "register_mechanism", "unregister_mechanism",
]
