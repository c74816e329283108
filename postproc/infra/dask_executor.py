"""A Dask executor: a level's parent problems mapped over a ``dask.distributed`` cluster.

:class:`DaskExecutor` implements the :class:`~postproc.infra.executors.Executor` interface
(``map`` with results in input order, ``close``, ``describe``, context manager) on a
``distributed.Client``. Given a scheduler address it connects to that cluster; otherwise it
starts a :class:`distributed.LocalCluster` of worker *processes* on loopback, which it owns and
closes.

Failures are of two kinds, and are handled differently:

* **A task raises** (:class:`~postproc.infra.solvers.SolverError`, an infeasible node, a bug): the
  exception is deterministic, so running again would only repeat it. Tasks are submitted with
  ``retries=0`` and ``map`` re-raises the task's own exception — same type, same message, with
  the remote traceback — and cancels the items still in flight.
* **A worker is lost** (killed, out of memory, its machine gone): the scheduler notices and
  reschedules the tasks that were running on it on other workers. It gives up on a task only
  when more than ``distributed.scheduler.allowed-failures`` (default 3) workers died while
  running it, and then fails the task with :class:`distributed.KilledWorker`; ``map``
  resubmits such an item (a fresh task, so a fresh count) up to ``retries`` times before
  raising a :class:`~postproc.errors.PostprocError`.

Distributed's own ``retries=`` argument of ``Client.submit`` is set to 0: it re-runs tasks whose
function raised (the first kind) and does not apply to lost workers (the second), for which the
scheduler uses ``allowed-failures`` instead.

Finished work survives a lost worker: while the caller iterates, ``map`` gathers every finished
result to the client as soon as it is reported (all that are ready, in one round trip, while
waiting for the next result in order) and then releases its task, so a worker that dies
afterwards holds nothing still needed. (If the caller pauses between results, tasks that finish
meanwhile stay on their workers until it resumes; one lost then is recomputed — slower, still
correct.)

Examples
--------
>>> with DaskExecutor(workers=1) as ex:     # a one-worker LocalCluster on 127.0.0.1
...     list(ex.map(abs, [-1, 2, -3]))
[1, 2, 3]
"""

from __future__ import annotations

import logging
import os
import uuid
from typing import Any, Callable, Iterable, Iterator, Sequence

from postproc.errors import PostprocError
from postproc.infra.executor_base import HUGEPAGE_ENV, Executor

__all__ = ["DaskExecutor", "LOCAL_WORKER_CONFIG", "local_worker_config"]

#: Items at least this large (``dask.sizeof``: arrays, Arrow tables, lists and tuples of them)
#: are scattered to the workers before their task is submitted, instead of travelling inside
#: the task graph (which Dask warns about above 10 MB: a run in parts hands each part's rows to
#: a worker to tabulate).
SCATTER_BYTES = 4 << 20
_DATA_LOSSES = 5      # an item's scattered data lost with a worker: sent again up to this often

#: Dask settings for the workers of a local cluster. Dask's nanny starts every worker with
#: ``MALLOC_TRIM_THRESHOLD_=65536``; setting it at all turns off glibc's adaptive mmap
#: threshold, so every mid-sized numpy temporary is mapped and unmapped again, and TopDown's
#: node solving ran 20 % slower in a Dask worker than in a process-pool worker (80 block-group
#: nodes: 2.28 s against 1.90 s; unset, 1.94 s: ``benchmarks/pl94/dask_worker_malloc.md``).
#: ``None`` unsets it. The workers' statistical profiler (a stack sample every 10 ms, for a
#: dashboard a local cluster does not serve) is off.
#: Workers of an external scheduler are started by their own ``dask worker``; give them the
#: same settings (``docs/topdown.md``, "Running at scale").
LOCAL_WORKER_CONFIG: dict[str, Any] = {
    "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None,
    "distributed.worker.profile.enabled": False,
}


