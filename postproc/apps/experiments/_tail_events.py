"""Two additions to the Flaxman (2019) analysis: the direct estimate on tail events and the
published estimator with the paper's own KDE settings.

* :func:`tail_table` — from the D/D′ runs of :mod:`postproc.apps.experiments._neighbours`, the
  privacy loss on the events ``{error ≥ k}`` and ``{error ≤ −k}`` of the source leaf
  (:func:`postproc.evaluation.epl.direct_tail_epl`) at a few ``k``, beside its exact value for
  GDPC and ADPC (:func:`exact_tail`, from the noise's pmf; RDPC's raking has no closed form).
* :func:`leaf_published` — the published estimator at the leaves with this toolkit's settings
  and with Flaxman (2019)'s (``settings="paper"``: bandwidth factor 0.15, window 1.5 × the
  95th percentile of ``|e|``).
* The figures of both (:func:`figure_tails`, :func:`figure_settings`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from hierarchy.mechanisms import two_sided_geometric_pmf
from postproc.apps.experiments import _neighbours
from postproc.apps.experiments._common import (
    Output,
    method_style,
    new_figure,
    plain_log_axis,
)
from postproc.evaluation.epl import direct_tail_epl, exact_tail_epl, published_epl

__all__ = ["exact_tail", "tail_table", "leaf_published", "figure_tails", "figure_settings"]

#: The noise's support reaches this many multiples of ``1/z`` beyond the largest threshold: the
#: tails it cuts off are ``e^{-50}`` of those it keeps.
_REACH = 50.0


def exact_tail(method: str, epsilon: float, k: Sequence[float], *, shift: float,
               depth: int) -> np.ndarray:
    """Exact ``ε_tail(k)`` of a leaf's released value under GDPC or ADPC (``nan`` for RDPC).

    GDPC adds one two-sided geometric noise of parameter ``ε``; ADPC the mean of
    :data:`~postproc.apps.experiments._neighbours.ADPC_RUNS` of them at ``ε / P`` (its pmf is the
    convolution, on a grid of ``1/P``).

    Parameters
    ----------
    method : {'gdpc', 'adpc', 'rdpc'}
    epsilon : float
    k : sequence of float
        Thresholds ``≥ 0``.
    shift : float
        The leaf's exact value on ``D′`` less that on ``D``.
    depth : int
        Levels below the root (for the noise parameter; unused by GDPC and ADPC).

    Returns
    -------
    numpy.ndarray

    Examples
    --------
    >>> exact_tail("gdpc", 1.0, [0, 2], shift=-1, depth=3)
    array([1., 1.])
    >>> bool((exact_tail("adpc", 1.0, [0, 2, 8], shift=-1, depth=3) < 1.0).all())
    True
    """
    ks = np.asarray(k, dtype=float)
    if method == "rdpc":
        return np.full(ks.size, np.nan)
    z = _neighbours.noise_parameters(method, epsilon, depth)
    runs = _neighbours.ADPC_RUNS if method == "adpc" else 1
    half = math.ceil(runs * (float(ks.max()) + abs(shift)) + _REACH / z)
    support = np.arange(-half, half + 1)
    pmf = two_sided_geometric_pmf(support, z)
    total = pmf
    for _ in range(runs - 1):
        total = np.convolve(total, pmf)
    values = np.arange(-(total.size // 2), total.size // 2 + 1) / runs
    return exact_tail_epl(values, total, ks, shift=shift)


def tail_table(curves: dict, neighbour: pd.DataFrame, k: Sequence[float],
               depth: int) -> pd.DataFrame:
    """The tail-event direct estimates of the source leaf for every method and ε of the D/D′
    experiment, one row per threshold, with the exact value beside them.

    Parameters
    ----------
    curves : dict
        ``{(method, ε): (EPLResult, outputs on D, outputs on D′)}`` of the source leaf, as
        :func:`~postproc.apps.experiments._neighbours.neighbour_epl` returns it.
    neighbour : pandas.DataFrame
        Its table (for the leaf's exact values on ``D`` and ``D′``).
    k : sequence of float
        Thresholds.
    depth : int

    Returns
    -------
    pandas.DataFrame
    """
    source = neighbour[neighbour["unit"] == "source leaf"].set_index(["method", "epsilon"])
    parts = []
    for (method, epsilon), (_, on_d, on_moved) in sorted(curves.items()):
        exact_d = int(source.loc[(method, epsilon), "exact_d"])
        shift = int(source.loc[(method, epsilon), "exact_d_prime"]) - exact_d
        frame = direct_tail_epl(on_d, on_moved, k, exact=exact_d).to_frame()
        frame.insert(0, "method", method)
        frame.insert(1, "epsilon", float(epsilon))
        frame.insert(2, "unit", "source leaf")
        frame.insert(3, "runs", on_d.size)
        frame.insert(5, "exact", exact_tail(method, float(epsilon), k, shift=shift,
                                            depth=depth))
        parts.append(frame)
    return pd.concat(parts, ignore_index=True)


def leaf_published(errors: np.ndarray) -> dict[str, Any]:
    """The published estimator on one level's errors with both settings: the EPLs and the
    windows' half-widths."""
    ours, paper = published_epl(errors), published_epl(errors, settings="paper")

    def half_width(result):
        return result.parameters["window"][1] if "window" in result.parameters else math.nan

    return {"epl_published": ours.epl, "epl_published_paper": paper.epl,
            "window_published": half_width(ours), "window_published_paper": half_width(paper)}


def figure_tails(out: Output, tails: pd.DataFrame, labels: dict[str, str]) -> None:
    """The tail-event estimates against ``k``, one panel per ε, with the exact values."""
    epsilons = sorted(tails["epsilon"].unique())
    fig, axes = new_figure(len(epsilons), 1, width=3.6, height=3.6)
    for ax, epsilon in zip(axes[0], epsilons):
        ax.axhline(epsilon, color="black", lw=1, ls="--", label="ε")
        for method in _neighbours.METHODS:
            part = tails[(tails["method"] == method) & (tails["epsilon"] == epsilon)]
            style = method_style(method)
            done = part[part["estimable"]]
            ax.errorbar(done["k"], done["epl"],
                        yerr=[done["epl"] - done["ci_low"], done["ci_high"] - done["epl"]],
                        color=style["color"], marker=style["marker"], ms=4, lw=1.2, capsize=3,
                        label=f"{labels[method]}: estimate")
            if np.isfinite(part["exact"]).any():
                ax.plot(part["k"], part["exact"], color=style["color"], lw=0.9, ls=":",
                        marker="x", ms=5, label=f"{method.upper()}: exact")
        ax.set_xlabel("threshold k (persons)")
        ax.set_title(f"ε = {epsilon:g}", fontsize=10)
        ax.grid(True, alpha=0.3)
    axes[0, 0].set_ylabel("tail-event EPL (larger of the two tails)")
    handles, names = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, names, loc="outside lower center", ncol=3, fontsize=7)
    out.figure("tail_epl", fig,
               "The direct estimate on tail events at the source leaf of the D/D′ experiment: "
               "the larger of |log P(X ≥ c + k | D) − log P(X ≥ c + k | D′)| and its lower-tail "
               "mirror, with 95% intervals (Bonferroni over the two tails), against the "
               "threshold k; dotted crosses: the exact values from the noise's pmf (GDPC, "
               "ADPC). Thresholds whose tails hold fewer than 100 runs on a dataset are not "
               "estimable and not drawn. GDPC sits on ε at every k; ADPC below it, rising "
               "towards ε only far in the tails.")


