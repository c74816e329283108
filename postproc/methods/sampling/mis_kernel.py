"""The kernel of Gong & Meng's Metropolized independent sampler (MIS;
docs/conditional_sampling.md), batched and vectorized: proposals, weights and the chain
(:func:`~postproc.methods.sampling.mis.sample_mis` runs it).

With the proposal index set ``I`` and its unimodular complement ``I^c``
(:func:`~postproc.methods.sampling.exact.choose_index_set`), one iteration

1. draws ``s̃_I = s*_I + e``, ``e`` double geometric with parameter ``ε̃`` (Laplace with scale
   ``1/ε̃`` for continuous data), and solves ``s̃_{I^c} = A_{I^c}^{-1}(a − A_I s̃_I)`` — integers,
   because the inverse of a unimodular block is an integer matrix;
2. accepts with probability ``min{1, p(s̃) 1(B s̃ ≥ b) q(s⁽ᵗ⁾_I) / (p(s⁽ᵗ⁾) q(s̃_I))}``.

Proposals do not depend on the current state, so a whole block of them is drawn and weighed at
once: random 64-bit words → magnitudes by inverse CDF (one ``log`` each) with the sign from the
word's lowest bit, the ``I^c`` cells by one matrix product, the log weight
``w = log p − log q`` and feasibility by vectorized reductions. Only the accept/reject step is
sequential — accept ``k`` iff ``w_cur < w_k − log u_k`` — and it runs over the *feasible*
proposals only, as a tight loop over Python floats. Arithmetic is float64 on exact integers; a
per-block bound check falls back to int64 if any value could reach 2⁵².

Examples
--------
>>> from postproc.methods.sampling.target import conditional_target
>>> t = conditional_target([[1, 1, 1, 1]], [10], centre=[4, 3, 2, 1], epsilon=0.5)
>>> ix = mis_index_set(t)
>>> sorted(ix.free.tolist() + ix.basic.tolist())
[0, 1, 2, 3]
"""

from __future__ import annotations

import math

import numpy as np

from hierarchy.randomness import Randomness
from postproc.errors import PostprocError
from postproc.methods.sampling.exact import IndexSet, choose_index_set
from postproc.methods.sampling.target import ConditionalTarget

__all__ = ["mis_index_set", "MISKernel", "run_mis", "reference_epsilon", "DEFAULT_BLOCK"]

_TWO_POW_53_INV = 1.0 / 9007199254740992.0
_EXACT_FLOAT = float(1 << 52)
DEFAULT_BLOCK = 1024
#: Mechanisms whose parameter is the variance σ² and whose log kernel is ``-d²/(2σ²)``.
_GAUSSIANS = ("discrete_gaussian", "gaussian")


def reference_epsilon(target: ConditionalTarget) -> float:
    """The double-geometric parameter that matches the target's per-cell noise.

    ``z`` for the geometric mechanism, ``1/b`` for Laplace, and for the discrete Gaussian the
    ``z`` whose two-sided geometric has variance ``σ²``. The proposal parameter ``ε̃`` is tuned
    around it.

    Examples
    --------
    >>> from postproc.methods.sampling.target import conditional_target
    >>> reference_epsilon(conditional_target([[1, 1]], [2], centre=[1, 1], epsilon=0.5))
    0.5
    """
    if target.mechanism == "geometric":
        return target.parameter
    if target.mechanism == "laplace":
        return 1.0 / target.parameter
    # the Gaussians' parameter is σ²; any other registered mechanism: its variance
    s2 = (target.parameter if target.mechanism in _GAUSSIANS
          else float(target.noise.variance(target.parameter)))
    q = ((s2 + 1) - math.sqrt((s2 + 1) ** 2 - s2 * s2)) / s2
    return -math.log(q)


