"""``postproc mis``: release a table of counts by conditional sampling under invariants.

``postproc mis --table CSV [--count-column count] --invariant EXPR [--invariant EXPR ...]
--epsilon E [--mechanism geometric|discrete_gaussian|laplace] [--rho R] [--sampler lattice|mis]
[--proposal-epsilon E~] [--draws N] [--burn-in B] [--thin T] [--chains C] [--seed S]
[--out CSV] [--json]``

The CSV's rows are the cells (cells not in it do not exist); its other columns are the
attributes invariants may name: ``total``, ``marginal(sex)``, ``marginal(voting_age)``, …, each
optionally ``EXPR=V1,V2`` to publish other values than the table's. Without ``--seed`` the
randomness is release mode (cryptographically secure); with it, simulation mode, labelled unsafe.
``--json`` prints one object with ``acceptance_rate``, ``ess`` (``min``, ``median``,
``per_cell``, ``min_per_second``), ``released`` (one object per row: key columns and the released
count), ``invariants_hold`` (checked in exact integer arithmetic), the sampler's settings and the
randomness provenance.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from postproc.errors import PostprocError

ORDER = 40


def register(subparsers: Any) -> None:
    """Add ``mis`` to the ``postproc`` parser."""
    from postproc.sampling.table import DEFAULT_SAMPLER, SAMPLERS

    parser = subparsers.add_parser(
        "mis", help="release a count table by conditional sampling under invariants",
        description="Conditional sampling (Gong & Meng 2020): release one draw of the noise "
                    "mechanism around the table's counts conditioned on the invariants and on "
                    "nonnegative integers. Samplers: 'lattice' (default; Metropolis moves that "
                    "keep the invariants exactly) or 'mis' (the paper's Metropolized "
                    "independent sampler). See docs/conditional_sampling.md.")
    parser.add_argument("--table", required=True, metavar="CSV",
                        help="CSV with one row per cell: key columns and a count column")
    parser.add_argument("--count-column", default="count", metavar="NAME",
                        help="the column of counts (default count)")
    parser.add_argument("--invariant", action="append", required=True, metavar="EXPR",
                        help="an invariant query, e.g. total or 'marginal(sex)'; repeat; "
                             "EXPR=V1,V2 publishes given values")
    parser.add_argument("--mechanism", default="geometric",
                        choices=["geometric", "discrete_gaussian", "laplace"],
                        help="noise mechanism per cell (default geometric)")
    parser.add_argument("--epsilon", type=float, metavar="E",
                        help="per-cell budget (geometric z = E; Laplace scale 1/E)")
    parser.add_argument("--rho", type=float, metavar="R",
                        help="per-cell zCDP budget for the discrete Gaussian (σ² = 1/(2R))")
    parser.add_argument("--sampler", choices=list(SAMPLERS), default=DEFAULT_SAMPLER,
                        help=f"sampler (default {DEFAULT_SAMPLER})")
    parser.add_argument("--proposal-epsilon", type=float, metavar="E~",
                        help="MIS proposal parameter ε̃ (default: tuned for acceptance)")
    parser.add_argument("--draws", type=int, default=20_000, metavar="N",
                        help="iterations (mis) or sweeps (lattice) after burn-in "
                             "(default 20000)")
    parser.add_argument("--burn-in", type=int, metavar="B", help="default draws // 10")
    parser.add_argument("--thin", type=int, default=1, metavar="T", help="keep every T-th state")
    parser.add_argument("--chains", type=int, metavar="C", help="lattice: chains (default 4)")
    parser.add_argument("--seed", type=int, metavar="S",
                        help="simulation mode with this seed (reproducible, NOT safe for a "
                             "release); default release mode")
    parser.add_argument("--out", metavar="CSV", help="also write the released table here")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``postproc mis``."""
    from postproc.sampling.table import release_table

    if args.mechanism == "discrete_gaussian":
        if args.rho is None or args.epsilon is not None:
            raise PostprocError("the discrete Gaussian takes --rho (not --epsilon)")
    elif args.epsilon is None or args.rho is not None:
        raise PostprocError(f"the {args.mechanism} mechanism takes --epsilon (not --rho)")
    if args.sampler != "mis" and args.proposal_epsilon is not None:
        raise PostprocError("--proposal-epsilon applies to --sampler mis only")
    if args.sampler != "lattice" and args.chains is not None:
        raise PostprocError("--chains applies to --sampler lattice only")
    options: dict[str, Any] = {"thin": args.thin}
    if args.burn_in is not None:
        options["burn_in"] = args.burn_in
    if args.chains is not None:
        options["chains"] = args.chains
    release = release_table(args.table, args.invariant, epsilon=args.epsilon, rho=args.rho,
                            mechanism=args.mechanism, sampler=args.sampler, draws=args.draws,
                            rng=args.seed, proposal_epsilon=args.proposal_epsilon,
                            count_column=args.count_column, **options)
    if args.out:
        try:
            release.to_frame().to_csv(args.out, index=False)
        except OSError as exc:
            raise PostprocError(f"{args.out}: cannot write the released table ({exc})") from None
    if args.json:
        print(json.dumps(release.to_dict(), indent=2, allow_nan=False))
        return 0
    res = release.result
    print(f"{res.randomness['label']}")
    print(f"sampler {res.sampler}: acceptance rate {res.acceptance_rate:.4f}, "
          f"ESS min {res.ess_min:,.0f} / median {res.ess_median:,.0f} "
          f"({res.ess_per_second:,.0f} per second), {res.seconds:.2f} s")
    print(f"invariants hold (exact): {release.invariants_hold}")
    print(release.to_frame().to_string(index=False))
    return 0
