"""TopDown in parts (postproc.apps.runs.parts) gives the histograms of the run of the whole.

The whole run here is what ``postproc run`` does (tabulate every level, measure, TopDown), with
the measurement a run in parts draws (``whole_measurement``: streams keyed by tract, only the
answers that count an active cell). Equality is exact, level by level, for several part
sizes, serially, on a process pool and on a Dask LocalCluster, and for a run interrupted and
resumed; release mode is checked to measure once.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hierarchy.geography import Geography
from hierarchy.measurement import measure
from hierarchy.synth.census2020 import synthesize_2020
from postproc.apps.runs import parts as parts_module
from postproc.apps.runs.demo import demo_config
from postproc.apps.runs.parts import (
    active_cells,
    part_geography,
    plan_parts,
    run_in_parts,
    whole_measurement,
)
from postproc.apps.runs.pipeline import load_truth, method_options
from postproc.errors import PostprocError
from postproc.methods.topdown import topdown
from postproc.result import histograms_from_table

PERSONS = 6_000
SEED = 3


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    base = tmp_path_factory.mktemp("parts")
    synthesize_2020(PERSONS, seed=SEED, out=base / "data")
    return base


def _config(base, **changes):
    config = demo_config(base, preset="pl94_2020", seed=SEED, executor="serial")
    if changes:
        from dataclasses import replace

        from postproc.methods.topdown.options import FIELDS
        options = {k: changes.pop(k) for k in list(changes) if k in FIELDS}
        config = replace(config.with_topdown(**options), **changes)
    return config


@pytest.fixture(scope="module")
def whole(base):
    """The run of the whole that a run in parts equals: streams keyed by tract, and only the
    answers that count an active cell drawn."""
    config = _config(base)
    truth = load_truth(config)
    noisy = whole_measurement(config, truth)
    result = topdown(noisy, config.spec, **method_options(config, "topdown"))
    return truth, noisy, result


def _read(directory, config, geo):
    return [histograms_from_table(pq.read_table(directory / f"{lv}.parquet"), config.schema,
                                  geo, lv) for lv in geo.levels]


def _assert_same(directory, base, whole):
    truth, _, result = whole
    got = _read(directory, _config(base), truth.geography)
    for li, lv in enumerate(truth.geography.levels):
        assert np.array_equal(got[li], result.histograms[li]), lv


def _interrupt_at(call: int, monkeypatch) -> None:
    """Make the run's ``call``-th TopDown (the top is the first, then one per part) raise, as
    an interrupted run does (serial executor: the parts run in this process)."""
    calls = []

    def failing(*args, **kwargs):
        calls.append(1)
        if len(calls) == call:
            raise KeyboardInterrupt
        return topdown(*args, **kwargs)

    monkeypatch.setattr(parts_module, "topdown", failing)


@pytest.mark.parametrize("part_blocks", [1, 60, 10**6])
def test_parts_give_the_histograms_of_the_whole_run(base, whole, tmp_path, part_blocks):
    done = run_in_parts(_config(base), tmp_path / "out", part_blocks=part_blocks,
                        log=lambda line: None)
    truth = whole[0]
    n_tracts = truth.geography.n_units("tract")
    expected = {1: n_tracts, 10**6: 1}.get(part_blocks)
    if expected is not None:
        assert done.parts == expected
    else:
        assert 2 < done.parts < n_tracts
    assert done.solved == done.parts and done.persons == PERSONS
    _assert_same(tmp_path / "out", base, whole)
    assert not (tmp_path / "out" / "parts").exists()      # the parts' files were joined


@pytest.mark.parametrize("executor", ["process", "dask"])
def test_workers_give_the_same_histograms(base, whole, tmp_path, executor):
    run_in_parts(_config(base, executor=executor, workers=2), tmp_path / "out",
                 part_blocks=150, log=lambda line: None)
    _assert_same(tmp_path / "out", base, whole)


def test_an_interrupted_run_resumes_where_it_stopped(base, whole, tmp_path, monkeypatch):
    _interrupt_at(3, monkeypatch)            # the top, part 0, then part 1 fails
    with pytest.raises(KeyboardInterrupt):
        run_in_parts(_config(base), tmp_path / "out", part_blocks=60, log=lambda line: None)
    assert (tmp_path / "out" / "parts" / "part-000000.json").exists()
    assert not (tmp_path / "out" / "parts" / "part-000001.json").exists()
    with pytest.raises(PostprocError, match="resume"):
        run_in_parts(_config(base), tmp_path / "out", part_blocks=60, log=lambda line: None)
    monkeypatch.setattr(parts_module, "topdown", topdown)
    done = run_in_parts(_config(base), tmp_path / "out", part_blocks=60, resume=True,
                        log=lambda line: None)
    assert done.solved == done.parts - 1
    _assert_same(tmp_path / "out", base, whole)
    # the errors of the part solved before the interruption are counted once
    fresh = run_in_parts(_config(base), tmp_path / "again", part_blocks=60,
                         log=lambda line: None)
    columns = ["units", "measured_mae", "topdown_mae", "measured_mean_abs", "topdown_mean_abs",
               "exact_median"]
    assert np.allclose(done.errors[columns], fresh.errors[columns], rtol=1e-12)


def test_error_table_is_that_of_the_whole_run(base, whole, tmp_path):
    from postproc.evaluation.tables import level_error_table

    truth, noisy, result = whole
    done = run_in_parts(_config(base), tmp_path / "out", part_blocks=60, log=lambda line: None)
    table = done.errors.set_index(["level", "query"])
    expected = level_error_table(truth, noisy, result.histograms, noisy.workload)
    expected = expected.set_index(["level", "query"])
    compared = 0
    for (lv, name), row in table.iterrows():     # every query measured at its level
        assert name in noisy.queries(lv)
        want = expected.loc[(lv, name)]
        for column in ("units", "measured_mae", "topdown_mae", "measured_mean_abs",
                       "topdown_mean_abs", "measured_rmse", "topdown_rmse", "exact_median"):
            assert row[column] == pytest.approx(want[column], rel=1e-12, abs=1e-12), (lv, name,
                                                                                     column)
        compared += 1
    assert compared == sum(len(noisy.queries(lv)) for lv in truth.geography.levels)
    written = (tmp_path / "out" / "confidential" / "error_table.csv").read_text()
    assert written.splitlines()[0].startswith(
        "level,query,units,measured,measured_mae,topdown_mae")


def test_error_table_answers_a_large_level_from_one_sparse_copy(whole, monkeypatch):
    """level_error_table answers every query of a large, mostly empty level (the blocks) from
    one sparse copy of its histograms: the same table, to the last digit, as the dense
    answers give."""
    import postproc.evaluation.tables as tables

    truth, noisy, result = whole
    copies = []
    real = tables.sparse_copy

    def spy(array):
        copy = real(array)
        copies.append(copy is not None)
        return copy

    monkeypatch.setattr(tables, "sparse_copy", spy)
    table = tables.level_error_table(truth, noisy, result.histograms, noisy.workload)
    assert any(copies) and len(copies) == 2 * len(truth.geography.levels)
    monkeypatch.setattr(tables, "sparse_copy", lambda array: None)
    dense = tables.level_error_table(truth, noisy, result.histograms, noisy.workload)
    pd.testing.assert_frame_equal(table, dense, check_exact=True)


def test_keyed_streams_differ_from_the_default_and_leave_it_unchanged(base, whole):
    truth, keyed, _ = whole
    config = _config(base)
    active = active_cells(config, truth)
    plain = measure(truth, config.workload, config.budget, config.mechanism, config.rng,
                    spec=config.spec, active=active)
    again = measure(truth, config.workload, config.budget, config.mechanism, config.rng,
                    spec=config.spec, active=active)
    for lv in ("nation", "tract"):       # at and above the key level: the same streams
        assert np.array_equal(plain.get(lv, "detailed").values, keyed.get(lv, "detailed").values)
    for lv in ("block_group", "block"):  # below it: other streams, deterministic for a seed
        assert not np.array_equal(plain.get(lv, "detailed").values,
                                  keyed.get(lv, "detailed").values)
        assert np.array_equal(plain.get(lv, "detailed").values, again.get(lv, "detailed").values)
    assert keyed.provenance["noise_streams"] == {"key_level": "tract"}
    assert "noise_streams" not in plain.provenance


def test_only_answers_that_count_an_active_cell_are_drawn(base, whole):
    truth, noisy, _ = whole
    config = _config(base)
    active = active_cells(config, truth)
    drawn = total = 0
    for lv in truth.levels:
        for name in noisy.queries(lv):
            m = noisy.get(lv, name)
            per = active[lv].answers(config.workload[name])
            expected = per.to_csr().toarray()
            got = np.ones(m.values.shape, bool) if m.drawn is None else m.drawn
            assert np.array_equal(got, expected), (lv, name)
            assert not m.values[~got].any() and not m.weights[~got].any()
            # an answer not drawn is 0 in the truth: every cell it counts is fixed
            exact = config.workload[name].answer(truth.counts[truth.levels.index(lv)])
            assert not exact[~got].any(), (lv, name)
            drawn, total = drawn + got.sum(), total + got.size
    assert 0.1 < drawn / total < 0.5           # 29 % here: most answers count fixed cells only
    assert noisy.provenance["answers_drawn"] == {"active_only": list(truth.levels)}
    full = measure(truth, config.workload, config.budget, config.mechanism, config.rng,
                   spec=config.spec)
    assert all(full.get(lv, q).drawn is None for lv in truth.levels for q in full.queries(lv))
    assert "answers_drawn" not in full.provenance


@pytest.mark.parametrize("keyed", [True, False])
def test_drawn_answers_come_from_their_streams_in_row_major_order(base, whole, keyed):
    """What measure_level promises of the answers it draws, computed the plain way: with keys,
    each tract's stream gives, query after query in the budget's order, the drawn answers of
    its blocks in row-major order; without, query q's stream (level, q) gives the whole level's
    in that order. Every other answer is 0."""
    from hierarchy.measurement import KEYED_STREAM, ancestor_offsets, measure_level, stable_key
    from hierarchy.randomness import as_randomness

    truth = whole[0]
    config = _config(base)
    geo = truth.geography
    li, split = geo.depth - 1, geo.level_index("tract")
    lv = geo.levels[li]
    active = active_cells(config, truth)[lv]
    rnd = as_randomness(config.rng)
    offsets = ancestor_offsets(geo, li, split)
    got, _ = measure_level(truth.counts[li], lv, li, config.workload, config.budget,
                           config.mechanism, rnd, active=active,
                           keys=(geo.geocodes[split], offsets) if keyed else None)
    names = config.budget.queries(lv)
    masks = [active.answers(config.workload[q]).to_csr().toarray() for q in names]
    params = [float(config.budget.noise_parameter(lv, config.workload[q], config.mechanism))
              for q in names]
    noise = [np.zeros(m.shape, np.int64) for m in masks]
    if keyed:
        tracts = geo.geocodes[split]
        for a in range(offsets.size - 1):
            stream = rnd.child(KEYED_STREAM, stable_key(lv), stable_key(str(tracts[a])))
            for z, mask, param in zip(noise, masks, params):
                rows = slice(offsets[a], offsets[a + 1])
                if rows.stop > rows.start:
                    z[rows][mask[rows]] = config.mechanism.sample(param, int(mask[rows].sum()),
                                                                  stream)
    else:
        for qi, (z, mask, param) in enumerate(zip(noise, masks, params)):
            z[mask] = config.mechanism.sample(param, int(mask.sum()), rnd.child(li, qi))
    assert sum(int(m.sum()) for m in masks) > 1000
    for q, z, mask in zip(names, noise, masks):
        exact = config.workload[q].answer(truth.counts[li])
        np.testing.assert_array_equal(got[q].values, np.where(mask, exact + z, 0))
        assert got[q].values.dtype == np.int64


def test_topdown_does_not_depend_on_the_answers_not_drawn(base):
    """docs/scale2020.md's claim, computed: a full measurement and the same one with the
    answers that count no active cell blanked give the same TopDown histograms."""
    from hierarchy.noisy import Measurement, NoisyHierarchy

    config = _config(base)
    truth = load_truth(config)
    full = measure(truth, config.workload, config.budget, config.mechanism, config.rng,
                   spec=config.spec)
    active = active_cells(config, truth)
    blanked = {}
    for lv in truth.levels:
        blanked[lv] = {}
        for name in full.queries(lv):
            m = full.get(lv, name)
            per = active[lv].answers(config.workload[name])
            mask = per.to_csr().toarray()
            blanked[lv][name] = Measurement(name, np.where(mask, m.values, 0), m.variances,
                                            mask)
    assert any(m.drawn is not None for ms in blanked.values() for m in ms.values())
    less = NoisyHierarchy(full.schema, full.geography, full.workload, blanked, full.invariants,
                          full.provenance)
    options = method_options(config, "topdown")
    for a, b in zip(topdown(full, config.spec, **options).histograms,
                    topdown(less, config.spec, **options).histograms):
        assert np.array_equal(a, b)


def test_a_parts_tabulation_is_that_of_the_whole_and_saved_as_before(base, whole, tmp_path):
    """Each part, tabulated sparse on a worker, gives the whole tabulation's tract rows, units
    and published block statistics, and saves its blocks' nonzero counts in the layout (and
    so with the digest) of the dense tabulation it replaced: np.nonzero's row-major order,
    int32 blocks and cells, int64 counts. A run interrupted before the change resumes."""
    import hashlib

    from hierarchy.measurement import ancestor_offsets, published_statistics

    truth = whole[0]
    config = _config(base)
    geo, s = parts_module._check(config, "tract", 40)
    plan = plan_parts(geo, s, 40)
    assert len(plan) > 4
    publish = parts_module.Published.of(config)
    low = geo.levels[s + 1:]
    tabulate = parts_module._TabulatePart(config, tmp_path, publish, low)
    blocks = ancestor_offsets(geo, geo.depth - 1, s)
    want_stats = published_statistics(truth, parts_module._publish_at(publish.statistics, low))
    assert want_stats          # the preset publishes block statistics
    for k, part, persons, units in parts_module._parts_in_one_pass(config, geo, s, plan):
        n, tracts, tract_units, stats, digest = tabulate((k, part, persons, units))
        first, stop = plan[k]
        leaf = truth.counts[-1][blocks[first]:blocks[stop]]
        assert n == int(leaf.sum())
        np.testing.assert_array_equal(tracts, truth.counts[s][first:stop])
        np.testing.assert_array_equal(tract_units, truth.units[s][first:stop])
        for lv, by_stat in want_stats.items():
            rows = ancestor_offsets(geo, geo.level_index(lv), s)[[first, stop]]
            for stat, values in by_stat.items():
                np.testing.assert_array_equal(stats[lv][stat], values[rows[0]:rows[1]])
        rows, cells = np.nonzero(leaf)
        dense_layout = {"shape": np.array(leaf.shape), "units": rows.astype(np.int32),
                        "cells": cells.astype(np.int32), "counts": leaf[rows, cells],
                        "unit_types": truth.units[-1][blocks[first]:blocks[stop]]}
        sha = hashlib.sha256()
        for name, array in dense_layout.items():
            sha.update(name.encode())
            sha.update(np.ascontiguousarray(array).tobytes())
        assert digest == sha.hexdigest()
        loaded = parts_module._load_counts(config, part, tmp_path / f"truth-{k:06d}.npz")
        np.testing.assert_array_equal(loaded.leaf_counts.toarray(), leaf)


def test_plan_covers_the_level_within_the_limit():
    rng = np.random.default_rng(0)
    blocks = rng.integers(1, 40, 300)
    tract_of_block = np.repeat(np.arange(300), blocks)
    geo = Geography(("n", "t", "b"), (["0"], [f"t{i}" for i in range(300)],
                                      [f"b{i}" for i in range(blocks.sum())]),
                    ([-1], np.zeros(300, int), tract_of_block))
    for limit in (1, 39, 100, 5_000):
        plan = plan_parts(geo, 1, limit)
        assert plan[0][0] == 0 and plan[-1][1] == 300
        assert all(a[1] == b[0] for a, b in zip(plan, plan[1:]))
        for first, stop in plan:
            size = blocks[first:stop].sum()
            assert size <= limit or stop - first == 1
            if stop < 300:          # a part stops only when the next tract would not fit
                assert size + blocks[stop] > limit
        part = part_geography(geo, 1, *plan[len(plan) // 2])
        first, stop = plan[len(plan) // 2]
        assert part.n_units("b") == blocks[first:stop].sum()


def test_bad_requests_say_what_to_change(base, tmp_path):
    config = _config(base)
    with pytest.raises(PostprocError, match=r"\[data\] blocks"):
        run_in_parts(_config(base, blocks=None), tmp_path / "b")
    for split in ("nation", "block", "county_x"):
        with pytest.raises(PostprocError, match="split level must be"):
            run_in_parts(config, tmp_path / "c", split=split)
    for bad in (0, -3, 2.5, True):
        with pytest.raises(PostprocError, match="part_blocks"):
            run_in_parts(config, tmp_path / "d", part_blocks=bad)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    with pytest.raises(PostprocError):
        run_in_parts(config, tmp_path / "mine")
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"
    assert not any(p.exists() for p in (tmp_path / "b", tmp_path / "d"))


def test_persons_outside_the_blocks_file_are_an_error_not_a_loss(base, tmp_path):
    shutil.copytree(base / "data", tmp_path / "data")
    blocks = pq.read_table(tmp_path / "data" / "blocks.parquet")
    tracts = blocks.column("tract").cast("string").to_numpy(zero_copy_only=False)
    persons = pq.read_table(tmp_path / "data" / "persons.parquet", columns=["tract"])
    lost = int(np.sum(persons.column("tract").cast("string").to_numpy(zero_copy_only=False)
                      == tracts[0]))
    assert lost > 0
    pq.write_table(blocks.filter(np.asarray(tracts != tracts[0])),
                   tmp_path / "data" / "blocks.parquet")
    with pytest.raises(PostprocError, match=f"{lost:,} of {PERSONS:,} persons"):
        run_in_parts(_config(tmp_path), tmp_path / "out", log=lambda line: None)
    with pytest.raises(PostprocError, match="some persons") as release:  # no count
        run_in_parts(_release_config(tmp_path), tmp_path / "release", log=lambda line: None)
    assert f"{lost:,}" not in str(release.value) and f"{PERSONS:,}" not in str(release.value)


def test_postproc_run_parts_writes_a_result_the_other_commands_read(base, whole, tmp_path,
                                                                     capsys):
    from postproc.cli import main
    from postproc.result import Result

    config = _config(base)
    (base / "parts.toml").write_text(config.to_toml())      # paths relative to the data's
    assert main(["run", str(base / "parts.toml"), "--parts", "100", "--out",
                 str(tmp_path / "out"), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "mean |error| of the totals" in printed and f"{PERSONS:,} persons in" in printed
    result = Result.read(tmp_path / "out")
    truth, _, expected = whole
    assert result.levels == truth.geography.levels
    for got, want in zip(result.histograms, expected.histograms):
        assert np.array_equal(got, want)
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["levels"]["block"]["persons"] == PERSONS
    assert manifest["provenance"]["parts"]["part_blocks"] == 100
    reports = manifest["provenance"]["failsafe_reports"]     # the parts' too, not the top's only
    assert len(reports) == len(expected.provenance["failsafe_reports"])
    assert not manifest["safe_for_release"]
    from hierarchy.io.storage import read_parquet_metadata  # every file is labelled, as a result's
    for name in ("block.parquet", "tract.parquet", "geography.parquet", "node_stats.parquet"):
        assert "NOT SAFE" in read_parquet_metadata(tmp_path / "out" / name)["randomness_label"]
    assert len(pq.read_table(tmp_path / "out" / "node_stats.parquet")) == 1 + sum(  # root
        truth.geography.n_units(lv) for lv in truth.geography.levels[:-1])


@pytest.mark.parametrize("executor", ["serial", "process"])
def test_files_out_of_geography_order_are_read_part_by_part(base, whole, tmp_path, executor):
    shutil.copytree(base / "data", tmp_path / "data")
    persons = pq.read_table(tmp_path / "data" / "persons.parquet")
    order = np.random.default_rng(0).permutation(persons.num_rows)
    pq.write_table(persons.take(order), tmp_path / "data" / "persons.parquet",
                   row_group_size=1_000)
    lines = []
    # with workers, parts already handed out when the unsorted rows are found are dropped
    run_in_parts(_config(tmp_path, executor=executor, workers=2), tmp_path / "out",
                 part_blocks=100, log=lines.append)
    assert any("read with a filter" in line for line in lines)
    _assert_same(tmp_path / "out", base, whole)
    quiet = []                      # the files as written (sorted): one pass, nothing to say
    run_in_parts(_config(base), tmp_path / "sorted", part_blocks=100, log=quiet.append)
    assert not any("filter" in line for line in quiet)


def test_topdown_checks_the_constraints_it_is_given():
    from hierarchy import E2E_1940, Budget, e2e_workload, synthesize_1940, tabulate
    from invariants.compile import compile_spec
    from invariants.spec import Invariant, Spec

    levels = ["nation", "state", "county"]
    truth = tabulate(synthesize_1940(2_000, seed=1).persons, schema=E2E_1940, levels=levels)
    noisy = measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, levels), rng=2,
                    publish={"tot": levels[:2]})
    spec = Spec([Invariant("tot", levels[:2])])
    compiled = compile_spec(spec, E2E_1940, noisy.geography, noisy.invariants)
    same = topdown(noisy, spec, compiled=compiled)
    plain = topdown(noisy, spec)
    assert all(np.array_equal(a, b) for a, b in zip(same.histograms, plain.histograms))
    with pytest.raises(PostprocError, match="no constraints for level 'county'"):
        topdown(noisy, spec, compiled={lv: compiled[lv] for lv in levels[:2]})
    other = truth.geography
    fewer = Geography(other.levels, (other.geocodes[0], other.geocodes[1][:3],
                                     other.geocodes[2][other.parents[2] < 3]),
                      (other.parents[0], other.parents[1][:3],
                       other.parents[2][other.parents[2] < 3]))
    wrong = compile_spec(Spec(), E2E_1940, fewer, {})
    with pytest.raises(PostprocError, match="for other units"):
        topdown(noisy, spec, compiled={**compiled, "county": wrong["county"]})


def test_demo_runs_in_parts_when_asked_or_large(tmp_path, monkeypatch):
    from postproc.apps.runs import demo
    from postproc.apps.runs.parts import PartsResult
    from postproc.result import Result

    done = demo.run_demo(tmp_path / "asked", preset="pl94_2020", persons=3_000, parts=50,
                         executor="serial", progress=False, log=lambda line: None)
    assert isinstance(done, PartsResult) and done.parts > 1
    assert Result.read(done.directory).histograms[-1].sum() == 3_000
    monkeypatch.setattr(demo, "PARTS_ABOVE", 2_000)
    large = demo.run_demo(tmp_path / "large", preset="pl94_2020", persons=3_000,
                          executor="serial", progress=False, log=lambda line: None)
    assert isinstance(large, PartsResult)
    with pytest.raises(PostprocError, match="pl94_2020 preset"):
        demo.run_demo(tmp_path / "e2e", persons=1_000, parts=50, progress=False,
                      log=lambda line: None)


def test_a_run_in_parts_into_a_directory_in_use_fails_at_once(base, tmp_path):
    """Two runs in parts into one directory would measure the data twice: the second is
    refused by the first's lock before it reads or measures anything."""
    from hierarchy.io.storage import claim_directory, lock_directory

    out = claim_directory(tmp_path / "out", made_by="test")
    with lock_directory(out, what="first run"):
        with pytest.raises(PostprocError, match="in use by first run"):
            run_in_parts(_config(base), out, part_blocks=60, resume=True,
                         log=lambda line: None)
    assert sorted(p.name for p in out.iterdir()) == [".dapp-lock", ".dapp-output"]


