"""What a Noisy Measurement File holds, without reading its values (:func:`inspect_nmf`;
``postproc nmf inspect``): the geocodes, query names and variances of every file, checked as
:mod:`postproc.apps.nmf.reader` checks them."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from postproc.apps.nmf.files import (
    _files,
    _level_dir,
    _partitions,
    _product_dir,
    _query_names,
    _where,
)
from postproc.apps.nmf.layout import CONSTRAINT, DPQUERY, GEOLEVELS, PRODUCTS, row_kinds
from postproc.apps.nmf.reader import _select_pieces
from postproc.errors import PostprocError

__all__ = ["inspect_nmf"]



def inspect_nmf(root: str | Path, *, product: str = "persons",
                states: Sequence[str] | None = None) -> pd.DataFrame:
    """What a Noisy Measurement File holds, level by level, without reading its values: the
    state pieces, units, units measured and only children (constraint rows, no measurements),
    each query's rows and variance range, the constraint kinds, files and bytes.

    Parameters
    ----------
    root : path
        The folder that holds the product directory (or the product directory).
    product : {'persons', 'units'}
    states : sequence of str, optional
        Two-digit state FIPS codes (default: every state in the file).

    Returns
    -------
    pandas.DataFrame
        One row per (geolevel, dataset, row kind): ``geolevel``, ``dataset``, ``name``,
        ``units`` (geounits with such a row), ``rows``, ``min_variance``, ``max_variance``
        (measurements), ``sign`` (constraints), ``files`` and ``bytes`` of the dataset.
        ``frame.attrs`` holds ``pieces`` and per geolevel ``units`` and ``only_children``.

    Raises
    ------
    PostprocError
        As :func:`read_nmf` for what it reads (missing geolevels, bad partitions, unknown
        queries).

    Examples
    --------
    >>> inspect_nmf("/nonexistent")
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: NMF root '/nonexistent' is not a directory
    """
    pdir = _product_dir(root, product)
    pieces = _select_pieces(sorted(_partitions(_level_dir(pdir, "State", CONSTRAINT))), states)
    records: list[dict[str, Any]] = []
    units: dict[str, int] = {}
    only: dict[str, int] = {}
    for geolevel in GEOLEVELS:
        if geolevel == GEOLEVELS[0] and states is not None:
            continue
        seen: dict[str, set] = {}
        for dataset in (CONSTRAINT, DPQUERY):
            path = _level_dir(pdir, geolevel, dataset)
            kinds = {k.query_name: k for k in row_kinds(product, geolevel, dataset)}
            if geolevel == GEOLEVELS[0]:
                sources: list[tuple[str | None, Path]] = [(None, path)]
            else:
                parts = _partitions(path)
                sources = [(p, parts[p]) for p in sorted(parts) if p in pieces]
            stats: dict[str, dict[str, Any]] = {}
            files = size = 0
            for piece, directory in sources:
                for f in _files(directory):
                    files += 1
                    size += f.stat().st_size
                    cols = ["geocode", "query_name"] + (
                        ["variance"] if dataset == DPQUERY else ["sign"])
                    try:
                        table = pq.read_table(f, columns=cols)
                    except (pa.ArrowInvalid, OSError, KeyError) as exc:
                        raise PostprocError(f"{_where(f, piece)}: cannot read columns {cols} "
                                            f"({exc})") from None
                    names = _query_names(_where(f, piece), 0, table, kinds)
                    codes = table.column("geocode").to_numpy(zero_copy_only=False).astype(str)
                    seen.setdefault(dataset, set()).update(codes.tolist())
                    for name in np.unique(names):
                        sel = names == name
                        entry = stats.setdefault(name, {"units": set(), "rows": 0,
                                                        "min_variance": math.inf,
                                                        "max_variance": -math.inf})
                        entry["units"].update(codes[sel].tolist())
                        entry["rows"] += int(sel.sum())
                        if dataset == DPQUERY:
                            v = np.asarray(table.column("variance").to_numpy(
                                zero_copy_only=False), np.float64)[sel]
                            entry["min_variance"] = min(entry["min_variance"], float(v.min()))
                            entry["max_variance"] = max(entry["max_variance"], float(v.max()))
            for name, kind in kinds.items():
                entry = stats.get(name)
                records.append({
                    "geolevel": geolevel, "dataset": dataset, "name": kind.name,
                    "units": len(entry["units"]) if entry else 0,
                    "rows": entry["rows"] if entry else 0,
                    "min_variance": entry["min_variance"] if entry and dataset == DPQUERY
                    else math.nan,
                    "max_variance": entry["max_variance"] if entry and dataset == DPQUERY
                    else math.nan,
                    "sign": kind.sign or "", "files": files, "bytes": size})
        units[geolevel] = len(seen.get(CONSTRAINT, ()))
        only[geolevel] = len(seen.get(CONSTRAINT, set()) - seen.get(DPQUERY, set()))
    frame = pd.DataFrame.from_records(records)
    frame.attrs.update(pieces=list(pieces), units=units, only_children=only,
                       product=PRODUCTS[product])
    return frame
