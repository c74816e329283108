"""Schemas and linear queries, checked against an independent dense construction.

The reference matrices are built cell by cell with ``np.unravel_index`` (no Kronecker products,
no code shared with :mod:`hierarchy.queries`), so a wrong block order, a transposed Kronecker
factor or a mislabelled answer shows up as a mismatch.
"""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hierarchy.errors import HierarchyError
from hierarchy.queries import (
    Query,
    Workload,
    detailed,
    e2e_workload,
    marginal,
    parse_query,
    product,
    queries_from,
    recode,
    total,
)
from hierarchy.schema import (
    E2E_1940,
    E2E_1940_144,
    SCHEMAS,
    Attribute,
    Schema,
    codes_from_labels,
    get_schema,
)

# ---------------------------------------------------------------------------------------------
# independent reference
# ---------------------------------------------------------------------------------------------


def dense_reference(schema: Schema, spec: dict):
    """(matrix, answer labels) of a query given per attribute ``"keep"`` or a list of
    (label, codes) groups; attributes not in ``spec`` are summed out.

    Answers are ordered row-major over the non-summed attributes in schema order.
    """
    dims = []  # (position, kind, groups)
    for pos, attr in enumerate(schema.attributes):
        s = spec.get(attr.name)
        if s is None:
            continue
        dims.append((pos, s))
    ans_shape = tuple(schema.shape[pos] if s == "keep" else len(s) for pos, s in dims)
    n_answers = int(np.prod(ans_shape)) if ans_shape else 1
    mat = np.zeros((n_answers, schema.size), dtype=np.int64)
    for cell in range(schema.size):
        codes = np.unravel_index(cell, schema.shape)
        candidates = []
        for pos, s in dims:
            if s == "keep":
                candidates.append([int(codes[pos])])
            else:
                candidates.append([g for g, (_, members) in enumerate(s)
                                   if int(codes[pos]) in members])
        for coords in itertools.product(*candidates):
            row = int(np.ravel_multi_index(coords, ans_shape)) if ans_shape else 0
            mat[row, cell] += 1
    labels = []
    for row in range(n_answers):
        coords = np.unravel_index(row, ans_shape) if ans_shape else ()
        lab = []
        for (pos, s), c in zip(dims, coords):
            lab.append(schema.attributes[pos].labels[c] if s == "keep" else s[c][0])
        labels.append(tuple(lab))
    return mat, labels


def assert_query_matches(q: Query, spec: dict):
    ref, labels = dense_reference(q.schema, spec)
    got = q.matrix.toarray()
    assert got.shape == ref.shape
    np.testing.assert_array_equal(got, ref)
    assert q.n_answers == ref.shape[0]
    assert q.answer_labels == labels
    # matrix entries are 0/1 (a cell is counted at most once per answer)
    assert set(np.unique(got)) <= {0, 1}


# ---------------------------------------------------------------------------------------------
# schema
# ---------------------------------------------------------------------------------------------


def test_e2e_schema_shape_labels_and_cell_order():
    assert E2E_1940.names == ("hhgq", "votingage", "hispanic", "cenrace")
    assert E2E_1940.shape == (8, 2, 2, 6)
    assert E2E_1940.size == 192
    hhgq = E2E_1940.attribute("hhgq")
    assert hhgq.labels[1] == "correctional" and hhgq.labels[5] == "college"
    # row-major, first attribute slowest: the cell of (g, v, h, r) is ((g*2+v)*2+h)*6+r
    codes = E2E_1940.cell_codes()
    assert codes.shape == (192, 4)
    for cell in (0, 1, 6, 12, 24, 100, 191):
        g, v, h, r = codes[cell]
        assert cell == ((g * 2 + v) * 2 + h) * 6 + r
    rng = np.random.default_rng(0)
    cols = {a.name: rng.integers(0, a.size, 500) for a in E2E_1940.attributes}
    expected = np.ravel_multi_index(tuple(cols[n] for n in E2E_1940.names), E2E_1940.shape)
    np.testing.assert_array_equal(E2E_1940.cell_index(cols), expected)


def test_144_cell_preset():
    s = get_schema("e2e_1940_144")
    assert s is E2E_1940_144 and SCHEMAS["e2e_1940_144"] is s
    assert s.shape == (6, 2, 2, 6) and s.size == 144
    assert "correctional" not in s.attribute("hhgq").labels
    assert "college" not in s.attribute("hhgq").labels
    w = e2e_workload(s)
    assert [q.matrix.shape for q in w] == [(144, 144), (6, 144), (24, 144)]
    assert_query_matches(w["hhgq"], {"hhgq": "keep"})
    assert_query_matches(w["va_hisp_race"],
                         {"votingage": "keep", "hispanic": "keep", "cenrace": "keep"})


