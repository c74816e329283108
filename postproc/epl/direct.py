"""The direct EPL estimator, :func:`direct_epl`: repeated runs on a dataset and a neighbour."""

from __future__ import annotations

from typing import Any

import numpy as np

from hierarchy.randomness import as_randomness
from postproc.epl._checks import _as_errors, _check_memory, _positive
from postproc.epl.improved import (_basic_interval, _bootstrap_options, _largest_abs,
                                   max_se_ladder)
from postproc.epl.result import EPLResult, _undefined

__all__ = ["direct_epl"]

_BYTES_PER_BIN = 256.0        # counts, three events of each side, ratios, errors, masks
_BOOT_BYTES_PER_BIN = 256.0   # the same per bootstrap replicate (measured: about 170)


def _event_log_ratios(counts_d, counts_n, runs_d, runs_n):
    """Log ratios and standard errors of point, upper-tail and lower-tail events, stacked.

    ``counts_*`` are ``(..., K)`` bin counts; the result is ``(..., 3, K)`` for the events
    ``{X = k}``, ``{X ≥ k}``, ``{X ≤ k}`` and the counts of the rarer side of each.
    """
    def events(counts):
        upper = np.cumsum(counts[..., ::-1], axis=-1)[..., ::-1]
        return np.stack([counts, upper, np.cumsum(counts, axis=-1)], axis=-2)
    a, b = events(counts_d), events(counts_n)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.log(a / runs_d) - np.log(b / runs_n)
        se = np.sqrt(np.maximum(1 / a - 1 / runs_d + 1 / b - 1 / runs_n, 0.0))
    return ratio, se, np.minimum(a, b)


def _usable_events(se, fewest, floor, max_se):
    return (fewest >= floor) & (se <= max_se)


