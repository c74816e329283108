"""The 2020 PL 94-171 presets (:mod:`hierarchy.presets.pl94`) against the published production code.

The expected values below were transcribed a second time, independently of the module, from
``uscensusbureau/DAS_2020_Redistricting_Production_Code`` (directory ``DAS_PL94.release/``); each
block names the file and the line it was read from.
"""

from __future__ import annotations

import math
from fractions import Fraction as Fr
from pathlib import Path

import numpy as np
import pytest

from hierarchy.errors import HierarchyError
from hierarchy.mechanisms import get_mechanism
from hierarchy.presets import SCHEMAS, get_schema
from hierarchy.presets.pl94 import (
    CENRACE_LABELS,
    LEVELS,
    PL94_2020,
    QueryOrdering,
    pl94_budget,
    pl94_passes,
    pl94_query_ordering,
    pl94_spec_dict,
    pl94_workload,
    query_expression,
)

REPO = Path(__file__).resolve().parents[1]

# configs/production/pl94/person_US.ini:
#   geolevel_budget_prop = 104/4099, 1440/4099, 447/4099, 687/4099, 1256/4099, 165/4099
LEVEL_SHARES = [Fr(104, 4099), Fr(1440, 4099), Fr(447, 4099), Fr(687, 4099), Fr(1256, 4099),
                Fr(165, 4099)]

# programs/strategies/strategies.py, class ProductionCandidate20210527US_mult8_add02_dsepJune3,
# the lines `geos_qs_props_dict[CC.DPQUERIES][level] = (...)` and
# `geos_qs_props_dict[CC.QUERIESPROP][level] = (...)` of each `level ==` branch.
NAMES = ["total", "cenrace", "hispanic", "votingage", "hhinstlevels", "hhgq",
         "hispanic * cenrace", "votingage * cenrace", "votingage * hispanic",
         "votingage * hispanic * cenrace", "detailed"]
STRATEGY = {
    # if level == "US": # No 'total' query
    "nation": (NAMES[1:], [Fr(52, 4097), Fr(26, 4097), Fr(26, 4097), Fr(26, 4097),
                           Fr(26, 4097), Fr(130, 4097), Fr(130, 4097), Fr(26, 4097),
                           Fr(26, 241), Fr(189, 241)]),
    # elif level == "State":
    "state": (NAMES, [Fr(3773, 4097), Fr(6, 4097), Fr(6, 4097), Fr(6, 4097), Fr(6, 4097),
                      Fr(6, 4097), Fr(12, 4097), Fr(12, 4097), Fr(6, 4097), Fr(2, 241),
                      Fr(230, 4097)]),
    # elif level == "County":
    "county": (NAMES, [Fr(3126, 4097), Fr(10, 4097), Fr(10, 4097), Fr(10, 4097), Fr(10, 4097),
                       Fr(10, 4097), Fr(28, 4097), Fr(28, 4097), Fr(10, 4097), Fr(101, 4097),
                       Fr(754, 4097)]),
    # elif level == "Tract":
    "tract": (NAMES, [Fr(1567, 4102), Fr(4, 2051), Fr(5, 4102), Fr(5, 4102), Fr(5, 4102),
                      Fr(5, 4102), Fr(1933, 4102), Fr(10, 2051), Fr(5, 4102), Fr(67, 4102),
                      Fr(241, 2051)]),
    # elif level == "Block_Group":
    "block_group": (NAMES, [Fr(1705, 4099), Fr(3, 4099), Fr(3, 4099), Fr(3, 4099), Fr(3, 4099),
                            Fr(3, 4099), Fr(1055, 4099), Fr(9, 4099), Fr(3, 4099),
                            Fr(24, 4099), Fr(1288, 4099)]),
    # elif level == "Block":
    "block": (NAMES, [Fr(5, 4097), Fr(9, 4097), Fr(5, 4097), Fr(5, 4097), Fr(5, 4097),
                      Fr(5, 4097), Fr(21, 4097), Fr(21, 4097), Fr(5, 4097), Fr(71, 4097),
                      Fr(3945, 4097)]),
}


# -- schema -------------------------------------------------------------------------------------
def test_schema_is_the_2016_cell_pl94_2020_histogram():
    # schemamaker.py: CC.SCHEMA_PL94_2020: [HHGQ, VOTING_AGE, HISPANIC, CENRACE];
    # Constraints_PL94_2020.py: "histograms are 4-dimensional, with dimensions (8,2,2,63)"
    assert PL94_2020.names == ("hhgq", "votingage", "hispanic", "cenrace")
    assert PL94_2020.shape == (8, 2, 2, 63) and PL94_2020.size == 2016
    assert get_schema("pl94_2020") is PL94_2020 and SCHEMAS["pl94_2020"] is PL94_2020


