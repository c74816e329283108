"""invariants.active: the cells a post-processor can change.

Exactness is checked against the definition: a cell is fixed when its LP maximum under the unit's
compiled constraints (``x ≥ 0``, zero cells, ``lower ≤ C x ≤ upper``) is 0. Every cell reported
fixed must be fixed (soundness, on random rows of any sign); for the catalogue constraints every
cell reported active must reach a positive value (completeness). All cases use fixed seeds.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import linprog

from hierarchy.geography import Geography
from hierarchy.measurement import published_statistics
from hierarchy.presets.pl94 import LEVELS, PL94_2020, pl94_workload
from hierarchy.schema import Attribute, Schema
from hierarchy.synth.census2020 import synthesize_2020
from hierarchy.tabulation import tabulate
from invariants.active import (
    ActiveCells,
    find_active_cells,
    find_active_cells_by_level,
    fixing_rules,
)
from invariants.catalogue import statistics_to_publish
from invariants.compile import LevelConstraints, compile_spec
from invariants.errors import SpecError
from invariants.spec import Spec

# -- the oracle ---------------------------------------------------------------------------------

def can_be_positive(lc: LevelConstraints, unit: int) -> np.ndarray | None:
    """For each cell, whether some feasible histogram of ``unit`` has it > 0 (the cell's LP
    maximum); ``None`` when the unit's constraints are infeasible."""
    c = lc.matrix.toarray().astype(float)
    lo, hi = lc.lower[unit], lc.upper[unit]
    eq = np.isfinite(lo) & (lo == hi)
    a_ub = np.vstack([c[np.isfinite(hi) & ~eq], -c[np.isfinite(lo) & ~eq]])
    b_ub = np.concatenate([hi[np.isfinite(hi) & ~eq], -lo[np.isfinite(lo) & ~eq]])
    a_eq, b_eq = (c[eq], lo[eq]) if eq.any() else (None, None)
    n = c.shape[1]
    base = [(0.0, 0.0) if lc.zero[unit, j] else (0.0, None) for j in range(n)]
    kw = dict(A_ub=a_ub if a_ub.size else None, b_ub=b_ub if b_ub.size else None,
              A_eq=a_eq, b_eq=b_eq, method="highs")
    if linprog(np.zeros(n), bounds=base, **kw).status == 2:
        return None
    out = np.zeros(n, dtype=bool)
    for j in range(n):
        res = linprog(-np.eye(n)[j], bounds=base, **kw)
        assert res.status in (0, 3), res.message               # 3: unbounded, so positive
        out[j] = res.status == 3 or -res.fun > 1e-9
    return out


def random_level(rng: np.random.Generator, n_cells: int, n_rows: int, n_units: int
                 ) -> LevelConstraints:
    """Random rows (nested subsets, some with negative coefficients) and random bounds."""
    rows = []
    for _ in range(n_rows):
        if rows and rng.random() < 0.4:         # a subset of an earlier row: families nest
            base = np.flatnonzero(rows[rng.integers(len(rows))])
            keep = base[rng.random(base.size) < 0.6]
            row = np.zeros(n_cells, dtype=np.int64)
            row[keep if keep.size else base[:1]] = 1
        else:
            row = (rng.random(n_cells) < 0.35).astype(np.int64)
            row[rng.integers(n_cells)] = 1
        if rng.random() < 0.15:
            row[rng.integers(n_cells)] = -1
        if rng.random() < 0.15:
            row[row > 0] *= rng.integers(1, 3, size=int((row > 0).sum()))
        rows.append(row)
    matrix = sp.csr_matrix(np.array(rows))
    k = rng.integers(0, 4, size=(n_units, n_rows)).astype(float)
    kind = rng.integers(0, 4, size=(n_units, n_rows))   # free, <=, >=, ==
    lower = np.where((kind == 2) | (kind == 3), k, -np.inf)
    upper = np.where((kind == 1) | (kind == 3), k, np.inf)
    zero = np.zeros((n_units, n_cells), dtype=bool)
    return LevelConstraints("unit", np.array([f"u{i}" for i in range(n_units)], dtype=object),
                            matrix, lower, upper, tuple(f"r{i}" for i in range(n_rows)), zero)


# -- exactness against the LP -------------------------------------------------------------------

