"""One TOML layer for every configuration file: reading, line lookup, allowed keys, typed values.

The run configuration (:mod:`postproc.apps.runs.config`), the SafeTab configuration
(:mod:`postproc.apps.safetab.config`) and a spec of invariants (:mod:`invariants.spec`) all read
their text through :func:`read_toml` or :func:`parse_toml`. Both return a :class:`TomlDocument`: the
parsed data, and the text to find the line of a table or key when something is wrong. A
:class:`Table` of it checks its allowed keys and reads typed values; every message starts with
the file, the line and the table, ``FILE, line N: [table] key must be …, not …; how to fix``.

Each package raises its own base exception, so every function here takes the exception class
(``error``); :class:`~hierarchy.errors.HierarchyError` by default. :func:`dumps` writes a mapping
back as TOML text (a configuration built in Python, saved to be rerun).

Examples
--------
>>> doc = parse_toml('[output]\\ndirectory = "out"\\nmicrodata = "yes"\\n', source="run.toml")
>>> output = doc.table("output", allowed={"directory", "microdata"})
>>> output.path("directory", "out", base="/srv").as_posix()
'/srv/out'
>>> output.boolean("microdata", False)
Traceback (most recent call last):
...
hierarchy.errors.HierarchyError: run.toml, line 3: [output] microdata must be true or false (a TOML
boolean, without quotes), not 'yes'
"""

from __future__ import annotations

import json
import math
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, TypeVar

from hierarchy.errors import HierarchyError

__all__ = ["TomlDocument", "Table", "read_toml", "parse_toml", "randomness_problem",
           "check_randomness", "read_randomness", "dumps", "RANDOMNESS_MODES"]

T = TypeVar("T")

#: The two randomness modes of every configuration and what each means.
RANDOMNESS_MODES = {"release": "cryptographically secure, unseedable",
                    "simulation": "seeded, NOT safe for releases"}

