"""Post-processed results of a Noisy Measurement File against published counts
(``postproc nmf compare --published CSV``).

The published file has no truth beside it, but its counts were published: the 2020 P.L. 94-171
tables are the Census Bureau's production TopDown run on these very measurements. A user who
supplies published total populations by census GEOID — ``geoid,total``, the GEOID of a state
(2 digits), county (5), tract (11), block group (12) or block (15), and P1_001N — gets each
method's error against them: every method's blocks are added up to the census units their
GEOIDs' prefixes name (a spine block is a census block, :func:`~postproc.apps.nmf.layout.
block_geoid`; the spine's counties, tracts and block groups are not the census's, so nothing
above the block is compared on the spine). For TopDown this asks how far the toolkit's
re-implementation is from the production run; for ``gls`` and BlueDown, how far other estimators
move from what was published.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from postproc.apps.nmf.layout import block_geoid
from postproc.errors import PostprocError

__all__ = ["read_published", "published_errors", "run_block_totals", "GEOID_LEVELS"]

#: Census GEOID length → the level it names.
GEOID_LEVELS = {2: "state", 5: "county", 11: "tract", 12: "block_group", 15: "block"}


def read_published(path: str | Path) -> pd.DataFrame:
    """Published totals: a CSV with columns ``geoid`` (census GEOIDs, read as text) and
    ``total`` (persons), one row per unit, any mix of levels.

    Raises
    ------
    PostprocError
        A missing file or column, a GEOID that is not 2, 5, 11, 12 or 15 digits, a total that
        is not a whole number ≥ 0, a GEOID twice — naming the file and line.

    Examples
    --------
    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "p1.csv"
    >>> _ = path.write_text("geoid,total\\n44,1097379\\n44007,660741\\n")
    >>> read_published(path).to_dict("list")
    {'geoid': ['44', '44007'], 'total': [1097379, 660741], 'level': ['state', 'county']}
    >>> _ = path.write_text("geoid,total\\n4400,12\\n")
    >>> read_published(path)
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: ...p1.csv, line 2: geoid '4400' is not a census GEOID of ...
    """
    path = Path(path)
    if not path.is_file():
        raise PostprocError(f"published counts file {str(path)!r} does not exist; give a CSV "
                            "with columns geoid,total (census GEOIDs, persons)")
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    missing = [c for c in ("geoid", "total") if c not in frame.columns]
    if missing:
        raise PostprocError(f"{path}: needs columns 'geoid' and 'total', has "
                            f"{list(frame.columns)}")
    geoid = frame["geoid"].str.strip()
    bad = ~(geoid.str.fullmatch(r"\d+") & geoid.str.len().isin(list(GEOID_LEVELS)))
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise PostprocError(f"{path}, line {row + 2}: geoid {geoid.iloc[row]!r} is not a census "
                            "GEOID of 2, 5, 11, 12 or 15 digits (state, county, tract, block "
                            "group, block)")
    total = frame["total"].str.strip()
    bad = ~total.str.fullmatch(r"\d+")
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise PostprocError(f"{path}, line {row + 2}: total {total.iloc[row]!r} is not a whole "
                            "number ≥ 0")
    twice = geoid.duplicated()
    if twice.any():
        row = int(np.flatnonzero(twice)[0])
        raise PostprocError(f"{path}, line {row + 2}: geoid {geoid.iloc[row]} is given twice")
    return pd.DataFrame({"geoid": geoid.tolist(), "total": total.astype(np.int64).tolist(),
                         "level": [GEOID_LEVELS[len(g)] for g in geoid]})


def published_errors(blocks: Sequence[str], totals: Mapping[str, np.ndarray],
                     published: pd.DataFrame) -> pd.DataFrame:
    """Each method's error against the published totals, per level the published rows name.

    Parameters
    ----------
    blocks : sequence of str
        The file's spine block geocodes.
    totals : mapping method → array (blocks,)
        Each method's total persons per block (real for ``gls``).
    published : DataFrame
        :func:`read_published`'s.

    Returns
    -------
    DataFrame
        One row per method and level: ``units`` compared, ``mean_abs``, ``rmse``, ``max_abs``
        and ``exact`` (the share of units equal to the published count), and ``published``
        (the published persons of those units).

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
    geoids = pd.Series([block_geoid(str(b)) for b in blocks])
    rows = []
    for length, level in GEOID_LEVELS.items():
        wanted = published[published["geoid"].str.len() == length]
        if not len(wanted):
            continue
        unit = geoids.str[:length]
        have = set(unit)
        absent = [g for g in wanted["geoid"] if g not in have]
        if absent:
            raise PostprocError(f"published {level} {absent[0]} has no block in the file read "
                                f"({len(absent)} such {level} unit(s)); give the counts of "
                                "the states read")
        for method, values in totals.items():
            by_unit = pd.Series(np.asarray(values, dtype=np.float64)).groupby(unit.values).sum()
            error = by_unit.reindex(wanted["geoid"]).to_numpy() - wanted["total"].to_numpy()
            rows.append({"method": method, "level": level, "units": int(len(wanted)),
                         "published": int(wanted["total"].sum()),
                         "mean_abs": float(np.abs(error).mean()),
                         "rmse": float(np.sqrt(np.mean(error ** 2))),
                         "max_abs": float(np.abs(error).max()),
                         "exact": float(np.mean(np.abs(error) < 1e-9))})
    return pd.DataFrame(rows)


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
    directory = Path(directory)
    blocks_file, geo_file = directory / "block.parquet", directory / "geography.parquet"
    if not (blocks_file.is_file() and geo_file.is_file()):
        raise PostprocError(f"{directory} is not a run directory: it has no block.parquet and "
                            "geography.parquet (postproc nmf run writes them)")
    geo = pq.read_table(geo_file, columns=["level", "geocode"]).to_pandas()
    blocks = geo.loc[geo["level"] == "block", "geocode"].astype(str).to_numpy()
    index = pd.Index(blocks)
    totals = np.zeros(blocks.size)
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
                                f"{geo_file.name}")
        np.add.at(totals, at, summed.to_numpy(dtype=np.float64))
    if estimates and not found and blocks.size:
        raise PostprocError(f"{blocks_file} has no estimate of the total: run the GLS with "
                            "--queries total,... to compare it")
    return blocks, totals
