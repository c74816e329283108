"""Release safety of ``postproc mis``: chains too short to leave their start, tables without their
zero rows, oversized tables and chains, and floating-point (Laplace) noise in release mode.

Each test failed before the fix it guards: ``--draws 1 --burn-in 0`` released a table equal to
the confidential one in most cells; a table without its zero rows was released with exactly its
rows (publishing which cells are zero); ``--mechanism laplace`` without ``--seed`` released
floating-point noise.
"""

from __future__ import annotations

import itertools
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hierarchy.schema import Attribute, Schema
from postproc.cli import main
from postproc.errors import PostprocError
from postproc.methods.sampling import (
    CountTable,
    conditional_target,
    read_count_table,
    release_table,
    sample_lattice,
    sample_mis,
)
from postproc.methods.sampling.table import complete_table
from postproc.methods.sampling.target import MIN_STEPS

GONG = Path(__file__).resolve().parents[1] / "examples" / "data" / "gong_sex_age.csv"
GONG_ARGS = ["--invariant", "total", "--invariant", "marginal(sex)", "--invariant",
             "marginal(voting_age)", "--epsilon", "0.5", "--derived", "voting_age=age_group"]
LAPLACE_FIX = "use --mechanism geometric or discrete_gaussian, or --seed for a simulation"


@pytest.fixture
def gong(tmp_path):
    """Gong & Meng's 46-cell table (sex × age_group; voting_age derived), copied to tmp_path."""
    path = tmp_path / "gong.csv"
    shutil.copy(GONG, path)
    return path


@pytest.fixture
def grouped(tmp_path):
    """A sex × age table as ``groupby().size()`` makes it: the zero cells (f, 3) and (m, 4) have
    no row."""
    people = pd.DataFrame({"sex": list("ffffffmmmmmmmmm"),
                           "age": list("001224001112333")})
    table = people.groupby(["sex", "age"]).size().rename("count").reset_index()
    assert len(table) == 8
    path = tmp_path / "grouped.csv"
    table.to_csv(path, index=False)
    return path


def _cli(capsys, argv):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


# ------------------------------------------------------------------------------------------------
# 1. chains too short to leave their start
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("sampler", ["lattice", "mis"])
def test_cli_refuses_a_chain_too_short_to_leave_its_start(capsys, gong, sampler):
    code, out, err = _cli(capsys, ["mis", "--table", str(gong), *GONG_ARGS, "--sampler", sampler,
                                   "--draws", "1", "--burn-in", "0"])
    assert code == 1 and out == ""
    assert f"shorter than the minimum of {MIN_STEPS}" in err
    assert f"raise burn_in (--burn-in) to at least {MIN_STEPS - 1}" in err


def test_both_samplers_follow_one_rule_in_release_and_simulation_mode():
    t = conditional_target([[1, 1, 1, 1]], [20], centre=[8, 6, 4, 2], epsilon=0.5)
    for sampler, options in ((sample_lattice, {}), (sample_mis, {"proposal_epsilon": 0.6})):
        for rng in (None, 0):                    # release mode, simulation mode (the default)
            with pytest.raises(PostprocError, match=f"minimum of {MIN_STEPS}"):
                sampler(t, draws=40, burn_in=MIN_STEPS - 41, rng=rng, **options)
        # an unset burn-in is raised to meet the minimum
        res = sampler(t, draws=10, rng=1, **options)
        assert res.settings["burn_in"] + res.settings["draws"] == MIN_STEPS
        # a lower minimum is for simulations only
        sampler(t, draws=40, burn_in=0, rng=1, min_steps=40, **options)
        with pytest.raises(PostprocError, match="simulation mode"):
            sampler(t, draws=40, burn_in=0, rng=None, min_steps=40, **options)


def test_release_with_the_minimum_chain_is_far_from_the_confidential_table(gong):
    """Five release-mode releases with ``draws=1`` (burn-in raised to the minimum, 50 sweeps).

    Before the fix this was one sweep from the confidential table: 2–18 of 46 cells differed
    (mean 8.5 over 20 releases).
    Measured over 20,000 chains of this setting: cells differing mean 33.8, sd 3.0, minimum 23
    (stationary mean 33.7). Tolerance: every release differs in ≥ 20 cells (4.6 sd below the
    mean; no chain of 20,000 went below 23) and the mean of the five is ≥ 27 (5 sd below);
    false-failure rate well under 1e-4.
    """
    truth = read_count_table(gong).counts
    differing = []
    for _ in range(5):
        release = release_table(gong, ["total", "marginal(sex)", "marginal(voting_age)"],
                                epsilon=0.5, draws=1, rng=None,
                                derived={"voting_age": "age_group"})
        assert release.result.mode == "release" and release.invariants_hold
        assert release.result.settings["burn_in"] + 1 == MIN_STEPS
        differing.append(int(np.sum(release.released != truth)))
    assert min(differing) >= 20 and np.mean(differing) >= 27, differing


