"""Which simple random sample is TopDown like? Matching on error and EPL jointly.

Petti & Flaxman (2020) compare TopDown at each ε with simple random samples (SRS) of persons and
report the sampling fraction that is about as accurate *and* as leaky (their Table 1; their
discussion reads the matches off the MAE-vs-EPL scatter of Figure 2). The paper states no
formula, so this module uses one and says so:

**Rule.** On the trade-off plot drawn with log-log axes, TopDown at one ε is the point
``(log EPL_td, log err_td)`` and SRS the polyline through ``(log EPL_f, log err_f)`` in order of
the fraction ``f``. The match is the point of that polyline nearest in Euclidean distance
``d = √((log EPL − log EPL_td)² + (log err − log err_td)²)`` — relative differences on both axes
(``d = 0.1`` is about 10 % off), so neither unit dominates. ``joint_fraction`` is the nearest
grid fraction; ``joint_interpolated_fraction`` the fraction at the nearest point of the polyline
(linear in ``f`` along a segment); ``joint_distance`` is ``d`` there. SRS points with an
undefined EPL are left out of the polyline. Applied to the published paper's own TopDown and SRS
numbers (:mod:`postproc.apps.experiments._papers`), the rule gives every fraction of its Table 1
for county SC.

The match on the error alone (the toolkit's earlier rule) is kept beside it: ``error_fraction``
(nearest grid point in log error) and ``error_interpolated_fraction`` (linear in log error;
empty when TopDown is outside the SRS range).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

__all__ = ["match_srs", "nearest_on_polyline", "EPL_ESTIMATORS"]

#: Row label of each EPL column the matches can use.
EPL_ESTIMATORS = {"improved": "epl", "published": "epl_published"}


def nearest_on_polyline(point: np.ndarray, vertices: np.ndarray) -> tuple[int, float, float]:
    """The point of a polyline nearest to ``point``.

    Parameters
    ----------
    point : numpy.ndarray, shape (2,)
    vertices : numpy.ndarray, shape (k, 2)
        The polyline's vertices in order (``k ≥ 1``).

    Returns
    -------
    segment : int
        Index ``i`` of the segment ``vertices[i] → vertices[i+1]`` holding the nearest point (0
        for a single vertex).
    t : float
        Position along that segment, 0 to 1.
    distance : float

    Examples
    --------
    >>> nearest_on_polyline(np.array([1.0, 1.0]), np.array([[0.0, 0.0], [2.0, 0.0], [2.0, 2.0]]))
    (0, 0.5, 1.0)
    """
    if len(vertices) == 1:
        return 0, 0.0, float(np.hypot(*(point - vertices[0])))
    start, step = vertices[:-1], np.diff(vertices, axis=0)
    length2 = np.einsum("ij,ij->i", step, step)
    with np.errstate(invalid="ignore", divide="ignore"):
        t = np.clip(np.einsum("ij,ij->i", point - start, step) / length2, 0.0, 1.0)
    t = np.where(length2 > 0, t, 0.0)
    nearest = start + t[:, None] * step
    distance = np.hypot(*(nearest - point).T)
    best = int(np.argmin(distance))
    return best, float(t[best]), float(distance[best])


def match_srs(topdown: pd.DataFrame, srs: pd.DataFrame, *,
              measure: Mapping[str, str]) -> pd.DataFrame:
    """For each ε, level and query of ``topdown``: the SRS fraction it matches, jointly on
    (error, EPL) and on the error alone, for each EPL estimator.

    Parameters
    ----------
    topdown : pandas.DataFrame
        Columns ``epsilon``, ``level``, ``query``, the error columns named in ``measure``, and
        ``epl`` / ``epl_published`` (``inf`` where undefined).
    srs : pandas.DataFrame
        The same columns with ``fraction`` instead of ``epsilon``.
    measure : mapping
        ``query → error column`` (``"mae"``, ``"mean_abs"``).

    Returns
    -------
    pandas.DataFrame
        One row per ε, level, query and EPL estimator (``improved``, ``published``) where
        TopDown's error is positive and the SRS grid is not empty: ``matched_on``, TopDown's
        error and EPL; the joint match (``joint_fraction``, ``joint_interpolated_fraction``,
        ``joint_distance``, the SRS error and EPL at ``joint_fraction``; empty when TopDown's EPL
        or every SRS EPL is undefined); the error-only match (``error_fraction``,
        ``error_interpolated_fraction``, ``within_srs_range``, the SRS error and EPL at
        ``error_fraction``).

    Examples
    --------
    TopDown's error is like a 50 % sample's but its EPL like a 10 % sample's; the error-only
    match says 50 %, the joint match 10 % on the grid and 27 % along the SRS curve:

    >>> srs = pd.DataFrame({"fraction": [0.1, 0.5, 0.9], "level": "ed", "query": "total",
    ...                     "mae": [40.0, 10.0, 2.0], "epl": [0.02, 0.1, 0.5],
    ...                     "epl_published": [0.02, 0.1, 0.5]})
    >>> td = pd.DataFrame({"epsilon": [1.0], "level": "ed", "query": "total", "mae": [10.0],
    ...                    "epl": [0.02], "epl_published": [0.02]})
    >>> row = match_srs(td, srs, measure={"total": "mae"}).iloc[0]
    >>> float(row["error_fraction"]), float(row["joint_fraction"])
    (0.5, 0.1)
    >>> round(float(row["joint_interpolated_fraction"]), 2)
    0.27
    """
    rows = []
    for _, row in topdown.iterrows():
        column = measure[row["query"]]
        grid = srs[(srs["level"] == row["level"]) & (srs["query"] == row["query"])]
        grid = grid.sort_values("fraction")
        if grid.empty or not row[column] > 0:
            continue
        fractions = grid["fraction"].to_numpy(dtype=float)
        errors = np.maximum(grid[column].to_numpy(dtype=float), 1e-9)
        for estimator, epl_column in EPL_ESTIMATORS.items():
            epls = grid[epl_column].to_numpy(dtype=float)
            by_error = _error_match(float(row[column]), fractions, errors, epls)
            joint = _joint_match(float(row[column]), float(row[epl_column]), fractions, errors,
                                 epls)
            rows.append({"epsilon": row["epsilon"], "level": row["level"],
                         "query": row["query"], "epl_estimator": estimator,
                         "matched_on": column, "topdown_error": row[column],
                         "topdown_epl": row[epl_column], **joint, **by_error})
    return pd.DataFrame(rows)


def _error_match(error: float, fractions: np.ndarray, errors: np.ndarray,
                 epls: np.ndarray) -> dict:
    best = int(np.argmin(np.abs(np.log(errors) - np.log(error))))
    decreasing, reversed_fractions = errors[::-1], fractions[::-1]
    inside = bool(decreasing.min() <= error <= decreasing.max())
    interpolated = float(np.interp(np.log(error), np.log(decreasing), reversed_fractions)) \
        if inside else float("nan")
    return {"error_fraction": fractions[best], "error_interpolated_fraction": interpolated,
            "within_srs_range": inside, "error_srs_error": errors[best],
            "error_srs_epl": epls[best]}


def _joint_match(error: float, epl: float, fractions: np.ndarray, errors: np.ndarray,
                 epls: np.ndarray) -> dict:
    empty = {"joint_fraction": float("nan"), "joint_interpolated_fraction": float("nan"),
             "joint_distance": float("nan"), "joint_srs_error": float("nan"),
             "joint_srs_epl": float("nan")}
    usable = np.isfinite(epls) & (epls > 0)
    if not (np.isfinite(epl) and epl > 0 and usable.any()):
        return empty
    fractions, errors, epls = fractions[usable], errors[usable], epls[usable]
    point = np.array([np.log(epl), np.log(error)])
    vertices = np.column_stack([np.log(epls), np.log(errors)])
    nearest = int(np.argmin(np.hypot(*(vertices - point).T)))
    segment, t, distance = nearest_on_polyline(point, vertices)
    end = min(segment + 1, fractions.size - 1)
    return {"joint_fraction": fractions[nearest],
            "joint_interpolated_fraction": float(fractions[segment]
                                                 + t * (fractions[end] - fractions[segment])),
            "joint_distance": distance, "joint_srs_error": errors[nearest],
            "joint_srs_epl": epls[nearest]}
