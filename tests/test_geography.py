"""The geography tree, built from shuffled record columns and checked against the records.

Random trees (hypothesis, small sizes) are generated top down with arbitrary unique geocodes,
turned into record columns (one geocode column per non-root level), shuffled, and given to
:meth:`Geography.from_columns` in several column types. Every property is then checked against
the generating tree, not against the implementation.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hierarchy.errors import HierarchyError
from hierarchy.geography import Geography, encode_column

LEVELS = ("nation", "state", "county", "tract", "block")


# ---------------------------------------------------------------------------------------------
# a reference tree and its records
# ---------------------------------------------------------------------------------------------


def make_tree(child_counts, seed):
    """Tree as {level: {code: parent_code}} (level 1 … depth), codes unique per level and in
    no particular order. ``child_counts[l]`` lists how many children each unit of level ``l``
    has (level 0 = root), consumed in order."""
    rng = np.random.default_rng(seed)
    units = [["0"]]
    parent_of = []
    for counts in child_counts:
        above = units[-1]
        n_children = [counts[i % len(counts)] for i in range(len(above))]
        total = sum(n_children)
        # unique codes, random order and random lengths (so lexical and numeric orders differ)
        numbers = rng.choice(10 * total + 10, size=total, replace=False)
        codes = [f"{'x' * int(rng.integers(0, 3))}{n}" for n in numbers]
        codes = list(dict.fromkeys(codes))
        while len(codes) < total:        # extremely rare collision after prefixing
            codes.append(f"extra{len(codes)}")
        level_parent = {}
        k = 0
        for p, nc in zip(above, n_children):
            for _ in range(nc):
                level_parent[codes[k]] = p
                k += 1
        units.append(codes)
        parent_of.append(level_parent)
    return parent_of


def ancestors(parent_of, leaf):
    """Codes of ``leaf`` and its ancestors below the root, top down."""
    chain = [leaf]
    for lv in range(len(parent_of) - 1, 0, -1):
        chain.append(parent_of[lv][chain[-1]])
    return chain[::-1]


def records_for(parent_of, seed, per_leaf=(1, 3)):
    """Record columns (one list per non-root level): every leaf gets 1..3 records, shuffled."""
    rng = np.random.default_rng(seed)
    rows = []
    for leaf in parent_of[-1]:
        for _ in range(int(rng.integers(per_leaf[0], per_leaf[1] + 1))):
            rows.append(ancestors(parent_of, leaf))
    rng.shuffle(rows)
    return [[r[lv] for r in rows] for lv in range(len(parent_of))]


def as_kind(column, kind, seed=0):
    """The same geocode column as a list, numpy array, pandas Series/Categorical, or pyarrow
    (plain, dictionary, and chunked dictionary arrays with different dictionaries)."""
    if kind == "list":
        return list(column)
    if kind == "numpy":
        return np.array(column, dtype=object)
    if kind == "series":
        return pd.Series(column, dtype=object)
    if kind == "categorical":
        # with an unused category, which must not become a unit
        return pd.Categorical(column, categories=sorted(set(column)) + ["unused"])
    if kind == "arrow":
        return pa.array(column, type=pa.string())
    if kind == "arrow_dict":
        return pa.array(column, type=pa.string()).dictionary_encode()
    if kind == "arrow_chunked":
        cut = len(column) // 2
        chunks = [pa.array(column[:cut] + ["unused"], pa.string()).dictionary_encode()[:cut],
                  pa.array(column[cut:], pa.string()).dictionary_encode()]
        return pa.chunked_array(chunks)
    raise AssertionError(kind)


KINDS = ["list", "numpy", "series", "categorical", "arrow", "arrow_dict", "arrow_chunked"]


def check_against_tree(geo, leaf, parent_of, columns):
    depth = len(parent_of)
    assert geo.depth == depth + 1
    assert geo.geocodes[0].tolist() == ["0"] and geo.parents[0].tolist() == [-1]
    for lv in range(1, depth + 1):
        codes = geo.geocodes[lv].tolist()
        used = set(columns[lv - 1])
        assert set(codes) == used and len(codes) == len(used)
        # parents consistent with the generating tree
        parent_codes = geo.geocodes[lv - 1][geo.parents[lv]].tolist()
        expected = [parent_of[lv - 1][c] if lv > 1 else "0" for c in codes]
        assert parent_codes == expected
        # children contiguous and in parent order; within a parent, sorted by geocode
        par = geo.parents[lv]
        assert np.all(np.diff(par) >= 0)
        offsets = geo.child_offsets(lv - 1)
        assert offsets[0] == 0 and offsets[-1] == len(codes)
        for p in range(geo.n_units(lv - 1)):
            kids = codes[offsets[p]:offsets[p + 1]]
            assert kids == sorted(kids)
            assert len(kids) >= 1
            assert all(par[offsets[p]:offsets[p + 1]] == p)
        np.testing.assert_array_equal(
            geo.n_children(lv - 1),
            pd.Series(expected).value_counts().reindex(geo.geocodes[lv - 1]).to_numpy())
    # every record maps to the bottom unit with its geocode
    assert leaf.dtype == np.int32  # int32 unless there are 2**31 units or more
    np.testing.assert_array_equal(geo.geocodes[-1][leaf], np.asarray(columns[-1], dtype=object))


@st.composite
def trees(draw, max_depth=4):
    depth = draw(st.integers(1, max_depth))
    child_counts = [draw(st.lists(st.integers(1, 3), min_size=1, max_size=4))
                    for _ in range(depth)]
    child_counts[0] = [draw(st.integers(1, 4))]
    return child_counts, draw(st.integers(0, 2**32 - 1))


# ---------------------------------------------------------------------------------------------
# random trees
# ---------------------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(trees(), st.sampled_from(KINDS))
def test_random_trees_from_shuffled_records(tree, kind):
    child_counts, seed = tree
    parent_of = make_tree(child_counts, seed)
    columns = records_for(parent_of, seed + 1)
    levels = LEVELS[:len(parent_of) + 1]
    geo, (leaf,) = Geography.from_columns(levels, [[as_kind(c, kind) for c in columns]])
    check_against_tree(geo, leaf, parent_of, columns)
    # the record order does not matter: reshuffled records give the identical tree
    perm = np.random.default_rng(seed + 2).permutation(len(columns[0]))
    shuffled = [[c[i] for i in perm] for c in columns]
    geo2, (leaf2,) = Geography.from_columns(levels, [shuffled])
    assert geo2.equals(geo)
    np.testing.assert_array_equal(leaf2, leaf[perm])
    # round trip through the table form
    assert Geography.from_frame(geo.to_frame(), levels).equals(geo)


@settings(max_examples=40, deadline=None)
@given(trees())
def test_aggregate_equals_groupby(tree):
    child_counts, seed = tree
    parent_of = make_tree(child_counts, seed)
    columns = records_for(parent_of, seed + 1)
    levels = LEVELS[:len(parent_of) + 1]
    geo, (leaf,) = Geography.from_columns(levels, [columns])
    rng = np.random.default_rng(seed)
    values = rng.integers(-5, 100, size=(len(columns[0]), 3))
    frame = pd.DataFrame({f"c{lv}": col for lv, col in enumerate(columns)})
    frame[["v0", "v1", "v2"]] = values
    leaf_values = np.zeros((geo.n_units(-1), 3), dtype=np.int64)
    np.add.at(leaf_values, leaf, values)
    for lv in range(geo.depth):
        got = geo.aggregate(leaf_values, -1, lv)
        if lv == 0:
            expected = values.sum(axis=0, keepdims=True)
        else:
            expected = (frame.groupby(f"c{lv - 1}")[["v0", "v1", "v2"]].sum()
                        .reindex(geo.geocodes[lv]).to_numpy())
        np.testing.assert_array_equal(got, expected)
        # 1-d values too, and aggregation in two steps equals one step
        np.testing.assert_array_equal(geo.aggregate(leaf_values[:, 0], -1, lv), expected[:, 0])
        if lv < geo.depth - 1:
            step = geo.aggregate(leaf_values, -1, lv + 1)
            np.testing.assert_array_equal(geo.aggregate(step, lv + 1, lv), expected)


# ---------------------------------------------------------------------------------------------
# structural edge cases
# ---------------------------------------------------------------------------------------------


def test_deep_chain_one_child_at_every_level():
    levels = ("nation", "a", "b", "c", "d", "e", "f")
    columns = [[f"{lv}1"] * 3 for lv in levels[1:]]
    geo, (leaf,) = Geography.from_columns(levels, [columns])
    assert [geo.n_units(lv) for lv in levels] == [1] * 7
    assert leaf.tolist() == [0, 0, 0]
    for lv in levels[:-1]:
        assert geo.n_children(lv).tolist() == [1]
    v = np.array([[7, 8]])
    for lv in levels:
        np.testing.assert_array_equal(geo.aggregate(v, -1, lv), v)


def test_unbalanced_tree_and_units_with_one_child():
    # state A: one county with five tracts; state B: three counties with one tract each
    rows = [("A", "A1", f"A1t{i}") for i in range(5)] + \
           [("B", f"B{j}", f"B{j}t") for j in range(3)]
    cols = [list(c) for c in zip(*rows)]
    geo, (leaf,) = Geography.from_columns(["nation", "state", "county", "tract"], [cols])
    assert geo.geocodes[1].tolist() == ["A", "B"]
    assert geo.n_children("nation").tolist() == [2]
    assert geo.n_children("state").tolist() == [1, 3]
    assert geo.n_children("county").tolist() == [5, 1, 1, 1]
    assert geo.aggregate(np.arange(8), "tract", "state").tolist() == [0 + 1 + 2 + 3 + 4, 5 + 6 + 7]
    assert geo.aggregate(np.arange(8), "tract", "county").tolist() == [10, 5, 6, 7]
    np.testing.assert_array_equal(geo.geocodes[-1][leaf], cols[-1])


def test_root_only_geography():
    geo, (leaf,) = Geography.from_columns(["nation"], [[]], root_geocode="US")
    assert geo.geocodes[0].tolist() == ["US"] and geo.depth == 1
    assert geo.aggregate(np.array([[3, 4]]), 0, 0).tolist() == [[3, 4]]
    with pytest.raises(HierarchyError, match="bottom level"):
        geo.child_offsets("nation")


def test_code_under_two_parents_raises_naming_it():
    states = ["01", "01", "02", "02"]
    counties = ["001", "003", "005", "001"]      # county "001" under two states
    with pytest.raises(HierarchyError) as err:
        Geography.from_columns(["nation", "state", "county"], [[states, counties]])
    msg = str(err.value)
    assert "county '001'" in msg and "'01'" in msg and "'02'" in msg
    assert "row 3" in msg or "row 0" in msg
    assert "prefix" in msg  # says how to fix it


def test_code_under_two_parents_across_record_sets_raises():
    persons = [["01"], ["001"]]
    units = [["02"], ["001"]]
    with pytest.raises(HierarchyError, match=r"county '001'.*'01'.*'02'|county '001'.*'02'.*'01'"):
        Geography.from_columns(["nation", "state", "county"], [persons, units])


@pytest.mark.parametrize("kind, column", [
    ("list", ["a", None, "b", None]),
    ("numpy", np.array(["a", None, "b", None], dtype=object)),
    ("series_nan", pd.Series(["a", np.nan, "b", np.nan])),
    ("float_nan", pd.Series([1.0, np.nan, 2.0, np.nan])),      # numbers read with gaps
    ("float_numpy", np.array([1.0, np.nan, 2.0, np.nan])),
    ("string_dtype", pd.Series(["a", pd.NA, "b", pd.NA], dtype="string")),
    ("categorical", pd.Categorical(["a", None, "b", None])),
    ("arrow", pa.array(["a", None, "b", None])),
    ("arrow_dict", pa.array(["a", None, "b", None]).dictionary_encode()),
    ("empty_string", np.array(["a", "", "b", ""], dtype=object)),
    ("arrow_empty_string", pa.array(["a", "", "b", ""])),
    ("categorical_empty_string", pd.Categorical(["a", "", "b", ""])),
])
def test_missing_geocodes_raise_with_row_numbers(kind, column):
    with pytest.raises(HierarchyError, match=r"'county'.*2 missing.*rows \[1, 3\]"):
        encode_column(column, name="county")
    states = ["s"] * 4
    with pytest.raises(HierarchyError, match=r"rows \[1, 3\]"):
        Geography.from_columns(["nation", "state", "county"], [[states, column]])


def _chunks_of(values, cuts):
    return [pa.array(values[a:b]) for a, b in zip([0] + cuts, cuts + [len(values)])]


@pytest.mark.parametrize("how", ["one dictionary", "a dictionary per chunk", "parquet"])
def test_a_chunked_dictionary_column_decodes_to_its_values(how, tmp_path):
    """Chunks that share one dictionary (a chunked array's dictionary_encode, which the
    encoding no longer unifies) and chunks with dictionaries of their own (unified) both
    decode to the records' own geocodes."""
    rng = np.random.default_rng(3)
    values = [f"{v:04d}" for v in rng.integers(0, 40, size=300)]
    cuts = [50, 51, 170]
    if how == "one dictionary":
        column = pa.chunked_array(_chunks_of(values, cuts)).dictionary_encode()
        assert all(c.dictionary.equals(column.chunk(0).dictionary) for c in column.chunks)
    elif how == "a dictionary per chunk":
        column = pa.chunked_array([c.dictionary_encode() for c in _chunks_of(values, cuts)])
        assert not column.chunk(0).dictionary.equals(column.chunk(1).dictionary)
    else:           # written from one dictionary: every row group's chunk carries it whole
        import pyarrow.parquet as pq
        pq.write_table(pa.table({"block": pa.array(values).dictionary_encode()}),
                       tmp_path / "b.parquet", row_group_size=64)
        column = pq.read_table(tmp_path / "b.parquet").column("block")
        assert column.num_chunks > 1
    codes, dictionary = encode_column(column, name="block")
    assert dictionary[codes].tolist() == values


