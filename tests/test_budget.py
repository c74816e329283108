"""Budgets: exact shares, validation, sensitivities (checked by brute force over neighbours) and
noise parameters for every mechanism kind."""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
from fractions import Fraction

import numpy as np
import pytest

from hierarchy.budget import E2E_QUERY_FRACTIONS, NOTIONS, ZCDP, Budget, PureDP, as_privacy, notion
from hierarchy.errors import HierarchyError
from hierarchy.mechanisms import get_mechanism
from hierarchy.queries import (
    Workload,
    detailed,
    e2e_workload,
    marginal,
    parse_query,
    product,
    recode,
    total,
)
from hierarchy.schema import E2E_1940, Attribute, Schema

LEVELS = ["nation", "state", "county", "enum_dist"]
W = e2e_workload(E2E_1940)


# ---------------------------------------------------------------------------------------------
# exact shares
# ---------------------------------------------------------------------------------------------


def test_e2e_shares_are_exact():
    b = Budget.e2e(1, LEVELS)
    assert b.kind == "pure" and b.total == 1 and b.levels == tuple(LEVELS)
    for lv in LEVELS:
        assert b.level_budget(lv) == Fraction(1, 4)
        assert b.queries(lv) == ("detailed", "hhgq", "va_hisp_race")
        assert b.query_budget(lv, "detailed") == Fraction(1, 40)
        assert b.query_budget(lv, "hhgq") == Fraction(9, 160)
        assert b.query_budget(lv, "va_hisp_race") == Fraction(27, 160)
    # sequential composition over levels and queries spends exactly the total
    spent = sum(b.query_budget(lv, q) for lv in LEVELS for q in b.queries(lv))
    assert spent == 1 and isinstance(spent, Fraction)
    assert E2E_QUERY_FRACTIONS == {"detailed": Fraction(1, 10), "hhgq": Fraction(9, 40),
                                   "va_hisp_race": Fraction(27, 40)}
    # other totals scale exactly, including ones that are not exact binary floats
    b = Budget.e2e(0.1, LEVELS)
    assert b.total == Fraction(1, 10)
    assert b.query_budget("county", "va_hisp_race") == Fraction(27, 1600)
    assert Budget.e2e("1/3", LEVELS[:3], kind="zcdp").query_budget("nation", "hhgq") == \
        Fraction(1, 3) * Fraction(1, 3) * Fraction(9, 40)


def test_decimal_fractions_sum_to_one_exactly():
    # 0.6 + 0.3 + 0.1 is 0.9999999999999999 in binary floats; as exact rationals it is 1
    assert 0.6 + 0.3 + 0.1 != 1
    b = Budget("pure", 2, {"a": 0.5, "b": "0.5"}, {"x": 0.6, "y": 0.3, "z": 0.1})
    assert b.query_budget("a", "y") == Fraction(3, 10)
    b = Budget("pure", 1, {"a": 1}, {f"q{i}": 0.1 for i in range(10)})
    assert b.query_budget("a", "q9") == Fraction(1, 10)
    with pytest.raises(HierarchyError, match="sum to 1"):
        Budget("pure", 1, {"a": 1}, {"x": 0.3, "y": 0.3, "z": 0.3})


# ---------------------------------------------------------------------------------------------
# validation
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("args, message", [
    (("pure", 1, {"a": "1/2", "b": "1/4"}, {"q": 1}),
     r"level fractions must sum to 1 exactly; they sum to 3/4 \(a=1/2, b=1/4\)"),
    (("pure", 1, {"a": 1}, {"q": 0.5, "r": 0.6}), r"query fractions must sum to 1.*11/10"),
    (("pure", 0, {"a": 1}, {"q": 1}), "total budget must be positive"),
    (("pure", -1, {"a": 1}, {"q": 1}), "total budget must be positive"),
    (("pure", "nan", {"a": 1}, {"q": 1}), "total budget"),
    (("pure", 1, {"a": 0, "b": 1}, {"q": 1}), r"level fractions must be positive; got a=0"),
    (("pure", 1, {"a": 1}, {"q": -0.5, "r": 1.5}), r"must be positive; got q=-1/2"),
    (("pure", 1, {}, {"q": 1}), "non-empty mapping"),
    (("pure", 1, {"a": 1}, {}), "non-empty mapping"),
    (("dp", 1, {"a": 1}, {"q": 1}), "kind must be 'pure'"),
    (("pure", 1, {"a": 1}, {"q": 1}, "swap"), "neighbours must be"),
    (("pure", 1, {"a": 1}, {"q": "x"}), r"query fractions 'q' must be a finite number"),
    (("pure", 1, {"a": 0.5, "b": 0.5}, {"a": {"q": 1}}), r"missing for levels \['b'\]"),
    (("pure", 1, {"a": 1}, {"a": {"q": 1}, "c": {"q": 1}}), r"unknown levels \['c'\]"),
    (("pure", 1, {"a": 1}, {"a": {"q": 0.5}}), r"query fractions of level 'a' must sum to 1"),
])
def test_invalid_budgets_raise(args, message):
    with pytest.raises(HierarchyError, match=message):
        Budget(*args)


