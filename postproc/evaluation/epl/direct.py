"""The direct EPL estimator, :func:`direct_epl`: repeated runs on a dataset and a neighbour."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from postproc.evaluation.epl._checks import _as_errors, _check_memory, _positive
from postproc.evaluation.epl._smooth import Functionals, fit_side, functionals
from postproc.evaluation.epl.improved import Binned, _bins, _maximum, _Options
from postproc.evaluation.epl.result import EPLResult, _undefined

__all__ = ["direct_epl"]

_BYTES_PER_BIN = 64.0         # bins of both run sets and their lookups


def _log_probabilities(binned: Binned, low: int, high: int, name: str, first_column: int):
    """Fitted ``log P[X = k]`` for ``k = low … high`` from the two sides of one run set.

    Returns ``(values, blocks)`` or a reason string if a side cannot be fitted.
    """
    centre = binned.median()
    k = np.arange(low, high + 1)
    values = np.empty(k.size)
    blocks = []
    for sign, chosen in ((1, k >= centre), (-1, k < centre)):
        if not chosen.any():
            continue
        span = int(np.max(np.abs(k[chosen] - centre)))
        counts, _ = binned.side(centre, sign, span)
        fit = fit_side(counts)
        if fit is None:
            side = "above" if sign > 0 else "below"
            return (f"fewer than two distinct outputs of the runs on {name} {side} their median "
                    f"{centre}: no probability can be fitted there; run the mechanism more times")
        columns = np.flatnonzero(chosen)
        v, block = functionals(fit, fit.rows(sign * (k[chosen] - centre)),
                               first_column + columns, 1.0, -math.log(binned.n))
        values[columns] = v
        blocks.append(block)
    return values, blocks


def direct_epl(on_d: Any, on_neighbour: Any, *, bin_width: float = 1.0, reach: float = 95.0,
               precision: float = 0.1, n_boot: int = 1000, level: float = 0.95,
               rng: Any = None) -> EPLResult:
    r"""Direct EPL from repeated runs of a mechanism on a dataset ``D`` and a neighbour ``D′``.

    **Estimand.** Bin the outputs of one unit to ``k = round(output / bin_width)``; let ``p`` and
    ``p′`` be the pmfs of the bins on ``D`` and ``D′`` and ``W = [⌊q_{100−r}⌋, ⌈q_r⌉]`` the
    window of the pooled runs' percentiles (``r = reach``). The EPL is

    .. math:: \theta_W = \max_{k \in W} |\log p(k) - \log p'(k)|,

    the largest log ratio of the point events ``{X = k}`` in the window. For the geometric
    mechanism with ``D′`` one person away it is ``z``; for a discrete Gaussian it grows with the
    window, as for :func:`improved_epl`.

    **Estimator.** ``log p`` and ``log p′`` are fitted separately, each split at its median, by the
    penalized Poisson regression of :func:`improved_epl` (unbiased for any log-quadratic side);
    ``θ̂ = max_k |log p̂(k) − log p̂′(k)|``. **Undefined** when a contender for the maximum (a
    ``k`` with ``|r̂(k)| + Φ⁻¹(level)·s(k) ≥ θ̂``) has a standard error above ``precision · θ̂``:
    the runs cannot pin the largest ratio down (for the geometric mechanism the contenders'
    standard error is about ``4/√R``, so a ratio ``z`` needs ``R ≳ 16/(precision · z)²`` runs:
    1,600 for ``z = 1``, 160,000 for ``z = 0.1``). Unlike :func:`improved_epl` it then gives no
    bound: with few runs the fitted levels' normal approximation fails (in the study, such
    bounds held in as few as a quarter of the seeds), and a looser ``precision`` lets through
    the estimates that noise has inflated (+100 % and more at the edge of definedness). The
    interval is that of :func:`improved_epl`, with each run set's fit drawn independently.

    Parameters
    ----------
    on_d, on_neighbour : array_like, 1-D
        Outputs of the runs on ``D`` and on ``D′``.
    bin_width : float
        Width of the output bins (1 for counts).
    reach : float
        Percentile, in (50, 100], of the window's edges.
    precision : float
        Largest standard error, relative to the estimate, of a contender for the maximum.
    n_boot : int
        Draws of the fits that calibrate the interval (0 for no interval).
    level : float
        Confidence level, in [0.5, 1).
    rng : None, int, numpy.random.Generator or hierarchy.randomness.Randomness
        Randomness for the draws.

    Returns
    -------
    EPLResult
        ``n`` is the smaller number of runs; the curve is ``k`` (in output units) and
        ``log p̂(k) − log p̂′(k)``; ``parameters`` records the ``window``, ``argmax`` (the event
        ``P[X = k]``), ``max_se`` (largest standard error of a contender) and ``runs``. ``+inf``
        with a reason (and the withheld ``estimate`` in ``parameters``) when the runs cannot
        support a number.

    Raises
    ------
    PostprocError
        Bad outputs or parameters.

    Examples
    --------
    >>> from hierarchy.mechanisms import sample_two_sided_geometric
    >>> z, runs = 1.0, 50_000
    >>> on_d = 10 + sample_two_sided_geometric(z, runs, 3)
    >>> on_neighbour = 11 + sample_two_sided_geometric(z, runs, 4)
    >>> r = direct_epl(on_d, on_neighbour, rng=0)
    >>> bool(abs(r.epl - z) < 0.1), bool(r.ci_low <= r.epl <= r.ci_high), r.n
    (True, True, 50000)
    >>> few = direct_epl(on_d[:100], on_neighbour[:100], rng=0)
    >>> few.kind, few.reason
    ('undefined', 'too few runs (100) to estimate the probabilities in the window ...')
    """
    a = _as_errors(on_d, "on_d")
    b = _as_errors(on_neighbour, "on_neighbour")
    bin_width = _positive(bin_width, "bin_width")
    options = _Options.checked(reach, precision, n_boot, level)
    n = int(min(a.size, b.size))
    parameters: dict[str, Any] = {"bin_width": bin_width, **options.record(),
                                  "runs": [int(a.size), int(b.size)]}
    if n < 2:
        return _undefined("direct", n, parameters,
                          f"{n} run(s) on one of the two datasets: run the mechanism more times")
    runs = _Runs.binned(a, b, bin_width, options.reach)
    parameters["window"] = [runs.low * bin_width, runs.high * bin_width]
    ratio = _log_ratio(runs)
    if isinstance(ratio, str):
        return _undefined("direct", n, parameters, ratio)
    best = _maximum(ratio, level=options.level, n_boot=options.n_boot, rng=rng,
                    what=f"the bootstrap (n_boot = {options.n_boot} replicates of both run sets' "
                         f"fitted log probabilities at {ratio.values.size} outputs)",
                    fix="lower n_boot (1,000 draws give a stable 95% interval), pass n_boot = 0 "
                        "for no interval, or raise bin_width")
    k = np.arange(runs.low, runs.high + 1) * bin_width
    parameters["argmax"] = f"P[X = {k[best.argmax]:g}]"
    parameters["max_se"] = best.max_se
    if not best.max_se <= options.precision * best.estimate:
        return _too_few_runs(best, k, runs, options.precision, parameters, n)
    return EPLResult(epl=best.estimate, ci_low=best.ci_low, ci_high=best.ci_high, n=n,
                     method="direct", parameters=parameters, x=k, epl_x=ratio.values)


@dataclass(frozen=True, eq=False)
class _Runs:
    """The outputs of both run sets in bins of width ``bin_width``, and the window
    ``[low, high]`` of bins of the pooled runs."""

    on_d: Binned
    on_neighbour: Binned
    bin_width: float
    low: int
    high: int

    @classmethod
    def binned(cls, a: np.ndarray, b: np.ndarray, bin_width: float, reach: float) -> _Runs:
        """Bin both run sets (refusing bins that would not fit in memory) and find the
        window."""
        bins_a = _bins(a, bin_width, "outputs", "bin_width")
        bins_b = _bins(b, bin_width, "outputs", "bin_width")
        low = min(bins_a.min(), bins_b.min())
        size = float(max(bins_a.max(), bins_b.max()) - low + 1)
        _check_memory(_BYTES_PER_BIN * size,
                      f"binning the outputs into {size:,.0f} bins of width {bin_width:g} (from "
                      f"{low * bin_width:g} to {(low + size - 1) * bin_width:g})",
                      "raise bin_width, or check the outputs for outliers")
        binned_a, binned_b = Binned(bins_a), Binned(bins_b)
        low, high = Binned(np.concatenate([bins_a, bins_b])).window(reach)
        return cls(on_d=binned_a, on_neighbour=binned_b, bin_width=bin_width, low=low, high=high)


def _log_ratio(runs: _Runs) -> Functionals | str:
    """``log p̂(k) − log p̂′(k)`` over the window, each run set fitted on its own (a reason
    string when a side of one cannot be fitted)."""
    values, blocks = [], []
    for binned, name, sign in ((runs.on_d, "D", 1.0), (runs.on_neighbour, "D′", -1.0)):
        fitted = _log_probabilities(binned, runs.low, runs.high, name, 0)
        if isinstance(fitted, str):
            return fitted
        v, bl = fitted
        values.append(sign * v)
        blocks += [(columns, sign * y) for columns, y in bl]
    return Functionals(values=values[0] + values[1], blocks=tuple(blocks))


def _too_few_runs(best: Any, k: np.ndarray, runs: _Runs, precision: float,
                  parameters: dict[str, Any], n: int) -> EPLResult:
    """Undefined: a contender for the maximum has a standard error above ``precision`` times the
    estimate (withheld in ``parameters['estimate']``)."""
    parameters["estimate"] = best.estimate
    relative = best.max_se / best.estimate if best.estimate > 0 else math.inf
    return _undefined(
        "direct", n, parameters,
        f"too few runs ({n:,}) to estimate the probabilities in the window "
        f"[{runs.low * runs.bin_width:g}, {runs.high * runs.bin_width:g}]: the log ratio of P[X = "
        f"{k[best.worst]:g}] could be the largest but has standard error "
        f"{best.max_se:.3g}, {relative:.2f} of the estimate {best.estimate:.3g} (more than "
        f"precision = {precision:g}); run the mechanism more times")
