"""``postproc evaluate``: error and empirical privacy loss of a run against its confidential data.

``postproc evaluate OUTDIR --truth DATA_DIR [--json] [--compare] [--save]`` reads the run in
``OUTDIR`` (``manifest.json``, ``<level>.parquet``, ``noisy/``), tabulates the confidential data in
``DATA_DIR`` (``persons.parquet`` and ``units.parquet``, as ``postproc synth1940`` writes them) on
the run's geography and schema, and prints per level and query the median absolute error (MAE), mean
absolute error, RMSE and the EPL (improved estimator by default) with its interval. The data must
be the ones the run measured: they are checked against the run's ``confidential/`` fingerprint.

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
    p.add_argument("--truth", required=True, metavar="DATA_DIR",
                   help="directory with persons.parquet (and units.parquet) of the run's input")
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
    p.add_argument("--epl-method", choices=["improved", "published"], default="improved",
                   help="EPL estimator (default improved)")
    p.add_argument("--n-boot", type=int, default=None, metavar="B",
                   help="draws that calibrate the improved EPL interval (default 1000; 0 for none)")
    p.add_argument("--seed", type=int, default=0, metavar="S",
                   help="seed of the EPL interval draws and of bottom-up's noise with --compare "
                        "(default 0; comparisons are simulations, never releases)")
    p.set_defaults(func=run)


def _text(table) -> str:
    import math

    import pandas as pd

    reasons = list(dict.fromkeys(r for r in table["epl_reason"] if isinstance(r, str)))

    def epl(row) -> str:
        if not math.isfinite(row["epl"]):
            return f"undefined [{reasons.index(row['epl_reason']) + 1}]"
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
    lines += [f"[{i}] {reason}" for i, reason in enumerate(reasons, start=1)]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Run ``postproc evaluate``."""
    import json

    from postproc.evaluation.evaluate import evaluate_run, to_json
    from postproc.errors import PostprocError

    if args.n_boot is not None and args.n_boot < 0:
        raise PostprocError("--n-boot must be a non-negative integer")
    options: dict[str, Any] = {"epl_method": args.epl_method}
    if args.epl_method == "improved" and args.n_boot is not None:
        options["epl_options"] = {"n_boot": args.n_boot}
    if args.queries:
        options["queries"] = [q.strip() for q in args.queries.split(",") if q.strip()]
    table = evaluate_run(args.outdir, args.truth, compare_all=args.compare, rng=args.seed,
                         **options)
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
