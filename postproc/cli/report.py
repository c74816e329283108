"""``postproc report OUTDIR``: one self-contained HTML page of an output directory.

Writes ``OUTDIR/report.html`` for an experiment directory (what ran, the description, figures
with captions, tables, headline numbers), a ``postproc run`` directory (what ran, configuration,
levels, and the errors with their figures: by level and query, their distribution, the EPL and
the comparison written by ``postproc evaluate --save``) or a ``postproc compare`` directory.
PNGs are embedded, so the page can be moved or mailed on its own; long tables link to their CSV
next to it. A release-mode run's errors go only to ``OUTDIR/confidential/report.html``, with
``--confidential``. See :mod:`postproc.apps.runs.report`.
"""

from __future__ import annotations

import argparse
from typing import Any

ORDER = 36


def register(subparsers: Any) -> None:
    """Add ``report`` to the ``postproc`` parser."""
    p = subparsers.add_parser(
        "report", help="HTML report of an experiment or run output directory",
        description="Write OUTDIR/report.html: tables and figures of an experiment "
                    "(postproc experiment) or a run (postproc run, with postproc evaluate --save "
                    "results), self-contained.")
    p.add_argument("outdir", help="output directory")
    p.add_argument("--title", help="page title (default: the experiment's or the run's)")
    p.add_argument("--max-rows", type=int, default=25, metavar="N",
                   help="rows shown per table (default 25; the full CSV is linked)")
    p.add_argument("--confidential", action="store_true",
                   help="a run's errors against the confidential data, written to "
                        "OUTDIR/confidential/report.html (never to publish); a release-mode "
                        "run's OUTDIR/report.html never shows them")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``postproc report``."""
    from postproc.apps.runs.report import write_report
    from postproc.errors import PostprocError

    if args.max_rows < 1:
        raise PostprocError("--max-rows must be at least 1")
    path = write_report(args.outdir, title=args.title, max_rows=args.max_rows,
                        confidential=args.confidential)
    print(path if not args.confidential else f"{path} (CONFIDENTIAL - do not publish)")
    return 0