def test_the_lattice_start_is_computed_from_the_published_invariants_only():
    A = [[1, 1, 1, 1], [1, 1, 0, 0]]
    starts = [conditional_target(A, [12, 2], centre=centre, epsilon=0.5).public_start()
              for centre in ([2, 0, 9, 1], [0, 2, 1, 9], [1, 1, 5, 5])]
    assert all(np.array_equal(s, starts[0]) for s in starts)
    assert starts[0].tolist() == [1, 1, 5, 5]


def test_a_lattice_chain_that_never_moves_is_refused():
    # the public start (2, 2) is the centre, and at z = 50 every move has probability e^-50
    t = conditional_target([[1, 1]], [4], centre=[2, 2], epsilon=50.0)
    with pytest.raises(PostprocError, match="never left its start in 55 sweeps"):
        sample_lattice(t, draws=50, rng=0)


def test_a_chain_too_large_for_memory_is_refused_before_it_runs():
    t = conditional_target(np.ones((1, 1000), int), [1000], centre=np.ones(1000, int),
                           epsilon=0.5)
    message = (r"keeping 40,000,000 states of 1,000 cells would need about 3,840 GB .*raise thin "
               r"\(--thin\) to at least 895")
    with pytest.raises(PostprocError, match=message):
        sample_lattice(t, draws=10_000_000, chains=4, rng=0)


# ------------------------------------------------------------------------------------------------
# 2. tables without their zero rows
# ------------------------------------------------------------------------------------------------
def test_a_table_without_its_zero_rows_is_refused(capsys, grouped):
    message = (r"2 of the 10 cells \(sex 2 × age 5 levels\) have no row, e\.g\. sex=f, age=3; "
               r"releasing only the rows given would publish which cells are zero.*--levels")
    with pytest.raises(PostprocError, match=message):
        release_table(grouped, ["total"], epsilon=0.5, draws=100, rng=1)
    code, out, err = _cli(capsys, ["mis", "--table", str(grouped), "--invariant", "total",
                                   "--epsilon", "0.5", "--seed", "1"])
    assert code == 1 and out == "" and re.search(message, err), err


def test_levels_complete_the_table_with_zero_rows_in_a_fixed_order(grouped, tmp_path):
    levels = {"sex": ["m", "f"], "age": ["0", "1", "2", "3", "4"]}
    table = read_count_table(grouped)
    full = complete_table(table, levels=levels)
    product = list(itertools.product(levels["sex"], levels["age"]))
    assert list(full.keys.itertuples(index=False, name=None)) == product
    given = dict(zip(table.keys.itertuples(index=False, name=None), table.counts.tolist()))
    for key, count in zip(product, full.counts.tolist()):
        assert count == given.get(key, 0)
    assert full.counts.tolist() == [2, 3, 1, 3, 0, 2, 1, 2, 0, 1]
    assert full.schema.attribute("sex").labels == ("m", "f")
    # the order does not depend on which rows were missing
    other = tmp_path / "other.csv"
    other.write_text("sex,age,count\nf,4,1\nm,2,5\nf,0,2\n")
    other_full = complete_table(read_count_table(other), levels=levels)
    assert list(other_full.keys[["sex", "age"]].itertuples(index=False, name=None)) == product


def test_the_released_table_has_a_row_for_every_cell(capsys, grouped, tmp_path):
    levels = {"sex": ["f", "m"], "age": ["0", "1", "2", "3", "4"]}
    release = release_table(grouped, ["total", "marginal(sex)"], epsilon=0.5, draws=100,
                            rng=None, levels=levels)
    rows = [(r["sex"], r["age"]) for r in release.rows()]
    assert rows == list(itertools.product(levels["sex"], levels["age"]))
    assert release.invariants_hold and release.released.sum() == 15
    out_csv = tmp_path / "released.csv"
    code, _, err = _cli(capsys, ["mis", "--table", str(grouped), "--invariant", "total",
                                 "--epsilon", "0.5", "--levels", "sex=f,m",
                                 "--levels", "age=0,1,2,3,4", "--draws", "100",
                                 "--out", str(out_csv)])
    assert code == 0, err
    released = pd.read_csv(out_csv, dtype=str)
    assert list(released[["sex", "age"]].itertuples(index=False, name=None)) == rows


@pytest.mark.parametrize("levels, message", [
    ({"sex": ["f", "m"]}, r"give the levels of every key column \(missing: age\)"),
    ({"sex": ["f"], "age": list("01234")}, "a row has sex=m, which is not among the levels"),
    ({"sex": ["f", "m", "f"], "age": list("01234")}, r"the levels of 'sex' repeat \['f'\]"),
    ({"sex": ["f", "m"], "age": list("01234"), "race": ["a"]}, "'race', which is not a key"),
])
def test_bad_levels_are_clear_errors(grouped, levels, message):
    with pytest.raises(PostprocError, match=message):
        complete_table(read_count_table(grouped), levels=levels)


