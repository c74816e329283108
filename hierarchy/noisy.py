"""The ``NoisyHierarchy``: noisy query answers with variances for every unit of every level.

This is what every post-processor consumes. It holds no confidential data: only noisy answers,
their variances, the geography, and the exact statistics the user chose to publish as invariants.

On disk it is a directory::

    metadata.json              schema, workload, levels, budget, mechanism, noise parameters,
                               provenance (randomness mode and its label), versions
    geography.parquet          level, geocode, parent
    measurements/<level>.parquet   geocode, then per query: <query> and <query>.variance as
                               fixed-size lists (one entry per answer)
    invariants/<level>.parquet     geocode and the published exact statistics of that level

Never pickle. :meth:`NoisyHierarchy.to_measurements` gives the long form
(``level, geocode, query, index, value, variance``) that :meth:`NoisyHierarchy.from_measurements`
reads back, for measurements made elsewhere.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from hierarchy.errors import HierarchyError
from hierarchy.frames import refinement, resolve_query
from hierarchy.geography import Geography
from hierarchy.histograms import REPR_LIMIT, summary_html
from hierarchy.io.storage import (
    atomic_directory,
    package_versions,
    read_json,
    write_json,
    write_parquet,
)
from hierarchy.queries import Query, Workload
from hierarchy.schema import Schema

__all__ = ["Measurement", "NoisyHierarchy", "FORMAT_VERSION"]

FORMAT_VERSION = 1


def _first_bad(bad: np.ndarray, values: np.ndarray) -> str:
    """Where the first flagged entry of a units × answers array is, and how many there are."""
    u, a = (int(x) for x in np.argwhere(bad)[0])
    count = int(bad.sum())
    return (f": unit (row) {u}, answer {a} has {float(values[u, a])!r} ({count:,} such "
            f"answer{'s' if count != 1 else ''})")


@dataclass(frozen=True, eq=False)
class Measurement:
    """Noisy answers of one query for every unit of one level.

    Attributes
    ----------
    values : array (units, answers)
        int64 for discrete mechanisms, float64 otherwise.
    variances : float64 array (units, answers)
        Noise variance of each answer (may be a broadcast view when constant).
    drawn : bool array (units, answers) or None
        Which answers were drawn; ``None`` (the default): every one. An answer not drawn counts
        only cells that the published invariants fix at 0 in that unit
        (:func:`hierarchy.measurement.measure` with ``active=``, ``docs/scale2020.md``): it is
        known to be 0, its value is 0 and its weight in a fit is 0.

    Raises
    ------
    HierarchyError
        Values that are not a 2-d numeric array of finite numbers, variances that are not
        positive and finite, or a ``drawn`` mask of another shape or with a nonzero value
        where nothing was drawn.

    Examples
    --------
    One query answer for each of two units, with noise variance 2 (a scalar is broadcast):

    >>> m = Measurement("total", np.array([[3], [5]]), 2.0)
    >>> m.variances.tolist(), m.weights.tolist()
    ([[2.0], [2.0]], [[0.5], [0.5]])
    >>> Measurement("total", np.array([[3], [5]]), np.array([[2.0], [0.0]]))
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: variances of 'total' must be positive and finite: unit
    (row) 1, answer 0 has 0.0 (1 such answer)

    The second unit's answer was not drawn (it counts fixed cells only): weight 0.

    >>> m = Measurement("total", np.array([[3], [0]]), 2.0, drawn=np.array([[True], [False]]))
    >>> m.weights.tolist(), m.n_drawn
    ([[0.5], [0.0]], 1)
    """

    query: str
    values: np.ndarray
    variances: np.ndarray
    drawn: np.ndarray | None = None

    def __post_init__(self):
        values = np.asarray(self.values)
        if values.dtype.kind not in "iuf":
            raise HierarchyError(f"measurements of {self.query!r} must be numeric")
        if values.ndim != 2:
            raise HierarchyError(f"measurements of {self.query!r} must be 2-d (units, answers)")
        given = np.asarray(self.variances, dtype=np.float64)
        variances = np.broadcast_to(given, values.shape)
        if values.dtype.kind == "f" and not np.all(np.isfinite(values)):
            raise HierarchyError(f"measurements of {self.query!r} contain NaN or infinite values"
                                 f"{_first_bad(~np.isfinite(values), values)}")
        # checked before broadcasting (a constant variance broadcast over a block level's
        # 40M answers was checked 40M times)
        if not (np.all(np.isfinite(given)) and np.all(given > 0)):
            bad = ~(np.isfinite(variances) & (variances > 0))
            raise HierarchyError(f"variances of {self.query!r} must be positive and finite"
                                 f"{_first_bad(bad, variances)}")
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "variances", variances)
        if self.drawn is not None:
            drawn = np.asarray(self.drawn)
            if drawn.dtype != bool or drawn.shape != values.shape:
                raise HierarchyError(f"drawn of {self.query!r} must be a boolean array of the "
                                     f"values' shape {values.shape}")
            if np.any((values != 0) & ~drawn):
                raise HierarchyError(f"measurements of {self.query!r} have nonzero values "
                                     "where no answer was drawn")
            object.__setattr__(self, "drawn", None if drawn.all() else drawn)

    @property
    def weights(self) -> np.ndarray:
        """Inverse variances: the weights of a least-squares fit (a broadcast view when the
        variance is one constant and every answer was drawn, so no units × answers array is
        allocated); 0 where an answer was not drawn."""
        return self.weights_of(slice(None))

    def weights_of(self, units: slice) -> np.ndarray:
        """``weights[units]``, computed for those units only (TopDown takes a parent's
        children at a time; the whole array is a float per answer of the level).

        >>> m = Measurement("total", np.array([[3], [0], [5]]), 2.0,
        ...                 drawn=np.array([[True], [False], [True]]))
        >>> m.weights_of(slice(1, 3)).tolist() == m.weights[1:3].tolist() == [[0.0], [0.5]]
        True
        """
        v = self.variances[units]
        if v.size and v.strides == (0,) * v.ndim:
            w = np.broadcast_to(1.0 / v.flat[0], v.shape)
        else:
            w = 1.0 / v
        return w if self.drawn is None else np.where(self.drawn[units], w, 0.0)

    def weights_at(self, rows: np.ndarray, answers: np.ndarray) -> np.ndarray:
        """``weights[rows][:, answers]``, computed for those entries only: a level's one
        variance or a unit's (a row of a Noisy Measurement File) is not gathered over the
        answers (the GLS's bottom groups read a block level's weights so, a group at a time).

        >>> m = Measurement("q", np.array([[3, 0, 1], [5, 2, 4]]), np.array([[2.0], [4.0]]),
        ...                 drawn=np.array([[True, False, True], [True, True, True]]))
        >>> rows, answers = np.array([1, 0]), np.array([1, 2])
        >>> m.weights_at(rows, answers).tolist() == m.weights[rows][:, answers].tolist()
        True
        """
        v = self.variances
        if v.size and v.strides == (0,) * v.ndim:      # one variance: no gather of it
            w: Any = 1.0 / v.flat[0]
            if self.drawn is None:
                return np.full((rows.size, answers.size), w)
        elif v.strides[1] == 0:                        # one variance per unit
            w = np.repeat(1.0 / v[rows, :1], answers.size, axis=1)
        else:
            w = 1.0 / v[np.ix_(rows, answers)]
        if self.drawn is None:
            return w
        return np.where(self.drawn[rows][:, answers], w, 0.0)

    @property
    def n_drawn(self) -> int:
        """Answers drawn (all of them unless ``drawn`` says otherwise)."""
        return int(self.values.size if self.drawn is None else self.drawn.sum())


@dataclass(frozen=True, eq=False)
class NoisyHierarchy:
    """Noisy measurements of a workload for every unit of every measured level.

    Parameters
    ----------
    schema, geography, workload
        The data model the measurements refer to.
    measurements : mapping level → (mapping query → Measurement)
        Levels may be missing (nothing measured there).
    invariants : mapping level → (mapping statistic → array)
        Exact statistics published as invariants, e.g. ``"tot"`` (persons per unit, shape
        (units,)) and ``"gqhh"`` (units of each type per unit, shape (units, types)).
    provenance : dict
        JSON-ready description: budget, mechanism, parameters, randomness (with its label).

    Raises
    ------
    HierarchyError
        A workload on another schema, or a measurement or invariant whose shape does not match
        its level's units and its query's answers.

    Examples
    --------
    :func:`hierarchy.measurement.measure` makes these; by hand, for two states and one attribute:

    >>> from hierarchy.schema import Schema, Attribute
    >>> from hierarchy.queries import detailed, total
    >>> s = Schema((Attribute("sex", ("male", "female")),))
    >>> geo, _ = Geography.from_columns(["nation", "state"], [[["A", "B"]]])
    >>> noisy = NoisyHierarchy(s, geo, Workload((detailed(s), total(s))), {
    ...     "nation": {"detailed": Measurement("detailed", np.array([[4, 2]]), 2.0)},
    ...     "state": {"detailed": Measurement("detailed", np.array([[1, 3], [2, 0]]), 2.0)}})
    >>> noisy
    NoisyHierarchy(nation[detailed]; state[detailed]; randomness=unknown)
    >>> "<td>state</td>" in noisy._repr_html_()       # notebooks show a table
    True
    >>> noisy.answers("state", "total").tolist()    # sums of the detailed measurements
    [[4], [2]]
    >>> noisy.to_measurements().head(3)
        level geocode     query  index  value  variance
    0  nation       0  detailed      0    4.0       2.0
    1  nation       0  detailed      1    2.0       2.0
    2   state       A  detailed      0    1.0       2.0

    Saved as parquet and JSON, read back unchanged:

    >>> import tempfile
    >>> path = noisy.save(Path(tempfile.mkdtemp()) / "noisy")
    >>> sorted(p.name for p in path.iterdir())
    ['.dapp-output', 'geography.parquet', 'measurements', 'metadata.json']
    >>> NoisyHierarchy.load(path).equals(noisy)
    True
    """

    schema: Schema
    geography: Geography
    workload: Workload
    measurements: Mapping[str, Mapping[str, Measurement]]
    invariants: Mapping[str, Mapping[str, np.ndarray]] = field(default_factory=dict)
    provenance: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        if self.workload.schema != self.schema:
            raise HierarchyError("the workload's schema differs from the hierarchy's schema")
        meas = {lv: dict(qs) for lv, qs in self.measurements.items()}
        for lv, qs in meas.items():
            n = self.geography.n_units(lv)
            for qname, m in qs.items():
                q = self.workload[qname]
                if m.query != qname:
                    raise HierarchyError(f"measurement stored under {qname!r} is of {m.query!r}")
                if m.values.shape != (n, q.n_answers):
                    raise HierarchyError(f"level {lv!r}, query {qname!r}: values have shape "
                                         f"{m.values.shape}, expected ({n}, {q.n_answers})")
        inv = {lv: {k: np.asarray(v) for k, v in stats.items()}
               for lv, stats in self.invariants.items()}
        for lv, stats in inv.items():
            n = self.geography.n_units(lv)
            for k, v in stats.items():
                if v.shape[:1] != (n,):
                    raise HierarchyError(f"invariant {k!r} at level {lv!r} has {v.shape[0]} rows, "
                                         f"the level has {n} units")
        object.__setattr__(self, "measurements", meas)
        object.__setattr__(self, "invariants", inv)
        object.__setattr__(self, "provenance", dict(self.provenance))

    # -- access --------------------------------------------------------------------------------
    @property
    def levels(self) -> tuple[str, ...]:
        return self.geography.levels

    def queries(self, level: str) -> tuple[str, ...]:
        """Names of the queries measured at ``level`` (workload order)."""
        self.geography.level_index(level)
        measured = self.measurements.get(level, {})
        return tuple(q for q in self.workload.names if q in measured)

    def get(self, level: str, query: str) -> Measurement:
        try:
            return self.measurements[level][query]
        except KeyError:
            raise HierarchyError(f"no measurement of {query!r} at level {level!r}; measured "
                                 f"there: {list(self.queries(level))}") from None

    def answers(self, level: str | int, query: str | Query) -> np.ndarray:
        """Noisy answers of ``query`` at ``level``: the measurement itself, or the sums of the
        most precise measured query that determines it (see :meth:`derived_answers`).

        Examples
        --------
        >>> from hierarchy.synth import synthesize_1940
        >>> from hierarchy.tabulation import tabulate
        >>> from hierarchy.measurement import measure
        >>> from hierarchy.budget import Budget
        >>> from hierarchy.queries import e2e_workload
        >>> from hierarchy.schema import E2E_1940
        >>> truth = tabulate(synthesize_1940(2_000, seed=1).persons, schema=E2E_1940,
        ...                  levels=["nation", "state"])
        >>> noisy = measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, ["nation", "state"]),
        ...                 rng=2)
        >>> noisy.answers("state", "total").shape
        (49, 1)
        """
        return self.derived_answers(level, query)[0]

    def derived_answers(self, level: str | int, query: str | Query, *,
                        with_drawn: bool = False) -> tuple[Any, ...]:
        """Noisy answers of ``query`` at ``level`` and where they came from (and, with
        ``with_drawn``, which of them hold a drawn answer: ``None`` when all do).

        A measured query (by name or by expression) is returned as measured; otherwise the
        answers are sums of the measured query that determines ``query`` with the smallest
        variance of those sums (rounded back to integers when the measurement is integer).

        Returns
        -------
        answers : numpy.ndarray, shape (units, answers)
        how : str
            The measured query's name, or ``"sum of <name>"``.

        Raises
        ------
        HierarchyError
            No measured query at ``level`` determines ``query``.

        Examples
        --------
        >>> from hierarchy.synth import synthesize_1940
        >>> from hierarchy.tabulation import tabulate
        >>> from hierarchy.measurement import measure
        >>> from hierarchy.budget import Budget
        >>> from hierarchy.queries import e2e_workload
        >>> from hierarchy.schema import E2E_1940
        >>> truth = tabulate(synthesize_1940(2_000, seed=1).persons, schema=E2E_1940,
        ...                  levels=["nation", "state"])
        >>> noisy = measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, ["nation", "state"]),
        ...                 rng=2)
        >>> values, how = noisy.derived_answers("state", "total")
        >>> values.shape, how
        ((49, 1), 'sum of va_hisp_race')
        """
        level = self.levels[self.geography.level_index(level)]
        q = resolve_query(query, self.schema, self.workload)
        measured = self.queries(level)
        for name in measured:
            if self.workload[name].expression == q.expression or name == q.name:
                m = self.get(level, name)
                return (m.values, name, m.drawn) if with_drawn else (m.values, name)
        best = None
        for name in measured:
            mapping = refinement(q, self.workload[name])
            if mapping is None:
                continue
            m = self.get(level, name)
            variance = float(np.mean(m.variances @ mapping.T))
            if best is None or variance < best[0]:
                best = (variance, name, m.values @ mapping.T, mapping)
        if best is None:
            raise HierarchyError(f"query {q.name!r} is not measured at level {level!r} and no "
                                 f"measured query ({list(measured)}) determines it")
        values, m = best[2], self.get(level, best[1])
        if np.issubdtype(m.values.dtype, np.integer):
            values = np.rint(values).astype(np.int64)
        if not with_drawn:
            return values, f"sum of {best[1]}"
        drawn = None if m.drawn is None else np.asarray(m.drawn @ best[3].T != 0)
        return values, f"sum of {best[1]}", drawn

    def invariant(self, level: str, statistic: str) -> np.ndarray:
        try:
            return self.invariants[level][statistic]
        except KeyError:
            have = sorted(self.invariants.get(level, {}))
            raise HierarchyError(f"no published invariant {statistic!r} at level {level!r} "
                                 f"(published there: {have}); publish it when measuring "
                                 f"(measure(..., publish={{{statistic!r}: [{level!r}, ...]}}))"
                                 ) from None

    @property
    def safe_for_release(self) -> bool:
        return bool(self.provenance.get("randomness", {}).get("safe_for_release", False))

    def equals(self, other: "NoisyHierarchy") -> bool:
        """Exact equality of everything (arrays compared element by element, dtypes included)."""
        if not isinstance(other, NoisyHierarchy):
            return False
        if (self.schema != other.schema or not self.geography.equals(other.geography)
                or self.workload.to_dict() != other.workload.to_dict()
                or dict(self.provenance) != dict(other.provenance)):
            return False
        if {lv: set(q) for lv, q in self.measurements.items()} != \
                {lv: set(q) for lv, q in other.measurements.items()}:
            return False
        for lv, qs in self.measurements.items():
            for qn, m in qs.items():
                o = other.measurements[lv][qn]
                if m.values.dtype != o.values.dtype or not np.array_equal(m.values, o.values) \
                        or not np.array_equal(m.variances, o.variances) \
                        or (m.drawn is None) != (o.drawn is None) \
                        or (m.drawn is not None and not np.array_equal(m.drawn, o.drawn)):
                    return False
        if {lv: set(s) for lv, s in self.invariants.items()} != \
                {lv: set(s) for lv, s in other.invariants.items()}:
            return False
        return all(np.array_equal(v, other.invariants[lv][k])
                   for lv, s in self.invariants.items() for k, v in s.items())

    def __repr__(self) -> str:
        mode = self.provenance.get("randomness", {}).get("mode", "unknown")
        end = f"; randomness={mode})"
        parts = [f"{lv}[{', '.join(self.queries(lv))}]" for lv in self.levels
                 if lv in self.measurements]
        text = f"NoisyHierarchy({'; '.join(parts)}{end}"
        if len(text) > REPR_LIMIT:              # many queries: name the levels, count the queries
            parts = [f"{lv}[{len(self.queries(lv))} queries]" for lv in self.levels
                     if lv in self.measurements]
            text = f"NoisyHierarchy({'; '.join(parts)}{end}"
        if len(text) > REPR_LIMIT:
            text = f"NoisyHierarchy({'; '.join(parts)}"[:REPR_LIMIT - len(end) - 1] + "…" + end
        return text

    def _repr_html_(self) -> str:
        """Notebook display: per level the units, the queries measured and the published
        persons (the ``tot`` invariant), all of it safe to show (no confidential number)."""
        rows = []
        for lv, codes in zip(self.levels, self.geography.geocodes):
            tot = self.invariants.get(lv, {}).get("tot")
            rows.append((lv, int(codes.size),
                         f"{int(np.sum(tot)):,}" if tot is not None else "not published"))
        randomness = self.provenance.get("randomness", {})
        notes = [f"{lv}: {', '.join(self.queries(lv)) or 'nothing measured'}"
                 for lv in self.levels]
        notes.append(f"randomness: {randomness.get('label', randomness.get('mode', 'unknown'))}")
        return summary_html("NoisyHierarchy (noisy measurements)", rows, notes,
                            persons_header="persons (published)")

    # -- long form -----------------------------------------------------------------------------
    def to_measurements(self) -> pd.DataFrame:
        """Long table: ``level, geocode, query, index, value, variance`` (one row per answer
        drawn: answers not drawn are not measurements)."""
        frames = []
        for lv in self.levels:
            codes = self.geography.geocodes[self.geography.level_index(lv)]
            for qn in self.queries(lv):
                m = self.measurements[lv][qn]
                n, k = m.values.shape
                frame = pd.DataFrame({
                    "level": lv, "geocode": np.repeat(codes, k), "query": qn,
                    "index": np.tile(np.arange(k), n),
                    "value": m.values.ravel().astype(np.float64),
                    "variance": np.ascontiguousarray(m.variances).ravel()})
                frames.append(frame if m.drawn is None else frame[m.drawn.ravel()])
        if not frames:
            return pd.DataFrame(columns=["level", "geocode", "query", "index", "value",
                                         "variance"])
        return pd.concat(frames, ignore_index=True)

    @classmethod
    def from_measurements(cls, table: pd.DataFrame, *, schema: Schema, geography: Geography,
                          workload: Workload, invariants: Mapping[str, Mapping[str, Any]] | None
                          = None, provenance: Mapping[str, Any] | None = None,
                          source: str = "table") -> "NoisyHierarchy":
        """Build from a long table of measurements made elsewhere, validating every row.

        Parameters
        ----------
        table : DataFrame
            Columns ``level, geocode, query, index, value, variance``. Every unit of a
            (level, query) that appears must have every answer exactly once.
        source : str
            Name of the file the table came from, used in error messages.

        Raises
        ------
        HierarchyError
            Naming the row(s), level, geocode or query that is wrong and how to fix it.

        Examples
        --------
        >>> from hierarchy.schema import Schema, Attribute
        >>> from hierarchy.queries import Workload, total
        >>> s = Schema((Attribute("sex", ("f", "m")),))
        >>> geo, _ = Geography.from_columns(["nation", "county"], [[["a", "b"]]])
        >>> t = pd.DataFrame({"level": ["county"] * 2, "geocode": ["a", "b"],
        ...                   "query": "total", "index": 0, "value": [3.0, 4.5],
        ...                   "variance": 2.0})
        >>> nh = NoisyHierarchy.from_measurements(t, schema=s, geography=geo,
        ...                                       workload=Workload((total(s),)))
        >>> nh.get("county", "total").values.ravel().tolist()
        [3.0, 4.5]
        """
        needed = ["level", "geocode", "query", "index", "value", "variance"]
        missing = [c for c in needed if c not in table.columns]
        if missing:
            raise HierarchyError(f"{source}: missing column(s) {missing}; a measurements table "
                                 f"needs columns {needed}")
        t = table.reset_index(drop=True)

        def fail(mask: np.ndarray, what: str) -> None:
            rows = np.flatnonzero(np.asarray(mask))
            if rows.size:
                raise HierarchyError(f"{source}: {what} at row(s) {rows[:10].tolist()}"
                                     f"{' …' if rows.size > 10 else ''}")

        value = pd.to_numeric(t["value"], errors="coerce").to_numpy(dtype=np.float64)
        variance = pd.to_numeric(t["variance"], errors="coerce").to_numpy(dtype=np.float64)
        index = pd.to_numeric(t["index"], errors="coerce").to_numpy(dtype=np.float64)
        fail(~np.isfinite(value), "value is missing or not a finite number")
        fail(~np.isfinite(variance) | (variance <= 0), "variance must be a positive finite number")
        fail(~np.isfinite(index) | (index != np.round(index)) | (index < 0),
             "answer index must be a non-negative integer")
        level = t["level"].astype(str).to_numpy()
        query = t["query"].astype(str).to_numpy()
        geocode = t["geocode"].astype(str).to_numpy()
        fail(~np.isin(level, geography.levels),
             f"unknown level (levels are {list(geography.levels)})")
        fail(~np.isin(query, workload.names),
             f"unknown query (the workload has {list(workload.names)})")
        integral = bool(np.all(value == np.round(value)))
        measurements: dict[str, dict[str, Measurement]] = {}
        for (lv, qn), rows in pd.Series(np.arange(len(t))).groupby([level, query]).groups.items():
            rows = np.asarray(rows)
            q = workload[qn]
            n = geography.n_units(lv)
            unit = pd.Index(geography.geocodes[geography.level_index(lv)]).get_indexer(
                geocode[rows])
            fail(np.isin(np.arange(len(t)), rows[unit < 0]),
                 f"geocode is not a {lv} unit of the geography")
            idx = index[rows].astype(np.int64)
            fail(np.isin(np.arange(len(t)), rows[idx >= q.n_answers]),
                 f"answer index out of range for {qn!r} (it has {q.n_answers} answers)")
            flat = unit * q.n_answers + idx
            seen = np.bincount(flat, minlength=n * q.n_answers)
            dup = seen[flat] > 1
            fail(np.isin(np.arange(len(t)), rows[dup]),
                 f"duplicate answer for ({lv}, {qn}): each unit and index must appear once")
            if (seen == 0).any():
                gaps = np.flatnonzero(seen == 0)
                units = geography.geocodes[geography.level_index(lv)][
                    np.unique(gaps // q.n_answers)][:5].tolist()
                raise HierarchyError(
                    f"{source}: level {lv!r}, query {qn!r}: {gaps.size} answer(s) missing, e.g. "
                    f"for units {units}; a measured query needs every answer of every unit of "
                    "the level (measure it everywhere or drop it at that level)")
            vals = np.empty(n * q.n_answers)
            vars_ = np.empty(n * q.n_answers)
            vals[flat] = value[rows]
            vars_[flat] = variance[rows]
            vals2 = vals.reshape(n, q.n_answers)
            measurements.setdefault(lv, {})[qn] = Measurement(
                qn, vals2.astype(np.int64) if integral else vals2, vars_.reshape(n, q.n_answers))
        prov = dict(provenance or {})
        prov.setdefault("source", source)
        prov.setdefault("randomness", {"mode": "external", "safe_for_release": None,
                                       "label": "measurements made outside this toolkit"})
        return cls(schema, geography, workload, measurements, invariants or {}, prov)

    # -- persistence ---------------------------------------------------------------------------
    def save(self, directory: str | os.PathLike, *, overwrite: bool = False) -> Path:
        """Write the hierarchy to ``directory`` atomically (parquet + JSON, never pickle).

        Examples
        --------
        See the class's example: :meth:`load` reads it back and ``equals`` compares.
        """
        directory = Path(directory)
        label = self.provenance.get("randomness", {}).get("label")
        file_meta = {"randomness_label": label} if label else None
        with atomic_directory(directory, overwrite=overwrite) as tmp:
            write_parquet(pa.Table.from_pandas(self.geography.to_frame(), preserve_index=False),
                          tmp / "geography.parquet", metadata=file_meta)
            (tmp / "measurements").mkdir()
            files = {}
            for lv in self.levels:
                if lv not in self.measurements:
                    continue
                codes = self.geography.geocodes[self.geography.level_index(lv)]
                cols = {"geocode": pa.array(codes.astype(str))}
                for qn in self.queries(lv):
                    m = self.measurements[lv][qn]
                    # an answer not drawn is stored as null, never as a number
                    cols[qn] = _fixed_list(m.values, None if m.drawn is None else ~m.drawn)
                    cols[f"{qn}.variance"] = _fixed_list(np.ascontiguousarray(m.variances))
                    if m.drawn is not None:
                        cols[f"{qn}.drawn"] = _fixed_list(m.drawn)
                fname = f"measurements/{_safe(lv)}.parquet"
                write_parquet(pa.table(cols), tmp / fname, metadata=file_meta)
                files[lv] = fname
            inv_files = {}
            if self.invariants:
                (tmp / "invariants").mkdir()
                for lv, stats in self.invariants.items():
                    codes = self.geography.geocodes[self.geography.level_index(lv)]
                    cols = {"geocode": pa.array(codes.astype(str))}
                    for k, v in stats.items():
                        cols[k] = _fixed_list(v) if v.ndim == 2 else pa.array(v)
                    fname = f"invariants/{_safe(lv)}.parquet"
                    write_parquet(pa.table(cols), tmp / fname)
                    inv_files[lv] = fname
            meta = {
                "format": "dapp.NoisyHierarchy", "format_version": FORMAT_VERSION,
                "schema": self.schema.to_dict(), "workload": self.workload.to_dict(),
                "levels": list(self.levels), "measurements": files,
                "measured_queries": {lv: list(self.queries(lv)) for lv in files},
                "dtypes": {lv: {qn: str(self.measurements[lv][qn].values.dtype)
                                for qn in self.queries(lv)} for lv in files},
                "invariants": inv_files,
                "invariant_statistics": {lv: {k: {"ndim": int(v.ndim), "dtype": str(v.dtype)}
                                              for k, v in s.items()}
                                         for lv, s in self.invariants.items()},
                "provenance": dict(self.provenance), "versions": package_versions()}
            write_json(meta, tmp / "metadata.json")
        return directory

    @classmethod
    def load(cls, directory: str | os.PathLike) -> "NoisyHierarchy":
        """Read a hierarchy written by :meth:`save`."""
        directory = Path(directory)
        if not (directory / "metadata.json").exists():
            raise HierarchyError(f"{directory} is not a saved NoisyHierarchy (no metadata.json)")
        meta = read_json(directory / "metadata.json")
        if meta.get("format") != "dapp.NoisyHierarchy":
            raise HierarchyError(f"{directory}/metadata.json does not describe a NoisyHierarchy")
        if meta.get("format_version", 0) > FORMAT_VERSION:
            raise HierarchyError(f"{directory} was written by a newer version (format "
                                 f"{meta['format_version']}); upgrade the toolkit")
        schema = Schema.from_dict(meta["schema"])
        workload = Workload.from_expressions(schema, meta["workload"])
        geo_frame = pq.read_table(directory / "geography.parquet").to_pandas()
        geography = Geography.from_frame(geo_frame, meta["levels"])
        measurements = {}
        for lv, fname in meta["measurements"].items():
            t = pq.read_table(directory / fname)
            codes = np.asarray(t.column("geocode").to_pylist(), dtype=object)
            expected = geography.geocodes[geography.level_index(lv)]
            if not np.array_equal(codes, expected):
                raise HierarchyError(f"{directory / fname}: units differ from geography.parquet")
            measurements[lv] = {}
            for qn in meta["measured_queries"][lv]:
                dtype = np.dtype(meta["dtypes"][lv][qn])
                vals = _from_fixed_list(t.column(qn), fill=0).astype(dtype, copy=False)
                var = _from_fixed_list(t.column(f"{qn}.variance")).astype(np.float64, copy=False)
                drawn = (_from_fixed_list(t.column(f"{qn}.drawn")).astype(bool, copy=False)
                         if f"{qn}.drawn" in t.column_names else None)
                measurements[lv][qn] = Measurement(qn, vals, var, drawn)
        invariants = {}
        for lv, fname in meta.get("invariants", {}).items():
            t = pq.read_table(directory / fname)
            info = meta["invariant_statistics"][lv]
            invariants[lv] = {}
            for k, desc in info.items():
                col = t.column(k)
                arr = _from_fixed_list(col) if desc["ndim"] == 2 else col.to_numpy()
                invariants[lv][k] = arr.astype(np.dtype(desc["dtype"]), copy=False)
        return cls(schema, geography, workload, measurements, invariants, meta["provenance"])


def _fixed_list(arr: np.ndarray, null: np.ndarray | None = None) -> pa.FixedSizeListArray:
    """Rows of ``arr`` as fixed-size lists; entries where ``null`` is True are nulls."""
    arr = np.ascontiguousarray(arr)
    n, k = arr.shape
    flat = pa.array(arr.ravel(), mask=None if null is None else np.ravel(null))
    return pa.FixedSizeListArray.from_arrays(flat, k)


def _from_fixed_list(col: pa.ChunkedArray, fill: Any = None) -> np.ndarray:
    """The (rows, list size) array of a fixed-size list column; nulls become ``fill``."""
    col = col.combine_chunks()
    k = col.type.list_size
    flat = col.flatten()
    if fill is not None and flat.null_count:
        flat = flat.fill_null(fill)
    return flat.to_numpy(zero_copy_only=False).reshape(len(col), k)


def _safe(name: str) -> str:
    bad = set('/\\:*?"<>|') | {"\0"}
    if any(c in bad for c in name) or name.startswith("."):
        raise HierarchyError(f"level name {name!r} cannot be used as a file name")
    return name