def figure_settings(out: Output, leaf: pd.DataFrame, methods: Sequence[str],
                    labels: dict[str, str]) -> None:
    """Leaf EPL by ε: the improved estimator, and the published one with the toolkit's and with
    the paper's KDE settings."""
    from matplotlib.lines import Line2D

    fig, axes = new_figure(width=6.4, height=4.6)
    ax = axes[0, 0]
    eps = np.array(sorted(leaf["epsilon"].unique()))
    ax.plot(eps, eps, color="black", lw=1, ls=(0, (6, 3)), label="EPL = ε")
    estimators = (("epl", "-", "o", "improved"),
                  ("epl_published", "--", "s", "published (h = 0.1, ± max |q5|, |q95|)"),
                  ("epl_published_paper", ":", "^", "paper's KDE (h = 0.15, ± 1.5 × q95 of |e|)"))
    for method in methods:
        part = leaf[leaf["method"] == method].sort_values("epsilon")
        color = method_style(method)["color"]
        for column, ls, marker, _ in estimators:
            ax.plot(part["epsilon"], part[column], color=color, lw=1.2, ls=ls, marker=marker,
                    ms=4, mfc=color if column == "epl" else "white")
    handles = [Line2D([], [], color=method_style(m)["color"], lw=2, label=labels[m])
               for m in methods]
    handles += [Line2D([], [], color="black", lw=1.2, ls=ls, marker=marker, ms=4,
                       mfc="black" if column == "epl" else "white", label=name)
                for column, ls, marker, name in estimators]
    handles.append(Line2D([], [], color="black", lw=1, ls=(0, (6, 3)), label="EPL = ε"))
    plain_log_axis(ax, "x", ticks=eps)
    plain_log_axis(ax, "y")
    ax.set_xlabel("privacy budget ε")
    ax.set_ylabel("EPL at the leaves")
    ax.set_title("Leaf EPL: improved, published, and published with the paper's KDE settings",
                 fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(handles=handles, fontsize=7, loc="upper left")
    out.figure("published_settings", fig,
               "Leaf-level EPL against ε: the improved estimator (solid), the published one "
               "with this toolkit's settings (dashed: scipy bandwidth factor 0.1, window ± the "
               "larger of |q5| and |q95|) and with Flaxman (2019)'s own (dotted: factor 0.15, "
               "window ± 1.5 × the 95th percentile of |e|), on the same errors. A point missing "
               "is an undefined estimate (the published window holds too few midpoints).")
