"""Shared test fixtures: a catalogue of small hierarchy cases, built by name.

The model is cvxpy's ``tests/solver_test_helpers.py``: a catalogue of small problems that every
backend is run against. Here each case is a small confidential hierarchy on the 192-cell E2E
schema, its seeded simulated measurements and a spec, and every registered post-processor runs on
each of them (``tests/test_conformance.py``). The cases are the structural edge cases where
hierarchical post-processing breaks:

========================  =========================================================================
``normal``                nation → 3 states → 2–4 counties each; nothing published, no spec
``single_unit``           the root alone (one level), its totals and units published
``chain``                 nation → state → county → tract, every parent with one child
``unbalanced``            one state with 12 counties, one with a single county
``all_zero``              the ``normal`` geography with no persons and no housing units
``duplicate_invariants``  the E2E spec with its ``tot`` invariant and structural zeros declared
                          a second time (as a linear equality and a second structural zero)
``published``             ``tot`` and ``gqhh`` published at every level, and kept by the spec
========================  =========================================================================

Each is ``(truth, noisy, spec)``: a :class:`~hierarchy.histograms.Hierarchy` tabulated from a
hand-built persons table and housing-units table (every household and facility holds at least one
person, none of the E2E structural-zero types, so the truth satisfies every E2E constraint), a
:class:`~hierarchy.noisy.NoisyHierarchy` measured with seeded geometric noise (simulation mode)
under the E2E workload and budget split, and a :class:`~invariants.spec.Spec` (``None`` for
``normal``). Every case is small (a few hundred persons at most, 192 cells), so that every
post-processor runs on it in well under a second.

Use it from any test file::

    def test_something(make_case, case_name):     # case_name runs over CASE_NAMES
        truth, noisy, spec = make_case(case_name)

    def test_other(make_case):
        truth, noisy, spec = make_case("chain", epsilon=4, seed=3)

A literal repetition of an invariant (``Invariant("tot", …)`` twice) is refused by
:class:`~invariants.spec.Spec` itself, with a message saying to list all its levels in one entry;
``duplicate_invariants`` states the same invariants twice in the forms a spec accepts.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Callable, NamedTuple

import numpy as np
import pandas as pd
import pytest

from hierarchy.budget import Budget
from hierarchy.geography import Geography
from hierarchy.histograms import Hierarchy
from hierarchy.measurement import measure
from hierarchy.noisy import NoisyHierarchy
from hierarchy.queries import e2e_workload
from hierarchy.schema import E2E_1940
from hierarchy.synth import write_synthetic_1940
from hierarchy.tabulation import tabulate
from invariants.spec import Constraint, Invariant, Spec

#: hhgq codes of the E2E schema that hold persons (1 correctional and 5 college are structural
#: zeros of the E2E spec); 0 is an occupied household.
FACILITY_TYPES = (2, 3, 4, 6, 7)


class Case(NamedTuple):
    """One case of the catalogue: unpack it as ``truth, noisy, spec``."""

    truth: Hierarchy
    noisy: NoisyHierarchy
    spec: Spec | None


def tree(levels: tuple[str, ...], children: list[list[int]]) -> Geography:
    """A geography from child counts: ``children[l][p]`` is the number of children of unit ``p``
    of level ``l``. Geocodes are the parent's geocode and a letter (``"0"`` at the root), so they
    are unique within a level and sort in storage order."""
    geocodes, parents = [np.array(["0"], dtype=object)], [np.array([-1])]
    for counts in children:
        above = geocodes[-1]
        if len(counts) != above.size:
            raise ValueError(f"{len(counts)} child counts for {above.size} units")
        parents.append(np.repeat(np.arange(above.size), counts))
        geocodes.append(np.array([f"{above[p]}{chr(ord('a') + k)}" for p, n in enumerate(counts)
                                  for k in range(n)], dtype=object))
    return Geography(levels, tuple(geocodes), tuple(parents))


def microdata(geography: Geography, rng: np.random.Generator, *, households: tuple[int, int],
              facility_rate: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Persons and housing-units tables for the bottom units of ``geography``.

    Every bottom unit gets ``households`` (low, high) occupied households of 1–4 persons each and,
    with probability ``facility_rate``, one group-quarters facility of a random non-structural-zero
    type with 2–6 residents; persons' votingage, hispanic and cenrace are random. Geocode columns
    are named after the levels (all levels but the root).
    """
    bottom = geography.n_units(-1)
    n_households = rng.integers(households[0], households[1] + 1, size=bottom)
    has_facility = rng.random(bottom) < facility_rate
    unit_leaf = np.concatenate([np.repeat(np.arange(bottom), n_households),
                                np.flatnonzero(has_facility)]).astype(np.int64)
    unit_type = np.concatenate([np.zeros(int(n_households.sum()), np.int64),
                                rng.choice(FACILITY_TYPES, size=int(has_facility.sum()))])
    residents = np.where(unit_type == 0, rng.integers(1, 5, size=unit_type.size),
                         rng.integers(2, 7, size=unit_type.size))
    person_leaf = np.repeat(unit_leaf, residents)
    persons = pd.DataFrame({
        "hhgq": np.repeat(unit_type, residents),
        "votingage": rng.integers(0, 2, size=person_leaf.size),
        "hispanic": (rng.random(person_leaf.size) < 0.2).astype(np.int64),
        "cenrace": rng.choice(6, size=person_leaf.size, p=[.6, .2, .05, .05, .05, .05])})
    units = pd.DataFrame({"hhgq": unit_type})
    for frame, leaf in ((persons, person_leaf), (units, unit_leaf)):
        for li in range(geography.depth - 1, 0, -1):
            frame.insert(0, geography.levels[li], geography.geocodes[li][leaf].astype(str))
            leaf = geography.parents[li][leaf]
    return persons, units


