"""``postproc nmf``: look into a Noisy Measurement File (the Census Bureau's published 2020
P.L. 94-171 measurements, or a synthetic one in the same layout)."""

from __future__ import annotations

import argparse

from postproc.cli.run import positive_int

ORDER = 12


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("nmf", help="inspect or post-process a Noisy Measurement File (the "
                                   "published 2020 PL 94-171 measurements)",
                       description="Commands on a Noisy Measurement File: the folder that "
                                   "holds US_Person_PL_PROD/ (and US_Unit_PL_PROD/), as the "
                                   "Census Bureau publishes it or `postproc synth2020 --nmf` "
                                   "writes it (docs/nmf.md).")
    actions = p.add_subparsers(dest="nmf_command", metavar="COMMAND", required=True)
    q = actions.add_parser("inspect", help="levels, units, queries, variance ranges, "
                                           "constraints, only children and size",
                           description="Print what the file holds, level by level, without "
                                       "reading its values: units, units measured and only "
                                       "children (constraint rows, no measurements), each "
                                       "query's rows and variance range, the constraint kinds, "
                                       "files and bytes.")
    q.add_argument("root", metavar="ROOT", help="the folder that holds US_Person_PL_PROD/")
    q.add_argument("--product", choices=("persons", "units"), default="persons",
                   help="which product (default persons)")
    q.add_argument("--states", nargs="+", metavar="FIPS",
                   help="only these states (two-digit FIPS codes, e.g. 44 50)")
    q.add_argument("--json", action="store_true", help="print JSON instead of a table")
    q.set_defaults(func=run_inspect)
    r = actions.add_parser("run", help="post-process the file (TopDown with the production "
                                       "options by default) into a run directory",
                           description="Read the file, post-process it and write every "
                                       "level's histograms, the geography, the node statistics, "
                                       "a manifest naming the file, and block_geoid.parquet "
                                       "(each spine block's census GEOID).")
    r.add_argument("root", metavar="ROOT", help="the folder that holds US_Person_PL_PROD/")
    r.add_argument("--out", required=True, help="output directory (new, or an earlier "
                                                "`postproc nmf run`'s)")
    r.add_argument("--state-totals", metavar="CSV|2020",
                   help="the states' invariant persons totals: a CSV state,total, or 2020 for "
                        "the 2020 Census's (shipped); required for the persons' product")
    r.add_argument("--stream", action="store_true",
                   help="TopDown (or gls) state by state: the nation and the state pieces "
                        "first, then one state at a time, its blocks in parts (memory of the "
                        "largest state above its blocks; the whole run's integers, or its GLS "
                        "estimates; persons only)")
    r.add_argument("--product", choices=("persons", "units"), default="persons",
                   help="the persons' measurements (default) or the housing units' (vacant, "
                        "occupied; their totals are in the file)")
    r.add_argument("--states", nargs="+", metavar="FIPS",
                   help="only these states (two-digit FIPS codes); all by default")
    r.add_argument("--method", default="topdown",
                   help="a registered post-processor (default topdown; `postproc methods`)")
    r.add_argument("--workers", type=positive_int,
                   help="processes for TopDown's and BlueDown's node problems (and, with "
                        "--stream, the block files and parts); default every CPU")
    r.add_argument("--part-blocks", type=positive_int, metavar="BLOCKS",
                   help="with --stream: each state's blocks in parts of at most BLOCKS blocks "
                        "(default 20,000; memory per worker)")
    r.add_argument("--queries", default=None, metavar="Q1,Q2",
                   help="with --stream and --method gls: the queries whose estimates, "
                        "standard errors and intervals are written for every unit (workload "
                        "names or expressions; default total)")
    r.add_argument("--interval", type=float, default=None, metavar="P",
                   help="with --stream and --method gls: the intervals' coverage (default 0.9)")
    r.add_argument("--no-progress", action="store_true", help="no progress bars")
    r.set_defaults(func=run_run)
    c = actions.add_parser(
        "compare", help="compare methods on a synthetic file against the truth beside it, or "
                        "on any file against published totals (--published)",
        description="Read a synthetic NMF (postproc synth2020 --nmf) once, run each method on "
                    "its measurements (TopDown and BlueDown with the 2020 production options) "
                    "and compare each with the truth the file keeps: one table (MAE = median "
                    "|error|, mean |error|, RMSE, EPL per method, level and query) as CSV and "
                    "JSON, figures and an HTML page.")
    c.add_argument("root", metavar="ROOT", nargs="?",
                   help="the folder that holds US_Person_PL_PROD/ (and truth/, for a synthetic "
                        "file); with --runs, the synthetic file whose truth the runs are "
                        "compared with")
    c.add_argument("--methods", metavar="A,B,...",
                   help="registered post-processors to run on ROOT, e.g. topdown,gls,noisy")
    c.add_argument("--runs", nargs="+", metavar="NAME=DIR",
                   help="instead of --methods: finished `postproc nmf run` directories (e.g. "
                        "the nation streamed) to compare with ROOT's truth (the total population "
                        "at every level of the spine) and/or --published")
    c.add_argument("--out", required=True, help="output directory (new, or an earlier "
                                                "`postproc nmf compare`'s)")
    c.add_argument("--state-totals", metavar="CSV|2020",
                   help="the states' invariant totals (a synthetic file writes "
                        "ROOT/state_totals.csv)")
    c.add_argument("--states", nargs="+", metavar="FIPS", help="only these states")
    c.add_argument("--published", metavar="CSV",
                   help="compare with published counts instead of (or, with --runs, beside) "
                        "a synthetic file's truth: a CSV with a column geoid (census GEOIDs of "
                        "states, counties, tracts, block groups or blocks) and columns total or "
                        "any variables of tables P1-P5 (P1_001N, P2_002N, ...); any file, the "
                        "published one included")
    c.add_argument("--seed", type=int, default=0,
                   help="randomized methods' and EPL intervals' seed (default 0)")
    c.set_defaults(func=run_compare)


