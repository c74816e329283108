"""The post-processors: one protocol, one registry, and the methods themselves.

``postproc.methods`` is the registry's interface (:mod:`postproc.methods.registry`: register a
method, look it up, run it by name with its promises verified); the sub-packages are the
methods registered in it:

- :mod:`postproc.methods.topdown` — TopDown (weighted least squares and constraint-keeping
  rounding, level by level);
- :mod:`postproc.methods.sampling` — conditional sampling under the invariants (Gong & Meng),
  for one table and top-down for a hierarchy;
- :mod:`postproc.methods.baselines` — Hay et al., least squares, clipping and scaling, raking,
  bottom-up sums, the tree baselines of Flaxman (2019) and their measuring strategies.

>>> from postproc.methods import available
>>> available()[:4]
('topdown', 'sampling', 'hay', 'noisy')
"""

from importlib import import_module
from typing import Any

__all__ = ["PostProcessor", "PromiseError", "register", "unregister", "get", "available",
           "catalogue", "postprocess", "check_promises", "noisy_histograms"]


def __getattr__(name: str) -> Any:
    # loaded on first use, so that importing a method's module (or the command line's parser)
    # does not load the registry and every library it needs
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module("postproc.methods.registry"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
