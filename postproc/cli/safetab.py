"""``postproc safetab CONFIG [--out DIR] [--overwrite] [--accounting full|as_released] [--json]``:
SafeTab-style tabulation.

Reads the configuration (:func:`postproc.apps.safetab.load_safetab_config`), runs
:func:`postproc.apps.safetab.run_safetab` and prints the privacy accounting — by default SafeTab's
full algorithm's (every level charged as if its groups could be TotalOnly at the full group
budget; ``--accounting as_released``, or ``[accounting] algorithm``, charges only what each level
released) — the adaptive choices and, when enabled, the accuracy report; ``--json`` prints one
JSON object instead, with keys ``directory``, ``randomness``, ``accounting``, ``levels`` (plan
and choices per level), ``accuracy`` (the report, or null) and ``accuracy_report`` (its file, or
null).

In release mode nothing computed from the confidential data is printed: not the accuracy report
(only where its file is, under ``DIR/confidential/``) and not the number of records.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace

from postproc.cli._confidential import add_show_confidential

ORDER = 45


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``safetab`` to the ``postproc`` parser."""
    p = subparsers.add_parser(
        "safetab", help="SafeTab-style adaptive tabulation of detailed race/ethnicity groups",
        description="Population groups (geography x race/ethnicity iteration) release a noisy "
                    "total, then by thresholds on it the total or sex x Age4/Age9/Age23 counts. "
                    "Writes DIR/tables/<level>.parquet, DIR/choices/<level>.parquet, "
                    "DIR/manifest.json (accounting, choices, randomness) and, when enabled, "
                    "DIR/confidential/accuracy_report.json (computed from the confidential "
                    "data; never printed in release mode, never to be published).")
    p.add_argument("config", help="SafeTab configuration (TOML; see examples/safetab_1940.toml)")
    p.add_argument("--out", help="output directory (default: [output] directory of the config)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing output directory (only one this toolkit wrote)")
    p.add_argument("--accounting", choices=("full", "as_released"),
                   help="how to account the privacy loss: 'full' (SafeTab's full algorithm, "
                        "every level charged as if its groups could be TotalOnly at the full "
                        "group budget) or 'as_released' (only the kinds of group each level "
                        "released); default: [accounting] algorithm of the config, else 'full'")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    add_show_confidential(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``postproc safetab``."""
    from postproc.apps.safetab import load_safetab_config, run_safetab
    from postproc.apps.safetab.report import format_accounting, format_choices, format_report

    config = load_safetab_config(args.config)
    if args.accounting is not None:
        config = replace(config, accounting_algorithm=args.accounting)
    result = run_safetab(config, out=args.out, overwrite=True if args.overwrite else None,
                         show_confidential=args.show_confidential)
    manifest = result.manifest
    release = result.result.release
    report_file = str(result.report_path) if result.report_path is not None else None
    if args.json:
        print(json.dumps({"directory": str(result.directory),
                          "randomness": manifest["randomness"],
                          "accounting": manifest["accounting"],
                          "levels": manifest["levels"],
                          "accuracy": None if release else result.report,
                          "accuracy_report": report_file}, indent=2, default=str))
        return 0
    randomness = manifest["randomness"]
    print(f"randomness: {randomness['label']}")
    levels = manifest["levels"].values()
    records = "" if release else f"{manifest['records']:,} records; "
    print(f"{records}{sum(lv['groups'] for lv in levels):,} population groups; "
          f"{sum(lv['released_counts'] for lv in levels):,} released counts")
    print()
    print(format_accounting(manifest["accounting"], manifest["levels"]))
    print()
    print(format_choices({n: lv["choices"] for n, lv in manifest["levels"].items()}))
    if result.report is not None:
        print()
        if release:
            print(f"accuracy report (CONFIDENTIAL, computed from the true counts; not printed "
                  f"in release mode): {report_file} - keep it out of the release")
        else:
            print(format_report(result.report))
            print(f"(written to {report_file})")
    print()
    print(f"outputs in {result.directory}")
    return 0