def test_cell_labels_and_range():
    assert E2E_1940.cell_labels(0) == {"hhgq": "household", "votingage": "under 18",
                                       "hispanic": "not Hispanic", "cenrace": "white"}
    with pytest.raises(HierarchyError, match="outside 0..191"):
        E2E_1940.cell_labels(192)
    with pytest.raises(HierarchyError):
        E2E_1940.cell_labels(-1)


@pytest.mark.parametrize("make, message", [
    (lambda: Attribute("bad name", ("a",)), "identifier"),
    (lambda: Attribute("x", ()), "at least one level"),
    (lambda: Attribute("x", ("a", "b", "a")), "duplicate labels"),
    (lambda: Schema(()), "at least one attribute"),
    (lambda: Schema((Attribute("x", ("a",)), Attribute("x", ("b",)))), "repeats attribute"),
    (lambda: Schema(("x",)), "Attribute objects"),
])
def test_invalid_schema_construction_raises(make, message):
    with pytest.raises(HierarchyError, match=message):
        make()


def test_schema_is_immutable():
    with pytest.raises(dataclasses.FrozenInstanceError):
        E2E_1940.name = "other"


def test_cell_index_validation_names_rows():
    cols = {"hhgq": np.array([0, 8, 1, 9]), "votingage": np.zeros(4, int),
            "hispanic": np.zeros(4, int), "cenrace": np.zeros(4, int)}
    with pytest.raises(HierarchyError, match=r"'hhgq'.*2 value.*rows \[1, 3\]"):
        E2E_1940.cell_index(cols)
    cols["hhgq"] = np.array([0.0, 1.0, 1.0, 1.0])
    with pytest.raises(HierarchyError, match="integer codes"):
        E2E_1940.cell_index(cols)
    del cols["hhgq"]
    with pytest.raises(HierarchyError, match="missing column for attribute 'hhgq'"):
        E2E_1940.cell_index(cols)


def test_attribute_code_accepts_codes_labels_and_digit_strings():
    race = E2E_1940.attribute("cenrace")
    assert race.code("Chinese") == 3
    assert race.code(3) == 3 and race.code(np.int8(3)) == 3 and race.code("3") == 3
    for bad in (6, -1, "purple", True, 2.0):
        with pytest.raises(HierarchyError, match="cenrace"):
            race.code(bad)


def test_codes_from_labels_names_rows():
    race = E2E_1940.attribute("cenrace")
    np.testing.assert_array_equal(codes_from_labels(race, ["white", "5", 2, "Japanese"]),
                                  [0, 5, 2, 4])
    with pytest.raises(HierarchyError, match=r"'purple'.*rows \[1, 3\]"):
        codes_from_labels(race, ["white", "purple", "black", "purple"])


def test_schema_dict_round_trip_and_presets():
    for s in (E2E_1940, E2E_1940_144, Schema((Attribute("a", ("x", "y")),), name="mine")):
        assert Schema.from_dict(s.to_dict()) == s
    assert Schema.from_dict({"preset": "e2e_1940"}) is E2E_1940
    assert get_schema(E2E_1940.to_dict()) == E2E_1940
    with pytest.raises(HierarchyError, match="unknown schema preset 'nope'"):
        get_schema("nope")
    with pytest.raises(HierarchyError, match="attributes"):
        Schema.from_dict({"name": "x"})


# ---------------------------------------------------------------------------------------------
# queries on the E2E schema
# ---------------------------------------------------------------------------------------------

E2E_GROUPS_HHGQ = [("household", (0,)), ("gq", (1, 2, 3, 4, 5, 6, 7))]


def test_detailed_and_total_e2e():
    assert_query_matches(detailed(E2E_1940), {a: "keep" for a in E2E_1940.names})
    assert detailed(E2E_1940).answer_labels[13] == tuple(E2E_1940.cell_labels(13).values())
    assert_query_matches(total(E2E_1940), {})
    assert total(E2E_1940).answer_labels == [()]


@pytest.mark.parametrize("attrs", [c for k in range(1, 5)
                                   for c in itertools.combinations(E2E_1940.names, k)])
