"""The plan of a run in parts (:mod:`postproc.apps.runs.parts`): the checks made before any
data is read, the split level cut into parts from the public geography, and each part's
geography under a root of its own.

Examples
--------
>>> geo = Geography(("n", "t", "b"), (["0"], ["1", "2", "3"], list("abcdef")),
...                 ([-1], [0, 0, 0], [0, 0, 0, 1, 2, 2]))
>>> [part_geography(geo, 1, first, stop).geocodes[1].tolist()
...  for first, stop in plan_parts(geo, 1, 3)]
[['1'], ['2', '3']]
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from hierarchy.geography import Geography
from hierarchy.measurement import ancestor_offsets
from postproc.apps.runs.config import RunConfig
from postproc.errors import PostprocError

__all__ = ["plan_parts", "part_geography", "DEFAULT_PART_BLOCKS", "PART_ROOT"]

#: Bottom-level units per part by default: about 0.8 million persons at 2020 densities and
#: 0.3 GiB per dense array of the part's bottom level.
DEFAULT_PART_BLOCKS = 20_000
#: The name of a part's root level (a level no geography of ours has).
PART_ROOT = "part"


def plan_parts(geography: Geography, split: int, max_blocks: int) -> list[tuple[int, int]]:
    """Cut the split level into runs of consecutive units with at most ``max_blocks``
    bottom-level units below each run (a unit with more is a part of its own).

    Returns
    -------
    list of (first, stop) split-level unit ranges, in order, covering the level.

    Examples
    --------
    >>> geo = Geography(("n", "t", "b"), (["0"], ["1", "2", "3"], list("abcdef")),
    ...                 ([-1], [0, 0, 0], [0, 0, 0, 1, 2, 2]))
    >>> plan_parts(geo, 1, 3), plan_parts(geo, 1, 2), plan_parts(geo, 1, 100)
    ([(0, 1), (1, 3)], [(0, 1), (1, 2), (2, 3)], [(0, 3)])
    """
    offsets = ancestor_offsets(geography, geography.depth - 1, split)
    n = offsets.size - 1
    out, first = [], 0
    for u in range(1, n):
        if offsets[u + 1] - offsets[first] > max_blocks:
            out.append((first, u))
            first = u
    out.append((first, n))
    return out


def part_geography(geography: Geography, split: int, first: int, stop: int) -> Geography:
    """The geography of split-level units ``first:stop`` and everything below them, under a
    root unit of its own (level :data:`PART_ROOT`, geocode ``"<first>-<stop>"``).

    Examples
    --------
    >>> geo = Geography(("n", "t", "b"), (["0"], ["1", "2", "3"], list("abcdef")),
    ...                 ([-1], [0, 0, 0], [0, 0, 0, 1, 2, 2]))
    >>> part = part_geography(geo, 1, 1, 3)
    >>> part.levels, part.geocodes[1].tolist(), part.geocodes[2].tolist(), part.parents[2].tolist()
    (('part', 't', 'b'), ['2', '3'], ['d', 'e', 'f'], [0, 1, 1])
    """
    levels = (PART_ROOT,) + geography.levels[split:]
    codes = [np.array([f"{first}-{stop}"], dtype=object)]
    parents = [np.array([-1])]
    lo, hi = first, stop
    codes.append(geography.geocodes[split][lo:hi])
    parents.append(np.zeros(hi - lo, np.int64))
    for li in range(split + 1, geography.depth):
        offsets = geography.child_offsets(li - 1)
        clo, chi = int(offsets[lo]), int(offsets[hi])
        codes.append(geography.geocodes[li][clo:chi])
        parents.append(geography.parents[li][clo:chi] - lo)
        lo, hi = clo, chi
    return Geography(levels, tuple(codes), tuple(parents))


@dataclass(frozen=True)
class _Run:
    """A run in parts as its steps see it: the configuration, the claimed directory, the whole
    geography, the split level (its name and index), the plan (:func:`plan_parts`) and the
    caller's options (see :func:`~postproc.apps.runs.parts.run_in_parts`)."""

    config: RunConfig
    directory: Path
    geo: Geography
    split: str
    s: int
    plan: list[tuple[int, int]]
    part_blocks: int
    all_answers: bool = False
    resume: bool = False
    progress: bool = False
    log: Callable[[str], None] = print

    @property
    def top_levels(self) -> tuple[str, ...]:
        """The levels from the root to the split level, solved as one hierarchy."""
        return self.geo.levels[:self.s + 1]

    @property
    def low_levels(self) -> tuple[str, ...]:
        """The levels below the split level, solved part by part."""
        return self.geo.levels[self.s + 1:]

    @property
    def parts_dir(self) -> Path:
        """Where the parts' files and markers are written until they are joined."""
        return self.directory / "parts"


def _check(config: RunConfig, split: str, part_blocks: int,
           methods: Sequence[str] | None = ("topdown",)) -> tuple[Geography, int]:
    """The whole geography and the split level's index, or a PostprocError saying why not
    (``methods``: the configured methods the caller runs; None: it does not read the
    method)."""
    if methods is not None and config.method not in methods:
        raise PostprocError(f"a run in parts runs TopDown, not {config.method!r}")
    if config.blocks is None:
        raise PostprocError("a run in parts needs [data] blocks: the geography, every block, "
                            "is cut into parts before any data is read")
    for path in (config.persons, config.units):
        if path is not None and path.suffix.lower() not in (".parquet", ".pq"):
            raise PostprocError(f"a run in parts reads its parts from parquet files; "
                                f"{path.name} is not parquet (convert it, e.g. with "
                                "pandas.read_csv(...).to_parquet(...))")
    if isinstance(part_blocks, bool) or not isinstance(part_blocks, (int, np.integer)) \
            or part_blocks < 1:
        raise PostprocError(f"part_blocks must be a positive integer, not {part_blocks!r}")
    geo = config.read_geography()
    if split not in geo.levels[1:-1]:
        raise PostprocError(f"the split level must be below the root and above the bottom: "
                            f"one of {list(geo.levels[1:-1])}, not {split!r}")
    return geo, geo.level_index(split)


def _count(n: int, noun: str) -> str:
    """``n`` and ``noun``, plural unless ``n`` is 1.

    >>> _count(1, "part"), _count(1_203, "part")
    ('1 part', '1,203 parts')
    """
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def _progress(enabled: bool, total: int, desc: str):
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="part")
