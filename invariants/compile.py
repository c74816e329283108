"""Compiling a :class:`~invariants.spec.Spec` into constraint data, level by level.

For each level the spec compiles once into a :class:`LevelConstraints`: one sparse integer matrix
``C`` (rows = constraint rows over the schema's cells, shared by every unit of the level), per-unit
bounds ``lower ≤ C x_u ≤ upper`` and per-unit zero cells. Everything a post-processor needs for one
parent's problem is then a slice of the children's rows:

* :func:`node_cvxpy_constraints` — CVXPY constraints vectorized over the children (a handful of
  constraint objects per node, never one per child per cell);
* :func:`node_matrices` — ``(A, a, B, b)`` meaning ``A s = a, B s ≥ b`` for samplers;
* :func:`violations` — exact integer verification of a result against every promise.

This module never calls a solver (CVXPY is imported only to build expressions).

It holds :func:`compile_spec` and :func:`check_data`; the other names are re-exported from where
they live, each importing only what is below it:

* :mod:`invariants.catalogue` (the bottom) — every statistic, invariant and catalogue
  constraint and its rows; :mod:`invariants.items` — the spec's :class:`Invariant` and
  :class:`Constraint`, checked against the catalogue;
* :mod:`invariants.compiled` — :class:`LevelConstraints` and its row labels;
* :mod:`invariants.published` — :func:`resolve_statistics`; :mod:`invariants.rows` — the rows
  of the user's own constraints, merged; :mod:`invariants.node` —
  :func:`node_cvxpy_constraints` and :func:`node_matrices`; :mod:`invariants.checks` —
  :func:`violations`, :func:`check_violations`, :func:`data_violations`;
* this module; then :mod:`invariants.spec`, whose :meth:`~invariants.spec.Spec.check_data`
  calls :func:`check_data`. A spec is known here by what the compiler reads of it,
  :class:`invariants.catalogue.SpecView`, so nothing below :mod:`invariants.spec` imports it.

Examples
--------
>>> import numpy as np
>>> from hierarchy.schema import E2E_1940
>>> from hierarchy.geography import Geography
>>> from invariants.spec import Spec
>>> geo, _ = Geography.from_columns(["nation", "state"], [[["01", "02"]]])
>>> gqhh = np.zeros((2, 8), np.int64); gqhh[:, 0] = [3, 4]
>>> published = {"nation": {"tot": np.array([20])}, "state": {"tot": np.array([9, 11]),
...              "gqhh": gqhh}}
>>> compiled = compile_spec(Spec.e2e(["nation", "state"]), E2E_1940, geo, published)
>>> lc = compiled["state"]
>>> lc.matrix.shape[1], int(lc.zero[0].sum())      # hhgq types 1-7 have no units: zero cells
(192, 168)
>>> x = np.zeros((2, 192), np.int64); x[0, 0] = 9; x[1, 5] = 11
>>> violations(lc, x)
[]
>>> x[1, 5] = 10; violations(lc, x)[0]
"state '02': tot & total_ge_households: total = 10, must be == 11"
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

import numpy as np
import scipy.sparse as sp

from hierarchy.errors import ConfidentialDataError
from hierarchy.geography import Geography
from hierarchy.schema import Schema
from invariants.catalogue import CONSTRAINTS, INVARIANTS, Rows, SpecView
from invariants.checks import (
    _broken,
    _broken_line,
    check_violations,
    data_violations,
    violations,
)
from invariants.compiled import LevelConstraints, _implied_label, _merge, _zero_cells
from invariants.errors import SpecError
from invariants.node import node_cvxpy_constraints, node_matrices
from invariants.published import resolve_statistics
from invariants.rows import _query_invariant_rows, _user_block
from invariants.sums import compile_sums

__all__ = ["LevelConstraints", "compile_spec", "resolve_statistics", "node_cvxpy_constraints",
           "node_matrices", "violations", "check_violations", "data_violations", "check_data"]


def compile_spec(spec: SpecView, schema: Schema, geography: Geography,
                 published: Mapping[str, Mapping[str, Any]]) -> dict[str, LevelConstraints]:
    """Compile a spec for every level of the geography, after validating it and its data.

    Parameters
    ----------
    spec : Spec
    schema : Schema
    geography : Geography
    published : mapping level → (mapping statistic → array)
        Exact statistics published as invariants (``NoisyHierarchy.invariants``).

    Returns
    -------
    dict level → LevelConstraints

    Raises
    ------
    SpecError
        Unknown levels or names, missing or inconsistent invariant data, bad queries, or a unit
        whose constraints contradict each other (naming the unit and the constraints).

    Examples
    --------
    A spec with the ``tot`` invariant at every level and a structural zero (no female child:
    cell 2 of the detailed histogram), on a 4-cell schema:

    >>> from invariants.spec import Spec
    >>> from hierarchy.schema import Attribute, Schema
    >>> spec = Spec.from_toml_string('''
    ... [[invariant]]
    ... name = "tot"
    ... levels = "all"
    ... [[constraint]]
    ... name = "no_girls"
    ... type = "structural_zero"
    ... query = "detailed"
    ... answers = [2]
    ... ''', source="spec.toml")
    >>> schema = Schema((Attribute("sex", ("male", "female")), Attribute("age", ("0-17", "18+"))))
    >>> geo, _ = Geography.from_columns(["nation", "state"], [[["01", "02", "03"]]])
    >>> published = {"nation": {"tot": [9]}, "state": {"tot": [3, 4, 2]}}
    >>> compiled = compile_spec(spec, schema, geo, published)
    >>> list(compiled), compiled["state"].zero[0].astype(int).tolist()
    (['nation', 'state'], [0, 0, 1, 0])
    >>> compile_spec(spec, schema, geo, {"nation": {"tot": [9]}})
    Traceback (most recent call last):
    ...
    invariants.errors.SpecError: invariant 'tot' is declared at level 'state' but no 'tot' data ...
    """
    levels = geography.levels
    if spec.unit_attribute not in schema.names and any(
            c.type == "catalogue" for c in spec.constraints):
        raise SpecError(f"the spec's unit attribute {spec.unit_attribute!r} is not in the schema "
                        f"{list(schema.names)}")
    stats = resolve_statistics(spec, schema, geography, published)
    sums = compile_sums(getattr(spec, "sums", ()), schema, geography)
    compiled: dict[str, LevelConstraints] = {}
    raw: dict[str, tuple] = {}
    for li, lv in enumerate(levels):
        n = geography.n_units(lv)
        blocks = _invariant_rows(spec, schema, stats[lv], published.get(lv, {}), lv, levels, n)
        for c in spec.constraints:
            if lv not in spec.levels_of(c, levels):
                continue
            if c.type == "catalogue":
                blocks.append(CONSTRAINTS[c.name].rows(schema, spec, stats[lv]))
            else:
                blocks.append(_user_block(c, schema, stats[lv], n, published.get(lv, {}),
                                          lv))
        raw[lv] = (blocks, n)
    # Implied constraints: bottom-up, each parent gets the sums of its children's rows.
    merged: dict[str, tuple] = {}
    for li in range(len(levels) - 1, -1, -1):
        lv = levels[li]
        blocks, n = raw[lv]
        if spec.imply_upward and li + 1 < len(levels):
            child = levels[li + 1]
            cm, clo, chi, clab = merged[child]
            if cm.shape[0]:
                lo = geography.aggregate(np.where(np.isinf(clo), np.nan, clo), child, lv)
                hi = geography.aggregate(np.where(np.isinf(chi), np.nan, chi), child, lv)
                lo = np.where(np.isnan(lo), -np.inf, lo)
                hi = np.where(np.isnan(hi), np.inf, hi)
                labels = [_implied_label(lab, child) for lab in clab]
                blocks = list(blocks) + [Rows(cm, lo, hi, labels)]
        merged[lv] = _merge(blocks, n, schema.size)
    for li, lv in enumerate(levels):
        matrix, lower, upper, labels = merged[lv]
        codes = geography.geocodes[li]
        # Rows with nonnegative coefficients count persons: they are never below 0.
        nonneg = np.asarray((matrix.minimum(0) != 0).sum(axis=1)).ravel() == 0
        floor = np.where(nonneg[None, :], np.maximum(lower, 0.0), lower)
        bad = floor > upper
        if bad.any():
            u, r = np.argwhere(bad)[0]
            raise SpecError(
                f"{lv} {codes[u]!r}: constraints contradict each other: {labels[r]} needs "
                f"{floor[u, r]:g} ≤ value ≤ {upper[u, r]:g}; check the invariant data of this "
                "unit (e.g. more housing units than persons allowed by the total)")
        patterns, index = _zero_cells(matrix, upper)
        positive_lower = (lower > 0)
        if positive_lower.any():
            support = (matrix > 0).astype(np.int64)
            open_cells = (sp.csr_matrix((~patterns).astype(np.int64)) @ support.T).toarray()
            dead = positive_lower & (open_cells[index] == 0)
            if dead.any():
                u, r = np.argwhere(dead)[0]
                raise SpecError(f"{lv} {codes[u]!r}: {labels[r]} needs at least "
                                f"{lower[u, r]:g} but every cell it counts is forced to 0")
        compiled[lv] = LevelConstraints(lv, codes, matrix, lower, upper, labels, patterns,
                                          index, sums.get(lv, ()))
    return compiled


def _invariant_rows(spec: SpecView, schema: Schema, stats: Mapping[str, Any],
                   published: Mapping[str, Any], level: str, levels: Sequence[str],
                   n_units: int) -> list[Rows]:
    """The rows of the invariants declared at ``level``: a catalogue invariant's from the
    statistics, a query invariant's from the answers published under its name."""
    blocks = []
    for inv in spec.invariants:
        if level not in spec.levels_of(inv, levels):
            continue
        if inv.is_query:
            blocks.append(_query_invariant_rows(inv, schema, published.get(inv.name), n_units,
                                                level))
        elif INVARIANTS[inv.name].rows is not None:
            blocks.append(INVARIANTS[inv.name].rows(schema, spec, stats))
    return blocks


