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
:func:`postproc.evaluation.evaluate.reference_results`; ``postproc compare`` compares any
registered methods on fresh measurements of a configuration). ``--save`` also writes
``OUTDIR/confidential/evaluation.csv`` (or ``comparison.csv``) and the JSON next to it, for
``postproc report`` — under ``confidential/``, never beside the release files.
"""

from __future__ import annotations

import argparse
from typing import Any

from postproc.cli._confidential import add_show_confidential
from postproc.cli._epl_options import add_epl_arguments, epl_options

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
    add_show_confidential(p)
    p.set_defaults(func=run)


def _text(table) -> str:
    import math

    import pandas as pd

    from postproc.evaluation.epl import epl_text
    from postproc.reports.notes import epl_notes

    marks, notes = epl_notes(table)
    mark = dict(zip(table.index, marks))

    def epl(row) -> str:
        text = epl_text(row["epl"], row["epl_ci_low"], row["epl_ci_high"])
        return text if math.isfinite(row["epl"]) else f"{text} [{mark[row.name]}]"

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
    import sys

    from postproc.apps.runs.directories import evaluate_run
    from postproc.evaluation.evaluate import to_json, write_evaluation
    from postproc.gate import printed_banner

    method, estimator = epl_options(args)
    options: dict[str, Any] = {"epl_method": method, "epl_options": estimator}
    if args.queries:
        options["queries"] = [q.strip() for q in args.queries.split(",") if q.strip()]
    table = evaluate_run(args.outdir, args.truth, units=args.units, compare_all=args.compare,
                         rng=args.seed, show_confidential=args.show_confidential, **options)
    if args.save:
        from hierarchy.io.storage import confidential_directory

        out = confidential_directory(args.outdir, what="errors and EPL against the "
                                                      "confidential data")
        saved = write_evaluation(table, out, stem="comparison" if args.compare
                                 else "evaluation")
    banner = printed_banner(table)
    if args.json:
        if banner:                    # stdout stays one JSON object
            print(banner, file=sys.stderr)
        print(json.dumps(to_json(table), indent=2, allow_nan=False))
    else:
        if banner:
            print(banner + "\n")
        print(_text(table))
        if args.save:
            print(f"\nwrote {saved[0]} and .json (CONFIDENTIAL - do not publish)")
    return 0

