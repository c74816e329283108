"""Conditional sampling of a count table read from CSV (the ``postproc mis`` command's library).

The table's rows are the cells: one row for every combination of the levels of its key columns
(the non-count columns), zero counts included, and :func:`release_table` releases a row for each.
A table that lacks some combinations (``pandas`` ``groupby().size()`` drops the zero rows) is
refused — releasing its rows would publish which cells are zero — unless the levels are given,
and then it is completed with zero rows (:func:`complete_table`). A column that is a function of
another (``voting_age`` of ``age_group``) is declared *derived* and is not part of the
cross-product. The schema is built from the key columns (levels in order of first appearance, or
as given), so invariants are ordinary query expressions over it (``total``, ``marginal(sex)``,
``marginal(sex, voting_age)``, ``recode(age_group: young=<5,5-9; old=85+)``…) restricted to the
rows. An invariant's value defaults to the confidential table's answer; ``EXPR=V1,V2,...``
publishes other values instead (then the invariants may be unsatisfiable, which is reported).

Examples
--------
>>> import tempfile, os
>>> path = os.path.join(tempfile.mkdtemp(), "t.csv")
>>> _ = open(path, "w").write("sex,adult,count\\nf,0,3\\nf,1,5\\nm,0,2\\nm,1,4\\n")
>>> table = read_count_table(path)
>>> table.schema.names, table.counts.tolist()
(('sex', 'adult'), [3, 5, 2, 4])
>>> release = release_table(table, ["total", "marginal(sex)"], epsilon=0.5, draws=500, rng=1)
>>> release.invariants_hold, [row["count"] for row in release.rows()][:1] != []
(True, True)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from hierarchy.errors import HierarchyError
from hierarchy.queries import parse_query
from hierarchy.randomness import as_randomness
from hierarchy.schema import Attribute, Schema  # noqa: F401  (the doctests)
from postproc.errors import PostprocError
from postproc.methods.sampling.count_table import (
    _INTEGER,
    MAX_CELLS,
    CountTable,
    complete_table,
    read_count_table,
)
from postproc.methods.sampling.result import SamplingResult
from postproc.methods.sampling.samplers import DEFAULT_SAMPLER, sample_conditional
from postproc.methods.sampling.target import (
    MEMORY_LIMIT,
    ConditionalTarget,
    conditional_target,
    format_bytes,
)

# CountTable, read_count_table, complete_table and MAX_CELLS live in count_table.py
__all__ = ["CountTable", "read_count_table", "complete_table", "invariant_rows", "table_target",
           "TableRelease", "release_table", "MAX_CELLS"]


def _split_value(expression: str) -> tuple[str, str | None]:
    """``'marginal(sex)=130,126'`` → ``('marginal(sex)', '130,126')`` (``=`` at depth 0)."""
    depth = 0
    for i in range(len(expression) - 1, -1, -1):
        ch = expression[i]
        if ch == ")":
            depth += 1
        elif ch == "(":
            depth -= 1
        elif ch == "=" and depth == 0:
            return expression[:i].strip(), expression[i + 1:].strip()
    return expression.strip(), None


def invariant_rows(table: CountTable, expressions: Sequence[str]
                   ) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """The equality rows ``(A, a, labels)`` of invariant expressions over a table's cells.

    Answers that count no existing cell are dropped (a published value for one must be 0).

    Parameters
    ----------
    table : CountTable
    expressions : sequence of str
        Query expressions (:func:`hierarchy.queries.parse_query`), each optionally
        ``=V1,V2,...`` with one published value per answer.

    Returns
    -------
    A : int64 array (rows, cells)
    a : int64 array (rows,)
    labels : list of str

    Raises
    ------
    PostprocError
        An unknown expression (with the parser's reason), a bad list of values, or a value for
        an answer with no cells that is not 0.

    Examples
    --------
    >>> keys = pd.DataFrame({"sex": ["f", "f", "m"], "adult": ["0", "1", "1"]})
    >>> schema = Schema((Attribute("sex", ("f", "m")), Attribute("adult", ("0", "1"))))
    >>> t = CountTable(keys, np.array([1, 2, 3]), schema, np.array([0, 1, 3]))
    >>> A, a, labels = invariant_rows(t, ["marginal(adult)", "marginal(sex)=4,2"])
    >>> A.tolist(), a.tolist(), labels
    ([[1, 0, 0], [0, 1, 1], [1, 1, 0], [0, 0, 1]], [1, 5, 4, 2], ['marginal(adult)[0]',
    'marginal(adult)[1]', 'marginal(sex)[f]', 'marginal(sex)[m]'])
    >>> invariant_rows(t, ["marginal(age)"])
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: invariant 'marginal(age)': schema 'custom' has no attribute
    'age'; attributes are ['sex', 'adult']
    """
    rows, values, labels = [], [], []
    if not expressions:
        raise PostprocError("give at least one invariant (e.g. --invariant total)")
    for raw in expressions:
        expr, given = _split_value(str(raw))
        try:
            q = parse_query(expr, table.schema)
        except HierarchyError as exc:
            raise PostprocError(f"invariant {expr!r}: {exc}") from None
        M = q.matrix[:, table.cells]
        if M.shape[0] * M.shape[1] * 8 > MEMORY_LIMIT:
            raise PostprocError(f"invariant {expr!r} has {M.shape[0]:,} answers over "
                                f"{M.shape[1]:,} cells: its matrix would need "
                                f"{format_bytes(M.shape[0] * M.shape[1] * 8)} (limit "
                                f"{format_bytes(MEMORY_LIMIT)}); use coarser invariants or a "
                                "smaller table")
        M = M.toarray().astype(np.int64)
        truth = M @ table.counts
        names = [f"{expr}[{', '.join(lab)}]" if lab else expr for lab in q.answer_labels]
        if given is not None:
            parts = [p for p in re.split(r"[,\s\[\]]+", given) if p]
            if len(parts) != M.shape[0] or not all(_INTEGER.match(p) for p in parts):
                raise PostprocError(f"invariant {expr!r}: published values {given!r} must be "
                                    f"{M.shape[0]} integer(s), one per answer "
                                    f"({', '.join(names)})")
            truth = np.asarray([int(p) for p in parts], dtype=np.int64)
        empty = ~M.any(axis=1)
        for i in np.flatnonzero(empty & (truth != 0)):
            raise PostprocError(f"the invariants are unsatisfiable: {names[i]} counts no cell of "
                                f"the table but is published as {int(truth[i])}")
        keep = ~empty
        rows.append(M[keep])
        values.append(truth[keep])
        labels.extend(n for n, k in zip(names, keep) if k)
    return np.vstack(rows), np.concatenate(values), labels


def table_target(table: CountTable, invariants: Sequence[str], *, mechanism: str = "geometric",
                 epsilon: float | None = None, rho: float | None = None,
                 parameter: float | None = None) -> ConditionalTarget:
    """The conditional target of a table: the mechanism around its counts, its invariants and
    nonnegativity.

    Examples
    --------
    >>> keys = pd.DataFrame({"g": ["a", "b"]})
    >>> t = CountTable(keys, np.array([3, 4]), Schema((Attribute("g", ("a", "b")),)),
    ...                np.array([0, 1]))
    >>> table_target(t, ["total"], epsilon=0.5).a.tolist()
    [7]
    """
    A, a, labels = invariant_rows(table, invariants)
    return conditional_target(A, a, centre=table.counts, mechanism=mechanism, epsilon=epsilon,
                              rho=rho, parameter=parameter, cell_labels=table.cell_labels(),
                              row_labels=labels)


@dataclass(frozen=True, eq=False)
class TableRelease:
    """A released table: the sampler's result on a :class:`CountTable`.

    Made by :func:`release_table`.

    Attributes
    ----------
    table : CountTable
    invariants : tuple of str
        The invariant expressions the release keeps.
    result : SamplingResult
        The sampler's draw and diagnostics.
    invariants_hold : bool
        Whether the released counts keep every invariant, checked exactly.

    Examples
    --------
    >>> keys = pd.DataFrame({"sex": ["f", "f", "m", "m"], "adult": ["0", "1", "0", "1"]})
    >>> schema = Schema((Attribute("sex", ("f", "m")), Attribute("adult", ("0", "1"))))
    >>> release = release_table(CountTable(keys, np.array([3, 5, 2, 4]), schema, np.arange(4)),
    ...                         ["marginal(sex)"], epsilon=0.5, draws=500, rng=1)
    >>> release.invariants_hold, release.release       # seeded: a simulation, not a release
    (True, False)
    >>> release.to_frame()                              # 8 women and 6 men, as in the table
      sex adult  count
    0   f     0      2
    1   f     1      6
    2   m     0      2
    3   m     1      4
    >>> release.to_dict()["released"][0]
    {'sex': 'f', 'adult': '0', 'count': 2}
    """

    table: CountTable
    invariants: tuple[str, ...]
    result: SamplingResult
    invariants_hold: bool = field(default=False)

    @property
    def released(self) -> np.ndarray:
        return self.result.released

    def rows(self) -> list[dict[str, Any]]:
        """The released table: one object per row, the key columns and the released count."""
        out = []
        for key, value in zip(self.table.keys.to_dict("records"), self.released.tolist()):
            out.append({**key, self.table.count_column: value})
        return out

    def to_frame(self) -> pd.DataFrame:
        frame = self.table.keys.copy()
        frame[self.table.count_column] = self.released
        return frame

    @property
    def release(self) -> bool:
        """Whether the draw used release-mode randomness (it may be published)."""
        return bool(self.result.randomness.get("safe_for_release"))

    def to_dict(self, *, diagnostics: bool | None = None) -> dict[str, Any]:
        """JSON-ready summary: the released rows, the invariants, the settings and randomness.

        The chain's diagnostics (acceptance rate, effective sample sizes) are computed from a
        chain around the confidential table, so they are a side channel, not part of the DP
        release: in release mode they (and the input path) are left out unless
        ``diagnostics=True``, and then they come under ``confidential_diagnostics``.
        """
        summary = self.result.to_dict()
        summary.pop("released")
        chain = {"acceptance_rate": summary.pop("acceptance_rate"), "ess": summary.pop("ess")}
        out = {"released": self.rows(), "invariants_hold": self.invariants_hold,
               "invariants": list(self.invariants), **summary}
        if not self.release:
            return {**chain, **out, "table": self.table.source}
        if diagnostics:
            out["confidential_diagnostics"] = {
                **chain, "note": "computed from the chain around the confidential table: not "
                                 "part of the release; do not publish"}
        return out


def _exact_hold(target: ConditionalTarget, released: np.ndarray) -> bool:
    """``A s = a`` and ``s ≥ 0`` in Python integers (no overflow possible); continuous data by
    the target's toleranced check."""
    if not target.integer:
        return bool(target.feasible(released))
    s = [int(v) for v in released.tolist()]
    if any(v < 0 for v in s):
        return False
    for row, value in zip(target.A.tolist(), target.a.tolist()):
        if sum(int(c) * v for c, v in zip(row, s)) != int(value):
            return False
    return bool(target.feasible(released))


def release_table(table: CountTable | str | Path, invariants: Sequence[str], *,
                  epsilon: float | None = None, rho: float | None = None,
                  mechanism: str = "geometric", sampler: str = DEFAULT_SAMPLER, draws: int = 10_000,
                  rng: Any = None, proposal_epsilon: float | None = None,
                  count_column: str = "count", levels: Mapping[str, Sequence[str]] | None = None,
                  derived: Mapping[str, str] | None = None, **options: Any) -> TableRelease:
    """Release a table by conditional sampling under its invariants.

    Parameters
    ----------
    table : CountTable or path
    invariants : sequence of str
        Invariant expressions (see :func:`invariant_rows`).
    epsilon, rho : float
        Per-cell budget (``epsilon`` for geometric/Laplace, ``rho`` for the discrete Gaussian).
    mechanism : {'geometric', 'discrete_gaussian', 'laplace'}
    sampler : {'lattice', 'mis'}
    draws : int
        Iterations (MIS) or sweeps (lattice) after burn-in.
    rng : None, int, numpy.random.Generator or Randomness
    proposal_epsilon : float, optional
        MIS only: ``ε̃`` (default: tuned).
    count_column : str
        When ``table`` is a path.
    levels : mapping of str to sequence of str, optional
        Every non-derived key column's levels: the table is completed with a zero row for each
        missing cell (:func:`complete_table`). Without it a table with a missing cell is refused.
    derived : mapping of str to str, optional
        ``{column: source}`` for key columns that are functions of another
        (``{"voting_age": "age_group"}``).
    **options
        Passed to the sampler (``burn_in``, ``thin``, ``chains``, ``step``, ``min_steps``…).

    Returns
    -------
    TableRelease
        One released row per cell, zero cells included.

    Raises
    ------
    PostprocError
        Bad table, invariants or options; a table with missing cells and no ``levels``; a table
        too large; unsatisfiable invariants; no valid index set; continuous Laplace noise in
        release mode (``rng=None``); a chain too short to leave its start.

    Examples
    --------
    >>> keys = pd.DataFrame({"g": ["a", "b", "c"]})
    >>> t = CountTable(keys, np.array([3, 4, 5]), Schema((Attribute("g", ("a", "b", "c")),)),
    ...                np.array([0, 1, 2]))
    >>> r = release_table(t, ["total"], epsilon=0.5, sampler="mis", proposal_epsilon=0.6,
    ...                   draws=5000, rng=3)
    >>> r.invariants_hold, int(r.released.sum()), r.to_dict()["sampler"]
    (True, 12, 'mis')
    """
    source = as_randomness(rng)
    if source.safe_for_release and mechanism == "laplace":
        raise PostprocError(
            "release mode refuses the continuous laplace mechanism: its floating-point samples "
            "leak the confidential counts through the set of representable values (Mironov "
            "2012); use --mechanism geometric or discrete_gaussian, or --seed for a simulation")
    if not isinstance(table, CountTable):
        table = read_count_table(table, count_column=count_column)
    table = complete_table(table, levels=levels, derived=derived)
    target = table_target(table, invariants, mechanism=mechanism, epsilon=epsilon, rho=rho)
    if sampler == "mis":
        options["proposal_epsilon"] = proposal_epsilon
    elif proposal_epsilon is not None:
        raise PostprocError("a proposal ε̃ applies to the MIS only (sampler='mis')")
    result = sample_conditional(target, sampler=sampler, draws=draws, rng=source, **options)
    return TableRelease(table, tuple(map(str, invariants)), result,
                        _exact_hold(target, result.released) and result.invariants_hold)
