"""Tract-level errors of 2020-style runs against the truth, split by county size: the tracts of
counties with more than ``--min-tracts`` tracts (the ones ``group_children`` solves in two
stages) and the rest.

Run from the repository root, on a data directory of ``postproc synth2020`` and output
directories of runs on it (``postproc run``, ``--parts``, or ``bench_pl94_parts.py``'s)::

    python benchmarks/pl94_grouped_errors.py DATA_DIR RUN_DIR [RUN_DIR ...] [--min-tracts 64]

For each run: the mean over tracts of |TopDown − truth| of the total, of each hhgq type, each
Hispanic origin, each voting age × Hispanic origin and each detailed cell (means over tracts and
categories), in the large counties' tracts / the others'. The truth is tabulated here from the
persons file. Confidential figures: for simulations on synthetic data only. Nothing is asserted.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

CELL = ["hhgq", "votingage", "hispanic", "cenrace"]
SHAPE = (8, 2, 2, 63)
#: statistic → the axes of (hhgq, votingage, hispanic, cenrace) it sums over
STATISTICS = {"total": (1, 2, 3, 4), "hhgq": (2, 3, 4), "hispanic": (1, 2, 4),
              "votingage × hispanic": (1, 4), "detailed": ()}


def tract_histograms(frame: pd.DataFrame, index: dict[str, int], n: int) -> np.ndarray:
    """Tracts × hhgq × votingage × hispanic × cenrace from rows of (tract, cell, count)."""
    out = np.zeros((n, *SHAPE))
    rows = frame["tract"].astype(str).map(index).to_numpy()
    out[(rows, *(frame[c].to_numpy() for c in CELL))] = frame["count"].to_numpy()
    return out


def errors(run: np.ndarray, truth: np.ndarray, large: np.ndarray) -> dict[str, tuple]:
    """statistic → (mean |error| in the large counties' tracts, in the others')."""
    diff = run - truth
    out = {}
    for name, axes in STATISTICS.items():
        e = np.abs(diff.sum(axis=axes) if axes else diff).reshape(len(diff), -1)
        out[name] = (float(e[large].mean()), float(e[~large].mean()))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data")
    parser.add_argument("runs", nargs="+")
    parser.add_argument("--min-tracts", type=int, default=64)
    args = parser.parse_args(argv)
    data = Path(args.data)
    blocks = pq.read_table(data / "blocks.parquet", columns=["county", "tract"]).to_pandas()
    blocks = blocks.astype(str).drop_duplicates()
    per_county = blocks.groupby("county").size()
    tracts = sorted(blocks["tract"].unique())
    index = {t: i for i, t in enumerate(tracts)}
    large_tracts = set(blocks.loc[blocks["county"].map(per_county) > args.min_tracts, "tract"])
    large = np.array([t in large_tracts for t in tracts])
    persons = pq.read_table(data / "persons.parquet", columns=["tract", *CELL]).to_pandas()
    persons["tract"] = persons["tract"].astype(str)
    truth = tract_histograms(persons.groupby(["tract", *CELL], observed=True).size()
                             .rename("count").reset_index(), index, len(tracts))
    del persons
    print(f"{int(large.sum()):,} of {len(tracts):,} tracts are in counties of more than "
          f"{args.min_tracts} tracts. Mean |error|, those tracts / the others:\n")
    print("| run | " + " | ".join(STATISTICS) + " |")
    print("|---|" + "---:|" * len(STATISTICS))
    for run in args.runs:
        table = pq.read_table(Path(run) / "tract.parquet").to_pandas()
        result = errors(tract_histograms(table, index, len(tracts)), truth, large)
        print(f"| {run} | " + " | ".join(f"{a:.3f} / {b:.3f}" for a, b in result.values())
              + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