def test_multiple_record_sets_units_create_an_empty_unit():
    persons = [["01", "01", "02"], ["01001", "01001", "02001"]]
    units = [["01", "02", "02", "03"], ["01001", "02001", "02003", "03001"]]
    geo, (p_leaf, u_leaf) = Geography.from_columns(["nation", "state", "county"],
                                                   [persons, units])
    assert geo.geocodes[1].tolist() == ["01", "02", "03"]
    assert geo.geocodes[2].tolist() == ["01001", "02001", "02003", "03001"]
    np.testing.assert_array_equal(geo.geocodes[2][p_leaf], persons[1])
    np.testing.assert_array_equal(geo.geocodes[2][u_leaf], units[1])
    # the units-only counties have no persons
    n_persons = np.bincount(p_leaf, minlength=geo.n_units(-1))
    assert n_persons.tolist() == [2, 1, 0, 0]
    # an empty record set is allowed
    geo2, (p2, empty) = Geography.from_columns(["nation", "state", "county"],
                                               [persons, [[], []]])
    assert empty.size == 0 and geo2.n_units("county") == 2


def test_wrong_number_of_columns_raises():
    with pytest.raises(HierarchyError, match="record set 1 has 1 geocode columns"):
        Geography.from_columns(["nation", "state", "county"], [[["a"], ["b"]], [["a"]]])


