"""An IPUMS USA 1940 extract (DDI codebook + fixed-width data) in the E2E layout.

IPUMS USA distributes the 1940 full count (132 million persons) as an *extract*: a DDI XML
codebook (``usa_00001.xml``) and a fixed-width data file (``usa_00001.dat`` or ``.dat.gz``),
rectangular (every line a person, the household's variables repeated) or hierarchical (a
household line ``H`` followed by its persons' lines ``P``). The codebook is read by IPUMS's own
library, :mod:`ipumspy` (``read_ipums_ddi``); the data are read here, a block of lines at a time,
with every line checked against the codebook's record length, and recoded into the schema of the
2018 end-to-end test, :data:`hierarchy.schema.E2E_1940` — the persons and units tables that
:func:`hierarchy.synth.synthesize_1940` makes, so every reader and command of the toolkit takes
them. The recodes (``docs/data.md``, "Real data: an IPUMS USA 1940 extract") are those of the
Census Bureau's own E2E 1940 reader:

* ``hhgq`` from ``GQTYPE``: codes 0, 2, 3, 4, 6, 7, 8, 9 → 0 … 7 (:data:`GQTYPE_TO_HHGQ`); with
  ``hhgq_rule="gq"``, ``GQ`` 1, 2, 5 (households) → 0 whatever ``GQTYPE`` says;
* ``votingage`` from ``AGE`` ≥ 18; ``hispanic`` from ``HISPAN`` 1–4; ``cenrace`` from ``RACE``
  1–6 → 0–5, with 7 (other race, n.e.c.) → 5 (:data:`RACE_TO_CENRACE`);
* geocodes: state ``STATEFIP``; county ``STATEFIP`` + ``COUNTYICP``; ED county + ``ENUMDIST``,
  each the file's digits, so unique within its level;
* units: one per household serial number (``SERIAL``) with persons — occupied housing units and
  group-quarters facilities, typed by their persons' ``hhgq``.

A code with no E2E level (``RACE`` 8, ``HISPAN`` 9, ``GQTYPE`` 1 …) stops the read, naming the
variable, the code and the line; the public part of the error names the variable only.

Examples
--------
A two-person extract: a household in Alabama's county 0010, ED 0001.

>>> import tempfile
>>> from hierarchy.io.ipums_extract import write_ipums_extract
>>> d = Path(tempfile.mkdtemp())
>>> ddi = write_ipums_extract(d, {"SERIAL": [1, 1], "STATEFIP": [1, 1], "COUNTYICP": [10, 10],
...                               "ENUMDIST": [1, 1], "GQ": [1, 1], "GQTYPE": [0, 0],
...                               "AGE": [40, 9], "HISPAN": [0, 0], "RACE": [2, 2]})
>>> data = read_ipums_1940(ddi)
>>> data.persons.to_pydict()["enum_dist"], data.persons.to_pydict()["votingage"]
(['0100100000001', '0100100000001'], [1, 0])
>>> data.units.num_rows
1
"""

from __future__ import annotations

import gzip
import json
import os
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from hierarchy.errors import HierarchyError
from hierarchy.io.ipums_records import (
    _PERSONS_SCHEMA,
    _UNITS_SCHEMA,
    DEFAULT_COLUMNS,
    GQ_GROUP_QUARTERS,
    GQ_HOUSEHOLD,
    GQTYPE_TO_HHGQ,
    HISPAN_TO_HISPANIC,
    LEVELS,
    RACE_TO_CENRACE,
    _block,
    _Carry,
    _check_split_households,
    _Codebook,
    _Variable,
)
from hierarchy.io.replace import check_parquet_replaceable
from hierarchy.io.storage import atomic_path, special_file_kind

