"""Post-processed results of a Noisy Measurement File against published counts
(``postproc nmf compare --published CSV``).

The published file has no truth beside it, but its counts were published: the 2020 P.L. 94-171
tables are the Census Bureau's production TopDown run on these very measurements. A user who
supplies published counts by census GEOID — ``geoid`` (a state: 2 digits, county: 5, tract: 11,
block group: 12, block: 15) and any variables of tables P1–P5 as the Census Bureau's API names
them (``P1_001N``, ``P2_002N``, …; ``total`` for ``P1_001N``:
:mod:`postproc.apps.nmf.pl_tables`) — gets each method's error in each of them: every
method's blocks are added up to the census units their GEOIDs' prefixes name (a spine block is
a census block, :func:`~postproc.apps.nmf.layout.block_geoid`; the spine's counties, tracts and
block groups are not the census's, so nothing above the block is compared on the spine). For
TopDown this asks how far the toolkit's re-implementation is from the production run; for
``gls`` and BlueDown, how far other estimators move from what was published.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import scipy.sparse as sp

from hierarchy.presets.pl94 import PL94_2020
from postproc.apps.nmf.layout import block_geoid
from postproc.apps.nmf.pl_tables import is_variable, variable_matrix
from postproc.errors import PostprocError

__all__ = ["read_published", "published_errors", "run_block_totals", "GEOID_LEVELS",
           "published_variables", "PublishedUnits", "run_published_sums"]

#: Census GEOID length → the level it names.
GEOID_LEVELS = {2: "state", 5: "county", 11: "tract", 12: "block_group", 15: "block"}


def read_published(path: str | Path) -> pd.DataFrame:
    """Published counts: a CSV with a column ``geoid`` (census GEOIDs, read as text) and one
    column per variable of tables P1–P5 (``total`` for ``P1_001N``), one row per unit, any mix
    of levels.

    Returns
    -------
    DataFrame
        ``geoid``, the variables (whole numbers) in the file's order, and ``level``.

    Raises
    ------
    PostprocError
        A missing file or column, a column that is not a variable of P1–P5, a GEOID that is not
        2, 5, 11, 12 or 15 digits, a count that is not a whole number ≥ 0, a GEOID twice —
        naming the file and line.

    Examples
    --------
    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "p1.csv"
    >>> _ = path.write_text("geoid,total\\n44,1097379\\n44007,660741\\n")
    >>> read_published(path).to_dict("list")
    {'geoid': ['44', '44007'], 'total': [1097379, 660741], 'level': ['state', 'county']}
    >>> _ = path.write_text("geoid,P1_003N,P2_002N\\n44007,470012,190000\\n")
    >>> list(read_published(path).columns)
    ['geoid', 'P1_003N', 'P2_002N', 'level']
    >>> _ = path.write_text("geoid,total\\n4400,12\\n")
    >>> read_published(path)
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: ...p1.csv, line 2: geoid '4400' is not a census GEOID of ...
    """
    path = Path(path)
    if not path.is_file():
        raise PostprocError(f"published counts file {str(path)!r} does not exist; give a CSV "
                            "with columns geoid,total (census GEOIDs, persons) or geoid and "
                            "variables of the P.L. 94-171 tables (P1_001N, P2_002N, ...)")
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    variables = [c for c in frame.columns if c != "geoid"]
    if "geoid" not in frame.columns or not variables:
        raise PostprocError(f"{path}: needs columns 'geoid' and 'total' (or variables of the "
                            f"P.L. 94-171 tables, e.g. P1_001N), has {list(frame.columns)}")
    unknown = [c for c in variables if not is_variable(c)]
    if unknown:
        raise PostprocError(f"{path}: column {unknown[0]!r} is not a variable of the P.L. "
                            "94-171 tables P1–P5 (e.g. P1_001N, P2_002N, P5_003N) or total")
    if {"total", "P1_001N"} <= set(variables):
        raise PostprocError(f"{path}: total is P1_001N; give one of the two columns")
    geoid = frame["geoid"].str.strip()
    bad = ~(geoid.str.fullmatch(r"\d+") & geoid.str.len().isin(list(GEOID_LEVELS)))
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise PostprocError(f"{path}, line {row + 2}: geoid {geoid.iloc[row]!r} is not a census "
                            "GEOID of 2, 5, 11, 12 or 15 digits (state, county, tract, block "
                            "group, block)")
    out = {"geoid": geoid.tolist()}
    for name in variables:
        values = frame[name].str.strip()
        bad = ~values.str.fullmatch(r"\d+")
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise PostprocError(f"{path}, line {row + 2}: {name} {values.iloc[row]!r} is not a "
                                "whole number ≥ 0")
        out[name] = values.astype(np.int64).tolist()
    twice = geoid.duplicated()
    if twice.any():
        row = int(np.flatnonzero(twice)[0])
        raise PostprocError(f"{path}, line {row + 2}: geoid {geoid.iloc[row]} is given twice")
    out["level"] = [GEOID_LEVELS[len(g)] for g in geoid]
    return pd.DataFrame(out)


def published_variables(published: pd.DataFrame) -> list[str]:
    """The variables :func:`read_published` read, in the file's order.

    Examples
    --------
    >>> published_variables(pd.DataFrame(columns=["geoid", "P1_003N", "total", "level"]))
    ['P1_003N', 'total']
    """
    return [c for c in published.columns if c not in ("geoid", "level")]


class PublishedUnits:
    """The published units of each level and each block's row among them (by its census
    GEOID's prefix), and the sums of the blocks' values added up to them.

    Raises
    ------
    PostprocError
        A published GEOID none of the blocks is in (another state, or a typo).

    Examples
    --------
    >>> blocks = ["0440000700491024400701070233001", "0440000700491024400701070233002"]
    >>> units = PublishedUnits(blocks, pd.DataFrame({"geoid": ["44007"], "total": [10],
    ...                                              "level": ["county"]}))
    >>> sums = units.empty(1)
    >>> units.add(sums, np.array([0, 1]), np.array([[4.0], [7.0]]))
    >>> sums["county"].tolist()
    [[11.0]]
    """

    def __init__(self, blocks: Sequence[str], published: pd.DataFrame):
        geoids = pd.Series([block_geoid(str(b)) for b in blocks], dtype=object)
        self.published = published
        self.levels: dict[str, tuple[np.ndarray, pd.DataFrame]] = {}
        for length, level in GEOID_LEVELS.items():
            wanted = published[published["geoid"].str.len() == length]
            if not len(wanted):
                continue
            unit = geoids.str[:length]
            have = set(unit)
            absent = [g for g in wanted["geoid"] if g not in have]
            if absent:
                raise PostprocError(f"published {level} {absent[0]} has no block in the file "
                                    f"read ({len(absent)} such {level} unit(s)); give the "
                                    "counts of the states read")
            row = pd.Index(wanted["geoid"]).get_indexer(unit.to_numpy())
            self.levels[level] = (row.astype(np.int64), wanted)

    def empty(self, variables: int) -> dict[str, np.ndarray]:
        """Zero sums (units × variables) for every level."""
        return {lv: np.zeros((len(w), variables)) for lv, (_, w) in self.levels.items()}

    def add(self, sums: dict[str, np.ndarray], blocks: np.ndarray, values: Any) -> None:
        """Add ``values`` (rows × variables, dense or sparse), each row a block's (``blocks``:
        their rows in the blocks given), to ``sums``."""
        rows = np.asarray(blocks, dtype=np.int64)
        for level, (unit, wanted) in self.levels.items():
            at = unit[rows]
            keep = np.flatnonzero(at >= 0)
            agg = sp.csr_matrix((np.ones(keep.size), (at[keep], keep)),
                                shape=(len(wanted), rows.size))
            added = agg @ values
            sums[level] += added.toarray() if sp.issparse(added) else np.asarray(added)

    def errors(self, method: str, sums: dict[str, np.ndarray],
               variables: Sequence[str]) -> list[dict[str, Any]]:
        """One row per level and variable: ``method``'s sums against the published counts."""
        rows = []
        for level, (_, wanted) in self.levels.items():
            for j, name in enumerate(variables):
                error = sums[level][:, j] - wanted[name].to_numpy(dtype=np.float64)
                if np.isnan(error).all():
                    continue                    # not in what the run wrote (the GLS's)
                rows.append({"method": method, "level": level, "variable": name,
                             "units": int(len(wanted)), "published": int(wanted[name].sum()),
                             "mean_abs": float(np.abs(error).mean()),
                             "rmse": float(np.sqrt(np.mean(error ** 2))),
                             "max_abs": float(np.abs(error).max()),
                             "exact": float(np.mean(np.abs(error) < 1e-9))})
        return rows


