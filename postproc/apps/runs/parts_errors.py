"""The error table of a run in parts (:mod:`postproc.apps.runs.parts`), in a form that adds up
over the parts: per level and query, counts, sums of absolute and squared errors, and the
distributions of the integer absolute errors and exact answers, from which the medians of
``postproc run``'s table are exact. Each part's errors go into its marker, so a resumed run
counts the parts finished before the interruption once.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from hierarchy.measurement import exact_answers


class _Errors:
    """Errors per (level, query) in a form that adds up over parts: counts, sums of absolute
    and squared errors, and the distributions of the integer absolute errors and exact answers
    (value → count), from which the medians of ``postproc run``'s table are exact."""

    def __init__(self):
        self.rows: dict[tuple[str, str], dict[str, Any]] = {}

    def add(self, level: str, query: Any, exact: np.ndarray, noisy: Any,
            post: np.ndarray, post_sparse: Any = None) -> None:
        """One level and query: its exact answers, noisy measurement and post-processed
        histograms (errors over the answers drawn, as ``level_error_table`` counts them);
        ``post_sparse``: ``post``'s :func:`~hierarchy.queries.sparse_copy`, made once per
        level."""
        units = int(exact.shape[0])
        answers = exact_answers(query, post, post_sparse)
        if noisy.drawn is None:
            dn, dp = noisy.values - exact, answers - exact
        else:   # only the answers drawn (at a part's blocks about 1 % of the detailed cells)
            at = np.flatnonzero(noisy.drawn)
            exact = exact.ravel()[at]
            dn, dp = noisy.values.ravel()[at] - exact, answers.ravel()[at] - exact
        part = {"units": units, "answers": int(exact.size),
                "sums": [float(np.abs(dn).sum()), float(np.square(dn, dtype=np.float64).sum()),
                         float(np.abs(dp).sum()), float(np.square(dp, dtype=np.float64).sum())]}
        integer = all(a.dtype.kind in "iu" for a in (dn, dp, exact))
        part["counts"] = {name: _value_counts(v) if integer else None
                          for name, v in (("noisy", np.abs(dn)), ("post", np.abs(dp)),
                                          ("exact", exact))}
        self._merge_one((level, query.name), part)

    def _merge_one(self, key: tuple[str, str], part: Mapping[str, Any]) -> None:
        row = self.rows.get(key)
        if row is None:
            self.rows[key] = {"units": part["units"], "answers": part["answers"],
                              "sums": list(part["sums"]), "counts": dict(part["counts"])}
            return
        row["units"] += part["units"]
        row["answers"] += part["answers"]
        row["sums"] = [a + b for a, b in zip(row["sums"], part["sums"])]
        for name, counts in part["counts"].items():
            mine = row["counts"].get(name)
            row["counts"][name] = (None if mine is None or counts is None
                                   else _add_counts(mine, counts))

    def to_dict(self) -> dict[str, Any]:
        return {f"{lv}\t{q}": row for (lv, q), row in self.rows.items()}

    def merge(self, data: Mapping[str, Any]) -> None:
        for key, part in data.items():
            lv, q = key.split("\t")
            self._merge_one((lv, q), part)

    def table(self, levels: Sequence[str], method: str = "topdown") -> pd.DataFrame:
        """``postproc run``'s error table (:func:`postproc.evaluation.tables.level_error_table`)
        for the measured queries: MAE (median absolute error), mean absolute error, RMSE."""
        rows = []
        for (lv, q), row in self.rows.items():
            n = row["answers"]
            an, sn, ap, sp_ = row["sums"]
            counts = row["counts"]
            rows.append({"level": lv, "query": q, "units": row["units"], "measured": q,
                         "measured_mae": _median(counts.get("noisy")),
                         f"{method}_mae": _median(counts.get("post")),
                         "measured_mean_abs": an / n, f"{method}_mean_abs": ap / n,
                         "measured_rmse": float(np.sqrt(sn / n)),
                         f"{method}_rmse": float(np.sqrt(sp_ / n)),
                         "exact_median": _median(counts.get("exact"))})
        frame = pd.DataFrame(rows)
        if frame.empty:
            return frame
        order = {lv: i for i, lv in enumerate(levels)}
        frame["_order"] = frame["level"].map(order)
        return (frame.sort_values(["_order", "query"], kind="stable")
                .drop(columns="_order").reset_index(drop=True))


def _value_counts(values: np.ndarray) -> list[list[int]]:
    """[[distinct values], [their counts]] of an integer array (by counting when the values
    are small and nonnegative, as errors and block counts are: linear, not a sort)."""
    values = np.asarray(values).ravel()
    if values.size and values.min() >= 0 and values.max() <= max(1 << 20, values.size):
        counts = np.bincount(values)
        v = np.flatnonzero(counts)
        return [v.tolist(), counts[v].tolist()]
    v, c = np.unique(values, return_counts=True)
    return [v.tolist(), c.tolist()]


def _add_counts(a: Sequence[Sequence[int]], b: Sequence[Sequence[int]]) -> list[list[int]]:
    values = np.concatenate([np.asarray(a[0], np.int64), np.asarray(b[0], np.int64)])
    counts = np.concatenate([np.asarray(a[1], np.int64), np.asarray(b[1], np.int64)])
    v, inverse = np.unique(values, return_inverse=True)
    return [v.tolist(), np.bincount(inverse, weights=counts).astype(np.int64).tolist()]


def _median(counts: Sequence[Sequence[int]] | None) -> float:
    """The median (``numpy.median``'s: the mean of the two middle values of an even count) of
    a value → count distribution; NaN without one (real-valued noise)."""
    if counts is None:
        return float("nan")
    values = np.asarray(counts[0], np.float64)
    cumulative = np.cumsum(counts[1])
    n = int(cumulative[-1])
    lo = values[np.searchsorted(cumulative, (n - 1) // 2, side="right")]
    hi = values[np.searchsorted(cumulative, n // 2, side="right")]
    return float((lo + hi) / 2)
