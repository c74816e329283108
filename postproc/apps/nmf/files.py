"""The file layer of a Noisy Measurement File: a product's folder, a geolevel's dataset and its
``State`` partitions, and every row of every part file read with its own schema and checked
against the layout (:mod:`postproc.apps.nmf.layout`) — a query the PL 94 preset does not know,
axis columns or a ``query_shape`` that do not match it, a ``value`` list whose length is not the
product of its shape, a variance that is not positive and finite, a constraint sign that is not
its constraint's — each an error naming the file, the partition and the row. What the rows are
gathered into (:class:`_Rows`) is what :mod:`postproc.apps.nmf.reader` builds the hierarchy
from; nothing here is a user's entry point.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from postproc.apps.nmf.layout import (
    AXES,
    CONSTRAINT,
    DPQUERY,
    GEOLEVELS,
    PARTITION,
    PRODUCTS,
    RowKind,
    row_kinds,
    split_piece,
)
from postproc.errors import PostprocError

__all__: list[str] = []     # the reader's (postproc.apps.nmf.reader)

_INT32 = np.iinfo(np.int32)


@dataclass
class _Rows:
    """One dataset's rows at one geolevel, gathered over its files: per row kind, the geocodes,
    the values (rows × answers; int32 where they fit, as the published lists mostly are: the
    block level's measurements are most of the file) and (measurements) the variances."""

    geocodes: dict[str, list[np.ndarray]] = field(default_factory=dict)
    values: dict[str, list[np.ndarray]] = field(default_factory=dict)
    variances: dict[str, list[np.ndarray]] = field(default_factory=dict)
    files: int = 0
    bytes: int = 0

    def add(self, kind: str, geocodes: np.ndarray, values: np.ndarray,
            variances: np.ndarray | None) -> None:
        self.geocodes.setdefault(kind, []).append(geocodes)
        self.values.setdefault(kind, []).append(values)
        if variances is not None:
            self.variances.setdefault(kind, []).append(variances)

    def extend(self, other: _Rows) -> None:
        """Add another gathering's rows (its file and byte counts too)."""
        for kind, codes in other.geocodes.items():
            self.geocodes.setdefault(kind, []).extend(codes)
            self.values.setdefault(kind, []).extend(other.values[kind])
            if kind in other.variances:
                self.variances.setdefault(kind, []).extend(other.variances[kind])
        self.files += other.files
        self.bytes += other.bytes

    @property
    def count(self) -> int:
        """Rows gathered, over every kind."""
        return sum(len(c) for codes in self.geocodes.values() for c in codes)

    def joined(self, kind: str) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """A row kind's rows over every file, joined once (the files' pieces are let go)."""
        for store in (self.geocodes, self.values, self.variances):
            if kind in store and len(store[kind]) > 1:
                store[kind] = [np.concatenate(store[kind])]
        var = self.variances[kind][0] if kind in self.variances else None
        return self.geocodes[kind][0], self.values[kind][0], var


def _product_dir(root: str | Path, product: str) -> Path:
    if product not in PRODUCTS:
        raise PostprocError(f"unknown NMF product {product!r}; products are {list(PRODUCTS)}")
    root = Path(root)
    if root.name == PRODUCTS[product] and root.is_dir():
        return root
    path = root / PRODUCTS[product]
    if not path.is_dir():
        if not root.is_dir():
            raise PostprocError(f"NMF root {str(root)!r} is not a directory")
        have = sorted(p.name for p in root.iterdir() if p.is_dir())
        raise PostprocError(
            f"{str(root)!r} holds no {PRODUCTS[product]}/ (the {product} product); it holds "
            f"{have or 'no directories'}. Pass the folder that holds {PRODUCTS[product]}/ "
            "(where the published NMF was unpacked)")
    return path


def _level_dir(pdir: Path, geolevel: str, dataset: str) -> Path:
    path = pdir / f"{geolevel}.parquet" / dataset
    if not path.is_dir():
        raise PostprocError(f"the NMF in {str(pdir)!r} has no {geolevel}.parquet/{dataset}/ "
                            f"(geolevel {geolevel!r}); a PL 94 product has "
                            f"{[g + '.parquet' for g in GEOLEVELS]}, each with DPQuery/ and "
                            "Constraint/")
    return path


def _partitions(path: Path) -> dict[str, Path]:
    """A dataset directory's state-piece partitions, checked."""
    out = {}
    for p in sorted(path.iterdir()):
        if not p.is_dir():
            continue
        key, _, value = p.name.partition("=")
        if key != PARTITION:
            raise PostprocError(f"{p}: a partition directory is named {PARTITION}=XYY (AIAN "
                                f"flag and state FIPS), not {p.name!r}")
        try:
            split_piece(value)
        except PostprocError as exc:
            raise PostprocError(f"{p}: {exc}") from None
        out[value] = p
    return out


def _files(path: Path) -> list[Path]:
    """The data files of a directory: ``*.parquet`` (and Spark's ``part-*``), not ``_SUCCESS``
    or hidden files."""
    return sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith(("_", "."))
                  and not p.name.endswith(".crc"))