def test_budget_is_immutable_value():
    b = Budget.e2e(1, LEVELS)
    with pytest.raises(dataclasses.FrozenInstanceError):
        b.total = Fraction(2)
    assert b == Budget.e2e("1", LEVELS) and hash(b) == hash(Budget.e2e(1.0, LEVELS))
    assert b != Budget.e2e(2, LEVELS)


def test_per_level_query_fractions():
    b = Budget("zcdp", "0.5", {"nation": "0.2", "county": "0.8"},
               {"nation": {"total": 1}, "county": {"detailed": "1/3", "hhgq": "2/3"}})
    assert b.queries("nation") == ("total",)
    assert b.queries("county") == ("detailed", "hhgq")
    assert b.query_budget("nation", "total") == Fraction(1, 10)
    assert b.query_budget("county", "hhgq") == Fraction(4, 15)
    with pytest.raises(HierarchyError, match=r"'detailed' is not measured at level 'nation'.*"
                                             r"\['total'\]"):
        b.query_budget("nation", "detailed")
    with pytest.raises(HierarchyError, match=r"no level 'state'.*\['nation', 'county'\]"):
        b.level_budget("state")
    with pytest.raises(HierarchyError, match="no level 'state'"):
        b.queries("state")
    spent = sum(b.query_budget(lv, q) for lv in b.levels for q in b.queries(lv))
    assert spent == Fraction(1, 2)


def test_check_against_workload_and_levels():
    w = Workload((total(E2E_1940), detailed(E2E_1940), marginal(E2E_1940, "hhgq", name="hhgq")))
    b = Budget("pure", 1, {"nation": "0.5", "county": "0.5"},
               {"nation": {"total": 1}, "county": {"detailed": "1/2", "hhgq": "1/2"}})
    b.check_against(w, ["nation", "state", "county"])    # unmeasured levels are fine
    with pytest.raises(HierarchyError, match=r"names levels \['county'\] that the geography "
                                             r"does not have"):
        b.check_against(w, ["nation", "state"])
    with pytest.raises(HierarchyError, match=r"level 'nation' names queries \['total'\] that are "
                                             r"not in the workload"):
        b.check_against(W, ["nation", "county"])


# ---------------------------------------------------------------------------------------------
# sensitivity, checked by brute force over neighbouring databases
# ---------------------------------------------------------------------------------------------


def brute_force_sensitivity(query, neighbours):
    """(L1, L2) over every neighbouring pair, with two units of one level.

    ``change``: one person in cell j of unit A becomes a person in cell k of unit A or of unit
    B. ``add_remove``: one person in cell j is added. The level's answer vector is the stack of
    both units' answers."""
    m = query.matrix.toarray().astype(float)
    n = m.shape[1]
    best1 = best2 = 0.0
    if neighbours == "add_remove":
        for j in range(n):
            best1 = max(best1, np.abs(m[:, j]).sum())
            best2 = max(best2, math.sqrt((m[:, j] ** 2).sum()))
        return best1, best2
    for j, k in itertools.product(range(n), repeat=2):
        same = m[:, k] - m[:, j]                         # moves within unit A
        other = np.concatenate([-m[:, j], m[:, k]])      # moves from unit A to unit B
        for d in (same, other):
            best1 = max(best1, np.abs(d).sum())
            best2 = max(best2, math.sqrt((d ** 2).sum()))
    return best1, best2


SMALL = Schema((Attribute("a", ("0", "1", "2")), Attribute("b", ("x", "y"))))
SMALL_QUERIES = [
    detailed(SMALL), total(SMALL), marginal(SMALL, "a"), marginal(SMALL, "b"),
    recode(SMALL, "a", {"lo": [0, 1], "hi": [1, 2], "all": [0, 1, 2]}),   # overlapping groups
    product(recode(SMALL, "a", {"p": [0, 1], "q": [1]}), marginal(SMALL, "b")),
    recode(SMALL, "a", {"only": [2]}),
]


@pytest.mark.parametrize("query", SMALL_QUERIES, ids=lambda q: q.expression)
@pytest.mark.parametrize("neighbours", ["change", "add_remove"])
def test_sensitivity_equals_brute_force(query, neighbours):
    b = Budget("pure", 1, {"n": 1}, {query.name: 1}, neighbours)
    l1, l2 = b.sensitivity(query)
    r1, r2 = brute_force_sensitivity(query, neighbours)
    assert l1 == pytest.approx(r1, abs=1e-12)
    assert l2 == pytest.approx(r2, abs=1e-12)