@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_cell_reported_fixed_has_lp_maximum_zero(seed):
    rng = np.random.default_rng(seed)
    lc = random_level(rng, n_cells=9, n_rows=6, n_units=40)
    active = find_active_cells(lc)
    rows = lc.matrix.toarray()
    counting = (rows >= 0).all(axis=1)
    feasible = beyond_caps = 0
    for u in range(lc.n_units):
        positive = can_be_positive(lc, u)
        if positive is None:
            continue
        feasible += 1
        reported = np.zeros(lc.matrix.shape[1], dtype=bool)
        reported[active.cells(u)] = True
        assert not (positive & ~reported).any(), (seed, u)      # sound
        capped = (rows[counting & (lc.upper[u] <= 0)] > 0).any(axis=0)
        beyond_caps += int((~reported & ~capped).sum())
    # not vacuous: feasible units, and cells fixed by more than a row capped at 0
    assert feasible >= 10 and beyond_caps > 0


def test_a_saturated_row_fixes_the_cells_outside_its_lower_bounded_part():
    # x0 + x1 + x2 <= 3 and x0 + x1 >= 3: x2 = 0; with x0 + x1 >= 2 nothing is fixed
    matrix = sp.csr_matrix(np.array([[1, 1, 1, 0], [1, 1, 0, 0]]))
    lower = np.array([[-np.inf, 3.0], [-np.inf, 2.0]])
    upper = np.array([[3.0, np.inf], [3.0, np.inf]])
    lc = LevelConstraints("u", np.array(["a", "b"], dtype=object), matrix, lower, upper,
                          ("r", "s"), np.zeros((2, 4), dtype=bool))
    active = find_active_cells(lc)
    assert active.cells(0).tolist() == [0, 1, 3]
    assert active.cells(1).tolist() == [0, 1, 2, 3]
    for u in range(2):
        assert can_be_positive(lc, u).tolist() == [c in active.cells(u) for c in range(4)]


def test_a_tight_total_fixes_a_type_whose_lower_bound_is_zero_here():
    # total == 5 over three types with lower bounds 3, 2, 0 (positive elsewhere): the third
    # type holds nobody; no single row, nor any pair, proves it
    matrix = sp.csr_matrix(np.array([[1, 1, 1, 1, 1, 1], [1, 1, 0, 0, 0, 0],
                                     [0, 0, 1, 1, 0, 0], [0, 0, 0, 0, 1, 1]]))
    lower = np.array([[5.0, 3.0, 2.0, 0.0], [5.0, 1.0, 1.0, 1.0]])
    upper = np.array([[5.0, np.inf, np.inf, np.inf], [5.0, np.inf, np.inf, np.inf]])
    lc = LevelConstraints("u", np.array(["a", "b"], dtype=object), matrix, lower, upper,
                          ("t", "g0", "g1", "g2"), np.zeros((2, 6), dtype=bool))
    active = find_active_cells(lc)
    assert active.cells(0).tolist() == [0, 1, 2, 3]
    assert active.cells(1).tolist() == list(range(6))
    for u in range(2):
        assert can_be_positive(lc, u).tolist() == [c in active.cells(u) for c in range(6)]


def mixed_level(rows, lower, upper) -> LevelConstraints:
    matrix = sp.csr_matrix(np.array(rows))
    return LevelConstraints("u", np.array(["a"], dtype=object), matrix,
                            np.array([lower], dtype=float), np.array([upper], dtype=float),
                            tuple(f"r{i}" for i in range(len(rows))),
                            np.zeros((1, matrix.shape[1]), dtype=bool))


def test_a_row_with_a_negative_coefficient_counts_once_its_other_cells_are_fixed():
    # x1 <= 0 fixes x1; then x0 - x1 <= 0 reads x0 <= 0
    lc = mixed_level([[1, -1], [0, 1]], [-np.inf, -np.inf], [0, 0])
    assert find_active_cells(lc).cells(0).tolist() == []
    assert can_be_positive(lc, 0).tolist() == [False, False]
    assert [r for r, _, _, _ in fixing_rules(lc.matrix)] == [1]   # one round: only the cap


def test_cells_fixed_only_through_a_mixed_sign_row_stay_active():
    # x0 + x1 <= 1 and x0 - x1 >= 1 force x1 = 0, but only by combining the rows: the rules
    # leave x1 active (conservative: an extra noisy answer, never a wrong one)
    lc = mixed_level([[1, 1], [1, -1]], [-np.inf, 1], [1, np.inf])
    assert find_active_cells(lc).cells(0).tolist() == [0, 1]
    assert can_be_positive(lc, 0).tolist() == [True, False]


