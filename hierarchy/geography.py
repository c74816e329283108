"""The geographic tree: named levels, unit geocodes, parent and child index arrays.

Units of every level are stored so that the children of each parent are **contiguous** and in
parent order: the children of unit ``p`` of level ``l`` are units ``offsets[p]:offsets[p + 1]`` of
level ``l + 1``. Aggregating a level to its parent level is then one ``np.add.reduceat``, and a
post-processor handles one parent's children as a slice.

Examples
--------
>>> geo, (leaf,) = Geography.from_columns(
...     ["nation", "state", "county"],
...     [[["01", "01", "02"], ["01001", "01003", "02001"]]])
>>> geo.n_units("county"), geo.geocodes[2].tolist(), leaf.tolist()
(3, ['01001', '01003', '02001'], [0, 1, 2])
>>> geo.child_offsets("state").tolist()
[0, 2, 3]
>>> geo.aggregate(np.array([5, 1, 2]), "county", "state").tolist()
[6, 2]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import scipy.sparse as sp

from hierarchy.errors import ConfidentialDataError, HierarchyError

__all__ = ["Geography", "encode_column", "one_dictionary"]

ROOT_GEOCODE = "0"


def encode_column(column: Any, *, name: str = "geocode") -> tuple[np.ndarray, np.ndarray]:
    """Dictionary-encode a column of geocodes: (int index per record, array of codes as str).

    Accepts pyarrow (dictionary or plain) arrays and chunked arrays, pandas Series or
    Categorical, numpy arrays and lists. Dictionary encodings are used as they are (no sort of
    the records), which is what makes building the geography of 100M+ records fast.
    Missing values raise with the offending rows.

    Parameters
    ----------
    column : array-like
        Geocodes, one per record (pyarrow, pandas, numpy or a list).
    name : str
        Name of the column, used in error messages.

    Returns
    -------
    codes : int array
        For each record, the position of its geocode in ``dictionary``.
    dictionary : object array of str
        The distinct geocodes (sorted, unless the column was already dictionary-encoded).

    Raises
    ------
    HierarchyError
        If a geocode is missing (None, NaN, null or the empty string).

    Examples
    --------
    >>> codes, dictionary = encode_column(["06", "01", "06"])
    >>> codes.tolist(), dictionary.tolist()
    ([1, 0, 1], ['01', '06'])

    A pyarrow dictionary column keeps its own order:

    >>> codes, dictionary = encode_column(pa.array(["06", "01", "06"]).dictionary_encode())
    >>> codes.tolist(), dictionary.tolist()
    ([0, 1, 0], ['06', '01'])
    >>> encode_column(["06", None, "01"], name="state")
    Traceback (most recent call last):
    ...
    hierarchy.errors.ConfidentialDataError: column 'state' has 1 missing geocode(s),
    at rows [1]; ...
    """
    if isinstance(column, pd.Series):
        if isinstance(column.dtype, pd.CategoricalDtype):
            column = column.array
        else:
            column = column.to_numpy()
    if isinstance(column, pd.Categorical):
        codes = np.asarray(column.codes, dtype=np.int64)
        dictionary = np.asarray(column.categories.astype(str), dtype=object)
        _check_missing(codes < 0, name)
        _check_empty(codes, dictionary, name)
        return codes, dictionary
    if isinstance(column, (pa.Array, pa.ChunkedArray)):
        chunked = column if isinstance(column, pa.ChunkedArray) else pa.chunked_array([column])
        if chunked.null_count:
            nulls = np.asarray(chunked.is_null().to_numpy(zero_copy_only=False))
            _check_missing(nulls, name)
        if not pa.types.is_dictionary(chunked.type):
            chunked = chunked.dictionary_encode()
        elif sum(len(c.dictionary) for c in chunked.chunks) > len(chunked):
            # a filtered parquet read keeps every row group's whole dictionary in each of its
            # many chunks: encoding the values present is 10 times faster than unifying those
            chunked = chunked.cast(chunked.type.value_type).dictionary_encode()
        chunked = one_dictionary(chunked)
        if chunked.num_chunks == 0:
            return np.zeros(0, np.int64), np.zeros(0, dtype=object)
        dictionary = np.asarray(chunked.chunk(0).dictionary.cast(pa.string())
                                .to_numpy(zero_copy_only=False), dtype=object)
        parts = [c.indices.to_numpy(zero_copy_only=False) for c in chunked.chunks]
        codes = np.concatenate(parts) if len(parts) > 1 else parts[0]   # int32 indices as is
        _check_empty(codes, dictionary, name)
        return codes, dictionary
    arr = np.asarray(column)
    if arr.dtype.kind in "Of":
        # NaN in a float column (numeric geocodes read with gaps) is missing, not a unit "nan"
        missing = pd.isna(arr)
        _check_missing(np.asarray(missing), name)
    dictionary, codes = np.unique(arr.astype(str), return_inverse=True)
    codes = codes.astype(np.int64).reshape(-1)
    dictionary = dictionary.astype(object)
    _check_empty(codes, dictionary, name)
    return codes, dictionary


def one_dictionary(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """A dictionary column whose chunks all have one dictionary: ``column`` itself when they
    have already (as a chunked array's ``dictionary_encode`` makes them, or a parquet file
    written from one dictionary array), else ``column.unify_dictionaries()``.

    Unifying chunks that share a dictionary hashed it once per chunk: 120 s for the 8.1M
    blocks of a 331M-person blocks file in 168 row groups, against 4 s for the encoding itself.

    Examples
    --------
    >>> shared = pa.chunked_array([pa.array(["a", "b"]), pa.array(["c", "a"])]).dictionary_encode()
    >>> one_dictionary(shared) is shared
    True
    >>> own = pa.chunked_array([pa.array(["b"]).dictionary_encode(),
    ...                         pa.array(["a"]).dictionary_encode()])
    >>> one_dictionary(own).chunk(1).dictionary.to_pylist()
    ['b', 'a']
    """
    if column.num_chunks < 2:
        return column
    first = column.chunk(0).dictionary
    if all(c.dictionary.equals(first) for c in column.chunks[1:]):
        return column
    return column.unify_dictionaries()


def _check_empty(codes: np.ndarray, dictionary: np.ndarray, name: str) -> None:
    """An empty-string geocode is missing, whatever the column type it came in."""
    empty = np.flatnonzero(dictionary == "")
    if empty.size:
        _check_missing(np.isin(codes, empty), name)


def _check_missing(mask: np.ndarray, name: str) -> None:
    if mask.any():
        rows = np.flatnonzero(mask)
        fix = ("every record needs a geocode at every level — fill them in or drop those "
               "records before tabulating")
        raise ConfidentialDataError(
            f"column {name!r} has {rows.size} missing geocode(s), at rows "
            f"{rows[:10].tolist()}{' …' if rows.size > 10 else ''}; {fix}",
            public=f"column {name!r} has missing geocodes; {fix}")


@dataclass(frozen=True, eq=False)
class Geography:
    """A tree of geographic units with named levels, root first.

    Parameters
    ----------
    levels : tuple of str
        Level names, root first (e.g. ``("nation", "state", "county", "enum_dist")``).
    geocodes : tuple of numpy arrays of str
        Geocodes of each level's units, in storage order (children contiguous per parent).
    parents : tuple of int64 arrays
        For each level, the index of each unit's parent in the previous level (the root level's
        entry is an array of ``-1``).

    Raises
    ------
    HierarchyError
        If the levels repeat a name, the root has more than one unit, a level repeats a geocode,
        a parent index is out of range, children are not contiguous in parent order, or a unit
        above the bottom level has no children.

    See Also
    --------
    Geography.from_columns : build the tree from the geocode columns of microdata.

    Examples
    --------
    >>> geo = Geography(("nation", "state"), (["0"], ["01", "02"]), ([-1], [0, 0]))
    >>> geo
    Geography(nation=1, state=2)
    >>> geo.n_units("state"), geo.child_offsets("nation").tolist()
    (2, [0, 2])
    >>> Geography(("nation", "state"), (["0"], ["01", "01"]), ([-1], [0, 0]))
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: level 'state' repeats geocodes ['01']; geocodes must be ...
    """

    levels: tuple[str, ...]
    geocodes: tuple[np.ndarray, ...]
    parents: tuple[np.ndarray, ...]

    def __post_init__(self):
        levels = tuple(str(x) for x in self.levels)
        object.__setattr__(self, "levels", levels)
        geocodes = tuple(np.asarray(g, dtype=object) for g in self.geocodes)
        parents = tuple(np.asarray(p, dtype=np.int64) for p in self.parents)
        object.__setattr__(self, "geocodes", geocodes)
        object.__setattr__(self, "parents", parents)
        if not levels:
            raise HierarchyError("a geography needs at least one level")
        if len(set(levels)) != len(levels):
            raise HierarchyError(f"geography level names must be unique: {list(levels)}")
        if not (len(geocodes) == len(parents) == len(levels)):
            raise HierarchyError("a geography needs geocodes and parents for every level")
        if geocodes[0].size != 1:
            raise HierarchyError(f"the root level {levels[0]!r} must have exactly one unit")
        for i, (name, codes, par) in enumerate(zip(levels, geocodes, parents)):
            if codes.shape != par.shape or codes.ndim != 1:
                raise HierarchyError(f"level {name!r}: geocodes and parents must be 1-d and of "
                                     "equal length")
            if pd.Index(codes).has_duplicates:
                dup = pd.Index(codes)[pd.Index(codes).duplicated()].unique()[:5].tolist()
                raise HierarchyError(f"level {name!r} repeats geocodes {dup}; geocodes must be "
                                     "unique within a level")
            if i == 0:
                continue
            if codes.size == 0:
                raise HierarchyError(f"level {name!r} has no units")
            n_up = geocodes[i - 1].size
            if par.min() < 0 or par.max() >= n_up:
                raise HierarchyError(f"level {name!r}: parent index out of range")
            if np.any(np.diff(par) < 0):
                raise HierarchyError(f"level {name!r}: units must be stored with the children of "
                                     "each parent contiguous and in parent order")
            childless = np.setdiff1d(np.arange(n_up), par)
            if childless.size:
                raise HierarchyError(
                    f"{levels[i - 1]} unit(s) {geocodes[i - 1][childless[:5]].tolist()} have no "
                    f"{name} units below them; every unit above the bottom level needs at least "
                    "one child (add an empty child unit if the unit has no population)")

    # -- construction --------------------------------------------------------------------------
    @classmethod
    def from_columns(cls, levels: Sequence[str], record_sets: Sequence[Sequence[Any]], *,
                     root_geocode: str = ROOT_GEOCODE, return_sorted: bool = False):
        """Build the tree from geocode columns of one or more record sets (e.g. persons, units).

        Parameters
        ----------
        levels : sequence of str
            Level names, root first. The root has no column.
        record_sets : sequence of sequences of columns
            For each record set, one geocode column per non-root level, top down.
        root_geocode : str
            Geocode of the root unit.

        Returns
        -------
        geography : Geography
        leaf_indices : list of int arrays (int32 unless there are 2**31 units or more)
            For each record set, the bottom-level unit index of every record.
        leaf_sorted : list of bool
            Only with ``return_sorted=True``: whether each set's leaf index is non-decreasing
            (known for free from the run-length encoding; lets tabulation skip a check).

        Raises
        ------
        HierarchyError
            If a geocode is missing, or a unit's code appears under two different parents.
        """
        levels = tuple(levels)
        depth = len(levels) - 1
        sets = [list(cols) for cols in record_sets]
        for k, cols in enumerate(sets):
            if len(cols) != depth:
                raise HierarchyError(f"record set {k} has {len(cols)} geocode columns; the "
                                     f"levels {list(levels[1:])} need {depth}")
        if depth == 0:
            geo = cls(levels, (np.array([root_geocode], dtype=object),),
                      (np.array([-1], dtype=np.int64),))
            leaf = [np.zeros(_n_rows(cols), np.int64) if cols else np.zeros(0, np.int64)
                    for cols in record_sets]
            return (geo, leaf, [True] * len(leaf)) if return_sorted else (geo, leaf)
        # Encode every column, then run-length encode each record set over all its levels at
        # once: census files are sorted by geography, so 132M persons are ~135k runs, and every
        # later step works on runs instead of records.
        runs = []   # per set: (run starts, run lengths, raw codes at run starts per level)
        raw_dicts: list[list[np.ndarray]] = []
        for k, cols in enumerate(sets):
            enc = [encode_column(cols[lv], name=levels[lv + 1]) for lv in range(depth)]
            lengths = {c.size for c, _ in enc}
            if len(lengths) > 1:
                raise HierarchyError(f"record set {k}: geocode columns have different lengths "
                                     f"{sorted(lengths)}; every record needs one code per level")
            n = enc[0][0].size
            if n:
                change = np.zeros(n - 1, dtype=bool)
                for c, _ in enc:
                    change |= c[1:] != c[:-1]
                starts = np.concatenate([[0], np.flatnonzero(change) + 1])
            else:
                starts = np.zeros(0, dtype=np.int64)
            counts = np.diff(np.append(starts, n))
            runs.append((starts, counts, [c[starts].astype(np.int64) for c, _ in enc]))
            raw_dicts.append([d for _, d in enc])
        # One union dictionary per level; remap the run codes onto it.
        codes: list[list[np.ndarray]] = [[None] * depth for _ in sets]  # type: ignore
        dicts: list[np.ndarray] = []
        for lv in range(depth):
            union = pd.Index(np.concatenate([raw_dicts[k][lv] for k in range(len(sets))])
                             ).unique()
            for k in range(len(sets)):
                remap = union.get_indexer(raw_dicts[k][lv]).astype(np.int64)
                c = runs[k][2][lv]
                codes[k][lv] = remap[c] if c.size else c
            dicts.append(np.asarray(union, dtype=object))
        # Parent of each dictionary entry, checked for consistency over every run.
        parent_of: list[np.ndarray] = []
        for lv in range(depth):
            par = np.full(dicts[lv].size, -1, dtype=np.int64)
            for k in range(len(sets)):
                c = codes[k][lv]
                up = codes[k][lv - 1] if lv > 0 else np.zeros(c.size, np.int64)
                par[c] = up
            for k in range(len(sets)):
                c = codes[k][lv]
                up = codes[k][lv - 1] if lv > 0 else np.zeros(c.size, np.int64)
                bad = par[c] != up
                if bad.any():
                    run = int(np.flatnonzero(bad)[0])
                    row = int(runs[k][0][run])
                    code = dicts[lv][c[run]]
                    p1, p2 = dicts[lv - 1][up[run]], dicts[lv - 1][par[c[run]]]
                    fix = (f"a geocode must identify its parent — make codes unique, e.g. by "
                           f"prefixing the {levels[lv]} code")
                    raise ConfidentialDataError(
                        f"{levels[lv + 1]} {code!r} appears under {levels[lv]} {p1!r} (row {row}) "
                        f"and under {p2!r}; {fix}",
                        public=f"some {levels[lv + 1]} geocode appears under two {levels[lv]} "
                               f"units; {fix}")
            parent_of.append(par)
        # Order: units sorted by (new parent position, geocode); drop unused dictionary entries.
        geocodes = [np.array([root_geocode], dtype=object)]
        parents = [np.array([-1], dtype=np.int64)]
        new_pos_prev = np.zeros(1, dtype=np.int64)
        remaps = []
        for lv in range(depth):
            used = np.flatnonzero(parent_of[lv] >= 0)
            parent_new = new_pos_prev[parent_of[lv][used]]
            order = np.lexsort((dicts[lv][used].astype(str), parent_new))
            new_pos = np.full(dicts[lv].size, -1, dtype=np.int64)
            new_pos[used[order]] = np.arange(used.size)
            geocodes.append(dicts[lv][used[order]])
            parents.append(parent_new[order])
            remaps.append(new_pos)
            new_pos_prev = new_pos
        geo = cls(levels, tuple(geocodes), tuple(parents))
        dtype = np.int32 if geocodes[-1].size < 2 ** 31 else np.int64
        run_leaf = [remaps[-1][codes[k][depth - 1]].astype(dtype) for k in range(len(sets))]
        leaf = [np.repeat(r, runs[k][1]) for k, r in enumerate(run_leaf)]
        if return_sorted:
            return geo, leaf, [bool(np.all(r[1:] >= r[:-1])) for r in run_leaf]
        return geo, leaf

    @classmethod
    def from_frame(cls, frame: pd.DataFrame, levels: Sequence[str]) -> "Geography":
        """Inverse of :meth:`to_frame` (columns ``level``, ``geocode``, ``parent``)."""
        levels = tuple(levels)
        missing = {"level", "geocode", "parent"} - set(frame.columns)
        if missing:
            raise HierarchyError(f"a geography table needs columns level, geocode, parent; "
                                 f"missing {sorted(missing)}")
        geocodes, parents = [], []
        prev = None
        for name in levels:
            part = frame[frame["level"] == name]
            codes = part["geocode"].astype(str).to_numpy(dtype=object)
            if prev is None:
                par = np.full(codes.size, -1, dtype=np.int64)
            else:
                idx = pd.Index(prev).get_indexer(part["parent"].astype(str))
                if (idx < 0).any():
                    bad = part["geocode"].to_numpy()[idx < 0][:5].tolist()
                    raise HierarchyError(f"level {name!r}: units {bad} name a parent that is not "
                                         f"a unit of the level above")
                par = idx.astype(np.int64)
            geocodes.append(codes)
            parents.append(par)
            prev = codes
        return cls(levels, tuple(geocodes), tuple(parents))

    def to_frame(self) -> pd.DataFrame:
        """All units as a table: ``level``, ``geocode``, ``parent`` (parent geocode; "" at root)."""
        parts = []
        for i, name in enumerate(self.levels):
            parent = (np.array([""] * self.geocodes[i].size, dtype=object) if i == 0
                      else self.geocodes[i - 1][self.parents[i]])
            parts.append(pd.DataFrame({"level": name, "geocode": self.geocodes[i],
                                       "parent": parent}))
        return pd.concat(parts, ignore_index=True)

    # -- queries -------------------------------------------------------------------------------
    @property
    def depth(self) -> int:
        return len(self.levels)

    def level_index(self, level: str | int) -> int:
        if isinstance(level, (int, np.integer)) and not isinstance(level, bool):
            if -self.depth <= level < self.depth:
                return int(level) % self.depth
            raise HierarchyError(f"level index {level} out of range for {list(self.levels)}")
        try:
            return self.levels.index(level)
        except ValueError:
            raise HierarchyError(f"unknown geography level {level!r}; levels are "
                                 f"{list(self.levels)}") from None

    def top(self, levels: int) -> "Geography":
        """The first ``levels`` levels (the root down to level ``levels − 1``).

        Examples
        --------
        >>> geo = Geography(("nation", "state"), (np.array(["US"]), np.array(["01", "02"])),
        ...                 (np.array([-1]), np.array([0, 0])))
        >>> geo.top(1).levels, geo.top(1).n_units("nation")
        (('nation',), 1)
        """
        return Geography(tuple(self.levels[:levels]), tuple(self.geocodes[:levels]),
                         tuple(self.parents[:levels]))

    def n_units(self, level: str | int) -> int:
        return int(self.geocodes[self.level_index(level)].size)

    def child_offsets(self, level: str | int) -> np.ndarray:
        """For parent level ``level``: offsets such that the children of unit ``p`` in the next
        level are ``offsets[p]:offsets[p + 1]``."""
        i = self.level_index(level)
        if i == self.depth - 1:
            raise HierarchyError(f"level {self.levels[i]!r} is the bottom level: no children")
        return np.searchsorted(self.parents[i + 1], np.arange(self.geocodes[i].size + 1))

    def n_children(self, level: str | int) -> np.ndarray:
        return np.diff(self.child_offsets(level))

    def only_children(self, level: str | int) -> np.ndarray:
        """Which units of ``level`` are their parent's only child (none at the root).

        Examples
        --------
        >>> geo = Geography(("n", "t", "b"), (["0"], ["1", "2"], list("abc")),
        ...                 ([-1], [0, 0], [0, 1, 1]))
        >>> geo.only_children("b").tolist(), geo.only_children("n").tolist()
        ([True, False, False], [False])
        """
        i = self.level_index(level)
        if i == 0:
            return np.zeros(1, bool)
        return self.n_children(i - 1)[self.parents[i]] == 1

    def aggregate(self, values: np.ndarray, from_level: str | int, to_level: str | int
                  ) -> np.ndarray:
        """Sum per-unit values (first axis = units of ``from_level``) up to ``to_level``.

        ``values`` may be a scipy sparse matrix (units × columns, integer or float): the sums
        are then dense, made from its nonzeros (a part's blocks × cells summed to their block
        groups without a pass over the cells that are 0).

        Examples
        --------
        >>> import scipy.sparse as sp
        >>> geo = Geography(("n", "t", "b"), (["0"], ["1", "2"], list("abc")),
        ...                 ([-1], [0, 0], [0, 1, 1]))
        >>> blocks = np.array([[1, 0], [0, 2], [3, 0]])
        >>> geo.aggregate(blocks, "b", "t").tolist(), geo.aggregate(blocks, "b", "n").tolist()
        ([[1, 0], [3, 2]], [[4, 2]])
        >>> geo.aggregate(sp.csr_matrix(blocks), "b", "t").tolist()
        [[1, 0], [3, 2]]
        """
        i, j = self.level_index(from_level), self.level_index(to_level)
        if j > i:
            raise HierarchyError(f"cannot aggregate down from {self.levels[i]!r} to "
                                 f"{self.levels[j]!r}")
        out = values if sp.issparse(values) else np.asarray(values)
        if out.shape[0] != self.geocodes[i].size:
            raise HierarchyError(f"expected {self.geocodes[i].size} rows for level "
                                 f"{self.levels[i]!r}, got {out.shape[0]}")
        if sp.issparse(out):
            return self._aggregate_sparse(sp.csr_matrix(out), i, j)
        for lv in range(i, j, -1):
            out = np.add.reduceat(out, self.child_offsets(lv - 1)[:-1], axis=0)
        return out

    def _aggregate_sparse(self, csr: sp.csr_matrix, i: int, j: int) -> np.ndarray:
        """:meth:`aggregate` of a CSR matrix of level ``i`` to level ``j``: the 0/1 matrix of
        each level-``j`` unit's descendants times ``csr``, in the matrix's own dtype."""
        offsets = np.arange(self.geocodes[j].size + 1)
        for lv in range(j, i):      # unit a of level j covers offsets[a]:offsets[a + 1] at lv + 1
            offsets = self.child_offsets(lv)[offsets]
        n = self.geocodes[i].size
        below = sp.csr_matrix((np.ones(n, dtype=csr.dtype), np.arange(n), offsets),
                              shape=(self.geocodes[j].size, n))
        return (below @ csr).toarray()

    def index_of(self, level: str | int, geocodes: Sequence[str]) -> np.ndarray:
        """Positions of geocodes within a level; raises naming unknown ones."""
        i = self.level_index(level)
        idx = pd.Index(self.geocodes[i]).get_indexer(np.asarray(geocodes, dtype=object))
        if (idx < 0).any():
            bad = np.asarray(geocodes, dtype=object)[idx < 0][:5].tolist()
            raise HierarchyError(f"unknown {self.levels[i]} geocode(s) {bad}")
        return idx.astype(np.int64)

    def equals(self, other: "Geography") -> bool:
        return (isinstance(other, Geography) and self.levels == other.levels
                and all(np.array_equal(a, b) for a, b in zip(self.geocodes, other.geocodes))
                and all(np.array_equal(a, b) for a, b in zip(self.parents, other.parents)))

    def __repr__(self) -> str:
        sizes = ", ".join(f"{n}={g.size}" for n, g in zip(self.levels, self.geocodes))
        return f"Geography({sizes})"


def _n_rows(cols: Sequence[Any]) -> int:
    return len(cols[0]) if cols else 0