def published_errors(blocks: Sequence[str], values: Mapping[str, np.ndarray],
                     published: pd.DataFrame) -> pd.DataFrame:
    """Each method's error against the published counts, per level the published rows name
    and per variable.

    Parameters
    ----------
    blocks : sequence of str
        The file's spine block geocodes.
    values : mapping method → array
        Each method's histograms per block (blocks × 2,016 cells), or its total persons per
        block (blocks,; real for ``gls``) when the published variable is the total alone.
    published : DataFrame
        :func:`read_published`'s.

    Returns
    -------
    DataFrame
        One row per method, level and variable: ``units`` compared, ``published`` (the
        published count of those units), ``mean_abs``, ``rmse``, ``max_abs`` and ``exact``
        (the share of units equal to the published count).

    Raises
    ------
    PostprocError
        A published GEOID none of the file's blocks is in (another state, or a typo).

    Examples
    --------
    >>> blocks = ["0440000700491024400701070233001", "0440000700491024400701070233002"]
    >>> table = pd.DataFrame({"geoid": ["44007"], "total": [10], "level": ["county"]})
    >>> published_errors(blocks, {"topdown": np.array([4, 7])}, table)[
    ...     ["method", "level", "units", "mean_abs", "exact"]].to_dict("records")
    [{'method': 'topdown', 'level': 'county', 'units': 1, 'mean_abs': 1.0, 'exact': 0.0}]
    """
    units = PublishedUnits(blocks, published)
    variables = published_variables(published)
    matrix = variable_matrix(variables)
    rows = []
    for method, given in values.items():
        given = np.asarray(given, dtype=np.float64)
        if given.ndim == 1:
            if any(v not in ("total", "P1_001N") for v in variables):
                raise PostprocError("block totals give the total only: pass the histograms "
                                    "to compare " + ", ".join(variables))
            per_block = np.repeat(given[:, None], len(variables), axis=1)
        else:
            per_block = np.asarray(sp.csr_matrix(given) @ matrix.T.toarray())
        sums = units.empty(len(variables))
        units.add(sums, np.arange(len(blocks)), per_block)
        rows += units.errors(method, sums, variables)
    return pd.DataFrame(rows)


