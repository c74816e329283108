"""The published 2020 P.L. 94-171 tables' variables as linear functionals of the PL 94
histogram (hhgq × votingage × hispanic × cenrace, 2,016 cells), so a run's blocks can be
added up to any published count (``postproc nmf compare --published``).

The tables (the Census Bureau's 2020 redistricting data, variables as its API names them):

- **P1** Race: ``P1_001N`` total; ``P1_002N`` population of one race, ``P1_003N``–``P1_008N``
  the six races alone; ``P1_009N`` two or more races; ``P1_010N`` two races and
  ``P1_011N``–``P1_025N`` its 15 combinations; ``P1_026N`` three races and
  ``P1_027N``–``P1_046N``; ``P1_047N`` four races and ``P1_048N``–``P1_062N``; ``P1_063N``
  five races and ``P1_064N``–``P1_069N``; ``P1_070N`` six races and ``P1_071N``. The races
  and their combinations in the order of the ``cenrace`` recode (White, Black, AIAN, Asian,
  NHPI, Some Other Race; combinations in that order), which is the tables' order.
- **P2** Hispanic or Latino, and not Hispanic or Latino by race: ``P2_001N`` total,
  ``P2_002N`` Hispanic or Latino, ``P2_003N`` not Hispanic or Latino, and ``P2_004N``–
  ``P2_073N`` the not Hispanic or Latino population by race as P1's ``P1_002N``–``P1_071N``.
- **P3**, **P4**: P1 and P2 for the population 18 years and over.
- **P5** Group quarters population by major type: ``P5_001N`` all, ``P5_002N``
  institutionalized (``P5_003N`` correctional facilities for adults, ``P5_004N`` juvenile
  facilities, ``P5_005N`` nursing facilities, ``P5_006N`` other institutional),
  ``P5_007N`` noninstitutionalized (``P5_008N`` college/university student housing,
  ``P5_009N`` military quarters, ``P5_010N`` other noninstitutional).

``total`` is accepted for ``P1_001N``. The housing table H1 counts housing units, not persons
(the units' product): not here.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Sequence

import numpy as np
import scipy.sparse as sp

from hierarchy.presets.pl94 import PL94_2020
from postproc.errors import PostprocError

__all__ = ["variable_matrix", "variable_label", "is_variable"]

_NAME = re.compile(r"^(P[1-5])_(\d{3})N$")
#: Header lines of P1 (and P3) → the number of races they sum over (0: every race; -2: two or
#: more); the lines after each header up to the next are its combinations, in order.
_HEADERS = {1: 0, 2: 1, 9: -2, 10: 2, 26: 3, 47: 4, 63: 5, 70: 6}
_LAST = {"P1": 71, "P2": 73, "P3": 71, "P4": 73, "P5": 10}
#: P5's lines → the hhgq codes they count (1–7: the group quarters types).
_P5 = {1: range(1, 8), 2: range(1, 5), 3: [1], 4: [2], 5: [3], 6: [4], 7: range(5, 8), 8: [5],
       9: [6], 10: [7]}


def is_variable(name: str) -> bool:
    """Whether ``name`` is a variable of P1–P5 (or ``total``).

    Examples
    --------
    >>> is_variable("P1_003N"), is_variable("total"), is_variable("P1_072N"), is_variable("H1_001N")
    (True, True, False, False)
    """
    m = _NAME.fullmatch(name)
    return name == "total" or (m is not None and 1 <= int(m[2]) <= _LAST[m[1]])


def _races(line: int) -> np.ndarray:
    """The cenrace codes P1's ``line`` counts."""
    labels = PL94_2020.attributes[-1].labels
    size = np.array([str(label).count("-") + 1 for label in labels])
    if line in _HEADERS:
        k = _HEADERS[line]
        return np.flatnonzero(size >= 1 if k == 0 else size >= 2 if k == -2 else size == k)
    header = max(h for h in _HEADERS if h < line)
    k = _HEADERS[header]
    return np.flatnonzero(size == k)[[line - header - 1]]


def _mask(name: str) -> tuple[np.ndarray, ...]:
    """Which values of each attribute (hhgq, votingage, hispanic, cenrace) ``name`` counts."""
    m = _NAME.fullmatch("P1_001N" if name == "total" else name)
    if m is None or not is_variable(name):
        raise PostprocError(f"{name!r} is not a variable of the P.L. 94-171 tables P1–P5 "
                            "(e.g. P1_001N, P2_002N, P5_003N) or total")
    table, line = m[1], int(m[2])
    hhgq, age, hispanic, race = (np.ones(n, bool) for n in PL94_2020.shape)
    if table == "P5":
        hhgq[:] = False
        hhgq[list(_P5[line])] = True
        return hhgq, age, hispanic, race
    if table in ("P3", "P4"):
        age[0] = False                       # 18 and over
    if table in ("P2", "P4") and line > 1:
        hispanic[:] = False
        hispanic[1 if line == 2 else 0] = True
        if line <= 3:
            return hhgq, age, hispanic, race
        line -= 2                            # the not Hispanic lines mirror P1's
    if line > 1:
        race[:] = False
        race[_races(line)] = True
    return hhgq, age, hispanic, race


@lru_cache(maxsize=512)
def _row(name: str) -> np.ndarray:
    hhgq, age, hispanic, race = _mask(name)
    return np.einsum("a,b,c,d->abcd", hhgq, age, hispanic, race).ravel()


def variable_matrix(names: Sequence[str]) -> sp.csr_matrix:
    """The variables ``names`` as rows over the 2,016 cells (0/1).

    Examples
    --------
    >>> m = variable_matrix(["total", "P1_003N", "P1_009N", "P2_002N", "P4_005N", "P5_001N"])
    >>> m.shape, m.sum(axis=1).A1.astype(int).tolist()      # cells each counts
    ((6, 2016), [2016, 32, 1824, 1008, 8, 1764])
    """
    return sp.csr_matrix(np.array([_row(str(n)) for n in names], dtype=np.float64))


def variable_label(name: str) -> str:
    """A readable description of a variable.

    Examples
    --------
    >>> variable_label("P4_013N")
    'P4_013N: 18 and over, Not Hispanic or Latino, races white-black'
    >>> variable_label("P5_002N")
    'P5_002N: group quarters Correctional facilities for adults, Juvenile faciliti...'
    """
    hhgq, age, hispanic, race = _mask(name)
    parts = []
    attributes = PL94_2020.attributes
    if not hhgq.all():
        parts.append("group quarters " + ", ".join(str(x) for x in
                                                   np.asarray(attributes[0].labels)[hhgq]))
    if not age.all():
        parts.append(str(np.asarray(attributes[1].labels)[age][0]))
    if not hispanic.all():
        parts.append(str(np.asarray(attributes[2].labels)[hispanic][0]))
    if not race.all():
        chosen = [str(x) for x in np.asarray(attributes[3].labels)[race]]
        parts.append("races " + (", ".join(chosen) if len(chosen) <= 3 else
                                 f"{chosen[0]} … {chosen[-1]} ({len(chosen)})"))
    text = f"{'P1_001N' if name == 'total' else name}: " + (", ".join(parts) or "everyone")
    return text if len(text) <= 80 else text[:77] + "..."
