"""Lazy exports for a package's face (PEP 562): a name is imported from its defining module on
first access. Every package of the three uses it (``hierarchy``, ``hierarchy.io``,
``invariants``, ``postproc``, ``postproc.methods``, …), so it lives on the lowest floor."""

from __future__ import annotations

import sys
from importlib import import_module
from typing import Any, Callable, Mapping

__all__ = ["lazy_exports"]


def lazy_exports(package: str, exports: Mapping[str, str]
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A module's ``__getattr__`` and ``__dir__`` for ``exports`` (name → defining module).

    A name is imported from its module on first access and then kept in the package's namespace
    (resolved once). ``__dir__`` lists every exported name, dunder names such as
    ``__version__`` included.

    Parameters
    ----------
    package : str
        The importing package's ``__name__`` (it must be in ``sys.modules``, as it is while its
        ``__init__`` runs).
    exports : mapping of str to str

    Returns
    -------
    (__getattr__, __dir__)

    Examples
    --------
    >>> import sys, types
    >>> package = types.ModuleType("example_package")
    >>> sys.modules["example_package"] = package
    >>> package.__getattr__, package.__dir__ = lazy_exports("example_package",
    ...                                                     {"Fraction": "fractions"})
    >>> package.Fraction(1, 3)
    Fraction(1, 3)
    >>> package.__dir__()
    ['Fraction']
    >>> package.__getattr__("nothing")
    Traceback (most recent call last):
    ...
    AttributeError: module 'example_package' has no attribute 'nothing'
    >>> del sys.modules["example_package"]
    """
    namespace = sys.modules[package].__dict__

    def __getattr__(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(exports[name]), name)
        namespace[name] = value  # resolved once
        return value

    def __dir__() -> list[str]:
        return sorted(exports)

    return __getattr__, __dir__
