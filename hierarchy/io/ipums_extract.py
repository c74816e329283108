"""A small extract in IPUMS's format: a DDI codebook and its fixed-width data file.

For examples and tests — the toolkit reads real extracts with :mod:`hierarchy.io.ipums`. The
codebook has what IPUMS's own (``usa_NNNNN.xml``, DDI Codebook 2.5) has and what
:func:`ipumspy.readers.read_ipums_ddi` reads: the study's citation and conditions, the file's
name, structure (rectangular or hierarchical, with its record types) and format, and per
variable its location (``StartPos``, ``EndPos``, ``width``), label, description, categories
(``catgry``: IPUMS's codes and labels, :data:`IPUMS_LABELS`) and format. The data file holds
one line per record, each field zero-filled to its width, as IPUMS writes them; a hierarchical
extract has a household line (``H``) before the lines of its persons (``P``).

Examples
--------
>>> import tempfile
>>> d = Path(tempfile.mkdtemp())
>>> ddi = write_ipums_extract(d, {"SERIAL": [1, 1], "AGE": [40, 9]})
>>> ddi.name, (d / "usa_00001.dat").read_text()
('usa_00001.xml', '194000000001040\\n194000000001009\\n')
"""

from __future__ import annotations

import gzip
import os
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Mapping, Sequence

from hierarchy.errors import HierarchyError

__all__ = ["write_ipums_extract", "IPUMS_WIDTHS", "IPUMS_LABELS"]

#: Field widths of IPUMS USA variables (general versions; ``…D`` the detailed ones). ENUMDIST's
#: width here is an assumption (the reader takes whatever the codebook says).
IPUMS_WIDTHS = {"RECTYPE": 1, "YEAR": 4, "SAMPLE": 6, "SERIAL": 8, "STATEICP": 2,
                "STATEFIP": 2, "COUNTYICP": 4, "COUNTYNHG": 7, "ENUMDIST": 7, "GQ": 1,
                "GQTYPE": 1, "GQTYPED": 3, "PERNUM": 4, "AGE": 3, "RACE": 1, "RACED": 3,
                "HISPAN": 1, "HISPAND": 3}
#: IPUMS USA's codes and labels of the variables the E2E recode reads.
IPUMS_LABELS = {
    "GQ": {0: "Vacant unit", 1: "Households under 1970 definition",
           2: "Additional households under 1990 definition", 3: "Group quarters--Institutions",
           4: "Other group quarters", 5: "Additional households under 2000 definition",
           6: "Fragment"},
    "GQTYPE": {0: "NA (non-group quarters households)",
               1: "Institution (1990, 2000, ACS/PRCS)", 2: "Correctional institutions",
               3: "Mental institutions",
               4: "Institutions for the elderly, handicapped, and poor",
               5: "Non-institutional GQ", 6: "Military", 7: "College dormitory",
               8: "Rooming house", 9: "Other non-institutional GQ and unknown"},
    "RACE": {1: "White", 2: "Black/African American", 3: "American Indian or Alaska Native",
             4: "Chinese", 5: "Japanese", 6: "Other Asian or Pacific Islander",
             7: "Other race, nec", 8: "Two major races", 9: "Three or more major races"},
    "HISPAN": {0: "Not Hispanic", 1: "Mexican", 2: "Puerto Rican", 3: "Cuban", 4: "Other",
               9: "Not Reported"},
}
#: Variables on both record types of a hierarchical extract, and on the household's alone.
_COMMON = ("RECTYPE", "YEAR", "SAMPLE", "SERIAL")
_HOUSEHOLD = ("STATEICP", "STATEFIP", "COUNTYICP", "COUNTYNHG", "ENUMDIST", "GQ", "GQTYPE",
              "GQTYPED")
_NS = "ddi:codebook:2_5"