SMALL = Schema((Attribute("hhgq", ("household", "correctional", "nursing", "college")),
                Attribute("votingage", ("minor", "adult")),
                Attribute("race", ("a", "b", "c"))), name="small")

CATALOGUE_SPEC = {
    "invariant": [{"name": "tot", "levels": ["nation", "state"]},
                  {"name": "gqhh_vect", "levels": ["county"]}],
    "constraint": [{"name": "hhgq_total_lb", "levels": ["state", "county"]},
                   {"name": "hhgq_total_ub", "levels": ["state", "county"]},
                   {"name": "total_ge_households", "levels": "all"},
                   {"name": "no_minors_in_nursing", "type": "structural_zero",
                    "levels": ["county"], "query": "recode(hhgq: n=2) * recode(votingage: m=0)"}]}


def random_catalogue_case(seed: int):
    """A 3-level geography with random units by type and a feasible truth (persons placed in
    the types their county has units of, never minors in nursing facilities)."""
    rng = np.random.default_rng(seed)
    n_states = 3
    per_state = rng.integers(1, 4, size=n_states)
    parents = np.repeat(np.arange(n_states), per_state)
    n = parents.size
    geo = Geography(("nation", "state", "county"),
                    (["0"], [f"s{i}" for i in range(n_states)], [f"c{i}" for i in range(n)]),
                    ([-1], [0] * n_states, parents.tolist()))
    gqhh = (rng.random((n, 4)) < 0.45) * rng.integers(1, 3, size=(n, 4))
    gqhh[rng.random(n) < 0.25] = 0                        # some empty counties
    truth = np.zeros((n, SMALL.size), dtype=np.int64)
    cells = np.arange(SMALL.size).reshape(4, 2, 3)
    for u in range(n):
        for g in np.flatnonzero(gqhh[u]):
            allowed = cells[g, 1].ravel() if g == 2 else cells[g].ravel()
            persons = gqhh[u, g] + rng.integers(0, 3)
            np.add.at(truth[u], rng.choice(allowed, size=persons), 1)
    state_tot = np.bincount(parents, weights=truth.sum(axis=1), minlength=n_states)
    published = {"nation": {"tot": np.array([int(state_tot.sum())])},
                 "state": {"tot": state_tot.astype(np.int64)}, "county": {"gqhh": gqhh}}
    compiled = compile_spec(Spec.from_dict(CATALOGUE_SPEC), SMALL, geo, published)
    return geo, compiled, truth


@pytest.mark.parametrize("seed", [3, 4])
def test_catalogue_constraints_active_cells_are_exactly_the_lp_positive_ones(seed):
    geo, compiled, truth = random_catalogue_case(seed)
    found = find_active_cells_by_level(compiled, geo)
    empty_seen = 0
    for level in geo.levels:
        lc = compiled[level]
        for u in range(lc.n_units):
            positive = can_be_positive(lc, u)
            assert positive is not None, (level, u)           # the truth is feasible
            assert found[level].cells(u).tolist() == np.flatnonzero(positive).tolist(), \
                (seed, level, u)
        empty_seen += int((found[level].counts == 0).sum())
    # the truth lives on the active cells (it is one feasible histogram)
    assert truth[~found["county"].to_csr().toarray()].sum() == 0
    assert empty_seen > 0 or (found["county"].counts < SMALL.size).any()


def test_through_parents_adds_nothing_when_parents_hold_their_childrens_rows():
    geo, compiled, _ = random_catalogue_case(5)
    own = find_active_cells_by_level(compiled, geo)
    nested = find_active_cells_by_level(compiled, geo, through_parents=True)
    for level in geo.levels:
        assert (own[level].to_csr() != nested[level].to_csr()).nnz == 0, level


def test_within_keeps_only_the_cells_active_in_the_parent():
    up = ActiveCells("p", np.array(["1", "2"]), np.array([0, 1]),
                     sp.csr_matrix(np.array([[1, 1, 0, 0], [0, 0, 1, 1]], dtype=bool)))
    down = ActiveCells("c", np.array(["a", "b", "c"]), np.array([0, 0, 0]),
                       sp.csr_matrix(np.array([[0, 1, 1, 0]], dtype=bool)))
    got = down.within(up, np.array([0, 1, 1]))
    assert [got.cells(u).tolist() for u in range(3)] == [[1], [2], [2]]
    assert got.n_patterns == 2


