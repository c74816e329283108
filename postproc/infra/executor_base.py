"""The executor interface: how a level's independent problems are mapped over workers.

Below both :mod:`postproc.infra.executors` (serial, process pool, and the registry by name) and
:mod:`postproc.infra.dask_executor`, so that neither imports the other's module to subclass it.

Examples
--------
>>> class Doubling(Executor):
...     name = "doubling"
...     def map(self, fn, items):
...         return (2 * fn(item) for item in items)
>>> with Doubling() as ex:
...     list(ex.map(abs, [-1, 2])), ex.describe()
([2, 4], {'executor': 'doubling', 'workers': 1})
"""

from __future__ import annotations

import os
from itertools import islice
from typing import Any, Callable, Iterable, Iterator

from threadpoolctl import threadpool_limits

__all__ = ["Executor", "check_window", "HUGEPAGE_ENV", "start_worker",
           "huge_pages_advised", "worker_blas_threads"]

#: The environment variable numpy reads when it is imported to decide whether to advise the
#: kernel to back arrays of 4 MB and more with transparent huge pages (``madvise``). Our worker
#: processes turn that off unless it is set (:func:`start_worker`): a part of a run in parts
#: allocates and frees block × cell arrays of hundreds of MB, and where the kernel's THP defrag
#: setting is ``madvise`` (a common default) each such allocation can stall on memory
#: compaction. Three parts of the 10M run took 31.2–31.6 s with it off against 33.8–33.9 s
#: (system CPU 2 s against 4.5 s; ``docs/scale2020.md``, "Huge pages in the workers").
HUGEPAGE_ENV = "NUMPY_MADVISE_HUGEPAGE"


def start_worker(blas_threads: int | None = None) -> None:
    """Run in each worker process as it starts: numpy's huge-page advice off, unless
    :data:`HUGEPAGE_ENV` is set (then numpy has followed it already); and, when
    ``blas_threads`` is given, the BLAS and OpenMP thread pools of the process limited to it
    (:func:`worker_blas_threads`: a pool of as many workers as cores must not also run a BLAS
    thread per core in each worker).

    Examples
    --------
    >>> import multiprocessing, concurrent.futures as cf
    >>> with cf.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"),
    ...                             initializer=start_worker) as pool:
    ...     advised = pool.submit(huge_pages_advised).result()
    >>> advised == (os.environ.get(HUGEPAGE_ENV, "0") != "0")
    True
    """
    setter = getattr(_multiarray(), "_set_madvise_hugepage", None)
    if HUGEPAGE_ENV not in os.environ and setter is not None:
        setter(False)
    if blas_threads is not None:
        threadpool_limits(limits=blas_threads)


def worker_blas_threads(workers: int, cores: int | None = None) -> int:
    """The BLAS threads each of ``workers`` worker processes may run: the cores shared out,
    at least one. numpy's BLAS (OpenBLAS) starts a thread per core in every process; with a
    worker per core that is cores² threads, and OpenBLAS's threads wait for each other by
    spinning, so products of many short rows (the GLS's ``units × 4`` by ``4 × 4``) ran up to
    15 times slower in a busy process than on one thread (``docs/gls.md``, "Threads in the
    workers").

    Examples
    --------
    >>> worker_blas_threads(2, cores=2), worker_blas_threads(1, cores=2), worker_blas_threads(
    ...     3, cores=8)
    (1, 2, 2)
    """
    cores = cores if cores is not None else (os.cpu_count() or 1)
    return max(1, cores // max(1, workers))


def huge_pages_advised() -> bool | None:
    """Whether numpy advises huge pages for large arrays in this process (``None``: this numpy
    cannot say).

    Examples
    --------
    >>> huge_pages_advised() in (True, False, None)
    True
    """
    getter = getattr(_multiarray(), "_get_madvise_hugepage", None)
    return None if getter is None else bool(getter())


def _multiarray() -> Any:
    """numpy's compiled core module (``numpy._core.multiarray``; ``numpy.core`` before numpy 2),
    where the huge-page switch lives; ``None`` if neither exists."""
    import importlib

    for name in ("numpy._core.multiarray", "numpy.core.multiarray"):
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    return None


def check_window(window: Any) -> int:
    """``window`` of :meth:`Executor.map_window`, checked: a positive integer.

    Examples
    --------
    >>> check_window(4)
    4
    >>> check_window(0)
    Traceback (most recent call last):
    ...
    ValueError: window must be a positive integer, not 0
    """
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise ValueError(f"window must be a positive integer, not {window!r}")
    return window


class Executor:
    """The interface: ``map`` (ordered results) and ``close``; usable as a context manager.

    Subclasses set ``name`` and implement ``map(fn, items)``, returning ``fn(item)`` for each
    item in the order of ``items``; ``close`` releases workers (the default has none) and runs
    when a ``with`` block ends. ``describe`` is what a run records in its provenance.

    Examples
    --------
    >>> class Squares(Executor):
    ...     name = "squares"
    ...     def map(self, fn, items):
    ...         return (fn(item) ** 2 for item in items)
    >>> with Squares() as ex:
    ...     list(ex.map(len, ["ab", "abc"]))
    [4, 9]
    >>> Squares().describe()
    {'executor': 'squares', 'workers': 1}
    >>> list(Executor().map(abs, [1]))
    Traceback (most recent call last):
    ...
    NotImplementedError
    """

    name = "base"
    workers = 1

    def map(self, fn: Callable[[Any], Any], items: Iterable[Any]) -> Iterator[Any]:
        raise NotImplementedError

    def map_window(self, fn: Callable[[Any], Any], items: Iterable[Any],
                   window: int) -> Iterator[Any]:
        """``map`` over an iterable that should not be read ahead: at most ``window`` items
        are taken from ``items`` beyond the results yielded so far (``map`` may take them all
        at once, and large items — a part's rows — would all be in memory). Results in order.

        This default maps chunks of ``window`` items one after the other; an executor that
        can keep ``window`` items in flight as results come back overrides it.

        Examples
        --------
        >>> from postproc.infra.executors import SerialExecutor
        >>> taken = []
        >>> def numbers():
        ...     for i in range(5):
        ...         taken.append(i)
        ...         yield i
        >>> results = SerialExecutor().map_window(abs, numbers(), window=2)
        >>> next(results), taken          # the first chunk only
        (0, [0, 1])
        >>> list(results)
        [1, 2, 3, 4]
        """
        check_window(window)
        it = iter(items)
        while chunk := list(islice(it, window)):
            yield from self.map(fn, chunk)

    def close(self) -> None:
        pass

    def __enter__(self) -> "Executor":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def describe(self) -> dict[str, Any]:
        return {"executor": self.name, "workers": self.workers}