__all__ = ["read_ipums_1940", "write_ipums_1940_parquet", "Ipums1940", "MADE_BY",
           "DEFAULT_COLUMNS", "GQTYPE_TO_HHGQ", "RACE_TO_CENRACE", "HISPAN_TO_HISPANIC",
           "GQ_HOUSEHOLD", "GQ_GROUP_QUARTERS", "LEVELS"]

#: The ``made_by`` of the JSON metadata (parquet key ``b"dapp"``) of the files written by
#: :func:`write_ipums_1940_parquet`.
MADE_BY = "postproc ipums1940"

_RULES = ("e2e", "gq")
_BLOCK_LINES = 1_000_000


@dataclass(frozen=True)
class Ipums1940:
    """An IPUMS 1940 extract in the E2E layout, held in memory.

    Attributes
    ----------
    persons : pyarrow.Table
        One row per person in the file's order: ``state, county, enum_dist`` (dictionary-encoded
        geocodes) and ``hhgq, votingage, hispanic, cenrace`` (int8 codes of
        :data:`~hierarchy.schema.E2E_1940`) — the layout of
        :class:`hierarchy.synth.census1940.Synthetic1940`.
    units : pyarrow.Table
        One row per household serial number with persons: ``state, county, enum_dist, hhgq``.
    citation : str
        How IPUMS asks to be cited (from the codebook): cite it in what you publish.

    Examples
    --------
    >>> import tempfile
    >>> from hierarchy.io.ipums_extract import write_ipums_extract
    >>> ddi = write_ipums_extract(tempfile.mkdtemp(), {
    ...     "SERIAL": [7], "STATEFIP": [56], "COUNTYICP": [10], "ENUMDIST": [3], "GQ": [3],
    ...     "GQTYPE": [2], "AGE": [30], "HISPAN": [1], "RACE": [7]})
    >>> read_ipums_1940(ddi).units.to_pydict()
    {'state': ['56'], 'county': ['560010'], 'enum_dist': ['5600100000003'], 'hhgq': [1]}
    """

    persons: pa.Table
    units: pa.Table
    citation: str = ""


def read_ipums_1940(ddi: str | os.PathLike, data: str | os.PathLike | None = None, *,
                    columns: Mapping[str, str] | None = None, hhgq_rule: str = "e2e",
                    chunksize: int = _BLOCK_LINES, progress: bool = False) -> Ipums1940:
    """Read an IPUMS USA 1940 extract into E2E persons and units tables, in memory.

    Parameters
    ----------
    ddi : path
        The extract's DDI codebook (``usa_NNNNN.xml``; also ``.xml.gz``, a ``.zip`` or a
        directory holding one XML file, as :func:`ipumspy.readers.read_ipums_ddi` accepts).
    data : path, optional
        The fixed-width data file (``.dat`` or ``.dat.gz``); default the codebook's file name
        beside the codebook, with or without ``.gz``.
    columns : mapping, optional
        Role → IPUMS variable, over :data:`DEFAULT_COLUMNS` (e.g. ``{"county": "COUNTYNHG"}``).
    hhgq_rule : {"e2e", "gq"}
        ``"e2e"``: ``hhgq`` from ``GQTYPE`` alone (:data:`GQTYPE_TO_HHGQ`), as the Census
        Bureau's E2E 1940 reader did. ``"gq"``: persons with ``GQ`` in :data:`GQ_HOUSEHOLD` are
        in households (0) whatever their ``GQTYPE``; those in :data:`GQ_GROUP_QUARTERS` are typed
        by ``GQTYPE``, which must then not be 0.
    chunksize : int
        Lines read at a time (a block is ``chunksize`` times the longest record, with its
        newline, in bytes).
    progress : bool
        Show a progress bar (tqdm, on stderr) over the data file's bytes.

    Returns
    -------
    Ipums1940

    Raises
    ------
    HierarchyError
        A codebook that cannot be read, lacks a variable (naming it and the codebook), or
        describes a CSV extract; a bad option.
    ConfidentialDataError
        The data do not match the codebook (a line's length, a field that is not a number), a
        code with no E2E level, a household whose persons disagree on its place or type, a
        household split in two, a record not of 1940. The full message names the file, line,
        variable and code; the public one the variable and the rule.

    Examples
    --------
    >>> import tempfile
    >>> from hierarchy.io.ipums_extract import write_ipums_extract
    >>> ddi = write_ipums_extract(tempfile.mkdtemp(), {
    ...     "SERIAL": [1, 2], "STATEFIP": [1, 1], "COUNTYICP": [10, 10], "ENUMDIST": [1, 1],
    ...     "GQ": [1, 1], "GQTYPE": [0, 0], "AGE": [40, 9], "HISPAN": [0, 9], "RACE": [1, 1]})
    >>> read_ipums_1940(ddi)
    Traceback (most recent call last):
    ...
    hierarchy.errors.ConfidentialDataError: .../usa_00001.dat line 2: HISPAN code 9 (Not
    Reported) has no level of the E2E schema's hispanic; the codes it takes are 0, 1, 2, 3, 4
    """
    chosen = _columns(columns)
    codebook = _codebook(ddi, chosen, hhgq_rule)
    blocks = list(_stream(codebook, data, chosen, hhgq_rule, chunksize, progress, _Carry()))
    if not blocks:
        raise _no_persons(codebook)
    return Ipums1940(_concat([p for p, _ in blocks], _PERSONS_SCHEMA),
                     _concat([u for _, u in blocks], _UNITS_SCHEMA), codebook.citation)


