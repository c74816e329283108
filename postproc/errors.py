"""The base exception of the ``postproc`` package, and the check every post-processor that keeps no
invariants makes of its ``spec``."""

from typing import Any

from hierarchy.errors import DappError

__all__ = ["PostprocError", "refuse_spec"]


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


def refuse_spec(method: str, spec: Any) -> None:
    """Refuse a spec with invariants or constraints for a method that keeps none.

    Parameters
    ----------
    method : str
        The post-processor's name, for the message.
    spec : Spec or None
        ``None`` or a spec without invariants and constraints passes.

    Raises
    ------
    PostprocError
        The spec has invariants or constraints.

    Examples
    --------
    >>> from invariants.spec import Spec
    >>> refuse_spec("hay", None)
    >>> refuse_spec("hay", Spec.e2e(["nation", "state"]))
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: hay does not honour invariants or constraints; run it without a spec, or use topdown or sampling
    """
    if spec is not None and (getattr(spec, "invariants", ()) or getattr(spec, "constraints", ())):
        raise PostprocError(f"{method} does not honour invariants or constraints; run it without "
                            f"a spec, or use topdown or sampling")
