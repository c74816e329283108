"""Petti & Flaxman (2020): TopDown on synthetic 1940-style data over ε ∈ {0.25, …, 8} and two
seeds — MAE and EPL per level for the total (TC) and va_hisp_race (SC) counts, the error
distribution with EPL(x), the MAE-vs-EPL trade-off against simple random samples of 5–95 % and
the closest SRS fraction of each ε, and the bias of ED totals by homogeneity index.

The same code as ``postproc experiment petti_flaxman``: it writes CSV tables, PNG figures and
``summary.json`` into the output directory, and with ``--report`` an HTML page of them.

    python examples/petti_flaxman.py                     # full analysis → experiments/petti_flaxman
    python examples/petti_flaxman.py --quick --out /tmp/petti_flaxman-quick   # seconds

Everything runs in simulation mode (seeded, reproducible; never a release).
"""

from __future__ import annotations

import argparse
import sys

from postproc.experiments import run_experiment
from postproc.report import write_report

NAME = "petti_flaxman"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help=f"output directory (default experiments/{NAME})")
    parser.add_argument("--quick", action="store_true", help="small, fast variant")
    parser.add_argument("--report", action="store_true", help="also write report.html")
    args = parser.parse_args(argv)
    out = args.out or f"experiments/{NAME}" + ("-quick" if args.quick else "")
    summary = run_experiment(NAME, out, quick=args.quick)
    for key, value in summary["headline"].items():
        print(f"  {key}: {value:.4g}" if isinstance(value, float) else f"  {key}: {value}")
    if args.report:
        print(f"report: {write_report(out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
