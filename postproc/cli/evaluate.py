"""``postproc evaluate``: error and empirical privacy loss of a run against its confidential data.

``postproc evaluate OUTDIR --truth DATA [--units FILE] [--json] [--compare] [--save]`` reads the
run in ``OUTDIR`` (``manifest.json``, ``<level>.parquet``, ``noisy/``), tabulates the confidential
data ``DATA`` — a persons file of any name, or a directory with ``persons.parquet`` /
``persons.csv`` / the run's persons file name (and units likewise), as ``postproc synth1940``
writes them — on the run's geography and schema, and prints per level and for ``total`` and every
query of the run's workload the median absolute error (MAE), mean absolute error, RMSE and the
EPL (improved estimator by default) with its interval. The data must be the ones the run
measured: they are checked against the run's ``confidential/`` fingerprint. The estimator's
options are those of ``postproc epl`` (``--reach``, ``--precision``, ``--bandwidth``,
``--n-boot`` for the improved one; ``--percentile``, ``--multiplier``, ``--bandwidth`` for the
published one); the reasons an EPL is undefined are collapsed into one note per kind, with a
count.

``--json`` prints one object keyed by level, then query (``total``, ``detailed``, ``hhgq``,
``va_hisp_race``, …), each with ``mae``, ``mean_abs``, ``rmse``, ``epl`` and the other metrics; an
EPL that is undefined because every error is zero (an invariant level) is ``null`` with an
``epl_reason``. The run may be of any registered post-processor (``postproc run --method``).
With ``--compare`` the object is keyed by method first: the run's own method (``topdown``, …),
``noisy``, ``clip``, ``hay``, ``hay+clip``, ``bottom_up``, ``bottom_up+calibrated`` (see
:func:`postproc.evaluation.evaluate.compare_postprocessors`; ``postproc compare`` compares any registered
methods on fresh measurements of a configuration). ``--save`` also writes
``OUTDIR/confidential/evaluation.csv`` (or ``comparison.csv``) and the JSON next to it, for
``postproc report`` — under ``confidential/``, never beside the release files.
"""

from __future__ import annotations

import argparse
from typing import Any

ORDER = 30


def register(subparsers: Any) -> None:
    """Add ``evaluate`` to the ``postproc`` parser."""
    p = subparsers.add_parser(
        "evaluate", help="error and empirical privacy loss of a run against the truth",
        description="Per level and query: MAE (median absolute error), mean absolute error, "
                    "RMSE and empirical privacy loss (EPL) of a `postproc run` output against "
                    "the confidential data. EPL is null (undefined) where every error is zero, "
                    "e.g. at levels whose totals are invariant.")
    p.add_argument("outdir", help="output directory of `postproc run`")
    p.add_argument("--truth", required=True, metavar="DATA",
                   help="the run's input data: the persons file (CSV or parquet, any name), or "
                        "a directory with persons.parquet or persons.csv (and units)")
    p.add_argument("--units", metavar="FILE",
                   help="the units file (default: the directory's units file; none with a "
                        "persons file)")
    p.add_argument("--json", action="store_true",
                   help="print JSON: level -> query -> {mae, mean_abs, rmse, epl, ...}")
    p.add_argument("--compare", action="store_true",
                   help="also evaluate the raw measurements, clipping, closed-form least squares "
                        "and bottom-up at the same ε beside the run's method (keyed by method; "
                        "postproc compare compares any registered methods)")
    p.add_argument("--save", action="store_true",
                   help="write OUTDIR/confidential/evaluation.csv (comparison.csv with "
                        "--compare) and .json")
    p.add_argument("--queries", metavar="Q1,Q2",
                   help="comma-separated queries (default: total and every workload query)")
    add_epl_arguments(p)
    p.add_argument("--seed", type=int, default=0, metavar="S",
                   help="seed of the EPL interval draws and of bottom-up's noise with --compare "
                        "(default 0; comparisons are simulations, never releases)")
    p.set_defaults(func=run)


def add_epl_arguments(parser: argparse.ArgumentParser) -> None:
    """The EPL estimator's options, as ``postproc epl`` names them, prefixed by ``--epl-method``.

    Examples
    --------
    >>> parser = argparse.ArgumentParser()
    >>> add_epl_arguments(parser)
    >>> epl_options(parser.parse_args(["--reach", "90", "--precision", "0.2"]))
    ('improved', {'reach': 90.0, 'precision': 0.2})
    """
    parser.add_argument("--epl-method", choices=["improved", "published"], default="improved",
                        help="EPL estimator (default improved)")
    parser.add_argument("--n-boot", type=int, default=None, metavar="B",
                        help="improved: draws that calibrate the EPL interval (default 1000; 0 "
                             "for none)")
    parser.add_argument("--reach", type=float, metavar="R",
                        help="improved: percentile of the window's edges (default 95; smaller "
                             "when an EPL is undefined for too few errors)")
    parser.add_argument("--precision", type=float, metavar="F",
                        help="improved: largest relative standard error of a ratio that could "
                             "be the largest, else undefined (default 0.1)")
    parser.add_argument("--bandwidth", type=float, metavar="H",
                        help="improved: bin width in counts (default 1); published: scipy's "
                             "bandwidth factor (default 0.1)")
    parser.add_argument("--percentile", type=float, metavar="P",
                        help="published: percentile window (default 95)")
    parser.add_argument("--multiplier", type=float, metavar="M",
                        help="published: window half-width multiplier (default 1)")