_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\[\]]+?)\s*\]\]?\s*(?:#.*)?$")
_KEY = re.compile(r"""^\s*("[^"]*"|'[^']*'|[A-Za-z0-9_-]+)\s*[=.]""")
_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def _dotted(name: str) -> str:
    """``[ spec . "invariant" ]`` → ``spec.invariant``."""
    return ".".join(part.strip().strip("\"'") for part in name.split("."))


@dataclass
class _Block:
    """One table of the text: its header's line and the lines of its keys."""

    line: int | None
    keys: dict[str, int] = field(default_factory=dict)


class TomlDocument:
    """Parsed TOML data and the text it came from, to locate tables and keys in messages.

    Parameters
    ----------
    data : mapping
        The parsed TOML (``tomllib.loads(text)``), or a mapping shaped like it.
    text : str, optional
        The TOML text, for line numbers (without it, messages name the table instead).
    source : str, optional
        The file name used in messages.
    error : type of Exception, optional
        What to raise.

    Examples
    --------
    >>> text = '[budget]\\ntotal = 1\\n\\n[[level]]\\nname = "a"\\n\\n[[level]]\\nname = "b"\\n'
    >>> doc = parse_toml(text, source="c.toml")
    >>> doc.line("budget", "total"), doc.line("level", "name", index=1), doc.line("level", index=1)
    (2, 8, 7)
    >>> doc.where("budget", "kind"), doc.where("randomness")
    ('c.toml, line 1', 'c.toml [randomness]')
    """

    def __init__(self, data: Mapping[str, Any], text: str = "", *, source: str = "<config>",
                 error: type[Exception] = HierarchyError):
        self.data = data
        self.text = text or ""
        self.source = source
        self.error_class = error
        self._lines = self.text.splitlines()
        self._blocks: dict[tuple[str, int], _Block] = {("", 0): _Block(None)}
        counts: dict[str, int] = {}
        block = self._blocks[("", 0)]
        for number, line in enumerate(self._lines, start=1):
            header = _HEADER.match(line)
            if header:
                name = _dotted(header.group(2))
                index = 0
                if header.group(1) == "[[":
                    index = counts.get(name, 0)
                    counts[name] = index + 1
                block = self._blocks.setdefault((name, index), _Block(number))
                continue
            key = _KEY.match(line)
            if key:
                block.keys.setdefault(key.group(1).strip("\"'"), number)

    # -- locating ------------------------------------------------------------------------------
    def line(self, table: str, key: str | None = None, index: int = 0) -> int | None:
        """The line of ``key`` in ``[table]`` (the ``index``-th ``[[table]]``), else of the
        table's header; ``None`` when neither can be found.

        A key is also found in a sub-table (``[table.sub]``) or written as a table of its own
        (``[table.key]``); a table is also found written inline in its parent
        (``table = {…}``, ``parent.table = …``) or by its first sub-table.
        """
        block = self._blocks.get((table, index))
        if key is not None:
            hit = block.keys.get(key) if block else None
            if hit is None and table:
                hit = next((b.keys[key] for (name, _), b in self._blocks.items()
                            if name.startswith(table + ".") and key in b.keys), None)
            if hit is None:
                own = self._blocks.get((f"{table}.{key}" if table else key, 0))
                hit = own.line if own else None
            if hit is not None:
                return hit
        if block is not None and block.line is not None:
            return block.line
        if not table:
            return None
        sub = next((b.line for (name, _), b in self._blocks.items()
                    if name.startswith(table + ".") and b.line), None)
        if sub is not None:
            return sub
        parent, _, child = table.rpartition(".")
        holder = self._blocks.get((parent, 0))
        return holder.keys.get(child) if holder else None

    def has_table(self, table: str, index: int = 0) -> bool:
        """Whether the text has a header ``[table]`` (or an ``index``-th ``[[table]]``)."""
        block = self._blocks.get((table, index))
        return block is not None and block.line is not None

    def mention(self, key: str, value: Any) -> int | None:
        """The first line holding ``key = "value"`` anywhere (e.g. in an inline table)."""
        if value is None:
            return None
        pattern = re.compile(rf"\b{re.escape(key)}\s*=\s*[\"']{re.escape(str(value))}[\"']")
        return next((i for i, text in enumerate(self._lines, start=1) if pattern.search(text)),
                    None)

    def where(self, table: str, key: str | None = None, index: int = 0) -> str:
        """``"FILE, line N"`` of ``key`` in ``table`` (see :meth:`line`), else
        ``"FILE [table]"``."""
        line = self.line(table, key, index)
        if line is not None:
            return f"{self.source}, line {line}"
        return f"{self.source} [{table}]" if table else self.source

    def fail(self, table: str, key: str | None, message: str, index: int = 0) -> Exception:
        """The error ``"FILE, line N: message"`` (``message`` names what is wrong itself)."""
        return self.error_class(f"{self.where(table, key, index)}: {message}")

    def error(self, table: str, key: str | None, problem: str, index: int = 0) -> Exception:
        """The error ``"FILE, line N: [table] problem"``, located at ``key``; ``problem``
        names the key (``"workers must be …"``).

        Examples
        --------
        >>> doc = parse_toml("[solver]\\nworkers = 0\\n", source="c.toml")
        >>> print(doc.error("solver", "workers", "workers must be a positive integer, not 0"))
        c.toml, line 2: [solver] workers must be a positive integer, not 0
        >>> print(doc.error("output", "directory", "directory must be a path"))
        c.toml: [output] directory must be a path
        """
        line = self.line(table, key, index)
        where = f"{self.source}, line {line}" if line is not None else self.source
        return self.error_class(f"{where}: [{table}] {problem}")

    def located(self, table: str, key: str | None, build: Callable[[], T], index: int = 0,
                catch: tuple[type[Exception], ...] = (HierarchyError,)) -> T:
        """``build()``, its errors (of ``catch`` or this document's class) located at ``key``
        as ``"FILE, line N: <their message>"``."""
        try:
            return build()
        except (*catch, self.error_class) as exc:
            raise self.fail(table, key, str(exc), index) from None

    # -- tables --------------------------------------------------------------------------------
    def check_sections(self, allowed: set[str]) -> None:
        """Refuse top-level tables and keys not in ``allowed``, listing those allowed."""
        unknown = sorted(set(self.data) - set(allowed))
        if unknown:
            raise self.fail("", unknown[0], f"unknown section(s) {unknown}; sections are "
                                            f"{sorted(allowed)}")

    def table(self, name: str, *, required: bool = False,
              allowed: set[str] | None = None) -> "Table":
        """The top-level table ``[name]`` (empty when absent and not ``required``), its keys
        checked against ``allowed``."""
        value = self.data.get(name)
        if value is None:
            if required:
                raise self.error_class(f"{self.source}: missing section [{name}]")
            value = {}
        if not isinstance(value, Mapping):
            raise self.fail(name, None, f"[{name}] must be a table")
        table = Table(self, name, value)
        if allowed is not None:
            table.check_keys(allowed)
        return table

    def tables(self, name: str, *, allowed: set[str] | None = None) -> list["Table"]:
        """The entries of an array of tables ``[[name]]`` (a single ``[name]`` counts as one),
        each checked against ``allowed``."""
        value = self.data.get(name, [])
        if isinstance(value, Mapping):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, Mapping) for v in value):
            raise self.fail(name, None, f"{name} entries must be tables ([[{name}]] in TOML)")
        out = [Table(self, name, item, index) for index, item in enumerate(value)]
        for table in out:
            if allowed is not None:
                table.check_keys(allowed)
        return out


