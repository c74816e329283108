"""Weighted (sample) data: weighted exact histograms, their sensitivity, and their noise.

A sample survey (or a census sample questionnaire, such as the 1960 long form asked of a 25 %
sample) gives each sampled person a *weight*: the number of persons they stand for. A weighted
tabulation sums the weights, not the persons, in each cell; its cells are estimates of the
population's counts, not counts of the sample.

**Sensitivity.** Adding or removing one person changes one cell of the bottom level by that
person's weight ``w`` and nothing else (every level above is a sum), so the L1 sensitivity of the
weighted histogram is the largest weight anyone can have: ``Δ₁ = max w`` for add/remove
neighbours, ``2 · max w`` when one person's record (and weight) changes. The data's own largest
weight is computed from the confidential data, so it is not a bound a release may use:
:func:`tabulate_weighted` takes a public ``cap`` (a bound fixed by the survey's design, never read
from the data) and clips every weight above it to it, and the sensitivity is then the cap. Without
a cap the bound is the observed largest weight, and what is measured with it is **not**
differentially private (a simulation may do that, labelled; release mode refuses).

The bound treats each record's weight as that record's own attribute. Weights adjusted on the
sample itself (non-response or ratio adjustments computed from other records) change when one
person is added or removed, and this bound does not cover that (``docs/measurement.md``).

**Noise** (:func:`measure_weighted`): bottom-up, as Clark & Dajani's mechanism — every cell of the
bottom level with the whole budget, every level above a sum. Laplace noise of scale ``Δ₁/ε`` for
any weights, in simulations only; release mode draws exact integer noise only, so it needs
whole-number weights and a whole-number cap, and adds two-sided geometric noise with
``z = ε/Δ₁``.

Examples
--------
>>> from hierarchy.schema import Attribute, Schema
>>> schema = Schema((Attribute("sex", ("male", "female")),))
>>> sample = {"state": ["A", "A", "B"], "sex": [0, 1, 1], "wt": [4, 5, 9]}
>>> weighted = tabulate_weighted(sample, schema=schema, levels=["nation", "state"], cap=6)
>>> weighted.level_sums("state").tolist(), weighted.sensitivity()      # 9 clipped to 6
([[4.0, 5.0], [0.0, 6.0]], 6.0)
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from hierarchy.errors import ConfidentialDataError, HierarchyError
from hierarchy.geography import Geography
from hierarchy.io.microdata import read_table
from hierarchy.noisy import Measurement, NoisyHierarchy
from hierarchy.numbers import positive
from hierarchy.queries import Workload, detailed, total
from hierarchy.randomness import as_randomness
from hierarchy.schema import Schema
from hierarchy.tabulation import _CHUNK, _all_levels, _cells, _records, column_array

__all__ = ["WeightedHierarchy", "tabulate_weighted", "measure_weighted", "WEIGHTED_MECHANISMS"]

#: The mechanisms :func:`measure_weighted` adds: pure-DP noise calibrated to an L1 sensitivity.
WEIGHTED_MECHANISMS = ("geometric", "laplace")
_NEIGHBOURS = {"add_remove": 1, "change": 2}


@dataclass(frozen=True, eq=False)
class WeightedHierarchy:
    """Weighted exact histograms of every unit at every level — confidential, like
    :class:`~hierarchy.histograms.Hierarchy`. :func:`tabulate_weighted` makes one.

    Parameters
    ----------
    schema, geography
    sums : tuple of float64 arrays
        ``sums[l]`` (units of level ``l`` × cells): the sums of the (clipped) weights; every
        level is the sum of its children.
    weight : str
        The weight column.
    cap : float or None
        The public bound on a weight (weights above it were clipped to it), or None.
    bound : float
        The largest weight the sensitivity uses: ``cap``, or without one the largest weight in
        the data (data-dependent).
    clipped : int
        How many records' weights were clipped to the cap (confidential).
    clipped_weight : float
        The weight clipping removed (confidential).
    fractional : tuple of (int, float) or None
        The first record whose (clipped) weight is not a whole number, and that weight; None
        when every weight is whole (confidential).

    Raises
    ------
    HierarchyError
        Sums of the wrong shape, or a bound that is not a positive finite number.

    Examples
    --------
    >>> from hierarchy.schema import Attribute, Schema
    >>> schema = Schema((Attribute("sex", ("male", "female")),))
    >>> w = tabulate_weighted({"state": ["A", "B"], "sex": [0, 1], "wt": [2.5, 4]},
    ...                       schema=schema, levels=["nation", "state"])
    >>> w
    WeightedHierarchy(nation=1, state=2 units; weight 'wt', no cap; confidential)
    >>> w.totals("nation").tolist(), w.bound, w.integer_weights
    ([6.5], 4.0, False)
    """

    schema: Schema
    geography: Geography
    sums: tuple[np.ndarray, ...]
    weight: str
    cap: float | None
    bound: float
    clipped: int = 0
    clipped_weight: float = 0.0
    fractional: tuple[int, float] | None = None

    def __post_init__(self):
        sums = tuple(np.asarray(s, dtype=np.float64) for s in self.sums)
        object.__setattr__(self, "sums", sums)
        if len(sums) != self.geography.depth:
            raise HierarchyError("one array of weighted sums per geography level is needed")
        for name, s, g in zip(self.geography.levels, sums, self.geography.geocodes):
            if s.shape != (g.size, self.schema.size):
                raise HierarchyError(f"level {name!r}: weighted sums have shape {s.shape}, "
                                     f"expected ({g.size}, {self.schema.size})")
        object.__setattr__(self, "bound", positive(self.bound, "the largest weight"))

    @property
    def levels(self) -> tuple[str, ...]:
        return self.geography.levels

    @property
    def data_dependent(self) -> bool:
        """Whether the bound was read from the data (no cap): noise calibrated to it is not
        differentially private."""
        return self.cap is None

    @property
    def integer_weights(self) -> bool:
        """Whether every (clipped) weight is a whole number."""
        return self.fractional is None

    def level_sums(self, level: str | int) -> np.ndarray:
        """The weighted histograms of one level (units × cells)."""
        return self.sums[self.geography.level_index(level)]

    def totals(self, level: str | int) -> np.ndarray:
        """The weighted total of every unit of ``level``."""
        return self.level_sums(level).sum(axis=1)

    def sensitivity(self, neighbours: str = "add_remove") -> float:
        """``Δ₁`` of the weighted histogram of one level: the bound, or twice it when a
        neighbour changes one person's record (``"change"``).

        Raises
        ------
        HierarchyError
            Unknown neighbours.
        """
        return _NEIGHBOURS[_check_neighbours(neighbours)] * self.bound

    def __repr__(self) -> str:
        units = ", ".join(f"{lv}={g.size}" for lv, g in zip(self.levels, self.geography.geocodes))
        cap = "no cap" if self.cap is None else f"cap {self.cap:g}"
        return f"WeightedHierarchy({units} units; weight {self.weight!r}, {cap}; confidential)"


def _check_neighbours(neighbours: Any) -> str:
    if neighbours not in _NEIGHBOURS:
        raise HierarchyError(f"neighbours must be 'add_remove' (one person added or removed: "
                             f"Δ = the largest weight) or 'change' (one record changed: twice "
                             f"it), not {neighbours!r}")
    return neighbours


def tabulate_weighted(persons: Any, *, schema: Schema, levels: Sequence[str], weight: str = "wt",
                      cap: Any = None, geocode_columns: Sequence[str] | None = None,
                      geography: Geography | None = None,
                      columns: Mapping[str, str] | None = None,
                      values: Mapping[str, Mapping[Any, Any]] | None = None,
                      chunk: int = _CHUNK) -> WeightedHierarchy:
    """Tabulate a weighted persons table (a sample) into weighted histograms.

    Parameters
    ----------
    persons : pandas.DataFrame, pyarrow.Table, mapping of columns, or path
        One row per sampled person: the geocode and attribute columns of
        :func:`~hierarchy.tabulation.tabulate`, and the weight column.
    schema, levels, geocode_columns, geography, columns, values, chunk
        As for :func:`~hierarchy.tabulation.tabulate` (``columns`` maps levels and attributes;
        the weight column is named by ``weight``).
    weight : str
        The weight column: finite numbers ≥ 0 (text columns, as CSV files are read, are parsed).
    cap : float, optional
        A public bound on a weight, fixed in advance (by the survey's design), never read from
        the data; weights above it are clipped to it and the sensitivity is the cap. Release mode
        requires one (:func:`measure_weighted`). Without it the bound is the data's largest
        weight: data-dependent, for simulations only.

    Returns
    -------
    WeightedHierarchy

    Raises
    ------
    ConfidentialDataError
        A weight that is negative, missing, not a number or not finite: the full message names
        the rows and values, the public one only the column (:mod:`postproc.gate` shows the one
        the mode allows); and :func:`~hierarchy.tabulation.tabulate`'s errors.
    HierarchyError
        A cap that is not a positive finite number, or no weight column.

    Examples
    --------
    >>> from hierarchy.schema import Attribute, Schema
    >>> schema = Schema((Attribute("sex", ("male", "female")),))
    >>> sample = pd.DataFrame({"state": ["A", "A", "B", "B"], "sex": [0, 1, 1, 1],
    ...                        "wt": [4, 3, 6, 8]})
    >>> w = tabulate_weighted(sample, schema=schema, levels=["nation", "state"], cap=6)
    >>> w.level_sums("state").tolist(), w.totals("nation").tolist()
    ([[4.0, 3.0], [0.0, 12.0]], [19.0])
    >>> w.bound, w.clipped, w.clipped_weight              # the 8 clipped to 6
    (6.0, 1, 2.0)
    >>> sample.loc[2, "wt"] = -1
    >>> tabulate_weighted(sample, schema=schema, levels=["nation", "state"], cap=6)
    Traceback (most recent call last):
    ...
    hierarchy.errors.ConfidentialDataError: column 'wt': 1 weight(s) negative, missing, not a
    number or not finite, e.g. -1 at row 2 (rows [2]); every weight must be a finite number ≥ 0
    """
    if cap is not None:
        cap = float(positive(cap, "the weight cap"))
    source = None
    if isinstance(persons, (str, os.PathLike)):
        source = str(persons)
        persons = read_table(persons, role="persons")
    raw = column_array(persons, weight)
    weights = _checked_weights(raw, weight, source)
    geography, leaves, _, codes, _ = _records(persons, schema, levels, geocode_columns, None,
                                              None, geography, columns, values)
    leaf = np.asarray(leaves[0])
    if leaf.shape[0] != weights.shape[0]:
        raise HierarchyError(f"the weight column {weight!r} has {weights.shape[0]} rows, the "
                             f"geocodes {leaf.shape[0]}")
    clipped, clipped_weight = 0, 0.0
    if cap is not None:
        over = weights > cap
        clipped, clipped_weight = int(over.sum()), float((weights[over] - cap).sum())
        weights = np.minimum(weights, cap)
    bound = cap if cap is not None else float(weights.max(initial=0.0))
    if bound <= 0:
        raise HierarchyError(f"the weights of {weight!r} are all 0 (or there are no records): "
                             f"give a cap to bound them")
    whole = weights == np.floor(weights)
    fractional = None
    if not whole.all():
        row = int(np.flatnonzero(~whole)[0])
        fractional = (row, float(weights[row]))
    leaf_sums = _sum_cells(leaf, codes, weights, schema, geography.n_units(-1), chunk)
    return WeightedHierarchy(schema, geography, _all_levels(geography, leaf_sums), weight, cap,
                             bound, clipped, clipped_weight, fractional)


def _checked_weights(column: Any, name: str, source: str | None) -> np.ndarray:
    """The weights as float64, after refusing any that is negative, missing, not a number or
    not finite (full message: the rows and values; public: the column)."""
    values = _as_float(column, name)
    bad = ~(np.isfinite(values) & (values >= 0))
    if bad.any():
        rows = np.flatnonzero(bad)
        where = f"{source}: " if source is not None else ""
        example = _value_at(column, int(rows[0]))
        raise ConfidentialDataError(
            f"{where}column {name!r}: {rows.size} weight(s) negative, missing, not a number or "
            f"not finite, e.g. {example!r} at row {int(rows[0])} (rows {rows[:10].tolist()}); "
            f"every weight must be a finite number ≥ 0",
            public=f"column {name!r} holds weights that are negative, missing, not a number or "
                   f"not finite; every weight must be a finite number ≥ 0",
            source=source, role="persons")
    return values


def _as_float(column: Any, name: str) -> np.ndarray:
    """A weight column as float64: missing values and text that is not a number become NaN."""
    refused = HierarchyError(f"the weight column {name!r} must hold numbers (or text of "
                             f"numbers, as a CSV file is read)")
    if isinstance(column, (pa.ChunkedArray, pa.Array)):
        kind = column.type
        if pa.types.is_string(kind) or pa.types.is_large_string(kind):
            try:
                column = pc.cast(column, pa.float64())
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                text = pd.Series(column.to_numpy(zero_copy_only=False), dtype=object)
                return pd.to_numeric(text, errors="coerce").to_numpy(dtype=np.float64)
        elif not (pa.types.is_integer(kind) or pa.types.is_floating(kind)
                  or pa.types.is_decimal(kind)):
            raise refused
        return np.asarray(column.cast(pa.float64()).to_numpy(zero_copy_only=False),
                          dtype=np.float64)
    if isinstance(column, pd.Series):
        if pd.api.types.is_bool_dtype(column) or not (
                pd.api.types.is_numeric_dtype(column) or column.dtype == object):
            raise refused
        return pd.to_numeric(column, errors="coerce").to_numpy(dtype=np.float64,
                                                               na_value=np.nan)
    array = np.asarray(column)
    if array.dtype.kind == "b":
        raise refused
    if array.dtype.kind in "iuf":
        return array.astype(np.float64)
    return pd.to_numeric(pd.Series(array.ravel(), dtype=object), errors="coerce").to_numpy(
        dtype=np.float64, na_value=np.nan)


def _value_at(column: Any, row: int) -> Any:
    """The value of ``row`` as the input holds it (for the full message)."""
    if isinstance(column, (pa.ChunkedArray, pa.Array)):
        return column[row].as_py()
    value = column.iloc[row] if isinstance(column, pd.Series) else column[row]
    return value.item() if isinstance(value, np.generic) else value


def _sum_cells(leaf: np.ndarray, codes: Sequence[np.ndarray], weights: np.ndarray,
               schema: Schema, n_leaves: int, chunk: int) -> np.ndarray:
    """The weights summed per (leaf, cell), chunk by chunk; every code range-checked."""
    shape = schema.shape
    n_cells = schema.size
    strides = [int(np.prod(shape[i + 1:])) for i in range(len(shape))]
    lengths = {int(np.asarray(c).shape[0]) for c in codes}
    if lengths - {leaf.shape[0]}:
        raise HierarchyError("every record needs a unit, a code for every attribute and a weight")
    out = np.zeros(n_leaves * n_cells, dtype=np.float64)
    for start in range(0, leaf.shape[0], chunk):
        stop = min(leaf.shape[0], start + chunk)
        key = leaf[start:stop].astype(np.int64) * n_cells + _cells(
            codes, shape, strides, start, stop, np.int64, schema.names)
        lo, hi = int(key.min()), int(key.max()) + 1
        out[lo:hi] += np.bincount(key - lo, weights=weights[start:stop], minlength=hi - lo)
    return out.reshape(n_leaves, n_cells)


def measure_weighted(weighted: WeightedHierarchy, epsilon: Any, rng: Any = None, *,
                     mechanism: str = "geometric", neighbours: str = "add_remove",
                     accounted_elsewhere: bool = False) -> NoisyHierarchy:
    """Bottom-up noise on weighted histograms: every cell of the bottom level measured with the
    whole budget (its units compose in parallel), as Clark & Dajani's bottom-up.

    Parameters
    ----------
    weighted : WeightedHierarchy
    epsilon : float
        The whole budget (pure DP).
    rng : None, int, numpy.random.Generator or Randomness
        ``None`` is release mode.
    mechanism : {'geometric', 'laplace'}
        Two-sided geometric noise, ``z = ε/Δ₁`` (exact in release mode; needs whole-number
        weights), or Laplace noise of scale ``Δ₁/ε`` (any weights; simulations only).
    neighbours : {'add_remove', 'change'}
        ``Δ₁`` is the bound on a weight, or twice it.
    accounted_elsewhere : bool
        Release mode measures only when the caller accounts for the budget (as
        :func:`hierarchy.measurement.measure` outside a Session).

    Returns
    -------
    NoisyHierarchy
        ``detailed`` measured at the bottom level (int64 for geometric noise, float64 for
        Laplace); ``provenance["weights"]`` states the cap, where the bound came from, whether
        the noise is differentially private and — in simulations only — how many weights were
        clipped. Sum it up with :func:`postproc.methods.baselines.reconcile.bottom_up_sums`.

    Raises
    ------
    HierarchyError
        An unknown mechanism or neighbours; in release mode Laplace noise, no cap, a cap that
        is not a whole number, or no account of the budget.
    ConfidentialDataError
        Geometric noise on weights that are not whole numbers (the full message names a row).

    Examples
    --------
    >>> from hierarchy.schema import Attribute, Schema
    >>> schema = Schema((Attribute("sex", ("male", "female")),))
    >>> sample = {"state": ["A", "A", "B"], "sex": [0, 1, 1], "wt": [4, 5, 3]}
    >>> w = tabulate_weighted(sample, schema=schema, levels=["nation", "state"], cap=6)
    >>> noisy = measure_weighted(w, 1.0, rng=3)
    >>> p = noisy.provenance["parameters"]["state"]["detailed"]
    >>> p["z"], p["sensitivity"], noisy.provenance["weights"]["differentially_private"]
    (0.16666666666666666, 6.0, True)
    >>> noisy.get("state", "detailed").values.dtype
    dtype('int64')
    >>> uncapped = tabulate_weighted(sample, schema=schema, levels=["nation", "state"])
    >>> measure_weighted(uncapped, 1.0, rng=3).provenance["weights"]["sensitivity_from"]
    'the largest weight in the data (data-dependent: this noise is not differentially private)'
    >>> measure_weighted(uncapped, 1.0, rng=None, accounted_elsewhere=True)
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: release mode needs a public cap on the weights: ...
    """
    if mechanism not in WEIGHTED_MECHANISMS:
        raise HierarchyError(f"weighted counts are measured with {' or '.join(WEIGHTED_MECHANISMS)}"
                             f" noise (pure DP on an L1 sensitivity), not {mechanism!r}")
    from hierarchy.mechanisms import get_mechanism

    mech = get_mechanism(mechanism)
    epsilon = float(positive(epsilon, "epsilon"))
    delta = weighted.sensitivity(neighbours)
    rnd = as_randomness(rng)
    if rnd.mode == "release":
        _check_release(weighted, mech, accounted_elsewhere)
    if mech.discrete and not weighted.integer_weights:
        _refuse_fractional(weighted, rnd.mode)
    parameter = mech.parameter(epsilon, delta)
    leaves = weighted.sums[-1]
    noise = mech.sample(parameter, leaves.shape, rnd)
    values = (np.rint(leaves).astype(np.int64) if mech.discrete else leaves) + noise
    variance = float(mech.variance(parameter))
    bottom = weighted.levels[-1]
    schema = weighted.schema
    measured = Measurement("detailed", values, np.broadcast_to(np.float64(variance),
                                                               values.shape))
    provenance = {"strategy": "bottom", "epsilon": epsilon, "sensitivity": delta,
                  "neighbours": neighbours, "weights": _weights_provenance(weighted, rnd.mode),
                  "mechanism": mech.to_dict(),
                  "parameters": {bottom: {"detailed": {"budget": epsilon,
                                                       mech.parameter_name: parameter,
                                                       "variance": variance,
                                                       "sensitivity": delta}}},
                  "randomness": rnd.provenance()}
    return NoisyHierarchy(schema, weighted.geography, Workload((detailed(schema), total(schema))),
                          {bottom: {"detailed": measured}}, {}, provenance)


def _check_release(weighted: WeightedHierarchy, mech: Any, accounted_elsewhere: bool) -> None:
    """Release mode's refusals, none of which reads the data: floating-point noise, no cap, a
    cap that is not whole (for integer noise), and a budget nobody accounts for."""
    if not mech.discrete:
        raise HierarchyError(f"the {mech.name} mechanism adds floating-point noise, which is "
                             "refused in release mode (its rounding leaks the protected value); "
                             "measure whole-number weights with mechanism='geometric', or give "
                             "rng a seed for a simulation")
    if weighted.cap is None:
        raise HierarchyError("release mode needs a public cap on the weights: the largest weight "
                             "in the data is computed from the confidential data and cannot set "
                             "the noise; tabulate with tabulate_weighted(..., cap=C), C a bound "
                             "fixed by the survey's design (weights above it are clipped to it)")
    if not float(weighted.cap).is_integer():
        raise HierarchyError(f"release mode adds integer noise, which needs a whole-number cap, "
                             f"not {weighted.cap:g}; tabulate with a whole-number cap")
    if accounted_elsewhere is not True:
        raise HierarchyError("measure_weighted() in release mode spends the privacy budget anew "
                             "at every call, and nothing here counts what was spent: give rng a "
                             "seed for a simulation, or, if your code accounts for the budget "
                             "itself, pass accounted_elsewhere=True")


def _refuse_fractional(weighted: WeightedHierarchy, mode: str) -> None:
    row, value = weighted.fractional
    fix = ("round the weights to whole numbers" if mode == "release" else
           "round the weights to whole numbers, or use mechanism='laplace' (simulations only)")
    raise ConfidentialDataError(
        f"column {weighted.weight!r}: weights that are not whole numbers, e.g. {value!r} at row "
        f"{row}: integer (geometric) noise needs whole-number weights; {fix}",
        public=f"column {weighted.weight!r} holds weights that are not whole numbers: integer "
               f"(geometric) noise needs whole-number weights; {fix}", role="persons")


def _weights_provenance(weighted: WeightedHierarchy, mode: str) -> dict[str, Any]:
    """What the output says of the weights: the cap, where the bound came from, whether the
    noise is differentially private; the clipping count only in simulations (it is computed
    from the confidential data)."""
    if weighted.data_dependent:
        source = ("the largest weight in the data (data-dependent: this noise is not "
                  "differentially private)")
    else:
        source = f"the cap {weighted.cap:g}: weights above it were clipped to it"
    out = {"column": weighted.weight, "cap": weighted.cap, "bound": weighted.bound,
           "sensitivity_from": source, "differentially_private": not weighted.data_dependent}
    if mode == "release":
        out["clipped"] = ("withheld in release mode: how many weights were clipped is computed "
                          "from the confidential data")
    else:
        out["clipped"] = weighted.clipped
        out["clipped_weight"] = weighted.clipped_weight
    return out