def write_ipums_1940_parquet(ddi: str | os.PathLike, data: str | os.PathLike | None,
                             out_dir: str | os.PathLike, *,
                             columns: Mapping[str, str] | None = None, hhgq_rule: str = "e2e",
                             chunksize: int = _BLOCK_LINES, progress: bool = False,
                             overwrite: bool = False) -> dict[str, Any]:
    """Stream an IPUMS USA 1940 extract to ``out_dir/persons.parquet`` and ``units.parquet``.

    The rows, options and errors are those of :func:`read_ipums_1940`; memory is one block of
    ``chunksize`` lines (one row group each) and the serial numbers of the units (8 bytes a
    unit). Both files are written under temporary names and moved into place only when the whole
    extract has been read, with the toolkit's JSON metadata under the parquet key ``b"dapp"``
    (:data:`MADE_BY`, the codebook, the options, IPUMS's citation). An existing file is replaced
    only if the toolkit wrote it and ``overwrite`` is true. The files are what a run
    configuration's ``[data] persons`` and ``units`` read (``docs/data.md``).

    Parameters
    ----------
    ddi, data, columns, hhgq_rule, chunksize, progress
        As for :func:`read_ipums_1940` (``data`` may be ``None``).
    out_dir : path
        Output directory (created if missing).
    overwrite : bool
        Replace ``persons.parquet`` and ``units.parquet`` written earlier by the toolkit.

    Returns
    -------
    dict
        ``persons, households, gq_facilities, states, counties, enum_dists, lines`` (counts),
        ``seconds``, ``persons_per_second``, ``persons_path``, ``units_path`` and ``citation``.

    Raises
    ------
    HierarchyError, ConfidentialDataError
        As :func:`read_ipums_1940`; or an output file that exists and was not written by the
        toolkit, or ``overwrite`` is false.

    Examples
    --------
    >>> import tempfile
    >>> from hierarchy.io.ipums_extract import write_ipums_extract
    >>> d = Path(tempfile.mkdtemp())
    >>> ddi = write_ipums_extract(d, {
    ...     "SERIAL": [1, 1, 2], "STATEFIP": [1, 1, 1], "COUNTYICP": [10, 10, 30],
    ...     "ENUMDIST": [1, 1, 5], "GQ": [1, 1, 4], "GQTYPE": [0, 0, 6], "AGE": [40, 9, 20],
    ...     "HISPAN": [0, 0, 0], "RACE": [1, 1, 1]}, compress=True)
    >>> summary = write_ipums_1940_parquet(ddi, None, d / "e2e")
    >>> summary["persons"], summary["households"], summary["gq_facilities"], summary["counties"]
    (3, 1, 1, 2)
    >>> pq.read_table(summary["units_path"]).column("hhgq").to_pylist()
    [0, 4]
    """
    started = time.perf_counter()
    chosen = _columns(columns)
    codebook = _codebook(ddi, chosen, hhgq_rule)
    if not isinstance(out_dir, (str, os.PathLike)):
        raise HierarchyError(f"out_dir must be a directory path, not {type(out_dir).__name__}")
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise HierarchyError(f"cannot create output directory {str(out)!r}: {exc}") from exc
    final = {"persons": out / "persons.parquet", "units": out / "units.parquet"}
    for path in final.values():
        check_parquet_replaceable(path, overwrite=overwrite)
    carry = _Carry()
    meta = {"made_by": MADE_BY, "ddi": str(codebook.path), "hhgq_rule": hhgq_rule,
            "columns": chosen, "citation": codebook.citation}
    schemas = {k: s.with_metadata({b"dapp": json.dumps({**meta, "table": k}).encode()})
               for k, s in (("persons", _PERSONS_SCHEMA), ("units", _UNITS_SCHEMA))}
    counts = dict(persons=0, households=0, gq_facilities=0, lines=0)
    with atomic_path(final["persons"]) as tmp_persons, atomic_path(final["units"]) as tmp_units:
        with pq.ParquetWriter(tmp_persons, schemas["persons"]) as person_writer, \
                pq.ParquetWriter(tmp_units, schemas["units"]) as unit_writer:
            for persons, units in _stream(codebook, data, chosen, hhgq_rule, chunksize,
                                          progress, carry):
                person_writer.write_table(persons.replace_schema_metadata(
                    schemas["persons"].metadata))
                unit_writer.write_table(units.replace_schema_metadata(schemas["units"].metadata))
                households = int(np.count_nonzero(units.column("hhgq").to_numpy() == 0))
                counts["persons"] += persons.num_rows
                counts["households"] += households
                counts["gq_facilities"] += units.num_rows - households
        if counts["persons"] == 0:
            raise _no_persons(codebook)
    seconds = time.perf_counter() - started
    counts["lines"] = carry.lines
    return {**counts, "states": len(carry.states), "counties": len(carry.counties),
            "enum_dists": len(carry.eds), "seconds": seconds,
            "persons_per_second": counts["persons"] / max(seconds, 1e-9),
            "persons_path": str(final["persons"]), "units_path": str(final["units"]),
            "citation": codebook.citation}