def test_every_marginal_e2e(attrs):
    q = marginal(E2E_1940, *attrs)
    assert_query_matches(q, {a: "keep" for a in attrs})
    assert q.answer_attributes == attrs
    # the order the attributes are named in does not change the query (answers in schema order)
    assert marginal(E2E_1940, *reversed(attrs)) == q


def test_recode_and_products_e2e():
    q = recode(E2E_1940, "hhgq", dict((lab, codes) for lab, codes in E2E_GROUPS_HHGQ))
    assert_query_matches(q, {"hhgq": E2E_GROUPS_HHGQ})
    # labels as group members; overlapping groups; groups need not cover every level
    asian = recode(E2E_1940, "cenrace", {"asian": ["Chinese", "Japanese"],
                                         "nonwhite": [1, 2, 3, 4, "other"],
                                         "jp": ["4"]})
    assert_query_matches(asian, {"cenrace": [("asian", (3, 4)), ("nonwhite", (1, 2, 3, 4, 5)),
                                             ("jp", (4,))]})
    p = product(recode(E2E_1940, "hhgq", {"household": [0], "gq": range(1, 8)}),
                marginal(E2E_1940, "hispanic", "cenrace"))
    assert_query_matches(p, {"hhgq": E2E_GROUPS_HHGQ, "hispanic": "keep", "cenrace": "keep"})
    # a recode on a later attribute than a kept one: answers still in schema order
    p2 = product(asian, marginal(E2E_1940, "votingage"))
    assert_query_matches(p2, {"votingage": "keep",
                              "cenrace": [("asian", (3, 4)), ("nonwhite", (1, 2, 3, 4, 5)),
                                          ("jp", (4,))]})
    assert p2.answer_labels[0] == ("under 18", "asian")


def test_e2e_workload_matches_spec():
    w = e2e_workload(E2E_1940)
    assert w.names == ("detailed", "hhgq", "va_hisp_race")
    assert_query_matches(w["hhgq"], {"hhgq": "keep"})
    assert_query_matches(w["va_hisp_race"],
                         {"votingage": "keep", "hispanic": "keep", "cenrace": "keep"})
    assert w["va_hisp_race"].expression == "marginal(votingage, hispanic, cenrace)"


def test_answer_equals_dense_product_for_batches():
    rng = np.random.default_rng(1)
    hist = rng.integers(0, 50, size=(3, 5, 192))
    for q in list(e2e_workload(E2E_1940)) + [total(E2E_1940),
                                             parse_query("recode(cenrace: a=0,1; b=1-5)",
                                                         E2E_1940)]:
        ref = np.einsum("ac,ijc->ija", q.matrix.toarray().astype(np.int64), hist)
        got = q.answer(hist)
        assert got.shape == (3, 5, q.n_answers)
        np.testing.assert_array_equal(got, ref)
        np.testing.assert_array_equal(q.answer(hist[0, 0]), ref[0, 0])
    with pytest.raises(HierarchyError, match="192 cells"):
        total(E2E_1940).answer(np.zeros((2, 191)))


def test_product_rejects_shared_attributes_and_mixed_schemas():
    with pytest.raises(HierarchyError, match="'hhgq' twice"):
        product(marginal(E2E_1940, "hhgq"), recode(E2E_1940, "hhgq", {"a": [0]}))
    with pytest.raises(HierarchyError, match="different schemas"):
        product(marginal(E2E_1940, "hhgq"), marginal(E2E_1940_144, "cenrace"))
    with pytest.raises(HierarchyError, match="at least one"):
        product()


def test_builder_validation():
    with pytest.raises(HierarchyError, match="no attribute 'sex'"):
        marginal(E2E_1940, "sex")
    with pytest.raises(HierarchyError, match="repeats"):
        marginal(E2E_1940, "hhgq", "hhgq")
    with pytest.raises(HierarchyError, match="at least one group"):
        recode(E2E_1940, "hhgq", {})
    with pytest.raises(HierarchyError, match="group 'g' of 'hhgq' is empty"):
        recode(E2E_1940, "hhgq", {"g": []})
    with pytest.raises(HierarchyError, match="hhgq"):
        recode(E2E_1940, "hhgq", {"g": [8]})


