"""What makes TopDown's county totals less accurate on our synthetic 1940 data than on the real
one: how many of a county's cells hold someone.

On the default synthetic data our TopDown's county total error is 25–32 % above Petti &
Flaxman's at every ε (``docs/experiments.md``), where the ED totals' is within 0–13 %. The
paper's own summary of the real 1940 counts (``results_dp_counts.json``: mean persons per county
and per populated votingage × hispanic × race cell) gives 8.37 populated cells of 24 per county;
the default synthesizer makes 10.8. This script runs the same TopDown (E2E budget, geometric
noise, the E2E spec) on synthetic data of several compositions
(:class:`hierarchy.synth.Composition`: the same persons, EDs and counties, mixed more or less)
and sets the county and ED total errors beside the number of populated cells per county::

    python examples/petti_flaxman_composition.py --out DIR              # ~12 min on 2 cores
    python examples/petti_flaxman_composition.py --out DIR --persons 3000000 --seeds 1 2

It writes ``DIR/composition_sweep.csv`` (one row per composition and ε: the composition's
populated cells and cell sizes, and the median absolute error, RMSE and 95th percentile of the
absolute error of county and ED totals, pooled over the seeds as the paper pools them, beside
the paper's) and ``DIR/composition_sweep.png``. Every composition is run at ε = 1; the named
ones (:data:`hierarchy.synth.COMPOSITIONS`) at the paper's whole ε grid (the record in
``benchmarks/experiments/petti_flaxman_composition/`` was made before ``counties_eds_1940``
existed, in 8 min 48 s).

Simulation only: seeded synthetic data and noise, no release.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from hierarchy.queries import e2e_workload
from hierarchy.schema import E2E_1940
from hierarchy.synth import COMPOSITIONS, Composition
from invariants.spec import Spec
from postproc.apps.experiments import _papers as paper
from postproc.apps.experiments._common import synthetic_truth
from postproc.apps.experiments.petti_flaxman import FULL, LEVELS, measure_topdown

#: Compositions beside the named ones, each a knob of :class:`Composition` turned one way:
#: fewer or more cosmopolitan EDs, a smaller spread part, a flatter or more national one,
#: counties more or less unlike their state.
SWEEP = {
    "no cosmopolitan EDs": Composition(cosmopolitan_share=0.0),
    "cosmopolitan share 0.005": Composition(cosmopolitan_share=0.005),
    "cosmopolitan share 0.01": Composition(cosmopolitan_share=0.01),
    "spread at most 0.05": Composition(cosmopolitan_blend=(0.001, 0.05)),
    "spread 0.01-0.2": Composition(cosmopolitan_blend=(0.01, 0.2)),
    "spread national (flatten 1)": Composition(cosmopolitan_flatten=1.0),
    "county concentration 5": Composition(county_concentration=5.0),
    "county concentration 80": Composition(county_concentration=80.0),
}
#: The levels whose totals are compared (the state's are invariant).
COMPARED = ("county", "enum_dist")


def composition_stats(truth, workload) -> dict[str, float]:
    """Per compared level: populated votingage × hispanic × race cells per unit (mean) and the
    median persons of a populated cell — the statistics the paper's counts give for the real
    data (:func:`postproc.apps.experiments._papers.populated_cells`)."""
    stats = {}
    for level in COMPARED:
        counts = truth.counts[LEVELS.index(level)]
        cells = np.asarray(workload["va_hisp_race"].answer(counts))
        populated = cells > 0
        stats[f"{level}_populated_cells"] = float(populated.sum(axis=1).mean())
        stats[f"{level}_populated_cell_median"] = float(np.median(cells[populated]))
    return stats


def total_errors(truth, epsilon: float, seeds, executor) -> dict[str, np.ndarray]:
    """TopDown's errors of the compared levels' totals at ``epsilon``, pooled over ``seeds``
    (each seed's run :func:`~postproc.apps.experiments.petti_flaxman.measure_topdown` on the
    stream the study uses for that ε and seed)."""
    spec = Spec.e2e(LEVELS)
    stream = FULL["epsilons"].index(epsilon) if epsilon in FULL["epsilons"] else 99
    errors: dict[str, list[np.ndarray]] = {level: [] for level in COMPARED}
    for seed in seeds:
        _, result = measure_topdown(truth, epsilon, seed, stream=stream, spec=spec,
                                    executor=executor)
        for level in COMPARED:
            li = LEVELS.index(level)
            exact = np.asarray(truth.counts[li].sum(axis=1)).ravel()
            errors[level].append(np.asarray(result.histograms[li]).sum(axis=1).ravel() - exact)
    return {level: np.concatenate(e) for level, e in errors.items()}


def sweep(compositions: dict[str, Composition], *, persons: int, seeds, grid=(1.0,),
          full_grid=FULL["epsilons"], workers: int = 2, states: int | None = None,
          log=print) -> pd.DataFrame:
    """One row per composition and ε: the composition's statistics and the total errors'
    median absolute error, RMSE and 95th percentile of the absolute error per compared level,
    with the paper's beside them. The named compositions (of :data:`COMPOSITIONS`) run at
    ``full_grid``, the others at ``grid``; ``states`` keeps that many county-rich states (as
    the experiment's quick variant does)."""
    from postproc.infra.executors import get_executor

    workload = e2e_workload(E2E_1940)
    rows = []
    with get_executor("process", workers=workers) as executor:
        for name, composition in compositions.items():
            truth = synthetic_truth({**FULL, "persons": persons, "states": states,
                                     "composition": composition})
            stats = composition_stats(truth, workload)
            epsilons = full_grid if composition.name() else grid
            for epsilon in epsilons:
                errors = total_errors(truth, float(epsilon), seeds, executor)
                row = {"composition": name, "epsilon": float(epsilon), **stats}
                for level, e in errors.items():
                    a = np.abs(e)
                    row |= {f"{level}_mae": float(np.median(a)),
                            f"{level}_rmse": float(np.sqrt(np.mean(a * a))),
                            f"{level}_p95": float(np.percentile(a, 95)),
                            f"{level}_mae_paper": paper.TC_MAE[level].get(float(epsilon)),
                            f"{level}_rmse_paper": paper.TC_RMSE[level].get(float(epsilon)),
                            f"{level}_p95_paper": paper.TC_P95[level].get(float(epsilon))}
                rows.append(row)
                log(f"{name}: populated cells per county {stats['county_populated_cells']:.2f}"
                    f"; ε = {epsilon:g}: county MAE {row['county_mae']:g} (paper "
                    f"{row['county_mae_paper']}), ED MAE {row['enum_dist_mae']:g} (paper "
                    f"{row['enum_dist_mae_paper']})")
    return pd.DataFrame(rows)


def figure(table: pd.DataFrame, path: Path) -> None:
    """County total MAE at ε = 1 against populated cells per county (every composition, the
    real counties' point from the paper), and against ε for the named compositions and the
    paper."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.8),
                                      gridspec_kw={"width_ratios": [1.25, 1]})
    at_1 = table[table.epsilon == 1.0].sort_values("county_populated_cells").reset_index()
    left.scatter(at_1.county_populated_cells, at_1.county_mae, color="tab:blue",
                 label="TopDown, one synthetic composition each")
    left.scatter([paper.populated_cells("county")], [paper.TC_MAE["county"][1.0]], marker="*",
                 s=220, color="tab:red", zorder=3, label="the paper (real 1940 counties)")
    key = []
    for i, row in at_1.iterrows():
        left.annotate(str(i + 1), (row.county_populated_cells, row.county_mae), fontsize=8,
                      xytext=(0, 6 if i % 2 else -12), textcoords="offset points",
                      ha="center")
        key.append(f"{i + 1}  {row.composition}")
    left.text(1.02, 0.0, "\n".join(key), transform=left.transAxes, fontsize=7.5,
              va="bottom", family="monospace")
    left.set(xlabel="populated votingage × hispanic × race cells per county (of 24)",
             ylabel="median |error| of county totals", title="ε = 1, pooled over the seeds")
    left.legend(fontsize=8, loc="upper left")
    left.margins(y=0.08)
    for name, style in (("default", "o-"), ("counties_1940", "s-")):
        rows = table[table.composition == name].sort_values("epsilon")
        if len(rows) > 1:
            right.plot(rows.epsilon, rows.county_mae, style, label=f"TopDown, {name}")
    right.plot(list(paper.TC_MAE["county"]), list(paper.TC_MAE["county"].values()), "k*--",
               label="the paper (real 1940)")
    right.set(xscale="log", yscale="log", xlabel="ε", ylabel="median |error| of county totals",
              title="county totals against ε")
    epsilons = sorted(set(table.epsilon))
    right.set_xticks(epsilons, [f"{e:g}" for e in epsilons])
    right.minorticks_off()
    right.legend(fontsize=8)
    fig.tight_layout()
    fig.subplots_adjust(wspace=0.62)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--persons", type=int, default=20_000_000,
                        help="persons of the synthetic data (default 20,000,000: 468 counties)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--named-only", action="store_true",
                        help="only the named compositions (hierarchy.synth.COMPOSITIONS)")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    compositions = dict(COMPOSITIONS) if args.named_only else {**COMPOSITIONS, **SWEEP}
    table = sweep(compositions, persons=args.persons, seeds=args.seeds, workers=args.workers,
                  log=lambda m: print(m, file=sys.stderr))
    table.to_csv(out / "composition_sweep.csv", index=False)
    figure(table, out / "composition_sweep.png")
    print(f"wrote {out / 'composition_sweep.csv'} and {out / 'composition_sweep.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