# -- the PL 94 spec on synthetic persons --------------------------------------------------------

@pytest.fixture(scope="module")
def pl94():
    data = synthesize_2020(4_000, seed=11)
    geography, _ = Geography.from_columns(LEVELS, data.geography_columns())
    truth = tabulate(data.persons, schema=PL94_2020, levels=LEVELS, units=data.units,
                     geography=geography)
    spec = Spec.pl94_2020()
    stats = published_statistics(truth, statistics_to_publish(spec, LEVELS))
    compiled = compile_spec(spec, PL94_2020, geography, stats)
    return truth, compiled, find_active_cells_by_level(compiled, geography)


def test_pl94_truth_is_zero_outside_the_active_cells(pl94):
    truth, _, found = pl94
    for level in LEVELS:
        counts = truth.level_counts(level)
        active = found[level].to_csr()
        assert active.shape == counts.shape == (found[level].n_units, PL94_2020.size)
        outside = sp.csr_matrix(counts > 0) > active          # nonzero truth, cell not active
        assert outside.nnz == 0, level
    blocks = found["block"]
    empty_truth = truth.level_counts("block").sum(axis=1) == 0
    assert (blocks.counts == 0).sum() > 0                     # empty blocks have no active cell
    assert np.all(empty_truth[blocks.counts == 0])


def test_pl94_answers_outside_the_active_ones_are_zero_in_the_truth(pl94):
    truth, _, found = pl94
    counts = truth.level_counts("block")
    for query in pl94_workload():
        touched = found["block"].answers(query)
        assert touched.to_csr().shape == (counts.shape[0], query.n_answers)
        answers = sp.csr_matrix(query.answer(counts) > 0)
        assert (answers > touched.to_csr()).nnz == 0, query.name
    detailed = found["block"].answers(pl94_workload()["detailed"])
    assert (detailed.to_csr() != found["block"].to_csr()).nnz == 0


def test_pl94_rules_match_the_compiled_zero_cells_and_store_sparsely(pl94):
    _, compiled, found = pl94
    for level in LEVELS:
        active, lc = found[level], compiled[level]
        assert (active.to_csr() != sp.csr_matrix(~lc.zero)).nnz == 0, level
        assert active.n_active == int(active.to_csr().nnz) == int(active.counts.sum())
        assert active.n_patterns <= 2 ** lc.n_rows
    blocks = found["block"]
    # one index per unit plus the distinct patterns: far below a dense bool units × cells array
    assert blocks.nbytes < blocks.n_units * PL94_2020.size // 4
    u = int(np.argmax(blocks.counts))
    assert blocks.cells(u).size == blocks.counts[u]
    # nursing facilities: no cell of a minor in a nursing facility is ever active
    nursing_minors = np.arange(PL94_2020.size).reshape(8, 2, 2, 63)[3, 0].ravel()
    assert blocks.to_csr()[:, nursing_minors].nnz == 0


# -- refusals -----------------------------------------------------------------------------------

def test_invalid_inputs_are_refused_with_the_fix():
    patterns = sp.csr_matrix(np.array([[True, False]]))
    with pytest.raises(SpecError, match="one of each per unit"):
        ActiveCells("u", np.array(["1", "2"]), np.array([0]), patterns)
    with pytest.raises(SpecError, match="2-d scipy.sparse"):
        ActiveCells("u", np.array(["1"]), np.array([0]), np.array([[True, False]]))
    a = ActiveCells("u", np.array(["1"]), np.array([0]), patterns)
    with pytest.raises(SpecError, match="negative coefficients"):
        a.answers(sp.csr_matrix(np.array([[1, -1]])))
    with pytest.raises(SpecError, match="cannot be read"):
        a.answers(sp.csr_matrix(np.ones((1, 3))))
    with pytest.raises(SpecError, match="Geography.parents"):
        a.within(a, np.array([3]))
    with pytest.raises(SpecError, match="out of range"):
        a.cells(1)
    with pytest.raises(SpecError, match="compile_spec"):
        find_active_cells("block")
