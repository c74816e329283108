"""The synthetic 2020-style generator (:mod:`hierarchy.synth.census2020`).

Statistical checks use fixed seeds, so they are deterministic. Each tolerance is stated next to
its check with the spread seen over seeds 0-5 at the same size (1M persons); the bounds are at
least three times that spread from the target, so a fresh seed fails with a probability well
under 1 %.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hierarchy.errors import HierarchyError
from hierarchy.geography import Geography
from hierarchy.measurement import published_statistics
from hierarchy.presets.pl94 import LEVELS, PL94_2020, pl94_spec_dict
from hierarchy.synth.census2020 import (
    STATES,
    Synthetic2020,
    apportion_states_2020,
    cenrace_distribution,
    synthesize_2020,
)
from hierarchy.tabulation import tabulate
from invariants.catalogue import statistics_to_publish
from invariants.compile import compile_spec, data_violations
from invariants.spec import Spec

SEED = 2020
LARGE = 1_000_000
SMALL = 60_000


@pytest.fixture(scope="module")
def large() -> Synthetic2020:
    return synthesize_2020(LARGE, seed=SEED)


@pytest.fixture(scope="module")
def small() -> Synthetic2020:
    return synthesize_2020(SMALL, seed=SEED)


@pytest.fixture(scope="module")
def truth(small):
    """The small data tabulated with the PL94 schema and the 6 levels, every block included."""
    geography, _ = Geography.from_columns(LEVELS, small.geography_columns())
    return tabulate(small.persons, schema=PL94_2020, levels=LEVELS, units=small.units,
                    geography=geography)


def indices(table: pa.Table, name: str) -> np.ndarray:
    column = table.column(name).unify_dictionaries()
    return np.concatenate([c.indices.to_numpy() for c in column.chunks])


def ints(table: pa.Table, name: str) -> np.ndarray:
    return table.column(name).to_numpy().astype(np.int64)


def plain(table: pa.Table) -> pa.Table:
    """Geocodes as plain strings in one chunk (to compare tables whose dictionaries differ)."""
    return pa.table({n: table.column(n).cast(pa.string()) if i < 5 else table.column(n)
                     for i, n in enumerate(table.column_names)}).combine_chunks()


# -- tabulation and the spec ------------------------------------------------------------------
def test_tabulates_with_the_pl94_schema_and_six_levels(small, truth):
    assert truth.geography.levels == LEVELS
    assert truth.geography.n_units("block") == small.blocks.num_rows
    blocks = truth.level_counts("block")
    assert blocks.shape == (small.blocks.num_rows, 2016)
    assert int(blocks.sum()) == SMALL == int(truth.level_counts("nation").sum())
    assert truth.geography.n_units("state") == 51
    empty = blocks.sum(axis=1) == 0
    assert 0.2 < empty.mean() < 0.45                      # many empty blocks (seeds: 0.29-0.31)


def test_truth_satisfies_the_pl94_spec(truth):
    spec = Spec.from_dict(pl94_spec_dict())
    stats = published_statistics(truth, statistics_to_publish(spec, LEVELS))
    compiled = compile_spec(spec, PL94_2020, truth.geography, stats)
    for level in LEVELS:
        assert data_violations(compiled[level], truth.level_counts(level)) == [], level
    nursing_minors = truth.level_counts("block").reshape(-1, 8, 2, 2, 63)[:, 3, 0]
    assert nursing_minors.sum() == 0 and truth.level_counts("block")[:, :252].sum() > 0


def test_units_are_consistent_with_persons(small, truth):
    persons_by_type = truth.level_counts("block").reshape(-1, 8, 252).sum(axis=2)
    units_by_type = truth.units[-1]
    # every person of a type has a unit of that type in the block; every unit holds someone
    assert np.all((persons_by_type > 0) <= (units_by_type > 0))
    assert np.all(persons_by_type >= units_by_type)
    # households only where there are housing units (occupied ones, and some vacant)
    assert np.all(ints(small.blocks, "housing_units") >= units_by_type[:, 0])
    assert ints(small.blocks, "housing_units").sum() > units_by_type[:, 0].sum()


# -- determinism and streaming ------------------------------------------------------------------
def test_same_seed_same_tables_other_seed_other_tables():
    a, b = synthesize_2020(5_000, seed=4), synthesize_2020(5_000, seed=4)
    c = synthesize_2020(5_000, seed=5)
    for name in ("persons", "units", "blocks"):
        assert getattr(a, name).equals(getattr(b, name))
    assert not plain(a.persons).equals(plain(c.persons))


def test_streaming_equals_in_memory(tmp_path):
    memory = synthesize_2020(30_000, seed=9, puerto_rico=True)
    manifest = synthesize_2020(30_000, seed=9, puerto_rico=True, out=tmp_path / "d",
                               chunk=1_000)
    for name in ("persons", "units", "blocks"):
        streamed = pq.read_table(manifest["files"][name])
        assert plain(streamed).equals(plain(getattr(memory, name))), name
    written = json.loads((tmp_path / "d" / "manifest.json").read_text())
    assert written["persons"] == 30_000 and written["states"] == 52
    assert written["blocks"] == memory.blocks.num_rows
    assert written["households"] + written["gq_facilities"] == memory.units.num_rows
    # one state per row group: the writer never holds more than one state's rows
    metadata = pq.ParquetFile(manifest["files"]["persons"]).metadata
    assert metadata.num_row_groups >= 52
    for g in range(metadata.num_row_groups):
        column = metadata.row_group(g).column(0).statistics
        assert column.min == column.max


def test_output_directory_is_never_taken_from_a_user(tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "persons.parquet").write_text("a user's file")
    with pytest.raises(HierarchyError, match="not written by this toolkit"):
        synthesize_2020(1_000, seed=1, out=mine)
    assert (mine / "persons.parquet").read_text() == "a user's file"
    out = tmp_path / "data"
    synthesize_2020(1_000, seed=1, out=out)
    with pytest.raises(HierarchyError, match="overwrite"):
        synthesize_2020(1_000, seed=1, out=out)
    assert synthesize_2020(2_000, seed=1, out=out, overwrite=True)["persons"] == 2_000


def test_cli_writes_the_files(tmp_path, capsys):
    from postproc.cli import main

    code = main(["synth2020", "--persons", "3000", "--out", str(tmp_path / "d"), "--seed", "1",
                 "--states", "DC", "WY", "--no-progress"])
    assert code == 0 and "3,000 persons" in capsys.readouterr().out
    persons = pq.read_table(tmp_path / "d" / "persons.parquet")
    assert sorted(persons.column("state").unique().to_pylist()) == ["11", "56"]
    assert main(["synth2020", "--persons", "1", "--out", str(tmp_path / "e"),
                 "--no-progress"]) == 1


def test_arguments_are_checked():
    with pytest.raises(HierarchyError, match="at least one per state"):
        synthesize_2020(50, seed=1)
    with pytest.raises(HierarchyError, match="unknown state 'ZZ'"):
        synthesize_2020(100, seed=1, states=["CA", "ZZ"])
    with pytest.raises(HierarchyError, match="seed must be"):
        synthesize_2020(100, seed=-1)
    with pytest.raises(HierarchyError, match="at most"):
        synthesize_2020(10**9, seed=1)


# -- realism ------------------------------------------------------------------------------------
def test_states_get_their_2020_shares():
    shares = apportion_states_2020(331_449_281)
    assert shares == {row[0]: row[2] for row in STATES[:-1]}        # the 2020 census counts
    assert sum(apportion_states_2020(1_000, puerto_rico=True).values()) == 1_000


def test_race_and_ethnicity_frequencies(large):
    cenrace = ints(large.persons, "cenrace")
    share = np.bincount(cenrace, minlength=63) / LARGE
    two_or_more = share[6:].sum()
    # 2020 census: White alone 61.6 %, Black 12.4 %, Asian 6.0 %, two or more 10.2 %
    assert abs(share[0] - 0.617) < 0.012                 # seeds 0-5: 0.615-0.621
    assert abs(share[1] - 0.125) < 0.006                 # 0.124-0.127
    assert abs(share[3] - 0.060) < 0.005                 # 0.059-0.062
    assert abs(two_or_more - 0.099) < 0.008              # 0.097-0.101
    assert share[6:21].sum() / two_or_more > 0.9         # most are two-race: 0.938-0.940
    assert np.all(share > 0)                             # every combination (min 5-9)
    hispanic = ints(large.persons, "hispanic")
    assert abs(hispanic.mean() - 0.187) < 0.01           # 2020: 18.7 %; seeds 0.185-0.191
    # Hispanic persons are mostly Some Other Race or two or more races
    assert np.isin(cenrace[hispanic == 1], [5, 10]).mean() > 0.5


def test_places_differ(large):
    state = indices(large.persons, "state")
    fips = np.asarray(large.persons.column("state").unify_dictionaries().chunk(0)
                      .dictionary.to_pylist())
    cenrace, hispanic = ints(large.persons, "cenrace"), ints(large.persons, "hispanic")
    in_state = {f: state == i for i, f in enumerate(fips)}
    assert hispanic[in_state["35"]].mean() > 0.4 > 0.05 > hispanic[in_state["54"]].mean()
    assert (cenrace[in_state["15"]] == 3).mean() > 0.25   # Hawaii: Asian alone 37 %
    # tracts are segregated: dissimilarity of Black and other persons over tracts
    tract = indices(large.persons, "tract")
    black = np.bincount(tract, weights=cenrace == 1)
    others = np.bincount(tract) - black
    dissimilarity = 0.5 * np.abs(black / black.sum() - others / others.sum()).sum()
    assert dissimilarity > 0.35                          # seeds 0-5: 0.44-0.47
    # so does the share under 18
    minors = np.bincount(tract, weights=ints(large.persons, "votingage") == 0)
    assert np.std(minors / np.bincount(tract)) > 0.02


def test_age_group_quarters_and_geography(large):
    votingage, hhgq = ints(large.persons, "votingage"), ints(large.persons, "hhgq")
    assert abs((votingage == 0).mean() - 0.221) < 0.012  # 2020: 22.1 %; seeds 0.219-0.224
    assert abs((hhgq > 0).mean() - 0.025) < 0.01         # 2020: 2.5 %; seeds 0.021-0.029
    assert not np.any((hhgq == 3) & (votingage == 0))    # nurse_nva_0
    assert (votingage[hhgq == 0] == 0).mean() > (votingage[hhgq > 0] == 0).mean()
    units = ints(large.units, "hhgq")
    households = (units == 0).sum()
    assert 2.3 < (hhgq == 0).sum() / households < 2.6    # 2020: 2.5 persons per household
    blocks = large.blocks.num_rows
    assert 36 < LARGE / blocks < 46                      # ≈ 40.8; seeds 40.5-43.4
    tracts = len(large.blocks.column("tract").unique())
    assert 3_500 < LARGE / tracts < 4_600                # ≈ 4,000; seeds 4,049-4,115
    sizes = np.bincount(indices(large.persons, "block"))
    sizes = sizes[sizes > 0]
    assert np.percentile(sizes, 99) > 8 * np.median(sizes)   # heavy-tailed block sizes


def test_cenrace_distributions_sum_to_one():
    for fips in ("06", "15", "72"):
        for hispanic in (False, True):
            p = cenrace_distribution(fips, hispanic)
            assert p.shape == (63,) and abs(p.sum() - 1) < 1e-12 and np.all(p >= 0)
    assert cenrace_distribution("06", False)[:5].sum() == 0   # singles are groups of their own
