"""``postproc mis``: release a table of counts by conditional sampling under invariants.

``postproc mis --table CSV [--count-column count] --invariant EXPR [--invariant EXPR ...]
--epsilon E [--mechanism geometric|discrete_gaussian|laplace] [--rho R] [--sampler lattice|mis]
[--proposal-epsilon E~] [--draws N] [--burn-in B] [--thin T] [--chains C] [--seed S]
[--levels COLUMN=L1,L2,... ...] [--derived COLUMN=SOURCE ...] [--out CSV] [--json]``

The CSV's rows are the cells, one for every combination of the levels of its key columns (zero
counts included); its other columns are the attributes invariants may name: ``total``,
``marginal(sex)``, ``marginal(voting_age)``, …, each optionally ``EXPR=V1,V2`` to publish other
values than the table's. A CSV without its zero rows is refused unless ``--levels`` gives every
key column's levels (the missing cells are then added with count 0); ``--derived
voting_age=age_group`` declares a column that is a function of another. Without ``--seed`` the
randomness is release mode (cryptographically secure) and the continuous ``laplace`` mechanism
is refused; with it, simulation mode, labelled unsafe. In both, the chain must run at least 50
sweeps or iterations (``--burn-in`` + ``--draws``; ``postproc.methods.sampling.target.MIN_STEPS``).
With the geometric mechanism the output states Gong & Meng's γ of the release (``gamma`` in the
JSON: exact for small tables, else the bound 1; ``postproc gamma``). ``--json`` prints one
object with ``acceptance_rate``, ``ess`` (``min``, ``median``,
``per_cell``, ``min_per_second``), ``released`` (one object per row: key columns and the released
count), ``invariants_hold`` (checked in exact integer arithmetic), the sampler's settings and the
randomness provenance. In release mode (no ``--seed``) the chain's diagnostics
(``acceptance_rate``, ``ess``) and the input path are left out — they are computed from the
confidential table — unless ``--diagnostics`` asks for them (then under
``confidential_diagnostics``).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from postproc.cli._confidential import add_show_confidential
from postproc.errors import PostprocError

ORDER = 40


def register(subparsers: Any) -> None:
    """Add ``mis`` to the ``postproc`` parser."""
    from postproc.methods.sampling.samplers import DEFAULT_SAMPLER, SAMPLERS  # loads no numpy

    parser = subparsers.add_parser(
        "mis", help="release a count table by conditional sampling under invariants",
        description="Conditional sampling (Gong & Meng 2020): release one draw of the noise "
                    "mechanism around the table's counts conditioned on the invariants and on "
                    "nonnegative integers. Samplers: 'lattice' (default; Metropolis moves that "
                    "keep the invariants exactly) or 'mis' (the paper's Metropolized "
                    "independent sampler). See docs/conditional_sampling.md.")
    add_table_options(parser)
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
    parser.add_argument("--burn-in", type=int, metavar="B",
                        help="default draws // 10, raised so that burn-in + draws is at least "
                             "50 (postproc.methods.sampling.target.MIN_STEPS: the shortest "
                             "chain whose state may be released)")
    parser.add_argument("--thin", type=int, default=1, metavar="T", help="keep every T-th state")
    parser.add_argument("--chains", type=int, metavar="C", help="lattice: chains (default 4)")
    parser.add_argument("--seed", type=int, metavar="S",
                        help="simulation mode with this seed (reproducible, NOT safe for a "
                             "release); default release mode")
    parser.add_argument("--out", metavar="CSV", help="also write the released table here")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--diagnostics", action="store_true",
                        help="release mode: also show the chain's acceptance rate and effective "
                             "sample sizes (computed from the confidential table: not part of "
                             "the release; shown by default in simulation mode)")
    add_show_confidential(parser)
    parser.set_defaults(func=run)


def add_table_options(parser: Any) -> None:
    """The options that name a count table and its invariants (``postproc mis``, ``postproc
    gamma``): ``--table``, ``--count-column``, ``--invariant``, ``--levels``, ``--derived``.

    Examples
    --------
    >>> parser = argparse.ArgumentParser()
    >>> add_table_options(parser)
    >>> args = parser.parse_args(["--table", "t.csv", "--invariant", "total",
    ...                           "--levels", "sex=f,m"])
    >>> args.count_column, table_levels(args)
    ('count', ({'sex': ['f', 'm']}, {}))
    """
    parser.add_argument("--table", required=True, metavar="CSV",
                        help="CSV with one row per cell: key columns and a count column")
    parser.add_argument("--count-column", default="count", metavar="NAME",
                        help="the column of counts (default count)")
    parser.add_argument("--invariant", action="append", required=True, metavar="EXPR",
                        help="an invariant query, e.g. total or 'marginal(sex)'; repeat; "
                             "EXPR=V1,V2 publishes given values")
    parser.add_argument("--levels", action="append", metavar="COLUMN=L1,L2,...",
                        help="the levels of a key column, e.g. sex=f,m; repeat for every key "
                             "column: the table is completed with zero rows for missing cells "
                             "(without it, a table with a missing cell is refused)")
    parser.add_argument("--derived", action="append", metavar="COLUMN=SOURCE",
                        help="a key column that is a function of another, e.g. "
                             "voting_age=age_group; not part of the cells' cross-product")


def table_levels(args: argparse.Namespace) -> tuple[dict[str, list[str]] | None, dict[str, str]]:
    """``--levels`` and ``--derived`` as ``complete_table`` takes them (``levels`` None when
    none is given; :func:`add_table_options` shows one)."""
    levels = _assignments(args.levels, "--levels")
    return ({c: v.split(",") for c, v in levels.items()} or None,
            _assignments(args.derived, "--derived"))


def _assignments(values: list[str] | None, option: str) -> dict[str, str]:
    """``['sex=f,m', 'age=0,1']`` → ``{'sex': 'f,m', 'age': '0,1'}``."""
    out: dict[str, str] = {}
    for value in values or []:
        column, sep, rest = value.partition("=")
        column, rest = column.strip(), rest.strip()
        if not sep or not column or not rest:
            raise PostprocError(f"{option} {value!r}: expected COLUMN=VALUE, e.g. "
                                + ("sex=f,m" if option == "--levels" else "voting_age=age_group"))
        if column in out:
            raise PostprocError(f"{option} names {column!r} twice; give it once")
        out[column] = rest
    return out


def run(args: argparse.Namespace) -> int:
    """Run ``postproc mis``."""
    from postproc.gate import data_errors
    from postproc.methods.sampling.table import release_table

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
    levels, derived = table_levels(args)
    with data_errors(release=args.seed is None, show=args.show_confidential):
        release = release_table(args.table, args.invariant, epsilon=args.epsilon, rho=args.rho,
                                mechanism=args.mechanism, sampler=args.sampler,
                                draws=args.draws, rng=args.seed,
                                proposal_epsilon=args.proposal_epsilon,
                                count_column=args.count_column, levels=levels,
                                derived=derived, **options)
    if args.out:
        try:
            release.to_frame().to_csv(args.out, index=False)
        except OSError as exc:
            raise PostprocError(f"{args.out}: cannot write the released table ({exc})") from None
    gamma = _gamma(release, args)
    if args.json:
        summary = release.to_dict(diagnostics=args.diagnostics)
        if gamma is not None:
            summary["gamma"] = gamma.to_dict()
        print(json.dumps(summary, indent=2, allow_nan=False))
        return 0
    res = release.result
    print(f"{res.randomness['label']}")
    diagnostics = (f"sampler {res.sampler}: acceptance rate {res.acceptance_rate:.4f}, "
                   f"ESS min {res.ess_min:,.0f} / median {res.ess_median:,.0f} "
                   f"({res.ess_per_second:,.0f} per second), {res.seconds:.2f} s")
    if not release.release:
        print(diagnostics)
    elif args.diagnostics:
        print(f"{diagnostics} [CONFIDENTIAL: computed from the chain around the confidential "
              "table; not part of the release]")
    else:
        print(f"sampler {res.sampler}, {res.seconds:.2f} s (release mode: the chain's "
              "diagnostics are computed from the confidential table and not shown; "
              "--diagnostics shows them)")
    print(f"invariants hold (exact): {release.invariants_hold}")
    if gamma is not None:
        print(f"Gong & Meng's gamma = {gamma.gamma:g} ({gamma.method}): the release is "
              f"(1 + gamma) k eps-DP for invariant-conforming tables at distance k "
              f"(postproc gamma; docs/conditional_sampling.md)")
    print(release.to_frame().to_string(index=False))
    return 0


def _gamma(release: Any, args: argparse.Namespace) -> Any:
    """Gong & Meng's γ of the release (geometric noise only; exact for small tables, else the
    bound γ = 1): it depends on the invariants' published values only, so it is shown in both
    modes."""
    if args.mechanism != "geometric":
        return None
    from postproc.methods.sampling.gamma import gamma_of_table

    # a quick look only (about a second): beyond it the bound, which postproc gamma refines
    return gamma_of_table(release.table, args.invariant, epsilon=args.epsilon,
                          max_visits=100_000)
