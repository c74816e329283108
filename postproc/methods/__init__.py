"""The post-processors: one protocol, one registry, and the methods themselves.

``postproc.methods`` is the registry's interface (:mod:`postproc.methods.registry`: register a
method, look it up, run it by name with its promises verified); the sub-packages are the
methods registered in it:

- :mod:`postproc.methods.topdown` — TopDown (weighted least squares and constraint-keeping
  rounding, level by level);
- :mod:`postproc.methods.sampling` — conditional sampling under the invariants (Gong & Meng),
  for one table and top-down for a hierarchy;
- :mod:`postproc.methods.baselines` — Hay et al., least squares, clipping and scaling, raking,
  bottom-up sums, the tree baselines of Flaxman (2019) and their measuring strategies;

and, for any registered method, :mod:`postproc.methods.replicates`: approximate Monte Carlo
intervals of a released result's counts (re-measure the result, re-run the method).

>>> from postproc.methods import available
>>> available()[:4]
('topdown', 'sampling', 'hay', 'noisy')
"""

from hierarchy.exports import lazy_exports

# loaded on first use, so that importing a method's module (or the command line's parser) does
# not load the registry and every library it needs
_EXPORTS = {
    "PostProcessor": "postproc.methods.processor", "PromiseError": "postproc.methods.processor",
    "register": "postproc.methods.registry", "unregister": "postproc.methods.registry",
    "get": "postproc.methods.registry", "available": "postproc.methods.registry",
    "catalogue": "postproc.methods.registry", "postprocess": "postproc.methods.registry",
    "check_promises": "postproc.methods.processor",
    "noisy_histograms": "postproc.methods.builtin",
    "replicate_intervals": "postproc.methods.replicates",
    "remeasure": "postproc.methods.replicates",
}

__all__ = list(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
