"""Whether two run directories hold the same histograms, level by level.

Run from the repository root::

    python benchmarks/same_histograms.py DIR_A DIR_B

Both are output directories of ``postproc run`` (with or without ``--parts``): the script reads
every level's ``<level>.parquet`` of each (the levels of ``DIR_A``'s manifest) and compares the
sets of (unit, cell, count) rows, whatever their order. It prints one line per level and exits
with status 1 if any level differs.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def same_level(a: Path, b: Path, level: str) -> bool:
    """Whether ``a/<level>.parquet`` and ``b/<level>.parquet`` hold the same rows."""
    import pyarrow.parquet as pq

    frames = []
    for directory in (a, b):
        frame = pq.read_table(directory / f"{level}.parquet").to_pandas()
        frame[level] = frame[level].astype(str)
        frames.append(frame.sort_values(list(frame.columns[:-1])).reset_index(drop=True))
    return bool(frames[0].equals(frames[1]))


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    a, b = Path(args[0]), Path(args[1])
    levels = json.loads((a / "manifest.json").read_text())["geography_levels"]
    differ = []
    for level in levels:
        same = same_level(a, b, level)
        print(f"{level}: {'identical' if same else 'DIFFERENT'}")
        if not same:
            differ.append(level)
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