def write_ipums_extract(directory: str | os.PathLike, records: Mapping[str, Sequence[int]], *,
                        name: str = "usa_00001", structure: str = "rectangular",
                        compress: bool = False, widths: Mapping[str, int] | None = None,
                        labels: Mapping[str, Mapping[int, str]] | None = None) -> Path:
    """Write ``records`` as an IPUMS extract: ``name.xml`` and ``name.dat`` (or ``.dat.gz``).

    Parameters
    ----------
    directory : path
        Where to write (created if missing).
    records : mapping
        IPUMS variable → one integer per person, in the file's order (``YEAR`` 1940 is added
        first when absent, as IPUMS always includes it).
    name : str
        The extract's name.
    structure : {"rectangular", "hierarchical"}
        Hierarchical: a household line before its persons' lines, households being the runs of
        equal ``SERIAL`` (which is then required).
    compress : bool
        Write ``name.dat.gz`` (the codebook still names ``name.dat``, as IPUMS's do).
    widths, labels : mapping, optional
        Field widths and categories over :data:`IPUMS_WIDTHS` and :data:`IPUMS_LABELS`.

    Returns
    -------
    pathlib.Path
        The codebook.

    Raises
    ------
    HierarchyError
        Variables of different lengths, a variable without a width, a value that is negative or
        too wide for its field, a hierarchical extract without ``SERIAL``.

    Examples
    --------
    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> _ = write_ipums_extract(d, {"SERIAL": [5, 5], "STATEFIP": [1, 1], "AGE": [40, 9]},
    ...                         structure="hierarchical")
    >>> print((d / "usa_00001.dat").read_text(), end="")
    H19400000000501
    P194000000005040
    P194000000005009
    >>> write_ipums_extract(d, {"AGE": [1000]})
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: AGE: 1000 does not fit its 3 characters
    """
    if structure not in ("rectangular", "hierarchical"):
        raise HierarchyError(f"structure must be 'rectangular' or 'hierarchical', not "
                             f"{structure!r}")
    width = {**IPUMS_WIDTHS, **dict(widths or {})}
    codes = {**IPUMS_LABELS, **dict(labels or {})}
    columns = {"YEAR": [1940] * len(next(iter(records.values()), []))} \
        if "YEAR" not in records else {}
    columns.update({k.upper(): list(v) for k, v in records.items()})
    if len({len(v) for v in columns.values()}) > 1:
        raise HierarchyError("every variable needs one value per person")
    unknown = sorted(set(columns) - set(width))
    if unknown:
        raise HierarchyError(f"no width for {unknown}; give widths={{...}}")
    hierarchical = structure == "hierarchical"
    if hierarchical:
        if "SERIAL" not in columns:
            raise HierarchyError("a hierarchical extract needs SERIAL (its households)")
        columns = {"RECTYPE": [], **columns}
    layout = _layout(columns, width, hierarchical)
    lines = _lines(columns, layout, hierarchical)
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    text = "".join(line + "\n" for line in lines).encode("latin-1")
    data = out / f"{name}.dat{'.gz' if compress else ''}"
    data.write_bytes(gzip.compress(text, mtime=0) if compress else text)
    ddi = out / f"{name}.xml"
    ET.ElementTree(_codebook(name, layout, codes, hierarchical)).write(
        ddi, encoding="UTF-8", xml_declaration=True)
    return ddi


def _layout(columns: Mapping[str, list], width: Mapping[str, int],
            hierarchical: bool) -> dict[str, tuple[int, int, str]]:
    """Variable → (start, width, record types): consecutive fields; in a hierarchical extract
    the common variables first, then each record type's own from the same position."""
    layout, at = {}, 0
    order = [k for k in columns if not hierarchical or k in _COMMON]
    for key in order:
        layout[key] = (at, width[key], "H P" if hierarchical else "")
        at += width[key]
    ends = {"H": at, "P": at}
    for key in columns:
        if key in layout:
            continue
        kind = "H" if key in _HOUSEHOLD else "P"
        layout[key] = (ends[kind], width[key], kind)
        ends[kind] += width[key]
    return layout


def _field(variable: str, value: int, size: int) -> str:
    text = f"{int(value):0{size}d}"
    if int(value) < 0 or len(text) > size:
        raise HierarchyError(f"{variable}: {value} does not fit its {size} characters")
    return text


