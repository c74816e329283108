"""Post-processing of noisy measurements, and what it does to error and privacy loss.

The names a user needs are exported here, loaded on first use (``import postproc`` stays cheap):
the post-processors by name (:func:`postprocess`, :func:`available`, :func:`register` and
:func:`unregister` for your own; ``postprocess(noisy, "topdown", spec)`` or :func:`topdown` runs
TopDown), approximate Monte Carlo intervals of a result's counts (:func:`replicate_intervals`),
the one :class:`Result` type, :func:`evaluate` and :func:`error_metrics`, the empirical privacy
loss (:func:`estimate_epl`, :class:`EPLResult`), comparisons of post-processors
(:func:`compare_methods`, :func:`format_pivot`, :func:`plot_comparison`,
:func:`write_comparison`), a result's errors by level (:func:`plot_errors_by_level`), configured
runs (:func:`load_config`, :class:`RunConfig`, :func:`run_pipeline`) and the package's base
exception.

>>> from hierarchy import E2E_1940, Budget, e2e_workload, measure, synthesize_1940, tabulate
>>> from invariants import Spec
>>> from postproc import available, evaluate, postprocess
>>> levels = ["nation", "state", "county", "enum_dist"]
>>> data = synthesize_1940(20_000, seed=1)
>>> truth = tabulate(data.persons, schema=E2E_1940, levels=levels, units=data.units)
>>> spec = Spec.e2e(levels)              # the data are checked against it before measuring
>>> noisy = measure(truth, e2e_workload(E2E_1940), Budget.e2e(1.0, levels), "geometric",
...                 rng=2, spec=spec)
>>> "topdown" in available()
True
>>> result = postprocess(noisy, "topdown", spec)
>>> int(result.histograms[0].sum()) == int(truth.counts[0].sum())   # the invariant total
True
>>> table = evaluate(result, truth)
>>> sorted(set(table["level"])) == sorted(levels)
True
"""

import sys
import warnings
from typing import Any

from hierarchy.exports import lazy_exports

# exported name -> the module that defines it
_EXPORTS = {
    "postprocess": "postproc.methods", "register": "postproc.methods",
    "available": "postproc.methods", "topdown": "postproc.methods.topdown",
    "replicate_intervals": "postproc.methods",
    "Result": "postproc.result", "evaluate": "postproc.evaluation.evaluate",
    "load_config": "postproc.apps.runs.config", "RunConfig": "postproc.apps.runs.config",
    "run_pipeline": "postproc.apps.runs.pipeline", "PostprocError": "postproc.errors",
    "DappError": "hierarchy.errors", "unregister": "postproc.methods",
    "estimate_epl": "postproc.evaluation.epl", "EPLResult": "postproc.evaluation.epl",
    "compare_methods": "postproc.evaluation.compare",
    "format_pivot": "postproc.evaluation.compare",
    "write_comparison": "postproc.evaluation.compare",
    "plot_comparison": "postproc.evaluation.plots", "error_metrics": "postproc.evaluation.metrics",
    "plot_errors_by_level": "postproc.evaluation.plots",
    "read_nmf": "postproc.apps.nmf.reader", "inspect_nmf": "postproc.apps.nmf.summary",
    "calibrate_consistent": "postproc.methods.baselines.consistency",
    "__version__": "hierarchy",  # one distribution, one version
}

__all__ = sorted(name for name in _EXPORTS if not name.startswith("__"))


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)


# -- names that moved ------------------------------------------------------------------------------
# Imports flow one way, lowest layer first (… < postproc.result < postproc.methods <
# postproc.evaluation < postproc.apps < postproc.cli). A module cannot keep an alias of a name
# that moved to a layer above it, since it may not import that layer, not even in a function:
# the run directories' functions of postproc.evaluation.evaluate and postproc.evaluation.compare
# now live in postproc.apps.runs.directories, and a result's figure is
# postproc.evaluation.plots.plot_errors_by_level(result, truth) — plotting takes a result, and
# postproc.result, two layers below, no longer imports plotting for Result.plot. This package's
# face is the top layer, which may import every layer, and Python imports it before any module
# of it; so it attaches the deprecated aliases (for one release, each warning with a
# DeprecationWarning) to each old module when that module is loaded, not before: ``import
# postproc`` stays cheap. (epl_notes, which moved down to postproc.reports.notes, goes the same
# way, so that the old module's moved names are in one place.)