def run_published_sums(directory: str | Path, units: PublishedUnits,
                       variables: Sequence[str]) -> dict[str, np.ndarray]:
    """A finished run directory's blocks added up to the published units, variable by
    variable, read a batch of rows at a time (the nation's 8M block histograms never held):
    an integer run's counts through :func:`~postproc.apps.nmf.pl_tables.variable_matrix`;
    the GLS state by state's estimates of ``total`` (its other variables NaN: not written).

    Raises
    ------
    PostprocError
        A directory without ``block.parquet`` and ``geography.parquet``, or a block of one
        that the other does not have.

    Examples
    --------
    >>> run_published_sums("/nonexistent", None, ["total"])
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: /nonexistent is not a run directory: it has no block.parquet ...
    """
    blocks_file, index = _run_blocks(directory)
    source = pq.ParquetFile(blocks_file)
    names = set(source.schema_arrow.names)
    axes = list(PL94_2020.names)
    sums = units.empty(len(variables))
    if "count" not in names and {"query", "estimate"} <= names:         # the GLS's
        totals = [j for j, v in enumerate(variables) if v in ("total", "P1_001N")]
        per_block = _block_totals(blocks_file, index)
        values = np.full((per_block.size, len(variables)), np.nan)
        values[:, totals] = per_block[:, None]
        units.add(sums, np.arange(per_block.size), np.nan_to_num(values, nan=0.0))
        for level in sums:
            sums[level][:, [j for j in range(len(variables)) if j not in totals]] = np.nan
        return sums
    matrix = variable_matrix(variables).T.tocsr()          # cells × variables
    for batch in source.iter_batches(columns=["block", *axes, "count"], batch_size=1 << 20):
        frame = batch.to_pandas()
        at = index.get_indexer(frame["block"].astype(str))
        if (at < 0).any():
            first = frame["block"].iloc[int(np.flatnonzero(at < 0)[0])]
            raise PostprocError(f"{blocks_file}: block {first!r} is not in geography.parquet")
        cells = np.ravel_multi_index(tuple(frame[a].to_numpy(np.int64) for a in axes),
                                     PL94_2020.shape)
        counts = sp.csr_matrix((frame["count"].to_numpy(np.float64),
                                (np.arange(len(frame)), cells)),
                               shape=(len(frame), PL94_2020.size))
        units.add(sums, at, counts @ matrix)
    return sums


