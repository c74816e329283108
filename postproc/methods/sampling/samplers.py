"""The conditional samplers by name: :data:`SAMPLERS`, :data:`DEFAULT_SAMPLER` and
:func:`sample_conditional`.

This module imports no sampler at module level, so the command line can list the samplers
without loading numpy or scipy, and every other module of the package can import it.

Examples
--------
>>> from postproc.methods.sampling.target import conditional_target
>>> t = conditional_target([[1, 1, 1]], [12], centre=[5, 4, 3], epsilon=0.5)
>>> res = sample_conditional(t, draws=300, rng=0)
>>> res.sampler, int(res.released.sum()), res.randomness["mode"]
('lattice', 12, 'simulation')
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from postproc.errors import PostprocError

if TYPE_CHECKING:
    from postproc.methods.sampling.result import SamplingResult
    from postproc.methods.sampling.target import ConditionalTarget

__all__ = ["SAMPLERS", "DEFAULT_SAMPLER", "sample_conditional"]

#: Conditional samplers by name.
SAMPLERS = ("lattice", "mis")
#: The default: lattice moves give several times more effective samples per second than the MIS
#: on Gong & Meng's table (see docs/conditional_sampling.md and benchmarks/bench_sampling.py).
DEFAULT_SAMPLER = "lattice"


def sample_conditional(target: ConditionalTarget, *, sampler: str = DEFAULT_SAMPLER,
                       draws: int, rng: Any = None, **options: Any) -> SamplingResult:
    """Draw from ``target`` with the named sampler.

    Parameters
    ----------
    target : ConditionalTarget
    sampler : {'lattice', 'mis'}
        Default ``'lattice'`` (more effective samples per second; see the module docs).
    draws : int
        Sweeps (lattice) or iterations (MIS) after burn-in.
    rng : None, int, numpy.random.Generator or Randomness
        ``None`` is release mode.
    **options
        The sampler's keyword options.

    Returns
    -------
    SamplingResult

    Raises
    ------
    PostprocError
        Unknown sampler or an option it does not take.

    Examples
    --------
    >>> from postproc.methods.sampling.target import conditional_target
    >>> t = conditional_target([[1, 1]], [4], centre=[2, 2], epsilon=1.0)
    >>> sample_conditional(t, sampler="gibbs", draws=10, rng=0)
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: unknown sampler 'gibbs'; use one of lattice, mis
    """
    import inspect

    from postproc.methods.sampling.lattice import sample_lattice
    from postproc.methods.sampling.mis import sample_mis

    samplers = {"lattice": sample_lattice, "mis": sample_mis}
    if sampler not in samplers:
        raise PostprocError(f"unknown sampler {sampler!r}; use one of {', '.join(SAMPLERS)}")
    fn = samplers[sampler]
    known = {p.name for p in inspect.signature(fn).parameters.values()
             if p.kind is p.KEYWORD_ONLY}
    unknown = sorted(set(options) - known)
    if unknown:
        raise PostprocError(f"sampler {sampler!r} takes no option {unknown[0]!r}; its options "
                            f"are {', '.join(sorted(known - {'draws', 'rng'}))}")
    return fn(target, draws=draws, rng=rng, **options)
