"""Atomic output: files and directories appear complete or not at all.

Every output of the toolkit is written to a temporary name in the destination's directory and
then renamed into place (``os.replace`` is atomic on POSIX), so an interrupted run never leaves a
half-written file that a later run or a user could mistake for a result. No pickle anywhere:
tables are parquet, metadata is JSON.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Mapping

import pyarrow as pa
import pyarrow.parquet as pq

from hierarchy.errors import HierarchyError

__all__ = ["atomic_path", "write_parquet", "write_json", "read_json", "atomic_directory",
           "package_versions"]


@contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; rename it onto ``path`` if the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        # mkstemp creates 0600; give the output the permissions a plain open() would (umask)
        os.chmod(tmp_path, 0o666 & ~_umask())
        os.replace(tmp_path, path)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_parquet(table: pa.Table, path: str | os.PathLike, *,
                  metadata: Mapping[str, Any] | None = None) -> Path:
    """Write a table atomically; ``metadata`` is stored as JSON in the file's key-value metadata
    (under ``b"dapp"``), so provenance such as the randomness label travels with the file."""
    if metadata is not None:
        existing = dict(table.schema.metadata or {})
        existing[b"dapp"] = json.dumps(metadata, default=str).encode()
        table = table.replace_schema_metadata(existing)
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, compression="zstd")
    return Path(path)


def read_parquet_metadata(path: str | os.PathLike) -> dict[str, Any]:
    """The ``dapp`` metadata of a parquet file written by :func:`write_parquet` (or {})."""
    meta = pq.read_schema(path).metadata or {}
    raw = meta.get(b"dapp")
    return json.loads(raw) if raw else {}


def write_json(obj: Any, path: str | os.PathLike) -> Path:
    """Write JSON atomically (indented, UTF-8)."""
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, default=str, ensure_ascii=False) + "\n",
                       encoding="utf-8")
    return Path(path)


def read_json(path: str | os.PathLike) -> Any:
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise HierarchyError(f"{path} does not exist") from None
    except json.JSONDecodeError as exc:
        raise HierarchyError(f"{path} is not valid JSON: line {exc.lineno}, column {exc.colno}: "
                             f"{exc.msg}") from None


@contextmanager
def atomic_directory(path: str | os.PathLike, *, overwrite: bool = False) -> Iterator[Path]:
    """Build a directory under a temporary name and rename it onto ``path`` when complete.

    With ``overwrite=False`` an existing non-empty ``path`` is an error (nothing is lost).
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise HierarchyError(f"{path} exists and is not a directory; choose another name "
                             "(it is never replaced, even with overwrite=True)")
    if path.exists() and any(path.iterdir()) and not overwrite:
        raise HierarchyError(f"{path} already exists and is not empty; choose another directory "
                             "or pass overwrite=True")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    try:
        yield tmp
        if path.exists():
            old = path.with_name(f".{path.name}.old")
            if old.exists():
                shutil.rmtree(old)
            os.replace(path, old)
            os.replace(tmp, path)
            shutil.rmtree(old)
        else:
            os.replace(tmp, path)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)


def package_versions() -> dict[str, str]:
    """Versions of this toolkit and of the libraries whose behaviour shapes its outputs."""
    from importlib import metadata

    out = {}
    for name in ("dapp", "numpy", "scipy", "pandas", "pyarrow", "cvxpy", "osqp", "clarabel",
                 "ecos", "scs", "highspy"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    import platform
    out["python"] = platform.python_version()
    return out