# ---------------------------------------------------------------------------------------------
# the codebook
# ---------------------------------------------------------------------------------------------
def _columns(columns: Mapping[str, str] | None) -> dict[str, str]:
    """:data:`DEFAULT_COLUMNS` with the caller's roles replaced (unknown roles refused)."""
    given = dict(columns or {})
    unknown = sorted(set(given) - set(DEFAULT_COLUMNS))
    if unknown:
        raise HierarchyError(f"columns names the roles {unknown}; the roles are "
                             f"{sorted(DEFAULT_COLUMNS)}")
    bad = sorted(k for k, v in given.items() if not isinstance(v, str) or not v)
    if bad:
        raise HierarchyError(f"columns must map each role to an IPUMS variable name (a string); "
                             f"got {', '.join(f'{k}={given[k]!r}' for k in bad)}")
    return {**DEFAULT_COLUMNS, **{k: v.upper() for k, v in given.items()}}


def _roles(chosen: Mapping[str, str], hhgq_rule: str) -> dict[str, str]:
    """The roles read: all but ``gq`` under the E2E rule."""
    return {k: v for k, v in chosen.items() if k != "gq" or hhgq_rule == "gq"}


def _codebook(ddi: str | os.PathLike, chosen: Mapping[str, str], hhgq_rule: str) -> _Codebook:
    """Read the DDI with :mod:`ipumspy`; check it describes a fixed-width extract with every
    variable the roles need, on the right record type."""
    if hhgq_rule not in _RULES:
        raise HierarchyError(f"hhgq_rule must be one of {', '.join(_RULES)}, not {hhgq_rule!r}")
    if not isinstance(ddi, (str, os.PathLike)):
        raise HierarchyError(f"ddi must be the path of the extract's DDI codebook (.xml), not "
                             f"{type(ddi).__name__}")
    path = Path(ddi)
    if not path.exists():
        raise HierarchyError(f"{path}: the DDI codebook does not exist")
    from ipumspy.readers import CitationWarning, read_ipums_ddi

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CitationWarning)     # kept: Ipums1940.citation
            book = read_ipums_ddi(path)
    except (OSError, ValueError, SyntaxError, AttributeError, KeyError, IndexError,
            TypeError, NotImplementedError) as exc:
        raise HierarchyError(f"{path}: cannot be read as an IPUMS DDI codebook "
                             f"({type(exc).__name__}: {exc}); give the .xml file IPUMS "
                             "delivered with the extract") from None
    described = book.file_description
    if "fixed" not in (described.format or "").lower():
        raise HierarchyError(f"{path}: the codebook describes a {described.format!r} extract; "
                             "request the fixed-width text (.dat) format on the IPUMS website")
    variables = {}
    for v in book.data_description:
        labels = {}
        for label, value in v.codes.items():
            try:
                labels[int(value)] = label
            except (TypeError, ValueError):
                pass
        variables[v.name.upper()] = _Variable(v.name.upper(), v.start, v.end - v.start,
                                              frozenset(v.rectype.split()), labels)
    hierarchical = described.structure == "hierarchical"
    _check_variables(path, variables, _roles(chosen, hhgq_rule), hierarchical, described)
    rectype = variables.get(described.rectype_idvar.upper()) if hierarchical else None
    if hierarchical:
        lengths = {t: max(v.start + v.width for v in variables.values() if t in v.rectypes)
                   for t in described.rectypes}
    else:
        lengths = {"": max(v.start + v.width for v in variables.values())}
    return _Codebook(path, hierarchical, variables, rectype, lengths, described.filename,
                     (book.ipums_citation or "").strip())


