"""Gong & Meng's sex × age-group table: four releases compared, and the samplers' diagnostics.

The confidential table (``examples/data/gong_sex_age.csv``: 46 cells, 256 persons) is released
under the invariants total, female total and voting-age total, as nonnegative integers.
docs/conditional_sampling.md compares the average L1 and L2 distance to the confidential table of

(a) raw double geometric noise with ε = 1 per cell;
(b) (a) followed by the nonnegative L2 projection onto S* (a continuous QP: not integers);
(c) the conditional mechanism with ε = 0.5 per cell (a draw of (d) conditioned on S*), drawn by
    the default lattice sampler — and, as a cross-check, by the MIS;
(d) raw double geometric noise with ε = 0.5 per cell.

Each replicate is one independent release. The conditional releases of (c) are the final states of
independent chains started at s* (the lattice sampler runs all of them in one vectorized call;
the MIS check runs one chain per replicate).

It also draws the diagnostics: the MIS acceptance rate against ε̃, trace plots of one cell in I and
one in I^c for both samplers, and per-cell effective samples per second.

Run::

    python examples/gong_sex_age.py --out gong-out --replicates 200 --seed 2020 [--json]

Outputs in ``--out``: ``comparison.csv`` (the table), ``replicates.csv``, ``comparison.png``,
``acceptance.png``, ``traces_mis.png``, ``traces_lattice.png``, ``ess.png``, ``summary.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from hierarchy.mechanisms import sample_two_sided_geometric
from hierarchy.randomness import Randomness
from postproc.methods.sampling import (
    acceptance_curve,
    plot_acceptance_curve,
    plot_ess,
    plot_traces,
    read_count_table,
    sample_lattice,
    sample_mis,
    table_target,
)

HERE = Path(__file__).resolve().parent
DATA_CANDIDATES = [HERE / "data" / "gong_sex_age.csv"]
INVARIANTS = ["total", "marginal(sex)", "marginal(voting_age)"]
METHODS = {
    "a": "(a) raw geometric, ε = 1",
    "b": "(b) (a) + nonnegative L2 projection onto S*",
    "c": "(c) conditional mechanism, ε = 0.5 (lattice sampler)",
    "c_mis": "(c') conditional mechanism, ε = 0.5 (MIS check)",
    "d": "(d) raw geometric, ε = 0.5",
}


def find_data(path: str | None) -> Path:
    for candidate in ([Path(path)] if path else DATA_CANDIDATES):
        if candidate.is_file():
            return candidate
    raise SystemExit(f"{path or DATA_CANDIDATES[0]} not found; pass --table CSV")


def project_nonnegative(noisy: np.ndarray, A: np.ndarray, a: np.ndarray) -> np.ndarray:
    """Rows of ``noisy`` projected in L2 onto ``{s ≥ 0, A s = a}`` (one small QP each)."""
    import cvxpy as cp

    n = noisy.shape[1]
    y = cp.Parameter(n)
    x = cp.Variable(n)
    problem = cp.Problem(cp.Minimize(cp.sum_squares(x - y)), [A @ x == a, x >= 0])
    out = np.empty_like(noisy, dtype=np.float64)
    for i, row in enumerate(noisy):
        y.value = row.astype(np.float64)
        problem.solve(solver=cp.CLARABEL)
        out[i] = np.maximum(x.value, 0.0)
    return out


def distances(released: np.ndarray, truth: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    error = released - truth
    return np.abs(error).sum(axis=1), np.sqrt((error * error).sum(axis=1))


def compare(target, *, replicates: int, rng: Randomness, sweeps: int, mis_draws: int
            ) -> tuple[pd.DataFrame, dict]:
    """Per-replicate L1/L2 distances of every method, and timings."""
    truth = target.centre
    n = target.n
    timings = {}
    t0 = time.perf_counter()
    raw1 = truth + sample_two_sided_geometric(1.0, (replicates, n), rng.child(1))
    raw05 = truth + sample_two_sided_geometric(0.5, (replicates, n), rng.child(2))
    timings["raw"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    projected = project_nonnegative(raw1, target.A.astype(float), target.a.astype(float))
    timings["projection"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    lattice = sample_lattice(target, draws=sweeps, burn_in=0, thin=sweeps, chains=replicates,
                             rng=rng.child(3), diagnostics=False)
    timings["conditional_lattice"] = time.perf_counter() - t0
    conditional = lattice.final_states
    t0 = time.perf_counter()
    mis = np.empty((replicates, n), dtype=np.int64)
    mis_acceptance = []
    for r in range(replicates):
        res = sample_mis(target, draws=mis_draws, burn_in=0, thin=mis_draws,
                         proposal_epsilon=0.65, rng=rng.child(4, r), diagnostics=False)
        mis[r] = res.released
        mis_acceptance.append(res.acceptance_rate)
    timings["conditional_mis"] = time.perf_counter() - t0
    releases = {"a": raw1, "b": projected, "c": conditional, "c_mis": mis, "d": raw05}
    frames = []
    for key, values in releases.items():
        l1, l2 = distances(values, truth)
        in_s = (np.all(np.abs(values @ target.A.T - target.a) < 1e-6, axis=1)
                & np.all(values >= -1e-9, axis=1))
        integer = np.all(values == np.round(values), axis=1)
        frames.append(pd.DataFrame({"method": key, "replicate": np.arange(replicates),
                                    "L1": l1, "L2": l2, "in_S": in_s, "integer": integer}))
    extra = {"timings": timings, "mis_acceptance_mean": float(np.mean(mis_acceptance)),
             "lattice_acceptance": lattice.acceptance_rate}
    return pd.concat(frames, ignore_index=True), extra


def summarize(per_replicate: pd.DataFrame) -> pd.DataFrame:
    g = per_replicate.groupby("method", sort=False)
    table = pd.DataFrame({
        "method": [METHODS[k] for k in g.groups],
        "L1_mean": g["L1"].mean().to_numpy(), "L1_se": g["L1"].sem().to_numpy(),
        "L2_mean": g["L2"].mean().to_numpy(), "L2_se": g["L2"].sem().to_numpy(),
        "in_S_star": g["in_S"].mean().to_numpy(), "integer": g["integer"].mean().to_numpy(),
        "replicates": g.size().to_numpy()})
    table.insert(0, "key", list(g.groups))
    return table


def plot_comparison(per_replicate: pd.DataFrame, path: Path, replicates: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = list(dict.fromkeys(per_replicate["method"]))
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.8), dpi=120)
    for ax, metric in zip(axes, ["L1", "L2"]):
        data = [per_replicate.loc[per_replicate.method == k, metric].to_numpy() for k in keys]
        ax.boxplot(data, showmeans=True, meanprops={"marker": "D", "markerfacecolor": "white",
                                                    "markeredgecolor": "k", "markersize": 5})
        ax.set_xticks(range(1, len(keys) + 1))
        ax.set_xticklabels([k.replace("_mis", "'") for k in keys])
        ax.set_ylabel(f"{metric} distance to the confidential table")
        ax.set_title(f"{metric} distance ({replicates} releases; ◇ = mean)")
        ax.grid(alpha=0.3, axis="y")
    legend = "\n".join(METHODS[k] for k in keys)
    fig.text(0.5, 0.01, legend, ha="center", va="bottom", fontsize=8)
    fig.tight_layout(rect=(0, 0.17, 1, 1))
    fig.savefig(path)
    plt.close(fig)


def diagnostics(target, out: Path, rng: Randomness) -> dict:
    """Acceptance curve, trace plots and ESS of both samplers; returns a summary."""
    eps = target.parameter
    grid = eps * np.array([0.8, 0.9, 1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.8, 2.0])
    curve = acceptance_curve(target, grid, rng=rng.child(10), proposals=200_000)
    plot_acceptance_curve(curve, str(out / "acceptance.png"), epsilon=eps,
                          title="MIS acceptance rate against ε̃ (Gong & Meng table, ε = 0.5)")
    mis = sample_mis(target, draws=1_000_000, thin=10, proposal_epsilon=curve.best,
                     rng=rng.child(11))
    lattice = sample_lattice(target, draws=20_000, chains=4, rng=rng.child(12))
    free, basic = mis.settings["free"], mis.settings["basic"]
    # one cell in I (the largest count among them) and one in I^c
    cell_i = int(np.asarray(free)[np.argmax(target.centre[free])])
    cell_ic = int(basic[0])
    labels = [f"{target.cell_labels[cell_i]} (in I)", f"{target.cell_labels[cell_ic]} (in I^c)"]
    plot_traces(mis, [cell_i, cell_ic], str(out / "traces_mis.png"), labels=labels,
                max_points=5000, title=f"MIS traces (ε̃ = {curve.best:.3g}, every 10th "
                                       f"iteration, first 50,000 iterations)")
    plot_traces(lattice, [cell_i, cell_ic], str(out / "traces_lattice.png"), labels=labels,
                max_points=2000, title="Lattice sampler traces (chain 0, first 2,000 sweeps)")
    plot_ess([mis, lattice], str(out / "ess.png"), labels=["MIS", "lattice (4 chains)"],
             title="Effective samples per second of sampling, per cell")
    return {
        "acceptance_curve": curve.to_dict(),
        "mis": {"proposal_epsilon": curve.best, "acceptance_rate": mis.acceptance_rate,
                "proposals_per_second": mis.proposals_per_second, "ess_min": mis.ess_min,
                "ess_median": mis.ess_median, "ess_min_per_second": mis.ess_per_second,
                "seconds": mis.seconds, "free": free, "basic": basic},
        "lattice": {"acceptance_rate": lattice.acceptance_rate, "ess_min": lattice.ess_min,
                    "ess_median": lattice.ess_median,
                    "ess_min_per_second": lattice.ess_per_second, "seconds": lattice.seconds,
                    "chains": 4},
        "trace_cells": {"in_I": target.cell_labels[cell_i], "in_Ic": target.cell_labels[cell_ic]},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--table", help="the CSV (default: examples/data/gong_sex_age.csv)")
    parser.add_argument("--out", default="gong-sex-age-out", help="output directory")
    parser.add_argument("--replicates", type=int, default=200, help="releases per method")
    parser.add_argument("--seed", type=int, default=2020, help="simulation seed")
    parser.add_argument("--sweeps", type=int, default=500,
                        help="lattice sweeps per conditional release (default 500)")
    parser.add_argument("--mis-draws", type=int, default=20_000,
                        help="MIS iterations per conditional release of the check (c')")
    parser.add_argument("--no-diagnostics", action="store_true",
                        help="skip the acceptance curve, traces and ESS figures")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = parser.parse_args(argv)
    if args.replicates < 2:
        parser.error("--replicates must be at least 2")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    table = read_count_table(find_data(args.table))
    target = table_target(table, INVARIANTS, epsilon=0.5)
    rng = Randomness.simulation(args.seed)
    per_replicate, extra = compare(target, replicates=args.replicates, rng=rng,
                                   sweeps=args.sweeps, mis_draws=args.mis_draws)
    summary_table = summarize(per_replicate)
    summary_table.to_csv(out / "comparison.csv", index=False)
    per_replicate.to_csv(out / "replicates.csv", index=False)
    plot_comparison(per_replicate, out / "comparison.png", args.replicates)
    summary = {"table": str(table.source), "cells": table.n, "invariants": INVARIANTS,
               "replicates": args.replicates, "seed": args.seed,
               "randomness": rng.provenance(),
               "comparison": summary_table.to_dict("records"), **extra}
    if not args.no_diagnostics:
        summary["diagnostics"] = diagnostics(target, out, rng)
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=float))
    if args.json:
        print(json.dumps(summary, indent=2, default=float))
    else:
        print(f"{rng.label}\n")
        show = summary_table.drop(columns=["key"])
        print(show.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
        print(f"\noutputs in {out}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