def _run_blocks(directory: str | Path) -> tuple[Path, pd.Index]:
    """A run directory's ``block.parquet`` and its blocks (from ``geography.parquet``)."""
    directory = Path(directory)
    blocks_file, geo_file = directory / "block.parquet", directory / "geography.parquet"
    if not (blocks_file.is_file() and geo_file.is_file()):
        raise PostprocError(f"{directory} is not a run directory: it has no block.parquet and "
                            "geography.parquet (postproc nmf run writes them)")
    geo = pq.read_table(geo_file, columns=["level", "geocode"]).to_pandas()
    return blocks_file, pd.Index(geo.loc[geo["level"] == "block", "geocode"].astype(str))


def run_block_totals(directory: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """The blocks of a finished run directory (``postproc nmf run``, streamed or not) and its
    total persons per block, read a batch of rows at a time from ``block.parquet`` (the
    nation's 8M blocks never as a dense histogram) and ``geography.parquet``: the counts'
    sums of an integer run, the estimates of ``total`` of the GLS state by state.

    Raises
    ------
    PostprocError
        A directory without those files.

    Examples
    --------
    >>> run_block_totals("/nonexistent")
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: /nonexistent is not a run directory: it has no block.parquet ...
    """
    blocks_file, index = _run_blocks(directory)
    return index.to_numpy(), _block_totals(blocks_file, index)


def _block_totals(blocks_file: Path, index: pd.Index) -> np.ndarray:
    """The total persons of each block of ``index`` in a run's ``block.parquet``, read a
    batch of rows at a time (:func:`run_block_totals`)."""
    totals = np.zeros(len(index))
    source = pq.ParquetFile(blocks_file)
    names = set(source.schema_arrow.names)
    estimates = "count" not in names and {"query", "estimate"} <= names   # the GLS's
    columns = ["block", "query", "estimate"] if estimates else ["block", "count"]
    found = False
    for batch in source.iter_batches(columns=columns, batch_size=1 << 20):
        frame = batch.to_pandas()
        if estimates:
            frame = frame[frame["query"] == "total"].rename(columns={"estimate": "count"})
        found = found or len(frame) > 0
        summed = frame.groupby(frame["block"].astype(str), observed=True)["count"].sum()
        at = index.get_indexer(summed.index)
        if (at < 0).any():
            raise PostprocError(f"{blocks_file}: block {summed.index[at < 0][0]!r} is not in "
                                "geography.parquet")
        np.add.at(totals, at, summed.to_numpy(dtype=np.float64))
    if estimates and not found and len(index):
        raise PostprocError(f"{blocks_file} has no estimate of the total: run the GLS with "
                            "--queries total,... to compare it")
    return totals
