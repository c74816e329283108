"""The mechanism registry: how a budget becomes a noise parameter, and that noise's law.

:func:`get_mechanism` returns one of the frozen dataclasses registered in :data:`MECHANISMS`
(``'geometric'``, ``'discrete_gaussian'``, ``'laplace'``, ``'gaussian'``), each with
``parameter(budget, sensitivity)``, ``variance``, ``sample``, ``logpmf``, ``log_kernel`` and
``to_dict``. This registry is the one place the noise laws live: measuring, the conditional
samplers (:mod:`postproc.methods.sampling.target`), inference and SafeTab all read them from here.
:func:`register_mechanism` adds a user's mechanism, which then works everywhere a name is taken.

Examples
--------
A user's mechanism (here: geometric noise with twice the scale, for illustration):

>>> from dataclasses import dataclass
>>> @register_mechanism
... @dataclass(frozen=True)
... class HalfGeometric(Mechanism):
...     name = "half_geometric"
...     accounting = "pure"
...     discrete = True
...     parameter_name = "z"
...     def _parameter(self, budget, sensitivity):
...         return budget / (2 * sensitivity)
...     def variance(self, parameter):
...         return two_sided_geometric_variance(parameter)
...     def sample(self, parameter, size, rng=None):
...         return sample_two_sided_geometric(parameter, size, rng)
...     def logpmf(self, k, parameter):
...         return two_sided_geometric_logpmf(k, parameter)
>>> get_mechanism("half_geometric").parameter(PureDP(1), 1)
0.5
>>> unregister_mechanism("half_geometric")
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, ClassVar

import numpy as np

from hierarchy.budget import ZCDP, PureDP, notion
from hierarchy.errors import HierarchyError
from hierarchy.mechanisms._exact import (
    DEFAULT_MAX_DENOMINATOR,
    _exact_parameter,
    sample_discrete_gaussian,
)
from hierarchy.mechanisms._fast import sample_discrete_gaussian_fast
from hierarchy.mechanisms.distributions import (
    discrete_gaussian_logpmf,
    discrete_gaussian_variance,
    gaussian_logpdf,
    gaussian_variance,
    laplace_logpdf,
    laplace_variance,
    sample_gaussian,
    sample_laplace,
    sample_two_sided_geometric,
    two_sided_geometric_logpmf,
    two_sided_geometric_variance,
)
from hierarchy.numbers import integer, positive

__all__ = ["Mechanism", "Geometric", "DiscreteGaussian", "Laplace", "Gaussian", "MECHANISMS",
           "get_mechanism", "register_mechanism", "unregister_mechanism"]


@dataclass(frozen=True)
class Mechanism:
    """A noise mechanism: how a budget becomes a noise parameter, and that noise's law.

    Subclasses are frozen dataclasses registered in :data:`MECHANISMS`; use
    :func:`get_mechanism`. Class attributes: ``name``, ``accounting`` (the ``kind`` of the budget
    type it spends, :attr:`PureDP.kind <hierarchy.budget.PureDP>` ``'pure'`` or
    :attr:`ZCDP.kind <hierarchy.budget.ZCDP>` ``'zcdp'``), ``discrete`` (integer noise or not)
    and ``parameter_name``. A subclass implements ``_parameter``, ``variance``, ``sample`` and
    ``logpmf``; ``log_kernel`` (what samplers use) defaults to ``logpmf``.

    Examples
    --------
    >>> mech = get_mechanism("discrete_gaussian")
    >>> mech.accounting, mech.parameter_name, mech.parameter(0.5, 1)
    ('zcdp', 'sigma2', 1.0)
    >>> mech.parameter(ZCDP("1/2"), 1)
    1.0
    >>> Mechanism.from_dict(mech.to_dict()) == mech
    True
    """

    name: ClassVar[str]
    accounting: ClassVar[str]
    discrete: ClassVar[bool]
    parameter_name: ClassVar[str]

    def parameter(self, budget: Any, sensitivity: float) -> float:
        """The noise parameter for a query of ``sensitivity`` answered with ``budget``.

        Parameters
        ----------
        budget : PureDP, ZCDP or float
            A typed budget, converted to what this mechanism spends (a pure-DP mechanism
            under ``ZCDP(ρ)`` spends ε = sqrt(2ρ); a zCDP mechanism refuses ``PureDP``); or a
            bare number: ε for ``'pure'`` mechanisms and ρ for ``'zcdp'`` ones.
        sensitivity : float
            Δ₁ for ``'pure'`` mechanisms, Δ₂ for ``'zcdp'`` ones.

        Returns
        -------
        float

        Raises
        ------
        HierarchyError
            If the budget or sensitivity is not a positive finite number, or a typed budget
            cannot fund this mechanism.

        Examples
        --------
        >>> get_mechanism("geometric").parameter(PureDP("1/2"), 2)
        0.25
        >>> get_mechanism("geometric").parameter(ZCDP("1/8"), 1)    # ε = sqrt(2ρ) = 0.5
        0.5
        """
        if isinstance(budget, (PureDP, ZCDP)):
            budget = budget.spendable(self.accounting)
        budget = positive(budget, notion(self.accounting).parameter_name)
        sensitivity = positive(sensitivity, "sensitivity")
        return self._parameter(budget, sensitivity)

    def _parameter(self, budget: float, sensitivity: float) -> float:
        raise NotImplementedError

    def check_parameter(self, parameter: Any) -> float:
        """``parameter`` as a float, after checking it is positive and finite."""
        return positive(parameter, self.parameter_name)

    def variance(self, parameter: Any) -> float:
        """Variance of the noise with this parameter."""
        raise NotImplementedError

    def sample(self, parameter: Any, size: int | tuple[int, ...], rng: Any = None) -> np.ndarray:
        """Noise draws of shape ``size`` (int64 if ``discrete``, else float64)."""
        raise NotImplementedError

    def logpmf(self, k: Any, parameter: Any) -> np.ndarray:
        """Log pmf (log density for continuous mechanisms) of the noise at ``k``."""
        raise NotImplementedError

    def log_kernel(self, deviation: Any, parameter: Any) -> np.ndarray:
        """:meth:`logpmf` up to a term that depends on ``parameter`` only, elementwise.

        What samplers evaluate: they need ratios of the density at one parameter, so the
        normalizing constant is left out. ``parameter`` may be an array broadcastable to
        ``deviation`` (one parameter per cell) and is not validated here (samplers check it
        once, not at every step). The default is :meth:`logpmf` itself, so a registered
        mechanism needs to define only that.

        Parameters
        ----------
        deviation : array_like
            Noise values (a state minus its centre).
        parameter : float or array_like

        Returns
        -------
        numpy.ndarray of float64

        Examples
        --------
        >>> get_mechanism("geometric").log_kernel([-2, 0, 3], 0.5).tolist()
        [-1.0, -0.0, -1.5]
        """
        parameter = np.asarray(parameter, dtype=np.float64)
        return np.asarray(self.logpmf(deviation, float(parameter) if parameter.ndim == 0
                                      else parameter), dtype=np.float64)

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

    Raises
    ------
    HierarchyError
        If ``exact`` is not a bool.

    Examples
    --------
    >>> geometric = Geometric()
    >>> z = geometric.parameter(PureDP(1), 2)      # ε = 1, Δ₁ = 2
    >>> z, round(geometric.variance(z), 3)
    (0.5, 7.835)
    >>> geometric.sample(z, 5, np.random.default_rng(1))
    array([ 1,  3,  1, -1, -6])
    >>> Geometric(exact=1)
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: geometric option 'exact' must be a bool, not 1
    """

    name: ClassVar[str] = "geometric"
    accounting: ClassVar[str] = PureDP.kind
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

    def log_kernel(self, deviation, parameter):
        """``-z |k|``."""
        return -parameter * np.abs(np.asarray(deviation, dtype=np.float64))


