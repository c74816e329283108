"""Finished runs of a synthetic Noisy Measurement File against the truth it keeps, at every
level of the spine, without holding any run's histograms (``postproc nmf compare ROOT --runs
NAME=DIR ...``).

A run state by state (``postproc nmf run --stream``: TopDown, BlueDown or ``gls``) writes the
nation's blocks to disk and never holds them; comparing it with the truth needs only each
block's total persons — the run's (:func:`~postproc.apps.nmf.published.run_block_totals`, a
batch of rows at a time) and the truth's (:func:`truth_block_totals`, counted a batch of
persons at a time from ``truth/persons.parquet``) — added up the spine (each unit's parent from
the run's ``geography.parquet``): :func:`spine_errors`. Only the total population is compared
(what a block total carries); ``postproc nmf compare ROOT --methods …`` compares every query, on
a file small enough to post-process whole.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow.compute as pc
import pyarrow.parquet as pq

from postproc.errors import PostprocError

__all__ = ["truth_block_totals", "spine_errors", "spine_parents"]


def truth_block_totals(root: str | Path, blocks: Sequence[str]) -> np.ndarray:
    """The persons of each of ``blocks`` (spine geocodes) in the truth a synthetic file keeps
    (``ROOT/truth/persons.parquet``), counted a million persons at a time.

    Raises
    ------
    PostprocError
        No truth beside the file (the published file has none), or a person in a block that
        is not among ``blocks`` (the runs are of other states, or of another file).

    Examples
    --------
    >>> truth_block_totals("/nonexistent", [])
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: /nonexistent has no truth/persons.parquet: a comparison ...
    """
    path = _truth_path(root)
    index = pd.Index(np.asarray(blocks, dtype=object).astype(str))
    totals = np.zeros(len(index), dtype=np.int64)
    for batch in pq.ParquetFile(path).iter_batches(columns=["block"], batch_size=1 << 20):
        counted = pc.value_counts(batch.column(0))
        codes = counted.field("values").to_numpy(zero_copy_only=False).astype(str)
        at = index.get_indexer(codes)
        if (at < 0).any():
            raise PostprocError(f"{path}: persons in block {codes[at < 0][0]!r}, which the "
                                "runs do not have: compare runs of this file and all its states")
        np.add.at(totals, at, counted.field("counts").to_numpy().astype(np.int64))
    return totals


def _truth_path(root: str | Path) -> Path:
    """``ROOT/truth/persons.parquet``, or an error saying why a file has none."""
    path = Path(root) / "truth" / "persons.parquet"
    if not path.is_file():
        raise PostprocError(f"{root} has no truth/persons.parquet: a comparison against the "
                            "truth needs a synthetic file (postproc synth2020 --nmf), which "
                            "keeps it; the published file has none")
    return path


def spine_parents(geography: pd.DataFrame) -> tuple[list[str], list[np.ndarray]]:
    """The levels of a run's ``geography.parquet`` (root first) and, for each level below the
    root, each unit's parent's row in the level above (in the file's order of units).

    Examples
    --------
    >>> frame = pd.DataFrame({"level": ["nation", "state", "state", "block", "block"],
    ...                       "geocode": ["US", "044", "004", "0441", "0042"],
    ...                       "parent": [None, "US", "US", "044", "004"]})
    >>> levels, parents = spine_parents(frame)
    >>> levels, [p.tolist() for p in parents]
    (['nation', 'state', 'block'], [[0, 0], [0, 1]])
    """
    levels = list(dict.fromkeys(geography["level"]))
    parents = []
    for up, lv in zip(levels, levels[1:]):
        codes = pd.Index(geography.loc[geography["level"] == up, "geocode"].astype(str))
        child = geography.loc[geography["level"] == lv, "parent"].astype(str).to_numpy()
        at = codes.get_indexer(child)
        if (at < 0).any():
            raise PostprocError(f"geography: a {lv} unit's parent {child[at < 0][0]!r} is not "
                                f"a {up} unit")
        parents.append(at.astype(np.int64))
    return levels, parents


def spine_errors(levels: Sequence[str], parents: Sequence[np.ndarray],
                 totals: Mapping[str, np.ndarray], truth: np.ndarray) -> pd.DataFrame:
    """Each run's error in the total population at every level: the block totals (in the
    bottom level's order) added up the spine (:func:`spine_parents`).

    Returns
    -------
    DataFrame
        One row per method and level: ``units``, ``truth`` (the level's persons),
        ``mean_abs``, ``rmse``, ``max_abs`` and ``exact`` (the share of units with the true
        count, to 1e-9).

    Examples
    --------
    >>> rows = spine_errors(["nation", "block"], [np.array([0, 0])],
    ...                     {"topdown": np.array([3, 5])}, np.array([4, 4]))
    >>> rows[["level", "units", "mean_abs", "exact"]].to_dict("list")
    {'level': ['nation', 'block'], 'units': [1, 2], 'mean_abs': [0.0, 1.0], 'exact': [1.0, 0.0]}
    """
    sizes = [int(parents[0].max()) + 1 if parents and parents[0].size else 1]
    sizes += [p.size for p in parents]

    def upward(bottom: np.ndarray) -> list[np.ndarray]:
        out = [np.asarray(bottom, dtype=np.float64)]
        for k in range(len(parents) - 1, -1, -1):
            out.insert(0, np.bincount(parents[k], weights=out[0], minlength=sizes[k]))
        return out

    true = upward(truth)
    rows = []
    for method, values in totals.items():
        if np.shape(values) != np.shape(truth):
            raise PostprocError(f"{method}: {np.size(values):,} block totals for "
                                f"{np.size(truth):,} blocks")
        for lv, got, want in zip(levels, upward(values), true):
            error = got - want
            rows.append({"method": method, "level": lv, "units": int(want.size),
                         "truth": int(round(float(want.sum()))),
                         "mean_abs": float(np.abs(error).mean()),
                         "rmse": float(np.sqrt(np.mean(error ** 2))),
                         "max_abs": float(np.abs(error).max()),
                         "exact": float(np.mean(np.abs(error) < 1e-9))})
    return pd.DataFrame(rows)
