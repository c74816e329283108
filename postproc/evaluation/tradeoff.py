"""The accuracy–ε trade-off: how accurate a table's answers are at each privacy budget.

Clark & Dajani (2019) drew this curve for the senior disclosure-avoidance leaders who choose ε
(their "ROC curve"): per level and query, **L1** (mean absolute error per answer), **L2** (root
mean squared error per answer) and the **share of answers within ±k** of the truth
(:data:`DEFAULT_WITHIN`) against ε. :func:`tradeoff_curve` measures a table at every budget of a
grid and every seed (one tidy row per budget, seed, level and query), :func:`tradeoff_table`
averages over the seeds; :mod:`postproc.evaluation.tradeoff_outputs` draws and writes it;
``postproc tradeoff`` does it for a run configuration (:mod:`postproc.apps.runs.tradeoff`).

**Of what.** By default the noisy measurements themselves, as Clark & Dajani drew it. The grid is
the budget's *total* (ε, or ρ of a zCDP budget), split as the given budget splits it. An answer is
its query's measurement at its level, else the sum of the measured query that determines it most
precisely (:meth:`~hierarchy.noisy.NoisyHierarchy.derived_answers`), else the sum of its children's
answers (bottom-up: Clark & Dajani's mechanism is the budget ``{bottom level: 1}`` on
``detailed``). ``method=NAME`` post-processes every replicate with a registered post-processor.

**Exact expectations** (``expected_*``). An answer summing ``m`` independent draws of variance
``Var`` has ``E[error²] = m·Var``: ``expected_l2 = √(mean m · Var)``. For discrete noise the law of
the sum follows from the pmf (``m = 1``: the pmf; ``m > 1``: its ``m``-fold convolution through
the characteristic function, by FFT; past 2²² points the normal law with a continuity correction),
which gives ``expected_l1`` and ``expected_within_k``. NaN after post-processing, and for the L1
and shares of continuous noise.

**Simulation only.** Replicate (budget, seed) draws from ``Randomness.simulation(seed)``: the same
random words at every budget of a seed (common random numbers: the inverse-CDF geometric draws
then move smoothly with ε, so the curve's differences are less noisy than independent draws
would make them); a post-processor draws from
:func:`~postproc.methods.registry.method_rng` of it. Tables carry the simulation label
(:mod:`postproc.gate`): seeded noise, not safe for release, and errors against the truth, which
a real release keeps confidential (``docs/release.md``).

Examples
--------
>>> from hierarchy import Budget, E2E_1940, e2e_workload, synthesize_1940, tabulate
>>> levels = ["nation", "state"]
>>> truth = tabulate(synthesize_1940(2_000, seed=1).persons, schema=E2E_1940, levels=levels)
>>> curve = tradeoff_curve(truth, workload=e2e_workload(E2E_1940),
...                        budget=Budget.e2e(1, levels), grid=[0.5, 4], seeds=[1, 2],
...                        queries=["total"], within=[0, 5])
>>> table = tradeoff_table(curve)
>>> table[["epsilon", "level", "answer_from", "seeds"]].values.tolist()
[[0.5, 'nation', 'sum of va_hisp_race', 2], [0.5, 'state', 'sum of va_hisp_race', 2],
 [4.0, 'nation', 'sum of va_hisp_race', 2], [4.0, 'state', 'sum of va_hisp_race', 2]]
>>> state = table[table["level"] == "state"].set_index("epsilon")
>>> bool(state.loc[4.0, "l1"] < state.loc[0.5, "l1"])                  # more ε, less error
True
>>> round(float(state.loc[4.0, "expected_within_5"]), 3)      # exact, from the noise's pmf
0.421
>>> table.attrs["randomness"]["mode"]
'simulation'
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from hierarchy.budget import Budget
from hierarchy.errors import HierarchyError
from hierarchy.frames import refinement, resolve_query
from hierarchy.histograms import Hierarchy
from hierarchy.measurement import measure
from hierarchy.mechanisms import get_mechanism
from hierarchy.queries import Workload
from hierarchy.randomness import Randomness
from postproc.errors import PostprocError
from postproc.evaluation.evaluate import result_answers
from postproc.evaluation.tables import default_queries
from postproc.gate import label_table
from postproc.methods.registry import get, method_rng, method_spec, postprocess

__all__ = ["DEFAULT_WITHIN", "MEASURED", "check_arguments", "accuracy", "expected_accuracy",
           "tradeoff_curve", "tradeoff_table"]

#: The default tolerances ``k`` of "within ±k": 0 (published exactly), 1 (off by at most one
#: person), 5 and 10 (the noise's own scale for small areas: the geometric's standard deviation
#: is 2.8 at ε = 0.5 and 14 at ε = 0.1 on a count of sensitivity 1).
DEFAULT_WITHIN = (0, 1, 5, 10)

#: The ``method`` of the curve of the noisy measurements themselves (no post-processing).
MEASURED = "measured"

#: The grid's column: ε for a pure-DP budget, ρ for a zCDP one.
_GRID = {"pure": "epsilon", "zcdp": "rho"}
_SYMBOL = {"epsilon": "ε", "rho": "ρ"}

#: Errors within this of ``k`` count as within ±k (post-processed float answers).
_TOLERANCE = 1e-9
#: The most points of the exact law of a sum (above: the normal law).
_MOST_POINTS = 1 << 22


def _is_real(value: Any) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(
        value, (bool, np.bool_))


def _values(values: Any) -> list[Any]:
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        return [values]
    return list(values)


def check_arguments(grid: Any, seeds: Any, within: Any, *, grid_name: str = "epsilons"
                    ) -> tuple[tuple[float, ...], tuple[int, ...], tuple[int, ...]]:
    """The curve's grid, seeds and tolerances, checked.

    Parameters
    ----------
    grid : sequence of numbers
        Budgets: positive, finite, each once.
    seeds : sequence of int
        Simulation seeds: non-negative integers, at least one, each once.
    within : sequence of int
        The ``k`` of "within ±k": non-negative integers, each once (none: L1 and L2 only).
    grid_name : str
        The grid's name in messages (``"epsilons"`` or ``"rhos"``).

    Returns
    -------
    tuple
        ``(grid, seeds, within)`` as tuples of float, int and int.

    Raises
    ------
    PostprocError
        Naming the argument and the value.

    Examples
    --------
    >>> check_arguments([0.5, 2], [1], [0, 5])
    ((0.5, 2.0), (1,), (0, 5))
    >>> check_arguments([1, -1], [1], [0])
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: epsilons must be positive, finite numbers (the budget's total at
    each point of the curve), not -1
    >>> check_arguments([1], [1], [-2])
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: within must be non-negative integers (the k of 'within ±k'),
    not -2
    """
    grid_values = _values(grid)
    for value in grid_values:
        if not (_is_real(value) and math.isfinite(value) and value > 0):
            raise PostprocError(f"{grid_name} must be positive, finite numbers (the budget's "
                                f"total at each point of the curve), not {value!r}")
    if not grid_values:
        raise PostprocError(f"{grid_name} must hold at least one budget")
    seed_values = _values(seeds)
    for value in seed_values:
        if not (_is_real(value) and float(value).is_integer() and value >= 0):
            raise PostprocError(f"seeds must be non-negative integers, not {value!r}")
    if not seed_values:
        raise PostprocError("seeds must hold at least one seed")
    ks = _values(within)
    for value in ks:
        if not (_is_real(value) and math.isfinite(value) and float(value).is_integer()
                and value >= 0):
            raise PostprocError(f"within must be non-negative integers (the k of 'within ±k'), "
                                f"not {value!r}")
    for values, name in ((grid_values, grid_name), (seed_values, "seeds"), (ks, "within")):
        repeated = sorted({f"{v:g}" for v in values if values.count(v) > 1})
        if repeated:
            raise PostprocError(f"{name} repeat {', '.join(repeated)}: give each value once")
    return (tuple(float(v) for v in grid_values), tuple(int(v) for v in seed_values),
            tuple(int(v) for v in ks))


def accuracy(errors: Any, *, within: Sequence[int] = DEFAULT_WITHIN) -> dict[str, float]:
    """L1, L2 and the shares within ±k of a set of errors (answer − truth).

    Parameters
    ----------
    errors : array_like
        Any shape; every entry is one answer's error.
    within : sequence of int
        The tolerances ``k``; an error counts as within ±k when ``|error| ≤ k`` (plus 1e-9, for
        the float rounding of post-processed answers).

    Returns
    -------
    dict
        ``l1`` (mean ``|error|``), ``l2`` (root mean squared error) and ``within_<k>`` for each
        ``k``.

    Raises
    ------
    PostprocError
        No errors, or errors that are not finite numbers.

    Examples
    --------
    >>> accuracy([0, 1, -3, 4], within=[0, 1])
    {'l1': 2.0, 'l2': 2.5495097567963922, 'within_0': 0.25, 'within_1': 0.5}
    """
    e = np.abs(np.asarray(errors, dtype=np.float64)).ravel()
    if not e.size:
        raise PostprocError("accuracy needs at least one error")
    if not np.all(np.isfinite(e)):
        raise PostprocError("errors must be finite numbers")
    out = {"l1": float(e.mean()), "l2": float(np.sqrt(np.mean(e * e)))}
    for k in within:
        out[f"within_{k}"] = float(np.mean(e <= k + _TOLERANCE))
    return out


def expected_accuracy(mechanism: Any, parameter: float, summed: Any, *,
                      within: Sequence[int] = DEFAULT_WITHIN) -> dict[str, float]:
    """The exact expectations of :func:`accuracy` for answers that each sum independent draws of
    one noise law.

    Parameters
    ----------
    mechanism : str or Mechanism
        The noise's mechanism (:func:`hierarchy.mechanisms.get_mechanism`).
    parameter : float
        Its parameter (``z`` of the geometric, ``σ²`` of the discrete Gaussian).
    summed : array_like of int
        How many draws each answer sums (1: an answer measured directly).
    within : sequence of int

    Returns
    -------
    dict
        ``expected_l1``, ``expected_l2`` and ``expected_within_<k>``, averaged over the answers:
        ``expected_l2 = √(mean m · Var)`` always; the others from the law of the sum for a
        discrete mechanism (NaN for continuous noise).

    Raises
    ------
    PostprocError
        ``summed`` holds something other than non-negative integers.

    Examples
    --------
    Two-sided geometric noise with ``z = 1``: one draw is 0 with probability
    ``(1 − e⁻¹)/(1 + e⁻¹)``; a sum of four draws has variance ``4·Var``:

    >>> one = expected_accuracy("geometric", 1.0, [1], within=[0, 1])
    >>> {k: round(v, 4) for k, v in one.items()}
    {'expected_l1': 0.8509, 'expected_l2': 1.357, 'expected_within_0': 0.4621,
     'expected_within_1': 0.8021}
    >>> four = expected_accuracy("geometric", 1.0, [4, 4], within=[0])
    >>> round(four["expected_l2"] ** 2 / one["expected_l2"] ** 2, 6)
    4.0
    """
    mech = get_mechanism(mechanism)
    m = np.asarray(summed).ravel()
    if not m.size or m.dtype.kind not in "iu" and not np.all(np.mod(m, 1) == 0) \
            or np.any(m < 0):
        raise PostprocError("summed must hold non-negative integers (draws per answer)")
    m = m.astype(np.int64)
    variance = float(mech.variance(parameter))
    out = {"expected_l1": math.nan, "expected_l2": math.sqrt(float(m.mean()) * variance)}
    shares = np.full(len(within), math.nan)
    single = _single_law(mech, parameter) if mech.discrete else None
    if single is not None:
        l1, shares = 0.0, np.zeros(len(within))
        counts, sizes = np.unique(m, return_counts=True)
        for count, size in zip(counts, sizes):
            mean_abs, within_shares = _law_of_sum(single, int(count), within)
            l1 += size * mean_abs
            shares = shares + size * within_shares
        out["expected_l1"] = float(l1 / m.size)
        shares = shares / m.size
    out.update({f"expected_within_{k}": float(s) for k, s in zip(within, shares)})
    return out


def _single_law(mech: Any, parameter: float) -> tuple[int, np.ndarray] | None:
    """One draw's pmf on ``-half..half`` (mass at least 1 − 1e-12), or None if the pmf is too
    wide to hold."""
    half = int(math.ceil(40 * math.sqrt(float(mech.variance(parameter))))) + 2
    while 2 * half + 1 <= _MOST_POINTS:
        pmf = np.exp(mech.logpmf(np.arange(-half, half + 1), parameter))
        if pmf.sum() >= 1 - 1e-12:
            return half, pmf
        half *= 4
    return None


def _law_of_sum(single: tuple[int, np.ndarray], m: int, within: Sequence[int]
                ) -> tuple[float, np.ndarray]:
    """``E|S|`` and ``P(|S| ≤ k)`` for the sum ``S`` of ``m`` independent draws of ``single``."""
    half, pmf = single
    ks = np.asarray(within, dtype=np.float64)
    if m == 0:
        return 0.0, np.ones(ks.size)
    support = np.arange(-half, half + 1)
    if m == 1:
        return (float(np.abs(support) @ pmf),
                np.array([pmf[np.abs(support) <= k].sum() for k in ks]))
    sd = math.sqrt(float(support.astype(np.float64) ** 2 @ pmf))
    width = int(ks.max(initial=0)) + int(math.ceil(12 * sd * math.sqrt(m) + 40 * sd)) + 2
    n = 1 << (2 * max(width, half) + 1).bit_length()
    if n > _MOST_POINTS:                   # the normal law, with a continuity correction
        s = sd * math.sqrt(m)
        return (s * math.sqrt(2 / math.pi),
                np.array([math.erf((k + 0.5) / (s * math.sqrt(2))) for k in ks]))
    points = np.zeros(n)
    points[support % n] = pmf               # negative values wrap around the circle
    spectrum = np.fft.rfft(points)
    spectrum /= spectrum[0].real            # total mass exactly 1 before the power
    law = np.fft.irfft(spectrum ** m, n)
    values = np.abs(np.where(np.arange(n) < n // 2, np.arange(n), np.arange(n) - n))
    return float(values @ law), np.array([law[values <= k].sum() for k in ks])


@dataclass(frozen=True)
class _Answers:
    """The answers of one query at one level of one replicate: values, where they come from,
    and — for the noisy measurements — the draws each sums and the noise's parameter."""

    values: np.ndarray
    source: str
    summed: np.ndarray | None = None
    parameter: float = math.nan


