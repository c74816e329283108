"""``postproc nmf run``: a Noisy Measurement File post-processed into a run directory that
``Result.read`` reads back, with each block's census GEOID, never into another program's
directory."""

from __future__ import annotations

import json
import os
import re

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hierarchy.synth.census2020 import synthesize_2020
from postproc.apps.nmf.reader import read_nmf
from postproc.apps.nmf.run import run_nmf
from postproc.apps.nmf.synthetic import write_synthetic_nmf
from postproc.cli import main
from postproc.errors import PostprocError
from postproc.methods import postprocess
from postproc.result import Result


@pytest.fixture(scope="module")
def nmf(tmp_path_factory):
    root = tmp_path_factory.mktemp("nmfrun")
    synthesize_2020(15_000, seed=5, states=["44"], out=root / "data", progress=False)
    write_synthetic_nmf(root / "data", root / "nmf", seed=4)
    return root


def test_the_cli_writes_what_the_library_computes(nmf, tmp_path, capsys):
    out = tmp_path / "run"
    totals = str(nmf / "nmf" / "state_totals.csv")
    assert main(["nmf", "run", str(nmf / "nmf"), "--out", str(out), "--state-totals", totals,
                 "--states", "44"]) == 0
    got = Result.read(out)
    noisy, spec = read_nmf(nmf / "nmf", states=["44"], state_totals=totals)
    from postproc.apps.nmf.run import production_options

    want = postprocess(noisy, "topdown", spec, **production_options(noisy.levels))
    for a, b in zip(got.histograms, want.histograms):
        assert np.array_equal(a, b)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["nmf"]["pieces"] == ["044"] and manifest["method"] == "topdown"
    assert manifest["safe_for_release"] is False                # a synthetic file's noise
    assert "NOT SAFE FOR" in manifest["randomness"]["label"]
    geoids = pq.read_table(out / "block_geoid.parquet").to_pydict()
    assert len(geoids["block"]) == noisy.geography.n_units("block")
    assert all(len(g) == 15 and g.startswith("44") for g in geoids["geoid"])
    assert all(b[-16:][:11] + b[-16:][12:] == g for b, g in zip(geoids["block"], geoids["geoid"]))
    # again into its own output: replaced, not refused
    assert main(["nmf", "run", str(nmf / "nmf"), "--out", str(out), "--state-totals", totals,
                 "--states", "44", "--method", "gls"]) == 0
    assert Result.read(out).method == "gls"


def test_another_programs_directory_is_refused_before_anything_is_read(nmf, tmp_path):
    with pytest.raises(PostprocError, match="holds the output of postproc synth2020"):
        run_nmf(nmf / "nmf", nmf / "data", state_totals={"44": 1}, log=lambda _: None)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    with pytest.raises(PostprocError, match="not written by this toolkit"):
        run_nmf(nmf / "nmf", mine, state_totals={"44": 1}, log=lambda _: None)
    assert (mine / "notes.txt").read_text() == "keep"
    with pytest.raises(PostprocError, match="unknown method 'fancy'"):
        run_nmf(nmf / "nmf", tmp_path / "x", method="fancy", state_totals={"44": 1})


def _config(folder, body: str):
    path = folder / "run.toml"
    path.write_text(body)
    return path


def test_a_run_configuration_names_the_file_and_runs_like_nmf_run(nmf, tmp_path, capsys):
    """``[data] nmf`` in a run configuration: ``postproc validate`` reads and checks the file,
    ``postproc run`` writes what ``postproc nmf run`` writes (paths relative to the config)."""
    (tmp_path / "nmf").symlink_to(nmf / "nmf")
    config = _config(tmp_path, '[data]\nnmf = "nmf"\nstate_totals = "nmf/state_totals.csv"\n'
                               'states = ["44"]\n\n[postprocess]\nmethod = "gls"\n\n'
                               '[output]\ndirectory = "out"\n')
    assert main(["validate", str(config)]) == 0
    assert "read and checked row by row (1 state pieces" in capsys.readouterr().out
    assert main(["run", str(config)]) == 0
    got = Result.read(tmp_path / "out")
    noisy, spec = read_nmf(nmf / "nmf", states=["44"],
                           state_totals=nmf / "nmf" / "state_totals.csv")
    want = postprocess(noisy, "gls", spec)
    assert got.method == "gls"
    for a, b in zip(got.histograms, want.histograms):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-9)
    assert (tmp_path / "out" / "block_geoid.parquet").is_file()
    # --method overrides the configuration's (with that method's production options)
    assert main(["run", str(config), "--method", "topdown", "--out", str(tmp_path / "td")]) == 0
    want = postprocess(noisy, "topdown", spec, **__import__(
        "postproc.apps.nmf.run", fromlist=["x"]).production_options(noisy.levels))
    assert all(np.array_equal(a, b) for a, b in zip(Result.read(tmp_path / "td").histograms,
                                                     want.histograms))


