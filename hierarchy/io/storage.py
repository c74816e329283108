"""Atomic, owned output: files and directories appear complete or not at all, and the toolkit
never destroys what it did not write.

Every output of the toolkit is written to a temporary name in the destination's directory and
then renamed into place (``os.replace`` is atomic on POSIX), so an interrupted run never leaves a
half-written file that a later run or a user could mistake for a result; the leftovers of an
interrupted write (``.<name>.*.tmp``) are removed by :func:`remove_leftovers` when a run resumes.
No pickle anywhere: tables are parquet, metadata is JSON.

Ownership: every directory the toolkit creates as a whole carries a marker file
(:data:`MARKER`); a directory is replaced or deleted only if it carries the marker, so a typo in
``--out`` can never remove a user's folder. :func:`lock_directory` gives one process at a time
the right to write into an output directory.

Examples
--------
>>> import tempfile
>>> base = Path(tempfile.mkdtemp())
>>> with atomic_directory(base / "out", made_by="doctest") as tmp:
...     _ = (tmp / "a.txt").write_text("x")
>>> is_owned(base / "out"), is_owned(base)
(True, False)
>>> check_file_names({"a/b": "a_b", "a_b": "a_b"}, what="level")
Traceback (most recent call last):
...
hierarchy.errors.HierarchyError: level names 'a/b' and 'a_b' would both be written as 'a_b'; ...
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import stat
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

import pyarrow as pa
import pyarrow.parquet as pq

from hierarchy.errors import HierarchyError

__all__ = ["atomic_path", "write_parquet", "write_json", "read_json",
           "atomic_directory", "package_versions", "MARKER", "mark_owned", "is_owned",
           "claim_directory", "remove_leftovers", "lock_directory", "safe_file_name",
           "check_file_names", "confidential_directory", "CONFIDENTIAL_DIR", "special_file_kind"]

#: The file that marks a directory as written by the toolkit (and so replaceable by it).
MARKER = ".dapp-output"
#: The sub-directory of an output directory that holds what must not be published.
CONFIDENTIAL_DIR = "confidential"
_LOCK = ".dapp-lock"
_LEFTOVER = re.compile(r"^\..+\.tmp$")


@contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; rename it onto ``path`` if the block succeeds.

    If the block raises, the temporary file is removed and ``path`` is left as it was.

    Examples
    --------
    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> with atomic_path(d / "table.csv") as tmp:
    ...     _ = tmp.write_text("geocode,count")
    >>> (d / "table.csv").read_text()
    'geocode,count'
    >>> with atomic_path(d / "half.csv") as tmp:
    ...     _ = tmp.write_text("geocode,")
    ...     raise RuntimeError("interrupted")
    Traceback (most recent call last):
    ...
    RuntimeError: interrupted
    >>> sorted(p.name for p in d.iterdir())   # no half-written file, no leftover
    ['table.csv']
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=_temp_prefix(path.name), suffix=".tmp", dir=path.parent)
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
    (under ``b"dapp"``), so provenance such as the randomness label travels with the file.

    Returns
    -------
    pathlib.Path
        ``path``.

    Examples
    --------
    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "counts.parquet"
    >>> _ = write_parquet(pa.table({"geocode": ["A", "B"], "count": [3, 4]}), path,
    ...                   metadata={"randomness": "simulation"})
    >>> pq.read_table(path).column("count").to_pylist()
    [3, 4]
    >>> read_parquet_metadata(path)
    {'randomness': 'simulation'}
    """
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
    """Write JSON atomically (indented, UTF-8) and return ``path``; values JSON cannot hold
    (paths, dates) are written as text.

    Examples
    --------
    >>> import tempfile
    >>> path = write_json({"levels": ["nation", "state"], "epsilon": 1.0},
    ...                   Path(tempfile.mkdtemp()) / "metadata.json")
    >>> print(path.read_text())
    {
      "levels": [
        "nation",
        "state"
      ],
      "epsilon": 1.0
    }
    <BLANKLINE>
    """
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, default=str, ensure_ascii=False) + "\n",
                       encoding="utf-8")
    return Path(path)


