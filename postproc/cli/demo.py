"""``postproc demo``: synthesize, measure and post-process ~1M persons (1940 or 2020 style)."""

from __future__ import annotations

import argparse
import sys

from postproc.cli.run import positive_int

ORDER = 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="the whole path on synthetic 1940- or 2020-style data",
                       description="Synthesize microdata, measure it with a preset "
                                   "configuration, run TopDown and print a per-level error "
                                   "table (noisy vs post-processed). --preset e2e_1940 (the "
                                   "default): 1940-style persons, the E2E configuration at ε. "
                                   "--preset pl94_2020: 2020-style persons, units and blocks, "
                                   "the 2020 redistricting-data (PL 94-171) production "
                                   "configuration at its ρ. Simulation mode: outputs are "
                                   "labelled unsafe for release. Time on 2 cores at the default "
                                   "1,000,000 persons: e2e_1940 about 2 seconds; pl94_2020 about "
                                   "100 seconds with a worker process per core "
                                   "(--persons 100000 takes about 13 seconds).")
    p.add_argument("--preset", choices=["e2e_1940", "pl94_2020"], default="e2e_1940",
                   help="what to synthesize and run (default e2e_1940)")
    p.add_argument("--persons", type=int, default=1_000_000, help="persons (default 1,000,000)")
    p.add_argument("--seed", type=int, default=2024, help="seed (default 2024)")
    p.add_argument("--epsilon", type=float, default=None,
                   help="total ε of e2e_1940 (default 1); pl94_2020 takes none")
    p.add_argument("--out", default="postproc-demo", help="output directory "
                                                         "(default ./postproc-demo)")
    p.add_argument("--executor", choices=["serial", "process"], default=None,
                   help="where TopDown's parents are solved (default: serial for e2e_1940, a "
                        "process per core for pl94_2020; the results are identical)")
    p.add_argument("--parts", nargs="?", const=20_000, type=positive_int, metavar="BLOCKS",
                   help="pl94_2020: run TopDown in parts of at most BLOCKS blocks (default "
                        "20,000), as postproc run --parts; on by default above 3,000,000 "
                        "persons, where the run of the whole needs about 2 GiB per million")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from postproc.apps.runs.demo import run_demo
    from postproc.apps.runs.parts import PartsResult
    from postproc.cli.run import print_parts_summary
    from postproc.evaluation.tables import print_level_summary

    out = run_demo(args.out, preset=args.preset, persons=args.persons, seed=args.seed,
                   epsilon=args.epsilon, executor=args.executor, parts=args.parts,
                   progress=not args.no_progress and sys.stderr.isatty())
    if isinstance(out, PartsResult):
        print_parts_summary(out)
        print(f"Rerun or change it: postproc run {out.directory.parent}/config.toml --parts "
              f"--out {out.directory.parent}/run-again")
        return 0
    print_level_summary(out)
    print(f"\nOutputs: {out.directory}/<level>.parquet, manifest.json, "
          f"confidential/error_table.csv; data and config in {out.directory.parent}.")
    print("Rerun or change it: postproc run "
          f"{out.directory.parent}/config.toml --out {out.directory.parent}/run-again")
    return 0
