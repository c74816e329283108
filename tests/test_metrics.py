"""Error metrics against values computed by hand on tiny arrays; homogeneity index and bias on
hand-made tables; input checking."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from postproc.errors import PostprocError
from postproc.evaluation.metrics import (
    METRICS,
    bias_by_homogeneity,
    error_metrics,
    error_table,
    homogeneity_index,
)

VA, HISP, RACE = 2, 2, 6


def va_hisp_race(*groups):
    """A 24-cell va_hisp_race table with ``count`` persons in each ``(va, hisp, race, count)``."""
    table = np.zeros((VA, HISP, RACE))
    for va, hisp, race, count in groups:
        table[va, hisp, race] = count
    return table.ravel()


def test_metrics_by_hand():
    # errors 3, -1, 0, 0, -6 ; |e| sorted 0 0 1 3 6 ; exact sorted 0 2 4 7 10
    m = error_metrics([13, 1, 4, 0, 1], [10, 2, 4, 0, 7])
    assert m == {
        "n": 5,
        "mae": 1.0,                                    # median of 0 0 1 3 6
        "mean_abs": 2.0,                               # 10 / 5
        "mse": 9.2,                                    # (9 + 1 + 0 + 0 + 36) / 5
        "rmse": pytest.approx(math.sqrt(9.2)),
        "p95_abs": pytest.approx(3 + 0.8 * 3),         # rank 0.95·4 = 3.8: 3 + 0.8·(6 − 3)
        "max_abs": 6.0,
        "exact_median": 4.0,
        "exact_p95": pytest.approx(7 + 0.8 * 3),       # 0 2 4 7 10 at rank 3.8
    }


def test_mae_is_the_median_not_the_mean():
    m = error_metrics([0, 0, 100], [0, 0, 0])
    assert m["mae"] == 0.0 and m["mean_abs"] == pytest.approx(100 / 3)


def test_metrics_pool_every_cell_of_a_2d_table():
    dp = np.array([[1, 2], [3, 4]])
    exact = np.array([[1, 1], [1, 1]])
    assert error_metrics(dp, exact) == error_metrics(dp.ravel(), exact.ravel())
    assert error_metrics(dp, exact)["mean_abs"] == pytest.approx((0 + 1 + 2 + 3) / 4)


def test_metrics_of_nothing():
    m = error_metrics([], [])
    assert m["n"] == 0 and all(math.isnan(m[k]) for k in METRICS[1:])


@pytest.mark.parametrize("dp, exact, fragment", [
    ([1, 2], [1, 2, 3], "shape (2,) but exact counts (3,)"),
    ([1, np.nan], [1, 2], "entry (1,) is nan"),
    (["a"], [1], "must be numbers"),
])
def test_metrics_reject_bad_counts(dp, exact, fragment):
    with pytest.raises(PostprocError) as info:
        error_metrics(dp, exact)
    assert fragment in str(info.value)


def test_error_table_is_tidy():
    table = error_table([
        ("state", "total", [100, 98], [99, 99]),
        ("county", "total", [13, 1, 4, 0, 1], [10, 2, 4, 0, 7]),
        ("county", "va_hisp_race", np.ones((2, 24)), np.zeros((2, 24))),
    ])
    assert list(table.columns) == ["level", "query", *METRICS]
    assert list(zip(table["level"], table["query"])) == [
        ("state", "total"), ("county", "total"), ("county", "va_hisp_race")]
    assert table["n"].tolist() == [2, 5, 48]
    assert table["mae"].tolist() == [1.0, 1.0, 1.0]
    assert table.loc[1, "mse"] == 9.2
    assert pd.api.types.is_integer_dtype(table["n"])


def test_error_table_from_a_mapping_and_other_groupings():
    table = error_table({("county", "total", 0.5): ([1, 2], [1, 1]),
                         ("county", "total", 1.0): ([3, 3], [1, 1])},
                        by=("level", "query", "epsilon"))
    assert table["epsilon"].tolist() == [0.5, 1.0]
    assert table["mean_abs"].tolist() == [0.5, 2.0]
    single = error_table({"ed": ([1], [0])}, by="level")
    assert single.loc[0, "level"] == "ed" and single.loc[0, "max_abs"] == 1.0


def test_error_table_names_the_bad_record():
    with pytest.raises(PostprocError, match="level='county', query='total'"):
        error_table([("county", "total", [1, 2], [1])])
    with pytest.raises(PostprocError, match="record 0 has 3 items"):
        error_table([("county", [1], [1])])
    with pytest.raises(PostprocError, match="appear twice"):
        error_table([("ed", "total", [1], [1]), ("ed", "total", [2], [2])])


@pytest.mark.parametrize("definition", ["authors", "zero_cells"])
def test_homogeneity_index_where_the_definitions_agree(definition):
    tables = np.zeros((4, 24))
    tables[0] = 1                          # no zero cell
    tables[1, :5] = 3                      # 19 zeros: races 0-4 of one age × ethnicity (1·1·5)
    tables[2, 7] = 250                     # 23 zeros: one cell holds everyone
    index = homogeneity_index(tables, definition=definition)  # unit 3: empty, 24 zeros
    assert index.tolist() == [0, 19, 23, 24] and index.dtype == np.int64
    with pytest.raises(PostprocError, match="2-D"):
        homogeneity_index(np.zeros(24), definition=definition)


def test_homogeneity_index_authors_counts_levels_not_combinations():
    """Petti & Flaxman's code: 24 − nunique(age) · nunique(race) · nunique(eth) of the unit's
    persons. It equals the number of zero cells only when the populated cells are a full
    cross-product of the levels present."""
    tables = np.stack([
        va_hisp_race((1, 0, 0, 40), (0, 1, 1, 7)),            # 2 cells; 2·2·2 levels
        va_hisp_race((1, 0, 0, 30), (1, 1, 0, 5)),            # 2 cells = 1·2·1: a cross-product
        va_hisp_race((1, 0, 0, 9), (0, 0, 1, 1), (1, 1, 5, 2)),  # 3 cells; 2·2·3 levels
        va_hisp_race(*[(va, h, r, 1) for va in (0, 1) for h in (0, 1) for r in (0, 2)]),
        va_hisp_race(*[(va, 0, r, 1) for va in (0, 1) for r in range(6)],
                     (1, 1, 3, 4)),                          # 13 cells; all 24 level combos
    ])
    authors = homogeneity_index(tables)                        # the default
    zero_cells = homogeneity_index(tables, definition="zero_cells")
    assert authors.tolist() == [16, 22, 12, 16, 0]
    assert zero_cells.tolist() == [22, 22, 21, 16, 11]
    assert (authors <= zero_cells).all()


def test_homogeneity_index_authors_by_brute_force():
    """Against a direct transcription of the authors' count_empty_cells on person records."""
    rng = np.random.default_rng(7)
    tables = rng.poisson(0.4, (300, 24)) * rng.integers(0, 2, (300, 24))
    expected = []
    for table in tables:
        va, hisp, race = np.nonzero(table.reshape(VA, HISP, RACE))
        levels = len(set(va)) * len(set(hisp)) * len(set(race))
        expected.append(24 - levels)
    assert homogeneity_index(tables).tolist() == expected
    assert homogeneity_index(tables, shape=(4, 6)).shape == (300,)


