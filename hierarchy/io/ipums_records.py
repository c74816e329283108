"""IPUMS USA 1940 records → the E2E layout: the recodes, and the checks that name the line.

The reader (:mod:`hierarchy.io.ipums`) hands this module a block of whole lines of a
fixed-width extract and what the codebook says of them; it finds each line's record type and
length, reads each role's field on the person lines (a household variable of a hierarchical
extract from the household line before them), recodes them into
:data:`~hierarchy.schema.E2E_1940` and cuts the persons into units. The mapping (the
Census Bureau's E2E 1940 reader, ``docs/data.md``):

==========  ======================  ==========================================================
E2E         IPUMS                   codes
==========  ======================  ==========================================================
hhgq        ``GQTYPE`` (``GQ``)     :data:`GQTYPE_TO_HHGQ` (``hhgq_rule="gq"``: ``GQ`` in
                                    :data:`GQ_HOUSEHOLD` → 0)
votingage   ``AGE``                 ≥ 18 → 1
hispanic    ``HISPAN``              :data:`HISPAN_TO_HISPANIC`
cenrace     ``RACE``                :data:`RACE_TO_CENRACE`
geocodes    ``STATEFIP``,           state; state + county; state + county + ED (the file's
            ``COUNTYICP``,          digits, a space read as 0)
            ``ENUMDIST``
==========  ======================  ==========================================================

Examples
--------
>>> sorted(GQTYPE_TO_HHGQ.items())[:4], RACE_TO_CENRACE[7], HISPAN_TO_HISPANIC[3]
([(0, 0), (2, 1), (3, 2), (4, 3)], 5, 1)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

import numpy as np
import pyarrow as pa

from hierarchy.errors import ConfidentialDataError

__all__ = ["DEFAULT_COLUMNS", "GQTYPE_TO_HHGQ", "RACE_TO_CENRACE", "HISPAN_TO_HISPANIC",
           "GQ_HOUSEHOLD", "GQ_GROUP_QUARTERS", "LEVELS"]

#: The IPUMS variable read for each role: the geography's levels, the schema's attributes, ``gq``
#: (household or group quarters, for ``hhgq_rule="gq"``) and ``unit`` (the household serial
#: number). ``columns={"county": "COUNTYNHG"}`` reads another variable for a role.
DEFAULT_COLUMNS = {"state": "STATEFIP", "county": "COUNTYICP", "enum_dist": "ENUMDIST",
                   "hhgq": "GQTYPE", "votingage": "AGE", "hispanic": "HISPAN",
                   "cenrace": "RACE", "gq": "GQ", "unit": "SERIAL"}
#: IPUMS ``GQTYPE`` (general) → E2E ``hhgq``: the Census Bureau's E2E 1940 recode (codes 1 and 5
#: do not occur in 1940; the others are shifted down to 0-7). The DAS names the levels household,
#: correctional, mental institutions, institutions for the elderly, handicapped and poor,
#: military, college dormitory, rooming house, other non-institutional GQ and unknown.
GQTYPE_TO_HHGQ = {0: 0, 2: 1, 3: 2, 4: 3, 6: 4, 7: 5, 8: 6, 9: 7}
#: IPUMS ``RACE`` (general) → E2E ``cenrace`` (white, black, American Indian, Chinese, Japanese,
#: other): 1-6 shifted down; 7 (other race, n.e.c.) joins 6 (other Asian or Pacific Islander) in
#: "other". 8 and 9 (two or three major races) have no level.
RACE_TO_CENRACE = {1: 0, 2: 1, 3: 2, 4: 3, 5: 4, 6: 5, 7: 5}
#: IPUMS ``HISPAN`` (general) → E2E ``hispanic``: 0 not Hispanic; 1-4 Mexican, Puerto Rican,
#: Cuban, other Hispanic. 9 (not reported) has no level.
HISPAN_TO_HISPANIC = {0: 0, 1: 1, 2: 1, 3: 1, 4: 1}
#: IPUMS ``GQ`` codes of households (1970, 1990 and 2000 definitions) and of group quarters
#: (institutions, other group quarters), for ``hhgq_rule="gq"``.
GQ_HOUSEHOLD = (1, 2, 5)
GQ_GROUP_QUARTERS = (3, 4)
#: The geography levels of the tables, root first.
LEVELS = ("nation", "state", "county", "enum_dist")
_GEOCODE = pa.dictionary(pa.int32(), pa.string())
_ATTRIBUTES = ("hhgq", "votingage", "hispanic", "cenrace")
_PERSONS_SCHEMA = pa.schema([(n, _GEOCODE) for n in LEVELS[1:]]
                            + [(n, pa.int8()) for n in _ATTRIBUTES])
_UNITS_SCHEMA = pa.schema([(n, _GEOCODE) for n in LEVELS[1:]] + [("hhgq", pa.int8())])


@dataclass(frozen=True)
class _Variable:
    name: str
    start: int                      # 0-based
    width: int
    rectypes: frozenset[str]        # empty in a rectangular extract
    labels: dict[int, str]          # the codebook's categories


@dataclass(frozen=True)
class _Codebook:
    """What the reader needs from a DDI: its variables, record layout and citation."""

    path: Path
    hierarchical: bool
    variables: dict[str, _Variable]
    rectype: _Variable | None       # the record-type variable of a hierarchical extract
    lengths: dict[str, int]         # record length per record type ("" when rectangular)
    data_file: str
    citation: str


@dataclass
class _Carry:
    """What a block hands to the next: the household line of a hierarchical extract, the last
    person's unit, and every unit's serial number seen (to find a household split in two)."""

    household: dict[str, tuple[np.ndarray, int]] | None = None
    lines: int = 0
    serial: int | None = None
    place: bytes | None = None
    hhgq: int | None = None
    serials: list[np.ndarray] = field(default_factory=list)
    states: set = field(default_factory=set)
    counties: set = field(default_factory=set)
    eds: set = field(default_factory=set)


def _refuse(where: str, line: int, detail: str, public: str) -> ConfidentialDataError:
    return ConfidentialDataError(f"{where} line {line:,}: {detail}", public=public, source=where,
                                 role="persons")


def _block(buf: np.ndarray, first_line: int, codebook: _Codebook, roles: Mapping[str, str],
           hhgq_rule: str, carry: _Carry, where: str) -> tuple[pa.Table, pa.Table, int]:
    """One block of lines → its persons and units tables, and its number of lines."""
    ends = np.flatnonzero(buf == 10)
    starts = np.concatenate(([0], ends[:-1] + 1))
    crlf = np.zeros(ends.size, dtype=bool)
    has_chars = ends > starts
    crlf[has_chars] = buf[ends[has_chars] - 1] == 13
    lengths = ends - starts - crlf
    numbers = first_line + np.arange(ends.size)
    kinds = _record_kinds(buf, starts, lengths, numbers, codebook, where)
    person = kinds == b"P" if codebook.hierarchical else np.ones(ends.size, dtype=bool)
    values = _values(buf, starts, person, kinds, numbers, codebook, roles, carry, where)
    lines = numbers[person]
    if lines.size == 0:
        return pa.table({}), pa.table({}), ends.size
    attributes = _recode(values, lines, codebook, roles, hhgq_rule, where)
    return (*_tables(values, attributes, lines, carry, where), ends.size)


def _record_kinds(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray,
                  numbers: np.ndarray, codebook: _Codebook, where: str) -> np.ndarray:
    """Each line's record type as bytes (``b""`` in a rectangular extract), its length checked
    against the codebook's record length for that type."""
    expected = np.full(starts.size, codebook.lengths.get("", 0), dtype=np.int64)
    if not codebook.hierarchical:
        kinds = np.zeros(starts.size, dtype="S1")
    else:
        rt = codebook.rectype
        short = lengths < rt.start + rt.width
        at = np.minimum(starts[:, None] + rt.start + np.arange(rt.width), buf.size - 1)
        raw = np.where(short[:, None], 32, buf[at]).astype(np.uint8)
        kinds = np.ascontiguousarray(raw).view(f"S{rt.width}").ravel()
        known = np.zeros(starts.size, dtype=bool)
        for kind, length in codebook.lengths.items():     # a few record types
            mine = kinds == kind.ljust(rt.width).encode("latin-1")
            expected[mine] = length
            known |= mine
        if not known.all():
            i = int(np.flatnonzero(~known)[0])
            raise _refuse(where, int(numbers[i]),
                          f"record type {kinds[i].decode('latin-1')!r}, which "
                          f"{codebook.path.name} does not describe (its types are "
                          f"{sorted(codebook.lengths)}); is this the data file of that codebook?",
                          "a record's type is not one the codebook describes; is this the data "
                          "file of that codebook?")
    wrong = lengths != expected
    if wrong.any():
        i = int(np.flatnonzero(wrong)[0])
        kind = f" of type {kinds[i].decode('latin-1')}" if codebook.hierarchical else ""
        raise _refuse(where, int(numbers[i]),
                      f"{int(lengths[i])} characters, but {codebook.path.name} describes "
                      f"records{kind} of {int(expected[i])} ({int(wrong.sum()):,} such line(s) "
                      "in this block); is this the data file of that codebook, complete and "
                      "uncut?",
                      "a record's length does not match the codebook's layout; is this the "
                      "data file of that codebook?")
    return kinds


