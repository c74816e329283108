"""Clark & Dajani (2019): L1 and L2 error of the bottom-up mechanism (geometric noise on every
detailed ED cell, margins as sums) against ε, raw and calibrated to published state totals.

The same code as ``postproc experiment clark_dajani``: it writes CSV tables, PNG figures and
``summary.json`` into the output directory, and with ``--report`` an HTML page of them.

    python examples/clark_dajani.py                     # full analysis → experiments/clark_dajani
    python examples/clark_dajani.py --quick --out /tmp/clark_dajani-quick   # seconds

Everything runs in simulation mode (seeded, reproducible; never a release).
"""

import sys

from postproc.cli import main

NAME = "clark_dajani"

if __name__ == "__main__":
    # The same code as `postproc experiment clark_dajani` (options: --out DIR, --quick, --report).
    sys.exit(main(["experiment", NAME, *sys.argv[1:]]))