@dataclass(frozen=True)
class DiscreteGaussian(Mechanism):
    """Discrete Gaussian noise, ``σ² = Δ₂² / (2ρ)`` (zCDP), sampled exactly by default.

    A float σ² is rounded up to a rational with denominator at most ``max_denominator``;
    :meth:`variance` and :meth:`logpmf` describe that rounded σ², i.e. the noise actually added
    (by either sampler: the fast one draws with the same rounded σ²).

    Parameters
    ----------
    max_denominator : int, optional
        Largest denominator of the rational σ² the samplers use.
    exact : bool, optional
        ``True`` (the default): the exact integer sampler of Canonne, Kamath & Steinke
        (:func:`~hierarchy.mechanisms.sample_discrete_gaussian`). ``False``: the table sampler
        :func:`~hierarchy.mechanisms.sample_discrete_gaussian_fast`, tens of times faster and
        within total variation ``2**-45`` of the same law, for simulations only —
        :meth:`sample` refuses it in release mode.

    Raises
    ------
    HierarchyError
        If ``max_denominator`` is not a positive int or ``exact`` is not a bool.

    Examples
    --------
    >>> dgauss = DiscreteGaussian()
    >>> sigma2 = dgauss.parameter(ZCDP("1/4"), 1)       # ρ = 1/4, Δ₂ = 1
    >>> sigma2, round(dgauss.variance(sigma2), 6)
    (2.0, 2.0)
    >>> dgauss.sample(sigma2, 5, np.random.default_rng(1))
    array([-1,  4,  0, -2,  1])
    >>> np.exp(dgauss.logpmf([0, 1, 2], sigma2)).round(4)
    array([0.2821, 0.2197, 0.1038])

    The fast sampler, for simulations (same law to within ``2**-45``, other draws):

    >>> fast = DiscreteGaussian(exact=False)
    >>> fast.sample(sigma2, 5, np.random.default_rng(1)).dtype
    dtype('int64')
    >>> fast.sample(sigma2, 5, None)          # rng=None is release mode
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: the fast discrete Gaussian sampler is refused in release ...

    A zCDP mechanism cannot spend a pure-DP budget:

    >>> dgauss.parameter(PureDP(1), 1)
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: a zCDP mechanism (Gaussian noise) cannot keep ...
    """

    name: ClassVar[str] = "discrete_gaussian"
    accounting: ClassVar[str] = ZCDP.kind
    discrete: ClassVar[bool] = True
    parameter_name: ClassVar[str] = "sigma2"
    max_denominator: int = DEFAULT_MAX_DENOMINATOR
    exact: bool = True

    def __post_init__(self):
        integer(self.max_denominator, "max_denominator")
        if not isinstance(self.exact, bool):
            raise HierarchyError(f"discrete_gaussian option 'exact' must be a bool (true for the "
                                 f"exact sampler, false for the fast simulation sampler), not "
                                 f"{self.exact!r}")

    def _parameter(self, budget, sensitivity):
        return sensitivity * sensitivity / (2.0 * budget)

    def _sampled(self, parameter) -> float:
        return float(_exact_parameter(parameter, "sigma2", self.max_denominator))

    def variance(self, parameter):
        return discrete_gaussian_variance(self._sampled(parameter))

    def sample(self, parameter, size, rng=None):
        if not self.exact:
            return sample_discrete_gaussian_fast(self._sampled(parameter), size, rng)
        return sample_discrete_gaussian(parameter, size, rng,
                                        max_denominator=self.max_denominator)

    def logpmf(self, k, parameter):
        return discrete_gaussian_logpmf(k, self._sampled(parameter))

    def log_kernel(self, deviation, parameter):
        """``-k² / (2σ²)`` with the σ² given (a sampler's model; :meth:`logpmf` describes the
        σ² the exact sampler draws with, rounded up by less than ``1/max_denominator``)."""
        d = np.asarray(deviation, dtype=np.float64)
        return -(d * d) / (2.0 * np.asarray(parameter, dtype=np.float64))