class Table(Mapping):
    """One table of a :class:`TomlDocument`: a read-only mapping with located, typed readers.

    Every reader returns ``default`` when the key is absent and raises the document's error
    class, located at the key, when the value has the wrong type.

    Examples
    --------
    >>> doc = parse_toml('[solver]\\nworkers = 2\\nchain = ["osqp", 3]\\n', source="c.toml")
    >>> solver = doc.table("solver")
    >>> solver.positive_int("workers"), solver.strings("passes", ())
    (2, ())
    >>> solver.strings("chain")
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: c.toml, line 3: [solver] chain must be a list of strings, e.g.
    ["a", "b"], not ['osqp', 3]
    >>> solver.check_keys({"workers"})
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: c.toml, line 3: unknown key 'chain' in [solver]; allowed:
    ['workers']
    """

    def __init__(self, document: TomlDocument, name: str, data: Mapping[str, Any],
                 index: int = 0):
        self.document = document
        self.name = name
        self.data = data
        self.index = index

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.data)

    def __len__(self) -> int:
        return len(self.data)

    def where(self, key: str | None = None) -> str:
        """``"FILE, line N"`` of ``key`` in this table (see :meth:`TomlDocument.where`)."""
        return self.document.where(self.name, key, self.index)

    def fail(self, key: str | None, message: str) -> Exception:
        """``"FILE, line N: message"`` at ``key`` (see :meth:`TomlDocument.fail`)."""
        return self.document.fail(self.name, key, message, self.index)

    def error(self, key: str | None, problem: str) -> Exception:
        """``"FILE, line N: [table] problem"`` at ``key`` (see :meth:`TomlDocument.error`)."""
        return self.document.error(self.name, key, problem, self.index)

    def located(self, key: str | None, build: Callable[[], T],
                catch: tuple[type[Exception], ...] = (HierarchyError,)) -> T:
        """``build()``, its errors located at ``key`` (see :meth:`TomlDocument.located`)."""
        return self.document.located(self.name, key, build, self.index, catch)

    def check_keys(self, allowed: set[str]) -> None:
        """Refuse a key not in ``allowed``, at its line, listing the allowed keys."""
        extra = sorted(set(self.data) - set(allowed))
        if extra:
            raise self.fail(extra[0], f"unknown key {extra[0]!r} in [{self.name}]; allowed: "
                                      f"{sorted(allowed)}")

    # -- typed readers -------------------------------------------------------------------------
    def boolean(self, key: str, default: Any = None) -> Any:
        """A TOML boolean (``true``/``false``); a string such as ``"false"`` is an error,
        never read as true."""
        value = self.data.get(key, default)
        if key not in self.data or isinstance(value, bool):
            return value
        raise self.error(key, f"{key} must be true or false (a TOML boolean, without quotes), "
                              f"not {value!r}")

    def positive_int(self, key: str, default: Any = None) -> Any:
        """A whole number ≥ 1 (not a float, not a boolean)."""
        value = self.data.get(key, default)
        if key not in self.data or (isinstance(value, int) and not isinstance(value, bool)
                                    and value >= 1):
            return value
        raise self.error(key, f"{key} must be a positive integer, e.g. {key} = 2, not "
                              f"{value!r}")

    def string(self, key: str, default: Any = None) -> Any:
        """A non-empty string."""
        value = self.data.get(key, default)
        if key not in self.data or (isinstance(value, str) and value.strip()):
            return value
        raise self.error(key, f"{key} must be a non-empty string, not {value!r}")

    def path(self, key: str, default: Any = None, *, base: str | Path = ".") -> Path | None:
        """A path string, resolved relative to ``base`` (the config file's directory);
        ``default`` (resolved too) when absent, ``None`` when that is ``None``."""
        value = self.data.get(key, default)
        if value is None:
            return None
        if not isinstance(value, str) or not value.strip():
            raise self.error(key, f"{key} must be a non-empty path string, e.g. {key} = "
                                  f"\"path/to/file\", not {value!r}")
        return (Path(base) / value).resolve()

    def strings(self, key: str, default: Any = None) -> Any:
        """A non-empty list of strings, as a tuple."""
        value = self.data.get(key, default)
        if key not in self.data:
            return value
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            return tuple(value)
        raise self.error(key, f"{key} must be a list of strings, e.g. [\"a\", \"b\"], not "
                              f"{value!r}")