def test_a_resumed_run_keeps_its_settings_and_data(base, whole, tmp_path, monkeypatch):
    _interrupt_at(2, monkeypatch)            # the top, then part 0 fails
    with pytest.raises(KeyboardInterrupt):
        run_in_parts(_config(base), tmp_path / "out", part_blocks=60, log=lambda line: None)
    monkeypatch.setattr(parts_module, "topdown", topdown)
    with pytest.raises(PostprocError, match="other part_blocks, parts"):
        run_in_parts(_config(base), tmp_path / "out", part_blocks=90, resume=True,
                     log=lambda line: None)
    with pytest.raises(PostprocError, match="other config"):
        run_in_parts(demo_config(base, preset="pl94_2020", seed=SEED + 1, executor="serial"),
                     tmp_path / "out", part_blocks=60, resume=True, log=lambda line: None)
    shutil.copytree(base / "data", tmp_path / "data")
    persons = pq.read_table(tmp_path / "data" / "persons.parquet")
    hispanic = persons.column("hispanic").to_numpy().copy()
    hispanic[:100] = 1 - hispanic[:100]                   # 100 persons change origin
    pq.write_table(persons.set_column(persons.schema.get_field_index("hispanic"), "hispanic",
                                      pa.array(hispanic, persons.schema.field("hispanic").type)),
                   tmp_path / "data" / "persons.parquet")
    moved = _config(tmp_path)
    with pytest.raises(PostprocError, match="the data differ"):
        run_in_parts(moved, tmp_path / "out", part_blocks=60, resume=True,
                     log=lambda line: None)
    done = run_in_parts(_config(base), tmp_path / "out", part_blocks=60, resume=True,
                        log=lambda line: None)
    _assert_same(tmp_path / "out", base, whole)
    lines = []
    again = run_in_parts(_config(base), tmp_path / "out", part_blocks=60, resume=True,
                         log=lines.append)
    assert lines == [f"{tmp_path / 'out'}: run already finished; nothing to resume"]
    assert (again.parts, again.solved, again.persons) == (done.parts, 0, PERSONS)


