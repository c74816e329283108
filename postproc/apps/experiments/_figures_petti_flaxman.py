"""The figures of the ``petti_flaxman`` analysis (tables in, PNG files out)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from postproc.apps.experiments._common import (
    Output,
    epsilon_color,
    legend_if_any,
    merge_coinciding,
    method_style,
    new_figure,
    plain_log_axis,
)
from postproc.reports.numbers import format_number

__all__ = ["figure_levels", "figure_distribution", "figure_tradeoff", "figure_bias",
           "figure_comparison"]

MEASURE_LABEL = {"mae": "MAE (median |error|), persons", "mean_abs": "mean |error|, persons"}
LEVEL_COLORS = {"state": "#2ca02c", "county": "#1f77b4", "enum_dist": "#d62728",
                "nation": "#555555"}


def _whiskers(rows: pd.DataFrame) -> list[np.ndarray]:
    """Error bars of EPL intervals on a log axis: a lower end at 0 is drawn at a tenth."""
    epl = rows["epl"].to_numpy()
    low = np.maximum(np.nan_to_num(rows["epl_ci_low"].to_numpy(), nan=np.inf), epl / 10)
    low = np.minimum(low, epl)
    high = np.maximum(np.nan_to_num(rows["epl_ci_high"].to_numpy(), nan=-np.inf), epl)
    return [np.maximum(epl - low, 0), high - epl]


def _shorten(text: str, limit: int = 90) -> str:
    """A reason short enough for a panel (the table keeps it whole)."""
    text = text.split(";")[0].split(": ", 1)[-1] if len(text) > limit else text
    return text if len(text) <= limit else text[:limit - 1] + "…"


def epl_column(rows: pd.DataFrame) -> str:
    """The improved EPL where it is defined for at least half of ``rows``, else the published."""
    return "epl" if np.isfinite(rows["epl"]).mean() >= 0.5 else "epl_published"


def figure_levels(out: Output, table: pd.DataFrame, epsilons: Sequence[float],
                  queries: Mapping[str, str], measure: Mapping[str, str],
                  levels: Sequence[str]) -> None:
    """Error and EPL against ε per level, one column per query."""
    fig, axes = new_figure(len(queries), 2, width=4.6, height=4.0)
    for col, (query, label) in enumerate(queries.items()):
        column = measure[query]
        part = table[table["query"] == query]
        err_ax, epl_ax = axes[0, col], axes[1, col]
        epl_ax.plot(epsilons, epsilons, color="black", ls="--", lw=1, label="EPL = ε")
        rows = {lv: part[part["level"] == lv].sort_values("epsilon") for lv in levels[1:]}
        # a level that repeats the one above (one county per state at small sizes) would hide
        # it: draw each distinct series once, labelled with every level it stands for
        series = merge_coinciding({lv: (r["epsilon"].to_numpy(),
                                        r[[column, "epl"]].to_numpy(dtype=float))
                                   for lv, r in rows.items()})
        for name in series:
            level = name.split(" = ")[0]
            style = {"color": LEVEL_COLORS[level], "marker": "o", "ms": 4, "capsize": 2}
            positive = rows[level][rows[level][column] > 0]
            if not positive.empty:
                spread = positive["mae_sd"].fillna(0) if column == "mae" else None
                err_ax.errorbar(positive["epsilon"], positive[column], yerr=spread,
                                label=name, **style)
            finite = rows[level][np.isfinite(rows[level]["epl"])]
            if not finite.empty:
                epl_ax.errorbar(finite["epsilon"], finite["epl"], yerr=_whiskers(finite),
                                label=name, **style)
        if not np.isfinite(part[part["level"].isin(levels[1:])]["epl"]).any():
            epl_ax.text(0.5, 0.5, "EPL undefined at every level and ε\n(epl_reason says why)",
                        transform=epl_ax.transAxes, ha="center", va="center", color="#666666",
                        fontsize=8)
        for ax in (err_ax, epl_ax):
            plain_log_axis(ax, "both", ticks=epsilons)
            ax.grid(True, which="both", alpha=0.3)
            ax.set_xlabel("total privacy budget ε (E2E split)")
            legend_if_any(ax, "every error is 0 (invariant)", fontsize=8)
        err_ax.set_ylabel(MEASURE_LABEL[column])
        err_ax.set_title(label, fontsize=9)
        epl_ax.set_ylabel("EPL (improved estimator)")
    out.figure("mae_epl_by_level", fig,
               "TopDown's error (top: MAE with its sd over seeds for the totals and the paper's "
               "SC cells, mean |error| for the other SC sets) and EPL (bottom, 95% "
               "intervals) against ε, per level (a legend entry 'state = county' is one line "
               "for levels whose values coincide, e.g. one county per state). Nation and state "
               "totals are invariant (no "
               "error, EPL undefined) and not drawn; neither are undefined EPLs (too few, too "
               "spread errors: county totals at small ε; intervals reaching 0 are cut at a "
               "tenth of the estimate). Over all cells, va_hisp_race's EPL is dominated by the "
               "spike of exact zeros in empty cells; over the cells with people it is far "
               "lower.")


def figure_distribution(out: Output, errors: np.ndarray, estimate, epsilon: float) -> None:
    """The error histogram of ED totals and its EPL(x) curve."""
    fig, axes = new_figure(1, 2, width=7.0, height=3.4, sharex=True)
    hist_ax, curve_ax = axes[0, 0], axes[1, 0]
    reach = np.percentile(np.abs(errors), 99.5)
    edges = np.arange(-np.ceil(reach) - 0.5, np.ceil(reach) + 1.0, 1.0)
    counts, edges = np.histogram(errors, bins=edges)
    centers = (edges[:-1] + edges[1:]) / 2
    hist_ax.step(centers, np.where(counts > 0, counts, np.nan), where="mid", color="#d62728")
    hist_ax.set_yscale("log")
    hist_ax.set_ylabel("EDs (log scale)")
    hist_ax.set_title(f"TopDown errors of ED totals at ε = {epsilon:g} (seeds pooled, "
                      f"n = {errors.size:,})")
    hist_ax.grid(True, alpha=0.3)
    if estimate.x.size:
        curve_ax.plot(estimate.x, estimate.epl_x, color="#d62728", marker="o", ms=2, lw=1,
                      label=f"EPL(x); EPL = max |EPL(x)| = {estimate.epl:.3f}")
    curve_ax.axhline(estimate.epl if np.isfinite(estimate.epl) else 0, color="#d62728", lw=0.8,
                     ls=":")
    curve_ax.axhline(0, color="black", lw=0.6)
    curve_ax.set_xlabel("error x (DP − exact) of an ED total, persons")
    curve_ax.set_ylabel("EPL(x) = log f(x)/f(x+1)")
    curve_ax.grid(True, alpha=0.3)
    legend_if_any(curve_ax, "EPL(x) cannot be resolved here: "
                  + _shorten(estimate.reason or "too few errors"), fontsize=8, loc="upper left")
    out.figure("error_distribution", fig,
               f"Distribution of the errors of ED total counts at ε = {epsilon:g} (top, log "
               f"scale) and the log ratio of neighbouring error densities where the improved "
               f"estimator can resolve it (bottom); the EPL is its largest absolute value.")


def figure_tradeoff(out: Output, topdown_table: pd.DataFrame, srs_table: pd.DataFrame,
                    closest: pd.DataFrame, queries: Mapping[str, str],
                    measure: Mapping[str, str]) -> None:
    """Error against EPL for TopDown (over ε) and SRS (over the fraction), with the joint
    matches drawn as dotted links."""
    shown = ["total", "va_hisp_race>0", "va_hisp_race:authors"]
    fig, axes = new_figure(len(shown), 2, width=5.0, height=4.3)
    for row, level in enumerate(["county", "enum_dist"]):
        for col, query in enumerate(shown):
            ax, column = axes[row, col], measure[query]
            both = pd.concat([t[(t["level"] == level) & (t["query"] == query)]
                              for t in (topdown_table, srs_table)])
            if both.empty:
                legend_if_any(ax)
                continue
            epl = epl_column(both)
            for name, table, key, fmt in (("topdown", topdown_table, "epsilon", "ε={:g}"),
                                          ("srs", srs_table, "fraction", "{:.0%}")):
                part = table[(table["level"] == level) & (table["query"] == query)
                             & np.isfinite(table[epl]) & (table[column] > 0)]
                part = part.sort_values(key)
                if part.empty:
                    continue
                style = method_style(name)
                ax.plot(part[epl], part[column], lw=1.3, ms=4, **style,
                        label="TopDown (ε)" if name == "topdown" else "SRS (sampling fraction)")
                step = 1 if name == "topdown" else 3
                for _, r in part.iloc[::step].iterrows():
                    ax.annotate(fmt.format(r[key]), (r[epl], r[column]), fontsize=7,
                                textcoords="offset points",
                                xytext=(5, 4) if name == "topdown" else (-6, -11),
                                color=style["color"])
            estimator = "improved" if epl == "epl" else "published"
            links = closest[(closest["level"] == level) & (closest["query"] == query)
                            & (closest["epl_estimator"] == estimator)].dropna(
                subset=["joint_fraction"])
            for _, r in links.iterrows():
                ax.plot([r["topdown_epl"], r["joint_srs_epl"]],
                        [r["topdown_error"], r["joint_srs_error"]], color="#444444", lw=0.7,
                        ls=":")
            plain_log_axis(ax, "both")
            ax.grid(True, which="both", alpha=0.3)
            ax.set_xlabel("EPL (improved estimator)" if epl == "epl" else
                          "EPL (published estimator: the improved one is undefined here)")
            ax.set_ylabel(MEASURE_LABEL[column])
            ax.set_title(f"{level}: {queries[query]}", fontsize=9)
            legend_if_any(ax, fontsize=8)
    out.figure("tradeoff", fig,
               "Error against empirical privacy loss: TopDown over ε (red) and simple random "
               "samples over the sampling fraction (grey), for county (top) and ED (bottom) "
               "totals and va_hisp_race counts of the cells with people (middle: exact > 0; "
               "right: a person in the exact or the DP data, the paper's). Down and left is "
               "better. Dotted links join each ε to the SRS fraction nearest on these log-log "
               "axes (the joint match of closest_srs.csv). A panel whose improved EPL is "
               "undefined for most points (county totals: few errors spread over hundreds of "
               "persons never reach the estimator's density floor) uses the published "
               "estimator instead, as its x label says.")


def figure_bias(out: Output, bias: pd.DataFrame, definition: str) -> None:
    """Bias of county and ED totals by homogeneity index, side by side."""
    levels = [lv for lv in ("county", "enum_dist") if (bias["level"] == lv).any()]
    fig, axes = new_figure(len(levels), 2, width=6.0, height=3.2, sharex=True,
                           gridspec_kw={"height_ratios": [3, 1]})
    chosen = bias[bias["definition"] == definition]
    epsilons = sorted(chosen["epsilon"].unique())
    for col, level in enumerate(levels):
        ax, count_ax = axes[0, col], axes[1, col]
        part = chosen[chosen["level"] == level]
        indices = np.arange(int(part["homogeneity_index"].min()),
                            int(part["homogeneity_index"].max()) + 1)
        for i, epsilon in enumerate(epsilons):
            # every index in range, NaN where no unit has it: the line breaks there instead of
            # joining indices that are not neighbours
            rows = part[part["epsilon"] == epsilon].set_index("homogeneity_index").reindex(
                indices)
            offset = (i - (len(epsilons) - 1) / 2) * 0.08
            ax.errorbar(indices + offset, rows["bias"], yerr=1.96 * rows["se"].fillna(0),
                        color=epsilon_color(i, len(epsilons)), marker="o", ms=3, lw=1,
                        capsize=1.5, label=f"ε = {epsilon:g}")
        ax.axhline(0, color="black", lw=0.8)
        if not (part["bias"].abs() > 1e-9).any():
            ax.text(0.5, 0.7, f"every {level} total is exact here\n(held invariant: e.g. one "
                    f"{level} per state)", transform=ax.transAxes, ha="center", va="center",
                    color="#666666", fontsize=9)
        ax.set_ylabel(f"bias of {level} total\n(mean DP − exact), persons")
        ax.set_title(f"{level}: bias by homogeneity index (bars: 95% intervals)", fontsize=10)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, ncol=4)
        first = part[part["epsilon"] == epsilons[0]]
        count_ax.plot(first["homogeneity_index"], first["n"], "o", color="#777777", ms=4)
        plain_log_axis(count_ax, "y")              # points: no bars on a log axis
        count_ax.set_ylabel("units × seeds")
        count_ax.set_xlabel(f"homogeneity index ({definition.replace('_', ' ')} definition)")
        count_ax.grid(True, alpha=0.3)
    out.figure("bias_by_homogeneity", fig,
               f"Mean error of county (left) and ED (right) totals by homogeneity index for each "
               f"ε (top; bars: 95% intervals; lines break at indices no unit has) and how many "
               f"results each index has (bottom, log scale); index as defined by "
               f"'{definition}' (authors: 24 − the level "
               f"combinations present; zero_cells: empty cells of the 24). Diverse units (low "
               f"index) are undercounted, the more so the smaller ε; homogeneous units (high "
               f"index, the majority of EDs) are overcounted. Nonnegativity raises empty cells, "
               f"and with state totals invariant the excess comes out of the populated cells.")


def figure_comparison(out: Output, table: pd.DataFrame, epsilon: float) -> None:
    """Mean |error| of each post-processor of the same measurements, log scale."""
    methods = list(dict.fromkeys(table["method"]))
    panels = [("county", "total"), ("enum_dist", "total"), ("enum_dist", "va_hisp_race")]
    fig, axes = new_figure(len(panels), 1, width=4.4, height=4.0)
    for ax, (level, query) in zip(axes[0], panels):
        part = table[(table["level"] == level) & (table["query"] == query)]
        part = part.set_index("method").reindex(methods)
        values = part["mean_abs"].to_numpy()
        shown = np.where(values > 1e-6, values, np.nan)        # 0 up to float rounding
        for i, (method, value) in enumerate(zip(methods, shown)):
            ax.plot([i], [value], "o", ms=7, color=method_style(method)["color"])
        ax.set_yscale("log")                       # points: no bars on a log axis
        floor = np.nanmin(shown) / 3 if np.isfinite(shown).any() else 0.1
        ax.set_ylim(bottom=floor, top=np.nanmax(shown) * 3 if np.isfinite(shown).any()
                    else 1.0)
        ax.set_xlim(-0.6, len(methods) - 0.4)
        ax.set_xticks(range(len(methods)), methods, rotation=40, ha="right", fontsize=8)
        ax.set_ylabel("mean |error|, persons (log scale)")
        ax.set_title(f"{level}: {query}", fontsize=10)
        ax.grid(True, axis="y", which="both", alpha=0.3)
        for i, value in enumerate(values):
            ax.annotate(format_number(value) if value > 1e-6 else "0 (exact)",
                        (i, value if value > 1e-6 else floor), ha="center", va="bottom",
                        fontsize=7, textcoords="offset points", xytext=(0, 5))
    out.figure("comparison", fig,
               f"Mean absolute error of each post-processor of the same ε = {epsilon:g} "
               f"measurements (bottom-up: its own measurement at the same ε), one point each on a "
               f"log scale. "
               f"Clipping the noisy detailed cells inflates every empty cell, so its totals are "
               f"far off; least squares is consistent but leaves negative cells; TopDown is "
               f"consistent, nonnegative and holds the invariants.")
