"""The built-in post-processors, each with its promises and summary (``postproc methods`` lists
them). They are listed in :data:`BUILTINS` in order; the registry
(:mod:`postproc.methods.registry`) registers them when it is first imported, so this module
knows nothing of the registry. A method's own module is imported when it first runs.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Literal, Mapping, Sequence

import numpy as np

from postproc.errors import PostprocError, refuse_spec
from postproc.methods.processor import LevelCheckpoint
from postproc.result import Result

__all__ = ["BUILTINS", "noisy_histograms"]

#: (name, registration keywords, function) of every built-in method, in the order listed.
BUILTINS: list[tuple[str, dict[str, Any], Callable[..., Result]]] = []


def _builtin(name: str, **meta: Any) -> Callable[[Callable[..., Result]], Callable[..., Result]]:
    """Add a function to :data:`BUILTINS` under ``name`` with ``meta`` (what
    :func:`~postproc.methods.registry.register` takes)."""
    def add(fn: Callable[..., Result]) -> Callable[..., Result]:
        BUILTINS.append((name, meta, fn))
        return fn
    return add


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


@_builtin("topdown", summary="TopDown: weighted least squares and constraint-keeping rounding, "
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


@_builtin("sampling", summary="top-down conditional sampling under the invariants "
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


@_builtin("hay", summary="Hay et al.: closed-form consistent least squares of every "
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


_builtin("noisy", summary="the unprocessed detailed measurements of every level "
                          "(inconsistent, may be negative)")(noisy_histograms)


@_builtin("least_squares", summary="per-level weighted least squares of each unit's "
                                   "measurements (unconstrained: inconsistent, may be negative)")
def _least_squares(noisy, spec=None, *, rng=None):
    from postproc.methods.baselines import level_least_squares

    return level_least_squares(noisy, spec, rng=rng)


@_builtin("clip_scale", summary="the noisy detailed counts clipped at 0 and scaled to each "
                                "unit's total (invariant or noisy); inconsistent",
          nonnegative=True)
def _clip_scale(noisy, spec=None, *, rng=None):
    from postproc.methods.baselines import clip_scale

    return clip_scale(noisy, spec, rng=rng)


@_builtin("rake", summary="raking down the tree: each parent's cells split in proportion to "
                          "its children's clipped noisy counts (real-valued)",
          consistent=True, nonnegative=True)
def _rake(noisy, spec=None, *, rng=None):
    from postproc.methods.baselines import rake

    return rake(noisy, spec, rng=rng)


@_builtin("rake_unclipped", summary="Flaxman's raking (RDPC's reconciler): each parent split in "
                                    "proportion to its children's noisy counts as measured, "
                                    "equally where their sum is <= 0 (may be negative)",
          consistent=True)
def _rake_unclipped(noisy, spec=None, *, rng=None):
    from postproc.methods.baselines import rake

    return rake(noisy, spec, rng=rng, clip=False)


@_builtin("bottom_up", summary="the bottom level's noisy detailed counts, summed up the tree "
                               "(may be negative)", consistent=True)
def _bottom_up(noisy, spec=None, *, rng=None):
    from postproc.methods.baselines import bottom_up_sums

    return bottom_up_sums(noisy, spec, rng=rng)


@_builtin("gls", summary="generalized least squares: the best linear unbiased estimate under the "
                         "spec's equalities, with its covariance (real-valued, may be negative)",
          consistent=True, equalities=True)
def _gls(noisy, spec=None, *, rng=None):
    from postproc.methods.gls import gls

    return gls(noisy, spec)


@_builtin("bluedown", summary="BlueDown: TopDown's fit and rounding on each child's subtree GLS "
                              "estimate weighted by its inverse covariance",
          integer=True, consistent=True, nonnegative=True, invariants=True, check=_check_topdown,
          options=_topdown_options())
def _bluedown(noisy, spec=None, *, rng=None, **options):
    from postproc.methods.gls import bluedown

    return bluedown(noisy, spec, options=options)
