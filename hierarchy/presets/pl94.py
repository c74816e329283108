"""The 2020 redistricting (PL 94-171) presets: schema, workload, budget, query ordering, spec.

Every number here was read from the Census Bureau's published production code,
``uscensusbureau/DAS_2020_Redistricting_Production_Code`` (directory ``DAS_PL94.release/``), and
transcribed by hand; no code was copied. Sources, file by file:

* ``programs/schema/schemas/schemamaker.py``: the ``PL94_2020_SCHEMA`` histogram is
  ``hhgq × votingage × hispanic × cenrace`` (``CC.SCHEMA_PL94_2020: [HHGQ, VOTING_AGE, HISPANIC,
  CENRACE]``), 8 × 2 × 2 × 63 = 2,016 cells (``Constraints_PL94_2020.py``: "histograms are
  4-dimensional, with dimensions (8,2,2,63)").
* ``programs/schema/attributes/hhgq_person_simple.py`` (``HHGQPersonSimpleAttr``): the eight hhgq
  labels and the ``hhinstlevels`` recode (Household = 0; Institutional Facility = 1-4;
  Non-Institutional Facility = 5-7).
* ``programs/schema/attributes/votingage.py`` (``VotingAgeAttr``) and ``HispAttr``: the labels
  of votingage and hispanic.
* ``programs/schema/attributes/cenrace.py`` (``CenraceAttr.getLevels``): the 63 race
  combinations, ordered by number of races and then lexicographically over (white, black, aian,
  asian, nhopi, sor) — exactly the order of :func:`itertools.combinations`, which builds
  :data:`CENRACE_LABELS` here.
* ``programs/strategies/strategies.py``, class ``ProductionCandidate20210527US_mult8_add02_
  dsepJune3`` (docstring "After June 3 DSEP; increase hisp*cenrace rho by 0.2 in Tract, BG"):
  the queries measured at each level and their exact shares of the level's budget
  (:data:`PRODUCTION_QUERY_SHARES`). The US level has no ``total`` query.
* ``configs/production/pl94/person_US.ini``: ``geolevel_budget_prop = 104/4099, 1440/4099,
  447/4099, 687/4099, 1256/4099, 165/4099`` (US, State, County, Tract, Block_Group, Block;
  :data:`PRODUCTION_LEVEL_SHARES`), ``strategy =`` the class above, ``query_ordering =
  Strategy1b_ST_CTY_TR_BG_isoTot_Ordering_dsepJune3``, ``theConstraints.State = hhgq_total_lb,
  hhgq_total_ub`` and ``theConstraints.US = total``.
* ``configs/production/pl94/person_default.ini``: ``global_scale = 339/542`` and the discrete
  Gaussian mechanism; invariants ``tot`` at State, ``gqhh_vect, gqhh_tot`` at Block;
  constraints ``hhgq_total_lb, hhgq_total_ub, nurse_nva_0`` at Block;
  ``DataIndNPass_toleranceType = opt_tol`` and ``opt_tol_slack = 0.1``: how closely a later
  fit pass holds an earlier pass's answers (:data:`PRODUCTION_PASS_TOLERANCE`).
* ``programs/engine/budget.py``: ``rho = 1 / self.global_scale ** 2`` (so ρ = (542/339)² ≈
  2.5563 for persons) and ``geolevel_noise_precision = 2 * prop / (self.global_scale ** 2)``:
  the noise precision 1/σ² of a query is twice its share of ρ, i.e. σ² = 1/(2ρ_q), the
  discrete Gaussian for ρ_q-zCDP at L2 sensitivity 1 (one person added or removed). That is the
  toolkit's ``discrete_gaussian`` mechanism with ``neighbours = "add_remove"``, the default of
  :func:`pl94_budget`.
* ``programs/engine/optimizer_query_ordering.py``: how the ordering named in ``person_US.ini``
  is used (outer passes of inner passes; the L2 fit, its constrain-to ordering and the rounder's
  ordering); the ordering itself is the class ``Strategy1b_ST_CTY_TR_BG_isoTot_Ordering_
  dsepJune3`` of ``strategies.py`` (:data:`PRODUCTION_QUERY_ORDERING`).
* ``programs/constraints/Constraints_DHCP_HHGQ.py`` and ``querybase_constraints.py``:
  ``nurse_nva_0`` is "no minors in nursing facilities" (nursing total × non-voting total = 0);
  the production ``hhgq_total_lb`` gives households a lower bound of 0 because its unit table
  includes vacant housing units (``Constraints_PL94_2020.py``: ``self.hhgq_lb[0] = 0``).

Examples
--------
>>> PL94_2020.shape, PL94_2020.size
((8, 2, 2, 63), 2016)
>>> PL94_2020.cell_labels(2015)["cenrace"]
'white-black-aian-asian-nhopi-sor'
>>> budget = pl94_budget()
>>> budget.total == Fraction(542, 339) ** 2, budget.kind, budget.neighbours
(True, 'zcdp', 'add_remove')
>>> budget.queries("nation")[:3]
('cenrace', 'hispanic', 'votingage')
>>> str(budget.query_budget("block", "detailed") / budget.total)
'650925/16793603'
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Sequence

from hierarchy.errors import HierarchyError
from hierarchy.schema import Attribute, Schema

Fr = Fraction

if TYPE_CHECKING:  # pragma: no cover
    from hierarchy.budget import Budget
    from hierarchy.queries import Workload

__all__ = ["PL94_2020", "HHGQ_LABELS", "CENRACE_LABELS", "RACES", "LEVELS",
           "PRODUCTION_LEVELS", "GLOBAL_SCALE", "TOTAL_RHO", "PRODUCTION_LEVEL_SHARES",
           "PRODUCTION_QUERY_SHARES", "QUERY_EXPRESSIONS", "ROUNDER_QUERY_EXPRESSIONS",
           "PRODUCTION_QUERY_ORDERING", "QueryOrdering", "pl94_workload", "pl94_budget",
           "pl94_query_ordering", "pl94_passes", "pl94_round_passes", "pl94_spec_dict",
           "query_expression", "PRODUCTION_PASS_TOLERANCE"]

# -- schema -------------------------------------------------------------------------------------

#: hhgq levels (``HHGQPersonSimpleAttr.getLevels``): households, then the seven GQ types.
HHGQ_LABELS = ("Household", "Correctional facilities for adults", "Juvenile facilities",
               "Nursing facilities/Skilled-nursing facilities", "Other institutional facilities",
               "College/University student housing", "Military quarters",
               "Other noninstitutional facilities")

#: The six OMB race groups in the order ``CenraceAttr`` combines them.
RACES = ("white", "black", "aian", "asian", "nhopi", "sor")

#: cenrace's 63 levels: every non-empty combination of :data:`RACES`, by number of races and
#: then lexicographically (``CenraceAttr.getLevels``: 0 'white' … 6 'white-black' … 62 all six).
CENRACE_LABELS = tuple("-".join(combo) for k in range(1, len(RACES) + 1)
                       for combo in itertools.combinations(RACES, k))

#: The PL 94-171 person histogram of 2020: 8 × 2 × 2 × 63 = 2,016 cells (:mod:`hierarchy.presets`
#: registers it by name: ``get_schema("pl94_2020")``).
PL94_2020 = Schema((Attribute("hhgq", HHGQ_LABELS),
                    Attribute("votingage", ("17 and under", "18 and over")),
                    Attribute("hispanic", ("Not Hispanic or Latino", "Hispanic or Latino")),
                    Attribute("cenrace", CENRACE_LABELS)), name="pl94_2020")

# -- geography and budget -----------------------------------------------------------------------

#: The toolkit's level names for the production geolevels, root first.
LEVELS = ("nation", "state", "county", "tract", "block_group", "block")
#: The production geolevel names (``person_US.ini``: ``geolevel_names``), root first.
PRODUCTION_LEVELS = ("US", "State", "County", "Tract", "Block_Group", "Block")

#: ``person_default.ini``: ``global_scale = 339/542``.
GLOBAL_SCALE = Fr(339, 542)
#: ``budget.py``: ``rho = 1 / global_scale ** 2`` — the persons' total ρ, about 2.5563.
TOTAL_RHO = 1 / GLOBAL_SCALE ** 2

#: ``person_US.ini``: ``geolevel_budget_prop``, US first.
PRODUCTION_LEVEL_SHARES = dict(zip(PRODUCTION_LEVELS, (
    Fr(104, 4099), Fr(1440, 4099), Fr(447, 4099), Fr(687, 4099), Fr(1256, 4099),
    Fr(165, 4099))))

#: Query names of the strategy, in the order it lists them (``Strategies1.getDPQNames``).
_QUERY_NAMES = ("total", "cenrace", "hispanic", "votingage", "hhinstlevels", "hhgq",
                "hispanic * cenrace", "votingage * cenrace", "votingage * hispanic",
                "votingage * hispanic * cenrace", "detailed")


def _shares(*fractions: Fr, without_total: bool = False) -> dict[str, Fr]:
    names = _QUERY_NAMES[1:] if without_total else _QUERY_NAMES
    if len(names) != len(fractions):
        raise HierarchyError("internal: a level's shares do not match the strategy's queries")
    return dict(zip(names, fractions))


#: ``strategies.py``, ``ProductionCandidate20210527US_mult8_add02_dsepJune3.make``: each level's
#: queries and their exact shares of the level's ρ (transcribed branch by branch).
PRODUCTION_QUERY_SHARES: dict[str, dict[str, Fr]] = {
    # `if level == "US": # No 'total' query`
    "US": _shares(Fr(52, 4097), Fr(26, 4097), Fr(26, 4097), Fr(26, 4097), Fr(26, 4097),
                  Fr(130, 4097), Fr(130, 4097), Fr(26, 4097), Fr(26, 241), Fr(189, 241),
                  without_total=True),
    # `elif level == "State":`
    "State": _shares(Fr(3773, 4097), Fr(6, 4097), Fr(6, 4097), Fr(6, 4097), Fr(6, 4097),
                     Fr(6, 4097), Fr(12, 4097), Fr(12, 4097), Fr(6, 4097), Fr(2, 241),
                     Fr(230, 4097)),
    # `elif level == "County":`
    "County": _shares(Fr(3126, 4097), Fr(10, 4097), Fr(10, 4097), Fr(10, 4097), Fr(10, 4097),
                      Fr(10, 4097), Fr(28, 4097), Fr(28, 4097), Fr(10, 4097), Fr(101, 4097),
                      Fr(754, 4097)),
    # `elif level == "Tract":`
    "Tract": _shares(Fr(1567, 4102), Fr(4, 2051), Fr(5, 4102), Fr(5, 4102), Fr(5, 4102),
                     Fr(5, 4102), Fr(1933, 4102), Fr(10, 2051), Fr(5, 4102), Fr(67, 4102),
                     Fr(241, 2051)),
    # `elif level == "Block_Group":`
    "Block_Group": _shares(Fr(1705, 4099), Fr(3, 4099), Fr(3, 4099), Fr(3, 4099), Fr(3, 4099),
                           Fr(3, 4099), Fr(1055, 4099), Fr(9, 4099), Fr(3, 4099), Fr(24, 4099),
                           Fr(1288, 4099)),
    # `elif level == "Block":`
    "Block": _shares(Fr(5, 4097), Fr(9, 4097), Fr(5, 4097), Fr(5, 4097), Fr(5, 4097),
                     Fr(5, 4097), Fr(21, 4097), Fr(21, 4097), Fr(5, 4097), Fr(71, 4097),
                     Fr(3945, 4097)),
}

# -- queries ------------------------------------------------------------------------------------

_HHINSTLEVELS = ("recode(hhgq: Household=0; Institutional Facility=1,2,3,4; "
                 "Non-Institutional Facility=5,6,7)")


def query_expression(name: str) -> str:
    """The toolkit's query expression of a production query name.

    Production names a marginal by its attributes joined with ``" * "`` (in any order);
    ``total``, ``detailed`` and the recode ``hhinstlevels`` are names of their own.

    Parameters
    ----------
    name : str
        E.g. ``"votingage * hispanic * cenrace"``.

    Returns
    -------
    str
        An expression for :func:`hierarchy.queries.parse_query` on :data:`PL94_2020`.

    Raises
    ------
    HierarchyError
        If a part of the name is not an attribute of :data:`PL94_2020` (or is repeated).

    Examples
    --------
    >>> query_expression("hispanic * cenrace")
    'marginal(hispanic, cenrace)'
    >>> query_expression("hhgq * votingage * hispanic * cenrace")
    'marginal(hhgq, votingage, hispanic, cenrace)'
    >>> query_expression("age * sex")
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: query name 'age * sex' names ['age', 'sex'], which are not
    attributes of pl94_2020 (['hhgq', 'votingage', 'hispanic', 'cenrace']); use total, detailed,
    hhinstlevels or attributes joined by ' * '
    """
    if name in ("total", "detailed"):
        return name
    if name == "hhinstlevels":
        return _HHINSTLEVELS
    parts = [p.strip() for p in str(name).split("*")]
    unknown = [p for p in parts if p not in PL94_2020.names]
    if unknown or len(set(parts)) != len(parts):
        raise HierarchyError(
            f"query name {name!r} names {unknown or parts}, which are not attributes of "
            f"pl94_2020 ({list(PL94_2020.names)})" + ("" if unknown else " without repeats")
            + "; use total, detailed, hhinstlevels or attributes joined by ' * '")
    ordered = [a for a in PL94_2020.names if a in parts]   # schema order, as marginal() keeps
    return f"marginal({', '.join(ordered)})"


#: The 11 measured queries of the strategy: production name → expression.
QUERY_EXPRESSIONS: dict[str, str] = {name: query_expression(name) for name in _QUERY_NAMES}

#: Queries the production rounder targets that are not measured (``ROUNDER_QUERY_ORDERING``).
ROUNDER_QUERY_EXPRESSIONS: dict[str, str] = {
    name: query_expression(name) for name in
    ("hhgq * hispanic", "hhgq * hispanic * cenrace", "hhgq * votingage * hispanic * cenrace")}


def pl94_workload(*, rounder_queries: bool = False) -> "Workload":
    """The strategy's queries on :data:`PL94_2020`, named as in production.

    Parameters
    ----------
    rounder_queries : bool, default False
        Also the three queries the production rounder targets without measuring them
        (:data:`ROUNDER_QUERY_EXPRESSIONS`).

    Returns
    -------
    Workload

    Examples
    --------
    >>> w = pl94_workload()
    >>> len(w), w["hhinstlevels"].n_answers, w["votingage * hispanic * cenrace"].n_answers
    (11, 3, 252)
    >>> len(pl94_workload(rounder_queries=True))
    14
    """
    from hierarchy.queries import Workload

    expressions = dict(QUERY_EXPRESSIONS)
    if rounder_queries:
        expressions.update(ROUNDER_QUERY_EXPRESSIONS)
    return Workload.from_expressions(PL94_2020, expressions)


def _level_names(levels: Sequence[str] | None) -> tuple[str, ...]:
    names = LEVELS if levels is None else tuple(levels)
    if len(names) != len(PRODUCTION_LEVELS) or not all(isinstance(n, str) for n in names):
        raise HierarchyError(
            f"the PL 94 presets need 6 level names, root first, one for each production "
            f"geolevel {list(PRODUCTION_LEVELS)}; got {list(names)!r}")
    if len(set(names)) != len(names):
        raise HierarchyError(f"level names repeat: {list(names)}")
    return names


def pl94_budget(levels: Sequence[str] | None = None, *,
                neighbours: str = "add_remove") -> "Budget":
    """The production budget: ρ = (542/339)² over the levels and queries, exactly.

    Parameters
    ----------
    levels : sequence of 6 str, optional
        The toolkit's names for US, State, County, Tract, Block_Group and Block, root first
        (default :data:`LEVELS`).
    neighbours : {'add_remove', 'change'}, default 'add_remove'
        ``'add_remove'`` reproduces the production noise: with it the ``discrete_gaussian``
        mechanism draws σ² = 1/(2ρ_q), the production's ``2 * prop / global_scale ** 2``
        precision. ``'change'`` keeps the shares but doubles every σ² (a record change moves two
        cells), for the same ρ under change neighbours.

    Returns
    -------
    Budget
        Kind ``'zcdp'``, total :data:`TOTAL_RHO`, level shares :data:`PRODUCTION_LEVEL_SHARES`,
        per-level query shares :data:`PRODUCTION_QUERY_SHARES`.

    Raises
    ------
    HierarchyError
        If ``levels`` is not 6 distinct names, or ``neighbours`` is unknown.

    Examples
    --------
    >>> b = pl94_budget(["US", "State", "County", "Tract", "Block_Group", "Block"])
    >>> b.level_budget("US") == TOTAL_RHO * Fraction(104, 4099)
    True
    >>> "total" in b.queries("US"), "total" in b.queries("State")
    (False, True)
    >>> pl94_budget(["nation", "state"])
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: the PL 94 presets need 6 level names, root first, one for each
    production geolevel ['US', 'State', 'County', 'Tract', 'Block_Group', 'Block']; got ['nation',
    'state']
    """
    from hierarchy.budget import Budget

    names = _level_names(levels)
    rename = dict(zip(PRODUCTION_LEVELS, names))
    return Budget("zcdp", TOTAL_RHO,
                  {rename[lv]: share for lv, share in PRODUCTION_LEVEL_SHARES.items()},
                  {rename[lv]: dict(q) for lv, q in PRODUCTION_QUERY_SHARES.items()},
                  neighbours)


# -- query ordering -----------------------------------------------------------------------------

Passes = tuple[tuple[tuple[str, ...], ...], ...]   # outer passes → inner passes → query names


@dataclass(frozen=True)
class QueryOrdering:
    """One level's multipass ordering, as production states it.

    Each field is a tuple of outer passes, each a tuple of inner passes, each a tuple of query
    names (``optimizer_query_ordering.py`` reads ``{outer: {inner: (names…)}}`` dicts). Names
    may repeat within a pass, as in the source.

    Attributes
    ----------
    l2 : tuple
        The least-squares passes: each inner pass fits its queries, then holds them.
    constrain_to : tuple
        The queries each L2 pass constrains later passes to.
    rounder : tuple
        The rounder's passes (may name unmeasured queries: :data:`ROUNDER_QUERY_EXPRESSIONS`).

    Examples
    --------
    >>> o = pl94_query_ordering()["block"]
    >>> o.l2[0][0][:3], o.rounder[0][0][0]
    (('total', 'cenrace', 'hispanic'), 'total')
    """

    l2: Passes
    constrain_to: Passes
    rounder: Passes

    def __post_init__(self):
        known = set(QUERY_EXPRESSIONS) | set(ROUNDER_QUERY_EXPRESSIONS)
        for field in ("l2", "constrain_to", "rounder"):
            passes = getattr(self, field)
            names = [q for outer in passes for inner in outer for q in inner]
            unknown = sorted(set(names) - known)
            if not names or unknown:
                raise HierarchyError(f"query ordering {field}: needs query names from the "
                                     f"PL 94 workload; unknown {unknown}" if unknown else
                                     f"query ordering {field} is empty")


# Strategy1b_ST_CTY_TR_BG_isoTot_Ordering_dsepJune3 ("isolate total query in TR to control
# diversity-totPop error correlation"): three orderings, by level.
_US_L2 = (("cenrace", "hispanic", "votingage", "hhinstlevels", "hhgq", "votingage * hispanic",
           "hispanic * cenrace", "votingage * cenrace", "votingage * hispanic * cenrace",
           "detailed"),)
_ROUNDER_ALL = ("total", "hhgq", "hhgq * hispanic", "hhgq * hispanic * cenrace",
                "hhgq * votingage * hispanic * cenrace", "detailed")
_REST = ("cenrace", "hispanic", "votingage", "hhinstlevels", "hhgq", "votingage * hispanic",
         "hhgq", "hispanic * cenrace", "votingage * cenrace", "votingage * hispanic",
         "votingage * hispanic * cenrace", "detailed")
_US_ORDERING = QueryOrdering(l2=(_US_L2,), constrain_to=(_US_L2,), rounder=((_ROUNDER_ALL,),))
_ISOLATED_TOTAL = QueryOrdering(   # State, County, Tract, Block_Group: the total alone first
    l2=((("total",), _REST),), constrain_to=((("total",), _REST),),
    rounder=((("total",), _ROUNDER_ALL[1:]),))
_DEFAULT_ORDERING = QueryOrdering(  # Block: one pass
    l2=((("total",) + _REST,),), constrain_to=((("total",) + _REST,),), rounder=((_ROUNDER_ALL,),))

#: ``person_US.ini``'s ``query_ordering``, by production level.
PRODUCTION_QUERY_ORDERING: dict[str, QueryOrdering] = {
    "US": _US_ORDERING, "State": _ISOLATED_TOTAL, "County": _ISOLATED_TOTAL,
    "Tract": _ISOLATED_TOTAL, "Block_Group": _ISOLATED_TOTAL, "Block": _DEFAULT_ORDERING}


#: How far a later fit pass may move an answer an earlier pass fitted: TopDown's
#: ``pass_tolerance`` in production. ``person_default.ini`` sets ``DataIndNPass_toleranceType =
#: opt_tol`` and ``opt_tol_slack = 0.1``; ``DataIndQueriesL2NPass`` (the repository's
#: ``source/programs/optimization/l2_dataIndep_npass_optimizer.py``) then holds each answer
#: within ``opt_tol + 0.1``, where ``opt_tol`` is the least tolerance with which the problem
#: stays feasible (``findOptimalTol``). The earlier pass's own solution satisfies every hold
#: with a tolerance of 0, so ``opt_tol`` is 0 up to the solver's residual and production holds
#: within 0.1. (TopDown's default, 0.5, is not production's.)
PRODUCTION_PASS_TOLERANCE = 0.1


def pl94_query_ordering(levels: Sequence[str] | None = None) -> dict[str, QueryOrdering]:
    """The production query ordering keyed by the toolkit's level names.

    Parameters
    ----------
    levels : sequence of 6 str, optional
        As in :func:`pl94_budget`.

    Returns
    -------
    dict
        Level name → :class:`QueryOrdering`.

    Examples
    --------
    >>> [len(o.l2[0]) for o in pl94_query_ordering().values()]
    [1, 2, 2, 2, 2, 1]
    """
    names = _level_names(levels)
    return {name: PRODUCTION_QUERY_ORDERING[prod] for name, prod in zip(names, PRODUCTION_LEVELS)}


def pl94_passes(level: str, levels: Sequence[str] | None = None) -> list[list[str]]:
    """One level's L2 passes as lists of distinct query names (a ``[solver] passes`` value).

    The inner passes of every outer pass in order; a name repeated within a pass (the source
    lists ``hhgq`` and ``votingage * hispanic`` twice) is kept once.

    Parameters
    ----------
    level : str
        A level name of ``levels``.
    levels : sequence of 6 str, optional

    Returns
    -------
    list of list of str

    Raises
    ------
    HierarchyError
        If ``level`` is not one of ``levels``.

    Examples
    --------
    >>> [len(p) for p in pl94_passes("county")]
    [1, 10]
    >>> pl94_passes("nation")[0][-1]
    'detailed'
    """
    return [list(dict.fromkeys(inner)) for outer in _ordering_at(level, levels).l2
            for inner in outer]


def _ordering_at(level: str, levels: Sequence[str] | None) -> QueryOrdering:
    ordering = pl94_query_ordering(levels)
    if level not in ordering:
        raise HierarchyError(f"no level {level!r}; levels are {list(ordering)}")
    return ordering[level]


def pl94_round_passes(level: str, levels: Sequence[str] | None = None) -> list[list[str]]:
    """One level's rounding passes (a ``[solver] round_passes`` value): the rounder's inner
    passes in order, each a list of workload query names, with the queries the rounder targets
    without measuring them (:data:`ROUNDER_QUERY_EXPRESSIONS`) written as expressions.

    Parameters
    ----------
    level : str
        A level name of ``levels``.
    levels : sequence of 6 str, optional

    Returns
    -------
    list of list of str

    Raises
    ------
    HierarchyError
        If ``level`` is not one of ``levels``.

    Examples
    --------
    >>> pl94_round_passes("tract")[0], pl94_round_passes("tract")[1][:2]
    (['total'], ['hhgq', 'marginal(hhgq, hispanic)'])
    >>> len(pl94_round_passes("block"))
    1
    """
    return [list(dict.fromkeys(ROUNDER_QUERY_EXPRESSIONS.get(q, q) for q in inner))
            for outer in _ordering_at(level, levels).rounder for inner in outer]


# -- spec ---------------------------------------------------------------------------------------

#: ``nurse_nva_0`` as a structural zero: nursing-facility residents aged 17 and under.
NURSE_NVA_0 = {"name": "nurse_nva_0", "type": "structural_zero",
               "query": "recode(hhgq: nursing=3) * recode(votingage: minors=0)"}


def pl94_spec_dict(levels: Sequence[str] | None = None) -> dict[str, Any]:
    """The production invariants and constraints as a spec mapping (TOML-shaped).

    ``tot`` at US and State (production's ``theInvariants.State = tot`` with
    ``theConstraints.US = total``, the sum of the state totals); ``gqhh_vect`` and ``gqhh_tot``
    at Block; ``hhgq_total_lb`` and ``hhgq_total_ub`` at State and Block; ``nurse_nva_0`` at
    Block as a structural zero. Read it with ``invariants.spec.Spec.from_dict``. The catalogue
    constraint ``hhgq_total_lb`` counts each occupied housing unit as holding one person, so the
    units data must list occupied households (as :mod:`hierarchy.synth.census2020` writes them);
    production counts every housing unit, vacant ones too, and bounds households below by 0.

    Parameters
    ----------
    levels : sequence of 6 str, optional
        As in :func:`pl94_budget`.

    Returns
    -------
    dict
        ``{"invariant": [...], "constraint": [...]}``.

    Examples
    --------
    >>> spec = pl94_spec_dict()
    >>> [(c["name"], c["levels"]) for c in spec["constraint"]][-1]
    ('nurse_nva_0', ['block'])
    """
    names = _level_names(levels)
    us, state, block = names[0], names[1], names[-1]
    return {"invariant": [{"name": "tot", "levels": [us, state]},
                          {"name": "gqhh_vect", "levels": [block]},
                          {"name": "gqhh_tot", "levels": [block]}],
            "constraint": [{"name": "hhgq_total_lb", "levels": [state, block]},
                           {"name": "hhgq_total_ub", "levels": [state, block]},
                           {**NURSE_NVA_0, "levels": [block]}]}