@dataclass(frozen=True)
class _Setup:
    workload: Workload
    mechanism: Any
    queries: tuple[Any, ...]
    method: str | None
    spec: Any
    publish: Mapping[str, Sequence[str]] | None
    options: Mapping[str, Any]


def _scaled(budget: Budget, total: float) -> Budget:
    """``budget`` with its total replaced by ``total`` (the same split)."""
    return Budget(budget.kind, total, dict(budget.level_fractions),
                  {level: dict(queries) for level, queries in budget.query_fractions},
                  budget.neighbours)


def _measured_answers(noisy: Any, setup: _Setup, budget: Budget) -> dict[tuple[str, str], _Answers]:
    """Every query's noisy answers at every level, bottom level first: measured, the sums of a
    measured query at the level, or the sums of the level below."""
    geo = noisy.geography
    out: dict[tuple[str, str], _Answers] = {}
    missing = []
    for query in setup.queries:
        below = None
        for li in range(geo.depth - 1, -1, -1):
            level = geo.levels[li]
            try:
                values, how = noisy.derived_answers(level, query)
            except HierarchyError:
                if below is None:
                    missing.append(f"{query.name!r} at {level!r}")
                    continue
                how = below.source if " summed over " in below.source else \
                    f"{below.source} summed over {geo.levels[li + 1]}"
                below = _Answers(geo.aggregate(below.values, li + 1, li), how,
                                 geo.aggregate(below.summed, li + 1, li), below.parameter)
            else:
                name = how.removeprefix("sum of ")
                measured = noisy.workload[name]
                per_answer = (np.ones(query.n_answers) if name == how
                              else refinement(query, measured).sum(axis=1))
                below = _Answers(values, how, np.broadcast_to(
                    per_answer.astype(np.int64), values.shape),
                    budget.noise_parameter(level, measured, setup.mechanism))
            out[(level, query.name)] = below
    if missing:
        raise PostprocError(f"no measurement at a level or below it determines "
                            f"{', '.join(missing)}: leave those queries out (queries=…) or "
                            "measure a query that determines them")
    return out


