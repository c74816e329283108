"""``postproc init``: a working, commented run configuration written from a data file
(:func:`postproc.apps.runs.init.init_config`)."""

from __future__ import annotations

import argparse

ORDER = 15


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("init", help="write a run configuration for your own data file",
                       description="Read DATA (CSV or parquet, one row per person) and write a "
                                   "commented run configuration for it: the schema inferred "
                                   "from the columns other than the levels (labels from text "
                                   "and categoricals, integers in ranges), the detailed and "
                                   "marginal queries, pure ε split equally, geometric noise in "
                                   "simulation mode with a seed, the total published at the "
                                   "root. postproc validate and postproc run take it as "
                                   "written; docs/config.md lists every key.")
    p.add_argument("data", help="the persons file (.csv, .csv.gz, .parquet)")
    p.add_argument("--levels", required=True, metavar="A,B,C",
                   help="the geocode columns, largest units first (a root of one unit is put "
                        "above them)")
    p.add_argument("--out", metavar="CONFIG",
                   help="the file to write (default: DATA's name with .toml, here)")
    p.add_argument("--seed", type=int, default=1, help="the simulation's seed (default 1)")
    p.add_argument("--epsilon", default="1", metavar="E",
                   help="the total ε, a number or a fraction such as 1/2 (default 1)")
    p.add_argument("--root", default="country", metavar="NAME",
                   help="the root level's name (default country)")
    p.add_argument("--skip", default="", metavar="COL1,COL2",
                   help="columns to leave out of the schema (a float column, a weight, …)")
    p.add_argument("--force", action="store_true",
                   help="replace CONFIG if postproc init wrote it (a file it did not write is "
                        "never replaced)")
    p.set_defaults(func=run)


def _names(text: str) -> list[str]:
    """``"a, b"`` → ``["a", "b"]`` (empty entries dropped).

    Examples
    --------
    >>> _names("region, district,,village")
    ['region', 'district', 'village']
    """
    return [name.strip() for name in text.split(",") if name.strip()]


def run(args: argparse.Namespace) -> int:
    from postproc.apps.runs.init import init_config

    result = init_config(args.data, _names(args.levels), out=args.out, seed=args.seed,
                         epsilon=args.epsilon, root=args.root, skip=_names(args.skip),
                         force=args.force)
    print(result.summary())
    return 0