_GEOGRAPHY = ("state", "county", "enum_dist")


def _field(buf: np.ndarray, starts: np.ndarray, var: _Variable) -> np.ndarray:
    """The bytes of ``var`` on the lines starting at ``starts``: lines × width."""
    return buf[starts[:, None] + (var.start + np.arange(var.width))]


def _parse(raw: np.ndarray, role: str, var: _Variable, lines: np.ndarray,
           where: str) -> np.ndarray:
    """A geography role's text (bytes; spaces read as zeros) or any other role's integers
    (leading spaces allowed, as in a right-justified number)."""
    space = raw == 32
    leading = np.logical_and.accumulate(space, axis=1)
    if leading.size and leading[:, -1].any():
        i = int(np.flatnonzero(leading[:, -1])[0])
        raise _refuse(where, int(lines[i]), f"{var.name} (the {role}) is blank",
                      f"{var.name} (the {role}) is blank; every person needs one")
    if role in _GEOGRAPHY:
        text = np.where(space, 48, raw).astype(np.uint8)
        return np.ascontiguousarray(text).view(f"S{var.width}").ravel()
    digit = raw - np.uint8(48)                       # bytes below '0' wrap around above 9
    bad = ~((digit <= 9) | leading).all(axis=1)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        text = raw[i].tobytes().decode("latin-1")
        raise _refuse(where, int(lines[i]), f"{var.name} (the {role}) is {text!r}, not a number; "
                      "is this the data file of that codebook?",
                      f"{var.name} (the {role}) holds a value that is not a number; is this the "
                      "data file of that codebook?")
    powers = 10 ** np.arange(var.width - 1, -1, -1, dtype=np.int64)
    return np.where(leading, 0, digit).astype(np.int64) @ powers


