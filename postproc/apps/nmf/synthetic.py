"""A synthetic 2020 P.L. 94-171 Noisy Measurement File, laid out as the published one.

:func:`write_synthetic_nmf` turns a ``postproc synth2020`` directory (persons, units, blocks)
into ``US_Person_PL_PROD/`` and ``US_Unit_PL_PROD/`` exactly as :mod:`~postproc.apps.nmf.layout`
describes the released files, with the truth beside it, so that a reader can be tested and the
path tried without the 21 GB download. Everything is synthetic and seeded: NOT SAFE FOR RELEASE.

The spine (DAS's optimized spine with the AIAN split, ``target_das_aian_areas``):

* **AIAN areas** — in a state with an AIAN piece in 2020 (:data:`~.layout.AIAN_STATES_2020`)
  and at least two tracts, a seeded eighth of its tracts (at least one) are AIAN areas, whole
  tracts, so spine tracts map one to one onto tabulation tracts. A state piece is the flag and
  the FIPS code (``044``, ``156``); the US geocode is ``""``.
* **Codes** — a spine county is a tabulation county within a piece: piece (3) + ``1`` + ``0`` +
  county FIPS (3) + a child-index digit (its rank in the piece, modulo 10) = 9 characters; a
  spine tract adds its rank within the county (4 digits, 13); a spine block group its rank
  within the tract (2 digits, 15); a spine block adds the 16-character tabulation block
  geocode (31). Spine block groups are *not* tabulation block groups: a seeded quarter of a
  tract's block groups (never its first) are merged into the one before.
* **Only children** — a spine unit that is the only child of its parent gets no DPQuery rows:
  its budget moves to the parent (DAS ``bypass_above_county`` and the spine optimizer), whose
  queries then spend the summed level budgets with the parent level's query shares (smaller
  variances), up a chain of only children. It keeps its Constraint rows.

The rows: every measured query of the production strategy (:func:`~.layout.row_kinds`;
``hierarchy.presets.pl94``), answered from the truth with the toolkit's queries and, unless
``noise=False``, discrete Gaussian noise with the production budget (``pl94_budget``; the
fast seeded sampler of :class:`hierarchy.mechanisms.DiscreteGaussian`); ``variance`` is that
noise's exact variance (also with ``noise=False``). Constraints: the block rows of the toolkit's
PL 94 spec (``invariants.catalogue``: ``hhgq_total_lb`` ≥ the units of each type;
``hhgq_total_ub`` 0 where a block has no unit of a type and, where the spec has no bound,
production's 99,999 persons per unit), ``nurse_nva_0`` = 0, summed upward to every level as
DAS sums child constraints. At the state pieces DAS then merges its own state-level bounds,
keeping the strictest; this writer keeps the summed rows only (valid, looser bounds). The US has
``total_con`` (the nation's persons). Constraint rows carry ``variance`` 0.

Units (``US_Unit_PL_PROD``): axis ``h1``, ``detailed_dpq`` = (vacant, occupied) housing units
(occupied: the households, units of hhgq 0) and ``total_con`` (housing units) at every level.
The production H1 budget is not public; this writer spends the persons' ρ with the same level
shares on that one query.

Mess, as real Spark output has it: ``value`` and ``query_shape`` lists of int32 in some
partitions and int64 in others (int64 wherever a value needs it), several ``part-*`` files in
every Block partition of two blocks or more (and one per 4,096 units), ``_SUCCESS`` in every
sub-dataset directory. Rows go unit by unit, each unit's kinds in :func:`~.layout.row_kinds`'s
order. A geolevel whose units are all only children has its directory and ``_SUCCESS`` but no
partition. Every block of the microdata is a unit, empty ones included (whether the published
files hold the blocks without housing units or facilities is not known). No ``plb`` column.

Beside the NMF: ``truth/`` (persons, units and blocks as ``synth2020`` writes them, their
geography columns the spine geocodes, so the toolkit's loaders tabulate the truth on the
reader's geography), ``state_totals.csv`` (``state,total``: the NMF does not hold them) and
``manifest.json``.
"""

from __future__ import annotations

import csv
import functools
import hashlib
import itertools
import json
import math
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import scipy.sparse as sp

from hierarchy.io.storage import MARKER, atomic_directory, read_json, write_json
from hierarchy.mechanisms import DiscreteGaussian
from hierarchy.presets.pl94 import LEVELS, PL94_2020, pl94_budget, pl94_workload
from hierarchy.randomness import Randomness
from hierarchy.synth import census2020
from hierarchy.tabulation import count_cells_sparse
from postproc.apps.nmf import layout
from postproc.errors import PostprocError

