"""Per-level error tables: noisy measurements vs post-processed results, against the truth."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from hierarchy.histograms import Hierarchy
from hierarchy.noisy import NoisyHierarchy
from postproc.metrics import error_metrics

__all__ = ["level_error_table", "format_error_table", "print_level_summary"]

_QUERIES = ("total", "va_hisp_race", "detailed")


def _noisy_answers(noisy: NoisyHierarchy, level: str, query: str) -> tuple[np.ndarray, str]:
    """The noisy measurement of ``query`` — or, for ``total``, the sum of the most precise
    measured query (what a user without post-processing would report)."""
    measured = noisy.queries(level)
    if query in measured:
        return noisy.get(level, query).values, query
    if query == "total":
        best = min(measured, key=lambda q: float(np.sum(noisy.get(level, q).variances[0])))
        return noisy.get(level, best).values.sum(axis=1, keepdims=True), f"sum of {best}"
    raise KeyError(query)


def level_error_table(truth: Hierarchy, noisy: NoisyHierarchy, histograms, workload,
                      queries=_QUERIES) -> pd.DataFrame:
    """MAE (median absolute error), mean absolute error and RMSE per level and query, for the
    noisy measurements and for the post-processed histograms."""
    rows: list[dict[str, Any]] = []
    for li, level in enumerate(noisy.levels[:len(histograms)]):
        exact_counts = truth.counts[li]
        for q in queries:
            if q == "total":
                exact = exact_counts.sum(axis=1, keepdims=True)
                post = histograms[li].sum(axis=1, keepdims=True)
            elif q in workload:
                exact = workload[q].answer(exact_counts)
                post = workload[q].answer(histograms[li])
            else:
                continue
            try:
                raw, how = _noisy_answers(noisy, level, q)
            except KeyError:
                continue
            m_noisy = error_metrics(raw, exact)
            m_post = error_metrics(post, exact)
            rows.append({"level": level, "query": q, "units": int(exact.shape[0]),
                         "noisy": how, "noisy_mae": m_noisy["mae"],
                         "topdown_mae": m_post["mae"], "noisy_mean_abs": m_noisy["mean_abs"],
                         "topdown_mean_abs": m_post["mean_abs"], "noisy_rmse": m_noisy["rmse"],
                         "topdown_rmse": m_post["rmse"], "exact_median": m_post["exact_median"]})
    return pd.DataFrame(rows)


def format_error_table(table: pd.DataFrame) -> str:
    """A compact aligned text table."""
    if table.empty:
        return "(no levels)"
    show = table[["level", "query", "units", "noisy_mae", "topdown_mae", "noisy_mean_abs",
                  "topdown_mean_abs", "noisy_rmse", "topdown_rmse"]].copy()
    show.columns = ["level", "query", "units", "MAE noisy", "MAE TopDown", "mean|e| noisy",
                    "mean|e| TopDown", "RMSE noisy", "RMSE TopDown"]
    return show.to_string(index=False, float_format=lambda v: f"{v:,.2f}")


def print_level_summary(out, *, show_confidential: bool | None = None) -> None:
    """Print a finished pipeline's per-level error table (saved in ``DIR/confidential/``).

    In release mode the table is never printed (the terminal is an output too): only where it
    was written, if it was asked for. ``show_confidential`` overrides that for a simulation.
    """
    table = out.error_table
    if table is None:
        if out.release:
            print("release mode: no errors against the confidential data were computed (ask "
                  "with --error-table; they are written under confidential/ only)")
        return
    path = out.directory / "confidential" / "error_table.csv"
    show = (not out.release) if show_confidential is None else show_confidential
    if not show:
        print(f"errors against the confidential data: {path} (CONFIDENTIAL - do not publish)")
        return
    print("Error against the confidential data (MAE = median absolute error):")
    print(format_error_table(table))
    print(f"(saved in {path})")