def _query_names(where: str, first: int, table: pa.Table, kinds: Mapping[str, RowKind]
                 ) -> np.ndarray:
    """The rows' ``query_name``, each checked to be one of ``kinds`` (``first``: the file row
    of the table's first row, for the error)."""
    names = table.column("query_name").to_numpy(zero_copy_only=False).astype(str)
    unknown = ~np.isin(names, list(kinds))
    if unknown.any():
        row = first + int(np.flatnonzero(unknown)[0])
        raise PostprocError(f"{where}, row {row}: query_name {str(names[row - first])!r} is not "
                            f"one of this geolevel's {sorted(kinds)} (the PL 94 preset's); is "
                            "this a PL 94 NMF of this product?")
    return names


def _where(path: Path, piece: str | None) -> str:
    return f"{path}" + (f" (partition {PARTITION}={piece})" if piece else "")


#: Rows of a part file parsed at a time. The published files hold a state piece's whole
#: geolevel in one file (Texas's blocks: about 7.4 million rows, 1.7 billion numbers), so a file
#: is never read whole: a batch of this many rows is about 120 MB of Arrow lists at the blocks.
BATCH_ROWS = 1 << 16


def _read_file(path: Path, piece: str | None, dataset: str, kinds: Mapping[str, RowKind],
               axes: Sequence[str], rows: _Rows) -> None:
    """Read one part file into ``rows``, every row checked (see the module)."""
    for batch in _batches(path, piece, dataset, kinds, axes):
        rows.extend(batch)
    rows.files += 1
    rows.bytes += path.stat().st_size


def _batches(path: Path, piece: str | None, dataset: str, kinds: Mapping[str, RowKind],
             axes: Sequence[str], row_groups: Sequence[int] | None = None) -> Iterator[_Rows]:
    """One part file's rows, checked, a batch (:data:`BATCH_ROWS`) at a time and only the
    columns the layout names: the file is never held whole. ``row_groups``: only these row
    groups of the file (in order; all when None). Errors name the file's row."""
    where = _where(path, piece)
    need = ["geocode", "query_name", *axes, "query_shape", "value"]
    need += ["variance"] if dataset == DPQUERY else ["sign"]
    try:
        handle = pq.ParquetFile(path)
        missing = [c for c in need if c not in handle.schema_arrow.names]
        meta = handle.metadata
    except (pa.ArrowInvalid, OSError) as exc:
        raise PostprocError(f"{where}: not a readable parquet file ({exc})") from None
    if missing:
        raise PostprocError(f"{where}: no column(s) {missing}; an NMF {dataset} file has {need}")
    starts = np.cumsum([0] + [meta.row_group(g).num_rows for g in range(meta.num_row_groups)])
    for group in range(meta.num_row_groups) if row_groups is None else row_groups:
        first = int(starts[group])
        try:
            for batch in handle.iter_batches(BATCH_ROWS, row_groups=[group], columns=need):
                rows = _read_batch(pa.Table.from_batches([batch]), where, piece, first,
                                   dataset, kinds, axes)
                first += batch.num_rows
                yield rows
        except (pa.ArrowInvalid, OSError) as exc:
            raise PostprocError(f"{where}: not a readable parquet file ({exc})") from None


