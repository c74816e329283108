"""The result type every EPL estimator returns, :class:`EPLResult`, and its JSON form."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from postproc.errors import PostprocError
from postproc.reports.notes import epl_kind  # one definition, with the notes that read it

__all__ = ["EPLResult", "METHODS", "unbounded", "epl_kind", "epl_text"]

METHODS = ("improved", "published", "direct")


@dataclass(frozen=True, eq=False)
class EPLResult:
    """An EPL estimate with its interval, sample size, settings and curve.

    Parameters
    ----------
    epl : float
        The estimate, ``max |log ratio|``; ``+inf`` when the errors cannot pin a number down
        (then ``reason`` says why, and ``ci_low`` may still bound it from below).
    ci_low, ci_high : float
        The interval (``nan`` for the published method, which has none). With ``epl = inf``, a
        finite positive ``ci_low`` is a **one-sided lower bound**, read as ``EPL ≥ ci_low`` at the
        confidence level the estimator records (``ci_high`` is then ``inf``); a ``nan`` one means
        nothing is known (see :attr:`kind`).
    n : int
        Number of errors (for ``direct``: the smaller number of runs of the two datasets).
    method : {'improved', 'published', 'direct'}
    parameters : dict
        Every setting used, the defaults resolved (bandwidth, window, floor, …).
    reason : str or None
        Why ``epl`` is infinite; ``None`` whenever it is finite.
    x, epl_x : numpy.ndarray
        The curve: ``epl_x[i] = log f(x[i]) / f(x[i] + 1)`` at the points the estimate used.

    Raises
    ------
    PostprocError
        If the fields are inconsistent (unknown method, ``reason`` missing for an infinite
        estimate, curve arrays of different lengths, …).

    Examples
    --------
    >>> r = EPLResult(epl=0.5, ci_low=0.4, ci_high=0.6, n=100, method="improved", parameters={})
    >>> r.to_dict()["epl"], r.reason
    (0.5, None)
    >>> bound = EPLResult(epl=float("inf"), ci_low=5.6, ci_high=float("inf"), n=1000,
    ...                   method="improved", parameters={}, reason="all 1000 errors equal 0")
    >>> bound.kind, bound.lower_bound, str(bound)
    ('bound', 5.6, 'EPL ≥ 5.6 (all 1000 errors equal 0)')
    >>> EPLResult(epl=float("inf"), ci_low=float("nan"), ci_high=float("nan"), n=1,
    ...           method="published", parameters={})
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: an infinite EPL needs a reason
    """

    epl: float
    ci_low: float
    ci_high: float
    n: int
    method: str
    parameters: dict = field(default_factory=dict)
    reason: str | None = None
    x: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)
    epl_x: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)

    def __post_init__(self):
        if self.method not in METHODS:
            raise PostprocError(f"unknown EPL method {self.method!r}; use one of {METHODS}")
        epl = float(self.epl)
        if math.isnan(epl) or epl < 0:
            raise PostprocError(f"an EPL is a non-negative number or +inf, not {self.epl!r}")
        if math.isinf(epl) and not self.reason:
            raise PostprocError("an infinite EPL needs a reason")
        if math.isfinite(epl) and self.reason is not None:
            raise PostprocError("a finite EPL has no reason; pass reason=None")
        if isinstance(self.n, bool) or not isinstance(self.n, (int, np.integer)) or self.n < 0:
            raise PostprocError(f"n must be a non-negative integer, not {self.n!r}")
        x = np.array(self.x, dtype=float).ravel()
        epl_x = np.array(self.epl_x, dtype=float).ravel()
        if x.shape != epl_x.shape:
            raise PostprocError(f"the curve needs as many x ({x.size}) as epl_x ({epl_x.size})")
        if math.isinf(epl) and math.isfinite(float(self.ci_low)) and float(self.ci_low) <= 0:
            raise PostprocError(f"a lower bound must be positive, not {self.ci_low!r}; an EPL "
                                f"known to be only >= 0 is unknown: pass ci_low=nan")
        x.setflags(write=False)
        epl_x.setflags(write=False)
        for name, value in [("epl", epl), ("ci_low", float(self.ci_low)),
                            ("ci_high", float(self.ci_high)), ("n", int(self.n)),
                            ("parameters", dict(self.parameters)), ("x", x), ("epl_x", epl_x)]:
            object.__setattr__(self, name, value)

    @property
    def kind(self) -> str:
        """``'estimate'`` (a finite ``epl`` with its interval), ``'bound'`` (``epl = inf`` and
        ``EPL ≥ ci_low``: the errors bound the loss from below but cannot pin it down),
        ``'unbounded'`` (``ci_low = inf``: the counts are published exactly, as at a level held
        invariant, so the loss has no bound; :func:`~postproc.evaluation.evaluate.evaluate`
        says so when the spec tells it) or ``'undefined'`` (``epl = inf`` and nothing known;
        ``reason`` says why)."""
        if math.isfinite(self.epl):
            return "estimate"
        if math.isinf(self.ci_low):
            return "unbounded"
        return "bound" if math.isfinite(self.ci_low) else "undefined"

    @property
    def lower_bound(self) -> float | None:
        """The one-sided lower bound ``ci_low`` when :attr:`kind` is ``'bound'``, else None."""
        return self.ci_low if self.kind == "bound" else None

    def __str__(self) -> str:
        if self.kind == "estimate":
            interval = (f" [{self.ci_low:.3g}, {self.ci_high:.3g}]"
                        if math.isfinite(self.ci_low) and math.isfinite(self.ci_high) else "")
            return f"EPL {self.epl:.3g}{interval}"
        if self.kind == "bound":
            return f"EPL ≥ {self.ci_low:.3g} ({self.reason})"
        if self.kind == "unbounded":
            return f"EPL unbounded ({self.reason})"
        return f"EPL undefined ({self.reason})"

    def to_dict(self, *, curve: bool = False) -> dict[str, Any]:
        """A JSON-ready dict; non-finite numbers become ``None`` (``reason`` says why).

        Parameters
        ----------
        curve : bool
            Also include the curve as lists ``x`` and ``epl_x``.

        Returns
        -------
        dict
            Keys ``epl, ci_low, ci_high, n, method, kind, parameters, reason`` (and ``x,
            epl_x``); for a bound, ``epl`` and ``ci_high`` are None and ``ci_low`` the bound.

        Examples
        --------
        >>> EPLResult(epl=float("inf"), ci_low=float("nan"), ci_high=float("nan"), n=3,
        ...           method="published", parameters={"percentile": 95},
        ...           reason="all errors are equal").to_dict()["epl"] is None
        True
        """
        out = {"epl": _finite_or_none(self.epl), "ci_low": _finite_or_none(self.ci_low),
               "ci_high": _finite_or_none(self.ci_high), "n": self.n, "method": self.method,
               "kind": self.kind,
               "parameters": {k: _json_ready(v) for k, v in self.parameters.items()},
               "reason": self.reason}
        if curve:
            out["x"] = [float(v) for v in self.x]
            out["epl_x"] = [_finite_or_none(v) for v in self.epl_x]
        return out


def _finite_or_none(value: float) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None


def _json_ready(value: Any) -> Any:
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return _finite_or_none(value)
    if isinstance(value, (list, tuple)):
        return [_json_ready(v) for v in value]
    return value


def _undefined(method: str, n: int, parameters: dict, reason: str) -> EPLResult:
    nan = float("nan")
    return EPLResult(epl=float("inf"), ci_low=nan, ci_high=nan, n=n, method=method,
                     parameters=parameters, reason=reason)


def unbounded(method: str, n: int, reason: str) -> EPLResult:
    """The EPL of counts published exactly (``kind == 'unbounded'``): ``epl``, ``ci_low`` and
    ``ci_high`` are all ``inf``.

    Examples
    --------
    >>> unbounded("improved", 4, "held invariant").kind
    'unbounded'
    """
    inf = float("inf")
    return EPLResult(epl=inf, ci_low=inf, ci_high=inf, n=n, method=method, parameters={},
                     reason=reason)


def _bounded(method: str, n: int, parameters: dict, bound: float, reason: str) -> EPLResult:
    """``EPL ≥ bound`` (one-sided, at ``parameters['level']``), or undefined when the bound is
    not positive (then the errors say nothing: ``reason`` is kept, with why no bound exists)."""
    if not bound > 0 or not math.isfinite(bound):
        return _undefined(method, n, parameters, reason + " (no positive bound follows)")
    return EPLResult(epl=float("inf"), ci_low=float(bound), ci_high=float("inf"), n=n,
                     method=method, parameters=parameters, reason=reason)


def epl_text(epl: float, ci_low: float, ci_high: float, number=None) -> str:
    """An EPL for a table cell: ``'0.52 [0.4, 0.61]'``, ``'≥ 5.6'`` (a one-sided bound),
    ``'unbounded'`` (held invariant) or ``'undefined'``.

    Parameters
    ----------
    epl, ci_low, ci_high : float
    number : callable, optional
        Formats a number (default 3 significant digits).

    Examples
    --------
    >>> inf, nan = float("inf"), float("nan")
    >>> epl_text(0.52, 0.4, 0.61), epl_text(inf, 5.6, inf), epl_text(0.5, nan, nan)
    ('0.52 [0.4, 0.61]', '≥ 5.6', '0.5')
    >>> epl_text(inf, inf, inf), epl_text(inf, nan, nan)
    ('unbounded', 'undefined')
    """
    number = number or (lambda v: f"{v:.3g}")
    kind = epl_kind(epl, ci_low)
    if kind == "bound":
        return f"≥ {number(float(ci_low))}"
    if kind != "estimate":
        return kind
    low, high = float(ci_low), float(ci_high)
    interval = f" [{number(low)}, {number(high)}]" if math.isfinite(low) and \
        math.isfinite(high) else ""
    return f"{number(float(epl))}{interval}"