def _values(buf: np.ndarray, starts: np.ndarray, person: np.ndarray, kinds: np.ndarray,
            numbers: np.ndarray, codebook: _Codebook, roles: Mapping[str, str], carry: _Carry,
            where: str) -> dict[str, np.ndarray]:
    """Each role's values on the person lines. In a hierarchical extract a household variable
    comes from the household line the person follows (the previous block's last one for the
    persons a block starts with; a household line no person follows, a vacant unit, is never
    parsed), and a person's serial number must be its household's."""
    rows = np.flatnonzero(person)
    values: dict[str, np.ndarray] = {}
    if codebook.hierarchical:
        house = np.flatnonzero(kinds == b"H")
        before = np.cumsum(kinds == b"H")[rows] - 1     # the household line before each person
        last = dict(carry.household or {})              # role -> (its bytes, line number)
        if rows.size and before[0] < 0 and not last:
            raise _refuse(where, int(numbers[rows[0]]), "a person record before any household "
                          "record; the file must start with a household (H) line",
                          "a person record comes before any household record")
    for role, name in roles.items():
        var = codebook.variables[name]
        on_person = not codebook.hierarchical or "P" in var.rectypes
        if on_person:
            values[role] = _parse(_field(buf, starts[rows], var), role, var, numbers[rows], where)
        if not codebook.hierarchical or "H" not in var.rectypes or (on_person and role != "unit"):
            continue
        raw = _field(buf, starts[house], var)
        head, head_line = last.get(role, (np.zeros(var.width, dtype=np.uint8), 0))
        take = before + 1
        filled = _parse(np.concatenate([head[None, :], raw])[take], role, var,
                        np.concatenate([[head_line], numbers[house]])[take], where)
        if house.size:
            last[role] = (raw[-1], int(numbers[house[-1]]))
        if not on_person:
            values[role] = filled
        elif (differ := values[role] != filled).any():
            i = int(np.flatnonzero(differ)[0])
            raise _refuse(where, int(numbers[rows[i]]),
                          f"the person's {name} {values[role][i]} is not that of the household "
                          f"record before it ({filled[i]})",
                          f"a person's {name} is not that of the household record before it")
    if codebook.hierarchical:
        carry.household = last
    return values


