"""A sampler that moves *within* ``A s = a``: Metropolis moves along integer kernel vectors.

Every move adds ``k · v`` to the state, where ``v`` is an integer vector with ``A v = 0`` and
``k`` a random nonzero step with a symmetric law, so the equalities hold exactly at every step
and the proposal is symmetric; a move is accepted with probability
``min{1, p(s + k v) / p(s)} · 1(B (s + k v) ≥ b)``. The move set comes from the structure of
``A``:

* cells whose columns of ``A`` are identical form a **class**: ``e_i − e_j`` for two cells of a
  class never changes ``A s`` (a pair move); cells in no equality move alone;
* the class-level matrix ``A_c`` (one column per class) has an integer kernel basis
  (:func:`~postproc.methods.sampling.exact.integer_kernel_basis`); each basis vector ``u`` is
  *lifted* to a move by putting ``u_c`` on one random cell of each class ``c``;
* in a hierarchy, children of one parent are paired at random; a cell moves between paired
  children (``+k`` in one, ``−k`` in the other, so the parent's sum holds), and swaps
  ``(+, −, −, +)`` on two cells of a class keep the children's own equalities.

For the invariants of Gong & Meng's table (total, female total, voting-age total) the classes are
the four sex × voting-age groups and ``A_c`` has one kernel vector, the 2 × 2 swap
``(+1, −1, −1, +1)``: pair moves and the swap connect every table of ``S*`` (the swap fixes the
class totals, pair moves reach every nonnegative split within a class).

The moves are run by :class:`~postproc.methods.sampling.engine.LatticeEngine`, vectorized over the
moves of a stage and over chains, with coupled rows of ``B`` decided exactly as a one-by-one scan.

Examples
--------
>>> from postproc.methods.sampling.target import conditional_target
>>> t = conditional_target([[1, 1, 1, 1]], [10], centre=[4, 3, 2, 1], epsilon=0.5)
>>> res = sample_lattice(t, draws=2000, rng=7)
>>> int(res.released.sum()), bool(res.invariants_hold), res.mode
(10, True, 'simulation')
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from hierarchy.randomness import as_randomness
from postproc.errors import PostprocError
from postproc.methods.sampling.diagnostics import effective_sample_size
from postproc.methods.sampling.engine import (
    FIXED,
    FREE,
    LatticeEngine,
    MoveStructure,
    default_step,
    move_structure,
)
from postproc.methods.sampling.result import SamplingResult
from postproc.methods.sampling.target import ConditionalTarget, _positive_int, plan_chain

__all__ = ["sample_lattice", "LatticeEngine", "MoveStructure", "move_structure", "default_step",
           "FREE", "FIXED"]


def sample_lattice(target: ConditionalTarget, *, draws: int, rng: Any = None, chains: int = 4,
                   burn_in: int | None = None, thin: int = 1, step: float | None = None,
                   start: Any = None, diagnostics: bool = True,
                   min_steps: int | None = None) -> SamplingResult:
    """Draw from the conditional mechanism with Metropolis lattice moves inside ``A s = a``.

    Parameters
    ----------
    target : ConditionalTarget
    draws : int
        Sweeps after burn-in (a sweep proposes one move for every pair of cells of a class, every
        free cell, and one lifted move per class-level kernel vector).
    rng : None, int, numpy.random.Generator or Randomness
        ``None`` is release mode; an int seed is simulation mode (labelled unsafe).
    chains : int
        Independent chains run in the same arrays (all start at ``start``); the released draw
        is chain 0's final state. The others cost little (the work is vectorized) and make the
        ESS a multi-chain estimate, which notices a chain that has not mixed. Default 4.
    burn_in : int, optional
        Sweeps discarded first (default ``max(draws // 10, min_steps − draws)``).
    thin : int
        Keep every ``thin``-th sweep.
    step : float, optional
        Mean absolute step of a move (default :func:`default_step`).
    start : array_like, optional
        A state in ``S*``. Default :meth:`ConditionalTarget.public_start`, computed from the
        invariants and constraints only, never from the centre: lattice moves are local, so a
        chain that has not mixed resembles its start, and this start is published anyway.
    diagnostics : bool
        Compute the multi-chain ESS per cell.
    min_steps : int, optional
        Fewest sweeps ``burn_in + draws`` (default
        :data:`~postproc.methods.sampling.target.MIN_STEPS`; lower only in simulation mode); see
        :func:`~postproc.methods.sampling.target.plan_chain`.

    Returns
    -------
    SamplingResult

    Raises
    ------
    PostprocError
        Unsatisfiable invariants, a start outside ``S*``, bad options, an equality structure
        without an integer lattice basis, a chain shorter than the minimum, continuous noise in
        release mode, too much memory (:func:`~postproc.methods.sampling.target.plan_chain`), or a
        chain 0 that proposed moves but never accepted one (its start would be released unchanged).

    Examples
    --------
    >>> from postproc.methods.sampling.target import conditional_target
    >>> A = [[1, 1, 1, 1], [1, 0, 1, 0], [1, 1, 0, 0]]          # total and two 2-level margins
    >>> t = conditional_target(A, [10, 5, 6], centre=[3, 3, 2, 2], epsilon=0.5)
    >>> res = sample_lattice(t, draws=500, rng=2, chains=4)
    >>> res.chain.shape, bool(res.invariants_hold)
    ((4, 500, 4), True)
    """
    source = as_randomness(rng)
    chains = _positive_int(chains, "chains")
    draws, burn_in, thin = plan_chain(target, release=source.safe_for_release, draws=draws,
                                      burn_in=burn_in, thin=thin, chains=chains,
                                      min_steps=min_steps, step="sweep")
    start_state = target.start(start) if start is not None else target.public_start()
    fixed = target.lower == target.upper
    structure = move_structure(target.A, fixed)
    step = float(default_step(target.mechanism, target.parameter)) if step is None else step
    least = 1.0 if target.integer else 0.0
    if isinstance(step, bool) or not isinstance(step, (int, float, np.integer, np.floating)) \
            or not math.isfinite(step) or step < least or step <= 0:
        raise PostprocError(f"step must be a finite number {'≥ 1' if target.integer else '> 0'}"
                            f", not {step!r}")
    Bc, bc = target.coupled
    rows = Bc.toarray() if Bc.shape[0] else None
    engine = LatticeEngine(
        np.repeat(start_state[None], chains, axis=0), np.repeat(target.centre[None], chains, 0),
        target.mechanism, target.parameter, target.lower[None], target.upper[None], structure,
        rows=rows, row_lower=np.repeat(bc[None].astype(float), chains, 0) if rows is not None
        else None, row_upper=np.full((chains, bc.size), np.inf) if rows is not None else None,
        step=float(np.asarray(step)), integer=target.integer)
    engine.track_units = True            # moves proposed and accepted per chain, whole run
    chain_source = source.child(2)
    kept = []
    t0 = time.perf_counter()
    engine.run(burn_in, chain_source)
    engine.proposed = engine.accepted = 0

    def keep(i: int) -> None:
        if i % thin == 0:
            kept.append(engine.X.copy())

    engine.run(draws, chain_source, keep)
    seconds = time.perf_counter() - t0
    chain = np.stack(kept, axis=1) if kept else np.zeros((chains, 0, target.n))
    if not target.integer:
        chain = chain.astype(np.float64)
    released = engine.X[0].copy()
    if engine.unit_proposed[0] and not engine.unit_accepted[0]:
        raise PostprocError(
            f"the lattice chain never left its start in {burn_in + draws} sweeps "
            f"({int(engine.unit_proposed[0])} moves proposed, none accepted); releasing the "
            "start would publish it unchanged instead of a draw; run more sweeps (raise --draws "
            "or --burn-in)")
    ess = effective_sample_size(chain) if diagnostics and chain.shape[1] >= 4 else \
        np.full(target.n, np.nan)
    proposals_total = engine.proposed * (burn_in + draws) // max(draws, 1)
    settings = {"draws": draws, "burn_in": burn_in, "thin": thin, "chains": chains,
                "step": float(np.asarray(step)), "moves": structure.describe(),
                "moves_per_sweep": engine.proposed // max(draws, 1)}
    return SamplingResult("lattice", released, chain, engine.acceptance_rate, proposals_total,
                          seconds, ess, source.provenance(), settings, target, engine.X.copy())
