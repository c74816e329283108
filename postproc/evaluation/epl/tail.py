"""The privacy loss on tail events ``{error ≥ k}``: :func:`direct_tail_epl` estimates it from runs
of a mechanism on a dataset and a neighbour, :func:`exact_tail_epl` computes it for additive
noise of known pmf. ``docs/epl.md``, "Tail events", states the definition.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.special import ndtri

from postproc.errors import PostprocError
from postproc.evaluation.epl._checks import _as_errors
from postproc.evaluation.epl.improved import _bootstrap_options

__all__ = ["TailEPL", "direct_tail_epl", "exact_tail_epl", "MIN_TAIL_COUNT"]

#: The fewest runs, on each dataset, a tail event needs for its log ratio to be reported as a
#: number. With both counts at least 100 the log ratio's standard error is at most √(2/100) ≈ 0.14
#: and its bias (about ``1/2b − 1/2a``) at most 0.005; with 10 the standard error would be 0.45,
#: more than most losses worth measuring (docs/epl.md, "Tail events").
MIN_TAIL_COUNT = 100

_COUNT_NAMES = ("upper_d", "upper_neighbour", "lower_d", "lower_neighbour")


@dataclass(frozen=True, eq=False)
class TailEPL:
    """Tail-event log ratios at each threshold ``k`` (see :func:`direct_tail_epl`).

    Parameters
    ----------
    k : numpy.ndarray
        The thresholds, in output units (``≥ 0``).
    epl : numpy.ndarray
        ``ε̂_tail(k)``, the larger of the two tails' ``|log ratio|``; ``nan`` where not estimable.
    ci_low, ci_high : numpy.ndarray
        Its interval at ``parameters['level']`` (``nan`` where not estimable).
    tail : tuple of str
        Which tail attains it, ``'upper'`` (``{error ≥ k}``) or ``'lower'`` (``{error ≤ −k}``);
        ``''`` where not estimable.
    upper, lower : numpy.ndarray
        Each tail's signed log ratio ``log P_D − log P_D′`` (``nan`` where that tail is not
        estimable); ``upper_se``, ``lower_se`` their standard errors.
    upper_d, upper_neighbour, lower_d, lower_neighbour : numpy.ndarray of int
        The runs on ``D`` and on ``D′`` that fall in each tail: the counts behind the estimate.
    estimable : numpy.ndarray of bool
        Whether every one of the four counts is at least ``parameters['min_count']``.
    reasons : tuple of str or None
        Why a threshold is not estimable; ``None`` where it is.
    runs : tuple of int
        Runs on ``D`` and on ``D′``.
    parameters : dict
        ``exact``, ``min_count``, ``level``.

    Raises
    ------
    PostprocError
        Arrays of different lengths, or ``estimable`` that disagrees with ``epl`` or ``reasons``.

    Examples
    --------
    >>> r = direct_tail_epl([0, 1, 2, 3], [1, 2, 3, 4], [1, 2], exact=0, min_count=1)
    >>> r.to_frame()[["k", "epl", "upper_d", "upper_neighbour", "lower_d", "estimable"]]
         k       epl  upper_d  upper_neighbour  lower_d  estimable
    0  1.0       NaN        3                4        0      False
    1  2.0       NaN        2                3        0      False
    """

    k: np.ndarray
    epl: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    tail: tuple
    upper: np.ndarray
    upper_se: np.ndarray
    lower: np.ndarray
    lower_se: np.ndarray
    upper_d: np.ndarray
    upper_neighbour: np.ndarray
    lower_d: np.ndarray
    lower_neighbour: np.ndarray
    estimable: np.ndarray
    reasons: tuple
    runs: tuple
    parameters: dict = field(default_factory=dict)

    def __post_init__(self):
        size = np.asarray(self.k).size
        for name in ("k", "epl", "ci_low", "ci_high", "upper", "upper_se", "lower", "lower_se",
                     *_COUNT_NAMES, "estimable"):
            kind = bool if name == "estimable" else (np.int64 if name in _COUNT_NAMES else float)
            value = np.array(getattr(self, name), dtype=kind).ravel()
            if value.size != size:
                raise PostprocError(f"TailEPL.{name} has {value.size} entries, not one per "
                                    f"threshold ({size})")
            value.setflags(write=False)
            object.__setattr__(self, name, value)
        for name in ("tail", "reasons"):
            value = tuple(getattr(self, name))
            if len(value) != size:
                raise PostprocError(f"TailEPL.{name} has {len(value)} entries, not {size}")
            object.__setattr__(self, name, value)
        if not np.array_equal(self.estimable, np.isfinite(self.epl)) or any(
                (reason is None) != ok for reason, ok in zip(self.reasons, self.estimable)):
            raise PostprocError("TailEPL: a threshold is estimable exactly when its epl is finite "
                                "and it has no reason")
        object.__setattr__(self, "runs", tuple(int(r) for r in self.runs))
        object.__setattr__(self, "parameters", dict(self.parameters))

    def to_frame(self):
        """One row per threshold, every field a column (``reason`` for ``reasons``).

        Returns
        -------
        pandas.DataFrame
        """
        import pandas as pd

        columns = {name: getattr(self, name) for name in ("k", "epl", "ci_low", "ci_high")}
        columns["tail"] = list(self.tail)
        columns.update({name: getattr(self, name) for name in (
            "estimable", "upper", "upper_se", "lower", "lower_se", *_COUNT_NAMES)})
        return pd.DataFrame({**columns, "reason": list(self.reasons)})


def _thresholds(k: Any) -> np.ndarray:
    """``k`` as a 1-D array of finite non-negative numbers, or a PostprocError saying why not."""
    ks = _as_errors(np.ravel(k) if np.ndim(k) == 0 else k, "k")
    if ks.size == 0:
        raise PostprocError("k holds no threshold; pass at least one k >= 0")
    if (ks < 0).any():
        bad = ks[ks < 0][0]
        raise PostprocError(f"k must be non-negative, not {bad:g}: the events are {{error >= k}} "
                            f"and {{error <= -k}}, so k = {abs(bad):g} already covers both tails")
    return ks


def _finite(value: Any, name: str) -> float:
    """``value`` as a finite float, or a PostprocError naming it."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise PostprocError(f"{name} must be a number, not {value!r}") from None
    if not math.isfinite(number):
        raise PostprocError(f"{name} must be finite, not {value!r}")
    return number