# ---------------------------------------------------------------------------------------------
# reading
# ---------------------------------------------------------------------------------------------
def parse_toml(text: str, *, source: str = "<config>",
               error: type[Exception] = HierarchyError) -> TomlDocument:
    """Parse TOML text; a syntax error names ``source`` and keeps tomllib's line and column.

    Examples
    --------
    >>> parse_toml("[a]\\nb = 1\\n").data
    {'a': {'b': 1}}
    >>> parse_toml("[a]\\nb = \\n", source="x.toml")
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: x.toml: invalid TOML: Invalid value (at line 2, column 5)

    A UTF-8 byte-order mark (which some editors write first) is not part of the text:

    >>> parse_toml("\\ufeff[a]\\nb = 1\\n").data
    {'a': {'b': 1}}
    """
    text = text.removeprefix("\ufeff")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{source}: invalid TOML: {exc}") from None
    return TomlDocument(data, text, source=source, error=error)


def read_toml(path: str | Path, *, what: str = "config file",
              error: type[Exception] = HierarchyError) -> TomlDocument:
    """Read and parse a TOML file.

    Parameters
    ----------
    path : str or Path
    what : str, optional
        What the file is, for messages (``"config file"``, ``"spec file"``).
    error : type of Exception, optional

    Returns
    -------
    TomlDocument
        With ``source`` the path as given.

    Raises
    ------
    error
        If the file does not exist, is not a regular file (a directory, or a named pipe or
        device, which could block the read forever), is not UTF-8 text or not TOML.

    Examples
    --------
    >>> read_toml("no/such.toml", what="spec file")
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: spec file no/such.toml does not exist
    >>> import tempfile
    >>> read_toml(tempfile.mkdtemp())                                   # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: config file ... is not a regular file: it is a directory; give
    the path of a .toml file
    """
    from hierarchy.io.storage import special_file_kind

    path = Path(path)
    kind = special_file_kind(path)   # a FIFO or device would block the read forever
    if kind is not None:
        raise error(f"{what} {path} is not a regular file: it is {kind}; give the path of a "
                    ".toml file")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise error(f"{what} {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"{what} {path} cannot be read as UTF-8 text: "
                    f"{getattr(exc, 'strerror', None) or exc}") from None
    return parse_toml(text, source=str(path), error=error)


# ---------------------------------------------------------------------------------------------
# [randomness]
# ---------------------------------------------------------------------------------------------
def randomness_problem(mode: Any, seed: Any) -> tuple[str, str] | None:
    """What is wrong with a randomness ``mode`` and ``seed``, as ``(key, message)``; ``None``
    when they fit: ``"release"`` takes no seed, ``"simulation"`` needs a non-negative integer.

    Examples
    --------
    >>> randomness_problem("simulation", 3) is None, randomness_problem("release", None) is None
    (True, True)
    >>> randomness_problem("release", 3)
    ('seed', 'release mode cannot be seeded; remove seed or use mode = "simulation"')
    >>> randomness_problem("simulation", None)[0]       # no seed: the mode asks for one
    'mode'
    """
    if mode not in RANDOMNESS_MODES:
        return "mode", ("mode must be \"release\" (cryptographically secure, unseedable) or "
                        "\"simulation\" (seeded, NOT safe for releases)"
                        + (f", not {mode!r}" if mode is not None else ""))
    if mode == "release" and seed is not None:
        return "seed", "release mode cannot be seeded; remove seed or use mode = \"simulation\""
    if mode == "simulation" and (not isinstance(seed, int) or isinstance(seed, bool)
                                 or seed < 0):
        return ("seed" if seed is not None else "mode",
                "simulation mode needs seed = <non-negative integer>"
                + (f", not {seed!r}" if seed is not None else ""))
    return None