def _lookup(codes: np.ndarray, mapping: Mapping[int, int], attribute: str, var: _Variable,
            lines: np.ndarray, where: str) -> np.ndarray:
    """IPUMS codes → E2E codes (int8); a code the mapping lacks is refused, naming it."""
    keys = np.array(sorted(mapping), dtype=np.int64)
    targets = np.array([mapping[k] for k in keys.tolist()], dtype=np.int8)
    at = np.clip(np.searchsorted(keys, codes), 0, keys.size - 1)
    found = keys[at] == codes
    if not found.all():
        i = int(np.flatnonzero(~found)[0])
        code = int(codes[i])
        label = f" ({var.labels[code]})" if code in var.labels else ""
        raise _refuse(where, int(lines[i]),
                      f"{var.name} code {code}{label} has no level of the E2E schema's "
                      f"{attribute}; the codes it takes are {', '.join(map(str, keys.tolist()))}",
                      f"{var.name} holds a code with no level of the E2E schema's {attribute}; "
                      "docs/data.md lists the codes it takes")
    return targets[at]


def _recode(values: Mapping[str, np.ndarray], lines: np.ndarray, codebook: _Codebook,
            roles: Mapping[str, str], hhgq_rule: str, where: str) -> dict[str, np.ndarray]:
    """The E2E attributes of the persons (int8 codes of ``E2E_1940``)."""
    var = {role: codebook.variables[name] for role, name in roles.items()}
    if "year" in values and (other := values["year"] != 1940).any():
        i = int(np.flatnonzero(other)[0])
        raise _refuse(where, int(lines[i]), f"YEAR is {int(values['year'][i])}, not 1940; the "
                      "extract must hold the 1940 100% sample alone",
                      "a record is not of 1940 (YEAR); the extract must hold the 1940 100% "
                      "sample alone")
    gqtype = values["hhgq"]
    if hhgq_rule == "gq":
        gq = values["gq"]
        group = np.isin(gq, GQ_GROUP_QUARTERS)
        if (neither := ~(group | np.isin(gq, GQ_HOUSEHOLD))).any():
            i = int(np.flatnonzero(neither)[0])
            code = int(gq[i])
            label = f" ({var['gq'].labels[code]})" if code in var["gq"].labels else ""
            raise _refuse(where, int(lines[i]),
                          f"{var['gq'].name} code {code}{label} is neither a household "
                          f"{GQ_HOUSEHOLD} nor group quarters {GQ_GROUP_QUARTERS}",
                          f"{var['gq'].name} holds a code that is neither a household nor "
                          "group quarters")
        if (untyped := group & (gqtype == 0)).any():
            i = int(np.flatnonzero(untyped)[0])
            raise _refuse(where, int(lines[i]),
                          f"{var['gq'].name} says group quarters ({int(gq[i])}) but "
                          f"{var['hhgq'].name} is 0 (not group quarters); use hhgq_rule='e2e' "
                          f"to type units by {var['hhgq'].name} alone",
                          f"a person in group quarters by {var['gq'].name} has no group-quarters "
                          f"type in {var['hhgq'].name}")
        hhgq = np.zeros(gq.size, dtype=np.int8)
        hhgq[group] = _lookup(gqtype[group], GQTYPE_TO_HHGQ, "hhgq", var["hhgq"], lines[group],
                              where)
    else:
        hhgq = _lookup(gqtype, GQTYPE_TO_HHGQ, "hhgq", var["hhgq"], lines, where)
    age = values["votingage"]
    known_ages = np.array(sorted(var["votingage"].labels), dtype=np.int64)
    if known_ages.size and (unknown := ~np.isin(age, known_ages)).any():
        i = int(np.flatnonzero(unknown)[0])
        raise _refuse(where, int(lines[i]), f"{var['votingage'].name} code {int(age[i])} is not "
                      "one of the codebook's codes of that variable",
                      f"{var['votingage'].name} holds a code the codebook does not list")
    return {"hhgq": hhgq, "votingage": (age >= 18).astype(np.int8),
            "hispanic": _lookup(values["hispanic"], HISPAN_TO_HISPANIC, "hispanic",
                                var["hispanic"], lines, where),
            "cenrace": _lookup(values["cenrace"], RACE_TO_CENRACE, "cenrace", var["cenrace"],
                               lines, where)}


