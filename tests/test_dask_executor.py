"""DaskExecutor on a LocalCluster on loopback: identical TopDown results, order, errors, lost
workers, an external scheduler, and ``postproc run --executor dask``.

One two-worker cluster (one thread each) is shared by the module; tests that need a cluster of
their own (a scheduler that fails a task on its first lost worker, the CLI's own local cluster)
start a one-worker cluster.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from pathlib import Path

import cloudpickle
import numpy as np
import pyarrow.parquet as pq
import pytest

distributed = pytest.importorskip("distributed")
import dask.config  # noqa: E402

from hierarchy.budget import Budget  # noqa: E402
from hierarchy.measurement import measure  # noqa: E402
from hierarchy.queries import e2e_workload  # noqa: E402
from hierarchy.schema import E2E_1940  # noqa: E402
from hierarchy.synth import synthesize_1940, write_synthetic_1940  # noqa: E402
from hierarchy.tabulation import tabulate  # noqa: E402
from invariants.spec import Spec  # noqa: E402
from postproc.apps.runs.demo import demo_config  # noqa: E402
from postproc.cli import main  # noqa: E402
from postproc.errors import PostprocError  # noqa: E402
from postproc.infra.dask_executor import DaskExecutor  # noqa: E402
from postproc.infra.executors import get_executor  # noqa: E402
from postproc.infra.solvers import SolverError  # noqa: E402
from postproc.methods.topdown import topdown  # noqa: E402

# Workers cannot import this test module (it is not on their path): ship its functions by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

LEVELS = ["nation", "state", "county", "enum_dist"]


def _local_cluster(n_workers: int, **scheduler_kwargs):
    return distributed.LocalCluster(
        n_workers=n_workers, threads_per_worker=1, processes=True, host="127.0.0.1",
        dashboard_address=None, silence_logs=logging.WARNING,
        scheduler_kwargs={"dashboard_address": "127.0.0.1:0", **scheduler_kwargs})


@pytest.fixture(scope="module")
def cluster():
    with _local_cluster(2) as c:
        yield c


@pytest.fixture(scope="module")
def ex(cluster):
    with DaskExecutor(workers=2, scheduler=cluster.scheduler_address) as e:
        yield e


@pytest.fixture(scope="module")
def noisy():
    data = synthesize_1940(20_000, seed=1)
    truth = tabulate(data.persons, schema=E2E_1940, levels=LEVELS, units=data.units)
    return measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, LEVELS), "geometric", rng=7,
                   spec=Spec.e2e(LEVELS))


# --- task functions (run on the workers) ----------------------------------------------------

def _slow_identity(x):
    time.sleep(0.02 * (8 - x % 8))  # earlier items finish later
    return x


def _record_run(directory: Path, i: int) -> None:
    with open(directory / f"run-{i}", "a") as f:
        f.write("x")


def _runs(directory: Path, i: int) -> int:
    path = directory / f"run-{i}"
    return len(path.read_text()) if path.exists() else 0


def _fail_on_two(args):
    directory, i = args
    _record_run(directory, i)
    if i == 2:
        raise SolverError("every backend failed on parent '02' (clarabel: infeasible)")
    if i == 4:
        raise PostprocError("parent '04' has no children")
    return i


def _kill_worker_once(args):
    """Item ``killer`` kills its worker process the first time it runs, once told to proceed."""
    directory, i, killer = args
    _record_run(directory, i)
    if i == killer and not (directory / "killed").exists():
        deadline = time.monotonic() + 30
        while not (directory / "proceed").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        (directory / "killed").touch()
        os._exit(1)
    time.sleep(0.05)
    return i * i


def _kill_worker_always(i):
    os._exit(1)


# --- tests ----------------------------------------------------------------------------------

def test_topdown_identical_to_serial(ex, noisy):
    spec = Spec.e2e(LEVELS)
    serial = topdown(noisy, spec, executor="serial", batch_children=8)
    dask = topdown(noisy, spec, executor=ex, batch_children=8)
    assert len(dask.histograms) == len(serial.histograms) == len(LEVELS)
    for level, a, b in zip(LEVELS, serial.histograms, dask.histograms):
        assert a.shape == b.shape, level
        assert a.dtype == b.dtype, level
        assert np.array_equal(a, b), level
    assert dask.provenance["solver"]["executor"] == "dask"
    assert dask.provenance["solver"]["scheduler"] == ex.scheduler


def test_results_in_input_order(ex):
    items = list(range(16))
    assert list(ex.map(_slow_identity, items)) == items
    assert list(ex.map(_slow_identity, [])) == []


def test_chunksize_groups_items_and_keeps_order(cluster):
    with DaskExecutor(scheduler=cluster.scheduler_address, chunksize=3) as chunked:
        assert list(chunked.map(_slow_identity, range(10))) == list(range(10))
        assert list(chunked.map(abs, [])) == []


def test_task_exceptions_propagate_once_with_type_and_message(ex, tmp_path):
    with pytest.raises(SolverError, match=r"every backend failed on parent '02' \(clarabel"):
        list(ex.map(_fail_on_two, [(tmp_path, i) for i in range(4)]))
    assert _runs(tmp_path, 2) == 1  # a raising task is not retried
    with pytest.raises(PostprocError, match="parent '04' has no children") as info:
        list(ex.map(_fail_on_two, [(tmp_path, 4)]))
    assert type(info.value) is PostprocError
    # the cluster is still usable after an error
    assert list(ex.map(abs, [-1, -2])) == [1, 2]


def test_lost_worker_is_retried_and_finished_work_kept(ex, tmp_path):
    killer, n = 5, 12
    got = []
    for i, value in enumerate(ex.map(_kill_worker_once, [(tmp_path, i, killer)
                                                          for i in range(n)])):
        got.append(value)
        if i == killer - 1:
            (tmp_path / "proceed").touch()  # items before the killer are in and released
    assert got == [i * i for i in range(n)]
    assert (tmp_path / "killed").exists()
    assert _runs(tmp_path, killer) == 2  # killed once, rerun on a live worker
    assert [_runs(tmp_path, i) for i in range(killer)] == [1] * killer  # not recomputed
    assert all(_runs(tmp_path, i) >= 1 for i in range(killer + 1, n))


def _kill_worker_once_big(args):
    directory, i, killer, payload = args
    return _kill_worker_once((directory, i, killer)) + int(payload[0])


def test_lost_worker_with_scattered_items_is_retried(ex, tmp_path):
    # items of 8 MB are scattered to the workers: the killed worker takes its items' data
    # with it, and those items must be sent again, not reported as failed
    killer, n = 3, 8
    items = [(tmp_path, i, killer, np.full(1_000_000, float(i))) for i in range(n)]
    got = []
    for i, value in enumerate(ex.map(_kill_worker_once_big, items)):
        got.append(value)
        if i == killer - 1:
            (tmp_path / "proceed").touch()
    assert got == [i * i + i for i in range(n)]
    assert (tmp_path / "killed").exists() and _runs(tmp_path, killer) == 2


def test_killed_worker_resubmitted_then_reported(tmp_path):
    # allowed_failures=0: the scheduler fails a task at its first lost worker (KilledWorker);
    # the executor resubmits it `retries` times, then raises a PostprocError.
    (tmp_path / "proceed").touch()
    with DaskExecutor(workers=1, allowed_failures=0, retries=1) as own:
        assert list(own.map(_kill_worker_once, [(tmp_path, 0, 0), (tmp_path, 1, 0)])) == [0, 1]
        assert _runs(tmp_path, 0) == 2
        given_up = r"item 0 of this map was given up: the Dask workers running it kept dying \(2"
        with pytest.raises(PostprocError, match=given_up) as info:
            list(own.map(_kill_worker_always, [0]))
        assert isinstance(info.value.__cause__, distributed.KilledWorker)


def _worker_settings() -> tuple[str | None, bool, bool | None]:
    from postproc.infra.executor_base import huge_pages_advised

    return (os.environ.get("MALLOC_TRIM_THRESHOLD_"),
            bool(dask.config.get("distributed.worker.profile.enabled")), huge_pages_advised())


def test_local_workers_keep_the_default_allocator_no_profiler_no_huge_pages(
        monkeypatch):
    # Dask's default MALLOC_TRIM_THRESHOLD_=65536 made node solving 20 % slower in a worker;
    # a cluster started earlier in this process (the module's fixture) put it in os.environ
    # (the nanny updates its own environment), which workers would inherit: remove it first.
    monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_", raising=False)
    monkeypatch.delenv("NUMPY_MADVISE_HUGEPAGE", raising=False)   # as in the process pool's
    with DaskExecutor(workers=1) as ex:                          # workers: huge pages off
        settings = list(ex._client.run(_worker_settings).values())
    assert settings == [(None, False, False)]
    # and the defaults still have both, so the test would catch losing the override
    assert dask.config.get("distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_")
    assert dask.config.get("distributed.worker.profile.enabled")


def test_large_items_are_scattered_not_sent_in_the_graph(ex):
    import warnings

    big = [np.full(2_000_000, float(i)) for i in range(3)]      # 16 MB each
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sums = list(ex.map(np.sum, big))
        windowed = list(ex.map_window(np.sum, iter(big), window=2))
    assert sums == windowed == [0.0, 2_000_000.0, 4_000_000.0]
    assert not [w for w in caught if "large graph" in str(w.message)], \
        [str(w.message)[:80] for w in caught]


def test_external_scheduler(cluster, ex):
    info = ex.describe()
    assert info == {"executor": "dask", "workers": 2, "threads": 2,
                    "scheduler": cluster.scheduler_address, "local_cluster": False}
    other = get_executor("dask", scheduler=cluster.scheduler_address)
    assert isinstance(other, DaskExecutor)
    assert list(other.map(abs, [-3, 4])) == [3, 4]
    other.close()
    other.close()  # idempotent
    with pytest.raises(PostprocError, match="closed"):
        other.map(abs, [1])
    # closing a client of an external scheduler leaves the cluster running
    assert len(cluster.scheduler_info["workers"]) == 2
    assert list(ex.map(abs, [-5])) == [5]


@pytest.mark.timeout(60)  # the connection timeout must be honoured, not hang the suite
def test_unreachable_scheduler():
    with pytest.raises(PostprocError, match=r"cannot connect to the Dask scheduler at "
                                            r"'tcp://127.0.0.1:9'.*dask scheduler"):
        DaskExecutor(scheduler="tcp://127.0.0.1:9", timeout=1)


@pytest.mark.parametrize("kwargs, message", [
    ({"workers": 0}, "workers must be a positive integer"),
    ({"threads_per_worker": 1.5}, "threads_per_worker must be a positive integer"),
    ({"chunksize": 0}, "chunksize must be a positive integer"),
    ({"retries": -1}, "retries must be a non-negative integer"),
    ({"allowed_failures": -1}, "allowed_failures must be a non-negative integer"),
    ({"allowed_failures": 2, "scheduler": "tcp://127.0.0.1:9"},
     "allowed_failures applies to a local cluster only"),
])
def test_invalid_arguments(kwargs, message):
    with pytest.raises(PostprocError, match=message):
        DaskExecutor(**kwargs)


def _outputs(directory: Path) -> dict[str, object]:
    return {lv: pq.read_table(directory / f"{lv}.parquet").to_pandas() for lv in LEVELS}


def test_cli_run_with_dask_matches_serial(cluster, tmp_path, capsys):
    write_synthetic_1940(tmp_path / "data", 20_000, seed=3)
    config = tmp_path / "config.toml"
    config.write_text(demo_config(tmp_path, epsilon=1.0, seed=11).to_toml())
    base = ["run", str(config), "--no-progress", "--out"]
    assert main(base + [str(tmp_path / "serial")]) == 0
    assert main(base + [str(tmp_path / "local"), "--executor", "dask", "--workers", "1"]) == 0
    assert main(base + [str(tmp_path / "remote"), "--executor", "dask",
                        "--scheduler", cluster.scheduler_address]) == 0
    capsys.readouterr()
    serial = _outputs(tmp_path / "serial")
    for run in ("local", "remote"):
        other = _outputs(tmp_path / run)
        for lv in LEVELS:
            assert serial[lv].equals(other[lv]), (run, lv)
    solver = json.loads((tmp_path / "remote" / "manifest.json").read_text())["provenance"][
        "solver"]
    assert solver["executor"] == "dask"
    assert solver["scheduler"] == cluster.scheduler_address
    local = json.loads((tmp_path / "local" / "manifest.json").read_text())["provenance"][
        "solver"]
    assert local["local_cluster"] is True and local["workers"] == 1