def read_json(path: str | os.PathLike) -> Any:
    """Read a JSON file (UTF-8).

    Raises
    ------
    HierarchyError
        If the file does not exist, or is not valid JSON (with the line and column).

    Examples
    --------
    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> read_json(write_json({"epsilon": 1.0}, d / "ok.json"))
    {'epsilon': 1.0}
    >>> _ = (d / "bad.json").write_text('{"epsilon": 1.0,}')
    >>> read_json(d / "bad.json")
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: .../bad.json is not valid JSON: line 1, column 17: ...
    """
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise HierarchyError(f"{path} does not exist") from None
    except json.JSONDecodeError as exc:
        raise HierarchyError(f"{path} is not valid JSON: line {exc.lineno}, column {exc.colno}: "
                             f"{exc.msg}") from None


def mark_owned(path: str | os.PathLike, made_by: str) -> None:
    """Write the ownership marker into directory ``path`` (which must exist).

    Only for a directory the toolkit has just created as a whole: the marker lets the toolkit
    later replace or delete it. :func:`claim_directory` and :func:`atomic_directory` call it.

    Examples
    --------
    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> mark_owned(d, "doctest")
    >>> read_json(d / MARKER)["made_by"]
    'doctest'
    """
    with atomic_path(Path(path) / MARKER) as tmp:
        tmp.write_text(json.dumps({"made_by": made_by, "note": "written by the dapp toolkit; "
                                   "it may replace or delete this directory"}) + "\n")


