"""Clark & Dajani (2019): L1 and L2 error of the bottom-up mechanism (geometric noise on every
detailed ED cell, margins as sums) against ε, raw and calibrated to published state totals.

The same code as ``postproc experiment clark_dajani``: it writes CSV tables, PNG figures and
``summary.json`` into the output directory, and with ``--report`` an HTML page of them.

    python examples/clark_dajani.py                     # full analysis → experiments/clark_dajani
    python examples/clark_dajani.py --quick --out /tmp/clark_dajani-quick   # seconds

Everything runs in simulation mode (seeded, reproducible; never a release).
"""

from __future__ import annotations

import argparse
import sys

from postproc.experiments import run_experiment
from postproc.report import write_report

NAME = "clark_dajani"


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
