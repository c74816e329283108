"""The mechanism registry: how a budget becomes a noise parameter, and that noise's law.

:func:`get_mechanism` returns one of the frozen dataclasses registered in :data:`MECHANISMS`
(``'geometric'``, ``'discrete_gaussian'``, ``'laplace'``, ``'gaussian'``), each with
``parameter(budget, sensitivity)``, ``variance``, ``sample``, ``logpmf`` and ``to_dict``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, ClassVar

import numpy as np

from hierarchy.errors import HierarchyError
from hierarchy.mechanisms._checks import _max_denominator, _positive
from hierarchy.mechanisms._exact import (DEFAULT_MAX_DENOMINATOR, _exact_parameter,
                                         sample_discrete_gaussian)
from hierarchy.mechanisms.distributions import (
    discrete_gaussian_logpmf, discrete_gaussian_variance, gaussian_logpdf, gaussian_variance,
    laplace_logpdf, laplace_variance, sample_gaussian, sample_laplace, sample_two_sided_geometric,
    two_sided_geometric_logpmf, two_sided_geometric_variance)

__all__ = ["Mechanism", "Geometric", "DiscreteGaussian", "Laplace", "Gaussian", "MECHANISMS",
           "get_mechanism"]


@dataclass(frozen=True)
class Mechanism:
    """A noise mechanism: how a budget becomes a noise parameter, and that noise's law.

    Subclasses are frozen dataclasses registered in :data:`MECHANISMS`; use
    :func:`get_mechanism`. Class attributes: ``name``, ``accounting`` (``'pure'`` or ``'zcdp'``),
    ``discrete`` (integer noise or not) and ``parameter_name``.

    Examples
    --------
    >>> mech = get_mechanism("discrete_gaussian")
    >>> mech.accounting, mech.parameter_name, mech.parameter(0.5, 1)
    ('zcdp', 'sigma2', 1.0)
    >>> Mechanism.from_dict(mech.to_dict()) == mech
    True
    """

    name: ClassVar[str]
    accounting: ClassVar[str]
    discrete: ClassVar[bool]
    parameter_name: ClassVar[str]

    def parameter(self, budget: float, sensitivity: float) -> float:
        """The noise parameter for a query of ``sensitivity`` answered with ``budget``.

        ``budget`` is ε for ``'pure'`` mechanisms (sensitivity Δ₁) and ρ for ``'zcdp'`` ones
        (sensitivity Δ₂).
        """
        budget = _positive(budget, "epsilon" if self.accounting == "pure" else "rho")
        sensitivity = _positive(sensitivity, "sensitivity")
        return self._parameter(budget, sensitivity)

    def _parameter(self, budget: float, sensitivity: float) -> float:
        raise NotImplementedError

    def check_parameter(self, parameter: Any) -> float:
        """``parameter`` as a float, after checking it is positive and finite."""
        return _positive(parameter, self.parameter_name)

    def variance(self, parameter: Any) -> float:
        """Variance of the noise with this parameter."""
        raise NotImplementedError

    def sample(self, parameter: Any, size: int | tuple[int, ...], rng: Any = None) -> np.ndarray:
        """Noise draws of shape ``size`` (int64 if ``discrete``, else float64)."""
        raise NotImplementedError

    def logpmf(self, k: Any, parameter: Any) -> np.ndarray:
        """Log pmf (log density for continuous mechanisms) of the noise at ``k``."""
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready description (name, accounting, parameter name and options)."""
        return {"name": self.name, "accounting": self.accounting, "discrete": self.discrete,
                "parameter_name": self.parameter_name, **asdict(self)}

    @staticmethod
    def from_dict(data: dict[str, Any]) -> "Mechanism":
        """Rebuild a mechanism from :meth:`to_dict` output."""
        if not isinstance(data, dict) or "name" not in data:
            raise HierarchyError(f"a mechanism description needs a 'name', got {data!r}")
        cls = _mechanism_class(data["name"])
        options = {f.name for f in fields(cls)}
        derived = {"name": cls.name, "accounting": cls.accounting, "discrete": cls.discrete,
                   "parameter_name": cls.parameter_name}
        for key, value in data.items():
            if key in derived and value != derived[key]:
                raise HierarchyError(f"mechanism {cls.name!r} has {key} {derived[key]!r}, "
                                     f"not {value!r}")
            if key not in derived and key not in options:
                raise HierarchyError(f"unknown option {key!r} for mechanism {cls.name!r}; "
                                     f"valid options: {sorted(options)}")
        return cls(**{k: v for k, v in data.items() if k in options})


@dataclass(frozen=True)
class Geometric(Mechanism):
    """Two-sided geometric noise, ``z = ε / Δ₁`` (pure DP).

    Parameters
    ----------
    exact : bool, optional
        Sample with the exact integer sampler instead of the inverse CDF.
    """

    name: ClassVar[str] = "geometric"
    accounting: ClassVar[str] = "pure"
    discrete: ClassVar[bool] = True
    parameter_name: ClassVar[str] = "z"
    exact: bool = False

    def __post_init__(self):
        if not isinstance(self.exact, bool):
            raise HierarchyError(f"geometric option 'exact' must be a bool, not {self.exact!r}")

    def _parameter(self, budget, sensitivity):
        return budget / sensitivity

    def variance(self, parameter):
        return two_sided_geometric_variance(parameter)

    def sample(self, parameter, size, rng=None):
        return sample_two_sided_geometric(parameter, size, rng, exact=self.exact)

    def logpmf(self, k, parameter):
        return two_sided_geometric_logpmf(k, parameter)


