"""``postproc synth1940``: realistic synthetic 1940-style microdata."""

from __future__ import annotations

import argparse

ORDER = 10


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("synth1940", help="write synthetic 1940-style persons and units",
                       description="Write DIR/persons.parquet and DIR/units.parquet: realistic "
                                   "synthetic 1940-style microdata (48 states + DC). Existing "
                                   "files are replaced only with --overwrite, and only if "
                                   "synth1940 wrote them.")
    p.add_argument("--persons", type=int, required=True, help="number of persons (e.g. 1000000)")
    p.add_argument("--seed", type=int, required=True, help="random seed (deterministic output)")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--overwrite", action="store_true",
                   help="replace DIR/persons.parquet and DIR/units.parquet if an earlier "
                        "synth1940 wrote them (files the toolkit did not write are never "
                        "replaced)")
    p.add_argument("--composition", default="default", metavar="NAME",
                   help="how mixed counties are: default; counties_1940 (as many populated "
                        "votingage x hispanic x race cells per county as the real 1940 "
                        "counties); counties_eds_1940 (those counties, and EDs with the real "
                        "EDs' small cells; docs/data.md)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from hierarchy.synth import write_synthetic_1940

    summary = write_synthetic_1940(args.out, args.persons, seed=args.seed,
                                   progress=not args.no_progress, overwrite=args.overwrite,
                                   composition=args.composition)
    print(f"{wrote_e2e(summary)} ({summary['seconds']:.1f} s, "
          f"{summary['persons_per_second'] / 1e6:.1f}M persons/s)")
    return 0


def wrote_e2e(summary: dict) -> str:
    """What a writer of E2E persons and units files wrote (``postproc synth1940`` and
    ``postproc ipums1940``), from its summary.

    Examples
    --------
    >>> wrote_e2e({"persons_path": "d/persons.parquet", "units_path": "d/units.parquet",
    ...            "persons": 1200, "households": 400, "gq_facilities": 2, "states": 1,
    ...            "counties": 3, "enum_dists": 9})
    'wrote d/persons.parquet and d/units.parquet: 1,200 persons, 400 households, 2 gq facilities, \
1 states, 3 counties, 9 enum dists'
    """
    counts = ", ".join(f"{summary[k]:,} {k.replace('_', ' ')}" for k in
                       ("persons", "households", "gq_facilities", "states", "counties",
                        "enum_dists"))
    return f"wrote {summary['persons_path']} and {summary['units_path']}: {counts}"