__all__ = ["write_synthetic_nmf", "MADE_BY"]

#: The ``made_by`` of the manifest, of the ownership marker and of every file's metadata.
MADE_BY = "postproc synth2020 --nmf"
_LABEL = ("SIMULATION: synthetic data with seeded noise - NOT SAFE FOR RELEASE", "SIMULATION: "
          "synthetic data, exact answers without noise - NOT SAFE FOR RELEASE")
_CAP = 99_999          # production's most persons per unit (querybase_constraints hhgq_cap)
_AIAN_SHARE = 1 / 8    # share of an AIAN state's tracts made AIAN areas
_MERGE_SHARE = 1 / 4   # share of tabulation block groups merged into the one before
_CHUNK = 4096          # most units per part file
_INT32 = np.iinfo(np.int32)


def write_synthetic_nmf(data: str | Path, out: str | Path, *, seed: int, noise: bool = True,
                        overwrite: bool = False, progress: bool = False) -> dict[str, Any]:
    """Write a synthetic NMF of a ``postproc synth2020`` directory, and its truth.

    Streamed state by state (memory holds one state's microdata and 4,096 units' answers);
    written under a temporary name and renamed into place when complete.

    Parameters
    ----------
    data : path
        A ``synth2020`` output directory (``persons.parquet``, ``units.parquet``,
        ``blocks.parquet``, ``manifest.json``) of the 50 states and DC or some of them.
    out : path
        The NMF root to write (it holds ``US_Person_PL_PROD/`` and ``US_Unit_PL_PROD/``).
    seed : int
        Non-negative seed of the AIAN areas, the spine block groups and the noise.
    noise : bool, default True
        Add discrete Gaussian noise; ``False`` writes the exact answers (for tests) with the
        variances the noise would have.
    overwrite : bool, default False
        Replace an NMF this function wrote earlier at ``out`` (nothing else is ever replaced).
    progress : bool, default False
        A progress bar on stderr (tqdm).

    Returns
    -------
    dict
        The manifest (also ``out/manifest.json``): seed, noise, label, units and rows per
        product and geolevel, pieces, files, seconds.

    Raises
    ------
    PostprocError
        If ``data`` is not a ``synth2020`` directory (or holds Puerto Rico, whose products are
        not written), ``seed`` is not a non-negative integer, or ``out`` is not empty and not
        an earlier output of this function (or holds ``data``).

    Examples
    --------
    >>> import tempfile, pyarrow.parquet as pq
    >>> from hierarchy.synth.census2020 import synthesize_2020
    >>> d = Path(tempfile.mkdtemp())
    >>> _ = synthesize_2020(12_000, seed=1, states=["56"], out=d / "data")
    >>> manifest = write_synthetic_nmf(d / "data", d / "nmf", seed=2)
    >>> manifest["pieces"], manifest["label"]
    (['056', '156'], 'SIMULATION: synthetic data with seeded noise - NOT SAFE FOR RELEASE')
    >>> row = pq.read_table(d / "nmf/US_Person_PL_PROD/US.parquet/DPQuery").slice(0, 1)
    >>> row.column("geocode")[0].as_py(), row.column("query_name")[0].as_py()
    ('', 'cenrace_dpq')
    >>> write_synthetic_nmf(d / "data", d / "data", seed=2)
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: the NMF directory .../data is the microdata directory or holds
    it; choose another directory for the NMF
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise PostprocError(f"seed must be a non-negative integer, not {seed!r}")
    data, out = Path(data), Path(out)
    source, files = _check_input(data)
    _check_output(out, data, overwrite)
    started = time.perf_counter()
    with atomic_directory(out, overwrite=overwrite, made_by=MADE_BY) as tmp:
        report = _write(files, tmp, int(seed), noise, progress)
        manifest = {
            "made_by": MADE_BY, "synthetic": True, "label": _LABEL[0 if noise else 1],
            "randomness": {**Randomness.simulation(int(seed)).provenance(),
                           **({} if noise else {"label": _LABEL[1]})}, "seed": int(seed),
            "noise": bool(noise), "source": {"data": str(data), **(source.get("arguments") or {})},
            "products": layout.PRODUCTS, "geocode_widths": layout.GEOCODE_WIDTHS, **report,
            "files": {"truth": {k: str(out / "truth" / f"{k}.parquet")
                                for k in ("persons", "units", "blocks")},
                      "state_totals": str(out / "state_totals.csv")},
            "seconds": time.perf_counter() - started}
        write_json(manifest, tmp / "manifest.json")
    return manifest


# ---------------------------------------------------------------------------------------------
# checks
# ---------------------------------------------------------------------------------------------
def _check_input(data: Path) -> tuple[dict[str, Any], dict[str, Path]]:
    fix = f"write one with: postproc synth2020 --persons N --out {data}"
    if not (data / "manifest.json").is_file():
        raise PostprocError(f"{data} is not a postproc synth2020 directory (no manifest.json); "
                            f"{fix}")
    source = read_json(data / "manifest.json")
    if not isinstance(source, dict) or source.get("made_by") != census2020.MADE_BY:
        raise PostprocError(f"{data / 'manifest.json'} was not written by "
                            f"{census2020.MADE_BY}; {fix}")
    files = {k: data / f"{k}.parquet" for k in ("persons", "units", "blocks")}
    missing = [str(p) for p in files.values() if not p.is_file()]
    if missing:
        raise PostprocError(f"{data}: missing {missing}; {fix}")
    return source, files


def _check_output(out: Path, data: Path, overwrite: bool) -> None:
    target, source = out.resolve(), data.resolve()
    if target == source or target in source.parents:
        raise PostprocError(f"the NMF directory {out} is the microdata directory or holds it; "
                            "choose another directory for the NMF")
    if out.is_dir() and any(out.iterdir()) and overwrite:
        marker = out / MARKER
        if (read_json(marker).get("made_by") if marker.is_file() else None) != MADE_BY:
            raise PostprocError(f"{out} exists and was not written by {MADE_BY}; it is never "
                                "replaced - choose another directory, or move it away")


# ---------------------------------------------------------------------------------------------
# input, one state at a time
# ---------------------------------------------------------------------------------------------
class _Input:
    """The three ``synth2020`` files, read state by state through their row groups."""

    def __init__(self, files: dict[str, Path]):
        self.files = {k: pq.ParquetFile(p) for k, p in files.items()}
        self.groups = {k: self._groups(f) for k, f in self.files.items()}
        self.states = sorted(self.groups["blocks"])

    @staticmethod
    def _groups(pf: pq.ParquetFile) -> dict[str, list[tuple[int, bool]]]:
        """State → its row groups, each with whether it holds other states too."""
        column = pf.schema_arrow.get_field_index("state")
        out: dict[str, list[tuple[int, bool]]] = {}
        for rg in range(pf.num_row_groups):
            stats = pf.metadata.row_group(rg).column(column).statistics
            if stats is not None and stats.has_min_max and stats.min == stats.max:
                states = [stats.min]
            else:
                col = pf.read_row_group(rg, columns=["state"]).column(0)
                states = pc.unique(col.cast(pa.string())).to_pylist()
            for s in states:
                s = s.decode() if isinstance(s, bytes) else str(s)
                out.setdefault(s, []).append((rg, len(states) > 1))
        return out

    def read(self, kind: str, state: str, columns: list[str]) -> pa.Table:
        groups = self.groups[kind].get(state, [])
        table = self.files[kind].read_row_groups([g for g, _ in groups], columns=columns)
        if any(mixed for _, mixed in groups):
            table = table.filter(pc.equal(table.column("state").cast(pa.string()), state))
        return table


def _lookup(column: pa.ChunkedArray, reference: pa.Array, where: str) -> np.ndarray:
    """Each value's position in ``reference`` (a dictionary column is looked up through its
    dictionary); an unknown value is an error naming ``where``."""
    parts = []
    for chunk in column.chunks:
        if pa.types.is_dictionary(chunk.type):
            pos = pc.index_in(chunk.dictionary, value_set=reference).take(chunk.indices)
        else:
            pos = pc.index_in(chunk, value_set=reference)
        if pos.null_count:
            raise PostprocError(f"{where}: block {chunk.filter(pc.is_null(pos))[0].as_py()!r} "
                                "is not in blocks.parquet; the synth2020 files do not belong "
                                "together - write them again")
        parts.append(pos.to_numpy(zero_copy_only=False).astype(np.int64))
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


@dataclass(frozen=True)
class _State:
    """One state's microdata: blocks (16-character codes, housing units), persons and units
    as block positions and attribute codes."""

    fips: str
    blocks: np.ndarray
    housing: np.ndarray
    person_block: np.ndarray
    person_cells: tuple[np.ndarray, ...]
    unit_block: np.ndarray
    unit_hhgq: np.ndarray


def _read_state(source: _Input, fips: str) -> _State:
    blocks = source.read("blocks", fips, ["state", "block", "housing_units"])
    codes = blocks.column("block").cast(pa.string()).combine_chunks()
    persons = source.read("persons", fips, ["state", "block", *layout.AXES["persons"]])
    units = source.read("units", fips, ["state", "block", "hhgq"])
    return _State(
        fips, np.asarray(codes.to_pylist(), dtype="U16"),
        blocks.column("housing_units").to_numpy().astype(np.int64),
        _lookup(persons.column("block"), codes, f"persons.parquet, state {fips}"),
        tuple(persons.column(a).to_numpy() for a in layout.AXES["persons"]),
        _lookup(units.column("block"), codes, f"units.parquet, state {fips}"),
        units.column("hhgq").to_numpy().astype(np.int64))


# ---------------------------------------------------------------------------------------------
# the spine
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Piece:
    """A state piece's spine: unit codes per level (state piece, county, tract, block group,
    block; each sorted) and each level's parent positions in the level above."""

    code: str
    blocks: np.ndarray                  # the state's block positions, in spine order
    codes: tuple[np.ndarray, ...]
    parents: tuple[np.ndarray, ...]     # county → 0, tract → county, BG → tract, block → BG


