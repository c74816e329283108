"""The synthetic Noisy Measurement File (issue 38): written in the published layout, read back
here with plain pyarrow (never with the toolkit's reader), and checked against the truth kept
beside it, against the discrete Gaussian law, and cell by cell against an aggregation of
``detailed_dpq`` written independently here (row-major over hhgq × votingage × hispanic ×
cenrace, ``hhinstlevels`` grouped as household / institutional / non-institutional)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from hierarchy.synth.census2020 import synthesize_2020
from postproc.apps.nmf import layout
from postproc.apps.nmf.synthetic import write_synthetic_nmf
from postproc.errors import PostprocError

PERSONS, UNITS = "US_Person_PL_PROD", "US_Unit_PL_PROD"
GEOLEVELS = ("US", "State", "County", "Tract", "Block_Group", "Block")
WIDTHS = {"US": 0, "State": 3, "County": 9, "Tract": 13, "Block_Group": 15, "Block": 31}
HHINSTLEVELS = [[0], [1, 2, 3, 4], [5, 6, 7]]
SEED = 7


# -- fixtures: Rhode Island (no AIAN piece in 2020) and Wyoming (one), 30,000 persons ----------

@pytest.fixture(scope="module")
def made(tmp_path_factory):
    base = tmp_path_factory.mktemp("nmf")
    synthesize_2020(30_000, seed=5, states=["44", "56"], out=base / "data")
    exact = write_synthetic_nmf(base / "data", base / "exact", seed=SEED, noise=False)
    noisy = write_synthetic_nmf(base / "data", base / "noisy", seed=SEED)
    return {"base": base, "data": base / "data", "exact": base / "exact",
            "noisy": base / "noisy", "manifests": (exact, noisy)}


def _files(root: Path, product: str, geolevel: str, dataset: str) -> list[Path]:
    return sorted((root / product / f"{geolevel}.parquet" / dataset).rglob("part-*.parquet"))


def _read(root: Path, product: str, geolevel: str, dataset: str) -> pa.Table:
    """Every part file, lists widened to int64, with its ``State`` partition (a string, or
    null at the US) and file name."""
    tables = []
    for path in _files(root, product, geolevel, dataset):
        t = pq.read_table(path)
        for name in ("value", "query_shape"):
            t = t.set_column(t.schema.get_field_index(name), name,
                             t.column(name).cast(pa.list_(pa.int64())))
        state = path.parent.name.split("=", 1)[1] if path.parent.name.startswith("State=") \
            else None
        t = t.append_column("State", pa.array([state] * t.num_rows, pa.string()))
        tables.append(t.append_column("file", pa.array([str(path)] * t.num_rows)))
    return pa.concat_tables(tables) if tables else None


def _by_query(table: pa.Table) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """query_name → (geocodes, values as a units × cells array, variances), sorted by geocode."""
    out = {}
    if table is None:
        return out
    names = np.asarray(table.column("query_name").to_pylist())
    for name in np.unique(names):
        t = table.filter(pa.array(names == name))
        geocodes = np.asarray(t.column("geocode").to_pylist())
        values = t.column("value").combine_chunks().flatten().to_numpy().reshape(t.num_rows, -1)
        order = np.argsort(geocodes)
        out[str(name)] = (geocodes[order], values[order],
                          t.column("variance").to_numpy()[order])
    return out


def _aggregate(detailed: np.ndarray, axes: list[str], shape: list[int]) -> np.ndarray:
    """The answers of a PL 94 query from detailed histograms, units × 2,016 (independent of the
    toolkit): reshape (8, 2, 2, 63) row-major, group hhinstlevels, sum the axes of size 1."""
    h = detailed.reshape(-1, 8, 2, 2, 63)
    if axes[0] == "hhinstlevels":
        h = np.stack([h[:, g].sum(axis=1) for g in HHINSTLEVELS], axis=1)
    summed = tuple(1 + i for i, n in enumerate(shape) if n == 1)
    return h.sum(axis=summed).reshape(h.shape[0], -1)


def _truth(root: Path) -> dict[str, pa.Table]:
    return {k: pq.read_table(root / "truth" / f"{k}.parquet")
            for k in ("persons", "units", "blocks")}


def _strings(table: pa.Table, column: str) -> np.ndarray:
    return np.asarray(table.column(column).cast(pa.string()).to_pylist())


# -- the layout's facts -------------------------------------------------------------------------

def test_layout_matches_the_toolkits_pl94_queries_and_the_published_lists():
    from hierarchy.presets.pl94 import pl94_budget, pl94_workload

    workload, budget = pl94_workload(), pl94_budget()
    for name, kind in layout.PERSON_QUERIES.items():
        assert kind.query_name == name + "_dpq"
        assert math.prod(kind.shape) == workload[name].n_answers, name
    assert [k.name for k in layout.row_kinds("persons", "US", "DPQuery")] \
        == list(budget.queries("nation"))
    assert [k.name for k in layout.row_kinds("persons", "Block", "DPQuery")] \
        == list(budget.queries("block"))
    published = {"hhinstlevels_dpq": (("hhinstlevels", "*", "*", "*"), (3, 1, 1, 1)),
                 "votingage * hispanic * cenrace_dpq": (("*", "votingage", "hispanic",
                                                         "cenrace"), (1, 2, 2, 63)),
                 "detailed_dpq": (("detailed",) * 4, (8, 2, 2, 63)),
                 "hhgq_total_ub_con": (("hhgq", "*", "*", "*"), (8, 1, 1, 1)),
                 "nurse_nva_0_con": (("gqNursingTotal", "nonvoting", "*", "*"), (1, 1, 1, 1))}
    kinds = {k.query_name: k for k in layout.row_kinds("persons", "Block", "DPQuery")
             + layout.row_kinds("persons", "Block", "Constraint")}
    assert {name: (kinds[name].axes, kinds[name].shape) for name in published} == published
    assert len(layout.STATE_PIECES_2020) == len(set(layout.STATE_PIECES_2020)) == 88
    assert "144" not in layout.STATE_PIECES_2020 and {"118", "147"} <= set(
        layout.STATE_PIECES_2020)             # 2020, not the 2010 demonstration list
    with pytest.raises(PostprocError, match="sign '>' is not one of"):
        layout.RowKind("total_con", ("*",), (1,), ">")
    with pytest.raises(PostprocError, match="ends with '_dpq'"):
        layout.RowKind("total", ("*",), (1,))


# -- the tree -----------------------------------------------------------------------------------

def test_the_tree_has_every_sub_dataset_with_success_and_three_character_partitions(made):
    root = made["noisy"]
    for product in (PERSONS, UNITS):
        for geolevel in GEOLEVELS:
            for dataset in ("DPQuery", "Constraint"):
                directory = root / product / f"{geolevel}.parquet" / dataset
                assert (directory / "_SUCCESS").is_file(), directory
                subdirs = [p for p in directory.iterdir() if p.is_dir()]
                if geolevel == "US":
                    assert not subdirs and _files(root, product, geolevel, dataset)
                else:
                    assert all(p.name.startswith("State=") and len(p.name) == 9
                               for p in subdirs), subdirs
    manifest = json.loads((root / "manifest.json").read_text())
    assert manifest["synthetic"] and "NOT SAFE FOR RELEASE" in manifest["label"]
    assert manifest["randomness"]["mode"] == "simulation" and manifest["seed"] == SEED
    assert "NOT SAFE FOR RELEASE" in json.loads(pq.read_schema(
        _files(root, PERSONS, "Block", "DPQuery")[0]).metadata[b"dapp"])["label"]
    assert (root / "state_totals.csv").read_text().splitlines()[0] == "state,total"


def test_dpquery_files_have_no_sign_and_constraint_files_a_known_sign(made):
    for product in (PERSONS, UNITS):
        for geolevel in GEOLEVELS:
            for path in _files(made["noisy"], product, geolevel, "DPQuery"):
                assert "sign" not in pq.read_schema(path).names, path
            signs = set(_read(made["noisy"], product, geolevel, "Constraint")
                        .column("sign").to_pylist())
            assert signs <= {"=", ">=", "<="} and signs


def test_state_read_as_a_string_keeps_its_leading_zero(made):
    path = made["noisy"] / PERSONS / "County.parquet" / "Constraint"
    as_text = ds.dataset(path, format="parquet", partitioning=ds.partitioning(
        pa.schema([("State", pa.string())]), flavor="hive")).to_table()
    assert set(as_text.column("State").to_pylist()) == {"044", "056", "156"}
    geocodes = as_text.column("geocode").to_pylist()
    assert all(g[:3] == s for g, s in zip(geocodes, as_text.column("State").to_pylist()))
    inferred = ds.dataset(path, format="parquet", partitioning="hive").to_table()
    assert pa.types.is_integer(inferred.schema.field("State").type)   # the trap: 44, 56, 156


def test_every_value_has_the_length_of_its_shape_and_the_published_axes(made):
    rows = 0
    for product, axes in ((PERSONS, ("hhgq", "votingage", "hispanic", "cenrace")),
                          (UNITS, ("h1",))):
        for geolevel in GEOLEVELS:
            for dataset in ("DPQuery", "Constraint"):
                t = _read(made["noisy"], product, geolevel, dataset)
                if t is None:                  # every unit an only child
                    continue
                shapes, values = t.column("query_shape").to_pylist(), t.column("value").to_pylist()
                assert all(len(v) == math.prod(s) and len(s) == len(axes)
                           for v, s in zip(values, shapes))
                kinds = {k.query_name: k for k in layout.row_kinds(
                    "persons" if product == PERSONS else "units", geolevel, dataset)}
                for i, name in enumerate(t.column("query_name").to_pylist()):
                    assert tuple(shapes[i]) == kinds[name].shape
                    assert tuple(t.column(a)[i].as_py() for a in axes) == kinds[name].axes
                assert (np.asarray(t.column("variance")) > 0).all() == (dataset == "DPQuery")
                rows += t.num_rows
    assert rows > 10_000


def test_both_integer_widths_and_several_part_files_in_a_partition(made):
    widths = {"DPQuery": set(), "Constraint": set()}
    parts_per_partition = []
    for product in (PERSONS, UNITS):
        for geolevel in GEOLEVELS:
            for dataset in widths:
                files = _files(made["noisy"], product, geolevel, dataset)
                widths[dataset] |= {str(pq.read_schema(f).field("value").type.value_type)
                                    for f in files}
                parts_per_partition += list(np.unique([f.parent for f in files],
                                                      return_counts=True)[1])
    assert widths == {"DPQuery": {"int32", "int64"}, "Constraint": {"int32", "int64"}}
    assert max(parts_per_partition) >= 2


# -- geography ----------------------------------------------------------------------------------

def test_spine_geocodes_nest_and_end_with_the_tabulation_block(made):
    root = made["exact"]
    codes = {g: np.unique(_read(root, PERSONS, g, "Constraint").column("geocode").to_pylist())
             for g in GEOLEVELS}
    assert codes["US"].tolist() == [""]
    for geolevel in GEOLEVELS[1:]:
        assert {len(c) for c in codes[geolevel]} == {WIDTHS[geolevel]}, geolevel
    for child, parent in zip(GEOLEVELS[2:], GEOLEVELS[1:]):
        assert set(codes[child].astype(f"U{WIDTHS[parent]}")) == set(codes[parent]), \
            child                                   # every child has its parent, and back
    blocks = pq.read_table(made["data"] / "blocks.parquet")
    tabulation = _strings(blocks, "block")
    assert sorted(c[-16:] for c in codes["Block"]) == sorted(tabulation)
    for code in codes["Block"]:
        g16 = code[-16:]
        assert layout.block_geoid(code) == g16[:11] + g16[12:] and g16[11] == g16[12]
        assert layout.county_fips(code[:9]) == g16[:5]
    # spine block groups are not tabulation block groups: some hold two of them
    spine_bg = {}
    for code in codes["Block"]:
        spine_bg.setdefault(code[:15], set()).add(code[-16:-4])
    assert max(len(v) for v in spine_bg.values()) >= 2


def test_the_aian_pieces_are_the_2020_ones_and_the_state_totals_add_up(made):
    root, manifest = made["exact"], made["manifests"][0]
    assert manifest["pieces"] == ["044", "056", "156"]     # RI has no AIAN piece in 2020
    persons = _truth(root)["persons"]
    pieces = _strings(persons, "state")
    totals = dict(line.split(",") for line in
                  (root / "state_totals.csv").read_text().splitlines()[1:])
    assert totals == {"44": str((pieces == "044").sum()),
                      "56": str((pieces == "056").sum() + (pieces == "156").sum())}
    assert (pieces == "156").sum() > 0
    us = _by_query(_read(root, PERSONS, "US", "Constraint"))
    assert persons.num_rows == 30_000 and us["total_con"][1].ravel().tolist() == [30_000]


# -- values -------------------------------------------------------------------------------------

def test_every_marginal_is_the_aggregate_of_its_units_detailed(made):
    checked = 0
    for geolevel in GEOLEVELS:
        table = _read(made["exact"], PERSONS, geolevel, "DPQuery")
        queries = _by_query(table)
        if not queries:
            continue
        geocodes, detailed, _ = queries.pop("detailed_dpq")
        rows = table.select(["query_name", "hhgq", "votingage", "hispanic", "cenrace",
                             "query_shape"]).to_pylist()
        described = {r["query_name"]: ([r[a] for a in ("hhgq", "votingage", "hispanic",
                                                        "cenrace")], r["query_shape"])
                     for r in rows}                      # each row's own axes and shape
        for name, (codes, values, _) in queries.items():
            assert codes.tolist() == geocodes.tolist()
            np.testing.assert_array_equal(values, _aggregate(detailed, *described[name]),
                                          err_msg=name)
            checked += values.size
    assert checked > 100_000


def test_detailed_equals_the_truth_tabulated_on_the_spine_and_children_sum_to_parents(made):
    truth = _truth(made["exact"])
    persons = truth["persons"]
    cell = ((persons.column("hhgq").to_numpy().astype(int) * 2
             + persons.column("votingage").to_numpy()) * 2
            + persons.column("hispanic").to_numpy()) * 63 + persons.column("cenrace").to_numpy()
    column = dict(zip(GEOLEVELS[1:], ("state", "county", "tract", "block_group", "block")))
    compared = 0
    for geolevel in GEOLEVELS:
        geocodes, detailed, _ = _by_query(_read(made["exact"], PERSONS, geolevel, "DPQuery")
                                          ).get("detailed_dpq", ([], None, None))
        if len(geocodes) == 0:
            continue
        unit = (np.zeros(persons.num_rows, int) if geolevel == "US" else
                np.searchsorted(geocodes, _strings(persons, column[geolevel])))
        known = (unit < len(geocodes))
        known[known] &= geocodes[unit[known]] == (
            "" if geolevel == "US" else _strings(persons, column[geolevel])[known])
        counts = np.zeros_like(detailed)
        np.add.at(counts, (unit[known], cell[known]), 1)
        np.testing.assert_array_equal(detailed, counts, err_msg=geolevel)
        compared += len(geocodes)
    assert compared > 300
    # the constraint rows (every unit has them) of children add up to their parent's
    for product, names in ((PERSONS, ("hhgq_total_lb_con", "hhgq_total_ub_con")),
                           (UNITS, ("total_con",))):
        for child, parent in zip(GEOLEVELS[1:], GEOLEVELS):
            kids = _by_query(_read(made["exact"], product, child, "Constraint"))
            up = _by_query(_read(made["exact"], product, parent, "Constraint"))
            for name in names:
                codes, values, _ = kids[name]
                owner = np.searchsorted(up[name][0], [c[:WIDTHS[parent]] for c in codes])
                sums = np.zeros_like(up[name][1])
                np.add.at(sums, owner, values)
                np.testing.assert_array_equal(sums, up[name][1], err_msg=f"{child} {name}")


def test_units_product_holds_vacant_and_occupied_housing_units(made):
    truth = _truth(made["exact"])
    blocks = _by_query(_read(made["exact"], UNITS, "Block", "DPQuery"))["detailed_dpq"]
    housing = dict(zip(_strings(truth["blocks"], "block"),
                       truth["blocks"].column("housing_units").to_numpy()))
    units = truth["units"]
    households = _strings(units, "block")[units.column("hhgq").to_numpy() == 0]
    occupied = dict(zip(*np.unique(households, return_counts=True)))
    expected = [[housing[g] - occupied.get(g, 0), occupied.get(g, 0)] for g in blocks[0]]
    np.testing.assert_array_equal(blocks[1], expected)
    lb = _by_query(_read(made["exact"], PERSONS, "Block", "Constraint"))["hhgq_total_lb_con"]
    assert [row[0] for row in lb[1]] == [occupied.get(g, 0) for g in lb[0]]


def test_noise_is_discrete_gaussian_with_each_rows_variance(made):
    """Residuals (noisy − exact) of every DPQuery cell, against the discrete Gaussian whose
    variance is the row's ``variance`` (its σ² found here by bisection: below σ² ≈ 1 the
    discrete law's variance is less than σ²), per product and geolevel (so that a wrong
    variance of a few units, the parents of only children, is not drowned by the blocks): a
    randomized probability integral transform is uniform exactly under that law
    (Kolmogorov-Smirnov at α = 1e-4), and the mean and mean square of the standardized
    residuals are within 4.5 standard errors of 0 and 1. False-failure rate about 1.5e-3 over
    seeds for the 12 groups; the seed is fixed, so the outcome is too."""
    from scipy import stats

    rng, cells = np.random.default_rng(0), 0
    for product in (PERSONS, UNITS):
        for geolevel in GEOLEVELS:
            exact = _by_query(_read(made["exact"], product, geolevel, "DPQuery"))
            noisy = _by_query(_read(made["noisy"], product, geolevel, "DPQuery"))
            assert exact.keys() == noisy.keys()
            if not exact:
                continue
            residuals, variances = [], []
            for name, (codes, values, variance) in exact.items():
                assert noisy[name][0].tolist() == codes.tolist()
                np.testing.assert_array_equal(noisy[name][2], variance)
                residuals.append((noisy[name][1] - values).ravel())
                variances.append(np.repeat(variance, values.shape[1]))
            k, var = np.concatenate(residuals), np.concatenate(variances)
            u = np.empty(k.size)
            for v in np.unique(var):
                rows = var == v
                s2 = _sigma2_of_variance(v)
                support = np.arange(-int(40 * math.sqrt(s2)) - 2, int(40 * math.sqrt(s2)) + 3)
                cdf = np.cumsum(np.exp(-support ** 2 / (2 * s2)))
                cdf /= cdf[-1]
                i = k[rows] - support[0]
                below = np.where(i > 0, cdf[np.maximum(i - 1, 0)], 0.0)
                u[rows] = below + rng.random(rows.sum()) * (cdf[i] - below)
            where = (product, geolevel, k.size)
            assert stats.kstest(u, "uniform").pvalue > 1e-4, where
            z = k / np.sqrt(var)
            if k.size >= 1000:                 # (the normal approximation of the means)
                assert abs(z.mean()) < 4.5 * z.std() / math.sqrt(z.size), where
                assert abs((z ** 2).mean() - 1) < 4.5 * (z ** 2).std() / math.sqrt(z.size), where
            cells += k.size
    assert cells > 1_000_000


def _sigma2_of_variance(variance: float) -> float:
    """The σ² of the discrete Gaussian with this variance (bisection on σ²)."""
    def var(s2: float) -> float:
        k = np.arange(-int(40 * math.sqrt(s2)) - 2, int(40 * math.sqrt(s2)) + 3)
        w = np.exp(-k ** 2 / (2 * s2))
        return float((k ** 2 * w).sum() / w.sum())

    low, high = variance, max(4 * variance, 4.0)
    for _ in range(100):
        mid = (low + high) / 2
        low, high = (mid, high) if var(mid) < variance else (low, mid)
    return (low + high) / 2


def test_only_children_have_constraint_rows_and_no_dpquery_rows(made):
    root, checked = made["exact"], 0
    for child, parent in zip(GEOLEVELS[1:], GEOLEVELS):
        for product in (PERSONS, UNITS):
            every = np.unique(_read(root, product, child, "Constraint").column("geocode")
                              .to_pylist())
            parents, n = np.unique([c[:WIDTHS[parent]] for c in every], return_counts=True)
            only = {c for c in every if n[np.searchsorted(parents, c[:WIDTHS[parent]])] == 1}
            measured = _read(root, product, child, "DPQuery")
            have = set() if measured is None else set(measured.column("geocode").to_pylist())
            assert have == set(every) - only, (product, child)
            if measured is not None:
                per_unit = np.unique(measured.column("geocode").to_pylist(), return_counts=True)
                assert set(per_unit[1]) == {11 if product == PERSONS else 1}
            checked += len(only)
    assert checked >= 4
    # a parent of an only child spends the child's budget too: a smaller detailed variance
    # than its level's (from the production budget); other units have their level's
    from hierarchy.mechanisms import DiscreteGaussian
    from hierarchy.presets.pl94 import LEVELS, pl94_budget, pl94_workload

    mech, budget, detailed = DiscreteGaussian(), pl94_budget(), pl94_workload()["detailed"]
    smaller = 0
    for child, parent, level in zip(GEOLEVELS[1:], GEOLEVELS, LEVELS):
        measured = _by_query(_read(root, PERSONS, parent, "DPQuery")).get("detailed_dpq")
        if measured is None:
            continue
        nominal = mech.variance(budget.noise_parameter(level, detailed, mech))
        kids = np.unique(_read(root, PERSONS, child, "Constraint").column("geocode")
                         .to_pylist())
        parents, n = np.unique([c[:WIDTHS[parent]] for c in kids], return_counts=True)
        one = dict(zip(parents, n == 1))
        for code, variance in zip(measured[0], measured[2]):
            if one[code]:
                assert variance < 0.99 * nominal, (parent, code)
                smaller += 1
            else:
                assert variance == pytest.approx(nominal, rel=1e-9), (parent, code)
    assert smaller >= 2


# -- the command line, a single piece, and refusing to overwrite ---------------------------------

def test_cli_writes_the_microdata_then_the_nmf_and_a_lone_piece_gives_its_budget_to_the_us(
        tmp_path):
    from hierarchy.mechanisms import DiscreteGaussian
    from hierarchy.presets.pl94 import pl94_budget, pl94_workload
    from postproc.cli import main

    assert main(["synth2020", "--persons", "3000", "--states", "50", "--out",
                 str(tmp_path / "d"), "--nmf", str(tmp_path / "n"), "--nmf-seed", "4",
                 "--no-noise", "--no-progress"]) == 0
    root = tmp_path / "n"
    assert (tmp_path / "d" / "persons.parquet").is_file()
    manifest = json.loads((root / "manifest.json").read_text())
    assert manifest["pieces"] == ["050"] and not manifest["noise"] and manifest["seed"] == 4
    # Vermont alone: its one piece is the US's only child: no State DPQuery rows at all
    assert _read(root, PERSONS, "State", "DPQuery") is None
    assert _read(root, PERSONS, "State", "Constraint").num_rows == 3
    us = _by_query(_read(root, PERSONS, "US", "DPQuery"))
    assert len(us) == 10 and "total_dpq" not in us
    assert us["detailed_dpq"][1].sum() == 3000
    nominal = DiscreteGaussian().variance(pl94_budget().noise_parameter(
        "nation", pl94_workload()["detailed"], DiscreteGaussian()))
    assert us["detailed_dpq"][2][0] < nominal / 10      # the state's budget joined the US's


def test_the_same_seed_gives_the_same_noise_and_another_seed_other_noise(tmp_path):
    synthesize_2020(2_000, seed=1, states=["50"], out=tmp_path / "d")
    tables = []
    for name, seed in (("a", 3), ("b", 3), ("c", 4)):
        write_synthetic_nmf(tmp_path / "d", tmp_path / name, seed=seed)
        tables.append(_read(tmp_path / name, PERSONS, "Block", "DPQuery").drop(["file"]))
    assert tables[0].equals(tables[1]) and not tables[0].equals(tables[2])


def test_refuses_a_directory_it_did_not_write_and_replaces_its_own(made, tmp_path):
    data = made["data"]
    mine = tmp_path / "thesis"
    mine.mkdir()
    (mine / "chapter1.tex").write_text("mine")
    for overwrite in (False, True):
        with pytest.raises(Exception, match="thesis"):
            write_synthetic_nmf(data, mine, seed=1, overwrite=overwrite)
    assert (mine / "chapter1.tex").read_text() == "mine" and len(list(mine.iterdir())) == 1
    other = tmp_path / "run"
    other.mkdir()
    (other / ".dapp-output").write_text(json.dumps({"made_by": "postproc run"}))
    (other / "result.parquet").write_text("x")
    with pytest.raises(PostprocError, match="was not written by postproc synth2020 --nmf"):
        write_synthetic_nmf(data, other, seed=1, overwrite=True)
    with pytest.raises(PostprocError, match="is the microdata directory or holds it"):
        write_synthetic_nmf(data, data.parent, seed=1, overwrite=True)
    ours = made["base"] / "again"
    first = write_synthetic_nmf(data, ours, seed=1, noise=False)
    with pytest.raises(Exception, match="already exists"):
        write_synthetic_nmf(data, ours, seed=1)
    second = write_synthetic_nmf(data, ours, seed=2, overwrite=True)
    assert (first["seed"], second["seed"]) == (1, 2)
    assert json.loads((ours / "manifest.json").read_text())["seed"] == 2


def test_refuses_what_is_not_synth2020_data_and_puerto_rico(tmp_path):
    (tmp_path / "x").mkdir()
    with pytest.raises(PostprocError, match="not a postproc synth2020 directory"):
        write_synthetic_nmf(tmp_path / "x", tmp_path / "n", seed=1)
    synthesize_2020(1_000, seed=1, states=["72"], out=tmp_path / "pr")
    with pytest.raises(PostprocError, match="Puerto Rico"):
        write_synthetic_nmf(tmp_path / "pr", tmp_path / "n", seed=1)
    assert not (tmp_path / "n").exists()
    with pytest.raises(PostprocError, match="seed must be a non-negative integer"):
        write_synthetic_nmf(tmp_path / "pr", tmp_path / "n", seed=-1)


def test_the_truth_loads_on_the_spine_geography(made):
    from postproc.apps.runs.config import read_blocks

    geography = read_blocks(made["exact"] / "truth" / "blocks.parquet",
                            ["nation", "state", "county", "tract", "block_group", "block"])
    for geolevel, level in zip(GEOLEVELS[1:], geography.levels[1:]):
        constraint = _read(made["exact"], PERSONS, geolevel, "Constraint")
        assert sorted(geography.geocodes[geography.levels.index(level)]) \
            == sorted(set(constraint.column("geocode").to_pylist()))
