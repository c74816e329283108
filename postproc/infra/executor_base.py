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

from typing import Any, Callable, Iterable, Iterator

__all__ = ["Executor"]


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

    def close(self) -> None:
        pass

    def __enter__(self) -> "Executor":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def describe(self) -> dict[str, Any]:
        return {"executor": self.name, "workers": self.workers}