def _check_variables(path: Path, variables: Mapping[str, _Variable], roles: Mapping[str, str],
                     hierarchical: bool, described) -> None:
    """Every role's variable is in the codebook (and on a person or household record)."""
    missing = [(role, name) for role, name in roles.items() if name not in variables]
    if missing:
        names = ", ".join(f"{name} (the {role})" for role, name in missing)
        raise HierarchyError(
            f"{path}: the codebook has no variable {names}; add "
            f"{'it' if len(missing) == 1 else 'them'} to the extract on the IPUMS website "
            "(docs/data.md lists the variables to select), or name the extract's variable "
            f"with columns={{{missing[0][0]!r}: ...}}")
    if not hierarchical:
        return
    if "P" not in described.rectypes or described.rectype_idvar.upper() not in variables:
        raise HierarchyError(f"{path}: a hierarchical extract without person records (record "
                             f"type P) or without its record-type variable "
                             f"({described.rectype_idvar or 'none named'}); its record types are "
                             f"{described.rectypes}")
    stray = [name for name in roles.values() if not variables[name].rectypes & {"P", "H"}]
    if stray:
        raise HierarchyError(f"{path}: {', '.join(stray)} is on neither the person (P) nor the "
                             "household (H) records")


def _data_path(codebook: _Codebook, data: str | os.PathLike | None) -> Path:
    """The data file: as given, or the codebook's file name beside it; with or without .gz."""
    path = Path(data) if data is not None else codebook.path.parent / codebook.data_file
    if not path.exists():
        other = path.with_suffix("") if path.suffix == ".gz" else Path(f"{path}.gz")
        if not other.exists():
            said = "given" if data is not None else f"named by {codebook.path.name}"
            raise HierarchyError(f"{path}: the data file ({said}) does not exist, nor {other}")
        path = other
    kind = special_file_kind(path)
    if kind is not None:
        raise HierarchyError(f"{path} is not a regular file: it is {kind}; give the extract's "
                             ".dat or .dat.gz file")
    if any(s in (".csv", ".parquet", ".dta", ".sav", ".sas7bdat") for s in path.suffixes):
        raise HierarchyError(f"{path}: only fixed-width extracts (.dat, .dat.gz) are read; "
                             "request that format on the IPUMS website")
    return path


