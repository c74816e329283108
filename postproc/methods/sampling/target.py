"""The law a conditional sampler draws from: a noise mechanism around a centre, restricted to
``S* = {s : A s = a, B s ≥ b}`` (docs/conditional_sampling.md).

For a mechanism with per-cell noise law ``f`` and centre ``c`` (Gong & Meng's confidential
``s*``), the target is

    ``π(s) ∝ ∏_j f(s_j − c_j) · 1(A s = a) · 1(B s ≥ b)``.

The noise law is the mechanism's, read from the registry of :mod:`hierarchy.mechanisms`
(two-sided geometric, discrete Gaussian, Laplace, Gaussian, or a mechanism registered with
:func:`~hierarchy.mechanisms.register_mechanism`); nothing here knows a law by its name.
Samplers only need ratios of ``π``, so :meth:`ConditionalTarget.log_density` omits the
normalizing constants (:meth:`Mechanism.log_kernel <hierarchy.mechanisms.Mechanism.log_kernel>`).
Rows of ``B`` with a single nonzero entry become per-cell bounds (:attr:`ConditionalTarget.lower`,
:attr:`~ConditionalTarget.upper`); the others are *coupled* rows.

Examples
--------
>>> t = conditional_target([[1, 1, 1]], [6], centre=[1, 2, 3], epsilon=0.5)
>>> t.mechanism, t.parameter, t.integer
('geometric', 0.5, True)
>>> t.feasible(np.array([[1, 2, 3], [7, 0, -1], [0, 0, 6]])).tolist()
[True, False, True]
>>> float(t.log_density(np.array([0, 0, 6])))     # -0.5 * (1 + 2 + 3)
-3.0
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Sequence

import numpy as np
import scipy.sparse as sp

from hierarchy.budget import ZCDP, PureDP, notion
from hierarchy.mechanisms import Mechanism, get_mechanism
from hierarchy.numbers import positive
from postproc.errors import PostprocError
from postproc.methods.sampling.exact import row_basis

__all__ = ["ConditionalTarget", "conditional_target", "log_noise_density", "noise_sd",
           "plan_chain", "MIN_STEPS", "MEMORY_LIMIT", "format_bytes"]


def _law(mechanism: str | Mechanism) -> Mechanism:
    """The registered mechanism of that name (or the Mechanism itself), or a PostprocError."""
    try:
        return get_mechanism(mechanism)
    except ValueError as exc:
        raise PostprocError(f"conditional sampling: {exc}") from None


def log_noise_density(mechanism: str | Mechanism, deviation: Any,
                      parameter: Any) -> np.ndarray:
    """Unnormalized log density of a mechanism's noise at ``deviation`` (elementwise).

    The registry's :meth:`~hierarchy.mechanisms.Mechanism.log_kernel`: ``-z |d|`` (geometric),
    ``-d² / (2 σ²)`` (discrete Gaussian, Gaussian), ``-|d| / b`` (Laplace), or a registered
    mechanism's log pmf.

    Parameters
    ----------
    mechanism : str or Mechanism
        A registered name (``'geometric'``, ``'discrete_gaussian'``, ``'laplace'``, …).
    deviation : array_like
    parameter : float or array broadcastable to ``deviation``

    Returns
    -------
    numpy.ndarray of float64

    Raises
    ------
    PostprocError
        For an unknown mechanism (the message lists the registered ones).

    Examples
    --------
    >>> log_noise_density("geometric", [-2, 0, 3], 0.5).tolist()
    [-1.0, -0.0, -1.5]
    >>> log_noise_density("discrete_gaussian", [2], 2.0).tolist()
    [-1.0]
    """
    return _law(mechanism).log_kernel(deviation, parameter)


def noise_sd(mechanism: str | Mechanism, parameter: float) -> float:
    """Standard deviation of one cell's noise: ``sqrt(mechanism.variance(parameter))``.

    Parameters
    ----------
    mechanism : str or Mechanism
    parameter : float

    Returns
    -------
    float

    Raises
    ------
    PostprocError
        For an unknown mechanism.

    Examples
    --------
    >>> noise_sd("laplace", 2.0)                 # sqrt(2 b²)
    2.8284271247461903
    """
    return math.sqrt(_law(mechanism).variance(parameter))


_noise_sd = noise_sd      # the name postproc.methods.sampling.engine imports


@dataclass(frozen=True, eq=False)
class ConditionalTarget:
    """``π(s) ∝ ∏_j f(s_j − centre_j) · 1(A s = a, B s ≥ b)``; validated on construction.

    Build it with :func:`conditional_target` (which also adds nonnegativity rows).

    Attributes
    ----------
    A : array (m, n)
        Equality rows (int64 for integer mechanisms, float64 for Laplace).
    a : array (m,)
    B : scipy.sparse.csr_matrix (p, n)
        Inequality rows ``B s ≥ b``.
    b : array (p,)
    centre : array (n,)
        The mechanism's centre (``s*``).
    mechanism : str
        The mechanism's registered name (given as a name or a Mechanism).
    noise : Mechanism
        The mechanism itself, from :func:`hierarchy.mechanisms.get_mechanism`: the noise law.
    parameter : float
        ``z`` (geometric: pmf ∝ e^{−z|k|}), ``σ²`` (discrete Gaussian) or the Laplace scale ``b``:
        the mechanism's ``parameter_name``.
    cell_labels, row_labels : tuple of str, optional
        Names of the cells and of the rows of ``A`` (for messages and outputs).

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> t = ConditionalTarget(np.array([[1, 1]]), np.array([3]), sp.identity(2, format="csr"),
    ...                       np.zeros(2), np.array([1, 2]), "geometric", 0.5)
    >>> t.lower.tolist(), t.coupled[0].shape, t.start().tolist()
    ([0.0, 0.0], (0, 2), [1, 2])
    >>> ConditionalTarget(np.array([[1, 1]]), np.array([3]), None, None, np.array([1, 2]),
    ...                   "geometric", -1.0)
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: the z of the geometric mechanism must be a positive number,
    not -1.0
    """

    A: np.ndarray
    a: np.ndarray
    B: sp.csr_matrix
    b: np.ndarray
    centre: np.ndarray
    mechanism: str | Mechanism = "geometric"
    parameter: float = 1.0
    cell_labels: tuple[str, ...] | None = field(default=None, repr=False)
    row_labels: tuple[str, ...] | None = field(default=None, repr=False)
    noise: Mechanism = field(init=False, repr=False)

    def __post_init__(self):
        law = _law(self.mechanism)
        object.__setattr__(self, "noise", law)
        object.__setattr__(self, "mechanism", law.name)
        integer = law.discrete
        parameter = positive(self.parameter, f"the {law.parameter_name} of the {law.name} "
                                             f"mechanism", error=PostprocError)
        object.__setattr__(self, "parameter", float(parameter))
        centre = _vector(self.centre, "centre", integer)
        n = centre.size
        A = self.A.toarray() if sp.issparse(self.A) else np.asarray(self.A)
        if A.size == 0:
            A = np.zeros((0, n))
        if A.ndim != 2 or A.shape[1] != n:
            raise PostprocError(f"A has shape {A.shape}; expected (rows, {n}) for {n} cells")
        A = _matrix(A, "A", integer)
        a = _vector(self.a, "a", integer) if A.shape[0] else np.zeros(0, A.dtype)
        if a.shape != (A.shape[0],):
            raise PostprocError(f"a has {a.size} values for {A.shape[0]} rows of A")
        B = sp.csr_matrix(self.B, copy=True) if self.B is not None else sp.csr_matrix((0, n))
        if B.shape[1] != n:
            raise PostprocError(f"B has {B.shape[1]} columns; expected {n}")
        if B.shape[0]:
            # validate the stored entries only: densifying B (it holds the n × n nonnegativity
            # identity) would need 8 n² bytes
            B.sum_duplicates()
            B.eliminate_zeros()
            B = sp.csr_matrix((_matrix(B.data, "B", integer), B.indices, B.indptr),
                              shape=B.shape)
        else:
            B = sp.csr_matrix((0, n), dtype=A.dtype)
        b = _vector(self.b, "b", integer) if B.shape[0] else np.zeros(0, A.dtype)
        if b.shape != (B.shape[0],):
            raise PostprocError(f"b has {b.size} values for {B.shape[0]} rows of B")
        for name, labels, size in (("cell_labels", self.cell_labels, n),
                                   ("row_labels", self.row_labels, A.shape[0])):
            if labels is not None and len(labels) != size:
                raise PostprocError(f"{name} has {len(labels)} names for {size} entries")
        for key, value in (("A", A), ("a", a), ("B", B), ("b", b), ("centre", centre)):
            object.__setattr__(self, key, value)
        if self.cell_labels is not None:
            object.__setattr__(self, "cell_labels", tuple(map(str, self.cell_labels)))
        if self.row_labels is not None:
            object.__setattr__(self, "row_labels", tuple(map(str, self.row_labels)))
        self.lower  # noqa: B018 - validates the singleton rows now

    # -- basic properties ---------------------------------------------------------------------
    @property
    def n(self) -> int:
        """Number of cells."""
        return int(self.centre.size)

    @property
    def integer(self) -> bool:
        """Integer data (the mechanism's noise is ``discrete``: geometric, discrete Gaussian)
        or continuous (Laplace, Gaussian)."""
        return self.noise.discrete

    @property
    def noise_sd(self) -> float:
        """Standard deviation of one cell's unconstrained noise."""
        return noise_sd(self.noise, self.parameter)

    def describe(self) -> dict[str, Any]:
        """A JSON-ready description (mechanism, parameter, sizes)."""
        return {"mechanism": self.mechanism, self.noise.parameter_name: self.parameter,
                "cells": self.n, "equalities": int(self.A.shape[0]),
                "inequalities": int(self.B.shape[0])}

    # -- bounds -------------------------------------------------------------------------------
    @cached_property
    def _split(self) -> tuple[np.ndarray, np.ndarray, sp.csr_matrix, np.ndarray]:
        B, b = self.B, self.b
        lower = np.full(self.n, -np.inf)
        upper = np.full(self.n, np.inf)
        counts = np.diff(B.indptr)
        empty = np.flatnonzero(counts == 0)
        bad = empty[b[empty] > 0] if empty.size else empty
        if bad.size:
            raise PostprocError(f"the constraints are unsatisfiable: row {int(bad[0])} of B is "
                                f"0 ≥ {b[bad[0]]}")
        single = np.flatnonzero(counts == 1)
        if single.size:
            cols = B.indices[B.indptr[single]]
            coef = B.data[B.indptr[single]].astype(np.float64)
            bound = b[single] / coef
            if self.integer:
                bound = np.where(coef > 0, np.ceil(bound - 1e-9), np.floor(bound + 1e-9))
            pos = coef > 0
            np.maximum.at(lower, cols[pos], bound[pos])
            np.minimum.at(upper, cols[~pos], bound[~pos])
        bad = np.flatnonzero(lower > upper)
        if bad.size:
            raise PostprocError(f"the constraints are unsatisfiable: cell {self._cell(bad[0])} "
                                f"must be ≥ {lower[bad[0]]:g} and ≤ {upper[bad[0]]:g}")
        coupled = np.flatnonzero(counts > 1)
        return lower, upper, B[coupled], b[coupled]

    @property
    def lower(self) -> np.ndarray:
        """Per-cell lower bounds from the single-cell rows of ``B`` (``-inf`` if none)."""
        return self._split[0]

    @property
    def upper(self) -> np.ndarray:
        """Per-cell upper bounds from the single-cell rows of ``B`` (``+inf`` if none)."""
        return self._split[1]

    @property
    def coupled(self) -> tuple[sp.csr_matrix, np.ndarray]:
        """The rows of ``(B, b)`` with two or more cells."""
        return self._split[2], self._split[3]

    def _cell(self, j: int) -> str:
        return repr(self.cell_labels[j]) if self.cell_labels is not None else str(int(j))

    # -- densities and checks -----------------------------------------------------------------
    def log_density(self, s: Any) -> np.ndarray:
        """``Σ_j log f(s_j − centre_j)`` up to a constant, over the last axis of ``s``.

        The indicator of ``S*`` is not included; see :meth:`feasible`.
        """
        s = np.asarray(s)
        return self.noise.log_kernel(s - self.centre, self.parameter).sum(axis=-1)

    def feasible(self, s: Any) -> np.ndarray:
        """Whether each ``s`` (last axis = cells) is in ``S*``; exact for integer data.

        Integer data is compared in int64 (Python ints if it could overflow); continuous data
        with a relative tolerance of 1e-9 on the equalities.
        """
        s = np.asarray(s)
        if s.shape[-1] != self.n:
            raise PostprocError(f"states have {s.shape[-1]} cells; the target has {self.n}")
        flat = s.reshape(-1, self.n)
        if self.integer:
            if flat.dtype.kind == "f":
                whole = np.all(flat == np.round(flat), axis=1)
                flat = np.where(np.isfinite(flat), flat, 0).astype(np.int64)
            else:
                whole = np.ones(flat.shape[0], bool)
            flat = flat.astype(np.int64)
            coef = max(int(np.abs(self.A).max(initial=0)),
                       int(abs(self.B).max()) if self.B.nnz else 0)
            big = coef * int(np.abs(flat).max(initial=0)) * self.n >= 1 << 62
            if big:
                obj = flat.astype(object)
                eq = np.all((obj @ self.A.T.astype(object)) == self.a.astype(object), axis=1)
                ge = np.all((obj @ self.B.toarray().T.astype(object)) >= self.b.astype(object),
                            axis=1)
            else:
                eq = np.all(flat @ self.A.T == self.a, axis=1)
                ge = np.all((self.B @ flat.T).T >= self.b, axis=1)
            ok = whole & eq & ge
        else:
            scale = 1.0 + np.abs(self.a)
            eq = np.all(np.abs(flat @ self.A.T - self.a) <= 1e-9 * scale, axis=1)
            ge = np.all((self.B @ flat.T).T >= self.b - 1e-9 * (1.0 + np.abs(self.b)), axis=1)
            ok = eq & ge
        return ok.reshape(s.shape[:-1])

    def violations(self, s: Any, *, limit: int = 5) -> list[str]:
        """What ``s`` (one state) breaks, in words (empty if feasible)."""
        s = np.asarray(s)
        out = []
        Asr = s @ self.A.T if self.A.shape[0] else np.zeros(0)
        for i in np.flatnonzero(Asr != self.a)[:limit]:
            name = self.row_labels[i] if self.row_labels is not None else f"row {i}"
            out.append(f"{name} = {Asr[i]:g}, must be {self.a[i]:g}")
        Bs = self.B @ s
        for i in np.flatnonzero(Bs < self.b)[:limit]:
            out.append(f"inequality row {i}: {Bs[i]:g} < {self.b[i]:g}")
        return out

    def start(self, given: Any = None) -> np.ndarray:
        """A point of ``S*`` to start a chain: ``given`` after checking it is in ``S*``; else the
        centre if it is in ``S*``, otherwise the point of ``S*`` closest to it in L1 (the mode of
        the geometric target), by a MILP.

        Raises
        ------
        PostprocError
            If ``given`` is not in ``S*`` (listing the violations), or ``S*`` is empty: the
            invariants are unsatisfiable (naming the contradicting invariant when the
            equalities alone contradict each other).
        """
        if given is not None:
            state = np.asarray(given)
            if not bool(self.feasible(state)):
                raise PostprocError("the start is not in S*: " + "; ".join(self.violations(
                    state)))
            return state
        if bool(self.feasible(self.centre)):
            return self.centre.copy()
        if self.A.shape[0]:
            row_basis(self.A, self.a, integer=self.integer, labels=self.row_labels)
        return _l1_closest(self, self.centre)

    def public_start(self) -> np.ndarray:
        """A point of ``S*`` computed from the published ``A, a, B, b`` only — never from the
        centre (Gong & Meng's confidential ``s*``).

        The point of ``S*`` closest in L1 to the minimum-norm solution ``A⁺ a`` of the equalities
        (the invariants spread evenly over the cells they count; ``0`` without equalities), by a
        MILP. A chain started here that has not mixed can only leak what is published anyway.

        Raises
        ------
        PostprocError
            If ``S*`` is empty, as :meth:`start`.

        Examples
        --------
        >>> t = conditional_target([[1, 1, 1, 1], [1, 1, 0, 0]], [12, 2], centre=[2, 0, 9, 1],
        ...                        epsilon=0.5)
        >>> t.public_start().tolist()
        [1, 1, 5, 5]
        """
        if self.A.shape[0]:
            row_basis(self.A, self.a, integer=self.integer, labels=self.row_labels)
            point = np.linalg.lstsq(self.A.astype(np.float64), self.a.astype(np.float64),
                                    rcond=None)[0]
        else:
            point = np.zeros(self.n)
        return _l1_closest(self, point)


def _vector(values: Any, name: str, integer: bool) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise PostprocError(f"{name} must be 1-D, not shape {arr.shape}")
    if arr.dtype.kind == "b" or arr.dtype.kind not in "iuf":
        raise PostprocError(f"{name} must hold numbers")
    if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
        raise PostprocError(f"{name} must be finite")
    if integer:
        if arr.dtype.kind == "f" and np.any(arr != np.round(arr)):
            i = int(np.flatnonzero(arr != np.round(arr))[0])
            raise PostprocError(f"{name} must hold integers for an integer mechanism; entry {i} "
                                f"is {arr[i]}")
        return arr.astype(np.int64)
    return arr.astype(np.float64)


def _matrix(values: np.ndarray, name: str, integer: bool) -> np.ndarray:
    arr = np.asarray(values)
    if arr.dtype.kind not in "iuf" or (arr.dtype.kind == "f" and not np.all(np.isfinite(arr))):
        raise PostprocError(f"{name} must hold finite numbers")
    if integer:
        if arr.dtype.kind == "f" and np.any(arr != np.round(arr)):
            raise PostprocError(f"{name} must hold integers for an integer mechanism")
        return arr.astype(np.int64)
    return arr.astype(np.float64)


def _l1_closest(target: ConditionalTarget, point: np.ndarray) -> np.ndarray:
    """``argmin Σ|s − point|`` over ``S*`` (integer for integer data) by HiGHS."""
    from scipy.optimize import Bounds, LinearConstraint, milp

    n = target.n
    c = np.concatenate([np.zeros(n), np.ones(n)])
    eye = sp.identity(n, format="csr")
    rows = [sp.hstack([eye, -eye]), sp.hstack([-eye, -eye])]
    lo = [np.full(n, -np.inf), np.full(n, -np.inf)]
    point = np.asarray(point, dtype=np.float64)
    hi = [point, -point]
    if target.A.shape[0]:
        rows.append(sp.hstack([sp.csr_matrix(target.A.astype(float)),
                               sp.csr_matrix((target.A.shape[0], n))]))
        lo.append(target.a.astype(float))
        hi.append(target.a.astype(float))
        pass
    Bc, bc = target.coupled
    if Bc.shape[0]:
        rows.append(sp.hstack([Bc.astype(float), sp.csr_matrix((Bc.shape[0], n))]))
        lo.append(bc.astype(float))
        hi.append(np.full(Bc.shape[0], np.inf))
    constraints = LinearConstraint(sp.vstack(rows, format="csr"), np.concatenate(lo),
                                   np.concatenate(hi))
    bounds = Bounds(np.concatenate([target.lower, np.zeros(n)]),
                    np.concatenate([target.upper, np.full(n, np.inf)]))
    integrality = np.concatenate([np.full(n, 1 if target.integer else 0), np.zeros(n)])
    res = milp(c, constraints=constraints, bounds=bounds, integrality=integrality)
    if res.status == 2 or res.x is None:
        raise PostprocError(
            "the invariants are unsatisfiable: no " + ("integer " if target.integer else "")
            + "s satisfies A s = a and B s ≥ b together (e.g. nonnegativity with the published "
            "totals); check the invariant values")
    if res.status != 0:
        raise PostprocError(f"could not find a starting point in S*: {res.message}")
    s = res.x[:n]
    if target.integer:
        s = np.round(s).astype(np.int64)
    if not bool(target.feasible(s)):
        raise PostprocError("could not find a starting point in S*: the solver's point violates "
                            + "; ".join(target.violations(s)))
    return s


def conditional_target(A: Any, a: Any, *, centre: Any, B: Any = None, b: Any = None,
                       nonnegative: bool = True, mechanism: str | Mechanism = "geometric",
                       epsilon: float | None = None, rho: float | None = None,
                       budget: PureDP | ZCDP | None = None, parameter: float | None = None,
                       cell_labels: Sequence[str] | None = None,
                       row_labels: Sequence[str] | None = None) -> ConditionalTarget:
    """Build a :class:`ConditionalTarget` from invariants, constraints and a budget.

    Parameters
    ----------
    A, a : array_like
        Equalities ``A s = a`` (the invariants, computed from the confidential data).
    centre : array_like
        The mechanism's centre: the confidential ``s*`` (or a noisy measurement).
    B, b : array_like, optional
        Extra inequalities ``B s ≥ b``.
    nonnegative : bool
        Add ``s ≥ 0`` (default).
    mechanism : str or Mechanism
        A registered mechanism (:func:`hierarchy.mechanisms.get_mechanism`): ``'geometric'``,
        ``'discrete_gaussian'``, ``'laplace'``, ``'gaussian'`` or a user's.
    epsilon : float, optional
        Per-cell budget of a pure-DP mechanism (sensitivity 1 per cell, as in Gong & Meng):
        geometric ``z = ε``, Laplace scale ``1/ε``.
    rho : float, optional
        Per-cell budget of a zCDP mechanism: discrete Gaussian ``σ² = 1/(2ρ)``.
    budget : PureDP or ZCDP, optional
        The per-cell budget, typed; converted as :meth:`Mechanism.parameter
        <hierarchy.mechanisms.Mechanism.parameter>` does.
    parameter : float, optional
        The noise parameter itself (``z``, ``σ²`` or the Laplace scale) instead of a budget.
    cell_labels, row_labels : sequence of str, optional

    Returns
    -------
    ConditionalTarget

    Raises
    ------
    PostprocError
        Bad shapes or values, an unknown mechanism, or not exactly one of ``epsilon``, ``rho``,
        ``budget``, ``parameter`` fitting the mechanism.

    Examples
    --------
    >>> t = conditional_target([[1, 1]], [4], centre=[2, 2], mechanism="discrete_gaussian", rho=0.5)
    >>> t.parameter, t.lower.tolist()
    (1.0, [0.0, 0.0])
    >>> conditional_target([[1, 1]], [4], centre=[2, 2], mechanism="laplace", rho=0.5)
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: the laplace mechanism takes epsilon (or parameter=), not rho
    >>> conditional_target([[1, 1]], [4], centre=[2, 2], budget=PureDP("1/2")).parameter
    0.5
    """
    law = _law(mechanism)
    given = [k for k, v in (("epsilon", epsilon), ("rho", rho), ("budget", budget),
                            ("parameter", parameter)) if v is not None]
    if len(given) != 1:
        raise PostprocError("give exactly one of epsilon, rho, budget or parameter (the noise "
                            f"parameter); got {given or 'none'}")
    want = notion(law.accounting).parameter_name          # 'epsilon' or 'rho'
    if given[0] in ("epsilon", "rho") and given[0] != want:
        raise PostprocError(f"the {law.name} mechanism takes {want} (or parameter=), not "
                            f"{given[0]}")
    if parameter is None:
        spend = next(v for v in (epsilon, rho, budget) if v is not None)
        try:
            parameter = law.parameter(spend, 1)
        except ValueError as exc:
            raise PostprocError(str(exc)) from None
    centre_arr = np.asarray(centre)
    n = centre_arr.size
    B_parts, b_parts = [], []
    if B is not None:
        B_parts.append(sp.csr_matrix(np.asarray(B) if not sp.issparse(B) else B))
        b_parts.append(np.asarray(b))
    elif b is not None:
        raise PostprocError("b was given without B")
    if nonnegative:
        B_parts.append(sp.identity(n, format="csr", dtype=np.int64))
        b_parts.append(np.zeros(n, dtype=np.int64))
    Bm = sp.vstack(B_parts, format="csr") if B_parts else None
    bv = np.concatenate(b_parts) if b_parts else None
    return ConditionalTarget(np.asarray(A) if not sp.issparse(A) else A.toarray(), np.asarray(a),
                             Bm, bv, centre_arr, law, parameter,
                             tuple(cell_labels) if cell_labels is not None else None,
                             tuple(row_labels) if row_labels is not None else None)


# ------------------------------------------------------------------------------------------------
# how long a chain must run before its state may be released
# ------------------------------------------------------------------------------------------------
#: Fewest steps — lattice sweeps or MIS iterations, each proposing a new value for every movable
#: cell — before a chain's state may be released (``burn_in + draws``). The argument is in
#: docs/conditional_sampling.md, "Where a chain starts, and how long it must run".
MIN_STEPS = 50
#: Largest working memory (bytes) a sampler or a table may be estimated to need.
MEMORY_LIMIT = 4 * 2**30
#: Working memory per kept state and cell: the chain, its float64 copy and the FFT of the ESS
#: (measured: 88 bytes with 4 chains on a 1,000-cell table).
BYTES_PER_KEPT_VALUE = 96


def format_bytes(size: float) -> str:
    """A byte count in words.

    Examples
    --------
    >>> format_bytes(3.84e12), format_bytes(3.2e9), format_bytes(512e6), format_bytes(2000)
    ('3,840 GB', '3.2 GB', '512 MB', '2 kB')
    """
    if size >= 1e12:
        return f"{size / 1e9:,.0f} GB"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if size >= scale:
            return f"{size / scale:.3g} {unit}"
    return f"{int(size)} bytes"


def _positive_int(value: Any, name: str, *, zero: bool = False) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or \
            value < (0 if zero else 1):
        raise PostprocError(f"{name} must be a {'non-negative' if zero else 'positive'} integer, "
                            f"not {value!r}")
    return int(value)


def plan_chain(target: ConditionalTarget, *, release: bool, draws: Any, burn_in: Any,
               thin: Any = 1, chains: int = 1, min_steps: Any = None, step: str = "sweep"
               ) -> tuple[int, int, int]:
    """Check a chain against the release rule before it runs; return ``(draws, burn_in, thin)``.

    The rule, the same for both samplers: the released state is the chain's last, so every step
    before it is burn-in for it, and ``burn_in + draws`` must reach ``min_steps`` (default
    :data:`MIN_STEPS`; lower only in simulation mode). An unset ``burn_in`` is
    ``max(draws // 10, min_steps − draws)``, so it always meets the minimum. Release mode also
    refuses continuous (Laplace) noise — floating-point samples leak the centre through the set
    of representable values (Mironov 2012) — and every chain whose kept states would need more
    than :data:`MEMORY_LIMIT` bytes.

    Parameters
    ----------
    target : ConditionalTarget
    release : bool
        Release mode (secure randomness).
    draws, burn_in, thin, chains : int
        ``burn_in`` may be None (the default above).
    min_steps : int, optional
    step : str
        What one step is called in messages (``'sweep'``, ``'iteration'``).

    Raises
    ------
    PostprocError
        Bad values; a chain shorter than the minimum (saying which minimum and which option to
        raise); a minimum below :data:`MIN_STEPS` in release mode; Laplace noise in release mode;
        too much memory (saying how much).

    Examples
    --------
    >>> t = conditional_target([[1, 1, 1]], [6], centre=[1, 2, 3], epsilon=0.5)
    >>> plan_chain(t, release=True, draws=20, burn_in=None)
    (20, 30, 1)
    >>> plan_chain(t, release=True, draws=1, burn_in=0)
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: a chain of burn_in + draws = 0 + 1 = 1 sweep(s) is shorter than
    the minimum of 50 ...
    """
    draws = _positive_int(draws, "draws")
    thin = _positive_int(thin, "thin")
    chains = _positive_int(chains, "chains")
    if min_steps is None:
        min_steps = MIN_STEPS
    else:
        min_steps = _positive_int(min_steps, "min_steps", zero=True)
        if release and min_steps < MIN_STEPS:
            raise PostprocError(f"min_steps = {min_steps} is below the release minimum of "
                                f"{MIN_STEPS} {step}s; a shorter chain may only be run in "
                                "simulation mode (pass a seed)")
    if release and not target.integer:
        raise PostprocError(
            f"release mode refuses continuous {target.mechanism} noise: floating-point samples "
            "leak the centre through the set of representable values (Mironov 2012); use "
            "mechanism 'geometric' or 'discrete_gaussian', or a seed for a simulation")
    if burn_in is None:
        burn_in = max(draws // 10, min_steps - draws)
    else:
        burn_in = _positive_int(burn_in, "burn_in", zero=True)
        if burn_in + draws < min_steps:
            raise PostprocError(
                f"a chain of burn_in + draws = {burn_in} + {draws} = {burn_in + draws} {step}(s) "
                f"is shorter than the minimum of {min_steps} before a state may be released: "
                "the released state is the chain's last, and a chain this short has barely left "
                f"its start; raise burn_in (--burn-in) to at least {min_steps - draws}, raise "
                "draws (--draws), or leave burn_in unset (its default meets the minimum)")
    kept = chains * (-(-draws // thin))
    need = float(kept) * target.n * BYTES_PER_KEPT_VALUE
    if need > MEMORY_LIMIT:
        raise PostprocError(
            f"keeping {kept:,} states of {target.n:,} cells would need about "
            f"{format_bytes(need)} (limit {format_bytes(MEMORY_LIMIT)}); keep fewer: raise thin "
            f"(--thin) to at least {math.ceil(draws * chains * need / MEMORY_LIMIT / kept)}, "
            "or lower draws (--draws) or chains (--chains)")
    return draws, burn_in, thin
