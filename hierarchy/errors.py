"""The toolkit's base exception, and the ``hierarchy`` package's.

``hierarchy`` is the lowest package (data flows hierarchy → invariants → postproc), so the one
base of every toolkit error lives here: :class:`DappError`, with
:class:`HierarchyError`, :class:`invariants.errors.SpecError` and
:class:`postproc.errors.PostprocError` beneath it.
"""

__all__ = ["DappError", "HierarchyError", "AccountingError", "ConfidentialDataError"]


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


class ConfidentialDataError(HierarchyError):
    """The confidential data fail a check: a message in two parts, one that may be shown in
    release mode and one that may not.

    ``str(exc)`` is the full message (:attr:`detail`): the file, counts, row numbers and example
    values — what a simulation, or a user reading their own data in Python, needs to fix it.
    :attr:`public` says what is wrong without anything computed from the data: the column or
    constraint and the rule it breaks, and the fix. It does not name the file: :attr:`source`
    (the path or table the records came from) and :attr:`role` (``"persons"``, ``"units"``) do,
    so that whoever shows the message can name the file by its configuration key instead
    (:meth:`public_message`). The toolkit's commands decide by the randomness mode what is
    shown (``docs/release.md``).

    Parameters
    ----------
    detail : str
        The full message.
    public : str
        The message without any count, row number, value or path derived from the data.
    source : str, optional
        The file (as given) or table the records came from.
    role : str, optional
        What the source holds, to name it when it has no configuration key.
    has_detail : bool, optional
        Whether :attr:`detail` says more than :attr:`public` and the source; by default
        whenever it is neither the public message nor ``"<source>: <public>"``.

    Examples
    --------
    >>> exc = ConfidentialDataError(
    ...     "/data/p.csv: column 'age': 2 value(s) outside 0..1, e.g. 7 at rows 3, 9",
    ...     public="column 'age' holds values outside 0..1", source="/data/p.csv",
    ...     role="persons")
    >>> str(exc)
    "/data/p.csv: column 'age': 2 value(s) outside 0..1, e.g. 7 at rows 3, 9"
    >>> exc.public_message({"/data/p.csv": "[data] persons"})
    "[data] persons: column 'age' holds values outside 0..1"
    >>> exc.public_message()
    "the persons data: column 'age' holds values outside 0..1"
    >>> exc.with_context(public_suffix=" (see the blocks file)").public
    "column 'age' holds values outside 0..1 (see the blocks file)"
    """

    def __init__(self, detail: str, *, public: str, source: str | None = None,
                 role: str | None = None, has_detail: bool | None = None):
        super().__init__(detail)
        self.detail = detail
        self.public = public
        self.source = None if source is None else str(source)
        self.role = role
        if has_detail is None:
            has_detail = detail not in (public, f"{self.source}: {public}")
        self.has_detail = bool(has_detail)

    def __reduce__(self):          # pickled across worker processes: keep every part
        return (_rebuild_confidential, (type(self), self.detail, self.public, self.source,
                                        self.role, self.has_detail))

    def public_message(self, names: dict[str, str] | None = None) -> str:
        """:attr:`public`, prefixed by the source's name in ``names`` (path → e.g.
        ``"[data] persons"``), else by its role (``"the persons data"``)."""
        if self.source is None:
            return self.public
        name = (names or {}).get(self.source) or f"the {self.role or 'input'} data"
        return f"{name}: {self.public}"

    def with_context(self, *, detail_suffix: str = "", public_suffix: str = "",
                     detail_prefix: str = "", public_prefix: str = ""
                     ) -> "ConfidentialDataError":
        """The same error with text added to its parts (e.g. where the geography came from)."""
        return type(self)(detail_prefix + self.detail + detail_suffix,
                          public=public_prefix + self.public + public_suffix,
                          source=self.source, role=self.role,
                          has_detail=self.has_detail or bool(detail_prefix or detail_suffix))


def _rebuild_confidential(kind, detail, public, source, role, has_detail
                          ) -> ConfidentialDataError:
    return kind(detail, public=public, source=source, role=role, has_detail=has_detail)