def test_a_duplicated_cell_is_an_error(tmp_path):
    path = tmp_path / "dup.csv"
    path.write_text("sex,age,count\nf,0,1\nm,0,2\nf,0,3\n")
    with pytest.raises(PostprocError, match=r"line 4: the cell .* repeats line 2"):
        read_count_table(path)
    # a table built by hand is checked too
    keys = pd.DataFrame({"sex": ["f", "m", "f"], "age": ["0", "0", "0"]})
    schema = Schema((Attribute("sex", ("f", "m")), Attribute("age", ("0",))))
    hand_made = CountTable(keys, np.array([1, 2, 3]), schema, np.array([0, 1, 0]))
    with pytest.raises(PostprocError, match=r"rows 1 and 3 are the same cell \(sex=f, age=0\)"):
        complete_table(hand_made)


def test_a_derived_column_is_not_part_of_the_cross_product(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("sex,age,adult,count\nf,0,no,3\nf,30,yes,4\nm,30,yes,6\n")
    with pytest.raises(PostprocError, match="5 of the 8 cells"):       # 2 × 2 × 2
        complete_table(read_count_table(path))
    full = complete_table(read_count_table(path), derived={"adult": "age"},
                          levels={"sex": ["f", "m"], "age": ["0", "30"]})
    assert full.keys.values.tolist() == [["f", "0", "no"], ["f", "30", "yes"],
                                         ["m", "0", "no"], ["m", "30", "yes"]]
    assert full.counts.tolist() == [3, 4, 0, 6]
    path.write_text("sex,age,adult,count\nf,0,no,3\nm,0,yes,4\n")
    with pytest.raises(PostprocError, match="'adult' is not a function of 'age'"):
        complete_table(read_count_table(path), derived={"adult": "age"})


def test_a_huge_cross_product_is_refused_before_it_is_built(capsys, grouped):
    labels = ",".join(str(i) for i in range(4000))
    code, _, err = _cli(capsys, ["mis", "--table", str(grouped), "--invariant", "total",
                                 "--epsilon", "0.5", "--seed", "1",
                                 "--levels", f"sex=f,m,{labels}", "--levels", f"age={labels}"])
    assert code == 1 and "Traceback" not in err
    assert re.search(r"has 16,008,000 cells and would need about [\d.]+ GB \(limits: "
                     r"10,000,000 cells", err), err


# ------------------------------------------------------------------------------------------------
# 3. floating-point noise in release mode
# ------------------------------------------------------------------------------------------------
def test_release_mode_refuses_laplace_noise(capsys, gong):
    argv = ["mis", "--table", str(gong), *GONG_ARGS, "--mechanism", "laplace", "--draws", "100"]
    code, out, err = _cli(capsys, argv)
    assert code == 1 and out == "" and LAPLACE_FIX in err
    with pytest.raises(PostprocError, match=re.escape(LAPLACE_FIX)):
        release_table(gong, ["total"], epsilon=0.5, mechanism="laplace", draws=100, rng=None,
                      derived={"voting_age": "age_group"})
    t = conditional_target([[1.0, 1.0]], [4.0], centre=[2.0, 2.0], mechanism="laplace",
                           epsilon=1.0)
    with pytest.raises(PostprocError, match="release mode refuses continuous laplace noise"):
        sample_lattice(t, draws=100, rng=None)
    # a simulation may still study it
    assert _cli(capsys, argv + ["--seed", "1"])[0] == 0


def test_release_mode_shows_no_chain_diagnostics_unless_asked(tmp_path, capsys):
    """The acceptance rate and ESS come from a chain around the confidential table: in release
    mode they (and the input path) are not printed unless --diagnostics asks for them."""
    import json

    from postproc.cli import main

    path = tmp_path / "t.csv"
    path.write_text("sex,adult,count\nf,0,3\nf,1,5\nm,0,2\nm,1,4\n")
    base = ["mis", "--table", str(path), "--invariant", "total", "--epsilon", "0.5",
            "--draws", "60"]
    assert main(base + ["--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert "acceptance_rate" not in out and "ess" not in out and "table" not in out
    assert "confidential_diagnostics" not in out and len(out["released"]) == 4
    assert main(base + ["--json", "--diagnostics"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert 0 <= out["confidential_diagnostics"]["acceptance_rate"] <= 1
    assert main(base) == 0
    text = capsys.readouterr().out
    assert "acceptance rate" not in text and "--diagnostics" in text
    assert main(base + ["--seed", "3"]) == 0          # simulation: shown as before
    assert "acceptance rate" in capsys.readouterr().out
