"""The P.L. 94-171 tables' variables as functionals of the PL 94 histogram: each table's
lines add up as the published tables do, and each detailed line is one race combination."""

from __future__ import annotations

import numpy as np
import pytest

from hierarchy.presets.pl94 import PL94_2020
from postproc.apps.nmf.pl_tables import is_variable, variable_label, variable_matrix
from postproc.errors import PostprocError

DETAILED = [*range(3, 9), *range(11, 26), *range(27, 47), *range(48, 63), *range(64, 70), 71]
HEADERS = {2: range(3, 9), 10: range(11, 26), 26: range(27, 47), 47: range(48, 63),
           63: range(64, 70), 70: [71]}


def _rows(table: str, lines) -> np.ndarray:
    return variable_matrix([f"{table}_{k:03d}N" for k in lines]).toarray()


@pytest.mark.parametrize("table", ["P1", "P3"])
def test_race_lines_partition_their_total_and_headers_sum_their_lines(table):
    detailed = _rows(table, DETAILED)
    total = _rows(table, [1])[0]
    assert len(DETAILED) == 63
    np.testing.assert_array_equal(detailed.sum(axis=0), total)        # a partition
    assert (detailed.max(axis=0) <= 1).all()
    for header, lines in HEADERS.items():
        np.testing.assert_array_equal(_rows(table, [header])[0],
                                      _rows(table, lines).sum(axis=0))
    np.testing.assert_array_equal(_rows(table, [9])[0], total - _rows(table, [2])[0])
    # each detailed line is one cenrace value, in the recode's order
    shape = PL94_2020.shape
    races = [int(np.unique(np.nonzero(row.reshape(shape))[3])[0]) for row in detailed]
    assert races == list(range(63))
    by_age = total.reshape(shape)
    assert by_age[:, 1].all() and by_age[:, 0].all() == (table == "P1")     # P3: 18 and over


@pytest.mark.parametrize("table,race_table", [("P2", "P1"), ("P4", "P3")])
def test_hispanic_tables_split_by_origin_and_mirror_the_race_lines(table, race_table):
    shape = PL94_2020.shape
    total, hispanic, not_hispanic = _rows(table, [1, 2, 3])
    np.testing.assert_array_equal(hispanic + not_hispanic, total)
    np.testing.assert_array_equal(total, _rows(race_table, [1])[0])
    assert hispanic.reshape(shape)[:, :, 1].any() and not hispanic.reshape(shape)[:, :, 0].any()
    mask = np.zeros(shape)
    mask[:, :, 0] = 1
    for k in range(4, 74):
        np.testing.assert_array_equal(_rows(table, [k])[0],
                                      _rows(race_table, [k - 2])[0] * mask.ravel())


def test_group_quarters_lines_add_up_by_type():
    shape = PL94_2020.shape
    rows = _rows("P5", range(1, 11))
    np.testing.assert_array_equal(rows[0], rows[1] + rows[6])
    np.testing.assert_array_equal(rows[1], rows[2:6].sum(axis=0))
    np.testing.assert_array_equal(rows[6], rows[7:10].sum(axis=0))
    types = [int(np.unique(np.nonzero(r.reshape(shape))[0])[0])
             for r in rows[[2, 3, 4, 5, 7, 8, 9]]]
    assert types == list(range(1, 8))           # hhgq 0 is the households


@pytest.mark.parametrize("line,races", [
    (3, "white"), (8, "sor"), (11, "white-black"), (16, "black-aian"), (25, "nhopi-sor"),
    (27, "white-black-aian"), (46, "asian-nhopi-sor"), (48, "white-black-aian-asian"),
    (62, "aian-asian-nhopi-sor"), (64, "white-black-aian-asian-nhopi"),
    (69, "black-aian-asian-nhopi-sor"), (71, "white-black-aian-asian-nhopi-sor")])
def test_detailed_lines_name_the_published_tables_combinations(line, races):
    """The published P1's lines, as the Census Bureau's table shell lists them (P1_011N White;
    Black or African American … P1_016N Black; American Indian and Alaska Native … P1_069N
    Black; AIAN; Asian; NHPI; Some Other Race; P1_071N all six)."""
    assert variable_label(f"P1_{line:03d}N") == f"P1_{line:03d}N: races {races}"


def test_names_outside_the_tables_are_refused():
    assert is_variable("total") and is_variable("P2_073N") and not is_variable("P2_074N")
    for name in ("P5_011N", "H1_001N", "P1_1N", "tot"):
        assert not is_variable(name)
        with pytest.raises(PostprocError, match="is not a variable of the P.L. 94-171"):
            variable_matrix([name])
    assert variable_label("P2_005N") == "P2_005N: Not Hispanic or Latino, races white"
