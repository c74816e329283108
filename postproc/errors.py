"""The base exception of the ``postproc`` package."""

from hierarchy.errors import DappError

__all__ = ["PostprocError"]


class PostprocError(DappError):
    """Bad input to a post-processor, the privacy accountant, inference or the CLI.

    Every ``postproc`` error derives from this class, and it from the toolkit's base
    :class:`hierarchy.errors.DappError`, so a caller (and the CLI, which maps it to exit code 1)
    can catch them all at once. Messages name the offending thing (level, query,
    unit geocode, parameter, file and line) and say how to fix it.

    Examples
    --------
    >>> try:
    ...     raise PostprocError("delta must be in (0, 1), not 2; pass e.g. --delta 1e-10")
    ... except ValueError as exc:
    ...     print(exc)
    delta must be in (0, 1), not 2; pass e.g. --delta 1e-10
    """