def _lines(columns: Mapping[str, list], layout: Mapping[str, tuple[int, int, str]],
           hierarchical: bool) -> list[str]:
    """The data lines: one per person, or a household line before each run of equal SERIAL."""
    n = len(next(iter(v for k, v in columns.items() if k != "RECTYPE"), []))

    def line(i: int, kind: str) -> str:
        fields = [(start, kind if key == "RECTYPE" else _field(key, columns[key][i], size))
                  for key, (start, size, kinds) in layout.items()
                  if not hierarchical or kind in kinds.split()]
        return "".join(text for _, text in sorted(fields))

    if not hierarchical:
        return [line(i, "") for i in range(n)]
    out = []
    for i in range(n):
        if i == 0 or columns["SERIAL"][i] != columns["SERIAL"][i - 1]:
            out.append(line(i, "H"))
        out.append(line(i, "P"))
    return out


def _codebook(name: str, layout: Mapping[str, tuple[int, int, str]],
              codes: Mapping[str, Mapping[int, str]], hierarchical: bool) -> ET.Element:
    """The DDI codebook element, in the shape of IPUMS's."""
    def sub(parent: ET.Element, tag: str, text: str | None = None, **attrib) -> ET.Element:
        element = ET.SubElement(parent, f"{{{_NS}}}{tag}", attrib)
        element.text = text
        return element

    ET.register_namespace("", _NS)
    root = ET.Element(f"{{{_NS}}}codeBook", {"version": "2.5", "ID": f"{name}-usa.ipums.org"})
    study = sub(root, "stdyDscr")
    series = sub(sub(study, "citation"), "serStmt")
    sub(series, "serName", "IPUMS USA", abbr="usa")
    sub(series, "serInfo", "DOI:10.18128/D010.V15.0")
    sub(sub(study, "stdyInfo"), "notes", "Additional notes on a sample that is part of this "
                                         "study:  1940 100% database\n")
    use = sub(sub(study, "dataAccs"), "useStmt")
    sub(use, "citReq", "Publications and research reports based on the IPUMS-USA database "
                       "must cite it appropriately (see https://usa.ipums.org/usa/cite.shtml).")
    sub(use, "conditions", "Users of IPUMS-USA data must agree to abide by the conditions of "
                           "use.")
    text = sub(sub(root, "fileDscr", ID="ExtractData"), "fileTxt")
    sub(text, "fileName", f"{name}.dat")
    sub(text, "fileCont", "Microdata records")
    shape = sub(text, "fileStrc", type="hierarchical" if hierarchical else "rectangular")
    if hierarchical:
        sub(sub(shape, "recGrp", rectype="P", recidvar="RECTYPE", keyvar="SERIAL"), "labl",
            "Person Record")
        sub(sub(shape, "recGrp", rectype="H", recidvar="RECTYPE"), "labl", "Household Record")
    sub(text, "fileType", "ISO-8859-1 data file", charset="ISO-8859-1")
    sub(text, "format", "fixed length fields")
    sub(text, "filePlac", "IPUMS, University of Minnesota")
    described = sub(root, "dataDscr")
    for key, (start, size, kinds) in layout.items():
        attrib = {"ID": key, "name": key, "dcml": "0", "files": "ExtractData",
                  "intrvl": "contin" if key in ("SERIAL", "PERNUM") else "discrete"}
        if kinds:
            attrib["rectype"] = kinds
        var = sub(described, "var", **attrib)
        sub(var, "location", StartPos=str(start + 1), EndPos=str(start + size), width=str(size))
        sub(var, "labl", key.title())
        sub(var, "txt", f"{key} as IPUMS USA codes it.")
        for code, label in sorted(codes.get(key, {}).items()):
            category = sub(var, "catgry")
            sub(category, "catValu", str(code))
            sub(category, "labl", label)
        sub(var, "concept", "Technical Variables", vocab="IPUMS")
        sub(var, "varFormat", schema="other", type="character" if key == "RECTYPE"
            else "numeric")
    return root