#: old module → its names that moved (to postproc.apps.runs.directories, epl_notes to
#: postproc.reports.notes)
_MOVED = {
    "postproc.evaluation.evaluate": ("RunOutput", "load_run", "load_truth", "evaluate_run",
                                     "epl_notes"),
    "postproc.evaluation.compare": ("CompareOutput", "run_compare", "default_directory"),
}


def _moved(old: str, name: str) -> Any:
    """``name`` of module ``old`` from where it now lives, with a DeprecationWarning."""
    if name == "epl_notes":
        from postproc.reports import notes as home
    else:
        from postproc.apps.runs import directories as home
    warnings.warn(f"{old}.{name} is deprecated: import {name} from {home.__name__}",
                  DeprecationWarning, stacklevel=3)
    return getattr(home, name)


def _attach_moved(module: Any) -> None:
    """Give ``module`` a ``__getattr__`` for its names that moved."""
    old = module.__name__

    def __getattr__(name: str) -> Any:
        if name in _MOVED[old]:
            return _moved(old, name)
        raise AttributeError(f"module {old!r} has no attribute {name!r}")

    module.__getattr__ = __getattr__


def _result_plot(self: Any, truth: Any, query: str = "total", *, ax: Any = None,
                 confidential: bool = False) -> Any:
    """Deprecated alias of :func:`postproc.evaluation.plots.plot_errors_by_level` (``self`` is
    its ``result``): the errors against the truth by level, one box per level, on a matplotlib
    Axes; the errors of release-mode measurements only with ``confidential=True``.

    Examples
    --------
    >>> import warnings
    >>> from matplotlib.figure import Figure
    >>> from hierarchy import Attribute, Geography, Hierarchy, Schema, Workload
    >>> from hierarchy.queries import detailed
    >>> from postproc.result import Result
    >>> schema = Schema((Attribute("sex", ("male", "female")),))
    >>> geo = Geography(("nation", "state"), (["US"], ["A", "B"]), ([-1], [0, 0]))
    >>> truth = Hierarchy(schema, geo, (np.array([[3, 4]]), np.array([[1, 4], [2, 0]])))
    >>> r = Result("mine", schema, geo, Workload((detailed(schema),)),
    ...            (np.array([[4, 4]]), np.array([[2, 4], [2, 0]])),
    ...            {"noisy": {"randomness": {"mode": "simulation"}}})
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     ax = r.plot(truth, ax=Figure().subplots())
    >>> ax.get_title(), str(caught[0].message)
    ('mine: error of total by level', 'Result.plot is deprecated: use
    postproc.evaluation.plots.plot_errors_by_level(result, truth, ...)')
    """
    from postproc.evaluation.plots import plot_errors_by_level

    warnings.warn("Result.plot is deprecated: use postproc.evaluation.plots.plot_errors_by_level"
                  "(result, truth, ...)", DeprecationWarning, stacklevel=2)
    return plot_errors_by_level(self, truth, query, ax=ax, confidential=confidential)


def _attach_plot(module: Any) -> None:
    module.Result.plot = _result_plot


#: module → what attaches its deprecated aliases once it is loaded
_ATTACH = {"postproc.result": _attach_plot, **{name: _attach_moved for name in _MOVED}}


class _AttachOnLoad:
    """First on ``sys.meta_path``: finds no module itself, but for a module of :data:`_ATTACH`
    it takes the spec the other finders give and has its loader attach the aliases after
    running the module."""

    attaches_postproc_aliases = True

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name not in _ATTACH:
            return None
        for finder in sys.meta_path:
            if getattr(finder, "attaches_postproc_aliases", False) \
                    or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        if loader is not None and hasattr(loader, "exec_module"):
            execute = loader.exec_module

            def exec_module(module: Any) -> None:
                execute(module)
                if module.__name__ in _ATTACH:
                    _ATTACH[module.__name__](module)

            loader.exec_module = exec_module        # this spec's loader: the file's own
        return spec


if not any(getattr(f, "attaches_postproc_aliases", False) for f in sys.meta_path):
    sys.meta_path.insert(0, _AttachOnLoad())
for _loaded in set(_ATTACH) & set(sys.modules):     # loaded already: this package reloaded
    _ATTACH[_loaded](sys.modules[_loaded])