def test_attribute_labels_are_production_s():
    # hhgq_person_simple.py, HHGQPersonSimpleAttr.getLevels
    assert PL94_2020.attribute("hhgq").labels == (
        "Household", "Correctional facilities for adults", "Juvenile facilities",
        "Nursing facilities/Skilled-nursing facilities", "Other institutional facilities",
        "College/University student housing", "Military quarters",
        "Other noninstitutional facilities")
    # votingage.py VotingAgeAttr.getLevels; HispAttr.getLevels
    assert PL94_2020.attribute("votingage").labels == ("17 and under", "18 and over")
    assert PL94_2020.attribute("hispanic").labels == ("Not Hispanic or Latino",
                                                      "Hispanic or Latino")
    # cenrace.py, CenraceAttr.getLevels: a sample of the 63 entries, by code
    expected = {0: "white", 5: "sor", 6: "white-black", 10: "white-sor", 11: "black-aian",
                20: "nhopi-sor", 21: "white-black-aian", 30: "white-nhopi-sor",
                40: "asian-nhopi-sor", 41: "white-black-aian-asian", 55: "aian-asian-nhopi-sor",
                56: "white-black-aian-asian-nhopi", 61: "black-aian-asian-nhopi-sor",
                62: "white-black-aian-asian-nhopi-sor"}
    assert len(CENRACE_LABELS) == 63 == len(set(CENRACE_LABELS))
    assert {k: CENRACE_LABELS[k] for k in expected} == expected
    # cenrace.py recodeMajorRaces: "Two or More Races": list(range(6, 63))
    assert all(label.count("-") >= 1 for label in CENRACE_LABELS[6:])
    assert not any("-" in label for label in CENRACE_LABELS[:6])


# -- workload -----------------------------------------------------------------------------------
def test_workload_has_the_strategy_s_queries_with_the_right_answers():
    workload = pl94_workload()
    assert list(workload.names) == NAMES
    sizes = {"total": 1, "cenrace": 63, "hispanic": 2, "votingage": 2, "hhinstlevels": 3,
             "hhgq": 8, "hispanic * cenrace": 126, "votingage * cenrace": 126,
             "votingage * hispanic": 4, "votingage * hispanic * cenrace": 252, "detailed": 2016}
    assert {q.name: q.n_answers for q in workload} == sizes
    # hhgq_person_simple.py recodeHHnstLevels: Household [0], Institutional [1-4], Non- [5-7]
    hhinst = workload["hhinstlevels"].matrix.toarray().reshape(3, 8, 252).sum(axis=2) > 0
    assert hhinst.tolist() == [[True] + [False] * 7, [False] + [True] * 4 + [False] * 3,
                               [False] * 5 + [True] * 3]
    # budget.py checkQueryImpactGaps: every query counts every cell exactly once
    for query in pl94_workload(rounder_queries=True):
        assert np.array_equal(np.asarray(query.matrix.sum(axis=0)).ravel(), np.ones(2016))


def test_query_expression_names_attributes_in_any_order():
    assert query_expression("cenrace * votingage") == query_expression("votingage * cenrace")
    for bad in ("age", "hhgq * hhgq", "hispanic *"):
        with pytest.raises(HierarchyError, match="attributes of pl94_2020"):
            query_expression(bad)


# -- budget -------------------------------------------------------------------------------------
def test_total_rho_is_one_over_global_scale_squared():
    # person_default.ini: global_scale = 339/542; budget.py: rho = 1 / self.global_scale ** 2
    budget = pl94_budget()
    assert budget.kind == "zcdp" and budget.total == 1 / Fr(339, 542) ** 2
    assert budget.total == Fr(542, 339) ** 2 == Fr(293764, 114921)
    assert math.isclose(float(budget.total), 2.5562, abs_tol=1e-4)


def test_level_and_query_shares_are_the_strategy_s():
    budget = pl94_budget()
    assert budget.levels == LEVELS
    assert [f for _, f in budget.level_fractions] == LEVEL_SHARES
    assert sum(f for _, f in budget.level_fractions) == 1
    for level, (names, shares) in STRATEGY.items():
        assert list(budget.queries(level)) == names, level
        fractions = dict(dict(budget.query_fractions)[level])
        assert [fractions[q] for q in names] == shares, level
        assert sum(fractions.values()) == 1, level
        for q, share in zip(names, shares):
            assert budget.query_budget(level, q) == budget.total * LEVEL_SHARES[
                LEVELS.index(level)] * share


