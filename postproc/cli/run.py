"""``postproc run`` and ``postproc validate``: the configured TopDown job."""

from __future__ import annotations

import argparse
import sys

ORDER = 20


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run a configured TopDown job (read, measure, post-process)",
                       description="Read microdata, tabulate, measure under the budget, run "
                                   "TopDown level by level and write DIR/<level>.parquet and "
                                   "DIR/manifest.json. Checkpoints after each level.")
    p.add_argument("config", help="run configuration (TOML; see examples/e2e1940.toml)")
    p.add_argument("--out", help="output directory (default: [output] directory of the config)")
    p.add_argument("--resume", action="store_true",
                   help="finish an interrupted run in --out with identical results")
    p.add_argument("--executor", choices=["serial", "process", "dask"],
                   help="override [solver] executor")
    p.add_argument("--workers", type=int, help="override [solver] workers")
    p.add_argument("--scheduler", help="Dask scheduler address (default: a local cluster)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.set_defaults(func=run)
    v = sub.add_parser("validate", help="check a configuration and its data without measuring",
                       description="Parse the config, read and validate the microdata, compile "
                                   "the spec against the invariant data, and check that the "
                                   "confidential data satisfies every constraint.")
    v.add_argument("config", help="run configuration (TOML)")
    v.set_defaults(func=validate)


def _config(args: argparse.Namespace):
    from dataclasses import replace

    from postproc.config import load_config

    config = load_config(args.config)
    changes = {k: getattr(args, k) for k in ("executor", "workers", "scheduler")
               if getattr(args, k, None) is not None}
    return replace(config, **changes) if changes else config


def run(args: argparse.Namespace) -> int:
    from postproc.pipeline import run_pipeline
    from postproc.report_tables import print_level_summary

    config = _config(args)
    out = run_pipeline(config, out=args.out, resume=args.resume,
                       progress=not args.no_progress and sys.stderr.isatty())
    print_level_summary(out)
    print(f"outputs in {out.directory}")
    return 0


def validate(args: argparse.Namespace) -> int:
    from postproc.pipeline import validate_config

    validate_config(_config(args))
    return 0