def local_worker_config() -> dict[str, Any]:
    """:data:`LOCAL_WORKER_CONFIG`, and numpy's huge-page advice off in the workers as in the
    process pool's (:func:`~postproc.infra.executor_base.start_worker`) unless this process's
    environment sets :data:`~postproc.infra.executor_base.HUGEPAGE_ENV` (the workers then
    inherit it).

    Examples
    --------
    >>> config = local_worker_config()
    >>> config["distributed.worker.profile.enabled"]
    False
    >>> (HUGEPAGE_ENV in os.environ) or config[
    ...     "distributed.nanny.pre-spawn-environ.NUMPY_MADVISE_HUGEPAGE"] == "0"
    True
    """
    if HUGEPAGE_ENV in os.environ:
        return dict(LOCAL_WORKER_CONFIG)
    return {**LOCAL_WORKER_CONFIG, f"distributed.nanny.pre-spawn-environ.{HUGEPAGE_ENV}": "0"}


class _Chunk:
    """Picklable callable: ``fn`` over a list of items (one Dask task for several items)."""

    def __init__(self, fn: Callable[[Any], Any]):
        self.fn = fn

    def __call__(self, items: Sequence[Any]) -> list[Any]:
        return [self.fn(item) for item in items]


def _positive(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise PostprocError(f"{name} must be a positive integer, not {value!r}")
    return value


class DaskExecutor(Executor):
    """Map work items over a Dask cluster; results come back in input order.

    Parameters
    ----------
    workers : int, optional
        Without ``scheduler``: worker processes of the local cluster (default: the CPU count).
        With ``scheduler``: wait until at least this many workers are connected (default 1).
    scheduler : str, optional
        Address of a running Dask scheduler, e.g. ``'tcp://10.0.0.5:8786'``. Default: start a
        :class:`distributed.LocalCluster` on 127.0.0.1 (no dashboard, logs at WARNING), owned
        and closed by this executor.
    threads_per_worker : int
        Threads per local worker process (default 1: the solvers are single-threaded numerical
        code that holds the GIL for much of its work, so processes, not threads, give
        parallelism). Ignored with ``scheduler``.
    retries : int
        Resubmissions of an item after the scheduler gave up on it because the workers running
        it kept dying (:class:`distributed.KilledWorker`). Exceptions raised by the task itself
        are never retried.
    allowed_failures : int, optional
        Local cluster only: worker deaths a task may witness before the scheduler fails it with
        ``KilledWorker`` (default: ``distributed.scheduler.allowed-failures``, 3). An external
        scheduler uses its own setting.
    chunksize : int
        Items per Dask task. ``topdown`` already hands over batches of parents sized to amortize
        the per-task overhead (a few milliseconds), so the default is 1; raise it only when
        mapping many tiny items.
    timeout : float
        Seconds to wait for the scheduler connection and for ``workers`` to join it.

    Raises
    ------
    PostprocError
        Invalid arguments, no scheduler at ``scheduler``, or too few workers within
        ``timeout``.

    Examples
    --------
    >>> ex = DaskExecutor(workers=1, chunksize=2)     # 3 tasks of up to 2 items
    >>> list(ex.map(lambda x: x * x, range(5)))
    [0, 1, 4, 9, 16]
    >>> ex.close()
    >>> info = ex.describe()                          # still valid, for provenance
    >>> info["executor"], info["workers"], info["threads"], info["local_cluster"]
    ('dask', 1, 1, True)
    >>> info["scheduler"].startswith("tcp://127.0.0.1:")
    True
    """

    name = "dask"

    def __init__(self, workers: int | None = None, scheduler: str | None = None, *,
                 threads_per_worker: int = 1, retries: int = 1,
                 allowed_failures: int | None = None, chunksize: int = 1,
                 timeout: float = 30.0):
        import dask
        from distributed import Client, LocalCluster

        if workers is not None:
            _positive("workers", workers)
        self.threads_per_worker = _positive("threads_per_worker", threads_per_worker)
        self.chunksize = _positive("chunksize", chunksize)
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise PostprocError(f"retries must be a non-negative integer, not {retries!r}")
        self.retries = retries
        self._cluster = None
        self._client = None
        if scheduler is not None:
            if allowed_failures is not None:
                raise PostprocError("allowed_failures applies to a local cluster only; set "
                                    "distributed.scheduler.allowed-failures on the scheduler "
                                    f"at {scheduler!r} instead")
            try:
                self._client = Client(scheduler, timeout=timeout, set_as_default=False)
            except (OSError, TimeoutError) as exc:
                raise PostprocError(f"cannot connect to the Dask scheduler at {scheduler!r} "
                                    f"({exc}); start one with `dask scheduler`, or omit "
                                    "--scheduler for a local cluster") from exc
            try:
                self._client.wait_for_workers(workers or 1, timeout=timeout)
            except (OSError, TimeoutError) as exc:
                self._client.close()
                raise PostprocError(f"fewer than {workers or 1} workers joined the Dask "
                                    f"scheduler at {scheduler!r} within {timeout:g} s; start "
                                    f"workers with `dask worker {scheduler}`") from exc
            info = self._client.scheduler_info(n_workers=-1)
            self.workers = len(info["workers"])
            self.threads = sum(w["nthreads"] for w in info["workers"].values())
        else:
            if allowed_failures is not None and (isinstance(allowed_failures, bool) or not
                                                 isinstance(allowed_failures, int)
                                                 or allowed_failures < 0):
                raise PostprocError("allowed_failures must be a non-negative integer, not "
                                    f"{allowed_failures!r}")
            self.workers = int(workers or os.cpu_count() or 1)
            self.threads = self.workers * self.threads_per_worker
            scheduler_kwargs: dict[str, Any] = {"dashboard_address": "127.0.0.1:0"}
            if allowed_failures is not None:
                scheduler_kwargs["allowed_failures"] = allowed_failures
            # dashboard_address=None turns the dashboard off, but the scheduler still serves
            # its HTTP health routes: on a free loopback port, not the shared default 8787.
            with dask.config.set(local_worker_config()):
                self._cluster = LocalCluster(
                    n_workers=self.workers, threads_per_worker=self.threads_per_worker,
                    processes=True, host="127.0.0.1", dashboard_address=None,
                    scheduler_kwargs=scheduler_kwargs, silence_logs=logging.WARNING)
            try:
                self._client = Client(self._cluster, timeout=timeout, set_as_default=False)
            except BaseException:
                self._cluster.close()
                raise
        self.scheduler = self._client.scheduler.address
        self.local_cluster = self._cluster is not None

    def map(self, fn: Callable[[Any], Any], items: Iterable[Any]) -> Iterator[Any]:
        """``fn`` over ``items`` on the cluster; an iterator of results in input order.

        Items are submitted when iteration starts; an item of at least ``SCATTER_BYTES`` is
        scattered to the workers first and its task given the future. Results are yielded as
        soon as every earlier one is in; results that finish early are gathered to the client
        and their tasks (and scattered items) released meanwhile.

        Raises
        ------
        Exception
            Whatever ``fn`` raised on an item, with its type and message (the first in
            completion order); items still running are cancelled.
        PostprocError
            The executor is closed, or an item's workers kept dying after ``retries``
            resubmissions.

        Examples
        --------
        >>> from postproc.infra.solvers import SolverError
        >>> def solve(parent):
        ...     if parent == "02":
        ...         raise SolverError("every backend failed on parent '02'")
        ...     return int(parent)
        >>> with DaskExecutor(workers=1) as ex:
        ...     list(ex.map(solve, ["01", "02", "03"]))
        Traceback (most recent call last):
        ...
        postproc.infra.solvers.base.SolverError: every backend failed on parent '02'
        """
        if self._client is None:
            raise PostprocError("this DaskExecutor is closed; create a new one")
        items = list(items)
        if self.chunksize > 1:
            groups = [items[i:i + self.chunksize] for i in range(0, len(items), self.chunksize)]
            return (r for group in self._map(_Chunk(fn), groups) for r in group)
        return self._map(fn, items)

    def _map(self, fn: Callable[[Any], Any], items: list[Any]) -> Iterator[Any]:
        from dask.sizeof import sizeof
        from dask.utils import funcname
        from distributed import KilledWorker, as_completed
        from distributed.client import FutureCancelledError

        client = self._client
        prefix = f"{funcname(fn)}-{uuid.uuid4().hex}"

        scattered: dict[int, Any] = {}     # large items, sent to the workers as data

        def argument(i: int) -> Any:
            if i not in scattered and sizeof(items[i]) >= SCATTER_BYTES:
                scattered[i] = client.scatter([items[i]], hash=False)[0]
            return scattered.get(i, items[i])

        def submit(i: int, submission: int):
            return client.submit(fn, argument(i), key=f"{prefix}-{i}-{submission}", retries=0)

        pending = {submit(i, 0): i for i in range(len(items))}
        attempts = [0] * len(items)
        lost = [0] * len(items)       # times an item's scattered data was lost with a worker
        resubmissions = 0

        def resubmit(i: int) -> None:
            nonlocal resubmissions
            resubmissions += 1
            retry = submit(i, resubmissions)      # a fresh key for every submission
            pending[retry] = i
            done.add(retry)
        results: dict[int, Any] = {}
        done = as_completed(list(pending), loop=client.loop)
        next_index = 0
        try:
            while next_index < len(items):
                while next_index in results:
                    yield results.pop(next_index)
                    next_index += 1
                if next_index == len(items):
                    break
                if done.is_empty():  # cannot happen: every unfinished item is in `done`
                    raise RuntimeError(f"DaskExecutor.map lost track of item {next_index}")
                finished = []
                for fut in done.next_batch(block=True):
                    if fut.status == "finished":
                        finished.append(fut)
                    elif fut.status == "error":
                        i = pending.pop(fut)
                        exc = fut.exception()
                        if not isinstance(exc, KilledWorker):
                            fut.result()  # re-raise the task's own exception and traceback
                        if attempts[i] >= self.retries:
                            raise PostprocError(
                                f"item {i} of this map was given up: the Dask workers running "
                                f"it kept dying ({attempts[i] + 1} submission(s), each failed "
                                f"by the scheduler with KilledWorker: {exc}). The task likely "
                                "exhausts a worker's memory or crashes its process; give "
                                "workers more memory or use smaller batches"
                            ) from exc
                        attempts[i] += 1
                        fut.release()
                        resubmit(i)
                    elif fut.status == "cancelled" and pending[fut] in scattered:
                        # its scattered item was lost with a worker: scatter it again (not the
                        # item's fault, so not counted against `retries`; bounded all the same)
                        i = pending.pop(fut)
                        lost[i] += 1
                        if lost[i] > _DATA_LOSSES:
                            raise PostprocError(
                                f"item {i} of this map was given up: its data was lost with a "
                                f"Dask worker {lost[i]} times; the workers keep dying")
                        fut.release()
                        scattered.pop(i)
                        resubmit(i)
                    elif fut.status == "cancelled":
                        raise PostprocError(f"item {pending[fut]} of this map was cancelled "
                                            "(the Dask scheduler or its client shut down)")
                    else:  # lost after finishing: the scheduler recomputes it; wait again
                        done.add(fut)
                if finished:
                    try:
                        values = client.gather(finished)
                    except FutureCancelledError:
                        # a result lost with its worker between the report and the gather, and
                        # with it a scattered item the scheduler cannot recompute it from: look
                        # at these futures again (the cancelled one is sent again above)
                        for fut in finished:
                            done.add(fut)
                        continue
                    for fut, value in zip(finished, values):
                        i = pending.pop(fut)
                        results[i] = value
                        fut.release()
                        scattered.pop(i, None)
        finally:
            done.clear()
            scattered.clear()
            if pending and self._client is not None:
                client.cancel(list(pending))
            pending.clear()

    def close(self) -> None:
        """Close the client and, if this executor started it, the local cluster (idempotent)."""
        client, cluster = self._client, self._cluster
        self._client = self._cluster = None
        if client is not None:
            client.close()
        if cluster is not None:
            cluster.close()

    def describe(self) -> dict[str, Any]:
        """Executor name, workers, total threads, scheduler address, whether it was local.

        Valid after :meth:`close` too (the values at connection time), so a result's
        provenance can record it.
        """
        return {"executor": self.name, "workers": self.workers, "threads": self.threads,
                "scheduler": self.scheduler, "local_cluster": self.local_cluster}