def _release_config(base):
    """The demo's configuration in release mode (the exact sampler, no seed)."""
    from postproc.apps.runs.config import load_config

    text = _config(base).to_toml().replace("exact = false", "exact = true")
    text = text.replace(f'mode = "simulation"\nseed = {SEED}', 'mode = "release"')
    (base / "release.toml").write_text(text)
    config = load_config(base / "release.toml")
    assert config.release
    return config


def _files(directory):
    return {p.relative_to(directory): p.read_bytes() for p in sorted(directory.rglob("*"))
            if p.is_file()}


def test_release_mode_saves_its_measurements_first_and_never_draws_twice(base, tmp_path,
                                                                         monkeypatch, capsys):
    from postproc.cli import main
    from postproc.result import Result

    config = _release_config(base)
    out = tmp_path / "out"
    _interrupt_at(3, monkeypatch)            # the top, part 0, then part 1 fails
    with pytest.raises(KeyboardInterrupt):
        run_in_parts(config, out, part_blocks=60, log=lambda line: None)
    monkeypatch.setattr(parts_module, "topdown", topdown)
    noisy = out / "noisy"
    # measured before solved: the top, part 0 (solved) and part 1 (whose solve failed)
    assert sorted(p.name for p in (noisy / "parts").iterdir()) == ["part-000000",
                                                                    "part-000001"]
    saved = {name: _files(noisy / name) for name in ("top", "parts")}
    tract_before = pq.read_table(out / "tract.parquet")
    drawn = []
    real = parts_module.measure_level

    def counting(counts, level, *args, **kwargs):
        if counts.shape[0]:
            drawn.append(level)
        return real(counts, level, *args, **kwargs)

    monkeypatch.setattr(parts_module, "measure_level", counting)
    assert main(["run", str(base / "release.toml"), "--parts", "60", "--resume", "--out",
                 str(out), "--no-progress", "--executor", "serial"]) == 0
    printed = capsys.readouterr().out
    # the resumed run measured only part 2, the one never measured; what was saved is unchanged
    assert drawn == ["block_group", "block"]
    assert {name: _files(noisy / name) for name in ("top", "parts")} == {
        "top": saved["top"], "parts": {**saved["parts"], **_files(noisy / "parts")}}
    assert len(list((noisy / "parts").iterdir())) == 3
    assert pq.read_table(out / "tract.parquet").equals(tract_before)   # the same top solution
    # the spec publishes the nation's total: the log may show it, the summary never does
    assert f"tabulated {PERSONS:,} persons" in printed and "persons in 3 parts" not in printed
    assert "\n3 parts, " in printed
    assert "error" not in printed and "SIMULATION" not in printed
    assert not (out / "confidential" / "error_table.csv").exists()
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["safe_for_release"] and "noisy/" in manifest["release"]["release_files"]
    result = Result.read(out)
    geo = load_truth(config).geography
    for li in range(1, geo.depth):          # the joined levels add up, unit by unit
        parent_sum = np.zeros_like(result.histograms[li - 1])
        np.add.at(parent_sum, geo.parents[li], result.histograms[li])
        assert np.array_equal(parent_sum, result.histograms[li - 1]), geo.levels[li]
