"""``postproc gamma``: what conditioning a table's noise on its invariants costs in privacy.

``postproc gamma --table CSV [--count-column count] --invariant EXPR [--invariant EXPR ...]
--epsilon E [--sensitivity S] [--outputs nonnegative|integers] [--levels COLUMN=L1,...]
[--derived COLUMN=SOURCE] [--json]``

Gong & Meng (2020)'s γ of the conditioned mechanism ``postproc mis`` releases — per-cell
double-geometric noise of parameter ``z = E / S`` conditioned on the invariants — exact by
enumerating the conforming tables when they are few (:data:`~postproc.methods.sampling.gamma.
MAX_TABLES`), else the theorem's bound γ = 1, said so (``docs/conditional_sampling.md``, "What
conditioning costs: γ"). γ depends only on the invariants' published values, so it may be
published. ``--json`` prints one object (key ``gamma``, and ``method``: exact or bound).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

ORDER = 41


def register(subparsers: Any) -> None:
    """Add ``gamma`` to the ``postproc`` parser."""
    from postproc.cli.mis import add_table_options

    parser = subparsers.add_parser(
        "gamma", help="Gong & Meng's gamma: the privacy cost of conditioning on invariants",
        description="The smallest gamma with P(M*(x) in B) <= exp((1 + gamma) k eps) "
                    "P(M*(x') in B) for invariant-conforming tables at the nearest distance k, "
                    "where M* is per-cell double-geometric noise (z = eps / sensitivity) "
                    "conditioned on the invariants (Gong & Meng 2020, Theorem 2.1): exact by "
                    "enumeration for small tables, else the bound gamma = 1. "
                    "See docs/conditional_sampling.md.")
    add_table_options(parser)
    parser.add_argument("--epsilon", type=float, required=True, metavar="E",
                        help="the per-cell budget the noise was calibrated to")
    parser.add_argument("--sensitivity", type=int, default=1, metavar="S",
                        help="the sensitivity that budget assumes: noise z = E/S (default 1, "
                             "adding or removing a person; 2 as in Gong & Meng's Example 4.1)")
    parser.add_argument("--outputs", choices=["nonnegative", "integers"], default="nonnegative",
                        help="the outputs the invariants allow: nonnegative tables (as postproc "
                             "mis releases; default) or any integers")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``postproc gamma``."""
    from postproc.cli.mis import table_levels
    from postproc.gate import data_errors
    from postproc.methods.sampling.count_table import complete_table, read_count_table
    from postproc.methods.sampling.gamma import gamma_of_table

    levels, derived = table_levels(args)
    with data_errors(release=True):
        table = complete_table(read_count_table(args.table, count_column=args.count_column),
                               levels=levels, derived=derived)
        gamma = gamma_of_table(table, args.invariant, epsilon=args.epsilon,
                               sensitivity=args.sensitivity, outputs=args.outputs)
    if args.json:
        print(json.dumps(gamma.to_dict(), indent=2, allow_nan=False))
        return 0
    print(f"gamma = {gamma.gamma:g} ({gamma.method}): the conditioned mechanism is "
          f"(1 + gamma) k eps = {1 + gamma.gamma:g} k x {gamma.epsilon:g}-DP for "
          f"invariant-conforming tables at distance k")
    print(gamma.reason)
    return 0