def is_owned(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a directory the toolkit wrote (it carries :data:`MARKER`).

    Examples
    --------
    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> is_owned(d), is_owned(claim_directory(d / "run", made_by="doctest"))
    (False, True)
    """
    return (Path(path) / MARKER).is_file()


def _check_replaceable(path: Path) -> None:
    """Refuse to replace ``path`` unless the toolkit wrote it and it holds nothing we run from."""
    if not is_owned(path):
        raise HierarchyError(f"{path} exists and was not written by this toolkit (it has no "
                             f"{MARKER} marker), so it is never replaced or deleted; choose "
                             "another output directory")
    resolved = path.resolve()
    cwd = Path.cwd().resolve()
    if resolved == cwd or resolved in cwd.parents:
        raise HierarchyError(f"{path} is (or contains) the current directory and is never "
                             "replaced; choose an output directory below it")


def claim_directory(path: str | os.PathLike, *, made_by: str, reuse: bool = False,
                    how_to_reuse: str = "resume the run there") -> Path:
    """Create ``path`` (or take an empty one) as an output directory the toolkit owns.

    An existing non-empty directory is taken only with ``reuse=True`` (a resumed run) and only if
    the toolkit wrote it; nothing in it is removed.

    Parameters
    ----------
    path : path
    made_by : str
        What claims it (recorded in the marker), e.g. ``"postproc run"``.
    reuse : bool
        Take an owned directory that already holds outputs (to resume a run).
    how_to_reuse : str
        The advice the error gives when ``reuse`` is needed.

    Returns
    -------
    pathlib.Path

    Raises
    ------
    HierarchyError
        If ``path`` is a file, lies under a file, is not ours, or is not empty without
        ``reuse`` — then saying it is in use, by whom, while a run holds its lock
        (:func:`lock_directory`).

    Examples
    --------
    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> out = claim_directory(d / "run", made_by="doctest")
    >>> _ = (out / "result.parquet").write_text("…")
    >>> claim_directory(out, made_by="doctest")
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: .../run already holds outputs; resume the run there, or ...
    >>> claim_directory(out, made_by="doctest", reuse=True) == out
    True

    A user's non-empty directory is never taken, even to resume:

    >>> _ = (d / "notes.txt").write_text("mine")
    >>> claim_directory(d, made_by="doctest", reuse=True)
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: ... is not empty and was not written by this toolkit ...
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise HierarchyError(f"{path} exists and is not a directory; choose another output "
                             "directory")
    if path.is_dir() and any(not _bookkeeping(entry.name) for entry in path.iterdir()):
        if not is_owned(path):
            raise HierarchyError(f"{path} is not empty and was not written by this toolkit (no "
                                 f"{MARKER} marker); choose another output directory")
        if not reuse:
            holder = _held_by(path)      # another run is writing there: say so, not "resume"
            if holder is not None:
                raise HierarchyError(_in_use(path, holder))
            raise HierarchyError(f"{path} already holds outputs; {how_to_reuse}, or choose "
                                 "another output directory")
        return path
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise HierarchyError(f"cannot create {path}: a part of the path is a file; choose "
                             "another output directory") from None
    except NotADirectoryError:
        raise HierarchyError(f"cannot create {path}: a part of the path is a file; choose "
                             "another output directory") from None
    try:
        mark_owned(path, made_by)
    except FileNotFoundError:
        # a concurrent run marked the directory, took its lock and cleared leftovers, among them
        # our marker's temporary file: the directory is ours all the same, and the lock that
        # run holds will refuse us with a clear message
        if not is_owned(path):
            raise
    return path


def _bookkeeping(name: str) -> bool:
    """The lock, or the marker being written (a run that has just created the directory): what
    a concurrent claim must not mistake for a user's files."""
    return name == _LOCK or (name.startswith(_temp_prefix(MARKER)) and name.endswith(".tmp"))


def _temp_prefix(name: str) -> str:
    """How :func:`atomic_path` names the temporary file of ``name`` (``.<name>.…tmp``)."""
    return f".{name}."


def remove_leftovers(directory: str | os.PathLike, *, recursive: bool = True) -> list[Path]:
    """Remove what interrupted atomic writes left in an owned ``directory``: the ``.<name>.*.tmp``
    files and directories of :func:`atomic_path` and :func:`atomic_directory`.

    Returns the removed paths. Only directories the toolkit wrote are cleaned.

    Examples
    --------
    >>> import tempfile
    >>> out = claim_directory(Path(tempfile.mkdtemp()) / "run", made_by="doctest")
    >>> _ = (out / "state.parquet").write_text("kept")
    >>> _ = (out / ".state.parquet.x1y2.tmp").write_text("half-written")
    >>> [p.name for p in remove_leftovers(out)]
    ['.state.parquet.x1y2.tmp']
    >>> sorted(p.name for p in out.iterdir())
    ['.dapp-output', 'state.parquet']
    """
    directory = Path(directory)
    removed: list[Path] = []
    if not directory.is_dir() or not is_owned(directory):
        return removed
    stack = [directory]
    while stack:
        here = stack.pop()
        for entry in sorted(here.iterdir()):
            if _LEFTOVER.match(entry.name):
                try:
                    if entry.is_dir() and not entry.is_symlink():
                        shutil.rmtree(entry)
                    else:
                        entry.unlink()
                except FileNotFoundError:
                    continue  # gone since the listing (a concurrent claim renamed its marker)
                removed.append(entry)
            elif recursive and entry.is_dir() and not entry.is_symlink():
                stack.append(entry)
    return removed


@contextmanager
def lock_directory(directory: str | os.PathLike, *, what: str = "postproc") -> Iterator[Path]:
    """Hold an exclusive lock on an output directory for the duration of the block.

    The lock is an advisory ``flock`` on ``DIR/.dapp-lock``, released by the operating system
    when the process ends however it ends (a killed run never leaves a stale lock).

    Raises
    ------
    HierarchyError
        At once, if another process holds the lock.

    Examples
    --------
    >>> import tempfile
    >>> out = claim_directory(Path(tempfile.mkdtemp()) / "run", made_by="doctest")
    >>> with lock_directory(out, what="first run"):
    ...     with lock_directory(out):   # a second run into the same directory
    ...         pass
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: .../run is in use by first run (pid ..., since ...); wait ...
    >>> with lock_directory(out):   # released when the block ends
    ...     pass
    """
    directory = Path(directory)
    lock_path = directory / _LOCK
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        holder = _try_lock(fd)
        if holder is not None:
            raise HierarchyError(_in_use(directory, holder))
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{what} (pid {os.getpid()}, since "
                      f"{time.strftime('%Y-%m-%d %H:%M:%S')})".encode(), 0)
        yield directory
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def _in_use(directory: Path, holder: str) -> str:
    return (f"{directory} is in use by {holder}; wait for it to finish, or choose another "
            "output directory (two runs into one directory would measure the data twice)")


def _try_lock(fd: int) -> str | None:
    """Take the lock on the lock file ``fd`` without waiting: ``None`` if taken, else the
    description its holder wrote."""
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise
        return _lock_holder(fd)
    return None


def _held_by(directory: Path) -> str | None:
    """Who holds :func:`lock_directory`'s lock on ``directory`` now, or ``None`` (no lock
    file, or nobody holds it). Tries the lock without waiting and lets it go at once."""
    try:
        fd = os.open(directory / _LOCK, os.O_RDWR)
    except OSError:                   # no lock file: no run ever held the directory
        return None
    try:
        return _try_lock(fd)
    finally:
        os.close(fd)                  # closing releases the lock if it was taken


def _lock_holder(fd: int, *, wait: float = 0.5) -> str:
    """The description the lock's holder writes into the lock file. A holder writes it just
    after taking the lock, so a file still empty is read again for up to ``wait`` seconds
    (otherwise a run refused in that instant could not say who holds the directory)."""
    deadline = time.monotonic() + wait
    while True:
        holder = os.pread(fd, 200, 0).decode(errors="replace").strip()
        if holder or time.monotonic() >= deadline:
            return holder or "another process"
        time.sleep(0.01)


def safe_file_name(name: str) -> str:
    """``name`` in its composed Unicode form (NFC) with every character other than letters,
    digits (of any script), ``-``, ``_`` and ``.`` replaced by ``_`` (and no leading dot), for
    use as a file name.

    Examples
    --------
    >>> safe_file_name("county 01/001"), safe_file_name(".hidden"), safe_file_name("")
    ('county_01_001', '_hidden', '_')
    >>> safe_file_name("Kreis-\u00e4"), safe_file_name("Kreis-\u00f6")   # two files, not one
    ('Kreis-ä', 'Kreis-ö')
    """
    import unicodedata

    out = re.sub(r"[^\w.-]", "_", unicodedata.normalize("NFC", str(name)))
    return "_" + out[1:] if out.startswith(".") else (out or "_")


def check_file_names(names: Mapping[str, str] | Iterable[str], *, what: str,
                     reserved: Iterable[str] = ()) -> dict[str, str]:
    """Map names to file stems, refusing two names that would share a file or a reserved name.

    ``names`` is an iterable of names (sanitised with :func:`safe_file_name`) or a mapping
    name → stem already chosen. Comparison ignores case (case-insensitive file systems), and
    two names that are one name in two Unicode forms (``ä`` composed, NFC, or decomposed,
    NFD: macOS file systems normalise them to one file name) are refused too.

    Returns
    -------
    dict
        Name → file stem.

    Raises
    ------
    HierarchyError
        Naming the two colliding names, or the name that would take a reserved file.

    Examples
    --------
    >>> check_file_names(["Tract 1", "tract/2"], what="level")
    {'Tract 1': 'Tract_1', 'tract/2': 'tract_2'}
    >>> check_file_names(["County", "county"], what="level")
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: level names 'County' and 'county' would both be written as ...
    >>> check_file_names(["metadata"], what="level", reserved=["metadata"])
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: level name 'metadata' ... reserves for its own output; ...
    >>> check_file_names(["Kreis-\u00e4", "Kreis-a\u0308"], what="level")
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: level names 'Kreis-\\xe4' and 'Kreis-a\\u0308' are one name ...
    """
    import unicodedata

    stems = dict(names) if isinstance(names, Mapping) else {n: safe_file_name(n) for n in names}
    seen: dict[str, str] = {}
    forms: dict[str, str] = {}
    reserved = {r.lower() for r in reserved}
    for name, stem in stems.items():
        key = stem.lower()
        if key in reserved:
            raise HierarchyError(f"{what} name {name!r} would be written as {stem!r}, which the "
                                 f"toolkit reserves for its own output; rename the {what}")
        form = unicodedata.normalize("NFC", str(name)).casefold()
        if form in forms and forms[form].casefold() != str(name).casefold():
            raise HierarchyError(f"{what} names {ascii(forms[form])} and {ascii(name)} are one "
                                 "name in two Unicode forms (composed, NFC, and decomposed, "
                                 "NFD), one file on some file systems; write both alike, or "
                                 "rename one of them")
        if key in seen:
            raise HierarchyError(f"{what} names {seen[key]!r} and {name!r} would both be written "
                                 f"as {stem!r}; rename one of them")
        forms[form] = name
        seen[key] = name
    return stems


_CONFIDENTIAL_README = """\
CONFIDENTIAL - computed from the confidential input data. DO NOT PUBLISH.

Everything in this directory ({what}) was derived from the exact, confidential data: errors
against the truth, exact counts, empirical privacy loss, data fingerprints. It is kept here, apart
from the release files, because you asked for it or because resuming the run needs it. Delete this
directory before publishing the outputs.
"""


def confidential_directory(directory: str | os.PathLike, *, what: str = "") -> Path:
    """``DIR/confidential`` (created with a banner README, readable by the owner only).

    Everything computed from the confidential data (errors, exact counts, EPL, input paths)
    goes here, never elsewhere in an output directory.

    Parameters
    ----------
    directory : path
        The output directory.
    what : str
        What will be kept there, for the README.

    Returns
    -------
    pathlib.Path

    Examples
    --------
    >>> import tempfile
    >>> out = Path(tempfile.mkdtemp())
    >>> secret = confidential_directory(out, what="errors against the truth")
    >>> secret.name, oct(secret.stat().st_mode & 0o777)
    ('confidential', '0o700')
    >>> print((secret / "README.txt").read_text().splitlines()[0])
    CONFIDENTIAL - computed from the confidential input data. DO NOT PUBLISH.
    """
    path = Path(directory) / CONFIDENTIAL_DIR
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, 0o700)
    readme = path / "README.txt"
    if not readme.exists():
        with atomic_path(readme) as tmp:
            tmp.write_text(_CONFIDENTIAL_README.format(what=what or "see the file names"))
    return path