def check_randomness(mode: Any, seed: Any, *, error: type[Exception] = HierarchyError) -> None:
    """Raise ``error`` with :func:`randomness_problem`'s message, if any (for Python callers).

    Examples
    --------
    >>> check_randomness("testing", None)
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: mode must be "release" (cryptographically secure, unseedable)
    or "simulation" (seeded, NOT safe for releases), not 'testing'
    """
    problem = randomness_problem(mode, seed)
    if problem is not None:
        raise error(problem[1])


def read_randomness(table: Table, *, default_mode: str | None = None) -> tuple[str, int | None]:
    """``(mode, seed)`` of a ``[randomness]`` table, each problem located at its key.

    Examples
    --------
    >>> doc = parse_toml('[randomness]\\nmode = "release"\\nseed = 3\\n', source="c.toml")
    >>> read_randomness(doc.table("randomness"))
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: c.toml, line 3: [randomness] release mode cannot be seeded;
    remove seed or use mode = "simulation"
    >>> read_randomness(parse_toml("").table("randomness"), default_mode="release")
    ('release', None)
    """
    mode, seed = table.get("mode", default_mode), table.get("seed")
    problem = randomness_problem(mode, seed)
    if problem is not None:
        raise table.error(*problem)
    return mode, seed


# ---------------------------------------------------------------------------------------------
# writing
# ---------------------------------------------------------------------------------------------
def _key(key: Any) -> str:
    key = str(key)
    return key if _BARE_KEY.match(key) else json.dumps(key, ensure_ascii=False)


def _value(value: Any, error: type[Exception]) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, (str, Path)):
        return json.dumps(str(value), ensure_ascii=False)
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f"{_key(k)} = {_value(v, error)}"
                                for k, v in value.items()) + " }" if value else "{}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_value(v, error) for v in value) + "]"
    raise error(f"cannot write {value!r} ({type(value).__name__}) as TOML: use strings, "
                "numbers, booleans, lists and tables")


def _is_table_array(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and bool(value) and all(
        isinstance(v, Mapping) for v in value)


def _emit(prefix: str, data: Mapping[str, Any], out: list[str], error: type[Exception]) -> None:
    for key, value in data.items():
        if value is None:
            continue
        if not isinstance(value, Mapping) and not _is_table_array(value):
            out.append(f"{_key(key)} = {_value(value, error)}")
    for key, value in data.items():
        name = f"{prefix}.{_key(key)}" if prefix else _key(key)
        if isinstance(value, Mapping):
            scalars = [v for v in value.values()
                       if v is not None and not isinstance(v, Mapping)
                       and not _is_table_array(v)]
            if scalars or not value:
                out.extend(["", f"[{name}]"])
            _emit(name, value, out, error)
        elif _is_table_array(value):
            for item in value:
                out.extend(["", f"[[{name}]]"])
                _emit(name, item, out, error)


def dumps(data: Mapping[str, Any], *, error: type[Exception] = HierarchyError) -> str:
    """TOML text of a mapping of strings, numbers, booleans, lists and tables (``None``
    values are left out), such that ``tomllib.loads(dumps(data))`` gives ``data`` back.

    Examples
    --------
    >>> data = {"data": {"persons": "p.parquet"}, "budget": {"total": 1.0, "kind": "pure"},
    ...         "spec": {"invariant": [{"name": "tot", "levels": ["nation"]}]}}
    >>> print(dumps(data))
    [data]
    persons = "p.parquet"
    <BLANKLINE>
    [budget]
    total = 1.0
    kind = "pure"
    <BLANKLINE>
    [[spec.invariant]]
    name = "tot"
    levels = ["nation"]
    <BLANKLINE>
    >>> tomllib.loads(dumps(data)) == data
    True
    """
    out: list[str] = []
    _emit("", data, out, error)
    while out and out[0] == "":
        out.pop(0)
    return "\n".join(out) + "\n"

