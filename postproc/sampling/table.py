"""Conditional sampling of a count table read from CSV (the ``postproc mis`` command's library).

The table's rows are the cells — cells absent from the CSV do not exist. The non-count columns
are categorical attributes; the schema is built from them (levels in order of first appearance),
so invariants are ordinary query expressions over it (``total``, ``marginal(sex)``,
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
from typing import Any, Sequence

import numpy as np
import pandas as pd

from hierarchy.errors import HierarchyError
from hierarchy.queries import parse_query
from hierarchy.schema import Attribute, Schema
from postproc.errors import PostprocError
from postproc.sampling.result import SamplingResult
from postproc.sampling.target import ConditionalTarget, conditional_target

__all__ = ["CountTable", "read_count_table", "invariant_rows", "table_target", "TableRelease",
           "release_table", "SAMPLERS", "DEFAULT_SAMPLER"]

#: Conditional samplers by name.
SAMPLERS = ("lattice", "mis")
#: The default: lattice moves give several times more effective samples per second than the MIS
#: on Gong & Meng's table (see docs/conditional_sampling.md and benchmarks/bench_sampling.py).
DEFAULT_SAMPLER = "lattice"

_INTEGER = re.compile(r"^\s*[+-]?\d+\s*$")


@dataclass(frozen=True, eq=False)
class CountTable:
    """A table of counts whose rows are the cells.

    Attributes
    ----------
    keys : DataFrame
        The key columns as read (strings), one row per cell.
    counts : int64 array
    schema : Schema
        One attribute per key column, levels in order of first appearance.
    cells : int64 array
        Each row's cell in the schema's cross-product.
    count_column : str
    source : str
    """

    keys: pd.DataFrame
    counts: np.ndarray
    schema: Schema
    cells: np.ndarray
    count_column: str = "count"
    source: str = "table"

    @property
    def n(self) -> int:
        return int(self.counts.size)

    def cell_labels(self) -> list[str]:
        """``'sex=female, age_group=<5'`` for each row."""
        cols = list(self.keys.columns)
        return [", ".join(f"{c}={v}" for c, v in zip(cols, row))
                for row in self.keys.itertuples(index=False)]


def read_count_table(path: str | Path, *, count_column: str = "count") -> CountTable:
    """Read a CSV whose rows are cells: key columns and one column of nonnegative integer counts.

    Parameters
    ----------
    path : str or pathlib.Path
    count_column : str

    Returns
    -------
    CountTable

    Raises
    ------
    PostprocError
        Missing file, missing count column, no key columns, a key column name that is not an
        identifier, an empty key, a non-integer or negative count, or a repeated key (naming the
        file, line and value).

    Examples
    --------
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "t.csv")
    >>> _ = open(path, "w").write("g,count\\na,3\\nb,2.5\\n")
    >>> read_count_table(path)
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: .../t.csv, line 3: count '2.5' is not an integer; counts must be nonnegative integers
    """
    path = Path(path)
    if not path.is_file():
        raise PostprocError(f"{path}: no such file; pass --table with a CSV of counts")
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False, skipinitialspace=True)
    except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise PostprocError(f"{path}: not a readable CSV ({str(exc).strip()})") from None
    frame.columns = [str(c).strip() for c in frame.columns]
    if count_column not in frame.columns:
        raise PostprocError(f"{path}: no column {count_column!r}; the columns are "
                            f"{list(frame.columns)} (choose one with --count-column)")
    keys = [c for c in frame.columns if c != count_column]
    if not keys:
        raise PostprocError(f"{path}: no key columns besides {count_column!r}; each row needs "
                            "the attributes of its cell")
    for c in keys:
        if not c.isidentifier():
            raise PostprocError(f"{path}: column name {c!r} is not an identifier (letters, "
                                "digits, _); rename it so invariants like marginal(...) can name "
                                "it")
    if frame.empty:
        raise PostprocError(f"{path}: no rows")
    text = frame[count_column].astype(str)
    bad = np.flatnonzero(~text.str.match(_INTEGER).to_numpy())
    if bad.size:
        i = int(bad[0])
        raise PostprocError(f"{path}, line {i + 2}: count {text.iloc[i]!r} is not an integer; "
                            "counts must be nonnegative integers")
    counts = text.str.strip().astype(np.int64).to_numpy()
    neg = np.flatnonzero(counts < 0)
    if neg.size:
        i = int(neg[0])
        raise PostprocError(f"{path}, line {i + 2}: count {counts[i]} is negative; counts must "
                            "be nonnegative integers")
    key_frame = frame[keys].apply(lambda col: col.str.strip())
    empty = np.argwhere((key_frame == "").to_numpy())
    if empty.size:
        i, j = empty[0]
        raise PostprocError(f"{path}, line {i + 2}: column {keys[j]!r} is empty")
    dup = key_frame.duplicated(keep="first").to_numpy()
    if dup.any():
        i = int(np.flatnonzero(dup)[0])
        first = int(np.flatnonzero((key_frame == key_frame.iloc[i]).all(axis=1).to_numpy())[0])
        raise PostprocError(f"{path}, line {i + 2}: the cell {dict(key_frame.iloc[i])} repeats "
                            f"line {first + 2}; each cell must appear once")
    attributes = []
    codes = {}
    for c in keys:
        labels = list(dict.fromkeys(key_frame[c].tolist()))
        try:
            attributes.append(Attribute(c, tuple(labels)))
        except HierarchyError as exc:
            raise PostprocError(f"{path}: {exc}") from None
        codes[c] = pd.Index(labels).get_indexer(key_frame[c]).astype(np.int64)
    schema = Schema(tuple(attributes), name=path.stem)
    cells = schema.cell_index(codes)
    return CountTable(key_frame.reset_index(drop=True), counts, schema, cells, count_column,
                      str(path))


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
    ([[1, 0, 0], [0, 1, 1], [1, 1, 0], [0, 0, 1]], [1, 5, 4, 2], ['marginal(adult)[0]', 'marginal(adult)[1]', 'marginal(sex)[f]', 'marginal(sex)[m]'])
    >>> invariant_rows(t, ["marginal(age)"])
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: invariant 'marginal(age)': schema 'custom' has no attribute 'age'; attributes are ['sex', 'adult']
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
        M = q.matrix[:, table.cells].toarray().astype(np.int64)
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
    """A released table: the sampler's result on a :class:`CountTable`."""

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

    def to_dict(self) -> dict[str, Any]:
        summary = self.result.to_dict()
        summary.pop("released")
        return {"acceptance_rate": summary.pop("acceptance_rate"), "ess": summary.pop("ess"),
                "released": self.rows(), "invariants_hold": self.invariants_hold,
                "invariants": list(self.invariants), "table": self.table.source, **summary}


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
                  count_column: str = "count", **options: Any) -> TableRelease:
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
    **options
        Passed to the sampler (``burn_in``, ``thin``, ``chains``, ``step``…).

    Returns
    -------
    TableRelease

    Raises
    ------
    PostprocError
        Bad table, invariants or options; unsatisfiable invariants; no valid index set.

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
    from postproc.sampling import sample_conditional

    if not isinstance(table, CountTable):
        table = read_count_table(table, count_column=count_column)
    target = table_target(table, invariants, mechanism=mechanism, epsilon=epsilon, rho=rho)
    if sampler == "mis":
        options["proposal_epsilon"] = proposal_epsilon
    elif proposal_epsilon is not None:
        raise PostprocError("a proposal ε̃ applies to the MIS only (sampler='mis')")
    result = sample_conditional(target, sampler=sampler, draws=draws, rng=rng, **options)
    return TableRelease(table, tuple(map(str, invariants)), result,
                        _exact_hold(target, result.released) and result.invariants_hold)
