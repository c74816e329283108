"""``postproc ipums1940 DDI [DATA] --out DIR``: an IPUMS USA 1940 extract as E2E microdata."""

from __future__ import annotations

import argparse

ORDER = 11


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "ipums1940", help="convert an IPUMS USA 1940 extract to E2E persons and units",
        description="Read an IPUMS USA 1940 extract (its DDI codebook and fixed-width .dat or "
                    ".dat.gz data, rectangular or hierarchical) a block of lines at a time and "
                    "write DIR/persons.parquet and DIR/units.parquet in the E2E schema "
                    "(e2e_1940), the layout synth1940 writes: what [data] persons and units of "
                    "a run configuration read. docs/data.md lists the variables to select and "
                    "the recodes. Existing files are replaced only with --overwrite, and only "
                    "if the toolkit wrote them.")
    p.add_argument("ddi", metavar="DDI", help="the extract's DDI codebook (usa_NNNNN.xml)")
    p.add_argument("data", metavar="DATA", nargs="?",
                   help="the data file (default: the codebook's file name beside it, .dat or "
                        ".dat.gz)")
    p.add_argument("--out", required=True, metavar="DIR", help="output directory")
    p.add_argument("--county", metavar="VAR",
                   help="the IPUMS county variable (default COUNTYICP; e.g. COUNTYNHG)")
    p.add_argument("--enum-dist", metavar="VAR",
                   help="the IPUMS enumeration-district variable (default ENUMDIST)")
    p.add_argument("--unit", metavar="VAR",
                   help="the household serial number that makes units (default SERIAL)")
    p.add_argument("--hhgq-rule", choices=["e2e", "gq"], default="e2e",
                   help="e2e (default): hhgq from GQTYPE alone, as the Census Bureau's E2E 1940 "
                        "reader; gq: persons whose GQ is a household (1, 2, 5) are in "
                        "households whatever GQTYPE says")
    p.add_argument("--chunksize", type=int, default=1_000_000, metavar="LINES",
                   help="lines read at a time (default 1000000)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace DIR/persons.parquet and DIR/units.parquet if the toolkit wrote "
                        "them")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from hierarchy.io.ipums import write_ipums_1940_parquet
    from postproc.cli.synth import wrote_e2e

    columns = {role: value for role, value in (("county", args.county),
                                               ("enum_dist", args.enum_dist),
                                               ("unit", args.unit)) if value}
    summary = write_ipums_1940_parquet(args.ddi, args.data, args.out, columns=columns,
                                       hhgq_rule=args.hhgq_rule, chunksize=args.chunksize,
                                       progress=not args.no_progress, overwrite=args.overwrite)
    print(f"{wrote_e2e(summary)} ({summary['lines']:,} lines, {summary['seconds']:.1f} s)")
    print("IPUMS asks to be cited in what you publish (also in the files' metadata):\n"
          f"  {summary['citation']}")
    return 0