def _ranks(group: np.ndarray) -> np.ndarray:
    """Each element's rank within its run of equal (sorted) group ids."""
    n = group.size
    starts = np.flatnonzero(np.diff(group, prepend=-1))
    return np.arange(n) - np.repeat(starts, np.diff(starts, append=n))


def _digits(values: np.ndarray, width: int, what: str, piece: str) -> np.ndarray:
    if values.size and values.max() >= 10 ** width:
        raise PostprocError(f"state piece {piece}: {values.max() + 1} {what} do not fit the "
                            f"{width} digits of the 2020 spine; use fewer persons per state")
    return np.char.zfill(values.astype(str), width)


def _spine(state: _State, seed: int) -> list[_Piece]:
    """The AIAN split and the spine codes of one state's blocks."""
    rng = np.random.default_rng([seed, 38, int(state.fips)])
    tracts, tract_of_block = np.unique(state.blocks.astype("U11"), return_inverse=True)
    aian = np.zeros(tracts.size, bool)
    if state.fips in layout.AIAN_STATES_2020 and tracts.size >= 2:
        k = min(tracts.size - 1, max(1, int(tracts.size * _AIAN_SHARE)))
        aian[rng.choice(tracts.size, k, replace=False)] = True
    bgs, bg_of_block = np.unique(state.blocks.astype("U12"), return_inverse=True)
    tract_of_bg = np.searchsorted(tracts, bgs.astype("U11"))
    first = np.diff(tract_of_bg, prepend=-1) != 0
    spine_bg = np.cumsum(first | (rng.random(bgs.size) >= _MERGE_SHARE)) - 1
    pieces = []
    for flag in (0, 1):
        in_piece = np.flatnonzero(aian == bool(flag))
        if in_piece.size == 0:
            continue
        code = layout.state_piece(state.fips, bool(flag))
        county5, county_of_tract = np.unique(tracts[in_piece].astype("U5"),
                                             return_inverse=True)
        fips3 = np.asarray([c[2:] for c in county5.tolist()], dtype="U3")
        counties = np.char.add(np.char.add(code + "10", fips3),
                               (np.arange(county5.size) % 10).astype(str))
        tract_codes = np.char.add(counties[county_of_tract], _digits(
            _ranks(county_of_tract), 4, "tracts in a county", code))
        local_tract = np.full(tracts.size, -1)
        local_tract[in_piece] = np.arange(in_piece.size)
        blocks = np.flatnonzero(aian[tract_of_block] == bool(flag))
        bg_ids, bg_of = np.unique(spine_bg[bg_of_block[blocks]], return_inverse=True)
        bg_tract = local_tract[tract_of_bg[np.searchsorted(spine_bg, bg_ids)]]
        bg_codes = np.char.add(tract_codes[bg_tract], _digits(
            _ranks(bg_tract), 2, "block groups in a tract", code))
        block_codes = np.char.add(bg_codes[bg_of], state.blocks[blocks])
        order = np.argsort(block_codes, kind="stable")
        pieces.append(_Piece(code, blocks[order],
                             (np.array([code]), counties, tract_codes, bg_codes,
                              block_codes[order]),
                             (np.zeros(counties.size, np.int64), county_of_tract, bg_tract,
                              bg_of[order])))
    return pieces


