"""One protocol and one registry for every post-processor.

A post-processor is a function ``f(noisy, spec=None, *, rng=None, **options) -> Result``: it
takes a :class:`~hierarchy.noisy.NoisyHierarchy` (and the invariants and constraints of a
:class:`~invariants.spec.Spec` where it honours them) and returns a
:class:`~postproc.result.Result`. Registered under a name with the promises it makes — integer
counts, consistency between levels, nonnegativity, the spec's invariants — it can be run by name
from Python (:func:`postprocess`), from ``postproc run --method NAME`` and compared with others
by ``postproc compare``. Every result is checked against the promises of its method by one
verifier (:func:`invariants.verify.verify_histograms`, exact integer arithmetic); a broken
promise raises :class:`PromiseError`.

Built in (``postproc methods`` lists them):

========== ==================================================================================
topdown     TopDown: weighted least squares and constraint-keeping rounding, level by level
sampling    top-down conditional sampling under the invariants (Gong & Meng)
hay         Hay et al.: closed-form consistent least squares of every measurement
least_sq…   per-level weighted least squares of each unit's measurements (no consistency)
clip_scale  the noisy detailed counts clipped at 0 and scaled to each unit's noisy total
rake        raking down the tree: each parent's cells split in proportion to its children's
rake_unc…   Flaxman's raking (RDPC): ratios of the unclipped noisy counts, equal split at ≤ 0
bottom_up   the bottom level's noisy counts, summed up the tree
noisy       the unprocessed detailed measurements of every level
========== ==================================================================================

Register your own:

>>> import numpy as np
>>> from postproc.methods import register, postprocess, get
>>> from postproc.result import Result
>>> @register("zeros", summary="all counts zero (an example)", integer=True, consistent=True,
...           nonnegative=True)
... def zeros(noisy, spec=None, *, rng=None):
...     hists = tuple(np.zeros((noisy.geography.n_units(lv), noisy.schema.size), dtype=np.int64)
...                   for lv in noisy.levels)
...     return Result("zeros", noisy.schema, noisy.geography, noisy.workload, hists,
...                   {"noisy": dict(noisy.provenance)})
>>> get("zeros").summary
'all counts zero (an example)'
>>> from hierarchy.synth import synthesize_1940
>>> from hierarchy.tabulation import tabulate
>>> from hierarchy.measurement import measure
>>> from hierarchy.budget import Budget
>>> from hierarchy.queries import e2e_workload
>>> from hierarchy.schema import E2E_1940
>>> truth = tabulate(synthesize_1940(2_000, seed=1).persons, schema=E2E_1940,
...                  levels=["nation", "state"])
>>> noisy = measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, ["nation", "state"]), rng=2)
>>> postprocess(noisy, "zeros")
Result('zeros'; integer; nation=1, state=49 units; 0 persons; randomness simulation (unsafe for release))
>>> unregister("zeros")
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

from postproc.errors import PostprocError, refuse_spec, require_checked_spec, spec_checked
from postproc.result import Result

__all__ = ["PostProcessor", "PromiseError", "OptionError", "LevelCheckpoint", "register",
           "unregister", "get", "available", "catalogue", "postprocess", "check_promises",
           "noisy_histograms", "method_spec", "method_rng"]


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
    >>> try:
    ...     get("sampling").check_options({"sweeps": "200"})
    ... except OptionError as exc:
    ...     print(exc.option, "|", exc)
    sweeps | sampling: option sweeps must be an integer, not '200' (without the quotes: sweeps = 200)
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
    A method that promises nonnegative counts and returns the measurements as they are:

    >>> import pandas as pd
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
        return tuple(p for p in ("integer", "consistent", "nonnegative", "invariants")
                     if getattr(self, p))

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
        >>> get("sampling").check_options({"sweeps": 20, "step_factor": 1})   # fine: None
        >>> get("sampling").check_options({"time_limit": "60"})
        Traceback (most recent call last):
        ...
        postproc.methods.registry.OptionError: sampling: option time_limit must be a number or none (left out), not '60' (without the quotes: time_limit = 60)
        >>> get("sampling").check_options({"sweeps": -1})
        Traceback (most recent call last):
        ...
        postproc.methods.registry.OptionError: sampling: sweeps must be a non-negative integer, not -1
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
                                    f"no checkpoint (level-wise methods: "
                                    f"{[e.name for e in _REGISTRY.values() if e.levelwise]})")
            if not isinstance(checkpoint, LevelCheckpoint):
                raise PostprocError(f"checkpoint must be a LevelCheckpoint, not "
                                    f"{type(checkpoint).__name__}")
            options = {**options, "checkpoint": checkpoint}
        partial = _partly_drawn(noisy)
        if partial and self.name not in _READS_DRAWN:
            raise PostprocError(
                f"{self.name}: the measurements of {partial[0][1]!r} at {partial[0][0]}"
                + (f" (and {len(partial) - 1} more)" if len(partial) > 1 else "")
                + " drew only the answers that count an active cell; "
                f"only {sorted(_READS_DRAWN)} reads such measurements. Measure every answer "
                "(measure without active=, or a run in parts with all_answers / "
                "--all-answers)")
        if self.invariants:     # the data were checked against the spec before measuring
            require_checked_spec(self.name, noisy, spec)
        with spec_checked():
            result = self.function(noisy, spec, rng=rng, **options)
        if not isinstance(result, Result):
            raise PostprocError(f"{self.name} returned a {type(result).__name__}, not a Result")
        if result.method != self.name:
            result = Result(self.name, result.schema, result.geography, result.workload,
                            result.histograms, result.provenance, result.node_stats)
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


_REGISTRY: dict[str, PostProcessor] = {}

#: Methods shown to ignore answers that were not drawn (weight 0; docs/scale2020.md proves it
#: for TopDown): the others refuse measurements that left some answers undrawn.
_READS_DRAWN = frozenset({"topdown"})


def _partly_drawn(noisy: Any) -> list[tuple[str, str]]:
    """(level, query) of the measurements that left some answers undrawn."""
    return [(lv, qn) for lv, ms in getattr(noisy, "measurements", {}).items()
            for qn, m in ms.items() if getattr(m, "drawn", None) is not None]


def register(name: str, *, summary: str, integer: bool = False, consistent: bool = False,
             nonnegative: bool = False, invariants: bool = False, randomized: bool = False,
             replace: bool = False, check: Callable[..., None] | None = None,
             options: Any = None, levelwise: bool = False
             ) -> Callable[[Callable[..., Result]], Callable[..., Result]]:
    """Register a post-processor under ``name`` (a decorator; the function is returned as is).

    Its keyword options are checked before it runs, from ``postprocess`` and from a
    configuration file (at the option's line, before anything is measured): an option's type
    is its annotation (``sweeps: int = 100``; ``float`` takes integers too; unions,
    ``Literal[...]``, ``Sequence[...]`` and ``Mapping[...]`` are read), or else the type of its
    default when that is a bool, int, float or str; ``Any`` (or a default of another type
    without annotation) is not checked. Value checks go in ``check``.

    Parameters
    ----------
    name : str
        An identifier, unique in the registry.
    summary : str
        One line for ``postproc methods``.
    integer, consistent, nonnegative, invariants : bool, optional
        The promises every result keeps; each result is verified against them.
    randomized : bool, optional
        Whether the method draws randomness of its own (through ``rng``).
    replace : bool, optional
        Replace a post-processor registered under the same name.
    check : callable ``(options, *, levels, workload) -> None``, optional
        Checks of option values that need no data, raising :class:`PostprocError` (given one
        option at a time; ``levels`` and ``workload`` may be None).
    options : dataclass, optional
        The options as one record (see :class:`PostProcessor`).
    levelwise : bool, optional
        The method takes ``checkpoint=`` (:class:`LevelCheckpoint`).

    Returns
    -------
    callable
        The decorator.

    Raises
    ------
    PostprocError
        ``name`` taken (pass ``replace=True``), not an identifier, or a bad signature.

    Examples
    --------
    >>> @register("as_measured", summary="the detailed measurements as they are", integer=True)
    ... def as_measured(noisy, spec=None, *, rng=None):
    ...     return noisy_histograms(noisy, spec)
    >>> get("as_measured").promises
    ('integer',)
    >>> register("as_measured", summary="again")(as_measured)
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: a post-processor 'as_measured' is already registered; pass replace=True ...
    >>> register("no_rng", summary="lacks rng")(lambda noisy: None)
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: no_rng: a post-processor takes (noisy, spec=None, *, rng=None, ...)
    >>> unregister("as_measured")
    """
    def decorate(function: Callable[..., Result]) -> Callable[..., Result]:
        if name in _REGISTRY and not replace:
            raise PostprocError(f"a post-processor {name!r} is already registered; pass "
                                f"replace=True to replace it")
        params = inspect.signature(function).parameters
        if "rng" not in params or len(params) < 2:
            raise PostprocError(f"{name}: a post-processor takes (noisy, spec=None, *, "
                                f"rng=None, **options)")
        _REGISTRY[name] = PostProcessor(name, function, summary, integer, consistent,
                                        nonnegative, invariants, randomized, check, options,
                                        levelwise)
        return function
    return decorate


def unregister(name: str) -> None:
    """Remove a registered post-processor (an unknown name is ignored).

    Examples
    --------
    >>> _ = register("measured", summary="the measurements")(noisy_histograms)
    >>> "measured" in available()
    True
    >>> unregister("measured")
    >>> "measured" in available()
    False
    """
    _REGISTRY.pop(name, None)


def get(name: str) -> PostProcessor:
    """The post-processor registered as ``name``.

    Raises
    ------
    PostprocError
        No such name (the message lists the registered ones).

    Examples
    --------
    >>> get("bottom_up").summary
    "the bottom level's noisy detailed counts, summed up the tree (may be negative)"
    >>> get("tpodown")
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: unknown post-processor 'tpodown'; registered: topdown, ...
    """
    try:
        return _REGISTRY[name]
    except KeyError:
        raise PostprocError(f"unknown post-processor {name!r}; registered: "
                            f"{', '.join(available())} (postproc methods lists them)") from None


def available() -> tuple[str, ...]:
    """Registered names, in registration order (the built-in ones first).

    Examples
    --------
    >>> available()[:5]
    ('topdown', 'sampling', 'hay', 'noisy', 'least_squares')
    """
    return tuple(_REGISTRY)


def catalogue() -> list[PostProcessor]:
    """Every registered post-processor, in registration order.

    Examples
    --------
    >>> for entry in catalogue()[:3]:
    ...     print(f"{entry.name:9} {', '.join(entry.promises)}")
    topdown   integer, consistent, nonnegative, invariants
    sampling  integer, consistent, nonnegative, invariants
    hay       consistent
    """
    return list(_REGISTRY.values())


def postprocess(noisy: Any, method: str = "topdown", spec: Any = None, *, rng: Any = None,
                **options: Any) -> Result:
    """Run the post-processor registered as ``method`` on ``noisy``; verify its promises.

    Parameters
    ----------
    noisy : NoisyHierarchy
    method : str
        A registered name (:func:`available`); default ``"topdown"``.
    spec : Spec, optional
        Invariants and constraints, for the methods that keep them. The confidential data must
        have been checked against its constraints before they were measured:
        ``measure(truth, ..., spec=spec)`` does it and records it; release-mode measurements
        without that record are refused (a simulation warns), see
        :func:`postproc.errors.require_checked_spec`.
    rng : None, int, numpy Generator or Randomness
        For randomized methods (``sampling``); ``None`` is release mode.
    **options
        The method's own options (``get(method).options()``), and ``checkpoint=`` (a
        :class:`LevelCheckpoint`) for a level-wise method such as TopDown.

    Returns
    -------
    Result

    Raises
    ------
    PostprocError
        An unknown method or option, a spec given to a method that keeps none, or a spec with
        constraints the release-mode data were not checked against.
    PromiseError
        If the result breaks a promise of the method.

    Examples
    --------
    >>> from hierarchy import E2E_1940, Budget, e2e_workload, measure, synthesize_1940, tabulate
    >>> from invariants.spec import Invariant, Spec
    >>> levels = ["nation", "state"]
    >>> truth = tabulate(synthesize_1940(500, seed=1).persons, schema=E2E_1940, levels=levels)
    >>> spec = Spec([Invariant("tot", "all")])
    >>> noisy = measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, levels), rng=2, spec=spec)
    >>> result = postprocess(noisy, "topdown", spec)
    >>> result.method, int(result.histograms[0].sum()), bool((result.histograms[1] >= 0).all())
    ('topdown', 500, True)
    >>> postprocess(noisy, "hay", damping=0.5)
    Traceback (most recent call last):
    ...
    postproc.methods.registry.OptionError: hay: unknown option(s) ['damping']; it takes none
    """
    return get(method)(noisy, spec, rng=rng, **options)


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
    >>> check_promises(result, None, None, get("noisy"))        # promises nothing
    >>> check_promises(result, None, None, get("rake"))
    Traceback (most recent call last):
    ...
    postproc.methods.registry.PromiseError: rake: the result breaks its promises (...):
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
        allowed=allowed)
    if problems:
        raise PromiseError(f"{entry.name}: the result breaks its promises "
                           f"({', '.join(entry.promises)}):\n  " + "\n  ".join(problems))


def method_spec(method: str, spec: Any) -> Any:
    """The spec to give the registered post-processor ``method``: ``spec`` if the method keeps
    invariants (TopDown, conditional sampling), else ``None`` (the others refuse a spec with
    invariants: they run unconstrained).

    Parameters
    ----------
    method : str
        A registered post-processor.
    spec : Spec or None

    Returns
    -------
    Spec or None

    Raises
    ------
    PostprocError
        ``method`` is not registered.

    Examples
    --------
    >>> from invariants.spec import Spec
    >>> spec = Spec.e2e(["nation", "state"])
    >>> method_spec("topdown", spec) is spec, method_spec("hay", spec)
    (True, None)
    """
    return spec if get(method).invariants else None


def method_rng(rng: Any, method: str) -> Any:
    """The randomness a post-processor ``method`` draws from: the stream ``crc32(method)`` of
    ``rng`` (independent of the measurements' streams, which are keyed by level and query), so
    ``postproc run --method M`` and ``postproc compare`` give M the same draws from one seed.

    Parameters
    ----------
    rng : None, int, numpy.random.Generator or Randomness
        ``None`` is release mode (a fresh secure source).
    method : str

    Returns
    -------
    Randomness

    Examples
    --------
    >>> a, b = method_rng(7, "sampling"), method_rng(7, "sampling")
    >>> bool((a.random_raw(3) == b.random_raw(3)).all()), method_rng(None, "sampling").mode
    (True, 'release')
    """
    import zlib

    from hierarchy.randomness import as_randomness

    return as_randomness(rng).child(zlib.crc32(method.encode()))


# --------------------------------------------------------------------------------------------------
# The built-in post-processors
# --------------------------------------------------------------------------------------------------
def _check_topdown(options: Mapping[str, Any], *, levels: Sequence[str] | None = None,
                   workload: Any = None) -> None:
    """TopDown's option values: :class:`~postproc.methods.topdown.options.TopDownOptions` checks
    them (and the levels a per-level mapping names, when known)."""
    from postproc.methods.topdown.options import TopDownOptions, check_group_children

    TopDownOptions.of(options)
    if "group_children" in options and levels is not None:
        check_group_children(options["group_children"], levels)


def _topdown_options() -> Any:
    from postproc.methods.topdown.options import TopDownOptions

    return TopDownOptions


@register("topdown", summary="TopDown: weighted least squares and constraint-keeping rounding, "
                             "level by level (deterministic)",
          integer=True, consistent=True, nonnegative=True, invariants=True, check=_check_topdown,
          options=_topdown_options(), levelwise=True)
def _topdown(noisy, spec=None, *, rng=None, checkpoint: LevelCheckpoint | None = None,
             **options):
    from postproc.methods.topdown import topdown

    done = list(checkpoint.done) if checkpoint is not None else []
    result = topdown(noisy, spec, options=options, start=(len(done), done) if done else None,
                     on_level=checkpoint.on_level if checkpoint is not None else None)
    if checkpoint is None or not checkpoint.reports:
        return result
    earlier = [dict(r) for r in checkpoint.reports]
    provenance = {**result.provenance,
                  "failsafe_reports": earlier + list(result.failsafe_reports)}
    return Result(result.method, result.schema, result.geography, result.workload,
                  result.histograms, provenance, result.node_stats)


def _check_sampling(options: Mapping[str, Any], *, levels: Sequence[str] | None = None,
                    workload: Any = None) -> None:
    """Conditional sampling's option values."""
    for name in ("sweeps", "retries"):
        if options.get(name, 0) < 0:
            raise PostprocError(f"{name} must be a non-negative integer, not {options[name]!r}")
    limit = options.get("time_limit")
    if limit is not None and limit < 0:
        raise PostprocError(f"time_limit must be a number of seconds >= 0 or left out, not "
                            f"{limit!r}")
    if "step_factor" in options and not 0 < options["step_factor"] < math.inf:
        raise PostprocError(f"step_factor must be a number above 0 (the mean step in noise "
                            f"standard deviations), not {options['step_factor']!r}")
    queries = options.get("queries", "all")
    if workload is not None and queries not in ("detailed", "all"):
        chosen = [queries] if isinstance(queries, str) else list(queries)
        if not chosen or any(q not in workload.names for q in chosen):
            raise PostprocError(f"queries must be 'detailed', 'all' or names from the workload "
                                f"{list(workload.names)}; got {queries!r}")


@register("sampling", summary="top-down conditional sampling under the invariants "
                              "(Gong & Meng); integer and consistent",
          integer=True, consistent=True, nonnegative=True, invariants=True, randomized=True,
          check=_check_sampling)
def _sampling(noisy, spec=None, *, rng=None, sweeps: int = 100, mechanism: str | None = None,
              queries: str | Sequence[str] = "all", step_factor: float = 0.8,
              retries: int = 10, start: Literal["topdown", "l1"] | Result = "topdown",
              time_limit: float | None = None, progress: bool = False):
    from postproc.methods.sampling import sample_topdown

    return sample_topdown(noisy, spec, rng=rng, sweeps=sweeps, mechanism=mechanism,
                          queries=queries, step_factor=step_factor, retries=retries,
                          start=start, time_limit=time_limit, progress=progress)


@register("hay", summary="Hay et al.: closed-form consistent least squares of every "
                         "measurement (real-valued, may be negative)", consistent=True)
def _hay(noisy, spec=None, *, rng=None):
    from postproc.methods.baselines import hay_consistency

    refuse_spec("hay", spec)
    return hay_consistency(noisy)


def noisy_histograms(noisy: Any, spec: Any = None, *, rng: Any = None) -> Result:
    """The unprocessed measurements: every level's ``detailed`` query as measured.

    Raises
    ------
    PostprocError
        A level without a ``detailed`` measurement (named), or a spec with invariants or
        constraints (this method keeps none).

    Examples
    --------
    >>> import pandas as pd
    >>> from hierarchy import E2E_1940, Budget, e2e_workload, measure, tabulate
    >>> persons = pd.DataFrame({"state": ["01", "02", "02"], "hhgq": [0, 0, 3],
    ...                         "votingage": [1, 1, 0], "hispanic": [0, 0, 0],
    ...                         "cenrace": [0, 1, 2]})
    >>> truth = tabulate(persons, schema=E2E_1940, levels=["nation", "state"])
    >>> noisy = measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, truth.levels), rng=3)
    >>> raw = noisy_histograms(noisy)
    >>> raw.method, raw.integer, raw.safe_for_release
    ('noisy', True, False)
    >>> raw.histograms[1][:, :6]          # noisy counts: negative ones too
    array([[ -8, -42,  34,   7,  10,  52],
           [ -3,  32,  -3,  38,  39,  -1]])
    >>> only_hhgq = Budget("pure", 1, {"nation": "1/2", "state": "1/2"},
    ...                    {"nation": {"detailed": 1}, "state": {"hhgq": 1}})
    >>> noisy_histograms(measure(truth, e2e_workload(E2E_1940), only_hhgq, rng=3))
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: noisy: level 'state' has no detailed measurement ...
    """
    refuse_spec("noisy", spec)
    hists = []
    for level in noisy.levels:
        detailed = [q for q in noisy.queries(level)
                    if noisy.workload[q].expression == "detailed"]
        if not detailed:
            raise PostprocError(f"noisy: level {level!r} has no detailed measurement (it "
                                f"measured {list(noisy.queries(level))}); measure 'detailed' "
                                f"there, or use a post-processor that fits the marginals")
        hists.append(np.asarray(noisy.get(level, detailed[0]).values))
    return Result("noisy", noisy.schema, noisy.geography, noisy.workload, tuple(hists),
                  {"noisy": dict(noisy.provenance)})


register("noisy", summary="the unprocessed detailed measurements of every level "
                          "(inconsistent, may be negative)")(noisy_histograms)


@register("least_squares", summary="per-level weighted least squares of each unit's "
                                   "measurements (unconstrained: inconsistent, may be negative)")
def _least_squares(noisy, spec=None, *, rng=None):
    from postproc.methods.baselines import level_least_squares

    return level_least_squares(noisy, spec, rng=rng)


@register("clip_scale", summary="the noisy detailed counts clipped at 0 and scaled to each "
                                "unit's total (invariant or noisy); inconsistent",
          nonnegative=True)
def _clip_scale(noisy, spec=None, *, rng=None):
    from postproc.methods.baselines import clip_scale

    return clip_scale(noisy, spec, rng=rng)


@register("rake", summary="raking down the tree: each parent's cells split in proportion to "
                          "its children's clipped noisy counts (real-valued)",
          consistent=True, nonnegative=True)
def _rake(noisy, spec=None, *, rng=None):
    from postproc.methods.baselines import rake

    return rake(noisy, spec, rng=rng)


@register("rake_unclipped", summary="Flaxman's raking (RDPC's reconciler): each parent split in "
                                    "proportion to its children's noisy counts as measured, "
                                    "equally where their sum is <= 0 (may be negative)",
          consistent=True)
def _rake_unclipped(noisy, spec=None, *, rng=None):
    from postproc.methods.baselines import rake

    return rake(noisy, spec, rng=rng, clip=False)


@register("bottom_up", summary="the bottom level's noisy detailed counts, summed up the tree "
                               "(may be negative)", consistent=True)
def _bottom_up(noisy, spec=None, *, rng=None):
    from postproc.methods.baselines import bottom_up_sums

    return bottom_up_sums(noisy, spec, rng=rng)
