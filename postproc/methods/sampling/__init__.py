"""Conditional sampling under invariants (Gong & Meng 2020; docs/conditional_sampling.md).

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

See ``docs/conditional_sampling.md``. The names are loaded on first use, so listing the samplers
(:data:`SAMPLERS`, :data:`DEFAULT_SAMPLER`) loads no numerical library.

Examples
--------
>>> t = conditional_target([[1, 1, 1]], [12], centre=[5, 4, 3], epsilon=0.5)
>>> res = sample_conditional(t, draws=300, rng=0)
>>> res.sampler, int(res.released.sum()), res.randomness["mode"]
('lattice', 12, 'simulation')
"""

from hierarchy.exports import lazy_exports

# exported name -> the module that defines it
_EXPORTS = {
    **dict.fromkeys(["SAMPLERS", "DEFAULT_SAMPLER", "sample_conditional"],
                    "postproc.methods.sampling.samplers"),
    **dict.fromkeys(["effective_sample_size", "plot_acceptance_curve", "plot_ess", "plot_traces",
                     "summarize_ess"], "postproc.methods.sampling.diagnostics"),
    **dict.fromkeys(["IndexSet", "bareiss_determinant", "choose_index_set",
                     "integer_kernel_basis", "row_basis"], "postproc.methods.sampling.exact"),
    "sample_topdown": "postproc.methods.sampling.hierarchical",
    "LatticeEngine": "postproc.methods.sampling.engine",
    "move_structure": "postproc.methods.sampling.engine",
    "sample_lattice": "postproc.methods.sampling.lattice",
    "mis_index_set": "postproc.methods.sampling.mis", "sample_mis": "postproc.methods.sampling.mis",
    "SamplingResult": "postproc.methods.sampling.result",
    **dict.fromkeys(["CountTable", "TableRelease", "read_count_table", "release_table",
                     "table_target"], "postproc.methods.sampling.table"),
    "ConditionalTarget": "postproc.methods.sampling.target",
    "conditional_target": "postproc.methods.sampling.target",
    **dict.fromkeys(["TuningResult", "acceptance_curve", "tune_proposal_epsilon"],
                    "postproc.methods.sampling.tuning"),
}

__all__ = list(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
