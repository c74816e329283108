"""SafeTab-style adaptive tabulation on synthetic detailed 1940-style microdata.

Generates persons with sex, single-year age and detailed race/Hispanic-origin codes
(:func:`hierarchy.synth.detailed1940.write_synthetic_detailed_1940`; with each person's AIANNH
area, ``"9999"`` for none), runs the configuration ``examples/safetab_1940.toml`` on them — nation,
state, county and AIANNH-area levels of detailed and regional iterations, some crossing race with
Hispanic origin (:func:`postproc.apps.safetab.run_safetab`) — and prints the privacy accounting
(SafeTab's full algorithm), the realized adaptive choices and the accuracy report (theoretical MOE
next to the observed error against the truth; written to ``OUT/safetab/confidential/`` and, in
release mode, never printed)::

    python examples/safetab_1940.py [--persons 2000000] [--seed 1940] [--out safetab_example]
                                    [--json]

Writes ``OUT/data/persons.parquet`` (and ``units.parquet``) and the run in ``OUT/safetab``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

from hierarchy.synth.detailed1940 import write_synthetic_detailed_1940
from postproc.apps.safetab import load_safetab_config, run_safetab
from postproc.apps.safetab.report import format_accounting, format_choices, format_report

CONFIG = Path(__file__).with_name("safetab_1940.toml")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--persons", type=int, default=2_000_000, help="persons to generate")
    parser.add_argument("--seed", type=int, default=1940, help="seed of the synthetic data")
    parser.add_argument("--out", default="safetab_example", help="output directory")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)

    out = Path(args.out)
    started = time.perf_counter()
    data = write_synthetic_detailed_1940(out / "data", args.persons, seed=args.seed)
    generated = time.perf_counter() - started
    config = replace(load_safetab_config(CONFIG), persons=Path(data["persons_path"]),
                     synthetic=None)
    started = time.perf_counter()
    run = run_safetab(config, out=out / "safetab", overwrite=True)
    seconds = time.perf_counter() - started
    manifest = run.manifest
    choices = {name: level["choices"] for name, level in manifest["levels"].items()}
    if args.json:
        print(json.dumps({"directory": str(run.directory), "data": data,
                          "randomness": manifest["randomness"],
                          "accounting": manifest["accounting"], "choices": choices,
                          "accuracy": None if run.result.release else run.report,
                          "accuracy_report": str(run.report_path) if run.report_path else None,
                          "seconds": seconds}, indent=2, default=str))
        return 0
    print(f"{data['persons']:,} synthetic persons generated in {generated:.1f} s "
          f"({data['persons_per_second'] / 1e6:.1f}M/s); SafeTab run in {seconds:.1f} s")
    print(f"randomness: {manifest['randomness']['label']}")
    print()
    print(format_accounting(manifest["accounting"], manifest["levels"]))
    print()
    print(format_choices(choices))
    if run.report is not None:
        print()
        if run.result.release:     # computed from the confidential data: never printed then
            print(f"accuracy report (CONFIDENTIAL): {run.report_path}")
        else:
            print(format_report(run.report))
    print()
    print(f"outputs in {run.directory}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