# ---------------------------------------------------------------------------------------------
# a piece's units, level by level
# ---------------------------------------------------------------------------------------------
@dataclass
class _Level:
    """One geolevel's units of a piece (or the US): their truth and their budget."""

    codes: np.ndarray
    hist: sp.csr_matrix        # persons' histograms, units × 2,016 cells
    gqhh: np.ndarray           # occupied households and facilities by type, units × 8
    lower: np.ndarray          # hhgq_total_lb_con, units × 8
    upper: np.ndarray          # hhgq_total_ub_con, units × 8
    housing: np.ndarray        # housing units (occupied or vacant)
    share: np.ndarray          # budget share of the total, its only children's included
    measured: np.ndarray       # False: an only child (no DPQuery rows)


@functools.lru_cache(maxsize=1)
def _spec() -> Any:
    from invariants.spec import Spec

    return Spec.pl94_2020()


def _block_bounds(gqhh: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The hhgq bounds of blocks as the toolkit's PL 94 spec compiles them, production's cap
    of 99,999 persons per unit where the spec has no upper bound (the block total is free)."""
    from invariants.catalogue import CONSTRAINTS

    spec, stats = _spec(), {"gqhh": gqhh}
    lower = CONSTRAINTS["hhgq_total_lb"].rows(PL94_2020, spec, stats).lower
    upper = CONSTRAINTS["hhgq_total_ub"].rows(PL94_2020, spec, stats).upper
    upper = np.where(np.isinf(upper), _CAP * gqhh, upper)
    return lower.astype(np.int64), upper.astype(np.int64)


def _levels(piece: _Piece, state: _State, shares: tuple[float, ...], only_piece: bool
            ) -> list[_Level]:
    """The piece's levels, state piece first: block truth summed upward, and each unit's
    budget share (an only child's moved to its parent, up the chain)."""
    n = piece.blocks.size
    local = np.full(state.blocks.size, -1)
    local[piece.blocks] = np.arange(n)
    person, unit = local[state.person_block], local[state.unit_block]
    mine = person >= 0
    hist = count_cells_sparse(person[mine], [c[mine] for c in state.person_cells],
                              PL94_2020.shape, n)
    gqhh = np.bincount((unit * 8 + state.unit_hhgq)[unit >= 0], minlength=8 * n).reshape(n, 8)
    if (state.housing[piece.blocks] < gqhh[:, 0]).any():
        raise PostprocError(f"blocks.parquet, state {state.fips}: a block has fewer housing "
                            "units than households; write the synth2020 files again")
    levels = [_Level(piece.codes[4], hist, gqhh, *_block_bounds(gqhh),
                     state.housing[piece.blocks], np.full(n, shares[5]), np.ones(n, bool))]
    for k in (3, 2, 1, 0):
        child, parent = levels[0], piece.parents[k]
        m = piece.codes[k].size
        total = sp.csr_matrix((np.ones(parent.size, np.int64), (parent, np.arange(parent.size))),
                              shape=(m, parent.size))
        only = np.bincount(parent, minlength=m)[parent] == 1
        child.measured &= ~only
        levels.insert(0, _Level(piece.codes[k], (total @ child.hist).tocsr(),
                                total @ child.gqhh, total @ child.lower, total @ child.upper,
                                total @ child.housing,
                                shares[k + 1] + total @ np.where(only, child.share, 0.0),
                                np.ones(m, bool)))
    if only_piece:
        levels[0].measured[:] = False
    return levels


def _us(tops: list[_Level], shares: tuple[float, ...], only_piece: bool) -> _Level:
    """The nation: the state pieces summed."""
    hist = sp.csr_matrix(sum(t.hist.sum(axis=0) for t in tops))
    share = shares[0] + (tops[0].share[0] if only_piece else 0.0)

    def total(name: str) -> np.ndarray:
        return sum(getattr(t, name) for t in tops)

    return _Level(np.array([""]), hist, total("gqhh"), total("lower"), total("upper"),
                  total("housing"), np.array([share]), np.ones(1, bool))


# ---------------------------------------------------------------------------------------------
# rows
# ---------------------------------------------------------------------------------------------
class _Measurer:
    """Exact answers, noise and variances of each product's queries."""

    def __init__(self, seed: int, noise: bool):
        from hierarchy.budget import Budget
        from hierarchy.queries import Workload
        from hierarchy.schema import Attribute, Schema

        self.noise, self.root = noise, Randomness.simulation(seed)
        self.mech = DiscreteGaussian(exact=False)
        persons = pl94_budget()
        units = Budget("zcdp", persons.total,
                       {lv: persons.level_budget(lv) / persons.total for lv in LEVELS},
                       {lv: {"detailed": 1} for lv in LEVELS}, "add_remove")
        h1 = Schema((Attribute("h1", ("vacant", "occupied")),), name="h1_2020")
        self.queries = {"persons": pl94_workload(),
                        "units": Workload.from_expressions(h1, {"detailed": "detailed"})}
        self.shares = tuple(float(persons.level_budget(lv) / persons.total) for lv in LEVELS)
        self.params = {(product, geolevel, kind.name): budget.noise_parameter(
                           layout.LEVEL_NAMES[geolevel], self.queries[product][kind.name],
                           self.mech)
                       for product, budget in (("persons", persons), ("units", units))
                       for geolevel in layout.GEOLEVELS
                       for kind in layout.row_kinds(product, geolevel, layout.DPQUERY)}

    def exact(self, product: str, kinds: tuple[layout.RowKind, ...], level: _Level,
              rows: np.ndarray) -> list[np.ndarray]:
        """Each kind's exact answers for the units ``rows`` of ``level``."""
        if product == "units":
            occupied = level.gqhh[rows, 0]
            return [np.column_stack([level.housing[rows] - occupied, occupied])]
        hist = level.hist[rows]
        return [self.queries[product][kind.name].answer(hist).astype(np.int64)
                for kind in kinds]

    def measure(self, product: str, geolevel: str, kind: layout.RowKind, exact: np.ndarray,
                multiplier: np.ndarray, key: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        """Noisy answers and variances; a unit with ``multiplier`` m spends m times the level's
        budget (σ² divided by m)."""
        base = self.params[product, geolevel, kind.name]
        values, variance = exact.copy(), np.empty(exact.shape[0])
        for g, m in enumerate(np.unique(multiplier)):
            rows = multiplier == m
            variance[rows] = _variance(base / m)
            if self.noise:
                values[rows] += self.mech.sample(base / m, (int(rows.sum()), exact.shape[1]),
                                                 self.root.child(*key, g))
        return values, variance


@functools.lru_cache(maxsize=4096)
def _variance(sigma2: float) -> float:
    """The variance of the discrete Gaussian with parameter σ² (as the sampler rounds it)."""
    return DiscreteGaussian(exact=False).variance(sigma2)


def _strings(dictionary: list[str], indices: np.ndarray) -> pa.Array:
    return pa.DictionaryArray.from_arrays(pa.array(indices.astype(np.int32)),
                                          pa.array(dictionary, pa.string())).dictionary_decode()


def _table(product: str, codes: np.ndarray, kinds: tuple[layout.RowKind, ...],
           values: list[np.ndarray], variance: np.ndarray, wide: bool) -> pa.Table:
    """Rows unit by unit, each unit's kinds in order; ``value`` and ``query_shape`` int64 if
    ``wide`` or a value needs it, else int32."""
    n, k = codes.size, len(kinds)
    flat = np.hstack(values).ravel()
    wide = wide or (flat.size > 0 and (flat.min() < _INT32.min or flat.max() > _INT32.max))
    int_type = pa.int64() if wide else pa.int32()
    sizes = np.tile([kind.size for kind in kinds], n)
    shapes = np.tile(np.concatenate([kind.shape for kind in kinds]), n)
    ranks = np.tile([len(kind.shape) for kind in kinds], n)
    unit, kind_of_row = np.repeat(np.arange(n), k), np.tile(np.arange(k), n)
    columns = {"geocode": _strings(codes.tolist(), unit),
               "query_name": _strings([q.query_name for q in kinds], kind_of_row)}
    for a, axis in enumerate(layout.AXES[product]):
        columns[axis] = _strings([q.axes[a] for q in kinds], kind_of_row)
    for name, items, lengths in (("query_shape", shapes, ranks), ("value", flat, sizes)):
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
        columns[name] = pa.ListArray.from_arrays(pa.array(offsets),
                                                 pa.array(items.astype(np.int64), int_type))
    columns["variance"] = pa.array(variance.ravel(), pa.float64())
    if kinds[0].sign is not None:
        columns["sign"] = _strings([q.sign for q in kinds], kind_of_row)
    meta = {b"dapp": json.dumps({"made_by": MADE_BY, "synthetic": True,
                                 "label": "NOT SAFE FOR RELEASE"}).encode()}
    return pa.table(columns).replace_schema_metadata(meta)


class _Sink:
    """Part files of every sub-dataset (named as Spark names them) and their counts."""

    def __init__(self, root: Path, seed: int):
        self.root, self.seed = root, seed
        self.parts: dict[tuple[str, str, str], int] = {}
        self.rows: dict[tuple[str, str, str], int] = {}

    def write(self, product: str, geolevel: str, dataset: str, piece: str | None,
              table: pa.Table) -> None:
        directory = layout.dataset_path(self.root, product, geolevel, dataset, piece)
        directory.mkdir(parents=True, exist_ok=True)
        key = (product, geolevel, dataset)
        part = self.parts.get(key, 0)
        job = uuid.UUID(bytes=hashlib.blake2b(f"{self.seed}/{key}".encode(),
                                              digest_size=16).digest())
        pq.write_table(table, directory / f"part-{part:05d}-{job}-c000.snappy.parquet",
                       compression="snappy")
        self.parts[key] = part + 1
        self.rows[key] = self.rows.get(key, 0) + table.num_rows

    def finish(self) -> None:
        for names in itertools.product(layout.PRODUCTS, layout.GEOLEVELS, layout.DATASETS):
            directory = layout.dataset_path(self.root, *names)
            directory.mkdir(parents=True, exist_ok=True)
            (directory / layout.SUCCESS).touch()


def _emit(sink: _Sink, measurer: _Measurer, geolevel: str, piece: str | None, level: _Level,
          key: tuple[int, ...]) -> None:
    """A level's DPQuery and Constraint rows of both products, in part files of at most
    :data:`_CHUNK` units (a Block partition of two units or more in two files at least)."""
    n, depth = level.codes.size, layout.GEOLEVELS.index(geolevel)
    size = min(_CHUNK, math.ceil(n / 2)) if geolevel == "Block" and n >= 2 else _CHUNK
    multiplier = level.share / measurer.shares[depth]
    for c, start in enumerate(range(0, n, size)):
        block = np.arange(start, min(n, start + size))
        rows = block[level.measured[block]]
        for p, product in enumerate(layout.PRODUCTS):
            kinds = layout.row_kinds(product, geolevel, layout.DPQUERY)
            if rows.size:
                exact = measurer.exact(product, kinds, level, rows)
                answers, variances = zip(*(measurer.measure(
                    product, geolevel, kind, exact[q], multiplier[rows], (*key, p, depth, c, q))
                    for q, kind in enumerate(kinds)))
                sink.write(product, geolevel, layout.DPQUERY, piece, _table(
                    product, level.codes[rows], kinds, list(answers),
                    np.column_stack(variances), _wide(product, geolevel, layout.DPQUERY, piece)))
            kinds = layout.row_kinds(product, geolevel, layout.CONSTRAINT)
            sink.write(product, geolevel, layout.CONSTRAINT, piece, _table(
                product, level.codes[block], kinds, _bounds(product, kinds, level, block),
                np.zeros((block.size, len(kinds))),
                _wide(product, geolevel, layout.CONSTRAINT, piece)))


def _wide(product: str, geolevel: str, dataset: str, piece: str | None) -> bool:
    """Whether a partition's integer lists are int64 (else int32 where the values fit): about
    half of the partitions, chosen by a hash of their names."""
    name = f"{product}/{geolevel}/{dataset}/{piece}".encode()
    return hashlib.blake2b(name, digest_size=1).digest()[0] % 2 == 1


def _bounds(product: str, kinds: tuple[layout.RowKind, ...], level: _Level,
            block: np.ndarray) -> list[np.ndarray]:
    if product == "units":
        return [level.housing[block, None]]
    out = {"hhgq_total_lb": level.lower[block], "hhgq_total_ub": level.upper[block],
           "nurse_nva_0": np.zeros((block.size, 1), np.int64),
           "total": np.asarray(level.hist[block].sum(axis=1), np.int64)}
    return [out[kind.name] for kind in kinds]


# ---------------------------------------------------------------------------------------------
# the truth, and the whole run
# ---------------------------------------------------------------------------------------------
class _Truth:
    """``truth/{persons,units,blocks}.parquet``: the microdata on the spine geography, one row
    group per state piece, with the schemas ``synth2020`` writes."""

    def __init__(self, root: Path):
        (root / "truth").mkdir()
        meta = {b"dapp": json.dumps({"made_by": MADE_BY, "synthetic": True,
                                     "geography": "DAS spine geocodes (AIAN split)"}).encode()}
        self.writers = {k: pq.ParquetWriter(root / "truth" / f"{k}.parquet",
                                            s.with_metadata(meta), compression="zstd")
                        for k, s in (("persons", census2020.PERSONS_SCHEMA),
                                     ("units", census2020.UNITS_SCHEMA),
                                     ("blocks", census2020.BLOCKS_SCHEMA))}

    def write(self, piece: _Piece, state: _State) -> int:
        """Write the piece's rows; return its persons."""
        parents = piece.parents
        bg = parents[3]
        tract = parents[2][bg]
        chain = (np.zeros(bg.size, np.int64), parents[1][tract], tract, bg, np.arange(bg.size))
        dictionaries = [pa.array(codes.tolist(), pa.string()) for codes in piece.codes]
        local = np.full(state.blocks.size, -1)
        local[piece.blocks] = np.arange(bg.size)
        tables = {}
        for kind, where, attributes in (
                ("persons", local[state.person_block], state.person_cells),
                ("units", local[state.unit_block], (state.unit_hhgq,)),
                ("blocks", np.arange(bg.size), (state.housing[piece.blocks],))):
            mine = where >= 0
            schema = self.writers[kind].schema
            arrays = [pa.DictionaryArray.from_arrays(
                pa.array(level[where[mine]].astype(np.int32)), dictionary)
                for level, dictionary in zip(chain, dictionaries)]
            arrays += [pa.array(a[mine], schema.field(5 + i).type, safe=True)
                       for i, a in enumerate(attributes)]
            tables[kind] = pa.Table.from_arrays(arrays, schema=schema)
            self.writers[kind].write_table(tables[kind])
        return tables["persons"].num_rows

    def close(self) -> None:
        for writer in self.writers.values():
            writer.close()


def _write(files: dict[str, Path], root: Path, seed: int, noise: bool, progress: bool
           ) -> dict[str, Any]:
    """Write the products, the truth and the state totals into ``root``; return the counts."""
    source = _Input(files)
    if "72" in source.states:
        raise PostprocError(f"{files['blocks']} holds Puerto Rico, whose NMF is a product of its "
                            "own (PR_Person_PL_PROD, no US level) that this writer does not "
                            "write; write the synth2020 data without --puerto-rico")
    sink, measurer, truth = _Sink(root, seed), _Measurer(seed, noise), _Truth(root)
    bar = None
    if progress:
        from tqdm import tqdm
        bar = tqdm(total=len(source.states), unit="state", desc="synthetic NMF")
    tops, totals, pieces, units = [], {}, [], {g: [0, 0] for g in layout.GEOLEVELS}
    try:
        for fips in source.states:
            state = _read_state(source, fips)
            spine = _spine(state, seed)
            only_piece = len(source.states) == 1 and len(spine) == 1
            totals[fips] = 0
            for piece in spine:
                levels = _levels(piece, state, measurer.shares, only_piece)
                for geolevel, level in zip(layout.GEOLEVELS[1:], levels):
                    _emit(sink, measurer, geolevel, piece.code, level,
                          (int(piece.code[0]), int(fips)))
                    units[geolevel][0] += level.codes.size
                    units[geolevel][1] += int(level.measured.sum())
                totals[fips] += truth.write(piece, state)
                tops.append(levels[0])
                pieces.append(piece.code)
            if bar is not None:
                bar.update()
        us = _us(tops, measurer.shares, len(pieces) == 1)
        _emit(sink, measurer, "US", None, us, (2, 0))
        units["US"] = [1, 1]
    finally:
        truth.close()
        if bar is not None:
            bar.close()
    sink.finish()
    with open(root / "state_totals.csv", "w", newline="", encoding="utf-8") as f:
        csv.writer(f, lineterminator="\n").writerows([("state", "total"), *totals.items()])
    rows = {product: {g: {"units": units[g][0], "measured": units[g][1],
                          **{d: sink.rows.get((product, g, d), 0) for d in layout.DATASETS},
                          "files": sum(sink.parts.get((product, g, d), 0)
                                       for d in layout.DATASETS)}
                      for g in layout.GEOLEVELS} for product in layout.PRODUCTS}
    return {"pieces": sorted(pieces), "persons": int(sum(totals.values())), "rows": rows}
