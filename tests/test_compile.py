"""invariants.compile: the rows and bounds of docs/spec.md on hand-made data, upward implication,
validation of published statistics, the two consumer forms and exact verification.

Expected rows are written cell by cell from the schema below (no query code), so a transposed
marginal or a wrong bound shows up as a mismatch.

Schema: ``hhgq`` ∈ {hh, gqA, gqB} × ``va`` ∈ {u, a}: 6 cells, cell = 2·hhgq + va.
Geography: nation → states S1, S2 → counties S1a, S1b (under S1), S2a (under S2).
"""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest
import scipy.sparse as sp

from hierarchy.geography import Geography
from hierarchy.schema import Attribute, Schema
from invariants.compile import (
    LevelConstraints,
    check_violations,
    compile_spec,
    node_cvxpy_constraints,
    node_matrices,
    resolve_statistics,
    violations,
)
from invariants.errors import SpecError
from invariants.spec import Constraint, Invariant, Spec

SCHEMA = Schema((Attribute("hhgq", ("hh", "gqA", "gqB")), Attribute("va", ("u", "a"))), "tiny")
LEVELS = ("nation", "state", "county")
GEO = Geography(LEVELS, (np.array(["US"]), np.array(["S1", "S2"]),
                         np.array(["S1a", "S1b", "S2a"])),
                (np.array([-1]), np.array([0, 0]), np.array([0, 0, 1])))
INF = np.inf

# dense expected rows
TOTAL = np.ones(6, np.int64)


