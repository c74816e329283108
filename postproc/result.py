"""The one result type of every post-processor: histograms per level, with their provenance.

A :class:`Result` holds, for every unit of every level (root first), a histogram over the
schema's cells — integer (TopDown, conditional sampling) or not (least squares, raking, the
unprocessed measurements) — and says which method made it, from which measurements, with which
randomness. It answers any query expression (:meth:`Result.answers`), gives tidy pandas frames
with attribute labels and parent geocodes (:meth:`Result.to_frame`), and round-trips through a
directory (:meth:`Result.write` / :meth:`Result.read`, format ``dapp.Result`` version 1).

The truth (:class:`~hierarchy.histograms.Hierarchy`) and the raw measurements
(:class:`~hierarchy.noisy.NoisyHierarchy`) are read through the same protocol: ``levels``,
``answers(level, query)`` for any query expression, and (for histograms) ``to_frame``; see
:mod:`hierarchy.frames`.

Examples
--------
>>> from hierarchy.schema import Schema, Attribute
>>> from hierarchy.geography import Geography
>>> from hierarchy.queries import Workload, total, detailed
>>> schema = Schema((Attribute("sex", ("male", "female")),))
>>> geo = Geography.from_frame(pd.DataFrame({"level": ["nation", "state", "state"],
...                                          "geocode": ["US", "A", "B"],
...                                          "parent": ["", "US", "US"]}), ["nation", "state"])
>>> r = Result("example", schema, geo, Workload((total(schema), detailed(schema))),
...            (np.array([[3, 4]]), np.array([[1, 4], [2, 0]])))
>>> r
Result('example'; integer; nation=1, state=2 units; 7 persons; randomness unknown)
>>> r.answers("state", "total").ravel().tolist()
[5, 2]
>>> r.to_frame("state")
  nation state     sex  count
0     US     A    male      1
1     US     A  female      4
2     US     B    male      2
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from hierarchy.frames import ancestors, resolve_query, tidy_frame
from hierarchy.geography import Geography
from hierarchy.histograms import short_repr, summary_html
from hierarchy.io.storage import check_file_names, package_versions, write_json, write_parquet
from hierarchy.queries import Query, Workload
from hierarchy.schema import Schema
from postproc.errors import PostprocError
from postproc.intervals import cell_errors, group_interval_frame, interval_frame, z_value

__all__ = ["Result", "Provenance", "PROVENANCE_FIELDS", "resolve_query", "level_table",
           "histograms_from_table", "RESERVED_STEMS", "FORMAT", "FORMAT_VERSION",
           "level_statistics", "level_entry", "manifest_document", "file_metadata"]

#: The ``format`` and ``format_version`` a result directory's manifest records.
FORMAT = "dapp.Result"
FORMAT_VERSION = 1
#: File stems of a result directory that a level must not be named after.
RESERVED_STEMS = ("node_stats", "manifest", "microdata", "noisy", "geography")


def level_table(schema: Schema, geography: Geography, level: str, hist: np.ndarray, *,
                keep_zeros: bool = False) -> pa.Table:
    """Long form of one level: the level's geocode column, one column per attribute, ``count``.

    Zero cells are omitted unless ``keep_zeros``. ``count`` is int64 for integer histograms and
    float64 otherwise.

    Examples
    --------
    >>> from hierarchy.schema import Schema, Attribute
    >>> s = Schema((Attribute("sex", ("m", "f")),))
    >>> g = Geography(("nation",), (np.array(["US"]),), (np.array([-1]),))
    >>> level_table(s, g, "nation", np.array([[0, 5]])).to_pydict()
    {'nation': ['US'], 'sex': [1], 'count': [5]}
    """
    li = geography.level_index(level)
    hist = np.asarray(hist)
    units, cells = (np.nonzero(hist) if not keep_zeros
                    else np.indices(hist.shape).reshape(2, -1))
    codes = np.unravel_index(cells, schema.shape)
    cols: dict[str, Any] = {level: pa.DictionaryArray.from_arrays(
        pa.array(units.astype(np.int32)), pa.array(geography.geocodes[li].astype(str)))}
    for attr, c in zip(schema.attributes, codes):
        cols[attr.name] = pa.array(c.astype(np.int8 if attr.size <= 127 else np.int32))
    integer = hist.dtype.kind in "iub"
    cols["count"] = pa.array(hist[units, cells].astype(np.int64 if integer else np.float64))
    return pa.table(cols)


def histograms_from_table(table: pa.Table | pd.DataFrame, schema: Schema, geography: Geography,
                          level: str, *, source: str = "table", integer: bool = True,
                          nonnegative: bool = True) -> np.ndarray:
    """Inverse of :func:`level_table`: dense (units × cells) histograms, validated.

    ``integer`` (default) requires integer counts and returns int64 — non-negative ones unless
    ``nonnegative=False`` (the unprocessed measurements and ``bottom_up`` are integers that may
    be negative); otherwise any finite counts are accepted and float64 is returned.

    Examples
    --------
    >>> from hierarchy.schema import Schema, Attribute
    >>> s = Schema((Attribute("sex", ("m", "f")),))
    >>> g = Geography(("nation",), (np.array(["US"]),), (np.array([-1]),))
    >>> table = level_table(s, g, "nation", np.array([[-2, 5]]))
    >>> histograms_from_table(table, s, g, "nation", nonnegative=False).tolist()
    [[-2, 5]]
    >>> histograms_from_table(table, s, g, "nation", source="nation.parquet")
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: nation.parquet: counts must be non-negative integers
    """
    frame = table.to_pandas() if isinstance(table, pa.Table) else table
    need = [level, *schema.names, "count"]
    missing = [c for c in need if c not in frame.columns]
    if missing:
        raise PostprocError(f"{source}: missing column(s) {missing}; expected {need}")
    li = geography.level_index(level)
    unit = pd.Index(geography.geocodes[li]).get_indexer(frame[level].astype(str))
    if (unit < 0).any():
        bad = frame[level].astype(str).to_numpy()[unit < 0][:5].tolist()
        raise PostprocError(f"{source}: {level} geocodes {bad} are not in the geography")
    cell = np.zeros(len(frame), dtype=np.int64)
    for attr in schema.attributes:
        col = frame[attr.name].to_numpy()
        if np.any((col < 0) | (col >= attr.size)):
            raise PostprocError(f"{source}: column {attr.name!r} has codes outside "
                                f"0..{attr.size - 1}")
        cell = cell * attr.size + col.astype(np.int64)
    counts = frame["count"].to_numpy()
    if integer:
        if counts.dtype.kind not in "iu" or (nonnegative and np.any(counts < 0)):
            kind = "non-negative integers" if nonnegative else "integers"
            raise PostprocError(f"{source}: counts must be {kind}")
        dtype = np.int64
    else:
        if counts.dtype.kind not in "iuf" or not np.isfinite(counts).all():
            raise PostprocError(f"{source}: counts must be finite numbers")
        dtype = np.float64
    out = np.zeros((geography.n_units(li), schema.size), dtype=dtype)
    np.add.at(out, (unit, cell), counts.astype(dtype))
    return out


#: The entries of a result's provenance that any post-processor may write, typed by
#: :class:`Provenance`; the others are the method's own.
PROVENANCE_FIELDS = ("noisy", "spec", "timings", "failsafe_reports")


@dataclass(frozen=True, eq=False)
class Provenance(Mapping[str, Any]):
    """How a result was made: the entries every post-processor may write, typed, and the
    method's own.

    Every method records the measurements it post-processed (``noisy``: their provenance, with
    their randomness label). The methods that keep a spec record it (``spec``, its JSON form)
    and the nodes where a promise had to be relaxed (``failsafe_reports``), and the level-wise
    ones their ``timings`` (``levels``: seconds per level, ``total``). Everything else is the
    method's own, in ``details``: TopDown's ``solver``, conditional sampling's ``sampler``, a
    baseline's ``method``, fitted ``queries`` or ``equal_splits``, a run's ``directory`` …

    It reads as the JSON object it is written as — ``provenance["noisy"]``, ``.get``, ``in``,
    iteration in the order the method wrote its entries, ``dict(provenance)`` or
    :meth:`to_dict` — so a method may give :class:`Result` a plain dict (it is converted with
    :meth:`from_dict`) and a result's manifest holds the same JSON as a dict would give.

    Parameters
    ----------
    noisy : mapping
        The measurements' provenance (``{}`` when not recorded).
    spec : mapping, optional
        The spec kept, as :meth:`invariants.spec.Spec.to_dict` gives it.
    timings : mapping
        Seconds: ``levels`` (level → seconds), ``total`` and others.
    failsafe_reports : sequence of mapping
        One record per node where a promise was relaxed.
    details : mapping
        The method's own entries, in the order written.

    Raises
    ------
    PostprocError
        An entry of the wrong kind (``noisy`` not a mapping, …), or ``details`` naming one of
        :data:`PROVENANCE_FIELDS`.

    Examples
    --------
    >>> p = Provenance.from_dict({"method": "hay", "noisy": {"randomness": {"mode": "release"}},
    ...                           "z_per_level": [1.5]})
    >>> p.noisy["randomness"]["mode"], p.spec, p.details["z_per_level"]
    ('release', None, [1.5])
    >>> p["method"], "spec" in p, list(p), p.get("timings", "none")
    ('hay', False, ['method', 'noisy', 'z_per_level'], 'none')
    >>> p.to_dict() == {"method": "hay", "noisy": {"randomness": {"mode": "release"}},
    ...                 "z_per_level": [1.5]}
    True
    >>> Provenance(noisy={"randomness": {}}, failsafe_reports=[]).to_dict()
    {'noisy': {'randomness': {}}}
    >>> Provenance.from_dict({"noisy": []})
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: a result's provenance: noisy must be a mapping, not list
    """

    noisy: Mapping[str, Any] = field(default_factory=dict)
    spec: Mapping[str, Any] | None = None
    timings: Mapping[str, Any] = field(default_factory=dict)
    failsafe_reports: Sequence[Mapping[str, Any]] = ()
    details: Mapping[str, Any] = field(default_factory=dict)
    #: The entries' names in the order written (default: the typed ones that are set, then
    #: the details).
    order: tuple[str, ...] = field(default=(), repr=False)

    def __post_init__(self):
        def kind(name: str, ok: bool, what: str) -> None:
            if not ok:
                raise PostprocError(f"a result's provenance: {name} must be {what}, not "
                                    f"{type(getattr(self, name)).__name__}")

        kind("noisy", isinstance(self.noisy, Mapping), "a mapping")
        kind("spec", self.spec is None or isinstance(self.spec, Mapping), "a mapping or None")
        kind("timings", isinstance(self.timings, Mapping), "a mapping")
        kind("failsafe_reports", isinstance(self.failsafe_reports, (list, tuple)), "a list")
        kind("details", isinstance(self.details, Mapping), "a mapping")
        typed = set(PROVENANCE_FIELDS) & set(self.details)
        if typed:
            raise PostprocError(f"a result's provenance: {sorted(typed)} are typed entries, not "
                                f"details")
        order = tuple(self.order) or (
            tuple(name for name in PROVENANCE_FIELDS
                  if getattr(self, name) not in (None, {}, (), []))
            + tuple(self.details))
        if set(self.details) - set(order) or set(order) - set(self.details) - set(
                PROVENANCE_FIELDS) or len(set(order)) != len(order):
            raise PostprocError(f"a result's provenance: the order {list(order)} does not name "
                                f"each entry once")
        object.__setattr__(self, "order", order)

    @classmethod
    def from_dict(cls, provenance: Mapping[str, Any] | None) -> "Provenance":
        """The record of a provenance written as a mapping (a :class:`Provenance` is returned
        as it is)."""
        if isinstance(provenance, Provenance):
            return provenance
        entries = dict(provenance or {})
        return cls(**{name: entries[name] for name in PROVENANCE_FIELDS if name in entries},
                   details={k: v for k, v in entries.items() if k not in PROVENANCE_FIELDS},
                   order=tuple(entries))

    def to_dict(self) -> dict[str, Any]:
        """The JSON object: the entries in the order written."""
        return {name: self[name] for name in self.order}

    def __getitem__(self, name: str) -> Any:
        if name not in self.order:
            raise KeyError(name)
        return getattr(self, name) if name in PROVENANCE_FIELDS else self.details[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.order)

    def __len__(self) -> int:
        return len(self.order)

    def __repr__(self) -> str:
        return f"Provenance({', '.join(self.order)})"


@dataclass(frozen=True, eq=False)
class Result:
    """Histograms of every unit of every level, as a post-processor leaves them.

    Parameters
    ----------
    method : str
        The registered name of what made it (``"topdown"``, ``"sampling"``, ``"hay"``, …).
    schema, geography, workload
        The data model the histograms refer to.
    histograms : tuple of arrays
        ``histograms[l]`` has shape (units of level ``l``, ``schema.size``), root first; fewer
        arrays than levels for a partial result (a run stopped after a level).
    provenance : Provenance or mapping
        How it was made (:class:`Provenance`; a mapping is converted): ``noisy`` (the
        measurements' provenance, with their randomness label), ``spec``, ``timings``,
        ``failsafe_reports`` and the method's own settings, JSON-ready.
    node_stats : pandas.DataFrame, optional
        One row per parent problem (solver or sampler statistics).
    uncertainty : object, optional
        The estimate's covariance, when the method computes one (``gls``): anything with
        ``variances(level_index, query_matrix) -> (units × answers)``. It gives
        :meth:`intervals`; it is not written to a result directory.

    Raises
    ------
    PostprocError
        No levels or too many, wrong shapes, or non-finite counts.

    Examples
    --------
    A county of two tracts, written to a directory and read back:

    >>> import tempfile
    >>> from hierarchy.queries import detailed
    >>> from hierarchy.schema import Attribute
    >>> schema = Schema((Attribute("tenure", ("owned", "rented")),))
    >>> geo = Geography(("county", "tract"), (["C"], ["C1", "C2"]), ([-1], [0, 0]))
    >>> result = Result("mine", schema, geo, Workload((detailed(schema),)),
    ...                 (np.array([[2, 1]]), np.array([[2, 0], [0, 1]])))
    >>> result.levels, result.integer, result.safe_for_release    # no provenance: not safe
    (('county', 'tract'), True, False)
    >>> path = result.write(tempfile.mkdtemp() + "/result")
    >>> sorted(file.name for file in path.iterdir())
    ['county.parquet', 'geography.parquet', 'manifest.json', 'tract.parquet']
    >>> Result.read(path).histograms[1].tolist()
    [[2, 0], [0, 1]]
    >>> result.to_microdata().to_pydict()                        # one row per person
    {'tract': ['C1', 'C1', 'C2'], 'tenure': [0, 0, 1]}
    >>> Result("mine", schema, geo, Workload((detailed(schema),)), (np.array([[2, 1, 0]]),))
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: mine: level 'county' histograms have shape (1, 3),
    expected (1, 2)
    """

    method: str
    schema: Schema
    geography: Geography
    workload: Workload
    histograms: tuple[np.ndarray, ...]
    provenance: Provenance = field(default_factory=Provenance, repr=False)
    node_stats: pd.DataFrame | None = field(default=None, repr=False)
    uncertainty: Any = field(default=None, repr=False)

    def __post_init__(self):
        hists = tuple(np.asarray(h) for h in self.histograms)
        if not 1 <= len(hists) <= self.geography.depth:
            raise PostprocError(f"{self.method}: {len(hists)} histogram arrays for the "
                                f"{self.geography.depth} levels {list(self.geography.levels)}")
        for level, h in zip(self.geography.levels, hists):
            want = (self.geography.n_units(level), self.schema.size)
            if h.shape != want:
                raise PostprocError(f"{self.method}: level {level!r} histograms have shape "
                                    f"{h.shape}, expected {want}")
            if h.dtype.kind not in "iuf" or (h.dtype.kind == "f" and not np.isfinite(h).all()):
                raise PostprocError(f"{self.method}: level {level!r} histograms must be finite "
                                    f"numbers")
        object.__setattr__(self, "histograms", hists)
        object.__setattr__(self, "provenance", Provenance.from_dict(self.provenance))
        stats = self.node_stats if self.node_stats is not None else pd.DataFrame()
        object.__setattr__(self, "node_stats", stats)

    # -- reading -----------------------------------------------------------------------------
    @property
    def levels(self) -> tuple[str, ...]:
        """Names of the levels computed, root first."""
        return self.geography.levels[:len(self.histograms)]

    @property
    def integer(self) -> bool:
        """Whether every histogram holds integers."""
        return all(h.dtype.kind in "iu" for h in self.histograms)

    def level_histograms(self, level: str | int) -> np.ndarray:
        """Histograms of one level, shape (units, cells)."""
        li = self.geography.level_index(level)
        if li >= len(self.histograms):
            raise PostprocError(f"level {self.geography.levels[li]!r} has not been computed")
        return self.histograms[li]

    def answers(self, level: str | int, query: str | Query) -> np.ndarray:
        """Answers of a workload query, a query expression or a Query, shape (units, answers)."""
        q = resolve_query(query, self.schema, self.workload)
        return q.answer(self.level_histograms(level))

    # -- labels ------------------------------------------------------------------------------
    @property
    def randomness(self) -> dict[str, Any]:
        """The measurements' randomness provenance (mode, label, safe_for_release, seed)."""
        return dict(self.provenance.noisy.get("randomness", {}))

    @property
    def safe_for_release(self) -> bool:
        """True only if the measurements and any randomness of the method were release mode."""
        if not self.randomness.get("safe_for_release", False):
            return False
        own = self.provenance.details.get("sampler", {}).get("randomness")
        return own is None or bool(own.get("safe_for_release", False))

    @property
    def failsafe_reports(self) -> list[dict[str, Any]]:
        """The nodes where a promise had to be relaxed, and what moved."""
        return list(self.provenance.failsafe_reports)

    def __repr__(self) -> str:
        kind = "integer" if self.integer else "real"
        label = self.randomness.get("mode", "unknown")
        if label == "simulation":
            label = "simulation (unsafe for release)"
        return short_repr("Result", [(lv, h.shape[0]) for lv, h in zip(self.levels,
                                                                         self.histograms)],
                          self._persons(self.histograms[0]), label,
                          head=f"{self.method!r}; {kind}")

    def _persons(self, hist: np.ndarray) -> str:
        total = hist.sum()
        return f"{int(total):,}" if self.integer else f"{float(total):,.1f}"

    def _repr_html_(self) -> str:
        rows = [(lv, h.shape[0], self._persons(h)) for lv, h in zip(self.levels, self.histograms)]
        randomness = self.randomness
        notes = [f"randomness: {randomness.get('label', randomness.get('mode', 'unknown'))}",
                 "safe for release" if self.safe_for_release else "not safe for release"]
        if len(self.levels) < self.geography.depth:
            notes.append(f"partial: {len(self.levels)} of {self.geography.depth} levels")
        kind = "integer" if self.integer else "real"
        return summary_html(f"Result {self.method!r} ({kind} histograms)", rows, notes)

    # -- frames ------------------------------------------------------------------------------
    def to_table(self, level: str | int, *, keep_zeros: bool = False) -> pa.Table:
        """Long form of a level (see :func:`level_table`)."""
        li = self.geography.level_index(level)
        return level_table(self.schema, self.geography, self.geography.levels[li],
                           self.level_histograms(li), keep_zeros=keep_zeros)

    def intervals(self, level: str | int, query: str | Query = "total", *,
                  interval: float = 0.9, groups: Any = None) -> pd.DataFrame:
        """Estimate, standard error and two-sided interval of a query's answers for every unit
        of a level (:func:`postproc.intervals.interval_frame`), or, with ``groups``, for sums
        over sets of its units (:func:`postproc.intervals.group_interval_frame`); needs
        :attr:`uncertainty`."""
        if groups is not None:
            return group_interval_frame(self, level, query, groups=groups, interval=interval)
        return interval_frame(self, level, query, interval=interval)

    def to_frame(self, level: str | int, *, labels: bool = True, parents: bool = True,
                 zeros: bool = False, interval: float | None = None) -> pd.DataFrame:
        """A tidy DataFrame of one level: one row per unit and cell.

        Parameters
        ----------
        level : str or int
        labels : bool
            Attribute columns as categoricals of the schema's labels (else integer codes).
        parents : bool
            Geocode columns of every level above, root first.
        zeros : bool
            Keep the cells whose count is zero.
        interval : float, optional
            Add ``se``, ``lower`` and ``upper`` of each count for this two-sided coverage
            (e.g. 0.9); needs :attr:`uncertainty` (a ``gls`` result).

        Returns
        -------
        pandas.DataFrame
            Columns: the parent geocodes (if ``parents``), the level's geocode, one column per
            attribute, ``count`` (then ``se``, ``lower``, ``upper`` with ``interval``).
        """
        li = self.geography.level_index(level)
        hist = self.level_histograms(li)
        frame = tidy_frame(self.schema, self.geography, li, hist, labels=labels,
                           parents=parents, zeros=zeros)
        if interval is not None:
            z = z_value(interval)
            se = cell_errors(self, li)[np.nonzero(hist) if not zeros else slice(None)].ravel()
            frame["se"] = se
            frame["lower"] = frame["count"] - z * se
            frame["upper"] = frame["count"] + z * se
            frame.attrs["interval"] = float(interval)
        return frame

    # -- directories -------------------------------------------------------------------------
    def manifest(self) -> dict[str, Any]:
        """JSON-ready manifest: format, method, per-level summaries, provenance, versions."""
        seconds = self.provenance.timings.get("levels", {})
        per_level = {lv: level_entry(h.shape[0], h.sum(), self.node_stats, lv,
                                     seconds.get(lv, 0))
                     for lv, h in zip(self.levels, self.histograms)}
        return manifest_document(self.method, self.integer, per_level, self.randomness,
                                 self.safe_for_release, self.schema, self.workload,
                                 self.provenance.to_dict())

    def write(self, directory: str | os.PathLike, *, levels: list[str] | None = None,
              node_stats: bool = True, extra_manifest: Mapping[str, Any] | None = None) -> Path:
        """Write ``DIR/<level>.parquet`` (long form), ``DIR/geography.parquet``,
        ``DIR/node_stats.parquet`` and ``DIR/manifest.json``, atomically file by file.

        Every file carries the randomness label in its metadata. :meth:`read` reads it back.
        """
        directory = Path(directory)
        check_file_names(self.levels, what="level", reserved=RESERVED_STEMS)
        directory.mkdir(parents=True, exist_ok=True)
        meta = file_metadata(self.randomness, self.schema)
        for lv in levels or self.levels:
            write_parquet(self.to_table(lv), directory / f"{lv}.parquet", metadata=meta)
        write_parquet(pa.Table.from_pandas(self.geography.to_frame(), preserve_index=False),
                      directory / "geography.parquet", metadata=meta)
        if node_stats and len(self.node_stats):
            write_parquet(pa.Table.from_pandas(self.node_stats, preserve_index=False),
                          directory / "node_stats.parquet", metadata=meta)
        manifest = self.manifest()
        if extra_manifest:
            manifest.update(extra_manifest)
        write_json(manifest, directory / "manifest.json")
        return directory

    @classmethod
    def read(cls, directory: str | os.PathLike) -> "Result":
        """Read a directory written by :meth:`write`.

        Raises
        ------
        PostprocError
            Not a result directory, another format version, or a missing or bad file (named).
        """
        directory = Path(directory)
        path = directory / "manifest.json"
        try:
            manifest = json.loads(path.read_text())
        except FileNotFoundError:
            raise PostprocError(f"{directory}: no manifest.json; not a result directory "
                                f"(write one with Result.write)") from None
        except json.JSONDecodeError as exc:
            raise PostprocError(f"{path}: not valid JSON ({exc})") from None
        if manifest.get("format") != FORMAT or "schema" not in manifest:
            raise PostprocError(f"{path}: format {manifest.get('format')!r} is not {FORMAT!r} "
                                f"with a schema; it was not written by Result.write")
        if manifest.get("format_version") != FORMAT_VERSION:
            raise PostprocError(f"{path}: format version {manifest.get('format_version')!r}; "
                                f"this version of dapp reads version {FORMAT_VERSION}")
        schema = Schema.from_dict(manifest["schema"])
        workload = Workload.from_expressions(schema, manifest["workload"])
        if not (directory / "geography.parquet").exists():
            raise PostprocError(f"{directory}: geography.parquet is missing")
        frame = pq.read_table(directory / "geography.parquet").to_pandas()
        all_levels = list(dict.fromkeys(frame["level"].astype(str)))
        geography = Geography.from_frame(frame, all_levels)
        integer = bool(manifest.get("integer", True))
        hists = []
        for lv in manifest["geography_levels"]:
            file = directory / f"{lv}.parquet"
            if not file.exists():
                raise PostprocError(f"{file} is missing")
            hists.append(histograms_from_table(pq.read_table(file), schema, geography, lv,
                                               source=str(file), integer=integer,
                                               nonnegative=False))
        stats = (pq.read_table(directory / "node_stats.parquet").to_pandas()
                 if (directory / "node_stats.parquet").exists() else None)
        provenance = dict(manifest.get("provenance", {}))
        if not provenance.get("noisy", {}).get("randomness") and manifest.get("randomness"):
            # a run's manifest states the measurements' randomness at its top level
            provenance["noisy"] = {**provenance.get("noisy", {}),
                                   "randomness": manifest["randomness"]}
        return cls(manifest["method"], schema, geography, workload, tuple(hists), provenance,
                   stats)

    def to_microdata(self, level: str | int | None = None) -> pa.Table:
        """Synthetic microdata: one row per person of ``level`` (default: the bottom level), with
        the geocode of every level above and every attribute. Integer results only."""
        if not self.integer:
            raise PostprocError(f"{self.method}: a result with fractional counts has no "
                                f"microdata; use an integer post-processor (topdown, sampling)")
        li = len(self.histograms) - 1 if level is None else self.geography.level_index(level)
        hist = self.level_histograms(li)
        if (hist < 0).any():
            raise PostprocError(f"{self.method}: negative counts have no microdata")
        units, cells = np.nonzero(hist)
        counts = hist[units, cells]
        unit_rep = np.repeat(units, counts)
        cell_rep = np.repeat(cells, counts)
        cols: dict[str, Any] = {}
        chain = [(lv, ix) for lv, ix in ancestors(self.geography, li, unit_rep) if lv > 0]
        for lv, ix in chain + ([(li, unit_rep)] if li > 0 else []):
            cols[self.geography.levels[lv]] = pa.DictionaryArray.from_arrays(
                pa.array(ix.astype(np.int32)), pa.array(self.geography.geocodes[lv].astype(str)))
        codes = np.unravel_index(cell_rep, self.schema.shape)
        for attr, c in zip(self.schema.attributes, codes):
            cols[attr.name] = pa.array(c.astype(np.int8 if attr.size <= 127 else np.int32))
        return pa.table(cols)


def level_entry(units: int, persons: Any, node_stats: pd.DataFrame, level: str,
                seconds: float | None) -> dict[str, Any]:
    """One level's entry in a result's manifest: units, persons, parent problems, seconds and
    the :func:`level_statistics` of its rows of ``node_stats``.

    >>> level_entry(3, np.int64(40), pd.DataFrame({"level": ["b"], "fit_seconds": [0.5]}),
    ...             "b", 1.25)["parents"]
    1
    """
    s = (node_stats[node_stats["level"] == level] if len(node_stats) and "level" in node_stats
         else node_stats.iloc[:0])
    persons = int(persons) if np.asarray(persons).dtype.kind in "iu" else float(persons)
    return {"units": int(units), "persons": persons, "parents": int(len(s)),
            "seconds": float(seconds or 0), **level_statistics(s)}


def manifest_document(method: str, integer: bool, levels: Mapping[str, Any],
                      randomness: Mapping[str, Any], safe_for_release: bool, schema: Schema,
                      workload: Workload, provenance: Mapping[str, Any]) -> dict[str, Any]:
    """A result directory's ``manifest.json`` (what :meth:`Result.read` reads), from its
    per-level entries (:func:`level_entry`), root first: written by :meth:`Result.write` and
    by a run in parts, which never holds the histograms of its levels below the split whole.

    Examples
    --------
    >>> from hierarchy.queries import total
    >>> from hierarchy.schema import Attribute, Schema
    >>> schema = Schema((Attribute("tenure", ("owned", "rented")),))
    >>> levels = {"county": level_entry(1, 5, pd.DataFrame(), "county", 0.5)}
    >>> doc = manifest_document("topdown", True, levels, {"label": "x"}, False, schema,
    ...                         Workload((total(schema),)), {})
    >>> doc["format"], doc["geography_levels"], doc["levels"]["county"]["persons"]
    ('dapp.Result', ['county'], 5)
    """
    return {"format": FORMAT, "format_version": FORMAT_VERSION, "method": method,
            "integer": bool(integer), "levels": dict(levels), "randomness": dict(randomness),
            "safe_for_release": bool(safe_for_release),
            "schema": schema.to_dict(), "workload": workload.to_dict(),
            "geography_levels": list(levels), "provenance": dict(provenance),
            "versions": package_versions()}


def file_metadata(randomness: Mapping[str, Any], schema: Schema) -> dict[str, Any]:
    """The metadata every data file of a result carries: its randomness label and schema.

    Examples
    --------
    >>> from hierarchy.schema import Attribute, Schema
    >>> schema = Schema((Attribute("tenure", ("owned", "rented")),))
    >>> sorted(file_metadata({"label": "SIMULATION (NOT SAFE FOR RELEASE)"}, schema))
    ['randomness_label', 'schema']
    """
    return {"randomness_label": randomness.get("label"), "schema": schema.to_dict()}


def level_statistics(s: pd.DataFrame) -> dict[str, Any]:
    """Per-level summaries of node statistics: solver columns for a solver, moves for a sampler
    (the ``levels`` entries of a result's manifest).

    Examples
    --------
    >>> stats = pd.DataFrame({"fit_seconds": [0.5, 1.0], "round_seconds": [0.25, 0.25],
    ...                       "backend": ["clarabel", "clarabel"], "rounding": ["lp", "lp"]})
    >>> summary = level_statistics(stats)
    >>> summary["fit_seconds"], summary["backends"]
    (1.5, {'clarabel': 2})

    Two passes solved at once are no fallback; a pass that needed the next backend is:

    >>> stats["attempts"] = ["clarabel:optimal;clarabel:optimal",
    ...                      "clarabel:inaccurate;osqp:optimal;clarabel:optimal"]
    >>> level_statistics(stats)["fallbacks"]
    1
    """
    out: dict[str, Any] = {}
    if not len(s):
        return out
    if "fit_seconds" in s:
        out.update({
            "fit_seconds": float(s["fit_seconds"].sum()),
            "round_seconds": float(s["round_seconds"].sum()) if "round_seconds" in s else 0.0,
            "backends": s["backend"].value_counts().to_dict() if "backend" in s else {},
            "rounding": s["rounding"].value_counts().to_dict() if "rounding" in s else {},
            # a node fell back when an attempt of any pass did not end optimal
            "fallbacks": int((s["attempts"].fillna("").str.replace(
                r"[^;:]+:optimal", "", regex=True).str.strip(";") != "").sum())
            if "attempts" in s else 0,
            "failsafe_nodes": int(s["failsafe"].sum()) if "failsafe" in s else 0})
    if "proposed" in s:
        proposed, accepted = int(s["proposed"].sum()), int(s["accepted"].sum())
        out.update({"copied_parents": int(s["copied"].sum()) if "copied" in s else 0,
                    "moves_proposed": proposed, "moves_accepted": accepted,
                    "acceptance": accepted / proposed if proposed else None})
    return out