def _dictionary(codes: np.ndarray) -> tuple[np.ndarray, pa.Array]:
    """Indices and the dictionary of a block's geocodes (bytes)."""
    unique, inverse = np.unique(codes, return_inverse=True)
    return inverse.astype(np.int32), pa.array(np.char.decode(unique, "latin-1"), pa.string())


def _tables(values: Mapping[str, np.ndarray], attributes: Mapping[str, np.ndarray],
            lines: np.ndarray, carry: _Carry, where: str) -> tuple[pa.Table, pa.Table]:
    """A block's persons and units tables. A unit begins where the serial number changes; a
    unit's persons must share its enumeration district and type."""
    county = np.char.add(values["state"], values["county"])
    place = np.char.add(county, values["enum_dist"])
    serial, hhgq = values["unit"], attributes["hhgq"]
    previous = np.concatenate(([-1 if carry.serial is None else carry.serial], serial[:-1]))
    new = serial != previous
    new[0] |= carry.serial is None
    before_place = np.concatenate((np.asarray([carry.place or b""], dtype=place.dtype),
                                   place[:-1]))
    before_type = np.concatenate(([-1 if carry.hhgq is None else carry.hhgq], hhgq[:-1]))
    split = ~new & ((place != before_place) | (hhgq != before_type))
    if split.any():
        i = int(np.flatnonzero(split)[0])
        what = "enumeration districts" if place[i] != before_place[i] else "group-quarters types"
        raise _refuse(where, int(lines[i]),
                      f"household {int(serial[i])} has persons in two {what} (this line and the "
                      "person's before it); the household variables of a household must agree",
                      f"a household's persons are in two {what}")
    carry.serial, carry.place, carry.hhgq = int(serial[-1]), place[-1], int(hhgq[-1])
    carry.serials.append(serial[new])
    geography = []
    for name, codes in (("state", values["state"]), ("county", county), ("enum_dist", place)):
        indices, dictionary = _dictionary(codes)
        getattr(carry, {"state": "states", "county": "counties", "enum_dist": "eds"}[name]) \
            .update(dictionary.to_pylist())
        geography.append((indices, dictionary))

    def table(schema: pa.Schema, rows: np.ndarray | slice, names) -> pa.Table:
        arrays = [pa.DictionaryArray.from_arrays(pa.array(i[rows]), d) for i, d in geography]
        arrays += [pa.array(attributes[n][rows], pa.int8()) for n in names]
        return pa.Table.from_arrays(arrays, schema=schema)

    return table(_PERSONS_SCHEMA, slice(None), _ATTRIBUTES), \
        table(_UNITS_SCHEMA, np.flatnonzero(new), ("hhgq",))


def _check_split_households(carry: _Carry, where: str) -> None:
    """Each serial number begins one unit: a household whose persons are in two runs of lines
    (an extract of several samples, or a re-sorted file) is refused."""
    if not carry.serials:
        return
    ordered = np.sort(np.concatenate(carry.serials))
    again = ordered[1:] == ordered[:-1]
    if again.any():
        serial = int(ordered[1:][again][0])
        fix = ("the persons of a household are contiguous in the files IPUMS writes and serial "
               "numbers are unique within a sample: does the extract hold more than the 1940 "
               "100% sample, or was it re-sorted?")
        raise ConfidentialDataError(f"{where}: the persons of household {serial} are in two "
                                    f"separate runs of lines; {fix}",
                                    public=f"a household's persons are in two separate runs of "
                                           f"lines; {fix}", source=where, role="persons")
