"""Conditional sampling under invariants (Gong & Meng 2020; SPEC §6).

Release a draw of the unconstrained noise mechanism *conditioned* on the invariants,
``M(x) | M(x) ∈ S*`` with ``S* = {s : A s = a, B s ≥ b}``, instead of an optimization's output.

* :func:`conditional_target` — the law: mechanism (two-sided geometric, discrete Gaussian,
  Laplace) around a centre, restricted to ``S*``;
* :func:`sample_lattice` — **default**: Metropolis moves along integer kernel vectors of ``A``,
  so every state satisfies ``A s = a`` exactly; vectorized over chains and problems;
* :func:`sample_mis` — the Metropolized independent sampler of the paper, with an automatic
  unimodular index set (:func:`choose_index_set`), batched proposals and an ``ε̃`` tuner
  (:func:`tune_proposal_epsilon`);
* :func:`sample_conditional` — either, by name;
* :func:`release_table` — a CSV table of counts (the ``postproc mis`` command);
* :func:`sample_topdown` — a :class:`~hierarchy.noisy.NoisyHierarchy` post-processed top-down by
  conditional sampling, returning integer histograms per level like ``topdown()``;
* diagnostics — :func:`effective_sample_size`, acceptance curves, trace and ESS figures.

See ``docs/conditional_sampling.md``.

Examples
--------
>>> t = conditional_target([[1, 1, 1]], [12], centre=[5, 4, 3], epsilon=0.5)
>>> res = sample_conditional(t, draws=300, rng=0)
>>> res.sampler, int(res.released.sum()), res.randomness["mode"]
('lattice', 12, 'simulation')
"""

from __future__ import annotations

from typing import Any

from postproc.errors import PostprocError
from postproc.sampling.diagnostics import (effective_sample_size, plot_acceptance_curve,
                                           plot_ess, plot_traces, summarize_ess)
from postproc.sampling.exact import (IndexSet, bareiss_determinant, choose_index_set,
                                     integer_kernel_basis, row_basis)
from postproc.sampling.hierarchical import sample_topdown
from postproc.sampling.engine import LatticeEngine, move_structure
from postproc.sampling.lattice import sample_lattice
from postproc.sampling.mis import mis_index_set, sample_mis
from postproc.sampling.result import SamplingResult
from postproc.sampling.table import (DEFAULT_SAMPLER, SAMPLERS, CountTable, TableRelease,
                                     read_count_table, release_table, table_target)
from postproc.sampling.target import ConditionalTarget, conditional_target
from postproc.sampling.tuning import TuningResult, acceptance_curve, tune_proposal_epsilon

__all__ = ["ConditionalTarget", "conditional_target", "sample_conditional", "sample_mis",
           "sample_lattice", "SamplingResult", "IndexSet", "choose_index_set", "mis_index_set",
           "row_basis", "bareiss_determinant", "integer_kernel_basis", "move_structure",
           "LatticeEngine", "TuningResult", "acceptance_curve", "tune_proposal_epsilon",
           "effective_sample_size", "summarize_ess", "plot_acceptance_curve", "plot_traces",
           "plot_ess", "CountTable", "read_count_table", "table_target", "release_table",
           "TableRelease", "SAMPLERS", "DEFAULT_SAMPLER", "sample_topdown"]


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
    """
    import inspect

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

