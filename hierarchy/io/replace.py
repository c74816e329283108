"""Whether a data file may be replaced: the toolkit replaces only parquet files it wrote, and
only when asked (``postproc synth1940 --overwrite``, ``postproc ipums1940 --overwrite``).

Examples
--------
>>> check_parquet_replaceable("no/such/file.parquet", overwrite=False)     # absent: fine
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from hierarchy.errors import HierarchyError

__all__ = ["check_parquet_replaceable"]


def check_parquet_replaceable(path: str | os.PathLike, *, overwrite: bool) -> None:
    """Raise unless ``path`` is absent, or a parquet file the toolkit wrote (its schema holds the
    ``dapp`` metadata :func:`write_parquet` adds) and ``overwrite`` is true: a data file is never
    replaced unless the toolkit wrote it and the user asked (``--overwrite``).

    Raises
    ------
    HierarchyError
        ``path`` is a symbolic link or not a regular file, a file the toolkit did not write, or
        one it wrote while ``overwrite`` is false; the message says what to do.

    Examples
    --------
    >>> import tempfile
    >>> from hierarchy.io.storage import write_parquet
    >>> mine = Path(tempfile.mkdtemp()) / "persons.parquet"
    >>> check_parquet_replaceable(mine, overwrite=False)          # absent: fine
    >>> _ = write_parquet(pa.table({"a": [1]}), mine, metadata={"made_by": "an example"})
    >>> check_parquet_replaceable(mine, overwrite=True)           # ours, and asked: fine
    >>> check_parquet_replaceable(mine, overwrite=False)
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: .../persons.parquet already exists (written by this toolkit);
    pass --overwrite (overwrite=True) to replace it, or choose another output directory (--out)
    """
    path = Path(path)
    if not path.exists() and not path.is_symlink():
        return
    if path.is_symlink() or not path.is_file():
        raise HierarchyError(f"{path} exists and is not a regular file; it is never replaced — "
                             "choose another output directory (--out)")
    try:
        written_by_us = b"dapp" in (pq.read_schema(path).metadata or {})
    except (pa.ArrowInvalid, OSError):
        written_by_us = False
    if not written_by_us:
        raise HierarchyError(f"{path} already exists and was not written by this toolkit (it "
                             "has no dapp metadata); it is never replaced — choose another "
                             "output directory (--out), or move the file away yourself")
    if not overwrite:
        raise HierarchyError(f"{path} already exists (written by this toolkit); pass --overwrite "
                             "(overwrite=True) to replace it, or choose another output "
                             "directory (--out)")