# ---------------------------------------------------------------------------------------------
# the text syntax
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text, spec", [
    ("detailed", {a: "keep" for a in E2E_1940.names}),
    ("total", {}),
    ("  marginal( cenrace ,hhgq )  ", {"hhgq": "keep", "cenrace": "keep"}),
    ("recode(hhgq: household=0; gq=1-7)", {"hhgq": E2E_GROUPS_HHGQ}),
    ("recode(cenrace: asian=Chinese, Japanese; rest=0-2,5)",
     {"cenrace": [("asian", (3, 4)), ("rest", (0, 1, 2, 5))]}),
    ("marginal(votingage) * recode(hhgq: household=0; gq=1-7)",
     {"hhgq": E2E_GROUPS_HHGQ, "votingage": "keep"}),
    ("total * marginal(hispanic)", {"hispanic": "keep"}),
    ("marginal(hhgq, votingage) * marginal(cenrace)",
     {"hhgq": "keep", "votingage": "keep", "cenrace": "keep"}),
])
def test_parse_query_matrices_and_round_trip(text, spec):
    q = parse_query(text, E2E_1940)
    assert_query_matches(q, spec)
    again = parse_query(q.expression, E2E_1940)
    assert again == q
    assert again.expression == q.expression
    assert parse_query(text, E2E_1940, name="mine").name == "mine"


@pytest.mark.parametrize("text, message", [
    ("", "non-empty"),
    ("   ", "non-empty"),
    ("marginal()", r"marginal\(\) needs attributes"),
    ("marginal(sex)", r"no attribute 'sex'.*'hhgq'"),
    ("marginal(hhgq, hhgq)", "repeats"),
    ("marginal(hhgq", r"cannot parse query term 'marginal\(hhgq'"),
    ("marginal(hhgq) extra", "cannot parse"),
    ("frobnicate", "unknown query term 'frobnicate'.*use detailed, total, marginal"),
    ("total(hhgq)", r"unknown query term 'total\(hhgq\)'"),
    ("recode(hhgq)", "attribute: group=levels"),
    ("recode(hhgq: a)", "group 'a' needs 'label=levels'"),
    ("recode(hhgq: a=0; a=1)", "group 'a' appears twice"),
    ("recode(hhgq: a=5-2)", "empty range '5-2'"),
    ("recode(hhgq: a=9)", r"'hhgq' has codes 0..7; 9 is out of range"),
    ("recode(hhgq: a=palace)", "no level 'palace'"),
    ("recode(hhgq: a=)", "group 'a' of 'hhgq' is empty"),
    ("recode(sex: a=0)", "no attribute 'sex'"),
    ("detailed * marginal(hhgq)", "'detailed' cannot be multiplied"),
    ("marginal(hhgq) * marginal(hhgq, cenrace)", "'hhgq' twice"),
])
def test_parse_errors_are_hierarchy_errors_with_useful_messages(text, message):
    with pytest.raises(HierarchyError, match=message):
        parse_query(text, E2E_1940)


def test_recode_round_trip_when_labels_look_like_codes():
    # Labels that are digit strings of *other* codes: the canonical expression writes codes,
    # so parsing it back must read numbers as codes (as ranges already are), not as labels.
    s = Schema((Attribute("kids", ("1", "2", "3")), Attribute("b", ("x", "y"))))
    q = recode(s, "kids", {"one": ["1"], "more": [1, 2]})
    assert_query_matches(q, {"kids": [("one", (0,)), ("more", (1, 2))]})
    back = parse_query(q.expression, s)
    assert back == q
    np.testing.assert_array_equal(back.matrix.toarray(), q.matrix.toarray())


@pytest.mark.parametrize("label", ["a;b", "a=b", " padded", "padded ", "a)b", "a(b"])
def test_recode_rejects_group_labels_the_syntax_cannot_carry(label):
    # Such a label makes an expression that does not parse back (a saved workload could not be
    # loaded, or would load a different query), so it is refused when the query is built.
    with pytest.raises(HierarchyError, match=r"group label .* of 'hhgq'"):
        recode(E2E_1940, "hhgq", {label: [0]})


def test_recode_labels_with_balanced_parentheses_and_colons_round_trip():
    q = product(recode(E2E_1940, "hhgq", {"GQ (inst: 1-4)": [1, 2, 3, 4], "hh, 0": [0]}),
                recode(E2E_1940, "cenrace", {"x*y": [0]}))
    assert parse_query(q.expression, E2E_1940) == q
    assert q.answer_labels[0] == ("GQ (inst: 1-4)", "x*y")


# ---------------------------------------------------------------------------------------------
# random small schemas (hypothesis)
# ---------------------------------------------------------------------------------------------


