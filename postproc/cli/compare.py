"""``postproc compare``: several post-processors on the same measurements, one table.

``postproc compare CONFIG --methods topdown,sampling,hay,noisy [--out DIR]`` reads the
configuration and its data once, measures once, runs each named post-processor on the same
measurements (those that keep invariants with the config's spec, the others without: the table
marks them unconstrained) and writes ``compare.csv``, ``compare.json``, ``compare_epl.png`` and
``compare.html`` (see :func:`postproc.apps.runs.directories.run_compare` and
:mod:`postproc.evaluation.compare`). In release mode they go under
``DIR/confidential/`` and nothing computed from the data is printed; in simulation mode the table
is printed as well.
"""

from __future__ import annotations

import argparse
import sys

from postproc.cli._confidential import add_show_confidential
from postproc.cli._epl_options import add_epl_arguments, epl_options

ORDER = 27


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", help="compare post-processors on the same measurements",
                       description="Read the config's data once, measure once, run each "
                                   "method on the same measurements and write one table (per "
                                   "method, level and query: n, MAE = median |error|, mean "
                                   "|error|, RMSE, EPL with its 95% interval) as CSV and JSON, "
                                   "an EPL figure and an HTML page. Release mode: under "
                                   "DIR/confidential/ only, nothing printed.")
    p.add_argument("config", help="run configuration (TOML; see examples/e2e1940.toml)")
    p.add_argument("--methods", required=True, metavar="A,B,...",
                   help="registered post-processors, comma-separated (postproc methods lists "
                        "them), e.g. topdown,sampling,hay,noisy")
    p.add_argument("--out", metavar="DIR",
                   help="output directory (default: the config's [output] directory + "
                        "'-compare'); a new or empty directory, or an earlier comparison's")
    add_epl_arguments(p)          # the direct estimator needs repeated runs on neighbouring
    # datasets, which one measurement cannot give: improved (default) or published
    p.add_argument("--no-progress", action="store_true", help="no progress on stderr")
    add_show_confidential(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``postproc compare``."""
    from postproc.apps.runs.config import load_config
    from postproc.apps.runs.directories import run_compare
    from postproc.evaluation.compare import format_pivot, parse_methods

    methods = parse_methods(args.methods)          # a typo fails before the data are read
    epl_method, options = epl_options(args)
    config = load_config(args.config)
    done = run_compare(config, methods, out=args.out, epl_method=epl_method,
                       progress=not args.no_progress and sys.stderr.isatty(),
                       log=lambda message: print(message, file=sys.stderr),
                       epl_options=options or None, show_confidential=args.show_confidential)
    if done.release:
        print(f"release mode: the comparison is in {done.files[0].parent} (CONFIDENTIAL - "
              "computed from the confidential data; never publish it)")
        return 0
    print(format_pivot(done.table))
    undefined = int((done.table["epl_note"] != "").sum())
    if undefined:
        print(f"\nEPL undefined in {undefined} of {len(done.table)} rows: the epl_note column "
              "of compare.csv says why (e.g. every error 0 where the totals are invariant)")
    print(f"\nwrote {', '.join(p.name for p in done.files)} in {done.directory} (computed "
          "from the confidential data: simulation mode)")
    return 0
