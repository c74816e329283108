"""The Noisy Measurement File reader (``postproc.apps.nmf.reader``) on synthetic files in the
published layout (``postproc.apps.nmf.synthetic``): what is read is what was written, the
constraints compile to the file's rows, TopDown on exact measurements returns the truth, and
every fault of the input is an error naming its file, partition and row."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hierarchy.synth.census2020 import synthesize_2020
from invariants.checks import violations
from invariants.compile import compile_spec
from postproc import postprocess
from postproc.apps.nmf.layout import PRODUCTS
from postproc.apps.nmf.reader import read_nmf, read_state_totals
from postproc.apps.nmf.summary import inspect_nmf
from postproc.apps.nmf.synthetic import write_synthetic_nmf
from postproc.errors import PostprocError

PERSONS = PRODUCTS["persons"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A synthetic NMF of Rhode Island (one piece) and Arizona (with an AIAN piece), exact and
    noisy, with their truth."""
    root = tmp_path_factory.mktemp("nmf")
    synthesize_2020(40_000, seed=7, states=["44", "04"], out=root / "data", progress=False)
    write_synthetic_nmf(root / "data", root / "exact", seed=3, noise=False)
    write_synthetic_nmf(root / "data", root / "noisy", seed=3, noise=True)
    return root


def _totals(root: Path) -> Path:
    return root / "state_totals.csv"


def _truth(noisy, root: Path) -> list[np.ndarray]:
    """The truth's histograms on the reader's geography (empty blocks included)."""
    table = pq.read_table(root / "truth" / "persons.parquet").to_pandas()
    geo = noisy.geography
    table = table[table["block"].astype(str).str[:3].isin(set(geo.geocodes[1]))]
    blocks = geo.index_of(geo.levels[-1], table["block"].astype(str).to_numpy())
    cells = np.ravel_multi_index(
        tuple(table[a].to_numpy(np.int64) for a in ("hhgq", "votingage", "hispanic", "cenrace")),
        noisy.schema.shape)
    bottom = np.zeros((geo.n_units(geo.depth - 1), noisy.schema.size), np.int64)
    np.add.at(bottom, (blocks, cells), 1)
    return [geo.aggregate(bottom, geo.depth - 1, li) for li in range(geo.depth)]


def _rows(root: Path, level: str, dataset: str) -> dict[tuple[str, str], tuple[list, float]]:
    """Every row of a geolevel's dataset read with plain pyarrow: (geocode, query) → (value,
    variance)."""
    out = {}
    for f in sorted((root / PERSONS / f"{level}.parquet" / dataset).rglob("part-*.parquet")):
        t = pq.read_table(f).to_pylist()
        for r in t:
            out[(r["geocode"], r["query_name"])] = (r["value"], r.get("variance"))
    return out


def test_what_is_read_is_what_was_written(files):
    noisy, _ = read_nmf(files / "noisy", states=["04"], state_totals=_totals(files / "noisy"))
    geo = noisy.geography
    widths = set()
    for f in (files / "noisy" / PERSONS).rglob("part-*.parquet"):
        widths.add(str(pq.read_schema(f).field("value").type.value_type))
    assert widths == {"int32", "int64"}              # the files mix widths; both read
    for li, level in enumerate(("State", "County", "Tract", "Block_Group", "Block"), start=1):
        rows = _rows(files / "noisy", level, "DPQuery")
        codes = geo.geocodes[li]
        lv = geo.levels[li]
        checked = 0
        for (code, qname), (value, variance) in rows.items():
            if not code.startswith(("004", "104")):
                continue
            name = qname[:-len("_dpq")]
            u = int(np.flatnonzero(codes == code)[0])
            m = noisy.measurements[lv][name]
            assert m.values[u].tolist() == value
            assert np.all(m.variances[u] == variance)
            checked += 1
        assert checked or level == "County"


