"""The base exception of the ``invariants`` package."""

from hierarchy.errors import DappError

__all__ = ["SpecError"]


class SpecError(DappError):
    """A bad invariant/constraint spec, or invariant data that cannot satisfy it.

    Messages name the offending invariant or constraint, the level and unit (geocode) and, for
    specs read from a file, the file and line — and say how to fix it.

    Examples
    --------
    >>> issubclass(SpecError, DappError) and issubclass(SpecError, ValueError)
    True
    """
