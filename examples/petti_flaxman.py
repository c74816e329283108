"""Petti & Flaxman (2020): TopDown on synthetic 1940-style data over ε ∈ {0.25, …, 8} and four
seeds — MAE and EPL per level for the total (TC) and va_hisp_race (SC) counts, the error
distribution with EPL(x), the MAE-vs-EPL trade-off against simple random samples of 5–95 % and
the SRS fraction each ε matches (jointly on error and EPL), the bias of county and ED totals by
homogeneity index, and our numbers beside the paper's (paper_comparison.csv).

The same code as ``postproc experiment petti_flaxman``: it writes CSV tables, PNG figures and
``summary.json`` into the output directory, and with ``--report`` an HTML page of them.

    python examples/petti_flaxman.py                     # full analysis → experiments/petti_flaxman
    python examples/petti_flaxman.py --quick --out /tmp/petti_flaxman-quick   # seconds

Everything runs in simulation mode (seeded, reproducible; never a release).
"""

import sys

from postproc.cli import main

NAME = "petti_flaxman"

if __name__ == "__main__":
    # The same code as `postproc experiment petti_flaxman` (options: --out DIR, --quick, --report).
    sys.exit(main(["experiment", NAME, *sys.argv[1:]]))