def _runs(values: Any, name: str) -> np.ndarray:
    runs = _as_errors(values, name)
    if runs.size == 0:
        raise PostprocError(f"{name} holds no runs: pass the released values of the unit over "
                            f"repeated runs of the mechanism")
    return np.sort(runs)


def _log_ratio(on_d: np.ndarray, runs_d: int, on_neighbour: np.ndarray, runs_neighbour: int):
    """``log(a/R) − log(b/R′)`` and its (Katz) standard error ``√(1/a − 1/R + 1/b − 1/R′)``;
    ``nan`` where a count is 0."""
    a, b = on_d.astype(float), on_neighbour.astype(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        value = np.log(a / runs_d) - np.log(b / runs_neighbour)
        se = np.sqrt(np.maximum(0.0, 1 / a - 1 / runs_d + 1 / b - 1 / runs_neighbour))
    empty = (a == 0) | (b == 0)
    return np.where(empty, np.nan, value), np.where(empty, np.nan, se)


def _folded(value: np.ndarray, se: np.ndarray, c: float):
    """The interval of ``|λ|`` implied by ``λ ∈ [value − c·se, value + c·se]``."""
    low, high = value - c * se, value + c * se
    far = np.maximum(np.abs(low), np.abs(high))
    near = np.where((low <= 0) & (high >= 0), 0.0, np.minimum(np.abs(low), np.abs(high)))
    return near, far


def direct_tail_epl(on_d: Any, on_neighbour: Any, k: Any, *, exact: float,
                    min_count: int = MIN_TAIL_COUNT, level: float = 0.95) -> TailEPL:
    r"""Direct estimate of the privacy loss on the tail events ``{error ≥ k}`` and ``{error ≤ −k}``.

    **Estimand.** Let ``X`` be one unit's released value, ``c`` (``exact``) its exact value on
    ``D``, ``P`` and ``P′`` the distributions of ``X`` on ``D`` and on the neighbour ``D′``. The
    events are the same sets of outputs on both datasets, ``U_k = {X ≥ c + k}`` (the error on
    ``D`` is at least ``k``) and ``L_k = {X ≤ c − k}``, and

    .. math:: \varepsilon_{tail}(k) = \max\bigl(|\log P(U_k) - \log P'(U_k)|,\
              |\log P(L_k) - \log P'(L_k)|\bigr),

    the larger of the two tails' log ratios. For additive noise whose exact value moves by
    ``s`` from ``D`` to ``D′`` it is ``|log P(E ≥ k) − log P(E ≥ k − s)|`` and its mirror
    (:func:`exact_tail_epl`); for the two-sided geometric mechanism of parameter ``z`` and
    ``|s| = 1`` it is ``z`` at every ``k``. Any ``ε``-DP mechanism has ``ε_tail(k) ≤ ε``.

    **Estimator.** Each probability is the share of runs in the event: ``log(a/R) − log(b/R′)``
    for ``a`` of the ``R`` runs on ``D`` and ``b`` of the ``R′`` on ``D′``, with standard error
    ``√(1/a − 1/R + 1/b − 1/R′)`` (the delta method for a ratio of two binomial shares). No
    smoothing: a tail event pools every run beyond ``k``, so it needs none. A threshold is
    **not estimable** (``epl`` is ``nan``, with a reason) when any of its four counts is below
    ``min_count``: with fewer, the log ratio's standard error could exceed ``√(2/min_count)``
    (0.14 at the default), too noisy for a number (:data:`MIN_TAIL_COUNT`). The
    interval is Bonferroni over the two tails: each tail's ``λ ∈ L̂ ± Φ⁻¹(1 − (1 − level)/4)·se``
    at ``1 − (1 − level)/2``, so both hold, and ``ε_tail(k)`` lies between the largest lower and
    the largest upper end of ``|λ|``, with probability at least ``level`` (asymptotically, at each
    ``k``; not simultaneously over the thresholds).

    Parameters
    ----------
    on_d, on_neighbour : array_like, 1-D
        The unit's released values over the runs on ``D`` and on ``D′``.
    k : float or array_like of float
        Thresholds ``≥ 0`` in output units.
    exact : float
        The unit's exact value on ``D``, from which the errors are measured.
    min_count : int
        The fewest runs, on each dataset and in each tail, a threshold needs
        (:data:`MIN_TAIL_COUNT`).
    level : float
        Confidence level of the intervals, in [0.5, 1).

    Returns
    -------
    TailEPL
        Per threshold: the estimate, its interval, the tail attaining it, each tail's log ratio
        and the four counts behind them, whether estimable, and why not.

    Raises
    ------
    PostprocError
        Empty or non-finite runs, a negative or non-finite ``k``, a non-finite ``exact``, or
        ``min_count`` / ``level`` out of range.

    Examples
    --------
    >>> from hierarchy.mechanisms import sample_two_sided_geometric
    >>> z, runs = 0.5, 200_000
    >>> on_d = 10 + sample_two_sided_geometric(z, runs, 3)         # exact value 10 on D
    >>> on_neighbour = 11 + sample_two_sided_geometric(z, runs, 4)  # one person more on D′
    >>> r = direct_tail_epl(on_d, on_neighbour, [0, 2, 8, 14], exact=10)
    >>> np.round(r.epl, 2), r.estimable
    (array([0.5 , 0.5 , 0.52,  nan]), array([ True,  True,  True, False]))
    >>> np.round(r.ci_low, 2), np.round(r.ci_high, 2), r.tail
    (array([0.49, 0.49, 0.46,  nan]), array([0.51, 0.51, 0.59,  nan]), ('lower', 'upper',
    'upper', ''))
    >>> print(r.reasons[-1])
    too few runs in the tails at k = 14: {error >= 14} holds 120 of the 200,000 runs on D and 172
    of the 200,000 on D′, {error <= -14} 120 and 66; a log ratio needs at least min_count = 100
    in the tail on each dataset; run the mechanism more times (about 303,031 runs on each dataset)
    """
    a, b = _runs(on_d, "on_d"), _runs(on_neighbour, "on_neighbour")
    ks = _thresholds(k)
    exact = _finite(exact, "exact")
    if isinstance(min_count, bool) or not isinstance(min_count, (int, np.integer)) \
            or min_count < 1:
        raise PostprocError(f"min_count must be a positive whole number of runs, not "
                            f"{min_count!r}")
    _, level = _bootstrap_options(0, level)
    counts = {"upper_d": a.size - np.searchsorted(a, exact + ks, side="left"),
              "upper_neighbour": b.size - np.searchsorted(b, exact + ks, side="left"),
              "lower_d": np.searchsorted(a, exact - ks, side="right"),
              "lower_neighbour": np.searchsorted(b, exact - ks, side="right")}
    upper, upper_se = _log_ratio(counts["upper_d"], a.size, counts["upper_neighbour"], b.size)
    lower, lower_se = _log_ratio(counts["lower_d"], a.size, counts["lower_neighbour"], b.size)
    upper_ok = (counts["upper_d"] >= min_count) & (counts["upper_neighbour"] >= min_count)
    lower_ok = (counts["lower_d"] >= min_count) & (counts["lower_neighbour"] >= min_count)
    estimable = upper_ok & lower_ok
    c = float(ndtri(1 - (1 - level) / 4))
    upper_low, upper_high = _folded(upper, upper_se, c)
    lower_low, lower_high = _folded(lower, lower_se, c)
    nan = np.full(ks.size, np.nan)
    epl = np.where(estimable, np.fmax(np.abs(upper), np.abs(lower)), nan)
    reasons = tuple(None if ok else _reason(
        ks[i], {name: int(v[i]) for name, v in counts.items()}, a.size, b.size, min_count)
        for i, ok in enumerate(estimable))
    tail = tuple(("upper" if abs(upper[i]) >= abs(lower[i]) else "lower") if ok else ""
                 for i, ok in enumerate(estimable))
    return TailEPL(k=ks, epl=epl, ci_low=np.where(estimable, np.fmax(upper_low, lower_low), nan),
                   ci_high=np.where(estimable, np.fmax(upper_high, lower_high), nan), tail=tail,
                   upper=np.where(upper_ok, upper, nan), upper_se=np.where(upper_ok, upper_se, nan),
                   lower=np.where(lower_ok, lower, nan), lower_se=np.where(lower_ok, lower_se, nan),
                   **counts, estimable=estimable, reasons=reasons, runs=(a.size, b.size),
                   parameters={"exact": exact, "min_count": int(min_count), "level": level})


def _reason(k: float, counts: dict[str, int], runs_d: int, runs_neighbour: int,
            min_count: int) -> str:
    """Why threshold ``k`` is not estimable: the counts of both tails, and what would help."""
    runs = {"upper_d": runs_d, "upper_neighbour": runs_neighbour, "lower_d": runs_d,
            "lower_neighbour": runs_neighbour}
    short = [name for name in runs if counts[name] < min_count]
    advice = "run the mechanism more times"
    if all(counts[name] > 0 for name in short):
        needed = max(math.ceil(runs[name] * min_count / counts[name]) for name in short)
        advice += f" (about {needed:,} runs on each dataset)"
    return (f"too few runs in the tails at k = {k:g}: {{error >= {k:g}}} holds "
            f"{counts['upper_d']:,} of the {runs_d:,} runs on D and {counts['upper_neighbour']:,} "
            f"of the {runs_neighbour:,} on D′, {{error <= {-k:g}}} {counts['lower_d']:,} and "
            f"{counts['lower_neighbour']:,}; a log ratio needs at least min_count = {min_count} "
            f"in the tail on each dataset; {advice}")


def exact_tail_epl(values: Any, probabilities: Any, k: Any, *, shift: float = 1.0) -> np.ndarray:
    """The exact ``ε_tail(k)`` of additive noise with a known pmf (see :func:`direct_tail_epl`).

    The error ``E`` has pmf ``probabilities`` on ``values`` on both datasets; the exact value
    moves by ``shift`` from ``D`` to ``D′``, so ``ε_tail(k)`` is the larger of
    ``|log P(E ≥ k) − log P(E ≥ k − shift)|`` and ``|log P(E ≤ −k) − log P(E ≤ −k − shift)|``.
    A tail empty on both datasets does not count; one empty on one dataset only gives ``inf``.

    Parameters
    ----------
    values : array_like, 1-D
        The support of ``E`` (any order); it must reach far enough beyond ``k`` for the tails'
        probabilities: a truncated support cuts them.
    probabilities : array_like, 1-D
        ``P(E = value)``, non-negative (normalized here).
    k : float or array_like of float
        Thresholds ``≥ 0``.
    shift : float
        ``exact(D′) − exact(D)`` (``+1``: one person more in the unit on ``D′``).

    Returns
    -------
    numpy.ndarray
        ``ε_tail(k)`` per threshold.

    Raises
    ------
    PostprocError
        Bad values, probabilities, thresholds or shift.

    Examples
    --------
    The two-sided geometric mechanism of parameter ``z`` moved by one: ``z`` at every ``k``.

    >>> from hierarchy.mechanisms import two_sided_geometric_pmf
    >>> support = np.arange(-200, 201)
    >>> np.round(exact_tail_epl(support, two_sided_geometric_pmf(support, 0.5), [0, 1, 5]), 12)
    array([0.5, 0.5, 0.5])
    """
    v = _as_errors(values, "values")
    p = _as_errors(probabilities, "probabilities")
    if v.size != p.size or v.size == 0:
        raise PostprocError(f"values ({v.size}) and probabilities ({p.size}) must be as many, and "
                            f"at least one")
    if (p < 0).any() or p.sum() <= 0:
        raise PostprocError("probabilities must be non-negative with a positive sum")
    ks = _thresholds(k)
    shift = _finite(shift, "shift")
    order = np.argsort(v, kind="stable")
    v, p = v[order], p[order] / p.sum()
    at_least = np.concatenate([np.cumsum(p[::-1])[::-1], [0.0]])   # P(E ≥ v[i]), then 0
    at_most = np.concatenate([[0.0], np.cumsum(p)])                # 0, then P(E ≤ v[i])

    def ratio(first: np.ndarray, second: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.abs(np.log(first) - np.log(second))

    upper = ratio(at_least[np.searchsorted(v, ks, side="left")],
                  at_least[np.searchsorted(v, ks - shift, side="left")])
    lower = ratio(at_most[np.searchsorted(v, -ks, side="right")],
                  at_most[np.searchsorted(v, -ks - shift, side="right")])
    return np.fmax(upper, lower)