def hhgq_row(g):
    return np.array([1 if c // 2 == g else 0 for c in range(6)])


def va_row(v):
    return np.array([1 if c % 2 == v else 0 for c in range(6)])


# counties: units by type (hh, gqA, gqB) and a truth that fits them
COUNTY_GQHH = np.array([[2, 1, 0],      # S1a: two households, one gqA facility
                        [3, 0, 0],      # S1b: households only
                        [1, 0, 2]])     # S2a: one household, two gqB facilities
COUNTY_TRUTH = np.array([[3, 2, 1, 0, 0, 0],     # tot 6
                         [1, 4, 0, 0, 0, 0],     # tot 5
                         [0, 2, 0, 0, 1, 4]])    # tot 7


def up(values, level):
    return GEO.aggregate(values, "county", level)


def published(**override):
    pub = {"nation": {"tot": up(COUNTY_TRUTH.sum(1), "nation")},
           "state": {"tot": up(COUNTY_TRUTH.sum(1), "state")},
           "county": {"gqhh": COUNTY_GQHH.copy()}}
    for key, value in override.items():
        level, stat = key.split("__")
        if value is None:
            pub[level].pop(stat, None)
        else:
            pub[level][stat] = value
    return pub


def e2e_like(imply=False, extra=()):
    return Spec(invariants=(Invariant("tot", ("nation", "state")),
                            Invariant("gqhh_vect", ("county",))),
                constraints=(Constraint("hhgq_total_lb", ("county", "state")),
                             Constraint("hhgq_total_ub", ("county", "state")),
                             Constraint("total_ge_households"), *extra),
                imply_upward=imply)


def find_row(lc: LevelConstraints, dense: np.ndarray) -> int:
    rows = lc.matrix.toarray()
    hits = [r for r in range(rows.shape[0]) if np.array_equal(rows[r], dense)]
    assert len(hits) == 1, f"row {dense.tolist()} appears {len(hits)} times"
    return hits[0]


def bounds(lc, dense):
    r = find_row(lc, dense)
    return lc.lower[:, r], lc.upper[:, r], lc.labels[r]


# ---------------------------------------------------------------------------------------------
# catalogue constraints: exact rows and bounds
# ---------------------------------------------------------------------------------------------


def test_catalogue_rows_at_a_level_without_tot():
    lc = compile_spec(e2e_like(), SCHEMA, GEO, published())["county"]
    assert lc.matrix.dtype == np.int64 and lc.matrix.shape == (4, 6)   # 3 hhgq rows + total
    for g in range(3):
        lo, hi, label = bounds(lc, hhgq_row(g))
        assert lo.tolist() == COUNTY_GQHH[:, g].tolist()                # lb: units of type g
        # ub without an invariant total: +inf, and 0 where the unit has no unit of type g
        assert hi.tolist() == [0.0 if COUNTY_GQHH[u, g] == 0 else INF for u in range(3)]
        assert label == f"hhgq_total_lb & hhgq_total_ub: hhgq={SCHEMA.attributes[0].labels[g]}"
    lo, hi, label = bounds(lc, TOTAL)
    assert lo.tolist() == COUNTY_GQHH[:, 0].tolist() and hi.tolist() == [INF] * 3
    assert label == "total_ge_households: total"
    # zero cells: every cell of a type without units
    expect = np.repeat(COUNTY_GQHH == 0, 2, axis=1)
    np.testing.assert_array_equal(lc.zero, expect)


def test_hhgq_total_ub_uses_the_invariant_total():
    lc = compile_spec(e2e_like(), SCHEMA, GEO, published())["state"]
    gqhh = up(COUNTY_GQHH, "state")          # S1: [5, 1, 0]; S2: [1, 0, 2]
    tot = up(COUNTY_TRUTH.sum(1), "state")   # S1: 11; S2: 7
    for g in range(3):
        lo, hi, _ = bounds(lc, hhgq_row(g))
        others = gqhh.sum(1) - gqhh[:, g]
        expect = np.where(gqhh[:, g] == 0, 0, tot - others)
        assert hi.tolist() == expect.tolist(), g
        assert lo.tolist() == gqhh[:, g].tolist()
    assert bounds(lc, hhgq_row(0))[1].tolist() == [11 - 1, 7 - 2]
    # tot and total_ge_households share the total row: lower = max, upper = tot
    lo, hi, label = bounds(lc, TOTAL)
    assert lo.tolist() == tot.tolist() and hi.tolist() == tot.tolist()
    assert label == "tot & total_ge_households: total"


def test_nation_has_tot_and_households_only():
    lc = compile_spec(e2e_like(), SCHEMA, GEO, published())["nation"]
    assert lc.matrix.shape[0] == 1
    lo, hi, label = bounds(lc, TOTAL)
    assert lo.tolist() == hi.tolist() == [18.0]
    assert not lc.zero.any()
    assert lc.constraint_names() == ["tot", "total_ge_households"]


def test_household_level_is_configurable():
    spec = Spec(invariants=(Invariant("gqhh_vect", ("county",)),),
                constraints=(Constraint("total_ge_households", ("county",)),),
                household_level=2, imply_upward=False)
    lc = compile_spec(spec, SCHEMA, GEO, published())["county"]
    assert bounds(lc, TOTAL)[0].tolist() == COUNTY_GQHH[:, 2].tolist()


def test_unit_attribute_must_be_in_the_schema():
    spec = Spec(invariants=(Invariant("gqhh_vect", ("county",)),),
                constraints=(Constraint("hhgq_total_lb", ("county",)),), unit_attribute="rel")
    with pytest.raises(SpecError, match="unit attribute 'rel' is not in the schema"):
        compile_spec(spec, SCHEMA, GEO, published())


# ---------------------------------------------------------------------------------------------
# structural zeros and linear constraints
# ---------------------------------------------------------------------------------------------


def test_structural_zero_cells():
    spec = Spec(constraints=(Constraint("no_gqA_minors", type="structural_zero",
                                        query="recode(hhgq: g=1) * marginal(va)", answers=[0]),),
                imply_upward=False)
    compiled = compile_spec(spec, SCHEMA, GEO, {})
    for lv in LEVELS:
        lc = compiled[lv]
        expect = np.zeros(6, bool)
        expect[2] = True                                  # hhgq=gqA, va=u
        assert (lc.zero == expect).all(), lv
        assert lc.matrix.shape[0] == 1
        assert lc.lower[:, 0].tolist() == lc.upper[:, 0].tolist() == [0.0] * lc.n_units


def linear(name, query, sense, rhs, answers=None, levels="all"):
    return Constraint(name, levels, "linear", query, answers, sense, rhs)


@pytest.mark.parametrize("rhs,expect", [
    (4, [[4, 4]] * 3),
    ([3, 5], [[3, 5]] * 3),
    ("tot", None),
    ("gqhh[0]", [[2, 2], [3, 3], [1, 1]]),
])
def test_linear_constraint_rhs_forms(rhs, expect):
    spec = Spec(invariants=(Invariant("tot", "all"), Invariant("gqhh_vect", ("county",))),
                constraints=(linear("cap", "marginal(va)", "<=", rhs, levels=("county",)),),
                imply_upward=False)
    pub = published(county__tot=COUNTY_TRUTH.sum(1))
    lc = compile_spec(spec, SCHEMA, GEO, pub)["county"]
    if expect is None:
        expect = np.repeat(COUNTY_TRUTH.sum(1)[:, None], 2, axis=1).tolist()
    his = [bounds(lc, va_row(v))[1] for v in range(2)]
    los = [bounds(lc, va_row(v))[0] for v in range(2)]
    assert np.stack(his, axis=1).tolist() == expect
    assert all((lo == -INF).all() for lo in los)
    assert bounds(lc, va_row(0))[2] == "cap: u"


def test_linear_rhs_gqhh_one_per_answer_and_senses():
    spec = Spec(invariants=(Invariant("gqhh_vect", ("county",)),),
                constraints=(linear("per_type", "marginal(hhgq)", ">=", "gqhh"),
                             linear("adults", "marginal(va)", "==", [1], answers=[1]),
                             linear("minors", "marginal(va)", ">=", 0, answers=[0])),
                imply_upward=False)
    lc = compile_spec(spec, SCHEMA, GEO, published())["county"]
    for g in range(3):
        lo, hi, _ = bounds(lc, hhgq_row(g))
        assert lo.tolist() == COUNTY_GQHH[:, g].tolist() and (hi == INF).all()
    lo, hi, label = bounds(lc, va_row(1))
    assert lo.tolist() == hi.tolist() == [1.0] * 3 and label == "adults: a"
    lo, hi, label = bounds(lc, va_row(0))
    assert lo.tolist() == [0.0] * 3 and (hi == INF).all()


def test_linear_rhs_errors_name_the_constraint():
    text = ('[[invariant]]\nname = "gqhh_vect"\nlevels = ["county"]\n\n'
            '[[constraint]]\nname = "bad"\ntype = "linear"\nquery = "marginal(va)"\n'
            'sense = "<="\nrhs = RHS\nlevels = ["county"]\n')
    cases = [("[1, 2, 3]", "rhs has 3 values for 2 answers"),
             ('"gqhh[7]"', "gqhh[7] is out of range"),
             ('"gqhh"', "rhs 'gqhh' has 3 values per unit but the constraint has 2 answers")]
    for rhs, words in cases:
        spec = Spec.from_toml_string(text.replace("RHS", rhs), source="c.toml")
        with pytest.raises(SpecError) as info:
            compile_spec(spec, SCHEMA, GEO, published())
        assert str(info.value).startswith("c.toml, line 6: constraint 'bad'"), info.value
        assert words in str(info.value), info.value
    bad_query = Spec.from_toml_string(text.replace('"marginal(va)"', '"marginal(age)"')
                                      .replace("RHS", "1"), source="c.toml")
    with pytest.raises(SpecError, match=r"^c.toml, line 6: constraint 'bad': bad query"):
        compile_spec(bad_query, SCHEMA, GEO, published())
    answers = Spec(constraints=(linear("a", "marginal(va)", "<=", 1, answers=[2]),))
    with pytest.raises(SpecError, match=r"answer 2 is out of range; it has 2 answers \(0..1\)"):
        compile_spec(answers, SCHEMA, GEO, {})


def test_fractional_rhs_is_tightened_to_integers():
    """Histograms are integers, so ``total ≥ 2.5`` means ``total ≥ 3``; verification in integer
    arithmetic must not accept 2 (it would if the bound were truncated to 2)."""
    spec = Spec(constraints=(linear("ge", "total", ">=", 2.5), linear("le", "marginal(va)",
                                                                       "<=", 1.5)),
                imply_upward=False)
    lc = compile_spec(spec, SCHEMA, GEO, {})["county"]
    assert bounds(lc, TOTAL)[0].tolist() == [3.0] * 3
    assert bounds(lc, va_row(0))[1].tolist() == [1.0] * 3
    x = np.zeros((3, 6), np.int64)
    x[:, 1] = 1
    x[:, 2] = 1                  # total 2: violates total ≥ 2.5
    assert len(violations(lc, x)) == 3
    with pytest.raises(SpecError, match="contradict"):
        compile_spec(Spec(constraints=(linear("eq", "total", "==", 2.5),)), SCHEMA, GEO, {})


def test_identical_rows_merge_with_intersected_bounds():
    spec = Spec(constraints=(linear("a", "total", ">=", 3), linear("b", "total", ">=", 5),
                             linear("c", "total", "<=", 9), linear("d", "marginal(hhgq)", "<=",
                                                                     [8, 7, 6]),
                             linear("e", "recode(hhgq: x=1)", "<=", 4)),
                imply_upward=False)
    lc = compile_spec(spec, SCHEMA, GEO, {})["county"]
    assert lc.matrix.shape[0] == 4        # total + 3 hhgq rows; e's row is hhgq=gqA again
    lo, hi, label = bounds(lc, TOTAL)
    assert lo.tolist() == [5.0] * 3 and hi.tolist() == [9.0] * 3
    assert label == "a & b & c: total"
    lo, hi, label = bounds(lc, hhgq_row(1))
    assert hi.tolist() == [4.0] * 3
    assert label == "d & e: gqA (= x)"


# ---------------------------------------------------------------------------------------------
# upward implication
# ---------------------------------------------------------------------------------------------


def test_upward_implication_sums_children_bounds():
    compiled = compile_spec(e2e_like(imply=True), SCHEMA, GEO, published())
    county, state, nation = compiled["county"], compiled["state"], compiled["nation"]
    for g in range(3):
        c_lo, c_hi, _ = bounds(county, hhgq_row(g))
        s_lo, s_hi, label = bounds(state, hhgq_row(g))
        # state has its own lb/ub; the implied rows intersect with them
        own_lo = up(COUNTY_GQHH, "state")[:, g]
        assert s_lo.tolist() == np.maximum(own_lo, up(c_lo, "state")).tolist()
        implied_hi = np.where(np.isinf(up(np.where(np.isinf(c_hi), np.nan, c_hi), "state")),
                              INF, up(np.where(np.isinf(c_hi), np.nan, c_hi), "state"))
        implied_hi = np.where(np.isnan(implied_hi), INF, implied_hi)
        assert (s_hi <= implied_hi).all()
        assert "(implied by county)" in label
        n_lo, n_hi, n_label = bounds(nation, hhgq_row(g))
        assert n_lo.tolist() == [COUNTY_GQHH[:, g].sum()]
        assert "(implied by state)" in n_label
    # gqB: no unit in state S1's counties -> 0 at S1 and its cells are zero there
    assert bounds(state, hhgq_row(2))[1][0] == 0
    assert state.zero[0, 4:].all() and not state.zero[1, 4:].any()
    # gqA exists only in S1a: zero in S2; nation keeps every type
    assert state.zero[1, 2:4].all() and not state.zero[0, 2:4].any()
    assert not nation.zero.any()
    # the nation's total row: tot (own) merged with the implied states' tot
    lo, hi, label = bounds(nation, TOTAL)
    assert lo.tolist() == hi.tolist() == [18.0]
    assert label.startswith("tot & total_ge_households & tot (implied by state)")


def test_implied_zero_cells_propagate_from_structural_zeros_and_units():
    spec = Spec(invariants=(Invariant("gqhh_vect", ("county",)),),
                constraints=(Constraint("hhgq_total_ub", ("county",)),
                             Constraint("sz", ("county",), "structural_zero",
                                        "recode(hhgq: g=0) * marginal(va)", answers=[0])))
    compiled = compile_spec(spec, SCHEMA, GEO, published())
    for lv in ("state", "nation"):
        lc = compiled[lv]
        assert lc.zero[:, 0].all(), lv                    # structural zero implied upward
    np.testing.assert_array_equal(compiled["state"].zero[:, 4:],
                                  [[True, True], [False, False]])
    # without implication, upper levels have no rows at all
    flat = Spec(spec.invariants, spec.constraints, imply_upward=False)
    compiled = compile_spec(flat, SCHEMA, GEO, published())
    assert compiled["state"].n_rows == 0 and not compiled["state"].zero.any()


# ---------------------------------------------------------------------------------------------
# the truth satisfies every compiled level
# ---------------------------------------------------------------------------------------------


def random_geography(rng):
    n_states = int(rng.integers(1, 4))
    per_state = rng.integers(1, 4, n_states)
    states = np.array([f"S{i}" for i in range(n_states)])
    counties = np.array([f"S{i}c{j}" for i in range(n_states) for j in range(per_state[i])])
    parents = np.repeat(np.arange(n_states), per_state)
    return Geography(LEVELS, (np.array(["US"]), states, counties),
                     (np.array([-1]), np.arange(n_states) * 0, parents))


def random_truth(rng, n_units):
    """Counts per county and units by type that are consistent with them (each unit of type g
    holds ≥ 1 person of type g); some counties are empty."""
    counts = rng.integers(0, 4, (n_units, 6)) * (rng.random((n_units, 6)) < 0.6)
    counts[rng.random(n_units) < 0.2] = 0
    persons_by_type = counts.reshape(n_units, 3, 2).sum(2)
    units = np.where(persons_by_type > 0,
                     rng.integers(1, np.maximum(persons_by_type, 1) + 1), 0)
    return counts, units


@pytest.mark.parametrize("seed", range(25))
def test_truth_satisfies_every_compiled_level(seed):
    rng = np.random.default_rng(seed)
    geo = random_geography(rng)
    counts, units = random_truth(rng, geo.n_units("county"))
    counts[:, 4] = 0                                  # the structural zero below
    units[:, 2] = np.where(counts[:, 5] > 0, np.minimum(units[:, 2], counts[:, 5]), 0)
    tot_levels = tuple(lv for lv in LEVELS if rng.random() < 0.6) or ("nation",)
    gqhh_levels = ("county",) if rng.random() < 0.5 else ("county", "state")
    # statistics of the truth, published where declared
    pub = {lv: {} for lv in LEVELS}
    for lv in tot_levels:
        pub[lv]["tot"] = geo.aggregate(counts.sum(1), "county", lv)
    for lv in gqhh_levels:
        pub[lv]["gqhh"] = geo.aggregate(units, "county", lv)
    truth = {lv: geo.aggregate(counts, "county", lv) for lv in LEVELS}
    va_max = max(int(truth["nation"].reshape(3, 2).sum(0).max()), 1)
    extra = [Constraint("sz", "all", "structural_zero", "recode(hhgq: g=2) * marginal(va)",
                        answers=[0])]
    if "tot" in pub["county"]:
        extra.append(linear("va_le_tot", "marginal(va)", "<=", "tot", levels=("county",)))
    extra.append(linear("va_cap", "marginal(va)", "<=", va_max))
    extra.append(linear("hh_ge_units", "recode(hhgq: h=0)", ">=", "gqhh[0]",
                        levels=("county",)))
    ub_levels = tuple(lv for lv in ("county", "state") if rng.random() < 0.7) or ("county",)
    for lv in gqhh_levels:
        pub[lv]["gqhh"] = geo.aggregate(units, "county", lv)
    spec = Spec(invariants=(Invariant("tot", tot_levels), Invariant("gqhh_vect", gqhh_levels)),
                constraints=(Constraint("hhgq_total_lb", ("county", "state")),
                             Constraint("hhgq_total_ub", ub_levels),
                             Constraint("total_ge_households"), *extra),
                imply_upward=bool(rng.random() < 0.8))
    compiled = compile_spec(spec, SCHEMA, geo, pub)
    for lv in LEVELS:
        assert violations(compiled[lv], truth[lv]) == [], lv
        check_violations(compiled[lv], truth[lv])
        # finite bounds are integers
        for b in (compiled[lv].lower, compiled[lv].upper):
            fin = b[np.isfinite(b)]
            assert np.array_equal(fin, np.round(fin))
        assert_zero_cells_by_definition(compiled[lv])


def assert_zero_cells_by_definition(lc):
    """The shared zero patterns give each unit exactly the cells of its rows with nonnegative
    coefficients and an upper bound ≤ 0 (computed here unit by unit)."""
    dense = lc.matrix.toarray()
    nonneg = (dense >= 0).all(axis=1)
    for u in range(lc.n_units):
        rows = np.flatnonzero(nonneg & (lc.upper[u] <= 0))
        expect = (dense[rows] != 0).any(axis=0) if rows.size else np.zeros(dense.shape[1], bool)
        np.testing.assert_array_equal(lc.zero[u], expect)
        np.testing.assert_array_equal(lc.rows_of(np.array([u]))[2][0], expect)
    assert lc.n_zero_cells == int(lc.zero.sum())
    assert lc.zero_patterns.shape[0] <= max(lc.n_units, 1)


# ---------------------------------------------------------------------------------------------
# resolve_statistics errors
# ---------------------------------------------------------------------------------------------


def test_resolve_statistics_aggregates_units_data_upward():
    stats = resolve_statistics(e2e_like(), SCHEMA, GEO, published())
    assert stats["state"]["gqhh"].tolist() == up(COUNTY_GQHH, "state").tolist()
    assert stats["state"]["tot"].tolist() == [11, 7]
    assert stats["nation"]["gqhh"].tolist() == [COUNTY_GQHH.sum(0).tolist()]
    assert set(stats["county"]) == {"gqhh"}


@pytest.mark.parametrize("override,words", [
    (dict(state__tot=None), ["'tot'", "'state'", "no 'tot' data was published"]),
    (dict(county__gqhh=None), ["'gqhh_vect'", "'county'"]),
    (dict(state__tot=np.array([11, 6])), ["'tot' is inconsistent", "nation 'US' has 18",
                                          "state units sum to 17"]),
    (dict(state__tot=np.array([11, -7]), nation__tot=np.array([4])),
     ["'tot'", "state 'S2' is negative"]),
    (dict(county__gqhh=np.where(COUNTY_GQHH == 3, -1, COUNTY_GQHH)), ["county 'S1b' is negative"]),
    (dict(state__tot=np.array([11.0, 7.5])), ["'tot'", "'state'", "whole numbers"]),
    (dict(state__tot=np.array([11, 7, 0])), ["shape (3,)", "expected (2,)"]),
    (dict(state__tot=np.array(["11", "7"])), ["must be integers"]),
])
def test_resolve_statistics_errors(override, words):
    with pytest.raises(SpecError) as info:
        compile_spec(e2e_like(), SCHEMA, GEO, published(**override))
    for w in words:
        assert w in str(info.value), (w, str(info.value))


def test_inconsistent_units_data_names_the_unit():
    spec = Spec(invariants=(Invariant("gqhh_vect", ("county", "state")),),
                constraints=(Constraint("hhgq_total_lb", ("county",)),))
    bad = up(COUNTY_GQHH, "state").copy()
    bad[1, 2] += 1
    with pytest.raises(SpecError, match=r"'gqhh_vect' is inconsistent across levels: state "
                                        r"'S2' has \[1, 0, 3\] but its county units sum to "
                                        r"\[1, 0, 2\]"):
        compile_spec(spec, SCHEMA, GEO, published(state__gqhh=bad))


def test_constraint_needing_data_that_is_not_declared():
    spec = Spec(constraints=(linear("c", "total", "<=", "tot", levels=("county",)),))
    with pytest.raises(SpecError, match="'tot' invariant is not declared at 'county'"):
        compile_spec(spec, SCHEMA, GEO, published())
    spec = Spec(constraints=(Constraint("hhgq_total_lb", ("state",)),))
    with pytest.raises(SpecError, match=r"constraint\(s\) \['hhgq_total_lb'\] at level 'state' "
                                        r"need units by type"):
        compile_spec(spec, SCHEMA, GEO, published())
    spec = Spec(invariants=(Invariant("tot", ("province",)),))
    with pytest.raises(SpecError, match=r"unknown level\(s\) \['province'\]"):
        compile_spec(spec, SCHEMA, GEO, published())


def test_contradictory_bounds_name_the_unit():
    spec = Spec(invariants=(Invariant("tot", "all"), Invariant("gqhh_vect", ("county",))),
                constraints=(Constraint("hhgq_total_lb", ("county",)),
                             Constraint("hhgq_total_ub", ("county",))),
                imply_upward=False)
    tot = COUNTY_TRUTH.sum(1).copy()
    tot[1] = 2                            # S1b has 3 households but a total of 2
    pub = published(county__tot=tot, state__tot=up(tot, "state"),
                    nation__tot=up(tot, "nation"))
    with pytest.raises(SpecError) as info:
        compile_spec(spec, SCHEMA, GEO, pub)
    msg = str(info.value)
    assert msg.startswith("county 'S1b': constraints contradict each other: ")
    assert "hhgq_total_lb & hhgq_total_ub: hhgq=hh needs 3 ≤ value ≤ 2" in msg
    # a count can never be negative
    with pytest.raises(SpecError, match=r"^county 'S1a': constraints contradict each other: neg: "
                                        r"total needs 0 ≤ value ≤ -1"):
        compile_spec(Spec(constraints=(linear("neg", "total", "<=", -1, levels=("county",)),),
                          imply_upward=False), SCHEMA, GEO, {})
    # a positive lower bound on cells that are all forced to 0
    dead = Spec(invariants=(Invariant("gqhh_vect", ("county",)),),
                constraints=(Constraint("hhgq_total_ub", ("county",)),
                             linear("need_gqB", "recode(hhgq: b=2) * marginal(va)", ">=", 1,
                                    answers=[1])),
                imply_upward=False)
    with pytest.raises(SpecError, match=r"^county 'S1a': need_gqB: b, a needs at least 1 but "
                                        r"every cell it counts is forced to 0"):
        compile_spec(dead, SCHEMA, GEO, published())


# ---------------------------------------------------------------------------------------------
# node_cvxpy_constraints and node_matrices describe the same set
# ---------------------------------------------------------------------------------------------


def cvxpy_feasible(cons, X, point, tol=1e-9) -> bool:
    X.value = point.astype(float)
    return all(bool(np.all(c.value(tolerance=tol))) for c in cons)


def matrices_feasible(A, a, B, b, point) -> bool:
    s = point.ravel().astype(np.int64)
    return bool(np.array_equal(A @ s, a) and np.all(B @ s >= b))


@pytest.mark.parametrize("with_parent", [True, False])
def test_cvxpy_constraints_and_matrices_agree_on_random_points(with_parent):
    spec = e2e_like(imply=True, extra=(
        Constraint("sz", "all", "structural_zero", "recode(hhgq: g=0) * marginal(va)",
                   answers=[0]),
        linear("adults_cap", "marginal(va)", "<=", [99, 6], levels=("county",))))
    truth = COUNTY_TRUTH.copy()
    truth[:, 0] = 0
    pub = published(state__tot=up(truth.sum(1), "state"), nation__tot=up(truth.sum(1),
                                                                         "nation"))
    lc = compile_spec(spec, SCHEMA, GEO, pub)["county"]
    children = slice(0, 2)                                   # S1's counties
    parent = truth[children].sum(0) if with_parent else None
    X = cp.Variable((2, 6))
    cons = node_cvxpy_constraints(X, lc, children, parent)
    A, a, B, b = node_matrices(lc, children, parent)
    assert A.shape[1] == B.shape[1] == 12
    assert len(cons) <= 6                                     # vectorized over the children
    rng = np.random.default_rng(0)
    verdicts = []
    for trial in range(400):
        point = truth[children] + rng.integers(-1, 2, (2, 6)) * (rng.random((2, 6)) < 0.15)
        if trial % 3 == 0 and with_parent:                    # moves that keep the parent sums
            i, j = rng.integers(0, 6, 2)
            point = truth[children].copy()
            point[0, i] += 1
            point[1, i] -= 1
            point[0, j] -= 1
            point[1, j] += 1
        f1 = cvxpy_feasible(cons, X, point)
        f2 = matrices_feasible(A, a, B, b, point)
        f3 = not violations(lc, point, children) and (
            parent is None or np.array_equal(point.sum(0), parent))
        assert f1 == f2 == f3, (point.tolist(), f1, f2, f3)
        verdicts.append(f1)
    assert 20 < sum(verdicts) < 380, sum(verdicts)            # both kinds were exercised
    assert cvxpy_feasible(cons, X, truth[children])


def test_node_matrices_layout():
    lc = compile_spec(e2e_like(), SCHEMA, GEO, published())["county"]
    A, a, B, b = node_matrices(lc, np.array([0, 2]), np.array([3, 4, 1, 0, 1, 4]))
    assert A.dtype == B.dtype == np.int64 and a.dtype == b.dtype == np.int64
    # parent rows first: Σ_k x_k = parent, cell by cell
    np.testing.assert_array_equal(A[:6].toarray(), np.hstack([np.eye(6), np.eye(6)]))
    np.testing.assert_array_equal(a[:6], [3, 4, 1, 0, 1, 4])
    # then zero cells as equalities: S1a has no gqB (cells 4, 5), S2a no gqA (cells 2, 3)
    zero_rows = A[6:].toarray()
    assert sorted(np.flatnonzero(zero_rows.sum(0)).tolist()) == [4, 5, 8, 9]
    # nonnegativity first among the inequalities
    np.testing.assert_array_equal(B[:12].toarray(), np.eye(12))
    np.testing.assert_array_equal(b[:12], 0)
    # no parent: no parent rows
    A2, a2, _, _ = node_matrices(lc, np.array([0, 2]))
    assert A2.shape[0] == A.shape[0] - 6


# ---------------------------------------------------------------------------------------------
# violations
# ---------------------------------------------------------------------------------------------


def test_violations_finds_each_kind_and_nothing_on_valid_data():
    spec = e2e_like(imply=True, extra=(
        Constraint("sz", "all", "structural_zero", "recode(hhgq: g=0) * marginal(va)",
                   answers=[0]),))
    truth = COUNTY_TRUTH.copy()
    truth[:, 0] = 0
    truth[1, 1] = 4
    pub = published(state__tot=up(truth.sum(1), "state"),
                    nation__tot=up(truth.sum(1), "nation"))
    compiled = compile_spec(spec, SCHEMA, GEO, pub)
    for lv in LEVELS:
        assert violations(compiled[lv], up(truth, lv)) == []
    state = compiled["state"]
    x = up(truth, "state").copy()                             # S1 [0,9,1,0,0,0], S2 [0,2,0,0,1,4]

    def found(hist):
        dense = violations(state, hist)
        assert violations(state, hist, sparse=sp.csr_matrix(hist)) == dense   # the same
        return dense

    bad = x.copy(); bad[0, 1] = -1; bad[0, 3] = 10            # negative (total kept at 10)
    assert any("state 'S1': cell 1 is negative (-1)" == m for m in found(bad))
    bad = x.copy(); bad[1, 0] = 1; bad[1, 1] -= 1               # structural zero
    assert any("state 'S2': cell 0 must be 0, is 1" == m for m in found(bad))
    bad = x.copy(); bad[1, 1] += 1                              # tot broken
    assert any("state 'S2'" in m and "tot" in m and "must be == 7" in m for m in found(bad))
    bad = x.copy(); bad[0, 1] -= 5; bad[0, 2] += 5               # gqA above ub: 11 − 5 = 6
    msgs = found(bad)
    assert any("state 'S1'" in m and "hhgq=gqA = 6" in m and "must be <=" in m for m in msgs), msgs
    bad = x.copy(); bad[1, 1] -= 1; bad[1, 5] += 1              # households below lb (1)
    bad[1, 1] = 0; bad[1, 4] += 1
    msgs = found(bad)
    assert any("state 'S2'" in m and "hhgq=hh = 0, must be >= 1" in m for m in msgs), msgs
    with pytest.raises(SpecError, match="result violates its constraints"):
        check_violations(state, bad)
    with pytest.raises(SpecError, match="integer histograms"):
        violations(state, x.astype(float))
    # limit and unit selection
    many = np.full_like(x, -1)
    assert len(violations(state, many, limit=3)) == 3
    assert all("'S2'" in m for m in violations(state, many[1:], np.array([1])))
    assert violations(state, many[1:], np.array([1]), sparse=sp.csr_matrix(many[1:])) == \
        violations(state, many[1:], np.array([1]))


def test_violations_from_the_nonzero_cells_are_those_of_every_cell():
    """The sparse path (a part's blocks) reports what the dense one does, message for message
    and in the same order, on histograms broken in random places: negative cells, nonzero
    forced zeros, rows out of bounds."""
    spec = e2e_like(imply=True, extra=(
        Constraint("sz", "all", "structural_zero", "recode(hhgq: g=0) * marginal(va)",
                   answers=[0]),))
    truth = COUNTY_TRUTH.copy()
    truth[:, 0] = 0
    pub = published(state__tot=up(truth.sum(1), "state"),
                    nation__tot=up(truth.sum(1), "nation"))
    county = compile_spec(spec, SCHEMA, GEO, pub)["county"]
    rng = np.random.default_rng(8)
    kinds = set()
    for _ in range(200):
        x = truth.copy()
        for _ in range(rng.integers(1, 4)):
            u, j = rng.integers(0, x.shape[0]), rng.integers(0, x.shape[1])
            x[u, j] += rng.choice([-3, -1, 1, 2])
        dense = violations(county, x, limit=1000)
        assert violations(county, x, limit=1000, sparse=sp.csr_matrix(x)) == dense
        kinds.update(k for k in ("negative", "must be 0", "must be") if any(k in m for m in dense))
    assert kinds == {"negative", "must be 0", "must be"}