def epl_options(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    """The estimator and its options from :func:`add_epl_arguments`'s arguments.

    Raises
    ------
    PostprocError
        A negative ``--n-boot``, or an option of the other estimator.

    Examples
    --------
    >>> args = argparse.Namespace(epl_method="published", n_boot=None, reach=90.0,
    ...                           precision=None, bandwidth=None, percentile=None,
    ...                           multiplier=None)
    >>> epl_options(args)
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: --reach applies to --epl-method improved only; the published estimator takes --percentile, --multiplier and --bandwidth
    """
    from postproc.errors import PostprocError

    own = {"improved": ("n_boot", "reach", "precision", "bandwidth"),
           "published": ("percentile", "multiplier", "bandwidth")}
    method = args.epl_method
    other = "published" if method == "improved" else "improved"
    for name in own[other]:
        if name not in own[method] and getattr(args, name) is not None:
            flags = ", ".join(f"--{n.replace('_', '-')}" for n in own[method])
            flags = " and".join(flags.rsplit(",", 1))
            raise PostprocError(f"--{name.replace('_', '-')} applies to --epl-method {other} "
                                f"only; the {method} estimator takes {flags}")
    if getattr(args, "n_boot", None) is not None and args.n_boot < 0:
        raise PostprocError("--n-boot must be a non-negative integer")
    return method, {name: getattr(args, name) for name in own[method]
                    if getattr(args, name) is not None}


def _text(table) -> str:
    import math

    import pandas as pd

    from postproc.evaluation.evaluate import epl_notes

    marks, notes = epl_notes(table)
    mark = dict(zip(table.index, marks))

    def epl(row) -> str:
        if not math.isfinite(row["epl"]):
            return f"undefined [{mark[row.name]}]"
        interval = (f" [{row['epl_ci_low']:.3g}, {row['epl_ci_high']:.3g}]"
                    if math.isfinite(row["epl_ci_low"]) else "")
        return f"{row['epl']:.3g}{interval}"

    show = pd.DataFrame({
        **({"method": table["method"]} if "method" in table else {}),
        "level": table["level"], "query": table["query"], "n": table["n"],
        "MAE": table["mae"].map(lambda v: f"{v:,.2f}"),
        "mean|e|": table["mean_abs"].map(lambda v: f"{v:,.2f}"),
        "RMSE": table["rmse"].map(lambda v: f"{v:,.2f}"),
        "EPL [95% interval]": table.apply(epl, axis=1)})
    lines = [show.to_string(index=False), "",
             f"MAE = median absolute error; EPL = {table['epl_method'].iloc[0]} estimator on the "
             f"pooled errors of each level and query."]
    lines += notes
    if any("every error is" not in line for line in notes):
        lines.append("The estimator's options: --reach, --precision, --bandwidth, --n-boot "
                     "(improved); --percentile, --multiplier, --bandwidth (--epl-method "
                     "published).")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Run ``postproc evaluate``."""
    import json

    from postproc.evaluation.evaluate import evaluate_run, to_json

    method, estimator = epl_options(args)
    options: dict[str, Any] = {"epl_method": method, "epl_options": estimator}
    if args.queries:
        options["queries"] = [q.strip() for q in args.queries.split(",") if q.strip()]
    table = evaluate_run(args.outdir, args.truth, units=args.units, compare_all=args.compare,
                         rng=args.seed, **options)
    nested = to_json(table)
    if args.save:
        from hierarchy.storage import atomic_path, confidential_directory

        stem = "comparison" if args.compare else "evaluation"
        out = confidential_directory(args.outdir, what="errors and EPL against the "
                                                      "confidential data")
        with atomic_path(out / f"{stem}.csv") as tmp:
            table.to_csv(tmp, index=False)
        with atomic_path(out / f"{stem}.json") as tmp:
            tmp.write_text(json.dumps(nested, indent=2, allow_nan=False) + "\n")
    if args.json:
        print(json.dumps(nested, indent=2, allow_nan=False))
    else:
        print(_text(table))
        if args.save:
            print(f"\nwrote {out / (stem + '.csv')} and .json (CONFIDENTIAL - do not publish)")
    return 0