def test_e2e_sensitivities():
    change = Budget.e2e(1, LEVELS)
    addrem = Budget("pure", 1, {lv: "1/4" for lv in LEVELS}, E2E_QUERY_FRACTIONS, "add_remove")
    for q in list(W) + [total(E2E_1940)]:
        assert change.sensitivity(q) == (2.0, math.sqrt(2))   # Δ₁ = 2: docs/measurement.md
        assert addrem.sensitivity(q) == (1.0, 1.0)
    overlap = parse_query("recode(cenrace: asian=3,4; nonwhite=1-5)", E2E_1940)
    assert change.sensitivity(overlap) == (4.0, 2.0)
    assert addrem.sensitivity(overlap) == (2.0, math.sqrt(2))


# ---------------------------------------------------------------------------------------------
# noise parameters
# ---------------------------------------------------------------------------------------------


def test_noise_parameter_for_each_mechanism_kind():
    pure = Budget.e2e(1, LEVELS)
    share = 27 / 160                                   # va_hisp_race at any level, Δ₁ = 2
    q = W["va_hisp_race"]
    assert pure.noise_parameter("county", q, get_mechanism("geometric")) == \
        pytest.approx(share / 2, rel=1e-15)
    assert pure.noise_parameter("county", q, get_mechanism("laplace")) == \
        pytest.approx(2 / share, rel=1e-15)
    for name in ("gaussian", "discrete_gaussian"):
        with pytest.raises(HierarchyError, match="needs a zCDP budget"):
            pure.noise_parameter("county", q, get_mechanism(name))

    rho = Budget.e2e("0.5", LEVELS, kind="zcdp")
    rshare = 0.5 * 27 / 160                            # Δ₂ = sqrt(2)
    for name in ("gaussian", "discrete_gaussian"):
        assert rho.noise_parameter("state", q, get_mechanism(name)) == \
            pytest.approx(2 / (2 * rshare), rel=1e-14)
    # a pure-DP mechanism under a zCDP budget uses ε = sqrt(2ρ) (ε-DP implies ε²/2-zCDP)
    z = rho.noise_parameter("state", q, get_mechanism("geometric"))
    assert z == pytest.approx(math.sqrt(2 * rshare) / 2, rel=1e-14)
    assert (2 * z) ** 2 / 2 == pytest.approx(rshare, rel=1e-14)
    assert rho.noise_parameter("state", q, get_mechanism("laplace")) == \
        pytest.approx(2 / math.sqrt(2 * rshare), rel=1e-14)


def test_noise_parameter_uses_add_remove_sensitivity():
    b = Budget("pure", 1, {"n": 1}, {"detailed": 1}, "add_remove")
    assert b.noise_parameter("n", detailed(E2E_1940), get_mechanism("geometric")) == 1.0
    with pytest.raises(HierarchyError, match="not measured"):
        b.noise_parameter("n", total(E2E_1940), get_mechanism("geometric"))


# ---------------------------------------------------------------------------------------------
# serialization
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("budget", [
    Budget.e2e(1, LEVELS),
    Budget.e2e("0.35", LEVELS[:2], kind="zcdp"),
    Budget("pure", "1/3", {"a": "1/3", "b": "2/3"}, {"a": {"total": 1},
                                                    "b": {"x": "0.1", "y": "0.9"}},
           "add_remove"),
])
def test_dict_round_trip(budget):
    data = budget.to_dict()
    assert json.loads(json.dumps(data)) == data          # JSON-ready
    back = Budget.from_dict(json.loads(json.dumps(data)))
    assert back == budget
    for lv in budget.levels:
        for q in budget.queries(lv):
            assert back.query_budget(lv, q) == budget.query_budget(lv, q)
    with pytest.raises(HierarchyError, match="missing 'kind'"):
        Budget.from_dict({k: v for k, v in data.items() if k != "kind"})


def test_describe_lists_every_share():
    text = Budget.e2e(1, LEVELS).describe()
    assert text.splitlines()[0] == "pure budget ε = 1 (change neighbours)"
    assert "  county: 1/4 = detailed 1/40, hhgq 9/160, va_hisp_race 27/160" in text
    assert len(text.splitlines()) == 5


# ---------------------------------------------------------------------------------------------
# typed budgets: PureDP(ε), ZCDP(ρ)
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("cls, value", [(PureDP, 0), (PureDP, -1), (ZCDP, "0"), (ZCDP, "nan"),
                                        (PureDP, True), (ZCDP, "x"), (PureDP, 1 / 3),
                                        (ZCDP, None)])
def test_typed_budget_construction_is_validated(cls, value):
    with pytest.raises(HierarchyError, match=f"the {cls.symbol} of {cls.__name__}"):
        cls(value)


