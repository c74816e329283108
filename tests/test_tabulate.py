"""Tabulation against pandas groupby / crosstab on random microdata.

Both code paths of :func:`count_cells` are exercised: the local ``bincount`` of a chunk whose
keys span a narrow range (geographically sorted records) and the global "spill" ``bincount``
(shuffled records), including calls that mix the two and chunk sizes of one record.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from hierarchy.errors import HierarchyError
from hierarchy.geography import Geography
from hierarchy.schema import E2E_1940, Attribute, Schema
from hierarchy.tabulation import (
    LeafCounts,
    count_cells,
    count_cells_sparse,
    tabulate,
    tabulate_leaf,
)

# ---------------------------------------------------------------------------------------------
# references
# ---------------------------------------------------------------------------------------------


def reference_counts(leaf, columns, shape, n_leaves):
    """Counts per (leaf, cell) with np.add.at on ravel_multi_index — no chunking, no keys."""
    out = np.zeros((n_leaves, int(np.prod(shape))), dtype=np.int64)
    if len(leaf):
        cell = np.ravel_multi_index(tuple(np.asarray(c, dtype=np.int64) for c in columns), shape)
        np.add.at(out, (np.asarray(leaf), cell), 1)
    return out



def random_records(n, n_leaves, shape, sort, seed):
    """Random leaves and attribute codes of mixed integer types, sorted by leaf or not."""
    rng = np.random.default_rng(seed)
    leaf = rng.integers(0, n_leaves, n)
    columns = [rng.integers(0, s, n).astype(rng.choice([np.int8, np.int16, np.int64, np.uint8]))
               for s in shape]
    if sort:
        order = np.argsort(leaf, kind="stable")
        leaf, columns = leaf[order], [c[order] for c in columns]
    return leaf, columns

def chunk_paths(leaf, columns, shape, chunk):
    """Which path each chunk of count_cells takes ("local" or "spill"), by the rule stated in the
    module docstring: keys within 8 × the chunk's records are counted locally. Used only to make
    sure the tests really exercise both paths."""
    n_cells = int(np.prod(shape))
    cell = np.ravel_multi_index(tuple(np.asarray(c, dtype=np.int64) for c in columns), shape)
    key = np.asarray(leaf, dtype=np.int64) * n_cells + cell
    paths = []
    for start in range(0, len(key), chunk):
        k = key[start:start + chunk]
        paths.append("local" if k.max() - k.min() + 1 <= 8 * k.size else "spill")
    return paths


def crosstab_level(frame, code_column, schema, geocodes):
    """Persons per (unit, cell) of one level by pandas crosstab, rows in ``geocodes`` order."""
    cell = np.ravel_multi_index(tuple(frame[a].to_numpy(dtype=np.int64) for a in schema.names),
                                schema.shape)
    if code_column is None:
        keys = np.full(len(frame), "0", dtype=object)
    else:
        keys = frame[code_column].to_numpy(dtype=object)
    tab = pd.crosstab(pd.Series(keys, name="unit"), pd.Series(cell, name="cell"))
    return (tab.reindex(index=geocodes, columns=range(schema.size), fill_value=0)
            .fillna(0).to_numpy(dtype=np.int64))


# ---------------------------------------------------------------------------------------------
# count_cells
# ---------------------------------------------------------------------------------------------


@settings(max_examples=80, deadline=None)
@example(n=1, n_leaves=1, shape=[1, 4, 8, 8], chunk=1, sort=False, seed=0)  # 256 cells, uint8
@example(n=5, n_leaves=2, shape=[1, 1], chunk=3, sort=True, seed=1)         # one cell
@given(n=st.integers(0, 300), n_leaves=st.integers(1, 40),
       shape=st.lists(st.integers(1, 5), min_size=1, max_size=3),
       chunk=st.sampled_from([1, 2, 3, 7, 64, 1 << 18]), sort=st.booleans(),
       seed=st.integers(0, 2**32 - 1))
def test_count_cells_equals_reference(n, n_leaves, shape, chunk, sort, seed):
    leaf, columns = random_records(n, n_leaves, shape, sort, seed)
    got = count_cells(leaf, columns, shape, n_leaves, chunk=chunk)
    assert got.dtype == np.int64 and got.shape == (n_leaves, int(np.prod(shape)))
    np.testing.assert_array_equal(got, reference_counts(leaf, columns, shape, n_leaves))
    assert got.sum() == n


def test_count_cells_mixes_local_and_spill_chunks():
    rng = np.random.default_rng(5)
    shape = [8, 2, 2, 6]
    n_leaves, n = 40, 4000         # ~100 records per leaf: a sorted chunk spans few leaves
    leaf = np.sort(rng.integers(0, n_leaves, n))
    leaf[n // 2:] = rng.integers(0, n_leaves, n - n // 2)   # sorted first half, random second
    columns = [rng.integers(0, s, n).astype(np.int8) for s in shape]
    for chunk in (1, 100, 300):
        paths = chunk_paths(leaf, columns, shape, chunk)
        assert "local" in paths
        if chunk > 1:
            assert "spill" in paths
        got = count_cells(leaf, columns, shape, n_leaves, chunk=chunk)
        np.testing.assert_array_equal(got, reference_counts(leaf, columns, shape, n_leaves))


@pytest.mark.parametrize("count", [count_cells, count_cells_sparse])
@pytest.mark.parametrize("bad", [-1, 6, 127])
def test_count_cells_bad_code_names_attribute_and_row(bad, count):
    columns = [np.zeros(10, np.int8), np.zeros(10, np.int8)]
    columns[1][7] = bad
    for chunk in (1, 4, 1 << 18):
        with pytest.raises(HierarchyError, match=rf"attribute 1.* {bad} at row 7, outside 0..5"):
            count(np.zeros(10, np.int64), columns, [2, 6], 1, chunk=chunk)


@pytest.mark.parametrize("count", [count_cells, count_cells_sparse])
def test_count_cells_rejects_columns_of_another_length(count):
    with pytest.raises(HierarchyError, match="rows"):
        count(np.zeros(3, np.int64), [np.zeros(4, np.int8)], [2], 1)


# ---------------------------------------------------------------------------------------------
# count_cells_sparse
# ---------------------------------------------------------------------------------------------


@settings(max_examples=80, deadline=None)
@example(n=1, n_leaves=1, shape=[1, 4, 8, 8], chunk=1, sort=False, seed=0)  # 256 cells, uint8
@example(n=5, n_leaves=2, shape=[1, 1], chunk=3, sort=True, seed=1)         # one cell
@given(n=st.integers(0, 300), n_leaves=st.integers(1, 40),
       shape=st.lists(st.integers(1, 9), min_size=1, max_size=4),
       chunk=st.sampled_from([1, 3, 64, 1 << 18]), sort=st.booleans(),
       seed=st.integers(0, 2**32 - 1))
def test_count_cells_sparse_is_the_dense_count_in_row_major_order(n, n_leaves, shape, chunk,
                                                                  sort, seed):
    leaf, columns = random_records(n, n_leaves, shape, sort, seed)
    got = count_cells_sparse(leaf, columns, shape, n_leaves, chunk=chunk)
    dense = reference_counts(leaf, columns, shape, n_leaves)
    assert got.shape == dense.shape and got.dtype == np.int64
    assert got.has_canonical_format and (got.data > 0).all()
    rows, cells = np.nonzero(dense)     # the order _save_counts wrote before it was sparse
    np.testing.assert_array_equal(np.repeat(np.arange(n_leaves), np.diff(got.indptr)), rows)
    np.testing.assert_array_equal(got.indices, cells)
    np.testing.assert_array_equal(got.data, dense[rows, cells])


def test_count_cells_sparse_more_than_256_cells_and_large_keys():
    """2,016 cells (the PL 94 schema; cells no longer fit in a byte) and keys of 2**31 or
    more (int64 keys)."""
    rng = np.random.default_rng(11)
    shape, n = [8, 2, 2, 63], 5000
    columns = [rng.integers(0, s, n).astype(np.int8) for s in shape]
    for n_leaves in (30, 1_100_000):       # 1.1M leaves × 2,016 cells > 2**31
        leaf = rng.integers(0, 30, n) * (n_leaves // 30)
        got = count_cells_sparse(leaf, columns, shape, n_leaves)
        rows = np.repeat(np.arange(n_leaves), np.diff(got.indptr))
        want = pd.Series(1, index=pd.MultiIndex.from_arrays(
            [leaf, np.ravel_multi_index(tuple(c.astype(np.int64) for c in columns), shape)]))
        want = want.groupby(level=[0, 1]).sum().sort_index()
        np.testing.assert_array_equal(rows, want.index.get_level_values(0))
        np.testing.assert_array_equal(got.indices, want.index.get_level_values(1))
        np.testing.assert_array_equal(got.data, want.to_numpy())


# ---------------------------------------------------------------------------------------------
# tabulate on random microdata
# ---------------------------------------------------------------------------------------------


@st.composite
def microdata(draw):
    n_attr = draw(st.integers(1, 3))
    sizes = draw(st.lists(st.integers(1, 4), min_size=n_attr, max_size=n_attr))
    schema = Schema(tuple(Attribute(f"a{i}", tuple(str(j) for j in range(s)))
                          for i, s in enumerate(sizes)))
    n_states = draw(st.integers(1, 4))
    n_counties = draw(st.integers(n_states, 12))
    n_persons = draw(st.integers(0, 150))
    seed = draw(st.integers(0, 2**32 - 1))
    sort = draw(st.booleans())
    chunk = draw(st.sampled_from([1, 2, 5, 1 << 18]))
    return schema, n_states, n_counties, n_persons, seed, sort, chunk


def random_people(schema, n_states, n_counties, n_persons, seed):
    rng = np.random.default_rng(seed)
    # every state has ≥ 1 county; county codes are prefixed by their state's
    county_state = np.concatenate([np.arange(n_states),
                                   rng.integers(0, n_states, n_counties - n_states)])
    county_codes = np.array([f"{s:02d}{c:03d}" for c, s in enumerate(county_state)], dtype=object)
    county = rng.integers(0, n_counties, n_persons)
    frame = pd.DataFrame({"state": np.array([f"{s:02d}" for s in county_state],
                                            dtype=object)[county] if n_persons else
                          np.zeros(0, dtype=object),
                          "county": county_codes[county] if n_persons else
                          np.zeros(0, dtype=object)})
    for a in schema.attributes:
        frame[a.name] = rng.integers(0, a.size, n_persons).astype(np.int8)
    # units: one per county (so every county exists, some without persons) plus extra units
    units = pd.DataFrame({"state": [f"{s:02d}" for s in county_state],
                          "county": county_codes,
                          "a0": rng.integers(0, schema.shape[0], n_counties)})
    return frame, units


def check_hierarchy(truth, persons, schema):
    geo = truth.geography
    levels = [None, "state", "county"]
    for lv, col in enumerate(levels):
        got = truth.counts[lv]
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, crosstab_level(persons, col, schema, geo.geocodes[lv]))
        assert got.sum() == len(persons)          # nothing dropped, nothing invented


@settings(max_examples=60, deadline=None)
@given(microdata())
def test_tabulate_equals_crosstab(case):
    schema, n_states, n_counties, n_persons, seed, sort, chunk = case
    persons, units = random_people(schema, n_states, n_counties, n_persons, seed)
    if sort:
        persons = persons.sort_values(["state", "county"], kind="stable").reset_index(drop=True)
    truth = tabulate(persons, schema=schema, levels=["nation", "state", "county"], units=units,
                     unit_attribute="a0", chunk=chunk)
    check_hierarchy(truth, persons, schema)
    # every county exists, including those with no persons (units create empty units)
    assert truth.geography.n_units("county") == n_counties
    # units table: counts per (unit, type), at every level
    unit_tab = (pd.crosstab(units["county"], units["a0"])
                .reindex(index=truth.geography.geocodes[2], columns=range(schema.shape[0]),
                         fill_value=0).to_numpy())
    np.testing.assert_array_equal(truth.level_units("county"), unit_tab)
    np.testing.assert_array_equal(truth.level_units("nation"), unit_tab.sum(axis=0,
                                                                            keepdims=True))
    assert truth.unit_attribute == "a0"
    # the same data as a pyarrow table with dictionary geocodes gives the same hierarchy
    table = pa.Table.from_pandas(persons, preserve_index=False)
    table = table.set_column(1, "county", table.column("county").dictionary_encode())
    if len(persons):
        again = tabulate(table, schema=schema, levels=["nation", "state", "county"],
                         units=pa.Table.from_pandas(units), unit_attribute="a0", chunk=chunk)
        assert again.geography.equals(truth.geography)
        for a, b in zip(again.counts, truth.counts):
            np.testing.assert_array_equal(a, b)


def test_tabulate_sorted_and_shuffled_give_identical_results_on_e2e():
    rng = np.random.default_rng(11)
    n = 64 * 64                                    # whole chunks of 64 records
    county = np.sort(rng.integers(0, 20, n))       # ~200 persons per county
    persons = pd.DataFrame({"state": [f"{c // 6:02d}" for c in county],
                            "county": [f"{c // 6:02d}{c:03d}" for c in county]})
    for a in E2E_1940.attributes:
        persons[a.name] = rng.integers(0, a.size, n).astype(np.int8)
    levels = ["nation", "state", "county"]
    sorted_truth = tabulate(persons, schema=E2E_1940, levels=levels, chunk=64)
    shuffled = persons.sample(frac=1, random_state=3).reset_index(drop=True)
    shuffled_truth = tabulate(shuffled, schema=E2E_1940, levels=levels, chunk=64)
    assert sorted_truth.geography.equals(shuffled_truth.geography)
    for a, b in zip(sorted_truth.counts, shuffled_truth.counts):
        np.testing.assert_array_equal(a, b)
    check_hierarchy(sorted_truth, persons, E2E_1940)
    # the two inputs really do take different paths through count_cells
    cols = [persons[a].to_numpy() for a in E2E_1940.names]
    leaf = sorted_truth.geography.index_of("county", persons["county"])
    assert set(chunk_paths(leaf, cols, E2E_1940.shape, 64)) == {"local"}
    perm_leaf = sorted_truth.geography.index_of("county", shuffled["county"])
    assert "spill" in chunk_paths(perm_leaf, [shuffled[a].to_numpy() for a in E2E_1940.names],
                                  E2E_1940.shape, 64)


def test_tabulate_single_level_counts_every_person():
    persons = pd.DataFrame({"hhgq": [0, 0, 3], "votingage": [1, 0, 1], "hispanic": [0, 0, 1],
                            "cenrace": [0, 0, 5]})
    truth = tabulate(persons, schema=E2E_1940, levels=["nation"])
    assert truth.summary() == {"nation": {"units": 1, "persons": 3}}
    expected = np.zeros(192, np.int64)
    np.add.at(expected, [0 * 24 + 1 * 12 + 0, 0 * 24 + 0, 3 * 24 + 12 + 6 + 5], 1)
    np.testing.assert_array_equal(truth.counts[0][0], expected)
    units = pd.DataFrame({"hhgq": [0, 0, 3]})
    truth = tabulate(persons, schema=E2E_1940, levels=["nation"], units=units)
    assert truth.level_units("nation").tolist() == [[2, 0, 0, 1, 0, 0, 0, 0]]


def test_tabulate_with_prebuilt_geography_and_empty_units():
    geo = Geography(("nation", "state", "county"), (["0"], ["01", "02"], ["01001", "01002",
                                                                        "02001"]),
                    ([-1], [0, 0], [0, 0, 1]))
    persons = {"state": np.array(["02", "01"], dtype=object),
               "county": np.array(["02001", "01001"], dtype=object),
               "hhgq": np.array([0, 1]), "votingage": np.array([1, 1]),
               "hispanic": np.array([0, 0]), "cenrace": np.array([2, 3])}
    truth = tabulate(persons, schema=E2E_1940, levels=["nation", "state", "county"],
                     geography=geo)
    assert truth.geography is geo
    assert truth.totals("county").tolist() == [1, 0, 1]
    assert truth.totals("state").tolist() == [1, 1]
    assert truth.level_counts("county")[2, 12 + 2] == 1
    assert truth.level_counts("county")[0, 24 + 12 + 3] == 1
    bad = dict(persons, county=np.array(["02009", "01001"], dtype=object))
    with pytest.raises(HierarchyError, match=r"county geocode\(s\) \['02009'\] are not in"):
        tabulate(bad, schema=E2E_1940, levels=["nation", "state", "county"], geography=geo)
    moved = dict(persons, state=np.array(["01", "01"], dtype=object))
    with pytest.raises(HierarchyError, match="row 0: county '02001' is not inside state '01'"):
        tabulate(moved, schema=E2E_1940, levels=["nation", "state", "county"], geography=geo)
    with pytest.raises(HierarchyError, match="differ from the geography"):
        tabulate(persons, schema=E2E_1940, levels=["nation", "county"],
                 geocode_columns=["county"], geography=geo)


def test_tabulate_validation_errors():
    persons = pd.DataFrame({"state": ["01", "01"], "hhgq": [0, 8], "votingage": [1, 0],
                            "hispanic": [0, 0], "cenrace": [0, 0]})
    with pytest.raises(HierarchyError, match=r"0..7|hhgq"):
        tabulate(persons, schema=E2E_1940, levels=["nation", "state"])
    with pytest.raises(HierarchyError, match="row 1"):
        tabulate(persons, schema=E2E_1940, levels=["nation", "state"])
    with pytest.raises(HierarchyError, match="no column 'county'"):
        tabulate(persons, schema=E2E_1940, levels=["nation", "state", "county"])
    p2 = persons.assign(hhgq=[0, 1], cenrace=["white", "purple"])
    with pytest.raises(HierarchyError, match=r"column 'cenrace'.*'purple' \(row 1\)\. Levels are "
                                             r"\['white', 'black'"):
        tabulate(p2, schema=E2E_1940, levels=["nation", "state"])
    with pytest.raises(HierarchyError, match="need 1 geocode columns"):
        tabulate(persons, schema=E2E_1940, levels=["nation", "state"],
                 geocode_columns=["state", "x"])
    p3 = persons.assign(hhgq=[0, 1])
    with pytest.raises(HierarchyError, match="unit_attribute"):
        tabulate(p3, schema=E2E_1940, levels=["nation", "state"], units=p3,
                 unit_attribute=None)
    null_codes = pa.table({"state": ["01", "01"], "hhgq": pa.array([0, None], pa.int8()),
                           "votingage": [1, 0], "hispanic": [0, 0], "cenrace": [0, 0]})
    with pytest.raises(HierarchyError, match=r"'hhgq' has 1 missing value\(s\) at rows \[1\]"):
        tabulate(null_codes, schema=E2E_1940, levels=["nation", "state"])


def test_tabulate_geocode_columns_mapping():
    persons = pd.DataFrame({"st": ["02", "01", "01"], "hhgq": [0, 0, 0], "votingage": [1, 1, 0],
                            "hispanic": [0, 0, 0], "cenrace": [0, 0, 0]})
    truth = tabulate(persons, schema=E2E_1940, levels=["nation", "state"],
                     geocode_columns=["st"])
    assert truth.geography.geocodes[1].tolist() == ["01", "02"]
    assert truth.totals("state").tolist() == [2, 1]


# ---------------------------------------------------------------------------------------------
# tabulate_leaf / LeafCounts: the sparse bottom level answers as the dense hierarchy does
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def data_2020():
    from hierarchy.synth.census2020 import synthesize_2020

    return synthesize_2020(4000, seed=4, states=["01", "02", "11"])


def test_leaf_counts_answer_every_level_as_the_hierarchy(data_2020):
    from hierarchy.measurement import published_statistics
    from hierarchy.presets.pl94 import LEVELS, PL94_2020

    shuffled = data_2020.persons.take(np.random.default_rng(2).permutation(
        data_2020.persons.num_rows))
    truth = tabulate(data_2020.persons, schema=PL94_2020, levels=LEVELS, units=data_2020.units)
    for persons in (data_2020.persons, shuffled):
        leaf = tabulate_leaf(persons, schema=PL94_2020, levels=LEVELS, units=data_2020.units)
        assert leaf.geography.equals(truth.geography)
        assert leaf.leaf_counts.nnz == np.count_nonzero(truth.leaf_counts)
        dense = leaf.to_hierarchy()
        for li, lv in enumerate(LEVELS):
            np.testing.assert_array_equal(leaf.level_counts(lv), truth.counts[li])
            np.testing.assert_array_equal(dense.counts[li], truth.counts[li])
            np.testing.assert_array_equal(leaf.totals(li), truth.totals(li))
            np.testing.assert_array_equal(leaf.level_units(lv), truth.units[li])
            np.testing.assert_array_equal(dense.units[li], truth.units[li])
        publish = {"tot": ["nation", "county", "block"], "gqhh": ["tract", "block"]}
        got, want = published_statistics(leaf, publish), published_statistics(truth, publish)
        assert got.keys() == want.keys()
        for lv in want:
            assert got[lv].keys() == want[lv].keys()
            for stat in want[lv]:
                assert got[lv][stat].dtype == want[lv][stat].dtype == np.int64
                np.testing.assert_array_equal(got[lv][stat], want[lv][stat])


def test_leaf_counts_unit_check_names_the_same_conflict(data_2020):
    from hierarchy.io import check_tabulated_units, read_microdata
    from hierarchy.presets.pl94 import LEVELS, PL94_2020

    persons = data_2020.persons.to_pandas()
    moved = persons.index[persons["hhgq"] == 0][5]
    persons.loc[moved, "hhgq"] = 7         # a household member moved into a facility type
    data = read_microdata(pa.Table.from_pandas(persons, preserve_index=False),
                          schema=PL94_2020, levels=LEVELS, units=data_2020.units,
                          check_units=False)
    messages = []
    for make in (tabulate, tabulate_leaf):
        truth = make(data.persons, schema=PL94_2020, levels=LEVELS, units=data.units)
        with pytest.raises(HierarchyError, match="no unit of their hhgq type") as info:
            check_tabulated_units(truth, data)
        messages.append(str(info.value))
    assert messages[0] == messages[1]
    assert f"row {moved}" in messages[0]


def test_leaf_counts_reject_a_shape_or_units_that_do_not_fit():
    import scipy.sparse as sp

    s = Schema((Attribute("sex", ("male", "female")),))
    geo, _ = Geography.from_columns(["nation", "state"], [[["A", "B"]]])
    with pytest.raises(HierarchyError, match=r"shape \(3, 2\), expected \(2, 2\)"):
        LeafCounts(s, geo, sp.csr_matrix(np.ones((3, 2), np.int64)))
    with pytest.raises(HierarchyError, match="without the attribute"):
        LeafCounts(s, geo, sp.csr_matrix(np.ones((2, 2), np.int64)), np.ones((2, 2), np.int64))
    with pytest.raises(HierarchyError, match="no units table"):
        LeafCounts(s, geo, sp.csr_matrix(np.ones((2, 2), np.int64))).level_units("nation")
