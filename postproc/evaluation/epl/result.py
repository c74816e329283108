"""The result type every EPL estimator returns, :class:`EPLResult`, and its JSON form."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from postproc.errors import PostprocError

__all__ = ["EPLResult", "METHODS"]

METHODS = ("improved", "published", "direct")


@dataclass(frozen=True, eq=False)
class EPLResult:
    """An EPL estimate with its interval, sample size, settings and curve.

    Parameters
    ----------
    epl : float
        The estimate, ``max |log ratio|``; ``+inf`` when it is undefined (then ``reason`` says why).
    ci_low, ci_high : float
        Bootstrap interval (``nan`` for the published method, which has none).
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
        x.setflags(write=False)
        epl_x.setflags(write=False)
        for name, value in [("epl", epl), ("ci_low", float(self.ci_low)),
                            ("ci_high", float(self.ci_high)), ("n", int(self.n)),
                            ("parameters", dict(self.parameters)), ("x", x), ("epl_x", epl_x)]:
            object.__setattr__(self, name, value)

    def to_dict(self, *, curve: bool = False) -> dict[str, Any]:
        """A JSON-ready dict; non-finite numbers become ``None`` (``reason`` says why).

        Parameters
        ----------
        curve : bool
            Also include the curve as lists ``x`` and ``epl_x``.

        Returns
        -------
        dict
            Keys ``epl, ci_low, ci_high, n, method, parameters, reason`` (and ``x, epl_x``).

        Examples
        --------
        >>> EPLResult(epl=float("inf"), ci_low=float("nan"), ci_high=float("nan"), n=3,
        ...           method="published", parameters={"percentile": 95},
        ...           reason="all errors are equal").to_dict()["epl"] is None
        True
        """
        out = {"epl": _finite_or_none(self.epl), "ci_low": _finite_or_none(self.ci_low),
               "ci_high": _finite_or_none(self.ci_high), "n": self.n, "method": self.method,
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
