"""The on-disk layout of the 2020 P.L. 94-171 Noisy Measurement File (NMF), as published.

What the writer of synthetic NMFs (:mod:`postproc.apps.nmf.synthetic`) and the reader share:
names, row kinds and small pure helpers, no I/O. The facts come from public sources (gathered
for issue 38): the Census Bureau's GLS reader of the released files
(uscensusbureau/DAS_2020_GLS_Uncertainty_Evaluation), Google's census-bluedown reader, and the
DAS production code (uscensusbureau/DAS_2020_Redistricting_Production_Code).

A product (:data:`PRODUCTS`) holds one Spark-style parquet dataset per geolevel,
``<Geolevel>.parquet/{DPQuery,Constraint}/State=XYY/part-*.parquet``; the ``US`` level is not
partitioned. ``XYY`` is a state piece: an AIAN flag (1 = the state's American Indian and Alaska
Native areas, 0 = the rest) and the two-digit state FIPS code (:func:`state_piece`). A row is one
(geounit, query): ``geocode`` (the DAS *spine* geocode; the US is ``""``), ``query_name``, one
string column per histogram axis, ``query_shape``, ``value``, ``variance`` and, on constraint
rows only, ``sign`` (:class:`RowKind`, :func:`row_kinds`). An axis column holds ``*`` where the
query sums the axis out, the axis's own name where a marginal keeps it (GLS rebuilds DAS query
names such as ``gqNursingTotal * nonvoting`` or ``hhgq`` by joining these columns), a recode
name, or ``detailed`` on every axis of the ``detailed`` query.

Examples
--------
>>> PRODUCTS["persons"], GEOLEVELS[-1], LEVEL_NAMES["Block_Group"]
('US_Person_PL_PROD', 'Block', 'block_group')
>>> [GEOCODE_WIDTHS[g] for g in GEOLEVELS]
[0, 3, 9, 13, 15, 31]
>>> len(STATE_PIECES_2020), STATE_PIECES_2020[:2], STATE_PIECES_2020[-1]
(88, ('001', '002'), '156')
>>> [k.query_name for k in row_kinds("persons", "US", CONSTRAINT)]
['hhgq_total_lb_con', 'hhgq_total_ub_con', 'nurse_nva_0_con', 'total_con']
>>> AXIS_RECODES["hhgq"]["hhinstlevels"]
((0,), (1, 2, 3, 4), (5, 6, 7))
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from hierarchy.presets.pl94 import LEVELS, PRODUCTION_LEVELS
from postproc.errors import PostprocError

__all__ = ["PRODUCTS", "GEOLEVELS", "LEVEL_NAMES", "DPQUERY", "CONSTRAINT", "DATASETS",
           "PARTITION", "SUCCESS", "DPQ_SUFFIX", "CON_SUFFIX", "SIGNS", "AXES", "AXIS_SIZES",
           "AXIS_RECODES", "GEOCODE_WIDTHS", "TABULATION_BLOCK_WIDTH", "STATES_2020",
           "AIAN_STATES_2020", "STATE_PIECES_2020", "RowKind", "PERSON_QUERIES",
           "PERSON_CONSTRAINTS", "UNIT_QUERIES", "UNIT_CONSTRAINTS", "row_kinds", "state_piece",
           "split_piece", "partition_name", "dataset_path", "tabulation_block", "block_geoid",
           "county_fips"]

#: Product → the directory under the NMF root (Puerto Rico's ``PR_*`` products have no US level
#: and are not written by the synthetic writer).
PRODUCTS = {"persons": "US_Person_PL_PROD", "units": "US_Unit_PL_PROD"}
#: The production geolevels, root first: the directory of each is ``<Geolevel>.parquet``.
GEOLEVELS = PRODUCTION_LEVELS
#: Geolevel → the toolkit's level name (``nation, state, county, tract, block_group, block``).
LEVEL_NAMES = dict(zip(PRODUCTION_LEVELS, LEVELS))
#: The two sub-datasets of a geolevel: the noisy measurements and the constraints.
DPQUERY, CONSTRAINT = "DPQuery", "Constraint"
DATASETS = (DPQUERY, CONSTRAINT)
#: The Hive partition column (three characters: AIAN flag + state FIPS; read it as a string).
PARTITION = "State"
#: The marker file Spark writes into a finished dataset directory.
SUCCESS = "_SUCCESS"
#: Suffixes of ``query_name``: a DAS query name + ``_dpq``, a DAS constraint name + ``_con``.
DPQ_SUFFIX, CON_SUFFIX = "_dpq", "_con"
#: Constraint signs as the files write them (DAS itself says ``=``, ``ge``, ``le``).
SIGNS = ("=", ">=", "<=")
#: Product → its axis columns, in histogram order (the flat cell index is row-major over them).
AXES = {"persons": ("hhgq", "votingage", "hispanic", "cenrace"), "units": ("h1",)}
#: Axis → number of levels (hhgq 0 household, 1-7 group-quarters types; h1 0 vacant, 1 occupied).
AXIS_SIZES = {"hhgq": 8, "votingage": 2, "hispanic": 2, "cenrace": 63, "h1": 2}
#: Axis → named recode → the groups of axis levels it keeps, in answer order (DAS
#: ``hhgq_person_simple.py`` and ``votingage.py``). ``*`` sums an axis out; ``detailed`` or the
#: axis's own name keeps every level.
AXIS_RECODES = {"hhgq": {"hhinstlevels": ((0,), (1, 2, 3, 4), (5, 6, 7)),
                         "gqNursingTotal": ((3,),)},
                "votingage": {"nonvoting": ((0,),)}}
#: Spine geocode length per geolevel in the 2020 PL 94 files (widths are fixed per DAS run:
#: a reader should take them from the data).
GEOCODE_WIDTHS = dict(zip(PRODUCTION_LEVELS, (0, 3, 9, 13, 15, 31)))
#: The tabulation block geocode at the end of a spine block geocode: state 2, county 3,
#: tract 6, block group 1, block 4 (whose first digit repeats the block group's).
TABULATION_BLOCK_WIDTH = 16

#: The 50 states and DC, by FIPS code.
STATES_2020 = ("01", "02", "04", "05", "06", "08", "09", "10", "11", "12", "13", "15", "16",
               "17", "18", "19", "20", "21", "22", "23", "24", "25", "26", "27", "28", "29",
               "30", "31", "32", "33", "34", "35", "36", "37", "38", "39", "40", "41", "42",
               "44", "45", "46", "47", "48", "49", "50", "51", "53", "54", "55", "56")
#: States with an AIAN piece (``1SS``) in the 2020 files: a public fact listed by
#: google-research/census-bluedown, ``census_bluedown/constants.py`` (``FOLDER_IDS_2020``).
#: That list holds 37 such pieces (the format notes of issue 38 say 36).
AIAN_STATES_2020 = ("01", "02", "04", "06", "08", "09", "12", "13", "15", "16", "18", "19",
                    "20", "22", "23", "25", "26", "27", "28", "30", "31", "32", "35", "36",
                    "37", "38", "40", "41", "45", "46", "47", "48", "49", "51", "53", "55",
                    "56")
#: Every state piece of 2020: the 51 ``0SS`` and the 37 ``1SS``.
STATE_PIECES_2020 = tuple("0" + s for s in STATES_2020) + tuple("1" + s for s in AIAN_STATES_2020)


@dataclass(frozen=True)
class RowKind:
    """One kind of NMF row: a measured query (``DPQuery``) or a constraint (``Constraint``).

    Attributes
    ----------
    query_name : str
        As in the files: the DAS name + ``_dpq`` or + ``_con``.
    axes : tuple of str
        The value of each axis column of the product (:data:`AXES`), in histogram order:
        ``*`` (summed out), ``detailed`` or the axis's name (every level), or a recode of
        :data:`AXIS_RECODES`.
    shape : tuple of int
        ``query_shape``: per axis 1 where summed out, else the number of its groups.
    sign : str or None
        ``=``, ``>=`` or ``<=`` for a constraint; None for a measured query.

    Raises
    ------
    PostprocError
        If the suffix does not fit the sign, the sign is unknown, or an axis value and its
        shape disagree.

    Examples
    --------
    >>> kind = PERSON_QUERIES["hhinstlevels"]
    >>> kind.query_name, kind.axes, kind.shape, kind.size, kind.name
    ('hhinstlevels_dpq', ('hhinstlevels', '*', '*', '*'), (3, 1, 1, 1), 3, 'hhinstlevels')
    >>> RowKind("total_dpq", ("*",), (2,))
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: NMF row kind 'total_dpq': axis value '*' (summed out) needs
    shape 1, not 2
    """

    query_name: str
    axes: tuple[str, ...]
    shape: tuple[int, ...]
    sign: str | None = None

    def __post_init__(self):
        suffix = DPQ_SUFFIX if self.sign is None else CON_SUFFIX
        where = f"NMF row kind {self.query_name!r}"
        if not self.query_name.endswith(suffix) or len(self.query_name) == len(suffix):
            raise PostprocError(f"{where}: a {'query' if self.sign is None else 'constraint'} "
                                f"name ends with {suffix!r}")
        if self.sign is not None and self.sign not in SIGNS:
            raise PostprocError(f"{where}: sign {self.sign!r} is not one of {list(SIGNS)}")
        if len(self.axes) != len(self.shape) or not all(
                isinstance(n, int) and n >= 1 for n in self.shape):
            raise PostprocError(f"{where}: needs one positive size per axis, got axes "
                                f"{self.axes} and shape {self.shape}")
        for value, n in zip(self.axes, self.shape):
            if value == "*" and n != 1:
                raise PostprocError(f"{where}: axis value '*' (summed out) needs shape 1, "
                                    f"not {n}")

    @property
    def name(self) -> str:
        """The DAS name, without the suffix (``votingage * hispanic``, ``nurse_nva_0``)."""
        return self.query_name[:-len(CON_SUFFIX if self.sign else DPQ_SUFFIX)]

    @property
    def size(self) -> int:
        """``len(value)``: the product of ``shape``."""
        return math.prod(self.shape)


def _measured(name: str, axes: tuple[str, ...], shape: tuple[int, ...]) -> RowKind:
    return RowKind(name + DPQ_SUFFIX, axes, shape)


#: The 11 measured person queries, keyed by the toolkit's (= production's) name, in the
#: strategy's order (``hierarchy.presets.pl94``).
PERSON_QUERIES = {k.name: k for k in (
    _measured("total", ("*", "*", "*", "*"), (1, 1, 1, 1)),
    _measured("cenrace", ("*", "*", "*", "cenrace"), (1, 1, 1, 63)),
    _measured("hispanic", ("*", "*", "hispanic", "*"), (1, 1, 2, 1)),
    _measured("votingage", ("*", "votingage", "*", "*"), (1, 2, 1, 1)),
    _measured("hhinstlevels", ("hhinstlevels", "*", "*", "*"), (3, 1, 1, 1)),
    _measured("hhgq", ("hhgq", "*", "*", "*"), (8, 1, 1, 1)),
    _measured("hispanic * cenrace", ("*", "*", "hispanic", "cenrace"), (1, 1, 2, 63)),
    _measured("votingage * cenrace", ("*", "votingage", "*", "cenrace"), (1, 2, 1, 63)),
    _measured("votingage * hispanic", ("*", "votingage", "hispanic", "*"), (1, 2, 2, 1)),
    _measured("votingage * hispanic * cenrace", ("*", "votingage", "hispanic", "cenrace"),
              (1, 2, 2, 63)),
    _measured("detailed", ("detailed",) * 4, (8, 2, 2, 63)))}
#: The persons' constraints: the hhgq bounds and the nursing zero at every level, the total at
#: the US only.
PERSON_CONSTRAINTS = {k.name: k for k in (
    RowKind("hhgq_total_lb_con", ("hhgq", "*", "*", "*"), (8, 1, 1, 1), ">="),
    RowKind("hhgq_total_ub_con", ("hhgq", "*", "*", "*"), (8, 1, 1, 1), "<="),
    RowKind("nurse_nva_0_con", ("gqNursingTotal", "nonvoting", "*", "*"), (1, 1, 1, 1), "="),
    RowKind("total_con", ("*", "*", "*", "*"), (1, 1, 1, 1), "="))}
#: The housing units' one query: vacant, occupied.
UNIT_QUERIES = {"detailed": _measured("detailed", ("detailed",), (2,))}
#: The housing units' total, exact at every level.
UNIT_CONSTRAINTS = {"total": RowKind("total_con", ("*",), (1,), "=")}


def row_kinds(product: str, geolevel: str, dataset: str) -> tuple[RowKind, ...]:
    """The rows a geounit of ``geolevel`` has in a product's ``dataset``, in order.

    Persons: 11 queries (10 at the US, where the total is invariant); the hhgq bounds and the
    nursing zero everywhere, ``total_con`` at the US. Units: ``detailed_dpq`` and
    ``total_con`` everywhere. An only child (its budget moved to its parent) has no DPQuery
    rows at all, but every constraint row.

    Parameters
    ----------
    product : {'persons', 'units'}
    geolevel : str
        One of :data:`GEOLEVELS`.
    dataset : {'DPQuery', 'Constraint'}

    Returns
    -------
    tuple of RowKind

    Raises
    ------
    PostprocError
        If an argument is unknown.

    Examples
    --------
    >>> [k.name for k in row_kinds("persons", "US", "DPQuery")][:3]
    ['cenrace', 'hispanic', 'votingage']
    >>> len(row_kinds("persons", "Block", "DPQuery")), sum(k.size for k in
    ...     row_kinds("persons", "Block", "DPQuery"))
    (11, 2603)
    >>> [k.query_name for k in row_kinds("units", "County", "Constraint")]
    ['total_con']
    >>> row_kinds("persons", "Nation", "DPQuery")
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: unknown NMF geolevel 'Nation'; the PL 94 geolevels are ['US',
    'State', 'County', 'Tract', 'Block_Group', 'Block']
    """
    if product not in PRODUCTS:
        raise PostprocError(f"unknown NMF product {product!r}; products are {list(PRODUCTS)}")
    if geolevel not in GEOLEVELS:
        raise PostprocError(f"unknown NMF geolevel {geolevel!r}; the PL 94 geolevels are "
                            f"{list(GEOLEVELS)}")
    if dataset not in DATASETS:
        raise PostprocError(f"unknown NMF dataset {dataset!r}; datasets are {list(DATASETS)}")
    if product == "units":
        return tuple((UNIT_QUERIES if dataset == DPQUERY else UNIT_CONSTRAINTS).values())
    if dataset == DPQUERY:
        return tuple(k for k in PERSON_QUERIES.values()
                     if geolevel != GEOLEVELS[0] or k.name != "total")
    return tuple(k for k in PERSON_CONSTRAINTS.values()
                 if geolevel == GEOLEVELS[0] or k.name != "total")


def state_piece(fips: str, aian: bool) -> str:
    """The three-character state piece: AIAN flag + two-digit state FIPS.

    Examples
    --------
    >>> state_piece("44", False), state_piece("56", True)
    ('044', '156')
    >>> state_piece("4", False)
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: a state FIPS code has two digits, e.g. '06'; got '4'
    """
    if not (isinstance(fips, str) and len(fips) == 2 and fips.isdigit()):
        raise PostprocError(f"a state FIPS code has two digits, e.g. '06'; got {fips!r}")
    return ("1" if aian else "0") + fips


def split_piece(piece: str) -> tuple[str, bool]:
    """A state piece's state FIPS code and whether it is the AIAN piece.

    Raises
    ------
    PostprocError
        If ``piece`` is not a flag (0 or 1) followed by two digits.

    Examples
    --------
    >>> split_piece("144"), split_piece("050")
    (('44', True), ('50', False))
    >>> split_piece("44")
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: a state piece is three characters, an AIAN flag (0 or 1) and
    the state FIPS code, e.g. '044' or '144'; got '44'
    """
    if not (isinstance(piece, str) and len(piece) == 3 and piece.isdigit()
            and piece[0] in "01"):
        raise PostprocError("a state piece is three characters, an AIAN flag (0 or 1) and the "
                            f"state FIPS code, e.g. '044' or '144'; got {piece!r}")
    return piece[1:], piece[0] == "1"


def partition_name(piece: str) -> str:
    """The Hive partition directory of a state piece.

    Examples
    --------
    >>> partition_name("044")
    'State=044'
    """
    split_piece(piece)
    return f"{PARTITION}={piece}"


def dataset_path(root: str | Path, product: str, geolevel: str, dataset: str,
                 piece: str | None = None) -> Path:
    """Where a product's geolevel sub-dataset (or one state piece's partition of it) lives.

    Parameters
    ----------
    root : path
        The folder that holds the product directories.
    product : {'persons', 'units'}
    geolevel : str
    dataset : {'DPQuery', 'Constraint'}
    piece : str, optional
        A state piece (the US level has no partitions).

    Returns
    -------
    pathlib.Path

    Raises
    ------
    PostprocError
        For an unknown name, or a piece given for the US level.

    Examples
    --------
    >>> dataset_path("nmf", "persons", "County", "DPQuery", "044").as_posix()
    'nmf/US_Person_PL_PROD/County.parquet/DPQuery/State=044'
    >>> dataset_path("nmf", "units", "US", "Constraint").as_posix()
    'nmf/US_Unit_PL_PROD/US.parquet/Constraint'
    """
    row_kinds(product, geolevel, dataset)          # checks the names
    path = Path(root) / PRODUCTS[product] / f"{geolevel}.parquet" / dataset
    if piece is None:
        return path
    if geolevel == GEOLEVELS[0]:
        raise PostprocError("the US level is not partitioned by state piece")
    return path / partition_name(piece)


def _spine_block(spine_block: str) -> str:
    if not (isinstance(spine_block, str) and len(spine_block) >= TABULATION_BLOCK_WIDTH
            and spine_block[-TABULATION_BLOCK_WIDTH:].isdigit()):
        raise PostprocError(f"a spine block geocode ends with the 16-digit tabulation block "
                            f"geocode; got {spine_block!r}")
    return spine_block[-TABULATION_BLOCK_WIDTH:]


def tabulation_block(spine_block: str) -> str:
    """The 16-character tabulation block geocode at the end of a spine block geocode:
    state 2, county 3, tract 6, block group 1, block 4.

    Examples
    --------
    >>> tabulation_block("0441000700491024400701070233001")
    '4400701070233001'
    """
    return _spine_block(spine_block)


def block_geoid(spine_block: str) -> str:
    """The census's 15-character block GEOID of a spine block geocode (state, county, tract,
    block): the tabulation block without its block-group digit, which repeats the block's first.

    Raises
    ------
    PostprocError
        If the geocode does not end with 16 digits.

    Examples
    --------
    >>> block_geoid("0441000700491024400701070233001")
    '440070107023001'
    >>> block_geoid("0441")
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: a spine block geocode ends with the 16-digit tabulation block
    geocode; got '0441'
    """
    g16 = _spine_block(spine_block)
    return g16[:11] + g16[12:]


def county_fips(spine_county: str) -> str:
    """The five-digit county FIPS code of a spine county geocode: state piece (3), ``1`` (a
    county; ``0`` would mark an AIAN area redefined as a county), ``0`` + county FIPS (4) and a
    child-index digit.

    Raises
    ------
    PostprocError
        If the geocode is not 9 digits with the county flag ``1``.

    Examples
    --------
    >>> county_fips("050100011"), county_fips("156100130")
    ('50001', '56013')
    """
    if not (isinstance(spine_county, str) and len(spine_county) == GEOCODE_WIDTHS["County"]
            and spine_county.isdigit() and spine_county[3] == "1"):
        raise PostprocError(f"a spine county geocode is 9 digits: state piece, '1', '0' + county "
                            f"FIPS, a child index; got {spine_county!r}")
    return spine_county[1:3] + spine_county[5:8]