def mis_index_set(target: ConditionalTarget) -> IndexSet:
    """The automatic ``I``: ``I^c`` prefers the cells with the largest centre values.

    The solved cells ``I^c`` carry sums of proposal noise, so putting them where the counts are
    large keeps them from going negative (fewer wasted proposals).

    Raises
    ------
    PostprocError
        If the invariants contradict each other or no unimodular block exists (integer data).

    Examples
    --------
    >>> from postproc.methods.sampling.target import conditional_target
    >>> t = conditional_target([[1, 1, 1]], [9], centre=[1, 5, 3], epsilon=1.0)
    >>> mis_index_set(t).basic.tolist()
    [1]
    """
    prefer = np.argsort(-target.centre.astype(np.float64), kind="stable")
    return choose_index_set(target.A, integer=target.integer, prefer=prefer.tolist(),
                            a=target.a, labels=target.row_labels)


class MISKernel:
    """Vectorized proposal, weight and feasibility for one target, index set and ``ε̃``.

    States are handled as deviations ``d = s − centre`` split into ``d_I`` and ``d_{I^c}``.

    Parameters
    ----------
    target : ConditionalTarget
    index_set : IndexSet
    proposal_epsilon : float
        ``ε̃ > 0``.

    Examples
    --------
    >>> from hierarchy.randomness import Randomness
    >>> from postproc.methods.sampling.target import conditional_target
    >>> t = conditional_target([[1, 1, 1]], [9], centre=[3, 3, 3], epsilon=1.0)
    >>> kernel = MISKernel(t, mis_index_set(t), 1.2)
    >>> d_free, d_basic, logw, ok = kernel.propose(5, Randomness.simulation(0))
    >>> d_free.shape, d_basic.shape, bool(np.all(d_free.sum(1) + d_basic.sum(1) == 0))
    ((5, 2), (5, 1), True)
    """

    def __init__(self, target: ConditionalTarget, index_set: IndexSet, proposal_epsilon: float):
        if not (isinstance(proposal_epsilon, (int, float, np.floating)) and
                math.isfinite(proposal_epsilon) and proposal_epsilon > 0):
            raise PostprocError(f"the proposal parameter ε̃ must be positive and finite, not "
                                f"{proposal_epsilon!r}")
        if index_set.n_cells != target.n:
            raise PostprocError(f"the index set covers {index_set.n_cells} cells; the target has "
                                f"{target.n}")
        self.target = target
        self.index_set = index_set
        self.eps = float(proposal_epsilon)
        self.free = index_set.free
        self.basic = index_set.basic
        centre = target.centre.astype(np.float64)
        self.c_free, self.c_basic = centre[self.free], centre[self.basic]
        base = index_set.base(target.a).astype(np.float64) if self.basic.size else np.zeros(0)
        G = index_set.coupling.astype(np.float64)
        self.GT = np.ascontiguousarray(G.T)                      # (|I|, |I^c|)
        self.G_int = index_set.coupling.T.astype(np.int64) if target.integer else None
        self.delta0 = base - G @ self.c_free - self.c_basic      # d_{I^c} when d_I = 0
        self.g_norm = float(np.abs(G).sum(axis=0).max(initial=0.0))
        lower, upper = target.lower, target.upper
        self.lo_free = lower[self.free] - self.c_free
        self.hi_free = upper[self.free] - self.c_free
        self.lo_basic = lower[self.basic] - self.c_basic
        self.hi_basic = upper[self.basic] - self.c_basic
        self.check_lo_free = bool(np.isfinite(self.lo_free).any())
        self.check_hi_free = bool(np.isfinite(self.hi_free).any())
        Bc, bc = target.coupled
        self.coupled = Bc.shape[0] > 0
        if self.coupled:
            Bd = Bc.toarray().astype(np.float64)
            self.B_free_T = np.ascontiguousarray(Bd[:, self.free].T)
            self.B_basic_T = np.ascontiguousarray(Bd[:, self.basic].T)
            self.B_slack = Bd @ centre - bc                       # B (c + d) - b = slack + B d
        q = math.exp(-self.eps)
        # |e| = floor(log(u (1 + q) / 2) / log q) for the two-sided geometric (P[|e| ≥ k] =
        # 2 q^k / (1 + q)); -log(u) / ε̃ for the Laplace. u = (x + 1) / 2**53.
        self.log_offset = -53.0 * math.log(2.0)
        if target.integer:
            self.log_offset += math.log1p(q) - math.log(2.0)
        self.sign_words = -(-self.free.size // 64)
        self.mech = target.mechanism
        self.param = target.parameter

    # -- one state ----------------------------------------------------------------------------
    def split(self, state: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(d_I, d_{I^c})`` of a state ``s`` (float64)."""
        d = np.asarray(state, dtype=np.float64) - self.target.centre
        return d[self.free], d[self.basic]

    def log_weight(self, d_free: np.ndarray, d_basic: np.ndarray) -> np.ndarray:
        """``log p(s) − log q(s_I)`` up to a constant, for rows of deviations."""
        mag = np.abs(d_free)
        return self._weight(mag.sum(axis=-1), d_free, d_basic)

    def _weight(self, mag_sum, d_free, d_basic):
        eps, p = self.eps, self.param
        if self.mech == "geometric":
            return (eps - p) * mag_sum - p * np.abs(d_basic).sum(axis=-1)
        if self.mech == "laplace":
            return (eps - 1.0 / p) * mag_sum - np.abs(d_basic).sum(axis=-1) / p
        if self.mech not in _GAUSSIANS:  # a registered mechanism: its own log kernel
            law = self.target.noise
            return (eps * mag_sum + law.log_kernel(d_free, p).sum(axis=-1)
                    + law.log_kernel(d_basic, p).sum(axis=-1))
        sq = np.einsum("...i,...i->...", d_free, d_free) + \
            np.einsum("...i,...i->...", d_basic, d_basic)
        return eps * mag_sum - sq / (2.0 * p)

    # -- a block of proposals -----------------------------------------------------------------
    def _buffers(self, m: int):
        if getattr(self, "_m", None) != m:
            k = self.free.size
            self._m = m
            self._x = np.empty((m, k))
            self._mask = np.empty((m, k), dtype=bool)
            self._bits = np.empty((m, k), dtype=np.uint64)
        return self._x, self._mask, self._bits

    def propose(self, m: int, source: Randomness):
        """``m`` proposals: ``(d_I, d_{I^c}, log weight, feasible)``.

        ``d_I`` is a buffer reused by the next call: copy what must be kept.
        """
        k = self.free.size
        x, mask, bits = self._buffers(m)
        words = source.random_raw(m * k).reshape(m, k)        # read-only in release mode
        np.right_shift(words, np.uint64(11), out=bits)        # 53 random bits
        np.copyto(x, bits, casting="unsafe")                   # exact: < 2**53
        # u = (x + 1) / 2**53 on (0, 1]; log u = log1p(x) − 53 log 2
        np.log1p(x, out=x)
        x += self.log_offset
        x *= -1.0 / self.eps
        if self.target.integer:
            np.floor(x, out=x)                                 # |e| by inverse CDF
        mag_sum = x.sum(axis=1)
        sign_words = source.random_raw(m * self.sign_words)
        signs = np.unpackbits(sign_words.view(np.uint8)).reshape(m, -1)[:, :k].view(bool)
        np.negative(x, out=x, where=signs)                     # d_I = ± |e|
        d_free = x
        if self.basic.size:
            if self.target.integer and (mag_sum.max(initial=0.0) * self.g_norm
                                        + np.abs(self.delta0).max(initial=0.0) >= _EXACT_FLOAT):
                d_basic = (self.delta0.astype(np.int64)
                           - d_free.astype(np.int64) @ self.G_int).astype(np.float64)
            else:
                d_basic = self.delta0 - d_free @ self.GT
        else:
            d_basic = np.zeros((m, 0))
        bad = np.zeros(m, dtype=bool)
        if self.check_lo_free:
            np.less(d_free, self.lo_free, out=mask)
            bad |= mask.any(axis=1)
        if self.check_hi_free:
            np.greater(d_free, self.hi_free, out=mask)
            bad |= mask.any(axis=1)
        if self.basic.size:
            bad |= (d_basic < self.lo_basic).any(axis=1) | (d_basic > self.hi_basic).any(axis=1)
        if self.coupled:
            bad |= ((d_free @ self.B_free_T + d_basic @ self.B_basic_T + self.B_slack)
                    < -1e-9).any(axis=1)
        return d_free, d_basic, self._weight(mag_sum, d_free, d_basic), ~bad


def run_mis(kernel: MISKernel, start: np.ndarray, steps: int, source: Randomness, *,
            burn_in: int = 0, thin: int = 1, keep: bool = True, block: int = DEFAULT_BLOCK):
    """Run the MIS for ``steps`` iterations from ``start``.

    Parameters
    ----------
    kernel : MISKernel
    start : array (n,)
        A state in ``S*``.
    steps : int
    source : Randomness
    burn_in, thin : int
        Which states are kept (and counted in the acceptance).
    keep : bool
        Keep states at all (off for throughput measurements and tuning).
    block : int
        Proposals per batch.

    Returns
    -------
    tuple
        ``(kept deviations (k, n) or None, final deviation (n,), accepted after burn-in,
        proposals)``; deviations are ``s − centre`` in float64.

    Examples
    --------
    >>> from hierarchy.randomness import Randomness
    >>> from postproc.methods.sampling.target import conditional_target
    >>> t = conditional_target([[1, 1, 1]], [9], centre=[3, 3, 3], epsilon=1.0)
    >>> kept, final, accepted, steps = run_mis(MISKernel(t, mis_index_set(t), 1.2), t.centre,
    ...                                        1000, Randomness.simulation(1), thin=10)
    >>> kept.shape, steps, float(final.sum()), 0 < accepted < 1000
    ((100, 3), 1000, 0.0, True)
    """
    n = kernel.target.n
    free, basic = kernel.free, kernel.basic
    cur_free, cur_basic = kernel.split(start)
    w_cur = float(kernel.log_weight(cur_free[None], cur_basic[None])[0])
    kept_rows: list[np.ndarray] = []
    accepted = 0
    t0 = 0
    while t0 < steps:
        m = min(block, steps - t0)
        d_free, d_basic, logw, ok = kernel.propose(m, source)
        cand = np.flatnonzero(ok)
        acc: list[int] = []
        if cand.size:
            logu = np.log(source.uniform(cand.size))
            threshold = (logw[cand] - logu).tolist()
            weights = logw[cand].tolist()
            positions = cand.tolist()
            for pos, thr, w in zip(positions, threshold, weights):
                if thr > w_cur:
                    w_cur = w
                    acc.append(pos)
        acc_arr = np.asarray(acc, dtype=np.int64)
        if acc_arr.size:
            accepted += int(np.count_nonzero(acc_arr + t0 >= burn_in))
        if keep:
            first = max(burn_in, t0)
            offset = (-(first - burn_in)) % thin
            local = np.arange(first + offset, t0 + m, thin) - t0
            if local.size:
                idx = np.searchsorted(acc_arr, local, side="right") - 1
                rows = np.empty((local.size, n))
                has = idx >= 0
                pick = acc_arr[idx[has]]
                rows[np.ix_(has, free)] = d_free[pick]
                rows[np.ix_(has, basic)] = d_basic[pick]
                rows[np.ix_(~has, free)] = cur_free
                rows[np.ix_(~has, basic)] = cur_basic
                kept_rows.append(rows)
        if acc_arr.size:
            last = int(acc_arr[-1])
            cur_free, cur_basic = d_free[last].copy(), d_basic[last].copy()
        t0 += m
    final = np.empty(n)
    final[free], final[basic] = cur_free, cur_basic
    kept = np.concatenate(kept_rows) if kept_rows else np.zeros((0, n))
    return (kept if keep else None), final, accepted, steps
