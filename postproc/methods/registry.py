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
Result('zeros'; integer; nation=1, state=49 units; 0 persons; randomness simulation (unsafe for
release))
>>> unregister("zeros")
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

from postproc.errors import PostprocError
from postproc.methods.builtin import BUILTINS, noisy_histograms
from postproc.methods.processor import (
    LevelCheckpoint,
    OptionError,
    PostProcessor,
    PromiseError,
    check_promises,
)
from postproc.result import Result

__all__ = ["PostProcessor", "PromiseError", "OptionError", "LevelCheckpoint", "register",
           "unregister", "get", "available", "catalogue", "postprocess", "check_promises",
           "noisy_histograms", "method_spec", "method_rng"]

_REGISTRY: dict[str, PostProcessor] = {}


def register(name: str, *, summary: str, integer: bool = False, consistent: bool = False,
             nonnegative: bool = False, invariants: bool = False, randomized: bool = False,
             replace: bool = False, check: Callable[..., None] | None = None,
             options: Any = None, levelwise: bool = False, equalities: bool = False
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
    equalities : bool, optional
        Real-valued results keep the spec's equalities to 10⁻⁶ (see :class:`PostProcessor`).

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
    postproc.errors.PostprocError: a post-processor 'as_measured' is already registered; pass
    replace=True ...
    >>> register("no_rng", summary="lacks rng")(lambda noisy: None)
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: no_rng: a post-processor takes
    (noisy, spec=None, *, rng=None, ...)
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
                                        levelwise, equalities)
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
    postproc.methods.processor.OptionError: hay: unknown option(s) ['damping']; it takes none
    """
    return get(method)(noisy, spec, rng=rng, **options)


def method_spec(method: str, spec: Any) -> Any:
    """The spec to give the registered post-processor ``method``: ``spec`` if the method keeps
    its invariants (TopDown, conditional sampling, BlueDown) or its equalities (``gls``), else
    ``None`` (the others refuse a spec with invariants: they run unconstrained).

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
    >>> method_spec("topdown", spec) is spec, method_spec("gls", spec) is spec
    (True, True)
    >>> method_spec("hay", spec) is None
    True
    """
    return spec if get(method).takes_spec else None


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


for _name, _meta, _fn in BUILTINS:     # the built-in methods, in their order
    register(_name, **_meta)(_fn)
