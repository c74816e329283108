"""``postproc run`` and ``postproc validate``: the configured job, with any registered
post-processor (``[postprocess] method`` in the config, or ``--method NAME``)."""

from __future__ import annotations

import argparse
import sys

from postproc.cli._confidential import add_show_confidential

ORDER = 20


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run a configured job (read, measure, post-process)",
                       description="Read microdata, tabulate, measure under the budget, "
                                   "post-process with the configured method (TopDown unless "
                                   "[postprocess] method or --method says otherwise) and write "
                                   "DIR/<level>.parquet and DIR/manifest.json. TopDown "
                                   "checkpoints after each level.")
    p.add_argument("config", help="run configuration (TOML; see examples/e2e1940.toml)")
    p.add_argument("--out", help="output directory (default: [output] directory of the config)")
    p.add_argument("--method", metavar="NAME",
                   help="override [postprocess] method: any registered post-processor "
                        "(`postproc methods` lists them); the config's [postprocess.options] "
                        "apply only to the method they were written for")
    p.add_argument("--resume", action="store_true",
                   help="finish an interrupted run in --out with identical results, reusing "
                        "its measurements; the post-processing (method, options, solver, spec "
                        "constraints) and output choices may have changed since, the "
                        "measurement may not")
    p.add_argument("--executor", choices=["serial", "process", "dask"],
                   help="override [solver] executor")
    p.add_argument("--workers", type=positive_int, help="override [solver] workers (≥ 1)")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="send the work to this Dask scheduler (implies --executor dask). The "
                        "confidential data leave this machine; default: a local cluster")
    p.add_argument("--error-table", action=argparse.BooleanOptionalAction, default=None,
                   help="compute errors against the confidential data into "
                        "DIR/confidential/error_table.csv (default: on in simulation mode, off "
                        "in release mode, where they are never printed)")
    p.add_argument("--parts", nargs="?", const=20_000, type=positive_int, metavar="BLOCKS",
                   help="TopDown one part of the geography at a time, at most BLOCKS "
                        "bottom-level units per part (default 20,000): memory for the levels "
                        "down to --split and one part per worker, not every level dense; the same "
                        "histograms as a run of the whole with streams keyed by that level "
                        "(needs [data] blocks and parquet files; in release mode the noisy "
                        "measurements are saved in DIR/noisy before they are solved); "
                        "with method gls or bluedown, that method in parts (docs/gls.md)")
    p.add_argument("--split", default="tract", metavar="LEVEL",
                   help="with --parts: the level cut into parts (default tract)")
    p.add_argument("--all-answers", action="store_true",
                   help="with --parts: draw every answer of every query (default: only those "
                        "that count a cell the invariants leave free; the others are known to "
                        "be 0 and TopDown's output is the same, docs/scale2020.md)")
    p.add_argument("--queries", default=None, metavar="Q1,Q2",
                   help="with --parts and method gls: the queries whose estimates are written "
                        "for every unit (workload names or expressions; default total), with "
                        "their standard errors and intervals (docs/gls.md)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    add_show_confidential(p)
    p.set_defaults(func=run)
    v = sub.add_parser("validate", help="check a configuration and its data without measuring",
                       description="Parse the config, read and validate the microdata, compile "
                                   "the spec against the invariant data, and check that the "
                                   "confidential data satisfies every constraint.")
    v.add_argument("config", help="run configuration (TOML)")
    add_show_confidential(v)
    v.set_defaults(func=validate)


def positive_int(text: str) -> int:
    """An argparse type: an integer ≥ 1 (``--workers 0`` is an error, never "all CPUs")."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, not {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _config(args: argparse.Namespace):
    from dataclasses import replace

    from postproc.apps.runs.config import load_config

    config = load_config(args.config)
    changes = {k: getattr(args, k) for k in ("executor", "workers", "scheduler")
               if getattr(args, k, None) is not None}
    method = getattr(args, "method", None)
    if method is not None and method != config.method:
        from postproc.methods import get

        get(method)                       # an unknown name: the error lists the registered ones
        if config.method_options:
            print(f"postproc: note: [postprocess.options] are {config.method}'s; {method} "
                  "runs with its defaults", file=sys.stderr)
        changes.update(method=method, method_options={})
    if changes.get("scheduler"):
        if changes.setdefault("executor", "dask") != "dask":
            from postproc.errors import PostprocError

            raise PostprocError("--scheduler sends work to a Dask cluster: use it with "
                                "--executor dask (or without --executor)")
        print(f"postproc: WARNING: sending the confidential work items to the Dask scheduler "
              f"at {changes['scheduler']} and its workers: the confidential data leave this "
              "machine (serialized with pickle over the network). Use only a cluster you "
              "control, on a private network.", file=sys.stderr)
    options = {k: changes.pop(k) for k in ("executor", "workers") if k in changes}
    if options:                                      # TopDown's options are one record
        changes["topdown"] = config.topdown.replace(**options)
    return replace(config, **changes) if changes else config


def run(args: argparse.Namespace) -> int:
    from postproc.apps.nmf.config import names_nmf
    from postproc.apps.runs.pipeline import run_pipeline
    from postproc.evaluation.tables import print_level_summary

    if names_nmf(args.config):
        return _run_nmf(args)

    if args.parts is None and (args.all_answers or args.split != "tract"
                               or args.queries is not None):
        from postproc.errors import PostprocError

        raise PostprocError("--split, --all-answers and --queries are options of a run in "
                            "parts: add --parts [BLOCKS]")
    config = _config(args)
    if args.parts is not None:
        return _run_in_parts(config, args)
    out = run_pipeline(config, out=args.out, resume=args.resume,
                       progress=not args.no_progress and sys.stderr.isatty(),
                       error_table=args.error_table, show_confidential=args.show_confidential)
    print_level_summary(out)
    print(f"outputs in {out.directory}"
          + (" (release files only; never publish confidential/)" if out.release else ""))
    return 0


def _run_in_parts(config, args: argparse.Namespace) -> int:
    from dataclasses import replace

    from postproc.apps.runs.parts import run_in_parts
    from postproc.errors import PostprocError

    if config.method in ("gls", "bluedown"):
        return _gls_in_parts(config, args)
    if args.queries is not None:
        raise PostprocError("--queries chooses what gls in parts writes; this run's method is "
                            f"{config.method!r}")
    if args.error_table is not None:
        config = replace(config, error_table=args.error_table)
    done = run_in_parts(config, args.out or config.output, split=args.split,
                        part_blocks=args.parts, all_answers=args.all_answers,
                        resume=args.resume,
                        progress=not args.no_progress and sys.stderr.isatty(),
                        show_confidential=args.show_confidential)
    print_parts_summary(done)
    return 0


def _gls_in_parts(config, args: argparse.Namespace) -> int:
    """``--parts`` with method gls or bluedown:
    :func:`postproc.apps.runs.parts_gls.gls_in_parts`."""
    from postproc.apps.runs.parts_gls import gls_in_parts
    from postproc.errors import PostprocError

    method = config.method
    unsupported = [flag for flag, given in (("--resume", args.resume),
                                            ("--all-answers", args.all_answers),
                                            ("--error-table", args.error_table),
                                            ("--queries", method == "bluedown"
                                             and args.queries is not None)) if given]
    if unsupported:
        raise PostprocError(f"{method} in parts does not take {', '.join(unsupported)}"
                            + (" (it writes every cell's integer count)"
                               if "--queries" in unsupported else
                               " yet: run it again into a new directory (it measures each "
                               "part once)"))
    queries = tuple(q.strip() for q in (args.queries or "total").split(",") if q.strip())
    done = gls_in_parts(config, args.out or config.output, split=args.split,
                        part_blocks=args.parts, queries=queries,
                        progress=not args.no_progress and sys.stderr.isatty(),
                        show_confidential=args.show_confidential, method=method)
    print(f"{method} in {done.parts:,} part{'' if done.parts == 1 else 's'}, "
          f"{done.timings['total']:.1f} s; outputs in {done.directory}")
    return 0


def print_parts_summary(done) -> None:
    """The totals' errors of a run in parts (simulation mode) and where its outputs are (in
    release mode without the persons count: it is computed from the confidential data)."""
    if done.errors is not None and not done.errors.empty:
        totals = done.errors[done.errors["query"] == "total"]
        print("mean |error| of the totals (simulation): TopDown, measured (the totals' noisy "
              "measurements)")
        for row in totals.itertuples():
            print(f"  {row.level:>12}: {row.topdown_mean_abs:10.3f}  "
                  f"{row.measured_mean_abs:10.3f}")
    persons = "" if done.release else f"{done.persons:,} persons in "
    parts = f"{done.parts:,} part{'' if done.parts == 1 else 's'}"
    print(f"{persons}{parts}, {done.timings['total']:.1f} s; "
          f"outputs in {done.directory}")


def _run_nmf(args: argparse.Namespace) -> int:
    """A configuration whose ``[data]`` is a Noisy Measurement File
    (:mod:`postproc.apps.nmf.config`): read it, post-process it, write the result."""
    from postproc.apps.nmf.config import load_nmf_config
    from postproc.errors import PostprocError

    given = [flag for flag, value in (
        ("--resume", args.resume), ("--parts", args.parts is not None),
        ("--executor", args.executor),
        ("--scheduler", args.scheduler), ("--error-table", args.error_table),
        ("--all-answers", args.all_answers), ("--queries", args.queries is not None),
        ("--split", args.split != "tract")) if value]
    if given:
        raise PostprocError(f"{args.config} runs on a Noisy Measurement File ([data] nmf), "
                            f"which does not take {', '.join(given)}: it reads published "
                            "measurements (nothing to resume or measure, no truth to compare)")
    config = load_nmf_config(args.config)
    if args.method is not None:
        from postproc.methods import get

        get(args.method)              # an unknown name: the error lists the registered ones
    directory = config.run(args.out, method=args.method, workers=args.workers,
                           log=lambda line: print(line, file=sys.stderr))
    print(f"outputs in {directory}")
    return 0


def validate(args: argparse.Namespace) -> int:
    from postproc.apps.nmf.config import names_nmf
    from postproc.apps.runs.pipeline import validate_config

    if names_nmf(args.config):
        from postproc.apps.nmf.config import load_nmf_config

        config = load_nmf_config(args.config)
        noisy, spec = config.read()
        geo = noisy.geography
        print(f"{args.config}: {noisy.provenance['files']:,} files of {config.root} read and "
              f"checked row by row ({len(noisy.provenance['pieces'])} state pieces, "
              f"{geo.n_units(geo.levels[-1]):,} blocks); {len(spec.constraints)} constraints"
              f"{f', {len(spec.sums)} sum(s) over units' if spec.sums else ''}; method "
              f"{config.method}")
        return 0

    validate_config(_config(args), show_confidential=args.show_confidential)
    return 0