def run_inspect(args: argparse.Namespace) -> int:
    import json

    from postproc.apps.nmf.summary import inspect_nmf

    frame = inspect_nmf(args.root, product=args.product, states=args.states)
    attrs = frame.attrs
    if args.json:
        rows = frame.astype(object).where(frame.notna(), None).to_dict("records")
        print(json.dumps({**attrs, "rows": rows}, indent=1))
        return 0
    print(f"{attrs['product']} in {args.root}: {len(attrs['pieces'])} state pieces "
          f"({', '.join(attrs['pieces'])})")
    for level, n in attrs["units"].items():
        sub = frame[frame["geolevel"] == level]
        size = sub.groupby("dataset")["bytes"].first().sum()
        print(f"  {level:<12} {n:>10,} units, {attrs['only_children'][level]:>9,} only "
              f"children (no measurements), {size / 2**20:,.1f} MiB")
    queries = frame[frame["dataset"] == "DPQuery"]
    print("\nmeasurements (rows; variance range):")
    for name, group in queries.groupby("name", sort=False):
        cells = [f"{r.geolevel} {r.rows:,}" + (
            f" [{r.min_variance:.3g}, {r.max_variance:.3g}]" if r.rows else "")
            for r in group.itertuples()]
        print(f"  {name:<32} " + "; ".join(cells))
    cons = frame[frame["dataset"] == "Constraint"]
    print("\nconstraints:")
    for name, group in cons.groupby("name", sort=False):
        levels = ", ".join(f"{r.geolevel} {r.rows:,}" for r in group.itertuples() if r.rows)
        print(f"  {name:<16} {group['sign'].iloc[0]:<2} {levels}")
    return 0


def run_compare(args: argparse.Namespace) -> int:
    import sys

    from postproc.apps.nmf.compare import compare_nmf, compare_runs
    from postproc.errors import PostprocError

    log = lambda line: print(line, file=sys.stderr)  # noqa: E731
    if args.runs:
        given = [flag for flag, value in (("--methods", args.methods),
                                          ("--states", args.states),
                                          ("--state-totals", args.state_totals)) if value]
        if given or not (args.published or args.root):
            raise PostprocError("--runs compares finished run directories with the truth of "
                                "ROOT (the synthetic file they read) or with --published "
                                "totals, or both; " + (f"it does not take {', '.join(given)}"
                                                       if given else
                                                       "give ROOT or --published CSV"))
        runs = {}
        for pair in args.runs:
            name, sep, path = pair.partition("=")
            if not (sep and name and path):
                raise PostprocError(f"--runs: {pair!r} is not NAME=DIR (e.g. topdown=us-run)")
            runs[name] = path
        compare_runs(runs, args.published, args.out, truth=args.root, log=log)
        return 0
    missing = [flag for flag, value in (("ROOT", args.root), ("--methods", args.methods),
                                        ("--state-totals", args.state_totals)) if not value]
    if missing:
        raise PostprocError(f"postproc nmf compare needs {', '.join(missing)} (or --runs "
                            "NAME=DIR ... with ROOT or --published)")
    compare_nmf(args.root, args.methods, args.out, states=args.states,
                state_totals=args.state_totals, seed=args.seed, published=args.published,
                log=log)
    return 0


def run_run(args: argparse.Namespace) -> int:
    import sys

    from postproc.apps.nmf.run import run_nmf
    from postproc.apps.nmf.stream import run_nmf_streamed
    from postproc.errors import PostprocError

    log = lambda line: print(line, file=sys.stderr)  # noqa: E731
    common = dict(method=args.method, states=args.states, state_totals=args.state_totals,
                  product=args.product, workers=args.workers, log=log)
    gls = {}
    if args.queries is not None:
        gls["queries"] = tuple(q.strip() for q in args.queries.split(",") if q.strip())
    if args.interval is not None:
        gls["interval"] = args.interval
    if gls and not (args.stream and args.method == "gls"):
        raise PostprocError("--queries and --interval choose what gls state by state writes: "
                            "give --stream --method gls (a whole-file run writes every "
                            "histogram whole)")
    if args.stream:
        run_nmf_streamed(args.root, args.out, **common, progress=not args.no_progress,
                         part_blocks=args.part_blocks, **gls)
    elif args.part_blocks is not None:
        raise PostprocError("--part-blocks splits the blocks of a run state by state: give "
                            "--stream too")
    else:
        run_nmf(args.root, args.out, **common)
    return 0
