"""Executors: how a level's independent parent problems are mapped over workers.

An executor is anything with ``map(fn, items) -> iterator of results in order`` and
``close()`` (the interface :class:`~postproc.infra.executor_base.Executor`). The serial and
process-pool executors live here; a distributed one (:mod:`postproc.infra.dask_executor`) implements
the same two methods. Work items must be picklable (plain arrays and dataclasses).

Examples
--------
>>> with get_executor("serial") as ex:
...     list(ex.map(abs, [-1, 2, -3]))
[1, 2, 3]
"""

from __future__ import annotations

import collections
import concurrent.futures as cf
import multiprocessing
import os
from itertools import islice
from typing import Callable

import numpy as np

from postproc.errors import PostprocError
from postproc.infra.executor_base import (
    Executor,
    check_window,
    start_worker,
    worker_blas_threads,
)

__all__ = ["Executor", "SerialExecutor", "ProcessExecutor", "get_executor", "EXECUTORS"]


class SerialExecutor(Executor):
    """Run items one after another in this process (the default executor).

    Examples
    --------
    >>> ex = SerialExecutor()
    >>> list(ex.map(str.upper, ["a", "b"])), ex.describe()
    (['A', 'B'], {'executor': 'serial', 'workers': 1})
    """

    name = "serial"

    def map(self, fn, items):
        for item in items:
            yield fn(item)


class ProcessExecutor(Executor):
    """A pool of worker processes (``spawn``, so workers start clean); results in order.

    Parameters
    ----------
    workers : int, optional
        Number of worker processes; every CPU when left out.

    Raises
    ------
    PostprocError
        ``workers`` is not an integer ≥ 1.

    Examples
    --------
    The function and the items must be picklable (a module-level function, arrays,
    dataclasses); the pool is shut down when the ``with`` block ends.

    >>> with ProcessExecutor(workers=2) as ex:
    ...     list(ex.map(abs, [-3, 1, -2])), ex.describe()
    ([3, 1, 2], {'executor': 'process', 'workers': 2})
    >>> ProcessExecutor(workers=0)
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: workers must be an integer ≥ 1, not 0 (leave it out to use every
    CPU)
    """

    name = "process"

    def __init__(self, workers: int | None = None):
        if workers is None:
            workers = os.cpu_count() or 1
        if isinstance(workers, bool) or not isinstance(workers, (int, np.integer)) or workers < 1:
            raise PostprocError(f"workers must be an integer ≥ 1, not {workers!r} (leave it "
                                "out to use every CPU)")
        self.workers = int(workers)
        self._pool = cf.ProcessPoolExecutor(
            max_workers=self.workers, mp_context=multiprocessing.get_context("spawn"),
            initializer=start_worker, initargs=(worker_blas_threads(self.workers),))

    def map(self, fn, items):
        futures = [self._pool.submit(fn, item) for item in items]
        try:
            for fut in futures:
                yield fut.result()
        finally:
            for fut in futures:
                fut.cancel()

    def map_window(self, fn, items, window):
        """``map`` keeping ``window`` items in flight: the next item is taken from ``items``
        (and submitted) as each result is yielded, so reading the items overlaps the work.

        Examples
        --------
        >>> with ProcessExecutor(workers=2) as ex:
        ...     list(ex.map_window(abs, iter([-3, 1, -2, 5]), window=2))
        [3, 1, 2, 5]
        """
        check_window(window)
        it = iter(items)
        futures = collections.deque(self._pool.submit(fn, item) for item in islice(it, window))
        try:
            while futures:
                result = futures.popleft().result()
                for item in islice(it, 1):
                    futures.append(self._pool.submit(fn, item))
                yield result
        finally:
            for fut in futures:
                fut.cancel()

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


def _dask(workers: int | None = None, scheduler: str | None = None) -> Executor:
    from postproc.infra.dask_executor import DaskExecutor  # optional, imports dask lazily

    return DaskExecutor(workers=workers, scheduler=scheduler)


EXECUTORS: dict[str, Callable[..., Executor]] = {
    "serial": lambda workers=None, scheduler=None: SerialExecutor(),
    "process": lambda workers=None, scheduler=None: ProcessExecutor(workers),
    "dask": _dask,
}


def get_executor(spec: str | Executor | None = "serial", *, workers: int | None = None,
                 scheduler: str | None = None) -> Executor:
    """An executor by name (``serial``, ``process``, ``dask``) or an existing one.

    Parameters
    ----------
    spec : str, Executor or None
        A name from ``EXECUTORS`` (None means ``"serial"``), or an executor, returned as is.
    workers : int, optional
        Worker count for ``process`` and ``dask`` (every CPU when left out).
    scheduler : str, optional
        Address of a running Dask scheduler (``dask`` only).

    Returns
    -------
    Executor

    Raises
    ------
    PostprocError
        ``spec`` names no executor.

    Examples
    --------
    >>> ex = get_executor("serial")
    >>> list(ex.map(len, ["a", "bcd"])), ex.describe()
    ([1, 3], {'executor': 'serial', 'workers': 1})
    >>> get_executor(ex) is ex
    True
    >>> get_executor("gpu")
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: unknown executor 'gpu'; choose from ['dask', 'process', 'serial']
    """
    if isinstance(spec, Executor):
        return spec
    if spec is None:
        spec = "serial"
    try:
        factory = EXECUTORS[spec]
    except KeyError:
        raise PostprocError(f"unknown executor {spec!r}; choose from {sorted(EXECUTORS)}") from None
    return factory(workers=workers, scheduler=scheduler)
