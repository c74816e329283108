"""What a registered post-processor is: :class:`PostProcessor` (the function, its promises and
its options' types), the hooks of a level-wise method (:class:`LevelCheckpoint`), and the errors
of a broken promise or a bad option. The registry (:mod:`postproc.methods.registry`) holds them.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import inspect
import math
import numbers
import types
import typing
from dataclasses import dataclass
from typing import Any, Callable, Literal, Mapping, Sequence

import numpy as np

from postproc.errors import PostprocError, require_checked_spec, spec_checked
from postproc.result import Result

__all__ = ["PostProcessor", "PromiseError", "OptionError", "LevelCheckpoint", "check_promises"]


@dataclass(frozen=True)
class LevelCheckpoint:
    """The hooks of a level-wise method (one that solves the geography level by level, as
    TopDown): resume below levels already done, and hear of each level as it finishes — what a
    run directory's checkpoint needs. ``postprocess(..., checkpoint=LevelCheckpoint(...))``;
    a method that is not level-wise refuses it.

    Parameters
    ----------
    done : sequence of numpy arrays
        The histograms of the first ``len(done)`` levels, taken as given (the method solves the
        levels below them).
    on_level : callable ``(level_index, histograms, partial_result) -> None``, optional
        Called after each level the method solves.
    reports : sequence of dicts
        The failsafe reports of the levels done (each names its ``level``): the result carries
        them first, so its promises are checked with every relaxed node known.

    Examples
    --------
    >>> from postproc.methods import postprocess
    >>> from hierarchy import E2E_1940, Budget, e2e_workload, measure, synthesize_1940, tabulate
    >>> from invariants.spec import Invariant, Spec
    >>> levels = ["nation", "state"]
    >>> truth = tabulate(synthesize_1940(500, seed=1).persons, schema=E2E_1940, levels=levels)
    >>> spec = Spec([Invariant("tot", "all")])
    >>> noisy = measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, levels), rng=2, spec=spec)
    >>> whole = postprocess(noisy, "topdown", spec)
    >>> heard = []
    >>> again = postprocess(noisy, "topdown", spec, checkpoint=LevelCheckpoint(
    ...     whole.histograms[:1], lambda li, hist, partial: heard.append(li)))
    >>> heard, bool((again.histograms[1] == whole.histograms[1]).all())
    ([1], True)
    """

    done: Sequence[Any] = ()
    on_level: Callable[[int, Any, Result], None] | None = None
    reports: Sequence[Mapping[str, Any]] = ()


class OptionError(PostprocError):
    """An option of a post-processor with a value of the wrong type or out of its range, or
    one the method does not take; ``option`` names it (a config file locates its line).

    Examples
    --------
    >>> from postproc.methods import get
    >>> try:
    ...     get("sampling").check_options({"sweeps": "200"})
    ... except OptionError as exc:
    ...     print(exc.option, "|", exc)
    sweeps | sampling: option sweeps must be an integer, not '200' (without the quotes: sweeps =
    200)
    """

    def __init__(self, message: str, option: str | None = None):
        super().__init__(message)
        self.option = option


class PromiseError(PostprocError):
    """A post-processor's result breaks a promise its method makes.

    Raised by :func:`postprocess` (through :func:`check_promises`) with every broken promise,
    naming the unit and the cell.

    Examples
    --------
    >>> from postproc.methods import noisy_histograms, postprocess, register, unregister

    A method that promises nonnegative counts and returns the measurements as they are:

    >>> from hierarchy import E2E_1940, Budget, e2e_workload, measure, tabulate
    >>> persons = pd.DataFrame({"state": ["01", "02"], "hhgq": [0, 0], "votingage": [1, 1],
    ...                         "hispanic": [0, 0], "cenrace": [0, 1]})
    >>> truth = tabulate(persons, schema=E2E_1940, levels=["nation", "state"])
    >>> noisy = measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, truth.levels), rng=3)
    >>> _ = register("clipped_not", summary="claims too much", integer=True,
    ...              nonnegative=True)(noisy_histograms)
    >>> try:
    ...     postprocess(noisy, "clipped_not")
    ... except PromiseError as exc:
    ...     print(str(exc).splitlines()[0])
    clipped_not: the result breaks its promises (integer, nonnegative):
    >>> unregister("clipped_not")
    """


@dataclass(frozen=True)
class PostProcessor:
    """A registered post-processor and the promises it makes.

    Attributes
    ----------
    name : str
    function : callable ``(noisy, spec=None, *, rng=None, **options) -> Result``
    summary : str
        One line for ``postproc methods``.
    integer, consistent, nonnegative, invariants : bool
        What every result of it satisfies (checked on every call).
    equalities : bool
        Real-valued results keep the spec's equalities — the rows whose bounds are equal
        (invariant totals) and the cells it fixes at 0 — to 10⁻⁶, not its inequalities
        (``gls``); checked on every call with a spec. ``invariants`` implies them.
    randomized : bool
        Whether it draws randomness of its own (through ``rng``).
    check : callable ``(options, *, levels, workload) -> None``, optional
        Checks of option values that need no data (ranges, level and query names), raising
        :class:`PostprocError`; run with the type checks of :meth:`check_options`.
    options_type : dataclass, optional
        The method's options as one record (TopDown's :class:`~postproc.methods.topdown.
        options.TopDownOptions`): its fields are the options and their annotations the types,
        and the function takes ``**options``.
    levelwise : bool
        Whether the method solves level by level and takes ``checkpoint=``
        (:class:`LevelCheckpoint`).

    Raises
    ------
    PostprocError
        If the name is not an identifier, or invariants are promised without integer counts.

    Examples
    --------
    >>> from postproc.methods import get, noisy_histograms
    >>> hay = get("hay")
    >>> hay.promises, hay.randomized, hay.options()
    (('consistent',), False, ())
    >>> get("topdown").options()[:3]
    ('solver', 'executor', 'workers')
    >>> get("sampling").option_types()["sweeps"]
    <class 'int'>
    >>> PostProcessor("keeper", noisy_histograms, "keeps the invariants", invariants=True)
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: keeper: invariants are verified in exact integer arithmetic, ...
    """

    name: str
    function: Callable[..., Result]
    summary: str
    integer: bool = False
    consistent: bool = False
    nonnegative: bool = False
    invariants: bool = False
    randomized: bool = False
    check: Callable[..., None] | None = None
    options_type: Any = None
    levelwise: bool = False
    equalities: bool = False

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise PostprocError(f"a post-processor's name must be an identifier, not "
                                f"{self.name!r}")
        if self.invariants and not self.integer:
            raise PostprocError(f"{self.name}: invariants are verified in exact integer "
                                f"arithmetic, so a method that keeps them must be integer")

    @property
    def promises(self) -> tuple[str, ...]:
        """Names of the promises, for tables."""
        return tuple(p for p in ("integer", "consistent", "nonnegative", "invariants",
                                 "equalities") if getattr(self, p))

    @property
    def takes_spec(self) -> bool:
        """Whether it keeps (some of) a spec: its invariants, or its equalities."""
        return self.invariants or self.equalities

    def options(self) -> tuple[str, ...]:
        """The keyword options the function takes besides ``spec``, ``rng`` and
        ``checkpoint`` (the fields of its ``options_type`` if it has one)."""
        if self.options_type is not None:
            return tuple(f.name for f in dataclasses.fields(self.options_type))
        params = inspect.signature(self.function).parameters.values()
        return tuple(p.name for p in params if p.kind is p.KEYWORD_ONLY
                     and p.name not in ("rng", "checkpoint"))

    def option_types(self) -> dict[str, Any]:
        """Each option's type: its annotation, or else the type of its default when that is
        a bool, int, float or str (``Any`` otherwise: not checked)."""
        if self.options_type is not None:
            hints = typing.get_type_hints(self.options_type)
            return {name: hints.get(name, Any) for name in self.options()}
        params = inspect.signature(self.function).parameters
        try:
            hints = typing.get_type_hints(self.function)
        except (NameError, TypeError):       # annotations that do not resolve: read as given
            hints = {name: p.annotation for name, p in params.items()
                     if not isinstance(p.annotation, str)}
        out = {}
        for name in self.options():
            default = params[name].default
            if name in hints and hints[name] is not inspect.Parameter.empty:
                out[name] = hints[name]
            elif isinstance(default, (bool, int, float, str)):
                out[name] = type(default)
            else:
                out[name] = Any
        return out

    def check_options(self, options: Mapping[str, Any], *,
                      levels: Sequence[str] | None = None, workload: Any = None) -> None:
        """Check options before anything runs: each is one the method takes, of its type
        (:meth:`option_types`), and passes the method's own ``check`` (with the levels and
        workload, when known). A configuration file checks its ``[postprocess.options]`` so.

        Raises
        ------
        OptionError
            Naming the method and the option, what it must be and what it is.

        Examples
        --------
        >>> from postproc.methods import get
        >>> get("sampling").check_options({"sweeps": 20, "step_factor": 1})   # fine: None
        >>> get("sampling").check_options({"time_limit": "60"})
        Traceback (most recent call last):
        ...
        postproc.methods.processor.OptionError: sampling: option time_limit must be a number or none
        (left out), not '60' (without the quotes: time_limit = 60)
        >>> get("sampling").check_options({"sweeps": -1})
        Traceback (most recent call last):
        ...
        postproc.methods.processor.OptionError: sampling: sweeps must be a non-negative integer, not
        -1
        """
        unknown = sorted(set(options) - set(self.options()))
        if unknown:
            raise OptionError(f"{self.name}: unknown option(s) {unknown}; it takes "
                              f"{list(self.options()) or 'none'}", unknown[0])
        types_ = self.option_types()
        for name, value in options.items():
            if not _conforms(value, types_[name]):
                raise OptionError(f"{self.name}: option {name} must be "
                                  f"{_describe(types_[name])}, not {value!r}"
                                  f"{_unquote_hint(name, value, types_[name])}", name)
        if self.check is not None:
            for name in options:
                try:
                    self.check({name: options[name]}, levels=levels, workload=workload)
                except OptionError:
                    raise
                except PostprocError as exc:
                    raise OptionError(f"{self.name}: {exc}", name) from None

    def __call__(self, noisy: Any, spec: Any = None, *, rng: Any = None,
                 checkpoint: LevelCheckpoint | None = None, **options: Any) -> Result:
        self.check_options(options, levels=getattr(noisy, "levels", None),
                           workload=getattr(noisy, "workload", None))
        if checkpoint is not None:
            if not self.levelwise:
                raise PostprocError(f"{self.name} does not solve level by level, so it takes "
                                    "no checkpoint (a level-wise method is registered with "
                                    "levelwise=True; `postproc methods` lists them)")
            if not isinstance(checkpoint, LevelCheckpoint):
                raise PostprocError(f"checkpoint must be a LevelCheckpoint, not "
                                    f"{type(checkpoint).__name__}")
            options = {**options, "checkpoint": checkpoint}
        partial = _partly_drawn(noisy)
        if partial and self.name in _READS_ONLY_CHILDREN:
            from postproc.methods.gls.chains import unmeasured_only_children

            if unmeasured_only_children(noisy):     # moved to their chains' bottoms
                partial = []
        if partial and self.name not in _READS_DRAWN:
            raise PostprocError(
                f"{self.name}: the measurements of {partial[0][1]!r} at {partial[0][0]}"
                + (f" (and {len(partial) - 1} more)" if len(partial) > 1 else "")
                + " drew only the answers that count an active cell; "
                f"only {sorted(_READS_DRAWN)} reads such measurements. Measure every answer "
                "(measure without active=, or a run in parts with all_answers / "
                "--all-answers)")
        resolve = getattr(spec, "resolve_queries", None)
        if callable(resolve) and getattr(noisy, "workload", None) is not None:
            spec = resolve(noisy.workload)     # queries named by the workload, as measure did
        if self.takes_spec:     # the data were checked against the spec before measuring
            require_checked_spec(self.name, noisy, spec)
        with spec_checked():
            result = self.function(noisy, spec, rng=rng, **options)
        if not isinstance(result, Result):
            raise PostprocError(f"{self.name} returned a {type(result).__name__}, not a Result")
        if result.method != self.name:
            result = Result(self.name, result.schema, result.geography, result.workload,
                            result.histograms, result.provenance, result.node_stats,
                            result.uncertainty)
        check_promises(result, noisy, spec, self)
        return result


def _args(hint: Any) -> tuple[Any, ...]:
    return typing.get_args(hint)


def _is_union(hint: Any) -> bool:
    return typing.get_origin(hint) in (typing.Union, types.UnionType)


def _conforms(value: Any, hint: Any) -> bool:
    """Whether ``value`` is of the type ``hint`` (annotation forms that are not read pass).

    >>> _conforms(3, float), _conforms(True, int), _conforms([1, "a"], Sequence[str])
    (True, False, False)
    >>> _conforms({"county": None}, Mapping[str, int | None]), _conforms("l2", Literal["l1"])
    (True, False)
    """
    origin = typing.get_origin(hint)
    if hint is Any:
        return True
    if hint is None or hint is type(None):
        return value is None
    if _is_union(hint):
        return any(_conforms(value, arg) for arg in _args(hint))
    if origin is Literal:
        return any(value == arg and type(value) is type(arg) for arg in _args(hint))
    if hint is bool:
        return isinstance(value, (bool, np.bool_))
    if hint is int:
        return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))
    if hint is float:
        return (isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))
                and not math.isnan(value))
    if origin in (list, tuple, collections.abc.Sequence):
        item = _args(hint)[0] if _args(hint) else Any
        return isinstance(value, (list, tuple)) and all(_conforms(v, item) for v in value)
    if origin in (dict, collections.abc.Mapping):
        key, item = _args(hint) or (Any, Any)
        return isinstance(value, Mapping) and all(
            _conforms(k, key) and _conforms(v, item) for k, v in value.items())
    if isinstance(hint, type):
        return isinstance(value, hint)
    return True


def _describe(hint: Any) -> str:
    """What a value of type ``hint`` is, in words for a message.

    >>> _describe(int | None), _describe(Sequence[str]), _describe(Literal["l1", "topdown"])
    ('an integer or none (left out)', 'a list of strings', "one of 'l1', 'topdown'")
    """
    words = {bool: "true or false", int: "an integer", float: "a number", str: "a string",
             type(None): "none (left out)", Any: "anything"}
    if hint is None:
        hint = type(None)
    if hint in words:
        return words[hint]
    origin = typing.get_origin(hint)
    if _is_union(hint):
        return " or ".join(_describe(arg) for arg in _args(hint))
    if origin is Literal:
        return "one of " + ", ".join(repr(arg) for arg in _args(hint))
    if origin in (list, tuple, collections.abc.Sequence):
        item = _describe(_args(hint)[0]) if _args(hint) else "anything"
        return "a list of " + {"a string": "strings", "an integer": "integers",
                               "a number": "numbers"}.get(item, item)
    if origin in (dict, collections.abc.Mapping):
        key, item = (_describe(arg) for arg in (_args(hint) or (Any, Any)))
        return f"a table of {key.removeprefix('a ')} keys to {item}"
    return f"a {getattr(hint, '__name__', str(hint))}"


def _unquote_hint(name: str, value: Any, hint: Any) -> str:
    """When a number or boolean was written as a string: how to write it."""
    if not isinstance(value, str):
        return ""
    text = value.strip()
    wanted = [h for h in (_args(hint) if _is_union(hint) else (hint,))
              if h in (int, float, bool)]
    for kind in wanted:
        try:
            parsed = {"true": True, "false": False}[text] if kind is bool else kind(text)
        except (KeyError, ValueError):
            continue
        return f" (without the quotes: {name} = {str(parsed).lower() if kind is bool else text})"
    return ""


#: Methods shown to ignore answers that were not drawn (weight 0; docs/scale2020.md proves it
#: for TopDown): the others refuse measurements that left some answers undrawn.
_READS_DRAWN = frozenset({"topdown"})
#: The methods that also read a hierarchy whose only undrawn answers are those of unmeasured
#: only children (a Noisy Measurement File's): ``postproc.methods.gls.chains``.
_READS_ONLY_CHILDREN = frozenset({"gls", "bluedown"})


def _partly_drawn(noisy: Any) -> list[tuple[str, str]]:
    """(level, query) of the measurements that left some answers undrawn."""
    return [(lv, qn) for lv, ms in getattr(noisy, "measurements", {}).items()
            for qn, m in ms.items() if getattr(m, "drawn", None) is not None]


def check_promises(result: Result, noisy: Any, spec: Any, entry: PostProcessor) -> None:
    """Raise :class:`PromiseError` if ``result`` breaks a promise of ``entry``.

    Consistency may be broken where the result's failsafe reports say it was relaxed; the
    invariants are checked only when ``spec`` is given (against ``noisy.invariants``).

    Parameters
    ----------
    result : Result
    noisy : NoisyHierarchy or None
        Where the published invariants come from (``None``: no invariants).
    spec : Spec or None
    entry : PostProcessor
        Whose promises to check.

    Examples
    --------
    >>> from hierarchy.geography import Geography
    >>> from hierarchy.queries import Workload, total
    >>> from hierarchy.schema import Attribute, Schema
    >>> schema = Schema((Attribute("tenure", ("owned", "rented")),))
    >>> geo = Geography(("county", "tract"), (["C"], ["C1", "C2"]), ([-1], [0, 0]))
    >>> result = Result("mine", schema, geo, Workload((total(schema),)),
    ...                 (np.array([[2, 1]]), np.array([[2, -1], [0, 1]])))
    >>> from postproc.methods import get
    >>> check_promises(result, None, None, get("noisy"))        # promises nothing
    >>> check_promises(result, None, None, get("rake"))
    Traceback (most recent call last):
    ...
    postproc.methods.processor.PromiseError: rake: the result breaks its promises (...):
      tract 'C1': cell 1 (tenure=rented) is negative (-1); 1 negative cells
      tract units of county 'C' sum to 0 in cell 1 (tenure=rented), the parent has 1
    """
    from invariants.verify import verify_histograms

    allowed: dict[str, dict[str, list[int]]] = {}
    for report in result.failsafe_reports:
        if "parent" in report and "cells" in report:
            allowed.setdefault(report["level"], {})[str(report["parent"])] = \
                [int(c) for c in report["cells"]]
    problems = verify_histograms(
        result.histograms, spec, result.schema, result.geography,
        getattr(noisy, "invariants", {}), integer=entry.integer, consistent=entry.consistent,
        nonnegative=entry.nonnegative, invariants=entry.invariants and spec is not None,
        equalities=entry.equalities and spec is not None, allowed=allowed)
    if problems:
        raise PromiseError(f"{entry.name}: the result breaks its promises "
                           f"({', '.join(entry.promises)}):\n  " + "\n  ".join(problems))
