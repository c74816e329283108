"""Linear queries on a schema's histogram, as sparse 0/1 matrices built by Kronecker products.

A query is described attribute by attribute: each attribute is *kept* (identity block), *summed
out* (a row of ones) or *recoded* into groups (a groups × levels 0/1 block). The query matrix is
the Kronecker product of the blocks, first attribute outermost, so it matches the row-major cell
order of :class:`~hierarchy.schema.Schema`. Products of queries on disjoint attributes combine
their blocks.

A small text syntax names queries in configs and on the command line::

    detailed                       every cell
    total                          one row of ones
    marginal(votingage, cenrace)   keep these attributes, sum out the rest
    recode(hhgq: household=0; gq=1-7)   groups of one attribute's levels (codes, ranges, labels;
                                        a bare number is always a code)
    marginal(sex) * recode(age: child=0-3; adult=4-22)   products on disjoint attributes

Examples
--------
>>> from hierarchy.schema import E2E_1940
>>> q = parse_query("marginal(votingage, hispanic, cenrace)", E2E_1940)
>>> q.matrix.shape, q.matrix.nnz
((24, 192), 192)
>>> parse_query("recode(hhgq: household=0; gq=1-7)", E2E_1940).answer_labels
[('household',), ('gq',)]
>>> w = e2e_workload(E2E_1940)
>>> w.names
('detailed', 'hhgq', 'va_hisp_race')
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Iterable, Iterator, Mapping, Sequence

import numpy as np
import scipy.sparse as sp

from hierarchy.errors import HierarchyError
from hierarchy.schema import Schema

__all__ = ["Query", "Workload", "detailed", "total", "marginal", "recode", "product",
           "parse_query", "check_query_name", "e2e_workload"]

_SUM, _KEEP, _RECODE = "sum", "keep", "recode"        # per-attribute block kinds


@dataclass(frozen=True)
class _Block:
    kind: str
    groups: tuple[tuple[int, ...], ...] = ()
    group_labels: tuple[str, ...] = ()

    def matrix(self, size: int) -> sp.csr_matrix:
        if self.kind == _KEEP:
            return sp.identity(size, dtype=np.int8, format="csr")
        if self.kind == _SUM:
            return sp.csr_matrix(np.ones((1, size), dtype=np.int8))
        rows = np.repeat(np.arange(len(self.groups)), [len(g) for g in self.groups])
        cols = np.fromiter((c for g in self.groups for c in g), dtype=np.int64)
        return sp.csr_matrix((np.ones(rows.size, dtype=np.int8), (rows, cols)),
                             shape=(len(self.groups), size))

    def labels(self, attribute) -> list[str]:
        if self.kind == _KEEP:
            return list(attribute.labels)
        if self.kind == _RECODE:
            return list(self.group_labels)
        return []


@dataclass(frozen=True)
class Query:
    """A linear query: one block per schema attribute (kept, summed out or recoded).

    Build queries with :func:`detailed`, :func:`total`, :func:`marginal`, :func:`recode`,
    :func:`product` or :func:`parse_query`, not by hand.

    Attributes
    ----------
    name : str
        The query's name in a workload (defaults to its canonical expression).
    schema : Schema
    blocks : tuple
        One block per attribute.

    Examples
    --------
    >>> import numpy as np
    >>> from hierarchy.schema import Schema, Attribute
    >>> s = Schema((Attribute("sex", ("male", "female")),
    ...             Attribute("age", ("child", "adult", "senior"))))
    >>> q = marginal(s, "sex")
    >>> q.name, q.n_answers, q.answer_labels
    ('marginal(sex)', 2, [('male',), ('female',)])
    >>> q.matrix.toarray()
    array([[1, 1, 1, 0, 0, 0],
           [0, 0, 0, 1, 1, 1]], dtype=int8)

    Cells are in row-major order, first attribute outermost: (male, child), (male, adult), …
    A stack of histograms, shape (units, cells), gives (units, answers):

    >>> hist = np.array([[5, 1, 0, 2, 3, 4], [0, 0, 1, 1, 0, 0]])
    >>> q.answer(hist).tolist()
    [[6, 9], [1, 1]]
    >>> q.answer(np.ones(4))
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: query 'marginal(sex)' expects histograms with 6 cells, got
    shape (4,)
    """

    name: str
    schema: Schema
    blocks: tuple[_Block, ...] = field(repr=False)

    def __post_init__(self):
        if len(self.blocks) != len(self.schema.attributes):
            raise HierarchyError("a query needs one block per schema attribute")
        if not isinstance(self.name, str) or not self.name:
            raise HierarchyError("a query needs a non-empty name")

    @cached_property
    def matrix(self) -> sp.csr_matrix:
        """The (answers × cells) sparse 0/1 matrix, built by Kronecker products."""
        out = None
        for block, attr in zip(self.blocks, self.schema.attributes):
            m = block.matrix(attr.size)
            out = m if out is None else sp.kron(out, m, format="csr")
        out = out.astype(np.int8)
        out.sort_indices()
        return out

    @property
    def n_answers(self) -> int:
        return int(np.prod([len(b.groups) if b.kind == _RECODE else
                            (a.size if b.kind == _KEEP else 1)
                            for b, a in zip(self.blocks, self.schema.attributes)]))

    @cached_property
    def answer_labels(self) -> list[tuple[str, ...]]:
        """One tuple of labels per answer (empty tuple for ``total``)."""
        per = [b.labels(a) for b, a in zip(self.blocks, self.schema.attributes)
               if b.kind != _SUM]
        if not per:
            return [()]
        grids = np.meshgrid(*[np.arange(len(p)) for p in per], indexing="ij")
        flat = [g.ravel() for g in grids]
        return [tuple(per[j][flat[j][i]] for j in range(len(per))) for i in range(flat[0].size)]

    @property
    def answer_attributes(self) -> tuple[str, ...]:
        """Attributes that index the answers (kept or recoded), in schema order."""
        return tuple(a.name for b, a in zip(self.blocks, self.schema.attributes) if b.kind != _SUM)

    @property
    def expression(self) -> str:
        """Canonical text of the query (parseable by :func:`parse_query`)."""
        kept = [a.name for b, a in zip(self.blocks, self.schema.attributes) if b.kind == _KEEP]
        parts = []
        if all(b.kind == _KEEP for b in self.blocks):
            return "detailed"
        if kept:
            parts.append(f"marginal({', '.join(kept)})")
        for b, a in zip(self.blocks, self.schema.attributes):
            if b.kind == _RECODE:
                groups = "; ".join(f"{lab}={','.join(map(str, g))}"
                                   for lab, g in zip(b.group_labels, b.groups))
                parts.append(f"recode({a.name}: {groups})")
        return " * ".join(parts) if parts else "total"

    def answer(self, histograms: np.ndarray | sp.spmatrix) -> np.ndarray:
        """Answers for histograms of shape (..., cells) → (..., answers); or for a sparse
        (units × cells) matrix of histograms → a dense (units × answers) array (answering
        several queries of the same histograms, make that copy once: :func:`sparse_copy`)."""
        if sp.issparse(histograms):
            if histograms.ndim != 2 or histograms.shape[1] != self.schema.size:
                raise HierarchyError(f"query {self.name!r} expects histograms with "
                                     f"{self.schema.size} cells, got shape {histograms.shape}")
            return np.asarray((histograms @ self.matrix.T).toarray())
        h = np.asarray(histograms)
        if h.shape[-1] != self.schema.size:
            raise HierarchyError(f"query {self.name!r} expects histograms with {self.schema.size} "
                                 f"cells, got shape {h.shape}")
        flat = h.reshape(-1, self.schema.size)
        sparse = sparse_copy(flat)
        if sparse is not None:
            out = (sparse @ self.matrix.T).toarray()
        else:
            out = (self.matrix @ flat.T).T
        return np.asarray(out).reshape(h.shape[:-1] + (self.n_answers,))

    def answer_label(self, index: int) -> str:
        """The label of answer ``index`` as messages and ``answers = [...]`` lists write it:
        ``"total"``, ``"female"``, or ``"female, 18+"`` for several attributes."""
        labels = self.answer_labels[index]
        return ", ".join(labels) if labels else "total"

    def answer_indices(self, answers: Any) -> np.ndarray:
        """Indices of ``answers``: each an answer's index or its label (:meth:`answer_label`).

        Raises
        ------
        HierarchyError
            An index out of range or an unknown label, listing the query's labels.

        Examples
        --------
        >>> from hierarchy.schema import Schema, Attribute
        >>> s = Schema((Attribute("sex", ("male", "female")),
        ...             Attribute("age", ("0-14", "15-64", "65+"))))
        >>> marginal(s, "age").answer_indices(["15-64", 2]).tolist()
        [1, 2]
        >>> marginal(s, "sex", "age").answer_indices(["female, 65+"]).tolist()
        [5]
        >>> marginal(s, "age").answer_indices(["15-65"])
        Traceback (most recent call last):
        ...
        hierarchy.errors.HierarchyError: query 'marginal(age)' has no answer '15-65'; its answers
        are '0-14', '15-64', '65+' (or their indices 0..2)
        """
        labels = [self.answer_label(i) for i in range(self.n_answers)]
        index = {lab: i for i, lab in enumerate(labels)}
        out = []
        for a in answers:
            if isinstance(a, str):
                found = index.get(", ".join(p.strip() for p in a.split(",")))
                if found is None:
                    shown = ", ".join(repr(v) for v in labels[:20])
                    more = f", … ({len(labels)} in all)" if len(labels) > 20 else ""
                    raise HierarchyError(f"query {self.name!r} has no answer {a!r}; its answers "
                                         f"are {shown}{more} (or their indices "
                                         f"0..{len(labels) - 1})")
                out.append(found)
            elif isinstance(a, (int, np.integer)) and not isinstance(a, bool) and \
                    0 <= a < self.n_answers:
                out.append(int(a))
            else:
                raise HierarchyError(f"query {self.name!r}: answer {a!r} is out of range; it has "
                                     f"{self.n_answers} answers (0..{self.n_answers - 1})")
        return np.asarray(out, dtype=np.int64)

    def renamed(self, name: str) -> "Query":
        return Query(name, self.schema, self.blocks)

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "expression": self.expression}


def sparse_copy(histograms: np.ndarray) -> sp.csr_matrix | None:
    """A CSR copy of a 2-D array of histograms when it is large and mostly empty (a 2020-style
    block level: 0.3 % of cells nonzero), else ``None``. Multiplying the copy is 3 × faster
    than the transposed dense product, which copies every cell; making it scans every cell,
    so one copy serves all the queries of a level.

    Examples
    --------
    >>> blocks = np.zeros((100, 1000), np.int64)
    >>> blocks[3, 7] = 2
    >>> sparse_copy(blocks).nnz, sparse_copy(blocks[:2, :2]) is None
    (1, True)
    """
    flat = np.asarray(histograms)
    if flat.ndim == 2 and flat.size > 65_536 and np.count_nonzero(flat) < 0.1 * flat.size:
        return sp.csr_matrix(flat)
    return None


# -- builders ---------------------------------------------------------------------------------

def detailed(schema: Schema, *, name: str = "detailed") -> Query:
    """The identity query: every cell of the detailed histogram, named ``name``.

    Examples
    --------
    >>> from hierarchy.schema import Schema, Attribute
    >>> s = Schema((Attribute("sex", ("male", "female")),
    ...             Attribute("age", ("child", "adult", "senior"))))
    >>> q = detailed(s)
    >>> q.n_answers, q.expression
    (6, 'detailed')
    >>> q.answer_labels[:2]
    [('male', 'child'), ('male', 'adult')]
    >>> q.answer([5, 1, 0, 2, 3, 4]).tolist()
    [5, 1, 0, 2, 3, 4]
    """
    return Query(name, schema, tuple(_Block(_KEEP) for _ in schema.attributes))


def total(schema: Schema, *, name: str = "total") -> Query:
    """The total count: one row of ones, named ``name``.

    Examples
    --------
    >>> from hierarchy.schema import Schema, Attribute
    >>> s = Schema((Attribute("sex", ("male", "female")),
    ...             Attribute("age", ("child", "adult", "senior"))))
    >>> q = total(s)
    >>> q.answer([[5, 1, 0, 2, 3, 4], [0, 0, 1, 1, 0, 0]]).tolist()
    [[15], [2]]
    >>> q.answer_labels, q.answer_attributes
    ([()], ())
    """
    return Query(name, schema, tuple(_Block(_SUM) for _ in schema.attributes))


def marginal(schema: Schema, *attributes: str, name: str | None = None) -> Query:
    """Keep ``attributes``, sum out every other one.

    Examples
    --------
    >>> from hierarchy.schema import E2E_1940
    >>> marginal(E2E_1940, "hhgq").matrix.sum(axis=1).A.ravel().tolist()
    [24, 24, 24, 24, 24, 24, 24, 24]
    """
    for a in attributes:
        schema.position(a)
    if len(set(attributes)) != len(attributes):
        raise HierarchyError(f"marginal repeats an attribute: {list(attributes)}")
    blocks = tuple(_Block(_KEEP if a.name in attributes else _SUM) for a in schema.attributes)
    q = Query("q", schema, blocks)
    return q.renamed(name or q.expression)


def recode(schema: Schema, attribute: str, groups: Mapping[str, Iterable[Any]], *,
           name: str | None = None) -> Query:
    """Counts of groups of one attribute's levels (other attributes summed out).

    Groups may overlap and need not cover every level. Levels are codes or labels.

    Parameters
    ----------
    schema : Schema
    attribute : str
        The attribute whose levels are grouped.
    groups : mapping str → iterable of codes or labels
        Group label → the attribute's levels in the group.
    name : str, optional
        The query's name (default: its expression).

    Raises
    ------
    HierarchyError
        An unknown attribute or level, no group, an empty group, or a group label the query
        text syntax cannot carry (``;``, ``=``, unbalanced parentheses).

    Examples
    --------
    >>> from hierarchy.schema import Schema, Attribute
    >>> s = Schema((Attribute("sex", ("male", "female")),
    ...             Attribute("age", ("child", "adult", "senior"))))
    >>> q = recode(s, "age", {"minor": ["child"], "grown": ["adult", 2]})
    >>> q.name, q.answer_labels
    ('recode(age: minor=0; grown=1,2)', [('minor',), ('grown',)])
    >>> q.answer([5, 1, 0, 2, 3, 4]).tolist()
    [7, 8]
    >>> recode(s, "age", {"teen": ["teenager"]})
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: attribute 'age' has no level 'teenager'; levels are ['child',
    'adult', 'senior'] (or codes 0..2)
    """
    attr = schema.attribute(attribute)
    if not groups:
        raise HierarchyError(f"recode of {attribute!r} needs at least one group")
    labels, members = [], []
    for label, levels in groups.items():
        _check_group_label(str(label), attribute)
        codes = tuple(sorted({attr.code(v) for v in levels}))
        if not codes:
            raise HierarchyError(f"recode group {label!r} of {attribute!r} is empty")
        labels.append(str(label))
        members.append(codes)
    blocks = tuple(_Block(_RECODE, tuple(members), tuple(labels)) if a.name == attribute
                   else _Block(_SUM) for a in schema.attributes)
    q = Query("q", schema, blocks)
    return q.renamed(name or q.expression)


def _check_group_label(label: str, attribute: str) -> None:
    """Refuse group labels that the text syntax cannot carry, so that every query's
    ``expression`` parses back to the same query (workloads are saved as expressions)."""
    depth = 0
    for ch in label:
        depth += (ch == "(") - (ch == ")")
        if depth < 0:
            break
    if (";" in label or "=" in label or label != label.strip() or depth != 0):
        raise HierarchyError(f"recode group label {label!r} of {attribute!r} cannot be written "
                             "in a query expression: labels may not contain ';' or '=', "
                             "unbalanced parentheses, or leading/trailing spaces")


def product(*queries: Query, name: str | None = None) -> Query:
    """The product (cross-tabulation) of queries on disjoint attributes.

    Parameters
    ----------
    *queries : Query
        Queries on one schema, each using attributes the others sum out.
    name : str, optional
        Default: the product's canonical expression, e.g. ``marginal(sex) * recode(age: …)``.

    Raises
    ------
    HierarchyError
        No query, queries on different schemas, or two queries using one attribute.

    Examples
    --------
    >>> from hierarchy.schema import Schema, Attribute
    >>> s = Schema((Attribute("sex", ("male", "female")),
    ...             Attribute("age", ("child", "adult", "senior"))))
    >>> adults = recode(s, "age", {"minor": [0], "grown": [1, 2]})
    >>> q = product(marginal(s, "sex"), adults)
    >>> q.answer_labels
    [('male', 'minor'), ('male', 'grown'), ('female', 'minor'), ('female', 'grown')]
    >>> q.answer([5, 1, 0, 2, 3, 4]).tolist()
    [5, 1, 2, 7]
    >>> product(marginal(s, "age"), adults)
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: product uses attribute 'age' twice (in 'recode(age: minor=0;
    grown=1,2)'); a product needs disjoint attributes
    """
    if not queries:
        raise HierarchyError("product needs at least one query")
    schema = queries[0].schema
    blocks = [_Block(_SUM) for _ in schema.attributes]
    for q in queries:
        if q.schema != schema:
            raise HierarchyError("product of queries on different schemas")
        for i, b in enumerate(q.blocks):
            if b.kind == _SUM:
                continue
            if blocks[i].kind != _SUM:
                raise HierarchyError(
                    f"product uses attribute {schema.attributes[i].name!r} twice "
                    f"(in {q.expression!r}); a product needs disjoint attributes")
            blocks[i] = b
    q = Query("q", schema, tuple(blocks))
    return q.renamed(name or q.expression)


_TERM = re.compile(r"^\s*(\w+)\s*(?:\((.*)\))?\s*$", re.S)


def _parse_levels(attr, text: str, expression: str) -> list[int]:
    codes: list[int] = []
    for piece in text.split(","):
        piece = piece.strip()
        if not piece:
            continue
        m = re.fullmatch(r"(\d+)\s*-\s*(\d+)", piece)
        if m:
            lo, hi = int(m.group(1)), int(m.group(2))
            if lo > hi:
                raise HierarchyError(f"empty range {piece!r} in {expression!r}")
            codes.extend(attr.code(v) for v in range(lo, hi + 1))
        elif piece.isdigit():
            # A number is a code, as in a range and in the canonical expression (which writes
            # codes): reading it as a label would silently change the query when an
            # attribute's labels are digit strings of other codes (labels "1", "2", ...).
            codes.append(attr.code(int(piece)))
        else:
            codes.append(attr.code(piece))
    return codes


def _split_top(text: str, sep: str) -> list[str]:
    """Split on ``sep`` outside parentheses."""
    parts, depth, cur = [], 0, []
    for ch in text:
        depth += (ch == "(") - (ch == ")")
        if ch == sep and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return parts


def parse_query(expression: str, schema: Schema, *, name: str | None = None) -> Query:
    """Build a query from its text form (see the module docstring).

    Parameters
    ----------
    expression : str
        ``detailed``, ``total``, ``marginal(a, b)``, ``recode(a: g1=0,1; g2=2-5)`` or a product
        of terms on disjoint attributes joined by ``*``.
    schema : Schema
    name : str, optional
        The query's name (default: its canonical expression).

    Returns
    -------
    Query

    Raises
    ------
    HierarchyError
        With the offending part of the expression and the valid forms.

    Examples
    --------
    >>> from hierarchy.schema import Schema, Attribute
    >>> s = Schema((Attribute("sex", ("male", "female")),
    ...             Attribute("age", ("child", "adult", "senior"))))
    >>> q = parse_query("marginal(sex) * recode(age: minor=child; grown=1-2)", s)
    >>> q.name
    'marginal(sex) * recode(age: minor=0; grown=1,2)'
    >>> q.answer([5, 1, 0, 2, 3, 4]).tolist()
    [5, 1, 2, 7]
    >>> parse_query("total", s, name="persons").name
    'persons'
    >>> parse_query("margin(sex)", s)
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: unknown query term 'margin(sex)' in 'margin(sex)'; use
    detailed, total, marginal(a, b), recode(a: g1=0,1; g2=2-5)
    """
    if not isinstance(expression, str) or not expression.strip():
        raise HierarchyError("a query expression must be a non-empty string")
    terms = []
    for part in _split_top(expression, "*"):
        m = _TERM.match(part)
        if not m:
            raise HierarchyError(f"cannot parse query term {part.strip()!r} in {expression!r}; "
                                 "use detailed, total, marginal(a, b), recode(a: g1=0,1; g2=2-5)")
        kind, args = m.group(1), m.group(2)
        if kind in ("detailed", "total") and args is None:
            terms.append(detailed(schema) if kind == "detailed" else total(schema))
        elif kind == "marginal" and args is not None:
            attrs = [a.strip() for a in args.split(",") if a.strip()]
            if not attrs:
                raise HierarchyError(f"marginal() needs attributes in {expression!r}")
            terms.append(marginal(schema, *attrs))
        elif kind == "recode" and args is not None:
            if ":" not in args:
                raise HierarchyError(f"recode needs 'attribute: group=levels; ...' in "
                                     f"{expression!r}")
            attr_name, body = args.split(":", 1)
            attr = schema.attribute(attr_name.strip())
            groups: dict[str, list[int]] = {}
            for g in body.split(";"):
                if not g.strip():
                    continue
                if "=" not in g:
                    raise HierarchyError(f"recode group {g.strip()!r} needs 'label=levels' in "
                                         f"{expression!r}")
                label, levels = g.split("=", 1)
                if label.strip() in groups:
                    raise HierarchyError(f"recode group {label.strip()!r} appears twice in "
                                         f"{expression!r}")
                groups[label.strip()] = _parse_levels(attr, levels, expression)
            terms.append(recode(schema, attr.name, groups))
        else:
            raise HierarchyError(f"unknown query term {part.strip()!r} in {expression!r}; "
                                 "use detailed, total, marginal(a, b), recode(a: g1=0,1; g2=2-5)")
    if len(terms) == 1:
        q = terms[0]
    elif any(t.expression == "detailed" for t in terms):
        raise HierarchyError(f"'detailed' cannot be multiplied with other terms in {expression!r}")
    else:
        q = product(*[t for t in terms if t.expression != "total"] or [terms[0]])
    return q.renamed(name or q.expression)


@dataclass(frozen=True)
class Workload:
    """An ordered collection of uniquely named queries on one schema.

    Examples
    --------
    >>> from hierarchy.schema import E2E_1940
    >>> w = Workload.from_expressions(E2E_1940, {"total": "total", "race": "marginal(cenrace)"})
    >>> [q.n_answers for q in w]
    [1, 6]
    """

    queries: tuple[Query, ...]
    from hierarchy.display import workload_html as _repr_html_  # the notebook display

    def __post_init__(self):
        qs = tuple(self.queries)
        object.__setattr__(self, "queries", qs)
        if not qs:
            raise HierarchyError("a workload needs at least one query")
        names = [q.name for q in qs]
        if len(set(names)) != len(names):
            dup = sorted({n for n in names if names.count(n) > 1})
            raise HierarchyError(f"workload query names must be unique; repeated: {dup}")
        if len({q.schema for q in qs}) != 1:
            raise HierarchyError("all queries of a workload must use the same schema")
        for q in qs:
            check_query_name(q)

    @property
    def schema(self) -> Schema:
        return self.queries[0].schema

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(q.name for q in self.queries)

    def __iter__(self) -> Iterator[Query]:
        return iter(self.queries)

    def __len__(self) -> int:
        return len(self.queries)

    def __contains__(self, name: object) -> bool:
        return name in self.names

    def __getitem__(self, name: str) -> Query:
        for q in self.queries:
            if q.name == name:
                return q
        raise HierarchyError(f"workload has no query {name!r}; queries are {list(self.names)}")

    @classmethod
    def from_expressions(cls, schema: Schema, expressions: Mapping[str, str]) -> "Workload":
        """Build from ``{name: expression}``, e.g. a TOML ``[workload]`` table."""
        return cls(tuple(parse_query(expr, schema, name=name)
                         for name, expr in expressions.items()))

    def to_dict(self) -> dict[str, str]:
        return {q.name: q.expression for q in self.queries}


def check_query_name(query: Query) -> None:
    """Refuse a query named after another query: a name that is itself a query expression
    (``total``, ``detailed``) must be that query, or every table that shows the name (the
    ``total`` rows of an error table, say) would say one thing and hold another.

    Raises
    ------
    HierarchyError
        Naming the query, what its name means and what it is.

    Examples
    --------
    >>> from hierarchy.schema import E2E_1940
    >>> check_query_name(parse_query("total", E2E_1940, name="total"))      # fine: None
    >>> check_query_name(parse_query("marginal(hhgq)", E2E_1940, name="hhgq"))
    >>> check_query_name(parse_query("marginal(hhgq)", E2E_1940, name="total"))
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: the query named 'total' is marginal(hhgq), but 'total' is
    itself a query (total): name it otherwise, e.g. 'hhgq'
    """
    try:
        meant = parse_query(query.name, query.schema)
    except HierarchyError:
        return                                  # a plain name: it means what it holds
    if meant.expression != query.expression:
        suggestion = re.sub(r"\W+", "_", query.expression.replace("marginal", "")).strip("_")
        raise HierarchyError(f"the query named {query.name!r} is {query.expression}, but "
                             f"{query.name!r} is itself a query ({meant.expression}): name it "
                             f"otherwise, e.g. {suggestion or 'q'!r}")


def e2e_workload(schema: Schema) -> Workload:
    """The E2E workload: ``detailed``, ``hhgq`` = marginal(hhgq), ``va_hisp_race``.

    Parameters
    ----------
    schema : Schema
        A schema with the attributes ``hhgq``, ``votingage``, ``hispanic`` and ``cenrace``
        (:data:`hierarchy.schema.E2E_1940`).

    Returns
    -------
    Workload

    Examples
    --------
    >>> from hierarchy.schema import E2E_1940
    >>> w = e2e_workload(E2E_1940)
    >>> w.to_dict()
    {'detailed': 'detailed', 'hhgq': 'marginal(hhgq)', 'va_hisp_race': 'marginal(votingage,
    hispanic, cenrace)'}
    >>> [q.n_answers for q in w]
    [192, 8, 24]
    """
    return Workload((detailed(schema),
                     marginal(schema, "hhgq", name="hhgq"),
                     marginal(schema, "votingage", "hispanic", "cenrace", name="va_hisp_race")))


def queries_from(schema: Schema, spec: Sequence[str] | Mapping[str, str] | Workload) -> Workload:
    """A workload from a list of expressions, a name → expression mapping, or a Workload."""
    if isinstance(spec, Workload):
        return spec
    if isinstance(spec, Mapping):
        return Workload.from_expressions(schema, spec)
    return Workload(tuple(parse_query(e, schema) for e in spec))
