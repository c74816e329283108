"""Gong & Meng's Metropolized independent sampler (MIS; docs/conditional_sampling.md):
:func:`sample_mis`.

The kernel — proposals drawn and weighed in blocks, the accept/reject loop — is
:mod:`postproc.methods.sampling.mis_kernel`; the proposal parameter ``ε̃`` is tuned by
:mod:`postproc.methods.sampling.tuning`.

Examples
--------
>>> from postproc.methods.sampling.target import conditional_target
>>> t = conditional_target([[1, 1, 1, 1]], [10], centre=[4, 3, 2, 1], epsilon=0.5)
>>> res = sample_mis(t, draws=20_000, rng=7, proposal_epsilon=0.6)
>>> int(res.released.sum()), bool((res.released >= 0).all()), res.mode
(10, True, 'simulation')
>>> bool(res.invariants_hold), 0.05 < res.acceptance_rate < 0.9
(True, True)
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from hierarchy.randomness import as_randomness
from postproc.errors import PostprocError
from postproc.methods.sampling.diagnostics import effective_sample_size
from postproc.methods.sampling.exact import IndexSet
from postproc.methods.sampling.mis_kernel import (
    DEFAULT_BLOCK,
    MISKernel,
    mis_index_set,
    reference_epsilon,
    run_mis,
)
from postproc.methods.sampling.result import SamplingResult
from postproc.methods.sampling.target import ConditionalTarget, _positive_int, plan_chain
from postproc.methods.sampling.tuning import tune_proposal_epsilon

# the kernel's names stay importable from here
__all__ = ["sample_mis", "mis_index_set", "MISKernel", "run_mis", "reference_epsilon"]


def _to_counts(target: ConditionalTarget, deviations: np.ndarray) -> np.ndarray:
    values = deviations + target.centre
    if target.integer:
        return np.rint(values).astype(np.int64)
    return values


def sample_mis(target: ConditionalTarget, *, draws: int, rng: Any = None,
               proposal_epsilon: float | None = None, index_set: IndexSet | None = None,
               burn_in: int | None = None, thin: int = 1, start: Any = None,
               block: int = DEFAULT_BLOCK, diagnostics: bool = True,
               min_steps: int | None = None) -> SamplingResult:
    """Draw from the conditional mechanism with the Metropolized independent sampler.

    Parameters
    ----------
    target : ConditionalTarget
    draws : int
        Iterations after burn-in.
    rng : None, int, numpy.random.Generator or Randomness
        ``None`` is release mode (cryptographically secure, not reproducible); an int seed is
        simulation mode (reproducible, labelled unsafe for a release).
    proposal_epsilon : float, optional
        ``ε̃``; default: tuned for the highest acceptance rate by
        :func:`~postproc.methods.sampling.tuning.tune_proposal_epsilon` (a short pilot per grid
        point).
    index_set : IndexSet, optional
        Default :func:`mis_index_set`.
    burn_in : int, optional
        Iterations discarded first (default ``max(draws // 10, min_steps − draws)``).
    thin : int
        Keep every ``thin``-th state of the chain.
    start : array_like, optional
        A state in ``S*``; default :meth:`ConditionalTarget.start` (the centre when feasible, as
        in the paper). The released state is always an accepted proposal — fresh noise drawn
        independently of the start — because a chain that never left its start is refused; and
        a start of the highest importance weight is what lets that guard see a chain stuck by a
        too small ``ε̃`` (a low-weight public start would be left at once and the chain would
        stick one move later, unnoticed).
    block : int
        Proposals drawn and weighed at once.
    diagnostics : bool
        Compute the per-cell ESS of the kept chain.
    min_steps : int, optional
        Fewest iterations ``burn_in + draws`` (default
        :data:`~postproc.methods.sampling.target.MIN_STEPS`; lower only in simulation mode); see
        :func:`~postproc.methods.sampling.target.plan_chain`.

    Returns
    -------
    SamplingResult
        ``released`` is the final state; ``settings`` has ``I``, ``I^c`` and ``ε̃``.

    Raises
    ------
    PostprocError
        Unsatisfiable invariants, no valid ``I``, a start outside ``S*``, bad options, a chain
        shorter than the minimum, continuous noise in release mode, too much memory
        (:func:`~postproc.methods.sampling.target.plan_chain`), or a chain that never left its
        start.

    Examples
    --------
    >>> from postproc.methods.sampling.target import conditional_target
    >>> t = conditional_target([[1, 1, 0], [0, 1, 1]], [5, 7], centre=[2, 3, 4], epsilon=1.0)
    >>> r = sample_mis(t, draws=2000, rng=1, proposal_epsilon=1.0)
    >>> r.chain.shape, r.settings["basic"]
    ((1, 2000, 3), [2, 1])
    """
    source = as_randomness(rng)
    block = _positive_int(block, "block")
    draws, burn_in, thin = plan_chain(target, release=source.safe_for_release, draws=draws,
                                      burn_in=burn_in, thin=thin, min_steps=min_steps,
                                      step="iteration")
    ix = index_set if index_set is not None else mis_index_set(target)
    start_state = target.start(start)
    tuned = None
    if proposal_epsilon is None:
        tuned = tune_proposal_epsilon(target, rng=source.child(1), index_set=ix,
                                      start=start_state)
        proposal_epsilon = tuned.best
    kernel = MISKernel(target, ix, proposal_epsilon)
    chain_source = source.child(2)
    t0 = time.perf_counter()
    kept, final, accepted, steps = run_mis(kernel, start_state, burn_in + draws, chain_source,
                                           burn_in=burn_in, thin=thin, block=block)
    seconds = time.perf_counter() - t0
    chain = _to_counts(target, kept)[None]
    released = _to_counts(target, final)
    if np.array_equal(released, start_state) and not np.any(chain != start_state):
        raise PostprocError(
            f"the MIS never left its start in {burn_in + draws} iterations (ε̃ = "
            f"{proposal_epsilon:g}); releasing the start would publish it unchanged — the "
            "confidential table when the chain starts at s*. With ε̃ ≤ ε the start s* has the "
            "largest importance weight and the chain sticks there: use ε̃ a little above ε (or "
            "tune it), more draws, or the lattice sampler")
    ess = effective_sample_size(chain) if diagnostics and chain.shape[1] >= 4 else \
        np.full(target.n, np.nan)
    settings = {"proposal_epsilon": float(proposal_epsilon), "tuned": tuned is not None,
                "burn_in": burn_in, "draws": draws, "thin": thin, "block": block,
                "free": ix.free.tolist(), "basic": ix.basic.tolist(),
                "determinant": ix.determinant if ix.integer else float(ix.determinant)}
    if tuned is not None:
        settings["tuning"] = tuned.to_dict()
    return SamplingResult("mis", released, chain, accepted / draws, steps, seconds, ess,
                          source.provenance(), settings, target)