# ---------------------------------------------------------------------------------------------
# direct construction, table form, lookups
# ---------------------------------------------------------------------------------------------


def small_geo():
    return Geography(("nation", "state", "county"),
                     (["0"], ["a", "b"], ["a1", "a2", "b1"]),
                     ([-1], [0, 0], [0, 0, 1]))


@pytest.mark.parametrize("kwargs, message", [
    (dict(levels=(), geocodes=(), parents=()), "at least one level"),
    (dict(levels=("n", "n"), geocodes=(["0"], ["a"]), parents=([-1], [0])), "unique"),
    (dict(levels=("n", "s"), geocodes=(["0"],), parents=([-1],)), "every level"),
    (dict(levels=("n",), geocodes=(["0", "1"],), parents=([-1, -1],)), "exactly one unit"),
    (dict(levels=("n", "s"), geocodes=(["0"], ["a", "a"]), parents=([-1], [0, 0])),
     r"repeats geocodes \['a'\]"),
    (dict(levels=("n", "s"), geocodes=(["0"], []), parents=([-1], [])), "no units"),
    (dict(levels=("n", "s"), geocodes=(["0"], ["a"]), parents=([-1], [1])), "out of range"),
    (dict(levels=("n", "s", "c"), geocodes=(["0"], ["a", "b"], ["x", "y", "z"]),
          parents=([-1], [0, 0], [1, 0, 1])), "contiguous"),
    (dict(levels=("n", "s", "c"), geocodes=(["0"], ["a", "b"], ["x", "y"]),
          parents=([-1], [0, 0], [0, 0])), r"state|\['b'\] have no c units"),
    (dict(levels=("n", "s"), geocodes=(["0"], ["a", "b"]), parents=([-1], [0])), "equal length"),
])
def test_invalid_construction_raises(kwargs, message):
    with pytest.raises(HierarchyError, match=message):
        Geography(**kwargs)