def _replicate(truth: Hierarchy, budget: Budget, rnd: Randomness, setup: _Setup
               ) -> dict[tuple[str, str], _Answers]:
    """One replicate: measure at ``budget`` with ``rnd``; the raw answers, or the answers of the
    post-processed result."""
    if setup.method is None:
        noisy = measure(truth, setup.workload, budget, setup.mechanism, rnd)
        return _measured_answers(noisy, setup, budget)
    noisy = measure(truth, setup.workload, budget, setup.mechanism, rnd, publish=setup.publish,
                    spec=setup.spec)
    result = postprocess(noisy, setup.method, method_spec(setup.method, setup.spec),
                         rng=method_rng(rnd, setup.method), **setup.options)
    return {(level, q.name): _Answers(np.asarray(result_answers(result, level, q)),
                                      setup.method)
            for level in truth.levels for q in setup.queries}


def tradeoff_curve(truth: Hierarchy, *, workload: Workload, budget: Budget, grid: Sequence[float],
                   mechanism: Any = "geometric", seeds: Sequence[int] = (1,),
                   within: Sequence[int] = DEFAULT_WITHIN, queries: Sequence[str] | None = None,
                   method: str | None = None, spec: Any = None,
                   publish: Mapping[str, Sequence[str]] | None = None,
                   method_options: Mapping[str, Any] | None = None,
                   progress: bool = False) -> pd.DataFrame:
    """Accuracy of every level and query at every budget of ``grid`` and every seed.

    Parameters
    ----------
    truth : Hierarchy
        The exact table (the errors are computed against it).
    workload : Workload
    budget : Budget
        Its split over levels and queries; its total is replaced by each point of ``grid``.
    grid : sequence of float
        The totals: ε of a pure budget, ρ of a zCDP one (:func:`check_arguments`).
    mechanism : str or Mechanism
    seeds : sequence of int
        One replicate per seed at every budget, from ``Randomness.simulation(seed)``.
    within : sequence of int
        The ``k`` of the shares within ±k.
    queries : sequence of str, optional
        Default: ``total`` and every query of the workload.
    method : str, optional
        A registered post-processor to run on each replicate; default none: the curve of the
        noisy measurements themselves.
    spec, publish : optional
        With ``method``: the spec (given to a method that keeps it,
        :func:`~postproc.methods.registry.method_spec`) and the statistics to publish.
    method_options : mapping, optional
        With ``method``: its options.
    progress : bool
        A progress bar over budgets × seeds on stderr.

    Returns
    -------
    pandas.DataFrame
        One row per budget, seed, level and query: ``epsilon`` (or ``rho``), ``seed``,
        ``method`` (:data:`MEASURED` or the post-processor), ``level``, ``query``, ``answers``,
        ``answer_from`` (the measured query, ``sum of …``, ``… summed over <level>`` or the
        method), ``summed`` (mean draws per answer; NaN after post-processing), ``l1``, ``l2``,
        ``within_<k>`` and ``expected_l1``, ``expected_l2``, ``expected_within_<k>``
        (:func:`expected_accuracy`; NaN after post-processing). Labelled simulation
        (``attrs["randomness"]``); ``attrs["tradeoff"]`` records the grid, seeds, tolerances,
        method, mechanism and budget.

    Raises
    ------
    PostprocError
        Bad arguments, an unknown method, a query no measurement determines.
    HierarchyError
        A budget out of range (``Budget``'s message).

    Examples
    --------
    Bottom-up (Clark & Dajani): the whole budget on the bottom level's detailed cells, every
    level above a sum of them — a state total sums 192 noisy cells of each of its counties:

    >>> from hierarchy import Budget, E2E_1940, e2e_workload, synthesize_1940, tabulate
    >>> levels = ["nation", "state", "county"]
    >>> truth = tabulate(synthesize_1940(2_000, seed=1).persons, schema=E2E_1940,
    ...                  levels=levels)
    >>> bottom_up = Budget("pure", 1, {"county": 1}, {"detailed": 1}, "add_remove")
    >>> curve = tradeoff_curve(truth, workload=e2e_workload(E2E_1940), budget=bottom_up,
    ...                        grid=[1], queries=["total"], within=[0])
    >>> curve[["level", "answer_from", "summed"]].values.tolist()
    [['nation', 'sum of detailed summed over county', 9408.0],
     ['state', 'sum of detailed summed over county', 192.0], ['county', 'sum of detailed', 192.0]]
    """
    name = _GRID[budget.kind]
    grid, seeds, within = check_arguments(grid, seeds, within, grid_name=f"{name}s")
    if method is not None:
        get(method)                   # an unknown name: the message lists the registered ones
    names = tuple(queries) if queries else default_queries(workload)
    setup = _Setup(workload, get_mechanism(mechanism),
                   tuple(resolve_query(q, truth.schema, workload) for q in names), method, spec,
                   publish, _quiet(method, method_options))
    exact = {(level, q.name): truth.answers(level, q)
             for level in truth.levels for q in setup.queries}
    rows, expected = [], {}
    randomness = None
    with _bar(progress, len(grid) * len(seeds)) as bar:
        for total in grid:
            scaled = _scaled(budget, total)
            for seed in seeds:
                rnd = Randomness.simulation(seed)
                randomness = rnd.provenance()
                answers = _replicate(truth, scaled, rnd, setup)
                for (level, query) in exact:              # root first, queries in order
                    got, key = answers[(level, query)], (total, level, query)
                    if got.summed is not None and key not in expected:
                        expected[key] = expected_accuracy(setup.mechanism, got.parameter,
                                                          got.summed, within=within)
                    rows.append({name: total, "seed": seed, "method": method or MEASURED,
                                 "level": level, "query": query, "answers": got.values.size,
                                 "answer_from": got.source,
                                 "summed": math.nan if got.summed is None
                                 else float(np.mean(got.summed)),
                                 **accuracy(got.values - exact[(level, query)], within=within),
                                 **expected.get(key, _no_expectation(within))})
                bar.update()
    frame = label_table(pd.DataFrame(rows), randomness)
    frame.attrs["tradeoff"] = {"grid": name, "values": list(grid), "seeds": list(seeds),
                               "within": list(within), "method": method or MEASURED,
                               "queries": list(names), "mechanism": setup.mechanism.to_dict(),
                               "budget": budget.to_dict()}
    return frame


