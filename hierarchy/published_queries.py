"""Query invariants: the answers of any query published exactly at some levels.

A spec's query invariant (:class:`invariants.spec.Invariant` with a ``query``) declares the
answers of a query — a query of the workload, by its name, or any query expression — exact at
some levels. :func:`spec_queries` resolves what a spec declares (the query by the workload's
names, answers by their labels); :func:`published_queries` computes the answers from the truth.
:func:`hierarchy.measurement.measure` publishes them beside the catalogue statistics, under the
invariant's name (``noisy.invariants[level][name]``, units × the answers held). ``hierarchy``
never imports ``invariants``: a spec is known by its ``query_invariants`` method.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import scipy.sparse as sp

from hierarchy.errors import HierarchyError
from hierarchy.histograms import Hierarchy
from hierarchy.queries import Workload, parse_query

__all__ = ["spec_queries", "published_queries"]


def spec_queries(spec: Any, schema: Any, levels: Sequence[str], *,
                 workload: Workload | None = None) -> dict[str, dict[str, Any]]:
    """The query invariants a spec declares, resolved on ``workload``: what :func:`measure`
    publishes besides the statistics of :data:`PUBLISHABLE`.

    ``spec`` is any object with ``query_invariants(levels) → {name: (query, answers, levels)}``
    (an :class:`invariants.spec.Spec` has it); without that method there are none. A query that
    names a query of ``workload`` is that query; any other is parsed as an expression.

    Parameters
    ----------
    spec : Spec or None
    schema : Schema
    levels : sequence of str
        The geography's levels, root first.
    workload : Workload, optional
        Whose query names a spec may use.

    Returns
    -------
    dict
        Invariant name → ``{"query": canonical expression, "answers": list of answer indices or
        None (all), "levels": [...]}``.

    Raises
    ------
    HierarchyError
        A query that is neither a workload query nor a valid expression, or an unknown answer,
        naming the invariant.

    Examples
    --------
    >>> from hierarchy.queries import e2e_workload
    >>> from hierarchy.schema import E2E_1940
    >>> from invariants.spec import Invariant, Spec
    >>> spec = Spec(invariants=[Invariant("gq", ["state"], query="hhgq", answers=["college"])])
    >>> spec_queries(spec, E2E_1940, ["nation", "state"], workload=e2e_workload(E2E_1940))
    {'gq': {'query': 'marginal(hhgq)', 'answers': [5], 'levels': ['state']}}
    """
    declared = getattr(spec, "query_invariants", None)
    if not callable(declared):
        return {}
    names = set() if workload is None else {q.name for q in workload}
    out = {}
    for name, (expression, answers, at) in declared(list(levels)).items():
        try:
            q = (workload[expression] if expression in names
                 else parse_query(expression, schema))
            idx = None if answers is None else q.answer_indices(answers).tolist()
        except HierarchyError as exc:
            raise HierarchyError(f"invariant {name!r}: query {expression!r} is neither a query "
                                 f"of the workload ({sorted(names)}) nor a valid expression: "
                                 f"{exc}") from None
        if at:
            out[name] = {"query": q.expression, "answers": idx, "levels": list(at)}
    return out


def published_queries(truth: Hierarchy, queries: Mapping[str, Mapping[str, Any]]
                      ) -> dict[str, dict[str, np.ndarray]]:
    """The exact answers of query invariants (:func:`spec_queries`) at their levels.

    Parameters
    ----------
    truth : Hierarchy
    queries : mapping name → {"query", "answers", "levels"}

    Returns
    -------
    dict
        ``{level: {name: int64 array (units, answers held)}}``.

    Examples
    --------
    >>> from hierarchy.schema import E2E_1940
    >>> from hierarchy.tabulation import tabulate
    >>> persons = pd.DataFrame({"state": ["01", "02", "02"], "hhgq": [0, 0, 5],
    ...                         "votingage": [1, 0, 1], "hispanic": 0, "cenrace": 0})
    >>> truth = tabulate(persons, schema=E2E_1940, levels=["nation", "state"])
    >>> held = {"adults": {"query": "marginal(votingage)", "answers": [1], "levels": ["state"]}}
    >>> published_queries(truth, held)["state"]["adults"].tolist()
    [[1], [1]]
    """
    out: dict[str, dict[str, np.ndarray]] = {}
    for name, entry in queries.items():
        q = parse_query(entry["query"], truth.schema)
        idx = slice(None) if entry.get("answers") is None else np.asarray(entry["answers"])
        for lv in entry["levels"]:
            li = truth.geography.level_index(lv)
            answers = _answers(truth, q, li)[:, idx]
            out.setdefault(truth.levels[li], {})[name] = answers.astype(np.int64)
    return out


def _answers(truth: Any, q: Any, li: int) -> np.ndarray:
    """``q``'s exact answers at level ``li`` of a :class:`~hierarchy.histograms.Hierarchy` or
    of sparse leaf counts (:class:`~hierarchy.tabulation.LeafCounts`, a run in parts' part:
    its bottom level answered from the nonzero counts, never made dense)."""
    leaf = getattr(truth, "leaf_counts", None)
    if sp.issparse(leaf) and li == truth.geography.depth - 1:
        return np.asarray((leaf @ sp.csr_matrix(q.matrix, dtype=np.int64).T).todense())
    return np.asarray(q.answer(truth.level_counts(li)))
