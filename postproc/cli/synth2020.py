"""``postproc synth2020``: realistic synthetic 2020-style (PL 94-171) microdata."""

from __future__ import annotations

import argparse

ORDER = 11


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("synth2020", help="write synthetic 2020-style persons, units and blocks",
                       description="Write DIR/persons.parquet, DIR/units.parquet, "
                                   "DIR/blocks.parquet and DIR/manifest.json: realistic "
                                   "synthetic 2020-style microdata for the pl94_2020 schema "
                                   "(50 states and DC; state → county → tract → block group "
                                   "→ block), streamed county group by county group. Files "
                                   "of an earlier synth2020 run are replaced only with "
                                   "--overwrite; other files never.")
    p.add_argument("--persons", type=int, required=True,
                   help="number of persons (331449281 is the 2020 census)")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--seed", type=int, default=2020, help="random seed (default 2020)")
    p.add_argument("--states", nargs="+", metavar="STATE",
                   help="only these states (FIPS or postal codes, e.g. 06 TX)")
    p.add_argument("--puerto-rico", action="store_true", help="add Puerto Rico")
    p.add_argument("--chunk", type=int, default=2_000_000,
                   help="persons per written group of counties (memory; default 2000000)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace the files of an earlier synth2020 run in DIR (and an "
                        "earlier synthetic NMF in NMFDIR)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    nmf = p.add_argument_group(
        "synthetic Noisy Measurement File",
        "--nmf NMFDIR also writes, from the microdata, NMFDIR/US_Person_PL_PROD and "
        "NMFDIR/US_Unit_PL_PROD laid out as the Census Bureau's published 2020 PL 94-171 NMF "
        "(AIAN split, spine geocodes, only children bypassed, Hive partitions State=XYY), with "
        "NMFDIR/truth (the microdata on the spine geography), NMFDIR/state_totals.csv and "
        "NMFDIR/manifest.json. Seeded simulation: NOT SAFE FOR RELEASE.")
    nmf.add_argument("--nmf", metavar="NMFDIR", help="write a synthetic NMF there too")
    nmf.add_argument("--nmf-seed", type=int, metavar="SEED",
                     help="seed of the NMF's spine and noise (default: --seed)")
    nmf.add_argument("--no-noise", action="store_true",
                     help="write the exact answers (with the variances the noise would have)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from hierarchy.synth.census2020 import synthesize_2020
    from postproc.errors import PostprocError

    if args.nmf is None and (args.nmf_seed is not None or args.no_noise):
        raise PostprocError("--nmf-seed and --no-noise describe the synthetic NMF; add "
                            "--nmf NMFDIR")
    if args.nmf is not None and args.puerto_rico:
        raise PostprocError("--nmf writes the US products, which do not hold Puerto Rico; "
                            "leave out --puerto-rico")
    manifest = synthesize_2020(args.persons, seed=args.seed, states=args.states,
                               puerto_rico=args.puerto_rico, out=args.out, chunk=args.chunk,
                               overwrite=args.overwrite,
                               progress=not args.no_progress)
    counts = ", ".join(f"{manifest[k]:,} {k.replace('_', ' ')}" for k in
                       ("persons", "households", "gq_facilities", "states", "counties", "tracts",
                        "block_groups", "blocks", "empty_blocks"))
    print(f"wrote {args.out}: {counts} ({manifest['seconds']:.1f} s, "
          f"{manifest['persons_per_second'] / 1e6:.1f}M persons/s)")
    if args.nmf is not None:
        from postproc.apps.nmf.synthetic import write_synthetic_nmf

        nmf = write_synthetic_nmf(args.out, args.nmf,
                                  seed=args.seed if args.nmf_seed is None else args.nmf_seed,
                                  noise=not args.no_noise, overwrite=args.overwrite,
                                  progress=not args.no_progress)
        print(f"wrote {args.nmf}: synthetic NMF of {len(nmf['pieces'])} state pieces, "
              f"{nmf['persons']:,} persons ({nmf['seconds']:.1f} s) - {nmf['label']}")
    return 0