def test_noise_is_production_s_precision():
    # budget.py: geolevel_noise_precision = 2 * prop / (self.global_scale ** 2): σ² = 1/(2ρ_q)
    budget, workload = pl94_budget(), pl94_workload()
    mechanism = get_mechanism("discrete_gaussian")
    for level in LEVELS:
        for name in budget.queries(level):
            assert budget.sensitivity(workload[name]) == (1.0, 1.0)
            sigma2 = budget.noise_parameter(level, workload[name], mechanism)
            assert math.isclose(sigma2, 1 / (2 * float(budget.query_budget(level, name))))
    # change neighbours: the same shares, twice the variance
    change = pl94_budget(neighbours="change")
    assert math.isclose(change.noise_parameter("block", workload["detailed"], mechanism),
                        2 * budget.noise_parameter("block", workload["detailed"], mechanism))


def test_budget_takes_other_level_names_and_refuses_other_counts():
    names = ["US", "State", "County", "Tract", "Block_Group", "Block"]
    assert pl94_budget(names).to_dict()["query_fractions"]["US"] == \
        pl94_budget().to_dict()["query_fractions"]["nation"]
    with pytest.raises(HierarchyError, match="need 6 level names"):
        pl94_budget(LEVELS[:5])
    with pytest.raises(HierarchyError, match="repeat"):
        pl94_budget(LEVELS[:5] + ("state",))


# -- query ordering -----------------------------------------------------------------------------
def test_query_ordering_is_production_s():
    ordering = pl94_query_ordering()
    # strategies.py Strategy1b_ST_CTY_TR_BG_isoTot_Ordering_dsepJune3: `if geolevel == "US":
    # us_ordering; elif geolevel in ("State", "County", "Tract", "Block_Group"):
    # st_cty_tr_bg_ordering; else: default_ordering`
    assert [len(o.l2[0]) for o in ordering.values()] == [1, 2, 2, 2, 2, 1]
    for level in ("state", "county", "tract", "block_group"):
        assert ordering[level].l2[0][0] == ("total",)
        assert ordering[level].rounder[0][0] == ("total",)
    assert ordering["nation"].rounder[0][0] == (
        "total", "hhgq", "hhgq * hispanic", "hhgq * hispanic * cenrace",
        "hhgq * votingage * hispanic * cenrace", "detailed")
    assert ordering["block"].l2[0][0][:2] == ("total", "cenrace")
    # optimizer_query_ordering.py: every measured query is targeted by the L2 passes
    budget = pl94_budget()
    for level, o in ordering.items():
        targeted = {q for outer in o.l2 for inner in outer for q in inner}
        assert set(budget.queries(level)) <= targeted, level


def test_passes_are_distinct_names_per_inner_pass():
    passes = pl94_passes("tract")
    assert passes[0] == ["total"] and len(passes[1]) == len(set(passes[1])) == 10
    (block,) = pl94_passes("block")
    assert sorted(block) == sorted(NAMES) and block[0] == "total"
    with pytest.raises(HierarchyError, match="no level"):
        pl94_passes("blocks")


def test_query_ordering_refuses_unknown_queries():
    with pytest.raises(HierarchyError, match="unknown"):
        QueryOrdering(l2=((("total", "age"),),), constrain_to=((("total",),),),
                      rounder=((("total",),),))
    with pytest.raises(HierarchyError, match="empty"):
        QueryOrdering(l2=(), constrain_to=((("total",),),), rounder=((("total",),),))


# -- spec and the example configuration ---------------------------------------------------------
def test_spec_and_example_config_equal_the_presets():
    from invariants.spec import Spec
    from postproc.apps.runs.config import load_config

    spec = Spec.from_dict(pl94_spec_dict())
    # person_default.ini: theInvariants.Block = gqhh_vect, gqhh_tot; theInvariants.State = tot;
    # theConstraints.Block = hhgq_total_lb, hhgq_total_ub, nurse_nva_0;
    # person_US.ini: theConstraints.State = hhgq_total_lb, hhgq_total_ub
    assert {i.name: i.levels for i in spec.invariants} == {
        "tot": ("nation", "state"), "gqhh_vect": ("block",), "gqhh_tot": ("block",)}
    assert {c.name: c.levels for c in spec.constraints} == {
        "hhgq_total_lb": ("state", "block"), "hhgq_total_ub": ("state", "block"),
        "nurse_nva_0": ("block",)}
    config = load_config(REPO / "examples" / "pl94_2020.toml")
    assert config.schema is PL94_2020 and config.levels == LEVELS
    assert config.workload.to_dict() == pl94_workload().to_dict()
    assert config.budget == pl94_budget()
    assert config.spec.to_dict() == spec.to_dict()
    assert config.mechanism.name == "discrete_gaussian"