@dataclass(frozen=True)
class Laplace(Mechanism):
    """Continuous Laplace noise, ``scale = Δ₁ / ε`` (pure DP in exact arithmetic).

    Floating-point noise: for simulations only (measuring refuses it in release mode).

    Examples
    --------
    >>> laplace = Laplace()
    >>> scale = laplace.parameter(PureDP("1/2"), 2)     # ε = 1/2, Δ₁ = 2
    >>> scale, laplace.variance(scale)
    (4.0, 32.0)
    >>> laplace.sample(scale, 3, np.random.default_rng(1)).round(3)
    array([-2.679,  0.203, -7.747])
    """

    name: ClassVar[str] = "laplace"
    accounting: ClassVar[str] = PureDP.kind
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

    def log_kernel(self, deviation, parameter):
        """``-|x| / b``."""
        return -np.abs(np.asarray(deviation, dtype=np.float64)) / parameter


@dataclass(frozen=True)
class Gaussian(Mechanism):
    """Continuous Gaussian noise, ``σ² = Δ₂² / (2ρ)`` (zCDP in exact arithmetic).

    Floating-point noise: for simulations only (measuring refuses it in release mode).

    Examples
    --------
    >>> gaussian = Gaussian()
    >>> gaussian.parameter(ZCDP("1/2"), 1)     # σ² = Δ₂² / (2ρ), ρ = 1/2, Δ₂ = 1
    1.0
    >>> gaussian.sample(1.0, 3, np.random.default_rng(1)).round(3)
    array([ 1.102, -0.354,  1.867])
    >>> gaussian.to_dict()
    {'name': 'gaussian', 'accounting': 'zcdp', 'discrete': False, 'parameter_name': 'sigma2'}
    """

    name: ClassVar[str] = "gaussian"
    accounting: ClassVar[str] = ZCDP.kind
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

    def log_kernel(self, deviation, parameter):
        """``-x² / (2σ²)``."""
        d = np.asarray(deviation, dtype=np.float64)
        return -(d * d) / (2.0 * np.asarray(parameter, dtype=np.float64))