def _read_batch(table: pa.Table, where: str, piece: str | None, first: int, dataset: str,
                kinds: Mapping[str, RowKind], axes: Sequence[str]) -> _Rows:
    """A batch of a file's rows, checked (``first``: the file row of its first)."""
    rows = _Rows()
    names = _query_names(where, first, table, kinds)
    if piece is not None:
        inside = pc.fill_null(pc.starts_with(table.column("geocode"), piece), False)
        if not pc.all(inside).as_py():
            row = int(np.flatnonzero(~inside.to_numpy(zero_copy_only=False))[0])
            raise PostprocError(f"{where}, row {first + row}: geocode "
                                f"{table.column('geocode')[row].as_py()!r} is not in state piece "
                                f"{piece}")
    geocodes = table.column("geocode").to_numpy(zero_copy_only=False).astype(str)
    lengths = pc.list_value_length(table.column("value")).to_numpy(zero_copy_only=False)
    if pc.list_flatten(table.column("value")).null_count:
        raise PostprocError(f"{where}: field 'value' holds missing numbers")
    shape_column = table.column("query_shape")
    shape_lengths = pc.list_value_length(shape_column).to_numpy(zero_copy_only=False)
    shape_flat = pc.list_flatten(shape_column).cast(pa.int64()).to_numpy()
    shape_starts = np.concatenate([[0], np.cumsum(shape_lengths)[:-1]]).astype(np.int64)
    variances = None
    if dataset == DPQUERY:
        variances = table.column("variance").to_numpy(zero_copy_only=False)
        variances = np.asarray(variances, dtype=np.float64)
        bad = ~(np.isfinite(variances) & (variances > 0))
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise PostprocError(f"{where}, row {first + row}: field 'variance' is "
                                f"{float(variances[row])!r}; every measurement needs a "
                                "positive, finite variance")
    else:
        signs = table.column("sign").to_numpy(zero_copy_only=False).astype(str)
    for name, kind in kinds.items():
        mine = names == name
        sel = np.flatnonzero(mine)
        if not sel.size:
            continue
        mask = pa.array(mine)
        for axis, expected in zip(axes, kind.axes):
            got = table.column(axis).filter(mask)
            ok = pc.equal(got, expected)
            if expected == "detailed":
                ok = pc.or_(ok, pc.equal(got, axis))
            ok = pc.fill_null(ok, False)                        # a missing value is wrong too
            if not pc.all(ok).as_py():
                bad = int(np.flatnonzero(~ok.to_numpy(zero_copy_only=False))[0])
                raise PostprocError(f"{where}, row {first + int(sel[bad])}: field {axis!r} of "
                                    f"{name!r} is {got[bad].as_py()!r}, expected {expected!r}")
        dims = len(kind.shape)
        ok = shape_lengths[sel] == dims
        if ok.all():
            got = shape_flat[shape_starts[sel][:, None] + np.arange(dims)[None, :]]
            ok = np.all(got == np.asarray(kind.shape), axis=1)
        if not ok.all():
            row = int(sel[np.flatnonzero(~ok)[0]])
            raise PostprocError(f"{where}, row {first + row}: field 'query_shape' of {name!r} "
                                f"is {shape_column[row].as_py()}, expected {list(kind.shape)}")
        wrong = lengths[sel] != kind.size
        if wrong.any():
            row = int(sel[np.flatnonzero(wrong)[0]])
            raise PostprocError(f"{where}, row {first + row}: field 'value' of {name!r} has "
                                f"{int(lengths[row])} numbers, but its query_shape "
                                f"{list(kind.shape)} needs {kind.size}")
        if dataset == CONSTRAINT:
            off = signs[sel] != kind.sign
            if off.any():
                row = int(sel[np.flatnonzero(off)[0]])
                raise PostprocError(f"{where}, row {first + row}: field 'sign' of {name!r} is "
                                    f"{str(signs[row])!r}, expected {kind.sign!r} (signs are "
                                    "'=', '>=', '<=')")
        # the kind's lists, all kind.size long (checked above), gathered by Arrow in row order
        picked = pc.list_flatten(table.column("value").filter(mask))
        bounds = pc.min_max(picked)
        narrow = (_INT32.min <= bounds["min"].as_py() and bounds["max"].as_py() <= _INT32.max)
        values = picked.cast(pa.int32() if narrow else pa.int64()).to_numpy()
        rows.add(kind.name, geocodes[sel], values.reshape(sel.size, kind.size),
                 None if variances is None else variances[sel])
    return rows


def _dataset_files(pdir: Path, geolevel: str, dataset: str, pieces: Sequence[str] | None
                   ) -> list[tuple[str | None, Path]]:
    """Every data file of one geolevel's dataset with its partition's state piece (``None`` at
    the US, which has no partitions): only ``pieces``' partitions, all when None."""
    path = _level_dir(pdir, geolevel, dataset)
    if geolevel == GEOLEVELS[0]:
        sources: list[tuple[str | None, Path]] = [(None, path)]
    else:
        parts = _partitions(path)
        sources = [(p, parts[p]) for p in sorted(parts) if pieces is None or p in pieces]
    return [(piece, f) for piece, directory in sources for f in _files(directory)]


def _read_dataset(pdir: Path, product: str, geolevel: str, dataset: str,
                  pieces: Sequence[str] | None) -> _Rows:
    """Every file of one geolevel's dataset (only ``pieces``' partitions, all when None)."""
    kinds = {k.query_name: k for k in row_kinds(product, geolevel, dataset)}
    rows = _Rows()
    for piece, f in _dataset_files(pdir, geolevel, dataset, pieces):
        _read_file(f, piece, dataset, kinds, AXES[product], rows)
    return rows
