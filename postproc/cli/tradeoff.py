"""``postproc tradeoff CONFIG --epsilons 0.25 0.5 1 2 4 [--seeds 1 2] [--within 0 1 5]
[--out DIR] [--method NAME] [--json]``: the accuracy–ε curve of a configured table.

Measures the configuration's data at every ε of the grid (the configuration's budget split, its
total replaced) and every seed, and writes L1, L2 and the shares of answers within ±k against ε
per level and query — ``tradeoff.csv``, ``tradeoff_by_seed.csv``, ``tradeoff.png`` and
``tradeoff.json`` (:func:`postproc.apps.runs.tradeoff.run_tradeoff`). A zCDP budget takes its
grid as ``--rhos``. The curve is of the noisy measurements themselves unless ``--method`` names
a registered post-processor to run on each replicate. A simulation tool: a release-mode
configuration is refused.
"""

from __future__ import annotations

import argparse
import math
import sys

ORDER = 28


def positive_number(text: str) -> float:
    """An argparse type: a positive, finite number (a budget).

    Examples
    --------
    >>> positive_number("0.5")
    0.5
    >>> positive_number("0")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be a positive, finite number, not '0'
    """
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a positive, finite number, not {text!r}")
    return value


def non_negative_int(text: str) -> int:
    """An argparse type: an integer ≥ 0 (a seed, or the k of "within ±k").

    Examples
    --------
    >>> non_negative_int("5")
    5
    >>> non_negative_int("-1")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be a non-negative integer, not '-1'
    """
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer, not {text!r}")
    return value


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "tradeoff", help="accuracy against epsilon for a configured table (simulation)",
        description="Measure the config's data at every budget of a grid and every seed (the "
                    "config's budget split, its total replaced) and write L1 (mean |error| per "
                    "answer), L2 (RMSE per answer) and the share of answers within +-k against "
                    "epsilon, per level and query, with their exact expectations for the raw "
                    "noise: tradeoff.csv, tradeoff_by_seed.csv, tradeoff.png, tradeoff.json. "
                    "A simulation tool (seeded noise, errors against the data): a release-mode "
                    "config is refused.")
    p.add_argument("config", help="run configuration (TOML; see examples/e2e1940.toml), in "
                                  "simulation mode")
    grid = p.add_mutually_exclusive_group(required=True)
    grid.add_argument("--epsilons", nargs="+", type=positive_number, metavar="EPS",
                      help="the grid of total epsilons (a pure-DP budget)")
    grid.add_argument("--rhos", nargs="+", type=positive_number, metavar="RHO",
                      help="the grid of total rhos (a zCDP budget)")
    p.add_argument("--seeds", nargs="+", type=non_negative_int, metavar="S",
                   help="simulation seeds, one replicate each (default: the config's seed)")
    p.add_argument("--within", nargs="+", type=non_negative_int, metavar="K",
                   help="the k of 'share of answers within +-k' (default 0 1 5 10)")
    p.add_argument("--method", metavar="NAME",
                   help="post-process each replicate with this registered method (postproc "
                        "methods lists them); default: the noisy measurements themselves")
    p.add_argument("--queries", metavar="Q1,Q2",
                   help="the queries (default: total and every workload query)")
    p.add_argument("--out", metavar="DIR",
                   help="output directory (default: the config's [output] directory + "
                        "'-tradeoff')")
    p.add_argument("--json", action="store_true",
                   help="print tradeoff.json (the mean table's rows and what ran) instead of "
                        "the text table")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``postproc tradeoff``."""
    import json

    from postproc.apps.runs.config import load_config
    from postproc.apps.runs.tradeoff import run_tradeoff
    from postproc.evaluation.tradeoff import DEFAULT_WITHIN

    queries = None if args.queries is None else [q.strip() for q in args.queries.split(",")
                                                 if q.strip()]
    done = run_tradeoff(load_config(args.config), epsilons=args.epsilons, rhos=args.rhos,
                        seeds=args.seeds, within=DEFAULT_WITHIN if args.within is None
                        else args.within, out=args.out, method=args.method, queries=queries,
                        progress=not args.no_progress and sys.stderr.isatty(),
                        log=lambda message: print(message, file=sys.stderr))
    if args.json:
        print(json.dumps(done.document, indent=2, ensure_ascii=False))
        return 0
    table = done.table
    shown = table[table["query"] == "total"] if (table["query"] == "total").any() else table
    columns = [c for c in shown.columns if c in ("epsilon", "rho", "level", "query", "l1", "l2")
               or c.startswith("within_")]
    print("accuracy against the budget (simulation: seeded noise, errors against the data; not "
          "safe for release)")
    print(shown[columns].to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    print(f"\nevery query and the exact expectations in {done.files[0]}")
    return 0
