"""Sex and age recodes of SafeTab's detailed tables, and the table types a group can release.

A group that is not ``TotalOnly`` releases, after thresholding its noisy total, one of four
tables (:data:`TABLE_TYPES`): the total, or sex × Age4, sex × Age9 or sex × Age23 counts. The
age recodes group single years of age (0-115) into intervals:

* **Age23** — the 23 standard census age groups (as in ``examples/data/gong_sex_age.csv``):
  <5, 5-9, 10-14, 15-17, 18-19, 20, 21, 22-24, 25-29, 30-34, 35-39, 40-44, 45-49, 50-54, 55-59,
  60-61, 62-64, 65-66, 67-69, 70-74, 75-79, 80-84, 85+;
* **Age9** — <5, 5-17, 18-24, 25-34, 35-44, 45-54, 55-64, 65-74, 75+;
* **Age4** — <18, 18-44, 45-64, 65+.

Every boundary of Age4 and Age9 is a boundary of Age23, so both are coarsenings of Age23
(:meth:`AgeRecode.from_age23`): the truth is tabulated once by sex × Age23 and summed.
Sex is coded 1 male, 2 female (index 0 and 1 here); cell labels read ``"female:22-24"``.

Examples
--------
>>> AGE9.labels[:3], AGE4.index([0, 17, 18, 44, 45, 64, 65, 115]).tolist()
(('<5', '5-17', '18-24'), [0, 0, 1, 1, 2, 2, 3, 3])
>>> cell_labels("sex_age4")[:2]
('male:<18', 'male:18-44')
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from postproc.errors import ConfidentialInputError, PostprocError

__all__ = ["AgeRecode", "AGE4", "AGE9", "AGE23", "AGE_RECODES", "MAX_AGE", "SEXES",
           "TABLE_TYPES", "DETAILED_TABLES", "cell_labels", "STAT_LABELS", "stat_offset"]

#: Oldest single-year age accepted.
MAX_AGE = 115
#: Sex labels, in code order (code 1 is male, 2 female).
SEXES = ("male", "female")


@dataclass(frozen=True)
class AgeRecode:
    """Single years of age 0..:data:`MAX_AGE` grouped into consecutive intervals.

    Parameters
    ----------
    name : str
        E.g. ``"age9"``.
    lower : tuple of int
        The first age of each group, strictly increasing, starting at 0 (the last group ends at
        :data:`MAX_AGE`).
    labels : tuple of str
        One label per group.

    Raises
    ------
    PostprocError
        If the bounds do not start at 0, do not increase, exceed :data:`MAX_AGE`, or the labels
        do not match them.

    Examples
    --------
    >>> AgeRecode("halves", (0, 18), ("<18", "18+")).index([3, 30]).tolist()
    [0, 1]
    >>> AgeRecode("bad", (5, 18), ("a", "b"))
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: age recode 'bad': the first group must start at age 0, not 5
    """

    name: str
    lower: tuple[int, ...]
    labels: tuple[str, ...]

    def __post_init__(self):
        lower = tuple(int(x) for x in self.lower)
        if not lower or lower[0] != 0:
            first = lower[0] if lower else None
            raise PostprocError(f"age recode {self.name!r}: the first group must start at "
                                f"age 0, not {first}")
        if any(b <= a for a, b in zip(lower, lower[1:])) or lower[-1] > MAX_AGE:
            raise PostprocError(f"age recode {self.name!r}: group starts {list(lower)} must "
                                f"increase strictly and stay at most {MAX_AGE}")
        if len(self.labels) != len(lower):
            raise PostprocError(f"age recode {self.name!r}: {len(lower)} groups but "
                                f"{len(self.labels)} labels")
        object.__setattr__(self, "lower", lower)
        object.__setattr__(self, "labels", tuple(self.labels))

    @property
    def size(self) -> int:
        """Number of age groups."""
        return len(self.lower)

    def index(self, age) -> np.ndarray:
        """The group (0-based) of each single-year age.

        Parameters
        ----------
        age : array_like of int
            Ages in 0..:data:`MAX_AGE`.

        Returns
        -------
        numpy.ndarray of intp

        Raises
        ------
        PostprocError
            If an age is outside 0..:data:`MAX_AGE`.

        Examples
        --------
        >>> AGE23.index([0, 4, 5, 20, 21, 85, 115]).tolist()
        [0, 0, 1, 5, 6, 22, 22]
        """
        a = np.asarray(age)
        if a.size and (a.min() < 0 or a.max() > MAX_AGE):
            raise ConfidentialInputError(
                f"ages must be in 0..{MAX_AGE}, got values from {a.min()} to {a.max()}",
                public=f"ages must be in 0..{MAX_AGE}; some are not")
        return np.searchsorted(np.asarray(self.lower), a, side="right") - 1

    def from_age23(self) -> np.ndarray:
        """For each Age23 group, the group of this recode that contains it.

        Returns
        -------
        numpy.ndarray of intp, length 23

        Raises
        ------
        PostprocError
            If a group boundary of this recode is not an Age23 boundary.

        Examples
        --------
        >>> AGE4.from_age23().tolist()
        [0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3]
        """
        missing = sorted(set(self.lower) - set(AGE23.lower))
        if missing:
            raise PostprocError(f"age recode {self.name!r} is not a coarsening of Age23: its "
                                f"groups start at {missing}, which Age23 splits")
        return self.index(np.asarray(AGE23.lower))


AGE23 = AgeRecode("age23", (0, 5, 10, 15, 18, 20, 21, 22, 25, 30, 35, 40, 45, 50, 55, 60, 62, 65,
                            67, 70, 75, 80, 85),
                  ("<5", "5-9", "10-14", "15-17", "18-19", "20", "21", "22-24", "25-29", "30-34",
                   "35-39", "40-44", "45-49", "50-54", "55-59", "60-61", "62-64", "65-66",
                   "67-69", "70-74", "75-79", "80-84", "85+"))
AGE9 = AgeRecode("age9", (0, 5, 18, 25, 35, 45, 55, 65, 75),
                 ("<5", "5-17", "18-24", "25-34", "35-44", "45-54", "55-64", "65-74", "75+"))
AGE4 = AgeRecode("age4", (0, 18, 45, 65), ("<18", "18-44", "45-64", "65+"))
AGE_RECODES = {"age4": AGE4, "age9": AGE9, "age23": AGE23}

#: What a group releases: ``total_only`` (a TotalOnly group's one count, with the whole group
#: budget), or after thresholding ``total``, ``sex_age4``, ``sex_age9``, ``sex_age23``.
TABLE_TYPES = ("total_only", "total", "sex_age4", "sex_age9", "sex_age23")
#: The tables chosen by the thresholds, in order: noisy total < θ1, [θ1, θ2), [θ2, θ3), ≥ θ3.
DETAILED_TABLES = ("total", "sex_age4", "sex_age9", "sex_age23")


def cell_labels(table: str) -> tuple[str, ...]:
    """The statistic labels of a table type, in release order (sex slowest).

    Parameters
    ----------
    table : str
        One of :data:`TABLE_TYPES`.

    Returns
    -------
    tuple of str

    Raises
    ------
    PostprocError
        On an unknown table type.

    Examples
    --------
    >>> cell_labels("total"), len(cell_labels("sex_age23"))
    (('total',), 46)
    >>> cell_labels("sex_age23")[23]
    'female:<5'
    """
    if table in ("total_only", "total"):
        return ("total",)
    if table not in TABLE_TYPES:
        raise PostprocError(f"unknown table type {table!r}; valid: {list(TABLE_TYPES)}")
    recode = AGE_RECODES[table.removeprefix("sex_")]
    return tuple(f"{sex}:{label}" for sex in SEXES for label in recode.labels)


#: The statistics of every table, in order: ``total``, then the sex × Age4, Age9 and Age23 cells
#: (73 entries; a label shared by two tables, such as ``male:<5``, appears once for each).
STAT_LABELS: tuple[str, ...] = ("total",) + tuple(
    label for table in DETAILED_TABLES[1:] for label in cell_labels(table))


def stat_offset(table: str) -> int:
    """Index in :data:`STAT_LABELS` of the first cell of a table type.

    Examples
    --------
    >>> [stat_offset(t) for t in TABLE_TYPES]
    [0, 0, 1, 9, 27]
    >>> STAT_LABELS[stat_offset("sex_age9")]
    'male:<5'
    """
    if table in ("total_only", "total"):
        return 0
    offset = 1
    for name in DETAILED_TABLES[1:]:
        if name == table:
            return offset
        offset += len(cell_labels(name))
    raise PostprocError(f"unknown table type {table!r}; valid: {list(TABLE_TYPES)}")
