"""The toolkit's base exception, and the ``hierarchy`` package's.

``hierarchy`` is the lowest package (data flows hierarchy → invariants → postproc), so the one
base of every toolkit error lives here: :class:`DappError`, with
:class:`HierarchyError`, :class:`invariants.errors.SpecError` and
:class:`postproc.errors.PostprocError` beneath it.
"""

__all__ = ["DappError", "HierarchyError", "AccountingError"]


class DappError(ValueError):
    """The base of every error of the toolkit (``hierarchy``, ``invariants``, ``postproc``).

    Catch it to handle any bad input to the toolkit at once (the ``postproc`` command line maps
    it to exit code 1 with its message). Messages name the offending thing and say how to fix it.

    Examples
    --------
    >>> from invariants.errors import SpecError
    >>> try:
    ...     raise SpecError("invariant 'tot': unknown level 'county'; levels are nation, state")
    ... except DappError as exc:
    ...     print(type(exc).__name__, "-", exc)
    SpecError - invariant 'tot': unknown level 'county'; levels are nation, state
    """


class HierarchyError(DappError):
    """Bad input to the data model: schema, queries, geography, microdata, budgets or measurements.

    Messages name the offending thing (attribute, query, unit geocode, file and row) and say how to
    fix it.

    Examples
    --------
    >>> issubclass(HierarchyError, DappError) and issubclass(HierarchyError, ValueError)
    True
    """


class AccountingError(HierarchyError):
    """Bad input to the privacy accountant (:mod:`hierarchy.accounting`): a budget, δ, a
    sensitivity, a margin of error or a Rényi order out of range. Messages name the value and its
    valid range.

    Examples
    --------
    >>> from hierarchy.accounting import PrivacyLoss
    >>> PrivacyLoss.of(epsilon=1, delta=2)
    Traceback (most recent call last):
    ...
    hierarchy.errors.AccountingError: delta must be in the open interval (0, 1), not 2; ...
    """