def test_frame_round_trip_and_errors():
    geo = small_geo()
    frame = geo.to_frame()
    assert frame.columns.tolist() == ["level", "geocode", "parent"]
    assert frame["parent"].tolist() == ["", "0", "0", "a", "a", "b"]
    assert Geography.from_frame(frame, geo.levels).equals(geo)
    assert not Geography.from_frame(frame, geo.levels[:2]).equals(geo)
    with pytest.raises(HierarchyError, match=r"missing \['parent'\]"):
        Geography.from_frame(frame.drop(columns="parent"), geo.levels)
    bad = frame.copy()
    bad.loc[5, "parent"] = "zz"
    with pytest.raises(HierarchyError, match=r"units \['b1'\] name a parent"):
        Geography.from_frame(bad, geo.levels)


def test_lookups():
    geo = small_geo()
    assert geo.level_index("county") == 2 and geo.level_index(-1) == 2
    assert geo.n_units("state") == 2 and geo.n_units(-1) == 3
    with pytest.raises(HierarchyError, match="unknown geography level 'tract'"):
        geo.level_index("tract")
    with pytest.raises(HierarchyError, match="out of range"):
        geo.level_index(3)
    assert geo.index_of("county", ["b1", "a1"]).tolist() == [2, 0]
    with pytest.raises(HierarchyError, match=r"unknown county geocode\(s\) \['zz'\]"):
        geo.index_of("county", ["a1", "zz"])
    with pytest.raises(HierarchyError, match="cannot aggregate down"):
        geo.aggregate(np.ones(2), "state", "county")
    with pytest.raises(HierarchyError, match="expected 3 rows"):
        geo.aggregate(np.ones(2), "county", "state")
    assert repr(geo) == "Geography(nation=1, state=2, county=3)"
