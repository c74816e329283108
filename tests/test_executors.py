"""``Executor.map_window``: results in order, items read at most a window ahead, errors raised."""

from __future__ import annotations

import os

import pytest

from postproc.infra.executors import ProcessExecutor, SerialExecutor


def _negate(x: int) -> int:
    if x == 113:
        raise ValueError("one hundred and thirteen")
    return -x


@pytest.fixture(scope="module")
def pool():
    with ProcessExecutor(workers=2) as ex:
        yield ex


@pytest.fixture(params=["serial", "process"])
def ex(request, pool):
    return SerialExecutor() if request.param == "serial" else pool


@pytest.mark.parametrize("window", [1, 3, 50])
def test_results_in_order_whatever_the_window(ex, window):
    assert list(ex.map_window(_negate, iter(range(20)), window)) == [-i for i in range(20)]


@pytest.mark.parametrize("window", [1, 2, 4])
def test_items_are_read_at_most_a_window_ahead(ex, window):
    taken: list[int] = []

    def items():
        for i in range(12):
            taken.append(i)
            yield i

    ahead = []
    for n, _ in enumerate(ex.map_window(_negate, items(), window), start=1):
        ahead.append(len(taken) - n)        # items taken beyond the results yielded
    assert max(ahead) <= window
    assert len(taken) == 12


def test_an_item_that_raises_stops_the_map(ex):
    with pytest.raises(ValueError, match="one hundred and thirteen"):
        list(ex.map_window(_negate, iter(range(110, 120)), 2))


def test_an_exception_while_reading_the_items_propagates(ex):
    def items():
        yield 1
        yield 2
        raise OSError("the file ended early")

    with pytest.raises(OSError, match="ended early"):
        list(ex.map_window(_negate, items(), 2))


@pytest.mark.parametrize("window", [0, -1, 1.5, True])
def test_a_window_that_is_not_a_positive_integer_is_refused(ex, window):
    with pytest.raises(ValueError, match="positive integer"):
        list(ex.map_window(_negate, iter([1]), window))


@pytest.mark.parametrize("environ, advised", [(None, False), ("1", True)])
def test_workers_turn_numpy_huge_page_advice_off_unless_the_environment_says(
        monkeypatch, environ, advised):
    """A part's block × cell arrays of hundreds of MB stalled on memory compaction with the
    advice on (docs/scale2020.md, "Huge pages in the workers"); a user's setting is kept."""
    from postproc.infra.executor_base import HUGEPAGE_ENV, huge_pages_advised

    assert huge_pages_advised() is not None          # numpy 2 can say
    if environ is None:
        monkeypatch.delenv(HUGEPAGE_ENV, raising=False)
    else:
        monkeypatch.setenv(HUGEPAGE_ENV, environ)
    with ProcessExecutor(workers=1) as fresh:         # workers inherit the environment now
        assert list(fresh.map(_advised, [0, 1])) == [advised, advised]


def _advised(_: int) -> bool:
    from postproc.infra.executor_base import huge_pages_advised

    return huge_pages_advised()


@pytest.mark.parametrize("workers", [1, 2])
def test_process_workers_share_the_cores_out_as_blas_threads(workers):
    """Each worker runs cores // workers BLAS threads (at least one), not a thread per core:
    with a worker per core OpenBLAS's spinning threads made the GLS's products of short rows
    up to 15 times slower (docs/gls.md, "Threads in the workers")."""
    from postproc.infra.executor_base import worker_blas_threads

    expected = worker_blas_threads(workers)
    with ProcessExecutor(workers=workers) as ex:
        assert list(ex.map(_blas_threads, range(2 * workers))) == [expected] * (2 * workers)
    assert expected == max(1, (os.cpu_count() or 1) // workers)


def _blas_threads(_: int) -> int:
    from threadpoolctl import threadpool_info

    pools = [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]
    assert pools, "numpy's BLAS is not seen by threadpoolctl"
    return min(pools)