@pytest.mark.parametrize("body, message", [
    ('[data]\nnmf = "nmf"\nstate_totals = "2020"\n\n[budget]\ntotal = 1\n',
     r"run.toml, line 5: \[budget\] is not part of a run on a Noisy Measurement File"),
    ('[data]\nnmf = "nmf"\n', r"\[data\] needs state_totals"),
    ('[data]\nnmf = "nmf"\nstate_totals = "2020"\nstates = ["4"]\n',
     "states must be two-digit state FIPS codes"),
    ('[data]\nnmf = "nmf"\nstate_totals = "2020"\n[postprocess]\nmethod = "fancy"\n',
     "unknown method 'fancy'"),
    ('[data]\nnmf = "nmf"\nstate_totals = "2020"\n', "no output directory"),
    ('[data]\nnmf = "nmf"\nstate_totals = "2020"\npart_blocks = 10\n',
     "line 4: part_blocks splits the blocks of a run state by state: set stream = true"),
])
def test_a_bad_nmf_configuration_is_named_where_it_is_wrong(tmp_path, capsys, body, message):
    assert main(["run", str(_config(tmp_path, body))]) != 0
    assert re.search(message, capsys.readouterr().err)


def test_flags_of_a_measuring_run_are_refused_on_a_file(tmp_path, capsys):
    config = _config(tmp_path, '[data]\nnmf = "nmf"\nstate_totals = "2020"\n')
    assert main(["run", str(config), "--resume", "--parts", "--out", str(tmp_path / "o")]) != 0
    assert "does not take --resume, --parts" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_the_units_product_runs_from_the_cli(nmf, tmp_path):
    out = tmp_path / "units"
    assert main(["nmf", "run", str(nmf / "nmf"), "--out", str(out), "--product", "units"]) == 0
    got = Result.read(out)
    noisy, spec = read_nmf(nmf / "nmf", product="units")
    assert got.schema.shape == (2,)
    assert all(np.array_equal(a, b) for a, b in zip(
        got.histograms, postprocess(noisy, "topdown", spec).histograms))
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["nmf"]["product"] == "US_Unit_PL_PROD"


def test_methods_are_compared_against_the_truth_a_synthetic_file_keeps(nmf, tmp_path):
    """``postproc nmf compare``: one table of every method's errors against the truth the
    synthetic file keeps, the same errors as the methods' results against that truth."""
    from postproc.apps.nmf.compare import nmf_truth
    from postproc.apps.nmf.run import production_options

    out = tmp_path / "cmp"
    totals = str(nmf / "nmf" / "state_totals.csv")
    assert main(["nmf", "compare", str(nmf / "nmf"), "--methods", "topdown,gls", "--out",
                 str(out), "--state-totals", totals]) == 0
    table = pd.read_csv(out / "compare.csv")
    assert set(table["method"]) == {"topdown", "gls"}
    noisy, spec = read_nmf(nmf / "nmf", state_totals=totals)
    truth = nmf_truth(nmf / "nmf", noisy)
    assert int(truth.counts[0].sum()) == int(noisy.invariants["nation"]["tot"][0])
    tract = table[(table["level"] == "tract") & (table["query"] == "total")].set_index("method")
    for method, options in (("topdown", production_options(noisy.levels)), ("gls", {})):
        result = postprocess(noisy, method, spec, **options)
        mean_abs = float(np.abs(result.histograms[3].sum(axis=1)
                                - truth.counts[3].sum(axis=1)).mean())
        assert tract.loc[method, "mean_abs"] == pytest.approx(mean_abs)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["made_by"] == "postproc nmf compare"
    assert set(manifest["files"]) >= {"compare.csv", "compare.html", "compare_mae.png"}
    with pytest.raises(PostprocError, match="has no truth/persons.parquet"):
        nmf_truth(tmp_path, noisy)