def _quiet(method: str | None, options: Mapping[str, Any] | None) -> dict[str, Any]:
    """A method's options, with its own progress bars off (the curve has one)."""
    options = dict(options or {})
    if method is not None and "progress" in get(method).options():
        options["progress"] = False
    return options


def _no_expectation(within: Sequence[int]) -> dict[str, float]:
    return {"expected_l1": math.nan, "expected_l2": math.nan,
            **{f"expected_within_{k}": math.nan for k in within}}


def _bar(progress: bool, total: int):
    from tqdm.auto import tqdm

    return tqdm(total=total, disable=not progress, file=sys.stderr, unit="replicate",
                desc="trade-off")


def _grid_column(table: pd.DataFrame) -> str:
    for name in ("epsilon", "rho"):
        if name in table.columns:
            return name
    raise PostprocError("a trade-off table needs an 'epsilon' or 'rho' column (from "
                        "tradeoff_curve)")


def _columns(table: pd.DataFrame, prefix: str) -> list[str]:
    return [c for c in table.columns if c.startswith(prefix)]


def tradeoff_table(by_seed: pd.DataFrame) -> pd.DataFrame:
    """:func:`tradeoff_curve`'s rows averaged over the seeds.

    L1 and the shares are means over the seeds (every seed has the same answers, so these are
    the means over all answers of all seeds); L2 is the root of the mean of the squared L2
    errors — the RMSE of every answer of every seed, whose square the closed form ``m·Var``
    predicts.

    Parameters
    ----------
    by_seed : pandas.DataFrame
        From :func:`tradeoff_curve`.

    Returns
    -------
    pandas.DataFrame
        One row per budget, method, level and query, with ``seeds`` (how many); the label and
        ``attrs`` of ``by_seed``.

    Examples
    --------
    >>> by_seed = label_table(pd.DataFrame({
    ...     "epsilon": [1.0, 1.0], "seed": [1, 2], "method": "measured", "level": "state",
    ...     "query": "total", "answers": 49, "answer_from": "total", "summed": 1.0,
    ...     "l1": [1.0, 2.0], "l2": [1.0, 3.0], "within_0": [0.5, 0.25]}), "simulation")
    >>> tradeoff_table(by_seed)[["seeds", "l1", "l2", "within_0"]].values.tolist()
    [[2.0, 1.5, 2.23606797749979, 0.375]]
    """
    grid = _grid_column(by_seed)
    keys = [grid, "method", "level", "query"]
    shares, expected = _columns(by_seed, "within_"), _columns(by_seed, "expected_")
    grouped = by_seed.assign(l2=by_seed["l2"] ** 2).groupby(keys, sort=False)
    table = grouped.agg(seeds=("seed", "nunique"), answers=("answers", "first"),
                        answer_from=("answer_from", "first"), summed=("summed", "first"),
                        l1=("l1", "mean"), l2=("l2", "mean"),
                        **{c: (c, "mean") for c in shares},
                        **{c: (c, "first") for c in expected}).reset_index()
    table["l2"] = np.sqrt(table["l2"])
    table.attrs = dict(by_seed.attrs)
    return table