MECHANISMS: dict[str, type[Mechanism]] = {
    cls.name: cls for cls in (Geometric, DiscreteGaussian, Laplace, Gaussian)}
"""Registry of mechanism classes by name (add to it with :func:`register_mechanism`)."""

_BUILT_IN = frozenset(MECHANISMS)


def register_mechanism(cls: type[Mechanism], *, replace: bool = False) -> type[Mechanism]:
    """Register a mechanism class under its ``name`` (usable as a class decorator).

    The class must be a :class:`Mechanism` subclass (a frozen dataclass) with the class
    attributes ``name``, ``accounting`` (``'pure'`` or ``'zcdp'``), ``discrete`` and
    ``parameter_name``, and implement ``_parameter``, ``variance``, ``sample`` and ``logpmf``.
    It is then found by :func:`get_mechanism` and usable by name wherever a mechanism is taken:
    budgets, measuring, the conditional samplers, inference.

    Parameters
    ----------
    cls : type
    replace : bool, optional
        Allow replacing a registered mechanism of the same name (never a built-in one).

    Returns
    -------
    type
        ``cls``.

    Raises
    ------
    HierarchyError
        If ``cls`` is not a Mechanism subclass, lacks a class attribute, has an unknown
        accounting, or its name is taken (built-in, or registered without ``replace=True``).

    Examples
    --------
    A variant of a built-in mechanism needs only its own name (the module's example writes one
    from scratch):

    >>> @register_mechanism
    ... class HalfGeometric(Geometric):
    ...     name = "half_geometric"
    ...     def _parameter(self, budget, sensitivity):
    ...         return budget / (2 * sensitivity)
    >>> get_mechanism("half_geometric").parameter(PureDP(1), 1)
    0.5
    >>> register_mechanism(HalfGeometric)
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: a mechanism named 'half_geometric' is already registered; ...
    >>> unregister_mechanism("half_geometric")
    >>> register_mechanism(int)
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: a mechanism to register must be a subclass of ...
    """
    if not (isinstance(cls, type) and issubclass(cls, Mechanism)) or cls is Mechanism:
        raise HierarchyError(f"a mechanism to register must be a subclass of "
                             f"hierarchy.mechanisms.Mechanism, not {cls!r}")
    missing = [a for a in ("name", "accounting", "discrete", "parameter_name")
               if not hasattr(cls, a)]
    if missing:
        raise HierarchyError(f"mechanism class {cls.__name__} lacks the class attribute(s) "
                             f"{missing}; set them in the class body")
    if not isinstance(cls.name, str) or not cls.name.isidentifier():
        raise HierarchyError(f"a mechanism name must be an identifier such as 'my_noise', not "
                             f"{cls.name!r}")
    notion(cls.accounting)
    if cls.name in _BUILT_IN or (cls.name in MECHANISMS and not replace):
        raise HierarchyError(f"a mechanism named {cls.name!r} is already registered; choose "
                             f"another name" + ("" if cls.name in _BUILT_IN
                                                else " or pass replace=True"))
    MECHANISMS[cls.name] = cls
    return cls


def unregister_mechanism(name: str) -> None:
    """Remove a mechanism registered with :func:`register_mechanism` (not a built-in one).

    Parameters
    ----------
    name : str

    Raises
    ------
    HierarchyError
        For a built-in or unknown name.

    Examples
    --------
    >>> unregister_mechanism("geometric")
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: 'geometric' is a built-in mechanism and cannot be unregistered
    """
    if name in _BUILT_IN:
        raise HierarchyError(f"{name!r} is a built-in mechanism and cannot be unregistered")
    _mechanism_class(name)
    del MECHANISMS[name]


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
        ``'geometric'``, ``'discrete_gaussian'``, ``'laplace'``, ``'gaussian'`` or a name
        registered with :func:`register_mechanism`; a :class:`Mechanism` is returned unchanged
        (then no options are allowed).
    **options
        Dataclass options: ``exact`` for ``'geometric'`` and ``'discrete_gaussian'``,
        ``max_denominator`` for ``'discrete_gaussian'``.

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
