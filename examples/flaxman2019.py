"""Flaxman (2019): empirical privacy loss (EPL) of GDPC, ADPC (P = 4) and RDPC (J = 3) over a
range of ε on Flaxman's synthetic population; residual distributions and EPL curves; and the D/D′
experiment (one person moved between two leaves; each mechanism run many times on both datasets;
the direct EPL estimator).

The same code as ``postproc experiment flaxman2019``: it writes CSV tables, PNG figures and
``summary.json`` into the output directory, and with ``--report`` an HTML page of them.

    python examples/flaxman2019.py                     # full analysis → experiments/flaxman2019
    python examples/flaxman2019.py --quick --out /tmp/flaxman2019-quick   # seconds

Everything runs in simulation mode (seeded, reproducible; never a release).
"""

import sys

from postproc.cli import main

NAME = "flaxman2019"

if __name__ == "__main__":
    # The same code as `postproc experiment flaxman2019` (options: --out DIR, --quick, --report).
    sys.exit(main(["experiment", NAME, *sys.argv[1:]]))
