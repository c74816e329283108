"""Read a Noisy Measurement File (``docs/nmf.md``): the Census Bureau's published 2020 P.L. 94-171
measurements, or a synthetic one in the same layout, as a :class:`~hierarchy.noisy.
NoisyHierarchy` and the :class:`~invariants.spec.Spec` its constraint rows compile to.

Each file is read with its own schema (value lists are int32 in some partitions and int64 in
others) and checked row by row against the layout (:mod:`postproc.apps.nmf.layout`): a query
the PL 94 preset does not know, axis columns or a ``query_shape`` that do not match it, a
``value`` list whose length is not the product of its shape, a variance that is not positive and
finite, a constraint sign that is not its constraint's — each is an error naming the file, the
partition and the row, and nothing half-read is returned.

The geography is the DAS spine's, read from the ``Constraint`` rows, which every geounit has
(an only child, whose budget moved to its parent, has no ``DPQuery`` rows): nation (the US, or
the states read), the state pieces (``0SS``, and ``1SS`` for a state's AIAN areas), spine
counties, tracts, block groups and blocks, each unit's parent the prefix of its geocode. The
measurements keep each row's own variance. The constraints become ``published`` constraints
(:class:`~invariants.items.Constraint`) whose right-hand sides are the rows' values, and the
states' totals (which the file does not hold) the ``tot`` invariant of the pieces and of the
root.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from hierarchy.geography import Geography
from hierarchy.noisy import Measurement, NoisyHierarchy
from hierarchy.presets.pl94 import NURSE_NVA_0, PL94_2020, pl94_workload
from hierarchy.queries import Workload
from hierarchy.schema import Attribute, Schema
from invariants.items import Constraint, Invariant
from invariants.spec import Spec, UnitSum
from postproc.apps.nmf.files import (
    _level_dir,
    _partitions,
    _product_dir,
    _read_dataset,
    _Rows,
)
from postproc.apps.nmf.layout import (
    CON_SUFFIX,
    CONSTRAINT,
    DPQUERY,
    GEOLEVELS,
    LEVEL_NAMES,
    PRODUCTS,
    row_kinds,
    split_piece,
)
from postproc.errors import PostprocError

__all__ = ["read_nmf", "read_state_totals", "STATE_TOTALS_2020"]


#: The query of each persons' constraint in the toolkit's query language.
_CONSTRAINT_QUERIES = {"hhgq_total_lb": "marginal(hhgq)", "hhgq_total_ub": "marginal(hhgq)",
                       "nurse_nva_0": NURSE_NVA_0["query"], "total": "total"}
_SENSES = {"=": "==", ">=": ">=", "<=": "<="}


#: The 2020 Census's state totals (resident population, the P.L. 94-171 table P1 total,
#: P1_001N, of the 50 states and DC), shipped with the toolkit: they sum to 331,449,281, the
#: US ``total_con`` of the 2020 file. ``state_totals="2020"`` reads them.
STATE_TOTALS_2020 = "state_totals_2020.csv"


def read_state_totals(source: str | Path | Mapping[str, int]) -> dict[str, int]:
    """State totals (persons) by two-digit state FIPS: a mapping, a CSV with columns
    ``state,total``, or ``"2020"`` for the 2020 Census's (:data:`STATE_TOTALS_2020`).

    Parameters
    ----------
    source : mapping, path or "2020"

    Returns
    -------
    dict str → int

    Raises
    ------
    PostprocError
        A missing file or column, a state code that is not two digits, a total that is not a
        non-negative whole number, or a state twice — naming the file and line.

    Examples
    --------
    >>> read_state_totals({"44": 1097379, "50": 643077})
    {'44': 1097379, '50': 643077}
    >>> census = read_state_totals("2020")
    >>> len(census), census["06"], sum(census.values())
    (51, 39538223, 331449281)
    >>> read_state_totals({"4": 10})
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: state totals: state '4' is not a two-digit FIPS code (e.g. '06')
    """
    if isinstance(source, Mapping):
        items = [(str(k), v, f"state totals: state {k!r}") for k, v in source.items()]
    else:
        path = (Path(__file__).with_name(STATE_TOTALS_2020) if str(source) == "2020"
                else Path(source))
        if not path.is_file():
            raise PostprocError(f"state totals file {str(path)!r} does not exist; give a CSV with "
                                "columns state,total (two-digit FIPS, persons)")
        with path.open(newline="") as fh:
            reader = csv.DictReader(fh)
            if not reader.fieldnames or not {"state", "total"} <= set(reader.fieldnames):
                raise PostprocError(f"{path}: needs columns 'state' and 'total', has "
                                    f"{reader.fieldnames}")
            items = [(row["state"].strip(), row["total"].strip(), f"{path}, line {i + 2}")
                     for i, row in enumerate(reader)]
    out: dict[str, int] = {}
    for state, total, where in items:
        if not (len(state) == 2 and state.isdigit()):
            where = where if not isinstance(source, Mapping) else "state totals"
            raise PostprocError(f"{where}: state {state!r} is not a two-digit FIPS code (e.g. "
                                "'06')")
        try:
            value = int(total)
        except (TypeError, ValueError):
            value = -1
        if value < 0 or (isinstance(total, float) and not float(total).is_integer()):
            raise PostprocError(f"{where}: total {total!r} is not a non-negative whole number")
        if state in out:
            raise PostprocError(f"{where}: state {state} is given twice")
        out[state] = value
    return out


# -- the hierarchy -----------------------------------------------------------------------------

def _geography(constraints: Sequence[_Rows], levels: Sequence[str], root: str, key: str
               ) -> tuple[Geography, list[np.ndarray]]:
    """The spine tree from every unit's constraint rows (below the root; ``key``: a constraint
    every unit has): each unit's parent is the prefix of its geocode of its parent level's
    width. Returns the geography and each level's geocodes as read (in the geography's
    order)."""
    for gl, r in zip(GEOLEVELS[1:], constraints):
        if key not in r.geocodes:
            raise PostprocError(f"{gl}: no {key!r} constraint rows in the file (every geounit "
                                "has them)")
    codes = [np.unique(np.concatenate(r.geocodes[key])) for r in constraints]
    widths = []
    for gl, c in zip(GEOLEVELS[1:], codes):
        lengths = np.char.str_len(c)
        if lengths.size and lengths.min() != lengths.max():
            odd = c[np.flatnonzero(lengths != np.bincount(lengths).argmax())[0]]
            raise PostprocError(f"geolevel {gl}: geocodes of different lengths (e.g. {odd!r}); "
                                "a level's spine geocodes have one width")
        widths.append(int(lengths[0]) if lengths.size else 0)
    if any(b <= a for a, b in zip(widths, widths[1:])):
        raise PostprocError(f"spine geocode widths {dict(zip(GEOLEVELS[1:], widths))} do not "
                            "grow down the levels")
    blocks = codes[-1]
    columns = [np.array([b[:w] for b in blocks], dtype=object) for w in widths[:-1]]
    columns.append(blocks.astype(object))
    for li in range(len(codes) - 1):
        have, parents = codes[li], np.unique(columns[li].astype(str))
        extra = np.setdiff1d(have, parents)
        if extra.size:
            raise PostprocError(f"{GEOLEVELS[li + 1]} {extra[0]!r} has constraint rows but no "
                                f"{GEOLEVELS[-1]} under it")
        orphan = np.setdiff1d(parents, have)
        if orphan.size:
            raise PostprocError(f"{GEOLEVELS[-1]} geocodes name the {GEOLEVELS[li + 1]} "
                                f"{orphan[0]!r}, which has no constraint rows in the file")
    geo, _ = Geography.from_columns(levels, [columns], root_geocode=root)
    geo = _pieces_by_state(geo)
    return geo, [geo.geocodes[li + 1] for li in range(len(codes))]


def _pieces_by_state(geo: Geography) -> Geography:
    """The geography with a state's pieces next to each other (``004``, ``104``, ``044``: by
    state, then AIAN flag) and every level below in its parents' new order, each parent's
    children as before: a state's pieces are then one run of the nation's children, as a level
    of states above them would have them (what ``gls`` inserts to hold their total)."""
    order = np.lexsort((np.array([str(c)[0] for c in geo.geocodes[1]]),
                        np.array([str(c)[1:3] for c in geo.geocodes[1]])))
    if np.array_equal(order, np.arange(order.size)):
        return geo
    moved = order                           # new position → old index, at level 1
    geocodes = [geo.geocodes[0], geo.geocodes[1][moved]]
    parents = [geo.parents[0], geo.parents[1][moved]]
    for li in range(2, geo.depth):
        new_of_old = np.empty(moved.size, np.int64)
        new_of_old[moved] = np.arange(moved.size)
        new_parent = new_of_old[geo.parents[li]]
        moved = np.argsort(new_parent, kind="stable")
        geocodes.append(geo.geocodes[li][moved])
        parents.append(new_parent[moved])
    return Geography(geo.levels, tuple(geocodes), tuple(parents))


def _unit_rows(rows: _Rows, kind: str, codes: np.ndarray, level: str, *, required: bool
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """A row kind's values (units × answers, in ``codes``' order), the units that have it, and
    the variances; every unit at most once, and (``required``) every unit once."""
    if kind not in rows.geocodes:
        if required:
            raise PostprocError(f"{level}: no {kind!r} rows in the file")
        return np.zeros((codes.size, 0), np.int64), np.zeros(codes.size, bool), None
    got, values, var = rows.joined(kind)
    index = pd.Index(codes).get_indexer(got)
    if (index < 0).any():
        first = str(got[np.flatnonzero(index < 0)[0]])
        raise PostprocError(f"{level} {first!r} has {kind!r} rows but no constraint rows "
                            "(every geounit of the file has those)")
    seen = np.bincount(index, minlength=codes.size)
    if (seen > 1).any():
        first = str(codes[np.flatnonzero(seen > 1)[0]])
        raise PostprocError(f"{level} {first!r} has {kind!r} {int(seen.max())} times")
    if required and (seen == 0).any():
        first = str(codes[np.flatnonzero(seen == 0)[0]])
        raise PostprocError(f"{level} {first!r} has no {kind!r} row")
    if np.array_equal(index, np.arange(codes.size)):
        out = values                          # already one row per unit, in order
    else:
        out = np.zeros((codes.size, values.shape[1]), values.dtype)
        out[index] = values
    variances = None
    if var is not None:
        variances = np.ones(codes.size)
        variances[index] = var
    return out, seen > 0, variances


def _measurements(rows: _Rows, codes: np.ndarray, level: str, geo: Geography, li: int,
                  product: str = "persons") -> dict[str, Measurement]:
    """A level's measurements in workload order; a unit without rows (an only child, whose
    budget its parent spent) gets weight 0 — and must be an only child."""
    out: dict[str, Measurement] = {}
    kinds = [k for k in row_kinds(product, GEOLEVELS[li], DPQUERY)]
    measured = np.zeros(codes.size, bool)
    for kind in kinds:
        values, has, var = _unit_rows(rows, kind.name, codes, level, required=False)
        if not has.any():
            continue
        measured |= has
        # one variance and one drawn flag per row, broadcast over its answers: views, not a
        # float and a flag per answer (at the block level, most of the file's numbers)
        drawn = None if has.all() else np.broadcast_to(has[:, None], values.shape)
        out[kind.name] = Measurement(kind.name, values, var[:, None], drawn=drawn)
    if li and not measured.all():
        bad = ~measured & ~geo.only_children(li)
        if bad.any():
            first = str(codes[np.flatnonzero(bad)[0]])
            raise PostprocError(f"{level} {first!r} has no measurements "
                                f"(no DPQuery rows) but is not an only child; the file is "
                                f"incomplete ({int(bad.sum())} such {level} unit(s))")
    return out


def _down_to(level: str | None) -> tuple[str, ...]:
    """The geolevels from the US down to ``level`` (a toolkit level name), at least the state
    pieces."""
    names = [LEVEL_NAMES[g] for g in GEOLEVELS]
    if level is None:
        return tuple(GEOLEVELS)
    if level not in names[1:]:
        raise PostprocError(f"down_to: {level!r} is not one of the levels below the nation "
                            f"{names[1:]}")
    return tuple(GEOLEVELS[:names.index(level) + 1])


def _select_pieces(available: Sequence[str], states: Sequence[str] | None) -> list[str]:
    if states is None:
        return list(available)
    wanted = [str(s) for s in ([states] if isinstance(states, str) else states)]
    for s in wanted:
        if not (len(s) == 2 and s.isdigit()):
            raise PostprocError(f"states: {s!r} is not a two-digit state FIPS code (e.g. '44')")
    have = {split_piece(p)[0] for p in available}
    missing = sorted(set(wanted) - have)
    if missing:
        raise PostprocError(f"states {missing} are not in the file; it has "
                            f"{sorted(have)}")
    return [p for p in available if split_piece(p)[0] in wanted]


def read_nmf(root: str | Path, *, product: str = "persons",
             states: Sequence[str] | None = None,
             state_totals: str | Path | Mapping[str, int] | None = None,
             down_to: str | None = None) -> tuple[NoisyHierarchy, Spec]:
    """A Noisy Measurement File as the noisy hierarchy and the spec its constraints compile to.

    Parameters
    ----------
    root : path
        The folder that holds ``US_Person_PL_PROD/`` (or that folder itself).
    product : {'persons', 'units'}
        The persons' measurements, or the housing units' (occupied or vacant; their total is
        exact at every geounit, so ``state_totals`` is not needed).
    states : sequence of str, optional
        Two-digit state FIPS codes to read (both pieces of a state with AIAN areas); all by
        default. With a subset the root is the states read: it is unmeasured (the US rows are
        not theirs), and a single state piece's measurements are its own root's (the piece is
        then an only child, as the file makes one).
    state_totals : mapping, path or "2020"
        Persons per state (two-digit FIPS → persons, or a CSV ``state,total``): the invariant
        state totals, which the file does not hold. Required; ``"2020"`` for the 2020 Census's
        (shipped with the toolkit), which the published 2020 file needs.
    down_to : str, optional
        The last level to read (``"state"``: the nation and the state pieces only, a few
        files; what a run state by state solves first). Default: every level.

    Returns
    -------
    noisy : NoisyHierarchy
        Levels ``nation, state, county, tract, block_group, block`` of the DAS spine (the state
        level holds the state pieces ``0SS``/``1SS``), every row's own variance, provenance
        naming the file.
    spec : Spec
        The file's constraints as ``published`` constraints (their right-hand sides are
        ``noisy.invariants[level][name]``) at every level, and ``tot`` at the nation and at
        every state piece when each is its state's only piece; when several states are read
        and one has two pieces, the states' totals are a sum over their pieces instead
        (``spec.sums``: :class:`~invariants.sums.UnitSum` ``state_total``), which TopDown
        holds as a row across the pieces in its nation → state problem.

    Raises
    ------
    PostprocError
        See the module: every fault names its file, partition and row; missing state totals;
        states not in the file.

    Examples
    --------
    >>> read_nmf("/nonexistent", state_totals={"44": 1})
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: NMF root '/nonexistent' is not a directory
    """
    if product == "units":
        return _read_units(root, states, down_to)
    if product != "persons":
        raise PostprocError(f"unknown NMF product {product!r}; products are {list(PRODUCTS)}")
    pdir, pieces, whole = _pieces_read(root, product, states)
    totals, us_con = _checked_totals(pdir, product, pieces, whole, state_totals)
    tree = _read_tree(pdir, product, pieces, whole, down_to, "hhgq_total_lb", us_con)
    read, levels, invariants = tree.read, tree.levels, tree.invariants
    root_total = sum(totals[s] for s in read)
    if not whole:
        invariants["nation"]["total" + CON_SUFFIX] = np.array([[root_total]])
    piece_state = np.array([split_piece(p)[0] for p in tree.pieces])
    alone = np.array([np.count_nonzero(piece_state == s) == 1 for s in piece_state])
    invariants["nation"]["tot"] = np.array([root_total], dtype=np.int64)
    sums: tuple[UnitSum, ...] = ()
    if alone.all():
        invariants["state"]["tot"] = np.array([totals[s] for s in piece_state], dtype=np.int64)
    elif len(read) > 1:   # a state of two pieces: its total holds over the pair (read alone,
        # the state is the root, whose total is its own); rows across children in TopDown
        groups = [[p for p in tree.pieces if split_piece(p)[0] == st] for st in read]
        sums = (UnitSum("state_total", levels[1], groups, [totals[st] for st in read]),)
    spec = _spec(levels, alone.all(), sums)
    # the constraints are the file's own: its producer imposed them on the data it measured
    provenance = {**tree.provenance(root, product), "spec_checked": spec.to_dict(),
                  "state_totals": {s: totals[s] for s in read}}
    noisy = NoisyHierarchy(PL94_2020, tree.geography, pl94_workload(), tree.measurements,
                           invariants, provenance)
    return noisy, spec


def _pieces_read(root: str | Path, product: str, states: Sequence[str] | None
                 ) -> tuple[Path, list[str], bool]:
    """The product's folder, the state pieces read and whether they are all of the file's
    (the root is then the file's US)."""
    pdir = _product_dir(root, product)
    available = sorted(_partitions(_level_dir(pdir, "State", CONSTRAINT)))
    pieces = _select_pieces(available, states)
    return pdir, pieces, pieces == available


@dataclass
class _Tree:
    """A product's levels read for some state pieces: the geography, each level's measurements
    and constraint rows (``<name>_con``; the root's the file's US rows, or the sums of the
    pieces' when a subset is read), and what was read."""

    geography: Geography
    levels: list[str]
    pieces: list[str]
    read: list[str]
    measurements: dict[str, dict[str, Measurement]]
    invariants: dict[str, dict[str, np.ndarray]]
    files: int
    bytes: int

    def provenance(self, root: str | Path, product: str) -> dict[str, Any]:
        return {"source": "nmf", "product": PRODUCTS[product], "root": str(Path(root)),
                "pieces": self.pieces, "states": self.read, "files": self.files,
                "bytes": self.bytes, "randomness": _randomness(Path(root))}


def _read_tree(pdir: Path, product: str, pieces: list[str], whole: bool,
               down_to: str | None, key: str, us_con: _Rows | None = None) -> _Tree:
    """Every level of ``pieces`` down to ``down_to`` (``key``: a constraint every geounit
    has, which gives the geography); ``us_con``: the US constraint rows when already read."""
    read = sorted({split_piece(p)[0] for p in pieces})
    geolevels = _down_to(down_to)
    levels = [LEVEL_NAMES[g] for g in geolevels]
    cons = [_read_dataset(pdir, product, g, CONSTRAINT, pieces) for g in geolevels[1:]]
    dpq = [_read_dataset(pdir, product, g, DPQUERY, pieces) for g in geolevels[1:]]
    for g, r in zip(geolevels[1:], cons):
        if not r.files:
            raise PostprocError(f"the NMF has no {g} constraint files for pieces {pieces}")
    root_code = "" if whole else "+".join(read)
    geo, codes = _geography(cons, levels, root_code, key)
    measurements: dict[str, dict[str, Measurement]] = {}
    invariants: dict[str, dict[str, np.ndarray]] = {}
    names = [k.name for k in row_kinds(product, "State", CONSTRAINT)]
    for li, (r_con, r_dpq, c) in enumerate(zip(cons, dpq, codes), start=1):
        lv = levels[li]
        invariants[lv] = {n + CON_SUFFIX: _unit_rows(r_con, n, c, lv, required=True)[0]
                          for n in names}
        measurements[lv] = _measurements(r_dpq, c, lv, geo, li, product)
        r_dpq.values.clear()                  # held by the measurements now
    if whole:
        top = np.array([root_code])
        if us_con is None:
            us_con = _read_dataset(pdir, product, "US", CONSTRAINT, None)
        invariants["nation"] = {k.name + CON_SUFFIX: _unit_rows(us_con, k.name, top, "US",
                                                                required=True)[0]
                                for k in row_kinds(product, "US", CONSTRAINT)}
        us_dpq = _read_dataset(pdir, product, "US", DPQUERY, None)
        measurements["nation"] = _measurements(us_dpq, top, "US", geo, 0, product)
    else:
        invariants["nation"] = {n: v.sum(axis=0, keepdims=True)
                                for n, v in invariants["state"].items()}
        if len(pieces) == 1:        # the root is the piece: its measurements are the root's
            measurements["nation"] = measurements.pop("state")
    for lv in levels:
        invariants.setdefault(lv, {})
    return _Tree(geo, levels, [str(p) for p in codes[0]], read, measurements, invariants,
                 sum(r.files for r in cons + dpq), sum(r.bytes for r in cons + dpq))


def _checked_totals(pdir: Path, product: str, pieces: Sequence[str], whole: bool,
                    state_totals: str | Path | Mapping[str, int] | None
                    ) -> tuple[dict[str, int], _Rows | None]:
    """The state totals, checked: they cover the states read and sum to the US total when the
    whole file is read (whose US constraint rows are returned)."""
    if state_totals is None:
        raise PostprocError("state_totals is required: the NMF does not hold the states' "
                            "invariant totals (the AIAN split puts a state in two pieces); give "
                            "a CSV with columns state,total or a mapping FIPS → persons")
    totals = read_state_totals(state_totals)
    read = sorted({split_piece(p)[0] for p in pieces})
    missing = [s for s in read if s not in totals]
    if missing:
        raise PostprocError(f"state totals do not cover the states read: {missing} missing")
    root_total = sum(totals[s] for s in read)
    if whole:        # the state totals must be the file's census's: they sum to the US total
        us_con = _read_dataset(pdir, product, "US", CONSTRAINT, None)
        us_total = int(us_con.joined("total")[1][0, 0]) if "total" in us_con.values else None
        if us_total is None:
            raise PostprocError(f"{pdir}: US.parquet/Constraint has no total_con row")
        if us_total != root_total:
            raise PostprocError(
                f"the state totals sum to {root_total:,} but the file's US total_con is "
                f"{us_total:,}; use the totals of the same census (the 2020 state totals for "
                "the 2020 file)")
    return totals, (us_con if whole else None)


#: The housing units' schema: one attribute, vacant or occupied (the DAS's H1 schema).
UNITS_SCHEMA = Schema((Attribute("h1", ("vacant", "occupied")),), name="pl94_units")


def _read_units(root: str | Path, states: Sequence[str] | None, down_to: str | None = None
                ) -> tuple[NoisyHierarchy, Spec]:
    """The housing units' product (:func:`read_nmf` with ``product="units"``): the same spine,
    ``detailed`` measured (vacant, occupied), ``total_con`` exact at every geounit — also the
    root's, the file's US row or the sum of the pieces read."""
    pdir, pieces, whole = _pieces_read(root, "units", states)
    tree = _read_tree(pdir, "units", pieces, whole, down_to, "total")
    name = "total" + CON_SUFFIX
    spec = Spec(constraints=(Constraint(name, "all", "published", "total", None, "=="),),
                imply_upward=False)
    provenance = {**tree.provenance(root, "units"), "spec_checked": spec.to_dict()}
    workload = Workload.from_expressions(UNITS_SCHEMA, {"detailed": "detailed"})
    return NoisyHierarchy(UNITS_SCHEMA, tree.geography, workload, tree.measurements,
                          tree.invariants, provenance), spec


def _randomness(root: Path) -> dict[str, Any]:
    """What the file's noise is: a synthetic NMF's manifest says (seeded: not safe for
    release); otherwise published measurements, made outside the toolkit."""
    manifest = root / "manifest.json"
    if manifest.is_file():
        try:
            meta = json.loads(manifest.read_text())
        except (OSError, ValueError):
            meta = {}
        if isinstance(meta, dict) and meta.get("synthetic") and isinstance(
                meta.get("randomness"), dict):
            return dict(meta["randomness"])
    return {"mode": "external", "safe_for_release": None,
            "label": "published noisy measurements (a Noisy Measurement File), made outside "
                     "this toolkit"}


def _spec(levels: Sequence[str], states_alone: bool, sums: Sequence[UnitSum] = ()) -> Spec:
    """The file's constraints as published constraints at every level, ``total`` at the root,
    ``tot`` at the root (and the state pieces when each is its state's only piece; otherwise
    the states' totals as ``sums`` over their pieces)."""
    constraints = [Constraint(k.query_name, "all", "published", _CONSTRAINT_QUERIES[k.name],
                              None, _SENSES[k.sign])
                   for k in row_kinds("persons", "State", CONSTRAINT)]
    constraints.append(Constraint("total" + CON_SUFFIX, (levels[0],), "published", "total",
                                  None, "=="))
    tot_levels = tuple(levels[:2]) if states_alone else (levels[0],)
    return Spec(invariants=(Invariant("tot", tot_levels),), constraints=tuple(constraints),
                imply_upward=False, sums=tuple(sums))

