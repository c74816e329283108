"""Files written piece by piece and joined: :func:`join_parquet` puts the pieces of one table
(a level written part by part or state by state) into one Parquet file, atomically, without
holding them all (:mod:`hierarchy.io.storage` writes each piece)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable, Mapping

import pyarrow.parquet as pq

from hierarchy.io.storage import atomic_path

__all__ = ["join_parquet"]


def join_parquet(files: Iterable[str | os.PathLike], path: str | os.PathLike, *,
                 metadata: Mapping[str, Any]) -> Path:
    """The tables of ``files`` (one schema: the first's), one after another, into one file
    written atomically with ``metadata`` (as :func:`~hierarchy.io.storage.write_parquet`
    stores it) — a level's pieces written part by part, joined without holding them all.

    Examples
    --------
    >>> import tempfile
    >>> import pyarrow as pa
    >>> from hierarchy.io.storage import read_parquet_metadata, write_parquet
    >>> folder = Path(tempfile.mkdtemp())
    >>> for k in (0, 1):
    ...     _ = write_parquet(pa.table({"count": [k, k + 1]}), folder / f"part-{k}.parquet")
    >>> joined = join_parquet([folder / "part-0.parquet", folder / "part-1.parquet"],
    ...                       folder / "all.parquet", metadata={"randomness": "simulation"})
    >>> pq.read_table(joined).column("count").to_pylist(), read_parquet_metadata(joined)
    ([0, 1, 1, 2], {'randomness': 'simulation'})
    """
    files = [Path(f) for f in files]
    schema = pq.read_schema(files[0]).with_metadata(
        {b"dapp": json.dumps(dict(metadata), default=str).encode()})
    with atomic_path(path) as tmp:
        with pq.ParquetWriter(tmp, schema, compression="zstd") as writer:
            for file in files:
                table = pq.read_table(file).replace_schema_metadata(schema.metadata)
                writer.write_table(table if table.schema.equals(schema) else
                                   table.cast(schema))
    return Path(path)
