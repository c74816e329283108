"""Constraints whose right-hand sides are published per unit (``type = "published"``): what a
Noisy Measurement File's constraint rows compile to."""

import numpy as np
import pytest

from hierarchy.geography import Geography
from hierarchy.queries import parse_query
from hierarchy.schema import E2E_1940
from invariants.checks import violations
from invariants.compile import compile_spec
from invariants.errors import SpecError
from invariants.items import Constraint
from invariants.spec import Spec

GEO, _ = Geography.from_columns(["nation", "state"], [[["01", "02", "02"]]])


def _spec(*constraints):
    return Spec(constraints=constraints, imply_upward=False)


LB = Constraint("hhgq_lb", "all", "published", "marginal(hhgq)", None, ">=")
UB = Constraint("hhgq_ub", ["state"], "published", "marginal(hhgq)", [1, 3], "<=")
TOTAL = Constraint("total", ["nation"], "published", "total", None, "==")


def _published():
    lb = np.zeros((2, 8), np.int64)
    lb[:, 1] = [2, 3]
    ub = np.full((2, 8), 99_999 * 5, np.int64)     # beyond int32 once summed: kept exact
    ub[1, 3] = 4
    return {"nation": {"hhgq_lb": lb.sum(axis=0, keepdims=True), "total": np.array([40])},
            "state": {"hhgq_lb": lb, "hhgq_ub": ub}}


def test_published_rows_are_the_published_values_unit_by_unit():
    compiled = compile_spec(_spec(LB, UB, TOTAL), E2E_1940, GEO, _published())
    state, nation = compiled["state"], compiled["nation"]
    lab = list(state.labels)
    # a row both bound (merged): the lower from one, the upper (answers 1 and 3) from the other
    both = lab.index("hhgq_lb & hhgq_ub: correctional")
    assert state.lower[:, both].tolist() == [2.0, 3.0]
    assert state.upper[:, both].tolist() == [499_995.0] * 2
    assert state.upper[:, lab.index("hhgq_lb & hhgq_ub: nursing")].tolist() == [499_995.0, 4.0]
    assert np.isinf(state.upper[:, lab.index("hhgq_lb: college")]).all()
    total = list(nation.labels).index("total: total")
    assert nation.lower[0, total] == nation.upper[0, total] == 40


def test_a_histogram_breaking_a_published_bound_is_caught():
    compiled = compile_spec(_spec(LB, UB, TOTAL), E2E_1940, GEO, _published())
    hist = np.zeros((2, E2E_1940.size), np.int64)
    # two correctional persons in the first state and three in the second: meets the bounds
    q = parse_query("marginal(hhgq)", E2E_1940)
    cells = [int(q.matrix[1].indices[0]), int(q.matrix[3].indices[0])]
    hist[0, cells[0]], hist[1, cells[0]] = 2, 3
    assert not violations(compiled["state"], hist)
    hist[1, cells[1]] = 5                                   # nursing above its bound of 4
    assert violations(compiled["state"], hist)
    hist[1, cells[1]], hist[1, cells[0]] = 0, 2             # correctional below its bound
    assert violations(compiled["state"], hist)


def test_missing_wrong_shaped_or_fractional_data_is_refused_naming_it():
    with pytest.raises(SpecError, match="'hhgq_lb' has no data at level 'nation'"):
        compile_spec(_spec(LB), E2E_1940, GEO, {"state": _published()["state"]})
    bad = _published()
    bad["state"]["hhgq_lb"] = bad["state"]["hhgq_lb"][:1]
    with pytest.raises(SpecError, match=r"shape \(1, 8\), expected \(2"):
        compile_spec(_spec(LB), E2E_1940, GEO, bad)
    bad = _published()
    bad["state"]["hhgq_lb"] = bad["state"]["hhgq_lb"] + 0.5
    with pytest.raises(SpecError, match="whole numbers"):
        compile_spec(_spec(LB), E2E_1940, GEO, bad)


def test_a_published_constraint_takes_a_sense_and_no_rhs_and_round_trips():
    with pytest.raises(SpecError, match="takes no rhs"):
        Constraint("x", "all", "published", "total", None, "==", 3)
    with pytest.raises(SpecError, match="published constraint 'x' needs sense"):
        Constraint("x", "all", "published", "total")
    spec = _spec(LB, UB, TOTAL)
    again = Spec.from_dict({**spec.to_dict(), "imply_upward": False})
    assert again == spec
    toml = Spec.from_toml_string('[[constraint]]\nname = "hhgq_lb"\ntype = "published"\n'
                                 'query = "marginal(hhgq)"\nsense = ">="\n')
    assert toml.constraints == (LB,)