_IMPLIED = re.compile(r" \(implied by [^)]*\)$")


def check_data(spec: SpecView, truth: Any, published: Mapping[str, Mapping[str, Any]] | None = None,
               *, compiled: Mapping[str, LevelConstraints] | None = None) -> None:
    """Refuse confidential data that break ``spec``: no release could keep its constraints
    honestly (a structural zero the data contradict would be silently enforced).

    Parameters
    ----------
    spec : Spec
    truth : Hierarchy
        The tabulated confidential data.
    published : mapping level → (mapping statistic → array), optional
        The statistics published as invariants; default: those the spec declares, computed
        from ``truth``.
    compiled : mapping level → LevelConstraints, optional
        The spec compiled already on ``truth``'s geography (then ``published`` is not used).

    Raises
    ------
    ConfidentialDataError
        Naming every broken constraint. The full message adds, per level, how many units break
        it and one example unit; the public one names the constraints only.

    Examples
    --------
    >>> from invariants.spec import Spec
    >>> from hierarchy.histograms import Hierarchy
    >>> from hierarchy.schema import E2E_1940
    >>> from hierarchy.geography import Geography
    >>> geo, _ = Geography.from_columns(["nation", "state"], [[["01", "02"]]])
    >>> spec = Spec.from_dict({"constraint": [{"name": "no_adults", "type": "structural_zero",
    ...                        "query": "marginal(votingage)", "answers": [1]}]})
    >>> x = np.zeros((2, 192), np.int64); x[1, 191] = 7
    >>> truth = Hierarchy(E2E_1940, geo, (x.sum(axis=0, keepdims=True), x))
    >>> try:
    ...     check_data(spec, truth)
    ... except ConfidentialDataError as exc:
    ...     print(exc.public); print(exc)
    the confidential data break the spec, so no release could satisfy it (a structural zero or bound
    the data contradict): broken: no_adults; fix the spec (or the data) and rerun
    the confidential data break the spec, so no release could satisfy it (a structural zero or bound
    the data contradict):
      no_adults & no_adults (implied by state): 1 of 1 nation units break it, e.g. '0'
      no_adults: 1 of 2 state units break it, e.g. '02'
    fix the spec (or the data) and rerun
    >>> check_data(spec, Hierarchy(E2E_1940, geo, (np.zeros((1, 192)), np.zeros((2, 192)))))
    """
    if compiled is None:
        if published is None:
            from hierarchy.measurement import published_statistics, spec_queries, spec_statistics

            published = published_statistics(
                truth, spec_statistics(spec, truth.levels),
                queries=spec_queries(spec, truth.schema, truth.levels))
        compiled = compile_spec(spec, truth.schema, truth.geography, published)
    lines, names = [], {}
    for level in truth.levels:
        if level not in compiled:
            continue
        lc = compiled[level]
        broken = _broken(lc, truth.level_counts(level))
        for name, units in broken.items():
            lines.append(_broken_line(lc, name, units))
            names.update(dict.fromkeys(_IMPLIED.sub("", part) for part in name.split(" & ")))
    if lines:
        head = ("the confidential data break the spec, so no release could satisfy it (a "
                "structural zero or bound the data contradict):")
        fix = "fix the spec (or the data) and rerun"
        raise ConfidentialDataError(f"{head}\n  " + "\n  ".join(lines) + f"\n{fix}",
                                    public=f"{head} broken: {', '.join(names)}; {fix}")