def direct_epl(on_d: Any, on_neighbour: Any, *, bin_width: float = 1.0,
               max_se: float | None = None, floor: float = 10.0, n_boot: int = 200,
               level: float = 0.95, rng: Any = None) -> EPLResult:
    """Direct EPL from repeated runs of a mechanism on a dataset ``D`` and a neighbour ``D′``.

    The outputs (or errors) of one unit over ``R`` runs on each dataset are binned to integers
    ``k = round(output / bin_width)``. For every point event ``{X = k}`` and tail event ``{X ≥ k}``,
    ``{X ≤ k}``, the log ratio of the two empirical probabilities is
    ``log (c_D/R_D) / (c_D′/R_D′)``, with binomial delta-method standard error
    ``√(1/c_D − 1/R_D + 1/c_D′ − 1/R_D′)``. **Rule:** an event counts only if it occurred at least
    ``floor`` times in each run set and its standard error is at most ``max_se`` (by default the
    first threshold of :func:`max_se_ladder` of ``min(R_D, R_D′)`` that admits an event); the EPL
    is the largest absolute log ratio of the events that count. The interval is the basic
    bootstrap interval (each run set resampled on its own). For the geometric mechanism with
    parameter ``z`` and ``D′`` one person away, every point event has log ratio exactly ``±z``,
    so the tolerance is ``4.5 · max_se`` as for :func:`improved_epl`, with no smoothing term.

    Parameters
    ----------
    on_d, on_neighbour : array_like, 1-D
        Outputs of the runs on ``D`` and on ``D′``.
    bin_width : float
        Width of the output bins (1 for counts).
    max_se : float, optional
        Largest standard error of a usable log ratio; default from :func:`max_se_ladder`.
    floor : float
        Fewest occurrences of a usable event on each side.
    n_boot : int
        Bootstrap replicates (0 for no interval).
    level : float
        Confidence level.
    rng : None, int, numpy.random.Generator or hierarchy.randomness.Randomness
        Randomness for the bootstrap.

    Returns
    -------
    EPLResult
        ``n`` is the smaller number of runs; the curve is the usable point events' log ratios;
        ``parameters["argmax"]`` names the event attaining the maximum. ``+inf`` with a reason
        when no event is usable.

    Raises
    ------
    PostprocError
        Bad outputs or parameters.

    Examples
    --------
    >>> rng = np.random.default_rng(3)
    >>> z, runs = 0.5, 200_000
    >>> def geometric(size):
    ...     p = 1 - np.exp(-z)
    ...     return rng.geometric(p, size) - rng.geometric(p, size)
    >>> r = direct_epl(10 + geometric(runs), 11 + geometric(runs), rng=0)
    >>> bool(abs(r.epl - z) < 4.5 * r.parameters["max_se"]), r.n
    (True, 200000)
    """
    a = _as_errors(on_d, "on_d")
    b = _as_errors(on_neighbour, "on_neighbour")
    bin_width = _positive(bin_width, "bin_width")
    floor = _positive(floor, "floor")
    n_boot, level = _bootstrap_options(n_boot, level)
    n = int(min(a.size, b.size))
    parameters: dict[str, Any] = {
        "bin_width": bin_width, "max_se": None if max_se is None else _positive(max_se, "max_se"),
        "floor": floor, "n_boot": n_boot, "level": level, "runs": [int(a.size), int(b.size)]}
    if n == 0:
        return _undefined("direct", n, parameters, "no runs on one of the two datasets")
    bins_a = np.floor(a / bin_width + 0.5).astype(np.int64)
    bins_b = np.floor(b / bin_width + 0.5).astype(np.int64)
    low = min(bins_a.min(), bins_b.min())
    size = int(max(bins_a.max(), bins_b.max()) - low + 1)
    _check_memory(_BYTES_PER_BIN * size,
                  f"binning the outputs into {size:,} bins of width {bin_width:g} (from "
                  f"{low * bin_width:g} to {(low + size - 1) * bin_width:g}), with three events "
                  f"per bin",
                  "raise bin_width, or check the outputs for outliers")
    counts_a = np.bincount(bins_a - low, minlength=size).astype(float)
    counts_b = np.bincount(bins_b - low, minlength=size).astype(float)
    ratio, se, fewest = _event_log_ratios(counts_a, counts_b, a.size, b.size)
    ladder = max_se_ladder(n) if parameters["max_se"] is None else [parameters["max_se"]]
    tau = parameters["max_se"] = next(
        (float(t) for t in ladder if np.any(_usable_events(se, fewest, floor, t))),
        float(ladder[-1]))
    usable = _usable_events(se, fewest, floor, tau)
    if not usable.any():
        return _undefined("direct", n, parameters,
                          f"no event occurred >= floor = {floor:g} times on both sides with a log "
                          f"ratio standard error <= max_se = {tau:.3g}: run the mechanism more "
                          f"times, or pass a larger max_se or a smaller floor")
    epl = float(_largest_abs(ratio, usable, axis=None))
    family, k = np.unravel_index(np.argmax(np.where(usable, np.abs(ratio), -np.inf)), ratio.shape)
    value = (low + k) * bin_width
    parameters["argmax"] = f"P[X {('=', '>=', '<=')[family]} {value:g}]"
    ci_low = ci_high = float("nan")
    if n_boot:
        _check_memory(_BOOT_BYTES_PER_BIN * n_boot * size,
                      f"the bootstrap (n_boot = {n_boot} replicates of both run sets over "
                      f"{size:,} bins, three events per bin)",
                      "lower n_boot (200 to 2,000 replicates give a stable 95% interval), pass "
                      "n_boot = 0 for no interval, or raise bin_width")
        generator = as_randomness(rng).generator
        boot_a = generator.multinomial(a.size, counts_a / a.size, size=n_boot).astype(float)
        boot_b = generator.multinomial(b.size, counts_b / b.size, size=n_boot).astype(float)
        boot_ratio, boot_se, boot_fewest = _event_log_ratios(boot_a, boot_b, a.size, b.size)
        replicates = _largest_abs(boot_ratio, _usable_events(boot_se, boot_fewest, floor, tau),
                                  axis=(-2, -1))
        ci_low, ci_high = _basic_interval(epl, replicates, level)
    points = usable[0]
    x = (low + np.flatnonzero(points)) * bin_width
    return EPLResult(epl=epl, ci_low=ci_low, ci_high=ci_high, n=n, method="direct",
                     parameters=parameters, x=x, epl_x=ratio[0][points])