def test_exact_measurements_give_back_the_truth_through_topdown(files):
    root = files / "exact"
    noisy, spec = read_nmf(root, states=["44"], state_totals=_totals(root))
    truth = _truth(noisy, root)
    for lv in noisy.levels:
        for name, m in noisy.measurements.get(lv, {}).items():
            li = noisy.levels.index(lv)
            want = noisy.workload[name].answer(truth[li])
            has = np.ones(m.values.shape[0], bool) if m.drawn is None else m.drawn[:, 0]
            assert np.array_equal(np.asarray(want)[has], m.values[has]), (lv, name)
    result = postprocess(noisy, "topdown", spec)
    for li, lv in enumerate(noisy.levels):
        assert np.array_equal(result.histograms[li], truth[li]), lv
    blue = postprocess(noisy, "gls", spec)     # the levels of only children measured by nothing
    for li, lv in enumerate(noisy.levels):
        np.testing.assert_allclose(blue.histograms[li], truth[li], rtol=0, atol=1e-6)


def test_constraints_compile_to_the_files_rows_and_hold_in_the_output(files):
    root = files / "noisy"
    noisy, spec = read_nmf(root, states=["44"], state_totals=_totals(root))
    compiled = compile_spec(spec, noisy.schema, noisy.geography, noisy.invariants)
    rows = _rows(root, "Block", "Constraint")
    codes = noisy.geography.geocodes[-1]
    lb = compiled["block"]
    labels = list(lb.labels)
    first = labels.index(next(lab for lab in labels if lab.endswith(": Household")))
    for u in range(0, codes.size, max(1, codes.size // 50)):
        value, _ = rows[(codes[u], "hhgq_total_lb_con")]
        upper, _ = rows[(codes[u], "hhgq_total_ub_con")]
        assert lb.lower[u, first:first + 8].tolist() == [float(v) for v in value]
        assert lb.upper[u, first:first + 8].tolist() == [float(v) for v in upper]
    result = postprocess(noisy, "topdown", spec)
    for li, lv in enumerate(noisy.levels):
        assert not violations(compiled[lv], result.histograms[li]), lv
    assert int(result.histograms[0].sum()) == read_state_totals(_totals(root))["44"]


def test_inspect_counts_units_only_children_and_files(files):
    frame = inspect_nmf(files / "noisy")
    noisy, _ = read_nmf(files / "noisy", states=["44"], state_totals=_totals(files / "noisy"))
    assert frame.attrs["pieces"] == ["004", "044", "104"]
    blocks = frame[(frame.geolevel == "Block") & (frame.name == "detailed")]
    assert int(blocks["units"].iloc[0]) == frame.attrs["units"]["Block"]
    only = frame.attrs["only_children"]
    assert only["County"] == frame.attrs["units"]["County"]     # one county per piece here
    assert (frame[frame.dataset == "DPQuery"]["min_variance"].dropna() > 0).all()


def _copy(files: Path, tmp_path: Path) -> Path:
    root = tmp_path / "nmf"
    shutil.copytree(files / "noisy", root)
    return root


def _rewrite(path: Path, change) -> None:
    table = pq.read_table(path)
    pq.write_table(change(table), path)


def _first(root: Path, level: str, dataset: str, piece: str = "044") -> Path:
    return sorted((root / PERSONS / f"{level}.parquet" / dataset / f"State={piece}")
                  .glob("part-*.parquet"))[0]


def _set(table: pa.Table, column: str, row: int, value) -> pa.Table:
    values = table.column(column).to_pylist()
    values[row] = value
    i = table.schema.get_field_index(column)
    return table.set_column(i, table.schema.field(i), pa.array(values,
                                                                table.schema.field(i).type))


@pytest.mark.parametrize("fault, match", [
    ("query", r"State=044\), row 0: query_name 'race_dpq' is not one of"),
    ("length", r"row 0: field 'value' of .* has 5 numbers, but its query_shape"),
    ("variance", r"row 0: field 'variance' is -1.0"),
    ("sign", r"row 0: field 'sign' of .* is '<', expected"),
    ("axis", r"row 0: field 'cenrace' of .* is 'race', expected"),
    ("piece", r"row 3: geocode '0990000000000000000000000001' is not in state piece 044"),
    ("missing", r"State=044\): field 'value' holds missing numbers"),
    ("null axis", r"row 0: field 'cenrace' of .* is None, expected"),
    ("partition", r"State=44: a state piece is three characters"),
    ("level", r"no Tract.parquet/DPQuery/"),
])
def test_bad_input_names_file_partition_row_and_field(files, tmp_path, fault, match):
    root = _copy(files, tmp_path)
    block = _first(root, "Block", "DPQuery")
    if fault == "query":
        _rewrite(block, lambda t: _set(t, "query_name", 0, "race_dpq"))
    elif fault == "length":
        _rewrite(block, lambda t: _set(t, "value", 0, [1, 2, 3, 4, 5]))
    elif fault == "variance":
        _rewrite(block, lambda t: _set(t, "variance", 0, -1.0))
    elif fault == "sign":
        _rewrite(_first(root, "Block", "Constraint"), lambda t: _set(t, "sign", 0, "<"))
    elif fault == "axis":
        table = pq.read_table(block)
        row = table.column("query_name").to_pylist().index("cenrace_dpq")
        _rewrite(block, lambda t: _set(t, "cenrace", row, "race"))
        match = match.replace("row 0", f"row {row}")
    elif fault == "piece":
        _rewrite(block, lambda t: _set(t, "geocode", 3, "0990000000000000000000000001"))
    elif fault == "null axis":
        table = pq.read_table(block)
        row = table.column("query_name").to_pylist().index("cenrace_dpq")
        _rewrite(block, lambda t: _set(t, "cenrace", row, None))
        match = match.replace("row 0", f"row {row}")
    elif fault == "missing":
        table = pq.read_table(block)
        _rewrite(block, lambda t: _set(t, "value", 2, [None] * len(table.column("value")[2])))
    elif fault == "partition":
        d = root / PERSONS / "County.parquet" / "DPQuery"
        (d / "State=044").rename(d / "State=44") if (d / "State=044").exists() else (
            d / "State=44").mkdir()
    elif fault == "level":
        shutil.rmtree(root / PERSONS / "Tract.parquet" / "DPQuery")
    with pytest.raises(PostprocError, match=match):
        read_nmf(root, states=["44"], state_totals=_totals(root))


def test_state_totals_and_states_are_checked(files, tmp_path):
    root = files / "noisy"
    with pytest.raises(PostprocError, match="state_totals is required"):
        read_nmf(root, states=["44"])
    with pytest.raises(PostprocError, match=r"do not cover the states read: \['44'\]"):
        read_nmf(root, states=["44"], state_totals={"04": 1})
    with pytest.raises(PostprocError, match=r"states \['06'\] are not in the file"):
        read_nmf(root, states=["06"], state_totals={"06": 1})
    totals = read_state_totals(_totals(root))
    wrong = {**totals, "44": totals["44"] + 1}
    with pytest.raises(PostprocError, match="US total_con is"):
        read_nmf(root, state_totals=wrong)   # the whole file: the totals must sum to the US's
    bad = tmp_path / "totals.csv"
    bad.write_text("state,total\n44,12\n4,3\n")
    with pytest.raises(PostprocError, match=r"totals.csv, line 3: state '4' is not a two-digit"):
        read_state_totals(bad)


def test_a_state_in_two_pieces_keeps_its_total_over_the_pair(files):
    """The whole file (Rhode Island, and Arizona in two pieces): Arizona's total is a sum over
    its pieces, which TopDown holds as a row across the nation's children — on exact
    measurements it gives the truth back, on noisy ones it keeps every state total."""
    totals = read_state_totals(_totals(files / "noisy"))
    noisy, spec = read_nmf(files / "exact", state_totals=_totals(files / "exact"))
    [held] = spec.sums
    assert held.level == "state" and held.groups == (("004", "104"), ("044",))
    assert held.values == ((totals["04"],), (totals["44"],))
    assert "tot" not in noisy.invariants["state"]           # no piece has a total of its own
    truth = _truth(noisy, files / "exact")
    result = postprocess(noisy, "topdown", spec)
    for li in range(len(noisy.levels)):
        assert (result.histograms[li] == truth[li]).all()
    noisy, spec = read_nmf(files / "noisy", state_totals=_totals(files / "noisy"))
    states = postprocess(noisy, "topdown", spec).histograms[1].sum(axis=1)
    pieces = list(noisy.geography.geocodes[1])
    assert states[pieces.index("004")] + states[pieces.index("104")] == totals["04"]
    assert states[pieces.index("044")] == totals["44"]
    estimate = postprocess(noisy, "gls", spec).histograms[1].sum(axis=1)
    assert estimate[pieces.index("004")] + estimate[pieces.index("104")] == pytest.approx(
        totals["04"], abs=1e-6)
    noisy, spec = read_nmf(files / "exact", state_totals=_totals(files / "exact"))
    exact = postprocess(noisy, "gls", spec)         # the whole file: the truth again
    for li in range(len(noisy.levels)):
        np.testing.assert_allclose(exact.histograms[li], truth[li], rtol=0, atol=1e-6)
    # read alone, Arizona's total is its root's, which is not measured: TopDown solves the two
    # pieces in one problem under it (the truth again on exact measurements)
    noisy, spec = read_nmf(files / "noisy", states=["04"], state_totals=_totals(files / "noisy"))
    assert noisy.invariants["nation"]["tot"].tolist() == [totals["04"]] and not spec.sums
    assert int(postprocess(noisy, "topdown", spec).histograms[0].sum()) == totals["04"]
    noisy, spec = read_nmf(files / "exact", states=["04"], state_totals=_totals(files / "exact"))
    truth = _truth(noisy, files / "exact")
    result = postprocess(noisy, "topdown", spec)
    assert "joint_root" in result.provenance
    for li in range(len(noisy.levels)):
        assert (result.histograms[li] == truth[li]).all()


def test_a_unit_without_measurements_must_be_an_only_child(files, tmp_path):
    root = _copy(files, tmp_path)
    # drop every block's measurements in one file: blocks with siblings then have none
    block = _first(root, "Block", "DPQuery")
    table = pq.read_table(block)
    first = table.column("geocode")[0].as_py()
    keep = np.array(table.column("geocode").to_pylist()) != first
    pq.write_table(table.filter(pa.array(keep)), block)
    with pytest.raises(PostprocError, match="has no measurements .* but is not an only child"):
        read_nmf(root, states=["44"], state_totals=_totals(root))


def test_gls_of_a_state_in_two_pieces_is_the_truth_on_exact_measurements(files):
    """Arizona: two pieces under an unmeasured root, only children beside measured siblings
    (their chains measured at the bottom for the GLS)."""
    root = files / "exact"
    noisy, spec = read_nmf(root, states=["04"], state_totals=_totals(root))
    assert any(m.drawn is not None for ms in noisy.measurements.values() for m in ms.values())
    truth = _truth(noisy, root)
    result = postprocess(noisy, "gls", spec)
    for li, lv in enumerate(noisy.levels):
        np.testing.assert_allclose(result.histograms[li], truth[li], rtol=0, atol=1e-6)


def test_a_query_shape_that_is_not_the_queries_is_named(files, tmp_path):
    root = _copy(files, tmp_path)
    block = _first(root, "Block", "DPQuery")
    _rewrite(block, lambda t: _set(t, "query_shape", 0, [1, 1, 2, 1]))
    with pytest.raises(PostprocError, match=r"row 0: field 'query_shape' of .* is \[1, 1, 2, 1\], "
                                            r"expected \[1, 1, 1, 1\]"):
        read_nmf(root, states=["44"], state_totals=_totals(root))


def test_the_housing_units_product_reads_and_post_processes(files):
    """``product="units"``: vacant and occupied units on the same spine, their total exact at
    every geounit (no state totals needed); TopDown and gls on a zero-noise file give back
    every measured unit's counts, and every unit's total is its total_con."""
    noisy, spec = read_nmf(files / "exact", product="units")
    assert noisy.schema.shape == (2,) and list(noisy.workload.names) == ["detailed"]
    persons, _ = read_nmf(files / "exact", state_totals=_totals(files / "exact"))
    for li in range(len(noisy.levels)):           # the same spine as the persons'
        assert list(noisy.geography.geocodes[li]) == list(persons.geography.geocodes[li])
    for method in ("topdown", "gls"):
        result = postprocess(noisy, method, spec)
        for li, lv in enumerate(noisy.levels):
            got = result.histograms[li]
            assert np.allclose(got.sum(axis=1), noisy.invariants[lv]["total_con"][:, 0],
                               rtol=0, atol=1e-6)
            m = noisy.measurements[lv].get("detailed")
            if m is not None:
                measured = m.drawn[:, 0] if m.drawn is not None else slice(None)
                assert np.allclose(got[measured], m.values[measured], rtol=0, atol=1e-6)
    alone, _ = read_nmf(files / "noisy", product="units", states=["04"])
    assert list(alone.geography.geocodes[1]) == ["004", "104"]
    result = postprocess(alone, "topdown", _)
    assert int(result.histograms[0].sum()) == int(alone.invariants["nation"]["total_con"][0, 0])