@dataclass(frozen=True)
class DiscreteGaussian(Mechanism):
    """Exact discrete Gaussian noise, ``σ² = Δ₂² / (2ρ)`` (zCDP).

    The sampler rounds a float σ² up to a rational with denominator at most ``max_denominator``;
    :meth:`variance` and :meth:`logpmf` describe that rounded σ², i.e. the noise actually added.

    Parameters
    ----------
    max_denominator : int, optional
    """

    name: ClassVar[str] = "discrete_gaussian"
    accounting: ClassVar[str] = "zcdp"
    discrete: ClassVar[bool] = True
    parameter_name: ClassVar[str] = "sigma2"
    max_denominator: int = DEFAULT_MAX_DENOMINATOR

    def __post_init__(self):
        _max_denominator(self.max_denominator)

    def _parameter(self, budget, sensitivity):
        return sensitivity * sensitivity / (2.0 * budget)

    def _sampled(self, parameter) -> float:
        return float(_exact_parameter(parameter, "sigma2", self.max_denominator))

    def variance(self, parameter):
        return discrete_gaussian_variance(self._sampled(parameter))

    def sample(self, parameter, size, rng=None):
        return sample_discrete_gaussian(parameter, size, rng,
                                        max_denominator=self.max_denominator)

    def logpmf(self, k, parameter):
        return discrete_gaussian_logpmf(k, self._sampled(parameter))


@dataclass(frozen=True)
class Laplace(Mechanism):
    """Continuous Laplace noise, ``scale = Δ₁ / ε`` (pure DP in exact arithmetic)."""

    name: ClassVar[str] = "laplace"
    accounting: ClassVar[str] = "pure"
    discrete: ClassVar[bool] = False
    parameter_name: ClassVar[str] = "scale"

    def _parameter(self, budget, sensitivity):
        return sensitivity / budget

    def variance(self, parameter):
        return laplace_variance(parameter)

    def sample(self, parameter, size, rng=None):
        return sample_laplace(parameter, size, rng)

    def logpmf(self, k, parameter):
        return laplace_logpdf(k, parameter)


@dataclass(frozen=True)
class Gaussian(Mechanism):
    """Continuous Gaussian noise, ``σ² = Δ₂² / (2ρ)`` (zCDP in exact arithmetic)."""

    name: ClassVar[str] = "gaussian"
    accounting: ClassVar[str] = "zcdp"
    discrete: ClassVar[bool] = False
    parameter_name: ClassVar[str] = "sigma2"

    def _parameter(self, budget, sensitivity):
        return sensitivity * sensitivity / (2.0 * budget)

    def variance(self, parameter):
        return gaussian_variance(parameter)

    def sample(self, parameter, size, rng=None):
        return sample_gaussian(parameter, size, rng)

    def logpmf(self, k, parameter):
        return gaussian_logpdf(k, parameter)


MECHANISMS: dict[str, type[Mechanism]] = {
    cls.name: cls for cls in (Geometric, DiscreteGaussian, Laplace, Gaussian)}
"""Registry of mechanism classes by name."""


def _mechanism_class(name: Any) -> type[Mechanism]:
    if not isinstance(name, str) or name not in MECHANISMS:
        raise HierarchyError(f"unknown mechanism {name!r}; valid names: "
                             f"{', '.join(repr(n) for n in MECHANISMS)}")
    return MECHANISMS[name]


def get_mechanism(name: str | Mechanism, **options: Any) -> Mechanism:
    """The mechanism registered under ``name``, with its options.

    Parameters
    ----------
    name : str or Mechanism
        ``'geometric'``, ``'discrete_gaussian'``, ``'laplace'`` or ``'gaussian'``; a
        :class:`Mechanism` is returned unchanged (then no options are allowed).
    **options
        Dataclass options: ``exact`` for ``'geometric'``, ``max_denominator`` for
        ``'discrete_gaussian'``.

    Returns
    -------
    Mechanism

    Raises
    ------
    HierarchyError
        If the name is unknown (the message lists the valid names) or an option is invalid.

    Examples
    --------
    >>> get_mechanism("laplace").parameter(0.5, 2)
    4.0
    >>> get_mechanism("geometric", exact=True)
    Geometric(exact=True)
    """
    if isinstance(name, Mechanism):
        if options:
            raise HierarchyError("options cannot be given with a Mechanism instance")
        return name
    cls = _mechanism_class(name)
    valid = {f.name for f in fields(cls)}
    unknown = sorted(set(options) - valid)
    if unknown:
        raise HierarchyError(f"unknown option(s) {unknown} for mechanism {name!r}; "
                             f"valid options: {sorted(valid)}")
    return cls(**options)