def special_file_kind(path: str | os.PathLike) -> str | None:
    """What ``path`` is when it is not a regular file — ``'a directory'``, ``'a named pipe
    (FIFO)'``, a device or a socket — for an error message; ``None`` for a regular file or a
    path that does not exist (never opens it: reading a pipe or device could block forever).

    Examples
    --------
    >>> import tempfile
    >>> special_file_kind(tempfile.mkdtemp()), special_file_kind("/no/such/file")
    ('a directory', None)
    """
    try:
        mode = Path(path).stat().st_mode
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"unreadable ({exc.strerror or exc})"
    if stat.S_ISREG(mode):
        return None
    kinds = [(stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a named pipe (FIFO)"),
             (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
             (stat.S_ISSOCK, "a socket")]
    return next((kind for test, kind in kinds if test(mode)), "a special file")


@contextmanager
def atomic_directory(path: str | os.PathLike, *, overwrite: bool = False,
                     made_by: str = "dapp") -> Iterator[Path]:
    """Build a directory under a temporary name and rename it onto ``path`` when complete.

    The new directory carries the ownership marker. With ``overwrite=False`` an existing
    non-empty ``path`` is an error; with ``overwrite=True`` it is replaced only if the toolkit
    wrote it (it carries :data:`MARKER`) — a directory we did not write is never lost.

    Raises
    ------
    HierarchyError
        If ``path`` is a file, or a non-empty directory without ``overwrite``, or with
        ``overwrite`` one that the toolkit did not write.

    Examples
    --------
    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> with atomic_directory(d / "release", made_by="doctest") as tmp:
    ...     _ = (tmp / "old.txt").write_text("first")
    >>> with atomic_directory(d / "release", overwrite=True, made_by="doctest") as tmp:
    ...     _ = (tmp / "new.txt").write_text("second")
    >>> sorted(p.name for p in (d / "release").iterdir())
    ['.dapp-output', 'new.txt']

    A directory the toolkit did not write is never replaced:

    >>> (d / "mine").mkdir()
    >>> _ = (d / "mine" / "thesis.tex").write_text("…")
    >>> with atomic_directory(d / "mine", overwrite=True) as tmp:
    ...     pass
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: .../mine exists ... so it is never replaced or deleted; ...
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise HierarchyError(f"{path} exists and is not a directory; choose another name "
                             "(it is never replaced, even with overwrite=True)")
    if path.exists() and any(path.iterdir()):
        if not overwrite:
            raise HierarchyError(f"{path} already exists and is not empty; choose another "
                                 "directory, or allow replacing it (overwrite=True, "
                                 "--overwrite)")
        _check_replaceable(path)
    if path.name in ("", ".", ".."):
        path = path.resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    try:
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp's 0700 → what a plain mkdir would give
        mark_owned(tmp, made_by)
        yield tmp
        if path.exists():
            # a fresh, unique name: never removes anything but the directory being replaced
            old = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".old.tmp",
                                        dir=path.parent))
            os.replace(path, old)
            os.replace(tmp, path)
            shutil.rmtree(old)
        else:
            os.replace(tmp, path)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)


def package_versions() -> dict[str, str]:
    """Versions of this toolkit and of the libraries whose behaviour shapes its outputs.

    Libraries that are not installed are left out; ``python`` is always there.

    Examples
    --------
    >>> versions = package_versions()
    >>> {"dapp", "numpy", "python"} <= set(versions)
    True
    """
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