# ---------------------------------------------------------------------------------------------
# the data, a block of lines at a time
# ---------------------------------------------------------------------------------------------
def _stream(codebook: _Codebook, data, chosen: Mapping[str, str], hhgq_rule: str,
            chunksize: int, progress: bool, carry: _Carry
            ) -> Iterator[tuple[pa.Table, pa.Table]]:
    """(persons, units) per block of the data file with persons (``carry.lines`` counts the
    lines read); then the check that no household's persons are split in two runs."""
    if isinstance(chunksize, bool) or not isinstance(chunksize, (int, np.integer)) \
            or chunksize < 1:
        raise HierarchyError(f"chunksize must be a positive number of lines, not {chunksize!r}")
    path = _data_path(codebook, data)
    roles = _roles(chosen, hhgq_rule)
    if "YEAR" in codebook.variables and "YEAR" not in roles.values():
        roles = {**roles, "year": "YEAR"}
    bar = None
    if progress:
        from tqdm import tqdm
        bar = tqdm(total=path.stat().st_size, unit="B", unit_scale=True, desc=path.name)
    line = 1
    block_bytes = int(chunksize) * (max(codebook.lengths.values()) + 1)
    try:
        for buf in _blocks(path, block_bytes, bar):
            persons, units, n_lines = _block(buf, line, codebook, roles, hhgq_rule, carry,
                                             str(path))
            line += n_lines
            carry.lines = line - 1
            if persons.num_rows:
                yield persons, units
        _check_split_households(carry, str(path))
    finally:
        if bar is not None:
            bar.close()


def _blocks(path: Path, block_bytes: int, bar) -> Iterator[np.ndarray]:
    """The file's bytes in blocks of whole lines (each ending in a newline)."""
    import zlib

    with open(path, "rb") as raw:
        compressed = raw.read(2) == b"\x1f\x8b"
        raw.seek(0)
        stream = gzip.GzipFile(fileobj=raw) if compressed else raw
        rest, done = b"", 0
        while True:
            try:
                chunk = stream.read(block_bytes)
            except (OSError, EOFError, zlib.error) as exc:
                raise HierarchyError(f"{path}: cannot be read ({exc}); is the download "
                                     "complete?") from None
            if bar is not None:
                bar.update(raw.tell() - done)
                done = raw.tell()
            if not chunk:
                if rest:
                    yield np.frombuffer(rest + b"\n", np.uint8)
                return
            chunk = rest + chunk
            cut = chunk.rfind(b"\n") + 1
            rest = chunk[cut:]
            if cut:
                yield np.frombuffer(chunk, np.uint8, count=cut)


def _concat(tables: list[pa.Table], schema: pa.Schema) -> pa.Table:
    """Blocks → one table whose geocode columns have one dictionary each."""
    return pa.concat_tables(tables).unify_dictionaries().combine_chunks().cast(schema)


def _no_persons(codebook: _Codebook) -> HierarchyError:
    return HierarchyError(f"{codebook.path}: the extract's data file has no person records")
