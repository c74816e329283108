"""Is our lower SC EPL the cells' sizes? The pooled SC errors reweighted to the real 1940 cells'.

The paper's EPL estimator (``published_epl``) on stratified counts (SC: the votingage × hispanic
× race cells with a person in the exact or the TopDown data) pools the errors of cells of very
different sizes, and the loss it finds depends on that mixture (``docs/experiments.md``, "Why
the SC EPL needs care"). Our synthetic cells are larger than the real ones at EDs (median 116
persons against 88, from the paper's ``results_dp_counts.json``) and smaller at counties (40
against 47). This script runs the study's TopDown (E2E budget, geometric noise and spec, seeds
1–4 on the experiment's streams) at one ε, pools each level's SC errors, and resamples them so
that the cells' exact sizes have the real cells' median and 95th percentile (half below the
median, 45 % between, 5 % above; the cells empty in the exact data keep their share), then
applies the paper's estimator::

    python examples/petti_flaxman_sc_sizes.py                     # 20M persons, ε = 1, ~2 min
    python examples/petti_flaxman_sc_sizes.py --composition counties_1940 --epsilon 2

Simulation only: seeded synthetic data and noise, no release.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import pandas as pd

from hierarchy.queries import e2e_workload
from hierarchy.schema import E2E_1940
from invariants.spec import Spec
from postproc.apps.experiments import _papers as paper
from postproc.apps.experiments._common import synthetic_truth
from postproc.apps.experiments.petti_flaxman import FULL, LEVELS, measure_topdown
from postproc.evaluation.epl import published_epl

#: The levels compared (the paper's SC EPL at counties and EDs).
COMPARED = ("county", "enum_dist")
#: Shares of the exact > 0 cells below the real median, between it and the 95th percentile,
#: and above.
TARGET = (0.5, 0.45, 0.05)


def sc_errors(truth, epsilon: float, seeds) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per compared level, the pooled SC errors over ``seeds`` and the cells' exact counts (the
    cells with a person in the exact or the TopDown data: the paper's selection)."""
    spec = Spec.e2e(LEVELS)
    cells = e2e_workload(E2E_1940)["va_hisp_race"]
    exact = {lv: np.asarray(cells.answer(truth.counts[LEVELS.index(lv)])) for lv in COMPARED}
    pooled: dict[str, list] = {lv: [[], []] for lv in COMPARED}
    stream = FULL["epsilons"].index(epsilon)
    for seed in seeds:
        histograms = measure_topdown(truth, epsilon, seed, stream=stream, spec=spec)[1].histograms
        for lv in COMPARED:
            dp = np.asarray(cells.answer(histograms[LEVELS.index(lv)]))
            chosen = (exact[lv] > 0) | (dp > 0)
            pooled[lv][0].append((dp - exact[lv])[chosen].astype(np.float64))
            pooled[lv][1].append(exact[lv][chosen])
    return {lv: (np.concatenate(e), np.concatenate(x)) for lv, (e, x) in pooled.items()}


def size_weights(sizes: np.ndarray, median: float, p95: float) -> np.ndarray:
    """Resampling probabilities that give the cells with a person the shares :data:`TARGET`
    below ``median``, between it and ``p95`` and above; the empty cells keep their share.

    >>> w = size_weights(np.array([0, 1, 1, 100, 2000]), 50, 1000)
    >>> w.round(3).tolist()
    [0.2, 0.2, 0.2, 0.36, 0.04]
    """
    bins = np.digitize(sizes, [1, median, p95])
    empty = float(np.mean(bins == 0))
    weights = np.where(bins == 0, empty / max(int(np.sum(bins == 0)), 1), 0.0)
    for b, share in enumerate(TARGET, start=1):
        n = int(np.sum(bins == b))
        if n:
            weights[bins == b] = (1 - empty) * share / n
    return weights / weights.sum()


def compare(errors, *, replicates: int = 5, seed: int = 0) -> pd.DataFrame:
    """Per level: the cells' size median and the paper's estimator on the errors as pooled and
    resampled to the real sizes (the median over ``replicates`` resamples), beside the
    paper's SC EPL at that ε."""
    rng = np.random.default_rng(seed)
    rows = []
    for lv, (e, x) in errors.items():
        real = paper.COUNTS[lv]["sc"]
        p = size_weights(x, real["median"], real["p95"])
        picks = [rng.choice(e.size, size=e.size, p=p) for _ in range(replicates)]
        rows.append({"level": lv, "cells": e.size, "size_median": float(np.median(x[x > 0])),
                     "real_size_median": real["median"], "epl_pooled": published_epl(e).epl,
                     "epl_real_sizes": float(np.median([published_epl(e[k]).epl
                                                        for k in picks])),
                     "resampled_size_median": float(np.median(x[picks[0]][x[picks[0]] > 0]))})
    return pd.DataFrame(rows)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--persons", type=int, default=20_000_000)
    parser.add_argument("--composition", default="default")
    parser.add_argument("--epsilon", type=float, default=1.0, choices=FULL["epsilons"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4])
    args = parser.parse_args(argv)
    truth = synthetic_truth({**FULL, "persons": args.persons, "composition": args.composition})
    table = compare(sc_errors(truth, args.epsilon, args.seeds))
    table["paper_epl"] = [paper.SC_EPL[lv][args.epsilon] for lv in table.level]
    print(table.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