@st.composite
def schema_and_spec(draw):
    n_attr = draw(st.integers(1, 4))
    sizes = draw(st.lists(st.integers(1, 4), min_size=n_attr, max_size=n_attr))
    attrs = tuple(Attribute(f"a{i}", tuple(f"l{i}_{j}" for j in range(n)))
                  for i, n in enumerate(sizes))
    schema = Schema(attrs)
    spec = {}
    for a in attrs:
        kind = draw(st.sampled_from(["sum", "keep", "recode"]))
        if kind == "keep":
            spec[a.name] = "keep"
        elif kind == "recode":
            n_groups = draw(st.integers(1, 3))
            groups = []
            for g in range(n_groups):
                members = draw(st.sets(st.integers(0, a.size - 1), min_size=1))
                groups.append((f"g{g}", tuple(sorted(members))))
            spec[a.name] = groups
    return schema, spec


def build_from_spec(schema, spec):
    kept = [n for n, s in spec.items() if s == "keep"]
    parts = [marginal(schema, *kept)] if kept else []
    for n, s in spec.items():
        if s != "keep":
            parts.append(recode(schema, n, {lab: list(m) for lab, m in s}))
    if not parts:
        return total(schema)
    return product(*parts) if len(parts) > 1 else parts[0]


@settings(max_examples=60, deadline=None)
@given(schema_and_spec())
def test_random_queries_match_reference_and_round_trip(case):
    schema, spec = case
    q = build_from_spec(schema, spec)
    assert_query_matches(q, spec)
    back = parse_query(q.expression, schema)
    assert back == q
    np.testing.assert_array_equal(back.matrix.toarray(), q.matrix.toarray())
    # answers of a random histogram equal the dense product
    h = np.random.default_rng(0).integers(0, 9, schema.size)
    np.testing.assert_array_equal(q.answer(h), dense_reference(schema, spec)[0] @ h)


# ---------------------------------------------------------------------------------------------
# workloads
# ---------------------------------------------------------------------------------------------


def test_workload_validation_and_lookup():
    w = Workload.from_expressions(E2E_1940, {"tc": "total", "race": "marginal(cenrace)"})
    assert w.names == ("tc", "race") and len(w) == 2 and "tc" in w and "x" not in w
    assert w["race"].n_answers == 6
    with pytest.raises(HierarchyError, match=r"no query 'x'.*\['tc', 'race'\]"):
        w["x"]
    with pytest.raises(HierarchyError, match=r"repeated: \['a'\]"):
        Workload((total(E2E_1940, name="a"), marginal(E2E_1940, "hhgq", name="a")))
    with pytest.raises(HierarchyError, match="same schema"):
        Workload((total(E2E_1940), marginal(E2E_1940_144, "hhgq")))
    with pytest.raises(HierarchyError, match="at least one query"):
        Workload(())
    # round trip through the {name: expression} form used in configs and metadata
    assert Workload.from_expressions(E2E_1940, w.to_dict()).queries == w.queries
    e2e = e2e_workload(E2E_1940)
    assert Workload.from_expressions(E2E_1940, e2e.to_dict()).queries == e2e.queries
    assert queries_from(E2E_1940, ["total", "marginal(hhgq)"]).names == ("total",
                                                                       "marginal(hhgq)")
    assert queries_from(E2E_1940, e2e) is e2e


@pytest.mark.parametrize("density", [0.003, 0.5])
def test_answers_of_large_sparse_and_dense_histograms_match_the_dense_product(density):
    """Histograms past 65,536 cells take a sparse product when mostly empty (the 2020-style
    block level); both paths give the dense matrix product's answers, dtype and shape."""
    from hierarchy.presets.pl94 import pl94_workload

    rng = np.random.default_rng(3)
    workload = pl94_workload()
    size = workload["detailed"].schema.size
    hist = rng.integers(1, 9, (3, 40, size)) * (rng.random((3, 40, size)) < density)
    for query in workload:
        dense = hist.reshape(-1, size) @ query.matrix.toarray().astype(np.int64).T
        got = query.answer(hist)
        assert got.dtype == np.int64 and got.shape == (3, 40, query.n_answers)
        np.testing.assert_array_equal(got.reshape(-1, query.n_answers), dense)
        floats = query.answer(hist.astype(np.float64))
        np.testing.assert_allclose(floats.reshape(-1, query.n_answers), dense)