@pytest.mark.parametrize("options, fragment", [
    ({"definition": "diversity"}, "unknown homogeneity definition 'diversity'"),
    ({"shape": (2, 6)}, "24 cells but shape (2, 6) has 12"),
])
def test_homogeneity_index_rejects_bad_options(options, fragment):
    with pytest.raises(PostprocError) as info:
        homogeneity_index(np.ones((2, 24)), **options)
    assert fragment in str(info.value)


def test_bias_by_homogeneity_by_hand():
    dp = [10, 12, 7, 30, 31, 0]
    exact = [11, 9, 7, 28, 28, 0]              # errors -1, 3, 0, 2, 3, 0
    index = [0, 0, 5, 2, 2, 5]
    table = bias_by_homogeneity(dp, exact, index)
    assert table["homogeneity_index"].tolist() == [0, 2, 5]
    assert table["n"].tolist() == [2, 2, 2]
    assert table["bias"].tolist() == [1.0, 2.5, 0.0]
    # se = sample sd / sqrt(n): group 0 sd = sqrt(8), group 2 sd = sqrt(0.5), group 5 sd = 0
    np.testing.assert_allclose(table["se"], [2.0, 0.5, 0.0])


def test_bias_of_a_single_unit_has_no_standard_error():
    table = bias_by_homogeneity([5, 1, 2], [4, 1, 1], [3, 7, 7])
    assert table["bias"].tolist() == [1.0, 0.5]
    assert math.isnan(table.loc[0, "se"]) and table.loc[1, "se"] == pytest.approx(0.5)


def test_bias_from_tables_end_to_end():
    exact_tables = np.array([[0, 2, 0, 1], [1, 1, 1, 1], [0, 0, 0, 5], [3, 0, 0, 1]])
    dp_total = exact_tables.sum(axis=1) + np.array([1, -1, 2, 0])
    table = bias_by_homogeneity(dp_total, exact_tables.sum(axis=1),
                                homogeneity_index(exact_tables, definition="zero_cells"))
    assert table.to_dict("list") == {"homogeneity_index": [0, 2, 3], "n": [1, 2, 1],
                                     "bias": [-1.0, 0.5, 2.0],
                                     "se": [pytest.approx(np.nan, nan_ok=True), 0.5,
                                            pytest.approx(np.nan, nan_ok=True)]}


@pytest.mark.parametrize("index, fragment", [([0, 1], "2 homogeneity indices for 3 units"),
                                             ([0, -1, 2], "non-negative integers"),
                                             ([0, 1.5, 2], "non-negative integers")])
def test_bias_rejects_bad_indices(index, fragment):
    with pytest.raises(PostprocError, match=fragment):
        bias_by_homogeneity([1, 2, 3], [1, 2, 3], index)