def test_state_by_state_gives_the_whole_runs_integers(tmp_path, capsys, monkeypatch):
    """``--stream``: the nation and the state pieces first, then one state at a time and its
    blocks part by part — the same histograms at every level as TopDown on the whole file
    (Rhode Island, and Arizona in two pieces whose total is held across them), in a directory
    Result.read reads; with many small parts on two processes; and resumed after an
    interruption without solving the finished state again."""
    root = tmp_path / "two"
    synthesize_2020(30_000, seed=9, states=["44", "04"], out=root / "data", progress=False)
    write_synthetic_nmf(root / "data", root / "nmf", seed=2)
    totals = str(root / "nmf" / "state_totals.csv")
    whole, streamed = tmp_path / "whole", tmp_path / "streamed"
    assert main(["nmf", "run", str(root / "nmf"), "--out", str(whole), "--state-totals",
                 totals]) == 0
    assert main(["nmf", "run", str(root / "nmf"), "--out", str(streamed), "--state-totals",
                 totals, "--stream"]) == 0
    a, b = Result.read(whole), Result.read(streamed)
    assert list(a.geography.levels) == list(b.geography.levels)
    for li in range(a.geography.depth):
        assert list(a.geography.geocodes[li]) == list(b.geography.geocodes[li])
        assert np.array_equal(a.histograms[li], b.histograms[li])
    manifest = json.loads((streamed / "manifest.json").read_text())
    assert manifest["streamed"] == "state by state" and manifest["safe_for_release"] is False
    assert manifest["levels"]["block"]["persons"] == int(a.histograms[-1].sum())
    assert not (streamed / ".states").exists()
    # each state's blocks in many parts (block groups cut at 60 blocks), solved on two
    # processes: still the whole run's integers
    from postproc.apps.nmf.stream import run_nmf_streamed

    cut = run_nmf_streamed(root / "nmf", tmp_path / "cut", state_totals=totals,
                           part_blocks=60, workers=2, log=lambda line: None)
    d = Result.read(cut)
    assert json.loads((cut / "manifest.json").read_text())["part_blocks"] == 60
    stats = pd.read_parquet(cut / "node_stats.parquet")
    assert (stats["level"] == "block").sum() == a.geography.n_units("block_group")
    for li in range(a.geography.depth):
        assert list(a.geography.geocodes[li]) == list(d.geography.geocodes[li])
        assert np.array_equal(a.histograms[li], d.histograms[li])
    # interrupted after its first state, a run resumes: that state is not solved again
    import postproc.apps.nmf.stream as stream

    solve, calls = stream._State.solve, []

    def fail_second(self, fips, *args, **kwargs):
        calls.append(fips)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return solve(self, fips, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(stream._State, "solve", fail_second)
        with pytest.raises(KeyboardInterrupt):
            run_nmf_streamed(root / "nmf", tmp_path / "resumed", state_totals=totals,
                             part_blocks=60, workers=1, log=lambda line: None)
    assert (tmp_path / "resumed" / ".states" / "state-04.json").is_file()
    lines: list[str] = []
    run_nmf_streamed(root / "nmf", tmp_path / "resumed", state_totals=totals, part_blocks=60,
                     workers=1, log=lines.append)
    assert any(line.startswith("state 04:") and "(resumed)" in line for line in lines)
    assert not any(line.startswith("state 44:") and "(resumed)" in line for line in lines)
    e = Result.read(tmp_path / "resumed")
    assert all(np.array_equal(x, y) for x, y in zip(a.histograms, e.histograms))
    assert pd.read_parquet(tmp_path / "resumed" / "node_stats.parquet").shape == stats.shape
    assert main(["nmf", "run", str(root / "nmf"), "--out", str(tmp_path / "no"),
                 "--state-totals", totals, "--part-blocks", "60"]) != 0
    assert "--part-blocks splits the blocks of a run state by state" in capsys.readouterr().err
    for flags in (["--method", "hay"], ["--product", "units"]):   # TopDown, BlueDown, gls: persons
        assert main(["nmf", "run", str(root / "nmf"), "--out", str(tmp_path / "no"),
                     "--state-totals", totals, "--stream", *flags]) != 0
        assert "a run state by state is TopDown or BlueDown" in capsys.readouterr().err
        assert not (tmp_path / "no").exists()
    config = root / "run.toml"          # the same from a run configuration
    config.write_text('[data]\nnmf = "nmf"\nstate_totals = "nmf/state_totals.csv"\n'
                      'stream = true\n\n[output]\ndirectory = "out"\n')
    assert main(["run", str(config)]) == 0
    c = Result.read(root / "out")
    assert all(np.array_equal(x, y) for x, y in zip(a.histograms, c.histograms))
    units = root / "units.toml"         # the housing units' product validates without totals
    units.write_text('[data]\nnmf = "nmf"\nproduct = "units"\n')
    assert main(["validate", str(units)]) == 0
    assert "read and checked row by row (3 state pieces" in capsys.readouterr().out
    geoids = pq.read_table(streamed / "block_geoid.parquet").to_pydict()
    assert geoids == pq.read_table(whole / "block_geoid.parquet").to_pydict()


def test_bounds_that_cannot_bind_leave_the_optimum_and_let_clarabel_solve(tmp_path, monkeypatch):
    """The NMF's household upper bounds (housing units × 99,999: about 10⁹ on a 200,000-person
    state) made Clarabel stop short of optimal at the nation and the fit fall through to OSQP.
    With the bounds that cannot bind dropped (``binding_bounds``) every node fitted down to the
    tracts (the nation's, and each county's; the state and its spine county are only children,
    copied) is solved by Clarabel, and the integers are those of the problems with every bound
    kept (the same optimum)."""
    import postproc.methods.topdown.rows as rows
    from hierarchy.presets.pl94 import LEVELS
    from postproc.apps.nmf.run import production_options

    synthesize_2020(200_000, seed=3, states=["44"], out=tmp_path / "data", progress=False)
    write_synthetic_nmf(tmp_path / "data", tmp_path / "nmf", seed=4)
    noisy, spec = read_nmf(tmp_path / "nmf", state_totals=tmp_path / "nmf" / "state_totals.csv",
                           down_to="tract")
    full = production_options(list(LEVELS))
    options = {k: ({lv: v[lv] for lv in noisy.levels} if isinstance(v, dict) else v)
               for k, v in full.items()}
    us = noisy.invariants["nation"]["hhgq_total_ub_con"]
    assert us.max() > 1e4 * int(noisy.invariants["nation"]["tot"][0])    # the bound at issue
    result = postprocess(noisy, "topdown", spec, **options)
    attempts = result.node_stats["attempts"].dropna()
    assert len(attempts) and attempts.str.fullmatch(r"clarabel:optimal(;clarabel:optimal)*").all()
    kept = []

    def every_bound(task, exact_parent=True):
        kept.append(task.level)
        return task.lower, task.upper

    monkeypatch.setattr(rows, "binding_bounds", every_bound)
    every = postprocess(noisy, "topdown", spec, **options)
    assert {"nation", "tract"} <= set(kept)      # the fitted levels ran with every bound
    assert all(np.array_equal(a, b) for a, b in zip(result.histograms, every.histograms))


def test_methods_against_published_totals(nmf, tmp_path, capsys):
    """``postproc nmf compare --published CSV``: each method's blocks added up to the census
    units the GEOIDs name and compared with the given totals (here the truth's, as published
    tables would give them) — the errors those of the methods' own results, computed here
    independently; bad rows named by line, a unit outside the file refused."""
    from postproc.apps.nmf.compare import nmf_truth
    from postproc.apps.nmf.layout import block_geoid
    from postproc.apps.nmf.run import production_options

    totals = str(nmf / "nmf" / "state_totals.csv")
    noisy, spec = read_nmf(nmf / "nmf", state_totals=totals)
    geoids = pd.Series([block_geoid(str(b)) for b in noisy.geography.geocodes[-1]])
    truth = nmf_truth(nmf / "nmf", noisy).counts[-1].sum(axis=1)
    rows = []
    for length in (5, 11, 15):
        by = pd.Series(truth).groupby(geoids.str[:length].values).sum()
        rows += [(g, int(v)) for g, v in by.items()]
    published = tmp_path / "p1.csv"
    pd.DataFrame(rows, columns=["geoid", "total"]).to_csv(published, index=False)
    out = tmp_path / "cmp"
    assert main(["nmf", "compare", str(nmf / "nmf"), "--methods", "topdown,gls", "--out",
                 str(out), "--state-totals", totals, "--published", str(published)]) == 0
    table = pd.read_csv(out / "published.csv")
    assert (out / "published.png").stat().st_size > 0
    assert set(table["level"]) == {"county", "tract", "block"}
    for method, options in (("topdown", production_options(noisy.levels)), ("gls", {})):
        blocks = postprocess(noisy, method, spec, **options).histograms[-1].sum(axis=1)
        for length, level in ((5, "county"), (11, "tract"), (15, "block")):
            unit = geoids.str[:length].values
            error = (pd.Series(blocks).groupby(unit).sum()
                     - pd.Series(truth).groupby(unit).sum())
            row = table[(table["method"] == method) & (table["level"] == level)].iloc[0]
            assert row["units"] == error.size
            assert row["mean_abs"] == pytest.approx(float(np.abs(error).mean()), abs=1e-6)
            assert row["max_abs"] == pytest.approx(float(np.abs(error).max()), abs=1e-6)
    county = table[(table["level"] == "county") & (table["method"] == "topdown")].iloc[0]
    assert county["published"] == int(truth.sum())
    # finished run directories (whole and streamed), read a batch at a time: the same errors
    for name, flags in (("whole", []), ("streamed", ["--stream"])):
        assert main(["nmf", "run", str(nmf / "nmf"), "--out", str(tmp_path / name),
                     "--state-totals", totals, *flags]) == 0
    assert main(["nmf", "compare", "--runs", f"whole={tmp_path / 'whole'}",
                 f"streamed={tmp_path / 'streamed'}", "--published", str(published), "--out",
                 str(tmp_path / "runs")]) == 0
    runs = pd.read_csv(tmp_path / "runs" / "published.csv")
    ours = table[table["method"] == "topdown"].set_index("level")
    for name in ("whole", "streamed"):
        got = runs[runs["method"] == name].set_index("level")
        assert np.allclose(got.loc[ours.index, "mean_abs"], ours["mean_abs"])
    assert main(["nmf", "compare", str(nmf / "nmf"), "--runs", f"a={tmp_path / 'whole'}",
                 "--methods", "gls", "--published", str(published), "--out",
                 str(tmp_path / "no")]) != 0
    assert "it does not take --methods" in capsys.readouterr().err
    assert main(["nmf", "compare", "--runs", f"a={tmp_path / 'whole'}", "--out",
                 str(tmp_path / "no")]) != 0
    assert "give ROOT or --published CSV" in capsys.readouterr().err
    for body, message in (("geoid,total\n44007,12\n4400,3\n", "line 3: geoid '4400' is not"),
                          ("geoid,total\n44007,-1\n", "line 2: total '-1' is not a whole"),
                          ("geoid,count\n44007,1\n", "column 'count' is not a variable"),
                          ("count\n1\n", "needs columns 'geoid' and 'total'"),
                          ("geoid,total\n06001,1\n", "published county 06001 has no block")):
        published.write_text(body)
        assert main(["nmf", "compare", str(nmf / "nmf"), "--methods", "topdown", "--out",
                     str(tmp_path / "no"), "--state-totals", totals, "--published",
                     str(published)]) != 0
        assert message in capsys.readouterr().err


def _one_file_a_partition(src, dst, rows_per_group: int, seed: int) -> None:
    """``src`` laid out as the published zip is: each partition's part files as one file (its
    rows shuffled, so a part's blocks are spread through it) of many small row groups."""
    import shutil

    shutil.copytree(src, dst)
    rng = np.random.default_rng(seed)
    for folder in {p.parent for p in dst.rglob("part-*.parquet")}:
        files = sorted(folder.glob("part-*.parquet"))
        table = pa.concat_tables([pq.read_table(f) for f in files], promote_options="default")
        for f in files:
            f.unlink()
        table = table.take(rng.permutation(table.num_rows))
        pq.write_table(table, folder / "part-00000.snappy.parquet",
                       row_group_size=rows_per_group)


def test_one_file_of_many_row_groups_a_partition_reads_as_many_files(nmf, tmp_path, capsys,
                                                                      monkeypatch):
    """The published files hold a state piece's geolevel in one file (Texas's blocks: 7.4
    million rows), which is read a batch at a time and whose row groups the stream's block pass
    shares among its tasks: the same file laid out so — one shuffled file per partition, row
    groups of 700 rows, batches of 256 rows, spill tasks of 2,000 rows — reads to the same
    hierarchy, streams to the same integers, and an error deep in it names the file's row."""
    import postproc.apps.nmf.blocks as blocks
    import postproc.apps.nmf.files as files

    monkeypatch.setattr(files, "BATCH_ROWS", 256)
    monkeypatch.setattr(blocks, "SPILL_ROWS", 2_000)
    merged = tmp_path / "merged"
    _one_file_a_partition(nmf / "nmf", merged, 700, seed=3)
    block_file = next((merged / "US_Person_PL_PROD" / "Block.parquet" / "DPQuery" /
                       "State=044").glob("*.parquet"))
    assert pq.ParquetFile(block_file).metadata.num_row_groups > 5
    tasks = blocks._spill_items([("DPQuery", "044", block_file)])
    assert len(tasks) > 1 and sorted(g for t in tasks for g in t[-1]) == list(
        range(pq.ParquetFile(block_file).metadata.num_row_groups))
    totals = str(nmf / "nmf" / "state_totals.csv")
    a, _ = read_nmf(nmf / "nmf", state_totals=totals)
    b, _ = read_nmf(merged, state_totals=totals)
    assert list(a.geography.geocodes[-1]) == list(b.geography.geocodes[-1])
    for level in a.levels:
        for name, m in a.measurements[level].items():
            assert np.array_equal(m.values, b.measurements[level][name].values)
            assert np.array_equal(m.variances, b.measurements[level][name].variances)
    from postproc.apps.nmf.stream import run_nmf_streamed

    lines: list[str] = []
    runs = [run_nmf_streamed(root, tmp_path / name, state_totals=totals, part_blocks=60,
                             log=lines.append)
            for root, name in ((nmf / "nmf", "many"), (merged, "one"))]
    x, y = Result.read(runs[0]), Result.read(runs[1])
    # the block pass's line: its tasks' own seconds, which run within its wall time on the
    # pool's workers (every CPU: run_nmf_streamed's default)
    spilled = [re.search(r"\(([0-9.]+) s of work on the workers\) in ([0-9.]+) s$", line)
               for line in lines if "read and split" in line]
    assert spilled and all(m is not None for m in spilled)
    for m in spilled:
        assert 0 < float(m[1]) <= float(m[2]) * (os.cpu_count() or 1) + 0.1
    assert all(np.array_equal(u, v) for u, v in zip(x.histograms, y.histograms))
    table = pq.read_table(block_file)
    row = table.num_rows - 5                       # in the file's last row group
    variances = table.column("variance").to_numpy().copy()
    variances[row] = -1.0
    table = table.set_column(table.schema.get_field_index("variance"), "variance",
                             pa.array(variances))
    pq.write_table(table, block_file, row_group_size=700)
    with pytest.raises(PostprocError, match=rf"State=044\), row {row}: field 'variance' is -1.0"):
        run_nmf_streamed(merged, tmp_path / "bad", state_totals=totals, part_blocks=60,
                         log=lambda line: None)
