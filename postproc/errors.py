"""The base exception of the ``postproc`` package, and the checks post-processors make of their
``spec``: one that keeps no invariants refuses one (:func:`refuse_spec`); one that keeps them
requires that the confidential data were checked against its constraints before they were
measured (:func:`require_checked_spec`)."""

import contextlib
import contextvars
import warnings
from typing import Any, Iterator

from hierarchy.errors import ConfidentialDataError, DappError

__all__ = ["PostprocError", "ConfidentialInputError", "refuse_spec", "require_checked_spec",
           "UncheckedSpecWarning", "spec_checked"]


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


class ConfidentialInputError(PostprocError, ConfidentialDataError):
    """A :class:`hierarchy.errors.ConfidentialDataError` raised by ``postproc`` (SafeTab's
    inputs, say): a :class:`PostprocError` whose message has a public part and a confidential
    detail (see :mod:`postproc.gate`).

    Examples
    --------
    >>> exc = ConfidentialInputError("column 'age': 3 records are outside 0..115, e.g. 130",
    ...                              public="column 'age' holds values outside 0..115")
    >>> isinstance(exc, PostprocError), exc.public
    (True, "column 'age' holds values outside 0..115")
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
    postproc.errors.PostprocError: hay does not honour invariants or constraints; run it without a
    spec, or use topdown or sampling
    """
    if spec is not None and (getattr(spec, "invariants", ()) or getattr(spec, "constraints", ())):
        raise PostprocError(f"{method} does not honour invariants or constraints; run it without "
                            f"a spec, or use topdown or sampling")


class UncheckedSpecWarning(UserWarning):
    """A simulation (or measurements made outside the toolkit) post-processed under
    constraints its data were never checked against (see :func:`require_checked_spec`).

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings():          # make it an error, e.g. in a test suite
    ...     warnings.simplefilter("error", UncheckedSpecWarning)
    ...     issubclass(UncheckedSpecWarning, UserWarning)
    True
    """


_CHECKED = contextvars.ContextVar("postproc_spec_checked", default=False)


@contextlib.contextmanager
def spec_checked() -> Iterator[None]:
    """Within the block, :func:`require_checked_spec` passes: its caller checked already (a
    post-processor that calls another, e.g. the registry's wrapper calling TopDown).

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> from invariants.spec import Constraint, Spec
    >>> spec = Spec(constraints=[Constraint("no_dorms", type="structural_zero",
    ...                                     query="recode(hhgq: college=5)")])
    >>> unchecked = SimpleNamespace(provenance={"randomness": {"mode": "release"}})
    >>> with spec_checked():
    ...     require_checked_spec("topdown", unchecked, spec)       # checked by the caller
    """
    token = _CHECKED.set(True)
    try:
        yield
    finally:
        _CHECKED.reset(token)


def require_checked_spec(method: str, noisy: Any, spec: Any) -> None:
    """Require that the confidential data behind ``noisy`` were checked against ``spec``'s
    constraints before they were measured.

    A structural zero or bound the data contradict cannot be kept honestly: TopDown would
    silently empty the cell. ``postproc run`` refuses such data before measuring them, and so
    does :func:`hierarchy.measurement.measure` given ``spec=``; the measurements then record
    the spec (``provenance["spec_checked"]``). A spec with constraints that the recorded one
    does not cover (:meth:`invariants.spec.Spec.covers`) is refused for release-mode
    measurements, and draws an :class:`UncheckedSpecWarning` in a simulation and for
    measurements made outside the toolkit (``NoisyHierarchy.from_measurements``: their data
    are not here to be checked). A spec without constraints needs no check (its invariants are
    published from the data).

    Parameters
    ----------
    method : str
        The post-processor, for the message.
    noisy : NoisyHierarchy
    spec : Spec or None

    Raises
    ------
    PostprocError
        Release-mode measurements not checked against ``spec`` (the message states no number).

    Examples
    --------
    >>> from hierarchy import E2E_1940, Budget, Session, e2e_workload, tabulate
    >>> from invariants.spec import Constraint, Spec
    >>> persons = pd.DataFrame({"state": ["01", "02"], "hhgq": [0, 0], "votingage": [1, 1],
    ...                         "hispanic": [0, 0], "cenrace": [0, 1]})
    >>> truth = tabulate(persons, schema=E2E_1940, levels=["nation", "state"])
    >>> spec = Spec(constraints=[Constraint("no_dorms", type="structural_zero",
    ...                                     query="recode(hhgq: college=5)")])
    >>> session = Session(truth, 2)                 # release mode: the data and their total ε
    >>> half = Budget.e2e(1, truth.levels)
    >>> checked = session.measure(e2e_workload(E2E_1940), half, spec=spec)
    >>> require_checked_spec("topdown", checked, spec)         # release mode, checked: passes
    >>> unchecked = session.measure(e2e_workload(E2E_1940), half)
    >>> require_checked_spec("topdown", unchecked, spec)
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: topdown: these release-mode measurements were not made with
    spec=..., so the confidential data were never checked against the spec's constraints ...
    """
    if spec is None or not getattr(spec, "constraints", ()) or _CHECKED.get():
        return
    provenance = getattr(noisy, "provenance", {}) or {}
    recorded = provenance.get("spec_checked")
    if recorded is not None:
        from invariants.spec import Spec

        try:
            if Spec.from_dict(recorded).covers(spec):
                return
        except DappError:
            pass                          # an unreadable record checks nothing
    mode = (provenance.get("randomness") or {}).get("mode")
    unchecked = ("the confidential data were never checked against the spec's constraints (a "
                 "structural zero or bound the data contradict would be silently enforced)")
    if mode not in ("release", "simulation"):     # made elsewhere: no truth to check here
        warnings.warn(f"{method}: these measurements were made outside this toolkit (or record "
                      f"no randomness), so {unchecked}; check the data against the spec where "
                      f"they are (Spec.check_data(truth))", UncheckedSpecWarning, stacklevel=3)
        return
    message = (f"{method}: these {'release-mode' if mode == 'release' else 'simulation'} "
               f"measurements were not made with spec=..., so {unchecked}. Measure with "
               f"measure(truth, ..., spec=spec): it refuses data that break the spec before "
               f"drawing any noise, and records the check")
    if mode == "release":
        raise PostprocError(message)
    warnings.warn(message, UncheckedSpecWarning, stacklevel=3)