def e2e_like_spec(levels: tuple[str, ...]) -> Spec:
    """:meth:`Spec.e2e` for two levels or more; its one-level analogue for a root alone."""
    if len(levels) >= 2:
        return Spec.e2e(levels)
    return Spec(invariants=(Invariant("tot", "all"), Invariant("gqhh_vect", "all"),
                            Invariant("gqhh_tot", "all")),
                constraints=(Constraint("hhgq_total_lb", "all"),
                             Constraint("hhgq_total_ub", "all"),
                             Constraint("total_ge_households", "all"),
                             Constraint("structural_zeros", "all", type="structural_zero",
                                        query="recode(hhgq: correctional=1; college=5)")))


def published_by(spec: Spec | None, levels: tuple[str, ...]) -> dict[str, list[str]]:
    """What ``measure`` must publish for ``spec``: ``{"tot": [...], "gqhh": [...]}``."""
    if spec is None:
        return {}
    out = {stat: list(spec.invariant_levels(stat, levels)) for stat in ("tot", "gqhh")}
    return {stat: lv for stat, lv in out.items() if lv}


def duplicated(spec: Spec) -> Spec:
    """``spec`` with its ``tot`` invariant and structural zeros stated a second time: ``total ==
    tot`` as a linear constraint at the invariant's levels, and the same structural zeros under
    a second name."""
    (tot,) = [i for i in spec.invariants if i.name == "tot"]
    (zeros,) = [c for c in spec.constraints if c.type == "structural_zero"]
    return Spec(spec.invariants, spec.constraints + (
        Constraint("tot_again", tot.levels, type="linear", query="total", sense="==", rhs="tot"),
        Constraint("structural_zeros_again", zeros.levels, type="structural_zero",
                   query=zeros.query)))


THREE_LEVELS = ("nation", "state", "county")

#: name → (levels, children per level, households per bottom unit, facility rate, spec maker).
_SHAPES: dict[str, tuple[tuple[str, ...], list[list[int]], tuple[int, int], float,
                         Callable[[tuple[str, ...]], Spec | None]]] = {
    "normal": (THREE_LEVELS, [[3], [3, 2, 4]], (4, 10), 0.4, lambda levels: None),
    "single_unit": (("nation",), [], (20, 20), 1.0, e2e_like_spec),
    "chain": (("nation", "state", "county", "tract"), [[1], [1], [1]], (15, 15), 1.0,
              e2e_like_spec),
    "unbalanced": (THREE_LEVELS, [[2], [12, 1]], (3, 8), 0.3, e2e_like_spec),
    "all_zero": (THREE_LEVELS, [[3], [3, 2, 4]], (0, 0), 0.0, e2e_like_spec),
    "duplicate_invariants": (THREE_LEVELS, [[3], [3, 2, 4]], (4, 10), 0.4,
                             lambda levels: duplicated(Spec.e2e(levels))),
    "published": (THREE_LEVELS, [[3], [3, 2, 4]], (4, 10), 0.4,
                  lambda levels: Spec(
                      invariants=(Invariant("tot", "all"), Invariant("gqhh_vect", "all")),
                      constraints=(Constraint("hhgq_total_lb", "all"),
                                   Constraint("hhgq_total_ub", "all"),
                                   Constraint("total_ge_households", "all")))),
}

#: Names of the cases :func:`build_case` makes, in catalogue order.
CASE_NAMES: tuple[str, ...] = tuple(_SHAPES)


@functools.lru_cache(maxsize=None)
def build_case(name: str, *, seed: int = 0, epsilon: float = 1.0) -> Case:
    """The case ``name`` of the catalogue, its microdata drawn with ``seed`` and its geometric
    noise with ``seed + 1``, at total budget ``epsilon`` (E2E split, equal per level).

    Cached: the same arguments give the same (immutable) case objects; do not modify their arrays.
    """
    if name not in _SHAPES:
        raise KeyError(f"unknown case {name!r}; cases are {list(CASE_NAMES)}")
    levels, children, households, facility_rate, make_spec = _SHAPES[name]
    geography = tree(levels, children)
    persons, units = microdata(geography, np.random.default_rng(seed), households=households,
                               facility_rate=facility_rate)
    truth = tabulate(persons, schema=E2E_1940, levels=levels, units=units, geography=geography)
    spec = make_spec(levels)
    noisy = measure(truth, e2e_workload(E2E_1940), Budget.e2e(epsilon, levels), "geometric",
                    rng=seed + 1, publish=published_by(spec, levels), spec=spec)
    for hist in (*truth.counts, *truth.units):
        hist.flags.writeable = False
    return Case(truth, noisy, spec)


@pytest.fixture(scope="session")
def make_case() -> Callable[..., Case]:
    """``make_case(name, *, seed=0, epsilon=1.0) -> (truth, noisy, spec)`` (see
    :func:`build_case`)."""
    return build_case


def pytest_generate_tests(metafunc: Any) -> None:
    """A test that takes a ``case_name`` argument runs once per case of the catalogue, unless it
    parametrizes ``case_name`` itself."""
    own = {name.strip() for mark in metafunc.definition.iter_markers("parametrize")
           for name in (mark.args[0].split(",") if isinstance(mark.args[0], str)
                        else mark.args[0])}
    if "case_name" in metafunc.fixturenames and "case_name" not in own:
        metafunc.parametrize("case_name", CASE_NAMES)


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    """A directory of 20,000 synthetic 1940 persons and their units (seed 11), written once per
    test module: the data the tests of ``postproc run``'s resume and release safety run on
    (a module that defines its own ``data`` fixture uses that one)."""
    directory = tmp_path_factory.mktemp("data")
    write_synthetic_1940(directory, 20_000, seed=11)
    return directory
