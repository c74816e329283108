"""Exact integer linear algebra for conditional samplers: row bases, unimodular blocks, kernels.

The Metropolized independent sampler (docs/conditional_sampling.md) proposes the cells of an
index set ``I`` and solves ``A_I s_I + A_{I^c} s_{I^c} = a`` for the rest. For integer data that
solve must return integers for *every* integer proposal, which holds exactly when the block
``A_{I^c}`` (on a basis of the rows of ``A``) is unimodular, ``|det| = 1``. This module finds such a
block and checks it in exact arithmetic — Python integers only, never floating point:

* :func:`row_basis` — independent rows of ``A`` by fraction-free (Bareiss) elimination, and a
  check that the dropped rows of ``a`` agree with the kept ones (otherwise the invariants
  contradict each other);
* :func:`bareiss_determinant` — the exact determinant of a square integer matrix;
* :func:`choose_index_set` — Gauss–Jordan elimination with ±1 pivots only, i.e. unimodular row
  operations, so the chosen block's determinant is ±1 by construction; retried over column orders
  and, for small problems, an exhaustive search before it reports that no block exists; the result
  is re-verified independently (Bareiss determinant and ``inverse @ block == identity``);
* :func:`integer_kernel_basis` — with a unimodular block, the vectors
  ``e_j − A_{I^c}^{-1} A_j`` (``j ∈ I``) are a basis of the integer lattice ``{x ∈ ℤⁿ : A x = 0}``.

For continuous data (``integer=False``) any invertible block will do; the elimination then uses
exact rationals (:class:`fractions.Fraction`).

Examples
--------
>>> A = np.array([[1, 1, 1, 1], [1, 1, 0, 0]])       # a total and one margin
>>> ix = choose_index_set(A, prefer=[3, 0, 1, 2])
>>> ix.basic.tolist(), ix.free.tolist(), ix.determinant
([3, 0], [1, 2], 1)
>>> integer_kernel_basis(A).T.tolist()
[[-1, 1, 0, 0], [0, 0, -1, 1]]
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Sequence

import numpy as np
import scipy.sparse as sp

from postproc.errors import PostprocError

__all__ = ["IndexSet", "row_basis", "bareiss_determinant", "choose_index_set",
           "integer_kernel_basis", "as_exact_matrix"]

_EXHAUSTIVE_LIMIT = 20_000   # column subsets tried exhaustively when the greedy search fails
_RANDOM_ORDERS = 50          # random column orders tried before the exhaustive search


def as_exact_matrix(A: Any, *, integer: bool = True, name: str = "A") -> list[list[Any]]:
    """``A`` as a list of rows of Python ints (or Fractions when ``integer`` is false).

    Parameters
    ----------
    A : array_like or scipy.sparse matrix, 2-D
    integer : bool
        Require integer entries (floats that are whole numbers are accepted).
    name : str
        Used in messages.

    Returns
    -------
    list of list

    Raises
    ------
    PostprocError
        If ``A`` is not 2-D, has non-finite entries, or (``integer``) non-integer entries.

    Examples
    --------
    >>> as_exact_matrix(np.array([[1.0, 0.0], [2.0, -1.0]]))
    [[1, 0], [2, -1]]
    >>> as_exact_matrix([[0.5]], integer=False)
    [[Fraction(1, 2)]]
    """
    dense = A.toarray() if sp.issparse(A) else np.asarray(A)
    if dense.ndim != 2:
        raise PostprocError(f"{name} must be a 2-D matrix, not shape {dense.shape}")
    if dense.dtype.kind in "iu":
        return [[int(v) for v in row] for row in dense.tolist()]
    if dense.dtype.kind not in "f" or not np.all(np.isfinite(dense)):
        raise PostprocError(f"{name} must hold finite numbers")
    if integer:
        if np.any(dense != np.round(dense)):
            bad = tuple(int(i) for i in np.argwhere(dense != np.round(dense))[0])
            raise PostprocError(f"{name} must hold integers for integer data; entry {bad} is "
                                f"{dense[bad]}")
        return [[int(v) for v in row] for row in dense.astype(np.int64).tolist()]
    return [[Fraction(v) for v in row] for row in dense.tolist()]


def bareiss_determinant(M: Sequence[Sequence[int]]) -> int:
    """Exact determinant of a square integer matrix by fraction-free (Bareiss) elimination.

    Every intermediate value is an integer (a minor of ``M``), so Python ints keep it exact.

    Parameters
    ----------
    M : sequence of sequences of int, square

    Returns
    -------
    int

    Raises
    ------
    PostprocError
        If ``M`` is not square.

    Examples
    --------
    >>> bareiss_determinant([[2, 1], [1, 1]]), bareiss_determinant([[1, 1], [1, -1]])
    (1, -2)
    >>> bareiss_determinant([[0, 1, 0], [0, 0, 1], [1, 0, 0]])
    1
    """
    rows = [list(map(int, r)) for r in M]
    n = len(rows)
    if any(len(r) != n for r in rows):
        raise PostprocError("the determinant needs a square matrix")
    if n == 0:
        return 1
    sign, previous = 1, 1
    for k in range(n - 1):
        if rows[k][k] == 0:
            swap = next((i for i in range(k + 1, n) if rows[i][k] != 0), None)
            if swap is None:
                return 0
            rows[k], rows[swap] = rows[swap], rows[k]
            sign = -sign
        pivot = rows[k][k]
        for i in range(k + 1, n):
            for j in range(k + 1, n):
                rows[i][j] = (rows[i][j] * pivot - rows[i][k] * rows[k][j]) // previous
            rows[i][k] = 0
        previous = pivot
    return sign * rows[n - 1][n - 1]


def row_basis(A: Any, a: Any = None, *, integer: bool = True,
              labels: Sequence[str] | None = None) -> np.ndarray:
    """Indices of a maximal set of linearly independent rows of ``A`` (first ones kept).

    When ``a`` is given, every dropped row must be implied: the same combination of kept rows that
    gives the dropped row of ``A`` must give its value in ``a``.

    Parameters
    ----------
    A : array_like or sparse, (m, n)
    a : array_like, (m,), optional
    integer : bool
    labels : sequence of str, optional
        Names of the rows, for messages.

    Returns
    -------
    numpy.ndarray of int
        Kept row indices, increasing.

    Raises
    ------
    PostprocError
        If ``a`` contradicts itself (the invariants are unsatisfiable), naming the row.

    Examples
    --------
    >>> A = [[1, 1, 1, 1], [1, 1, 0, 0], [0, 0, 1, 1]]
    >>> row_basis(A, [10, 4, 6]).tolist()
    [0, 1]
    >>> row_basis(A, [10, 4, 5], labels=["total", "female", "male"])
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: the invariants are unsatisfiable: 'male' = 5 contradicts the
    other invariants, which imply 6
    """
    rows = as_exact_matrix(A, integer=integer)
    m = len(rows)
    values = None
    if a is not None:
        values = _exact_vector(a, m, integer)
    # Fraction-free elimination on the augmented rows; a row is dependent when it reduces to 0.
    width = len(rows[0]) if rows else 0
    reduced: list[tuple[int, list, Any]] = []   # (pivot column, row, value)
    kept: list[int] = []
    for i in range(m):
        row = list(rows[i])
        val = values[i] if values is not None else 0
        for col, prow, pval in reduced:
            if row[col] != 0:
                f, g = prow[col], row[col]
                row = [f * x - g * y for x, y in zip(row, prow)]
                val = f * val - g * pval
        pivot = next((j for j in range(width) if row[j] != 0), None)
        if pivot is None:
            if values is not None and val != 0:
                name = repr(labels[i]) if labels is not None else f"row {i}"
                implied = _implied_value(rows, values, kept, i, integer)
                raise PostprocError(
                    f"the invariants are unsatisfiable: {name} = {_show(values[i])} contradicts "
                    f"the other invariants, which imply {_show(implied)}")
            continue
        if integer:
            g = math.gcd(*[int(x) for x in row if x != 0], int(val))
            if g > 1:
                row = [x // g for x in row]
                val = val // g
        reduced.append((pivot, row, val))
        kept.append(i)
    return np.asarray(kept, dtype=np.int64)


def _implied_value(rows, values, kept, i, integer):
    """The value of row ``i`` implied by the kept rows (exact least-squares-free solve)."""
    # Solve sum_k c_k rows[kept[k]] = rows[i] exactly over the rationals.
    k = len(kept)
    n = len(rows[0])
    M = [[Fraction(rows[kept[r]][c]) for r in range(k)] + [Fraction(rows[i][c])] for c in range(n)]
    piv_cols, r = [], 0
    for c in range(k):
        p = next((q for q in range(r, n) if M[q][c] != 0), None)
        if p is None:
            continue
        M[r], M[p] = M[p], M[r]
        inv = 1 / M[r][c]
        M[r] = [x * inv for x in M[r]]
        for q in range(n):
            if q != r and M[q][c] != 0:
                f = M[q][c]
                M[q] = [x - f * y for x, y in zip(M[q], M[r])]
        piv_cols.append(c)
        r += 1
    coef = [Fraction(0)] * k
    for rr, c in enumerate(piv_cols):
        coef[c] = M[rr][k]
    value = sum(coef[r] * Fraction(values[kept[r]]) for r in range(k))
    return int(value) if value.denominator == 1 else value


def _show(v) -> str:
    if isinstance(v, Fraction):
        return str(int(v)) if v.denominator == 1 else str(float(v))
    return str(v)


def _exact_vector(a: Any, m: int, integer: bool) -> list:
    arr = np.asarray(a)
    if arr.shape != (m,):
        raise PostprocError(f"the right-hand side has shape {arr.shape}, expected ({m},)")
    if arr.dtype.kind in "iu":
        return [int(v) for v in arr.tolist()]
    if arr.dtype.kind != "f" or not np.all(np.isfinite(arr)):
        raise PostprocError("the right-hand side must hold finite numbers")
    if integer:
        if np.any(arr != np.round(arr)):
            raise PostprocError("invariant values must be integers for integer data")
        return [int(v) for v in arr.astype(np.int64).tolist()]
    return [Fraction(v) for v in arr.tolist()]


@dataclass(frozen=True, eq=False)
class IndexSet:
    """A proposal index set ``I`` (``free``) and its complement ``I^c`` (``basic``).

    With ``R`` = the independent rows :attr:`rows` of ``A``, each divided by its content
    :attr:`row_scale`, the block ``Â = (A[R] / row_scale)[:, basic]`` is square and invertible,
    so ``s_basic = inverse @ (a[R] / row_scale) − coupling @ s_free``.

    Attributes
    ----------
    free : int array
        ``I``: the cells a proposal draws, increasing.
    basic : int array
        ``I^c``: the cells solved for, in the order of the rows of :attr:`inverse`.
    rows : int array
        Independent rows of ``A`` used.
    row_scale : int array
        The content (gcd of the coefficients) each row was divided by (integer data; 1 otherwise).
    inverse : array (r, r)
        ``Â⁻¹`` — int64 for integer data (exact), float64 otherwise.
    coupling : array (r, |free|)
        ``G = inverse @ A[R][:, free]`` (int64 for integer data).
    determinant : int or float
        ``det Â``; ±1 for integer data.
    integer : bool

    Examples
    --------
    >>> ix = choose_index_set(np.array([[2, 2, 2]]))      # content 2 is divided out
    >>> ix.row_scale.tolist(), ix.base([6]).tolist()
    ([2], [3])
    >>> ix.base([5])
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: the invariants are unsatisfiable in integers: row 0 has
    coefficients divisible by 2 but value 5
    """

    free: np.ndarray
    basic: np.ndarray
    rows: np.ndarray
    row_scale: np.ndarray
    inverse: np.ndarray
    coupling: np.ndarray
    determinant: Any
    integer: bool

    @property
    def n_cells(self) -> int:
        return int(self.free.size + self.basic.size)

    def base(self, a: Any) -> np.ndarray:
        """``inverse @ (a[R] / row_scale)``: the basic cells when every free cell is 0.

        Raises
        ------
        PostprocError
            If a row's content does not divide its value (no integer solution exists).
        """
        rhs = np.asarray(a)[self.rows]
        if self.integer:
            rhs = rhs.astype(np.int64)
            bad = np.flatnonzero(rhs % self.row_scale != 0)
            if bad.size:
                i = int(bad[0])
                raise PostprocError(
                    f"the invariants are unsatisfiable in integers: row {int(self.rows[i])} has "
                    f"coefficients divisible by {int(self.row_scale[i])} but value {int(rhs[i])}")
            return self.inverse @ (rhs // self.row_scale)
        return self.inverse @ (rhs / self.row_scale)

    def solve(self, a: Any, s_free: Any) -> np.ndarray:
        """``s_basic`` for each row of ``s_free`` (shape (..., |free|)) → (..., |basic|).

        Examples
        --------
        >>> ix = choose_index_set(np.array([[1, 1, 1]]))
        >>> ix.solve([5], [[1, 2], [0, 0]]).tolist()
        [[2], [5]]
        """
        base = self.base(a)
        s_free = np.asarray(s_free)
        return base - s_free @ self.coupling.T

    def to_dict(self) -> dict[str, Any]:
        return {"free": self.free.tolist(), "basic": self.basic.tolist(),
                "rows": self.rows.tolist(), "row_scale": self.row_scale.tolist(),
                "determinant": int(self.determinant) if self.integer else float(self.determinant)}


def _gauss_jordan(rows: list[list], order: Sequence[int], integer: bool):
    """Gauss–Jordan over the columns in ``order``; integer mode pivots only on ±1 entries.

    Returns ``(pivots, transformed, E)``: ``pivots`` lists ``(row, column)``; ``E`` is the product
    of the row operations (``E @ A == transformed``).
    """
    r = len(rows)
    M = [list(row) for row in rows]
    E = [[1 if i == j else 0 for j in range(r)] for i in range(r)]
    if not integer:
        E = [[Fraction(x) for x in row] for row in E]
    free_rows = set(range(r))
    pivots: list[tuple[int, int]] = []
    for col in order:
        if not free_rows:
            break
        if integer:
            choice = next((i for i in sorted(free_rows) if M[i][col] in (1, -1)), None)
        else:
            choice = next((i for i in sorted(free_rows) if M[i][col] != 0), None)
        if choice is None:
            continue
        p = M[choice][col]
        if not integer:
            inv = 1 / p
            M[choice] = [x * inv for x in M[choice]]
            E[choice] = [x * inv for x in E[choice]]
            p = 1
        for i in range(r):
            if i != choice and M[i][col] != 0:
                f = M[i][col] * p   # p = ±1 (integer) or 1 (rational): exact multiplier
                M[i] = [x - f * y for x, y in zip(M[i], M[choice])]
                E[i] = [x - f * y for x, y in zip(E[i], E[choice])]
        free_rows.discard(choice)
        pivots.append((choice, col))
    return pivots, M, E


def choose_index_set(A: Any, *, integer: bool = True, prefer: Sequence[int] | None = None,
                     rng: Any = None, a: Any = None,
                     labels: Sequence[str] | None = None) -> IndexSet:
    """Choose ``I`` so that the block of the other columns ``I^c`` is invertible (unimodular for
    integer data), and verify it exactly.

    Parameters
    ----------
    A : array_like or sparse (m, n)
        Equality constraints ``A s = a``; dependent rows are dropped (:func:`row_basis`).
    integer : bool
        Require ``|det A_{I^c}| = 1`` (integer data) instead of ``det ≠ 0``.
    prefer : sequence of int, optional
        Columns in order of preference for ``I^c`` (e.g. the largest counts first, so that the
        solved cells rarely go negative). Default: column order.
    rng : numpy.random.Generator, optional
        Shuffles column orders when the greedy order fails (not privacy noise).
    a : array_like, optional
        Right-hand side; checked for consistency with the dropped rows.
    labels : sequence of str, optional
        Row names for messages.

    Returns
    -------
    IndexSet

    Raises
    ------
    PostprocError
        If the invariants contradict each other, or no valid block exists (integer data: no
        choice of ``I^c`` gives ``|det| = 1``; the message says how the search ended).

    Examples
    --------
    >>> ix = choose_index_set(np.array([[1, 1, 0], [0, 1, 1]]))
    >>> ix.basic.tolist(), ix.free.tolist(), ix.coupling.tolist()
    ([0, 1], [2], [[-1], [1]])
    >>> choose_index_set(np.array([[1, 1], [1, -1]]))     # det -2: s1 - s2 and s1 + s2 same parity
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: no proposal index set I exists: no choice of 2 column(s) of A
    gives a block with |det| = 1 (searched all 1 of them), so solving A s = a for the other cells
    would not return integers; use the lattice sampler if A has an integer kernel basis, or rescale
    the invariants
    """
    dense = A.toarray() if sp.issparse(A) else np.asarray(A)
    if dense.ndim != 2:
        raise PostprocError(f"A must be a 2-D matrix, not shape {dense.shape}")
    m, n = dense.shape
    kept = row_basis(dense, a, integer=integer, labels=labels) if m else np.zeros(0, np.int64)
    rows = as_exact_matrix(dense[kept] if kept.size else np.zeros((0, n), np.int64),
                           integer=integer)
    scale = [1] * len(rows)
    if integer:   # divide each row by its content: the same solution set, more ±1 entries
        for i, row in enumerate(rows):
            scale[i] = math.gcd(*row) or 1
            rows[i] = [x // scale[i] for x in row]
    row_scale = np.asarray(scale, dtype=np.int64)
    r = len(rows)
    order = list(range(n)) if prefer is None else _check_order(prefer, n)
    found = None
    if r == 0:
        found = ([], None, None)
    else:
        tried = [order]
        gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(0)
        for attempt in range(_RANDOM_ORDERS + 1):
            pivots, M, E = _gauss_jordan(rows, tried[-1], integer)
            if len(pivots) == r:
                found = (pivots, M, E)
                break
            tried.append([int(c) for c in gen.permutation(n)])
        if found is None and integer:
            found = _exhaustive(rows, n, r)
    if found is None:
        total = math.comb(n, r)
        how = (f"searched all {total} of them" if total <= _EXHAUSTIVE_LIMIT else
               f"greedy elimination with ±1 pivots over {_RANDOM_ORDERS + 1} column orders found "
               f"none; {total} subsets are too many to search exhaustively")
        raise PostprocError(
            f"no proposal index set I exists: no choice of {r} column(s) of A gives a block with "
            f"|det| = 1 ({how}), so solving A s = a for the other cells would not return "
            "integers; use the lattice sampler if A has an integer kernel basis, or rescale the "
            "invariants")
    pivots, M, E = found
    basic = np.asarray([c for _, c in pivots], dtype=np.int64)
    free = np.asarray(sorted(set(range(n)) - set(basic.tolist())), dtype=np.int64)
    if r == 0:
        dtype = np.int64 if integer else np.float64
        return IndexSet(free, basic, kept, row_scale, np.zeros((0, 0), dtype),
                        np.zeros((0, n), dtype), 1 if integer else 1.0, integer)
    # E @ block is a signed permutation with pivots ±1 (rational pivots are normalised to 1), so
    # row p of the block's inverse is E[row of pivot p] times that pivot.
    inverse = [[x * M[row_i][col] for x in E[row_i]] for row_i, col in pivots]
    if integer:   # a unimodular block has an integer inverse; Fractions (exhaustive path) → ints
        if any(Fraction(x).denominator != 1 for row in inverse for x in row):
            raise PostprocError("internal error: the inverse of a unimodular block is not integer")
        inverse = [[int(x) for x in row] for row in inverse]
    block = [[rows[i][c] for c in basic.tolist()] for i in range(r)]
    _verify_inverse(inverse, block, integer)
    free_block = [[rows[i][c] for c in free.tolist()] for i in range(r)]
    coupling = [[sum(inverse[p][i] * free_block[i][j] for i in range(r))
                 for j in range(len(free))] for p in range(r)]
    if integer:
        det = bareiss_determinant(block)
        if abs(det) != 1:   # impossible by construction; checked independently all the same
            raise PostprocError(f"internal error: the chosen block has determinant {det}")
        return IndexSet(free, basic, kept, row_scale, _int64(inverse), _int64(coupling), det, True)
    det = _rational_determinant(block)
    return IndexSet(free, basic, kept, row_scale, np.asarray(inverse, dtype=np.float64),
                    np.asarray(coupling, dtype=np.float64).reshape(r, len(free)), float(det),
                    False)


def _check_order(prefer: Sequence[int], n: int) -> list[int]:
    order = [int(c) for c in prefer]
    if any(c < 0 or c >= n for c in order) or len(set(order)) != len(order):
        raise PostprocError(f"prefer must list distinct columns in 0..{n - 1}")
    rest = [c for c in range(n) if c not in set(order)]
    return order + rest


def _int64(rows: list[list[int]]) -> np.ndarray:
    flat = [x for row in rows for x in row]
    if flat and max(abs(int(x)) for x in flat) >= 1 << 62:
        raise PostprocError("the solve for I^c has coefficients beyond int64")
    width = len(rows[0]) if rows else 0
    return np.asarray(rows, dtype=np.int64).reshape(len(rows), width)


def _verify_inverse(inverse, block, integer: bool) -> None:
    r = len(block)
    for i in range(r):
        for j in range(r):
            v = sum(inverse[i][k] * block[k][j] for k in range(r))
            if v != (1 if i == j else 0):
                raise PostprocError("internal error: the computed inverse of the basic block is "
                                    "wrong")


def _rational_determinant(block) -> Fraction:
    M = [[Fraction(x) for x in row] for row in block]
    n, det = len(M), Fraction(1)
    for k in range(n):
        p = next((i for i in range(k, n) if M[i][k] != 0), None)
        if p is None:
            return Fraction(0)
        if p != k:
            M[k], M[p] = M[p], M[k]
            det = -det
        det *= M[k][k]
        for i in range(k + 1, n):
            f = M[i][k] / M[k][k]
            M[i] = [x - f * y for x, y in zip(M[i], M[k])]
    return det


def _exhaustive(rows, n: int, r: int):
    """Every r-subset of columns (small problems only): the first with |det| = 1."""
    if math.comb(n, r) > _EXHAUSTIVE_LIMIT:
        return None
    for cols in itertools.combinations(range(n), r):
        block = [[row[c] for c in cols] for row in rows]
        if abs(bareiss_determinant(block)) == 1:
            # ±1 pivots may not exist in any order for this block: use an exact rational
            # Gauss-Jordan (pivots normalised to 1); the caller converts the integral inverse.
            rational = [[Fraction(x) for x in row] for row in rows]
            pivots, M, E = _gauss_jordan(rational, list(cols), integer=False)
            if len(pivots) == r:
                return pivots, M, E
    return None


def integer_kernel_basis(A: Any, *, prefer: Sequence[int] | None = None) -> np.ndarray:
    """A basis of the integer lattice ``{x ∈ ℤⁿ : A x = 0}`` as the columns of an int64 matrix.

    With a unimodular block ``A_{I^c}`` (:func:`choose_index_set`), every integer kernel vector is
    ``x = Σ_{j∈I} x_j v_j`` with ``v_j = e_j − (A_{I^c}^{-1} A_j)`` on ``I^c``: the ``v_j`` are
    integer and a lattice basis. The result is verified (``A @ basis == 0`` exactly).

    Parameters
    ----------
    A : array_like or sparse (m, n), integer
    prefer : sequence of int, optional
        Column preference for ``I^c`` (see :func:`choose_index_set`).

    Returns
    -------
    numpy.ndarray of int64, shape (n, n − rank A)

    Raises
    ------
    PostprocError
        If no unimodular block exists (then this construction gives no lattice basis).

    Examples
    --------
    >>> integer_kernel_basis(np.array([[1, 1, 1]])).T.tolist()
    [[-1, 1, 0], [-1, 0, 1]]
    """
    dense = A.toarray() if sp.issparse(A) else np.asarray(A)
    ix = choose_index_set(dense, integer=True, prefer=prefer)
    n = dense.shape[1]
    basis = np.zeros((n, ix.free.size), dtype=np.int64)
    basis[ix.free, np.arange(ix.free.size)] = 1
    if ix.basic.size:
        basis[ix.basic, :] = -ix.coupling
    check = as_exact_matrix(dense, integer=True)
    cols = basis.T.tolist()
    for row in check:
        for v in cols:
            if sum(x * y for x, y in zip(row, v)) != 0:
                raise PostprocError("internal error: a kernel vector fails A v = 0")
    return basis
