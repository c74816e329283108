"""Invariants and constraints: a declarative spec, compiled per level, verified exactly.

The names a user needs are exported here, loaded on first use (``import invariants`` stays
cheap):

>>> from invariants import Spec, SpecError
>>> spec = Spec.e2e(["nation", "state", "county", "enum_dist"])
>>> [invariant.name for invariant in spec.invariants]
['tot', 'gqhh_vect', 'gqhh_tot']
>>> issubclass(SpecError, ValueError)
True
"""

from hierarchy.exports import lazy_exports

# exported name -> the module that defines it
_EXPORTS = {
    "Spec": "invariants.spec", "verify_histograms": "invariants.verify",
    "SpecError": "invariants.errors", "DappError": "hierarchy.errors",
    "Invariant": "invariants.spec", "Constraint": "invariants.spec", "UnitSum": "invariants.spec",
    "compile_spec": "invariants.compile",
    "__version__": "hierarchy",  # one distribution, one version
}

__all__ = sorted(name for name in _EXPORTS if not name.startswith("__"))


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
