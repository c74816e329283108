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

from itertools import islice
from typing import Any, Callable, Iterable, Iterator

__all__ = ["Executor", "check_window"]


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