def test_typed_budgets_are_exact_frozen_values():
    eps = PureDP(0.25)
    assert eps.epsilon == Fraction(1, 4) == eps.value and eps.kind == "pure"
    assert PureDP("1/4") == eps and hash(PureDP("1/4")) == hash(eps) and eps != ZCDP("1/4")
    assert eval(repr(PureDP("1/3"))) == PureDP("1/3") and eval(repr(ZCDP(2))) == ZCDP(2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        eps.epsilon = Fraction(1)
    assert NOTIONS == {"pure": PureDP, "zcdp": ZCDP}
    assert notion("zcdp") is ZCDP and notion(PureDP(1)) is PureDP and notion(ZCDP) is ZCDP
    with pytest.raises(HierarchyError, match="kind must be 'pure'"):
        notion("approx")


@pytest.mark.parametrize("epsilon", ["1/3", 2, "0.001"])
def test_pure_to_zcdp_is_the_standard_bound(epsilon):
    e = Fraction(epsilon)
    assert PureDP(epsilon).to_zcdp() == ZCDP(e * e / 2)
    assert ZCDP(e).to_zcdp() == ZCDP(e)
    # a pure mechanism spends sqrt(2ρ) of a zCDP budget: the inverse of the bound
    assert math.isclose(PureDP(epsilon).to_zcdp().spendable("pure"), float(e))
    with pytest.raises(HierarchyError, match="cannot keep the pure-DP budget"):
        PureDP(epsilon).spendable("zcdp")


def test_as_privacy_reads_bare_numbers_as_today_and_refuses_contradictions():
    assert as_privacy(1) == PureDP(1) and as_privacy("1/2", "zcdp") == ZCDP("1/2")
    assert as_privacy(ZCDP(1), "zcdp") == ZCDP(1)
    with pytest.raises(HierarchyError, match="notion given with it is 'pure'"):
        as_privacy(ZCDP(1), "pure")
    with pytest.raises(HierarchyError, match="notion given with it is 'zcdp'"):
        Budget.e2e(PureDP(1), LEVELS, kind="zcdp")


@pytest.mark.parametrize("typed, bare, kind, mechanism", [
    (PureDP(1), 1, "pure", "geometric"), (PureDP("0.5"), 0.5, "pure", "laplace"),
    (ZCDP("1/2"), "1/2", "zcdp", "discrete_gaussian"), (ZCDP(2), 2, "zcdp", "geometric"),
    (ZCDP("0.01"), 0.01, "zcdp", "gaussian"),
])
def test_a_typed_total_gives_the_same_budget_noise_and_accounting_as_a_bare_number(
        typed, bare, kind, mechanism):
    from hierarchy.accounting import account_levels
    b_typed = Budget.e2e(typed, LEVELS)
    b_bare = Budget.e2e(bare, LEVELS, kind=kind)
    assert b_typed == b_bare and b_typed.to_dict() == b_bare.to_dict()
    assert b_typed.privacy == typed and b_typed.kind == typed.kind
    mech = get_mechanism(mechanism)
    for level in LEVELS:
        for name in b_bare.queries(level):
            assert b_typed.noise_parameter(level, W[name], mech) == \
                b_bare.noise_parameter(level, W[name], mech)
    shares = {lv: {q: b_bare.query_budget(lv, q) for q in b_bare.queries(lv)} for lv in LEVELS}
    typed_shares = {lv: {q: NOTIONS[kind](v) for q, v in qs.items()} for lv, qs in shares.items()}
    assert account_levels(typed_shares, notion=type(typed), sensitivity=2).to_dict() == \
        account_levels(shares, notion=kind, sensitivity=2).to_dict()


def test_budget_kind_may_come_from_the_typed_total_only():
    assert Budget(None, ZCDP(1), {"a": 1}, {"q": 1}).kind == "zcdp"
    assert Budget(None, 1, {"a": 1}, {"q": 1}).kind == "pure"
    assert Budget("zcdp", ZCDP(1), {"a": 1}, {"q": 1}) == Budget("zcdp", 1, {"a": 1}, {"q": 1})
    with pytest.raises(HierarchyError, match="needs a zCDP budget"):
        Budget.e2e(PureDP(1), LEVELS).noise_parameter("nation", W["hhgq"],
                                                      get_mechanism("discrete_gaussian"))


def test_mechanism_parameter_takes_typed_budgets():
    geometric, dgauss = get_mechanism("geometric"), get_mechanism("discrete_gaussian")
    assert geometric.parameter(PureDP("1/2"), 2) == geometric.parameter(0.5, 2)
    assert geometric.parameter(ZCDP("1/8"), 1) == math.sqrt(2 * 0.125)
    assert dgauss.parameter(ZCDP("1/2"), 1) == dgauss.parameter(0.5, 1)
    with pytest.raises(HierarchyError, match="cannot keep the pure-DP budget"):
        dgauss.parameter(PureDP(1), 1)
