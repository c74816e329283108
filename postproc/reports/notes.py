"""The notes under a table that say why its EPLs are not numbers: one note per kind of reason.

An evaluation (:func:`postproc.evaluation.evaluate.evaluate`), a comparison
(:func:`postproc.evaluation.compare.compare_methods`) and the experiments' tables give, for every
EPL that is not estimated, the reason in a column (``epl_reason`` or ``epl_note``). Down a table
the same reason comes back with other numbers (``all 49 errors equal 0 …``, ``all 1176 errors
equal 0 …``); :func:`epl_notes` says each kind once, with its count, for a page
(:func:`postproc.reports.page.table`), the comparison page and ``postproc evaluate``'s text.
It reads only the table's columns: it lives with the reports, which every layer that writes a
table may use.

Examples
--------
>>> inf = float("inf")
>>> t = pd.DataFrame({"query": ["total", "detailed"], "epl": [inf, 0.5],
...                   "epl_reason": ["all 49 errors equal 0: a point mass", None]})
>>> epl_notes(t)[1]
['[1] EPL undefined in 1 row of total: every error is 0 (exact answers, as for a statistic held
invariant)']
"""

from __future__ import annotations

import math
import re

import pandas as pd

__all__ = ["epl_notes", "epl_kind"]


def epl_kind(epl: float, ci_low: float) -> str:
    """What a table's EPL is, from its ``epl`` and the lower end of its interval (``nan`` for a
    missing one): ``'estimate'``, ``'bound'`` (``EPL >= ci_low``), ``'unbounded'`` (held
    invariant) or ``'undefined'`` — the kinds of :class:`~postproc.evaluation.epl.EPLResult`.

    Examples
    --------
    >>> inf, nan = float("inf"), float("nan")
    >>> [epl_kind(0.3, 0.2), epl_kind(inf, 5.6), epl_kind(inf, inf), epl_kind(inf, nan)]
    ['estimate', 'bound', 'unbounded', 'undefined']
    """
    epl, ci_low = float(epl), float(ci_low)
    if math.isfinite(epl):
        return "estimate"
    if math.isinf(ci_low):
        return "unbounded"
    return "bound" if math.isfinite(ci_low) else "undefined"


_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?")
_POINT_MASS = re.compile(r"^all [\d,]+ errors equal (\S+?):")


def epl_notes(table: pd.DataFrame) -> tuple[list[int | None], list[str]]:
    """The reasons EPLs are not estimated, collapsed into one note per kind with a count.

    Reasons that differ only in their numbers (``all 49 errors equal 0 …``, ``all 1176 errors
    equal 0 …``) are one kind. A kind where every error is the same number is said in a few
    words, with the queries it happened to; another kind is said by its first reason.

    Parameters
    ----------
    table : pandas.DataFrame
        An evaluation or a comparison (columns ``query``, ``epl``, ``epl_reason``).

    Returns
    -------
    notes : list of int or None
        Per row, the number of its note (from 1), or None for an estimated EPL.
    lines : list of str
        One line per note, ``[k] EPL undefined in N rows: …`` (``a lower bound``,
        ``unbounded`` for those kinds, from the lower end ``epl_ci_low`` or ``epl_low``).

    Examples
    --------
    >>> inf = float("inf")
    >>> t = pd.DataFrame({"query": ["total", "total", "detailed"], "epl": [inf, inf, 0.5],
    ...                   "epl_reason": ["all 1 errors equal 0: a point mass",
    ...                                  "all 49 errors equal 0: a point mass", None]})
    >>> marks, lines = epl_notes(t)
    >>> marks, lines
    ([1, 1, None], ['[1] EPL undefined in 2 rows of total: every error is 0 (exact answers, as for a
    statistic held invariant)'])
    """
    kinds: dict[str, list[int]] = {}
    marks: list[int | None] = []
    reasons = list(table["epl_reason"]) if "epl_reason" in table else [None] * len(table)
    for i, reason in enumerate(reasons):
        if not isinstance(reason, str) or not reason:
            marks.append(None)
            continue
        key = _NUMBER.sub("#", reason)
        kinds.setdefault(key, []).append(i)
        marks.append(list(kinds).index(key) + 1)
    lines = []
    low = next((c for c in ("epl_ci_low", "epl_low") if c in table), None)
    epls = table["epl"] if "epl" in table else [float("inf")] * len(table)
    kind_of = [epl_kind(e, table[low].iloc[i] if low else float("nan"))
               for i, e in enumerate(epls)]
    for k, rows in enumerate(kinds.values(), start=1):
        first = reasons[rows[0]]
        what = {"bound": "a lower bound", "unbounded": "unbounded"}.get(kind_of[rows[0]],
                                                                        "undefined")
        head = f"[{k}] EPL {what} in {len(rows)} row{'s' if len(rows) > 1 else ''}"
        values = {m.group(1) for m in (_POINT_MASS.match(reasons[r]) for r in rows) if m}
        if len(values) == 1 and _POINT_MASS.match(first) and kind_of[rows[0]] == "undefined":
            queries = ", ".join(dict.fromkeys(str(table["query"].iloc[r]) for r in rows))
            what = ("exact answers, as for a statistic held invariant" if values == {"0"} else
                    "the error distribution is a point mass")
            lines.append(f"{head} of {queries}: every error is {values.pop()} ({what})")
        else:
            lines.append(f"{head}: {first}" + (" (numbers of the first)" if len(rows) > 1 and
                                                 any(reasons[r] != first for r in rows) else ""))
    return marks, lines
