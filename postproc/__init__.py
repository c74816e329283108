"""Post-processing of noisy measurements, and what it does to error and privacy loss.

The names a user needs are exported here, loaded on first use (``import postproc`` stays cheap):
the post-processors by name (:func:`postprocess`, :func:`available`, :func:`register` and
:func:`unregister` for your own; ``postprocess(noisy, "topdown", spec)`` or :func:`topdown` runs
TopDown), the one :class:`Result` type, :func:`evaluate` and :func:`error_metrics`, the empirical
privacy loss (:func:`estimate_epl`, :class:`EPLResult`), comparisons of post-processors
(:func:`compare_methods`, :func:`format_pivot`, :func:`plot_comparison`,
:func:`write_comparison`), configured runs (:func:`load_config`, :class:`RunConfig`,
:func:`run_pipeline`) and the package's base exception.

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

from hierarchy import lazy_exports

# exported name -> the module that defines it
_EXPORTS = {
    "postprocess": "postproc.methods", "register": "postproc.methods",
    "available": "postproc.methods", "topdown": "postproc.methods.topdown",
    "Result": "postproc.result", "evaluate": "postproc.evaluation.evaluate",
    "load_config": "postproc.apps.runs.config", "RunConfig": "postproc.apps.runs.config",
    "run_pipeline": "postproc.apps.runs.pipeline", "PostprocError": "postproc.errors",
    "DappError": "hierarchy.errors", "unregister": "postproc.methods",
    "estimate_epl": "postproc.evaluation.epl", "EPLResult": "postproc.evaluation.epl",
    "compare_methods": "postproc.evaluation.compare",
    "format_pivot": "postproc.evaluation.compare",
    "write_comparison": "postproc.evaluation.compare",
    "plot_comparison": "postproc.evaluation.plots", "error_metrics": "postproc.evaluation.metrics",
    "__version__": "hierarchy",  # one distribution, one version
}

__all__ = sorted(name for name in _EXPORTS if not name.startswith("__"))


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
