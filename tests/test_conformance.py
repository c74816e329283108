"""Conformance of every registered post-processor on the catalogue of small cases.

The methods come from :func:`postproc.methods.catalogue` when this file is collected, so a newly
registered post-processor is run here without a line of new test code; the cases are the
catalogue of ``tests/conftest.py`` (single unit, one-child chain, unbalanced tree, all-zero
counts, duplicate invariants, published invariants, and a plain three-level case). For every
method × case:

* the result has one histogram array per level, with the geography's units and the schema's
  cells, and is labelled with the method's name and the measurements' randomness;
* it keeps every promise its entry declares, checked here from the truth and the published
  statistics with numpy (not with :mod:`invariants.verify`, which the registry already runs):
  integer dtype, no negative cell, every level equal to the sum of the level below, every
  invariant and constraint of the case's spec;
* a randomized method gives the same result for the same seed (an int or a numpy Generator) and
  a different one for another seed on at least one case; a deterministic one ignores ``rng``;
* ``write`` / ``read`` returns the same histograms, method, provenance and geography;
* ``to_frame`` has the schema's labels and each unit's parent geocodes, and holds the histograms;
* a method that does not keep invariants refuses a spec that has them, with a
  :class:`~postproc.errors.PostprocError` naming the method (it is then run without the spec);
* a spec that states an invariant twice gives the result of the spec that states it once.

Every result is computed once per (method, case, seed) and shared by the tests.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from hierarchy.queries import parse_query
from invariants.spec import Spec
from postproc.errors import PostprocError
from postproc.methods import PostProcessor, catalogue
from postproc.result import Result

from conftest import CASE_NAMES, build_case, e2e_like_spec

METHODS = catalogue()
RANDOMIZED = [e for e in METHODS if e.randomized]
DETERMINISTIC = [e for e in METHODS if not e.randomized]
KEEPS_INVARIANTS = [e for e in METHODS if e.invariants]
REFUSES_INVARIANTS = [e for e in METHODS if not e.takes_spec]
SEED = 1


def _ids(entries: list[PostProcessor]) -> list[str]:
    return [e.name for e in entries]


def spec_for(entry: PostProcessor, spec: Spec | None) -> Spec | None:
    """The case's spec for a method that keeps invariants; none for the others (which refuse a
    spec with invariants, see :func:`test_refuses_a_spec_it_does_not_keep`)."""
    return spec if entry.invariants else None


@functools.lru_cache(maxsize=None)
def run(entry: PostProcessor, case_name: str, rng: Any = SEED) -> Result:
    """``entry`` on the case, through the registry (which also verifies the promises)."""
    _, noisy, spec = build_case(case_name)
    return entry(noisy, spec_for(entry, spec), rng=rng)


def same_histograms(a: Result, b: Result) -> bool:
    return len(a.histograms) == len(b.histograms) and all(
        x.dtype == y.dtype and np.array_equal(x, y) for x, y in zip(a.histograms, b.histograms))


def strict_json(path) -> Any:
    """The JSON document at ``path``, refusing the ``NaN`` and ``Infinity`` that Python's json
    module writes and reads but JSON does not have."""
    def refuse(constant):
        raise ValueError(f"{path} holds {constant}, which is not JSON")

    return json.loads(Path(path).read_text(), parse_constant=refuse)


def by_type(hist: np.ndarray, schema) -> np.ndarray:
    """Persons per value of ``hhgq``, the E2E unit attribute (units × types)."""
    axis = schema.position("hhgq")
    return hist.reshape(hist.shape[0], *schema.shape).sum(
        axis=tuple(1 + a for a in range(len(schema.shape)) if a != axis))


# ---------------------------------------------------------------------------------------------
# shape and labels
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("entry", METHODS, ids=_ids(METHODS))
def test_one_histogram_per_level_with_the_units_and_cells(entry, case_name, make_case):
    truth, noisy, _ = make_case(case_name)
    result = run(entry, case_name)
    geo = noisy.geography
    assert isinstance(result, Result) and result.method == entry.name
    assert result.geography.equals(geo) and result.schema == noisy.schema
    assert result.levels == geo.levels and len(result.histograms) == geo.depth
    for li, hist in enumerate(result.histograms):
        assert hist.shape == (geo.n_units(li), noisy.schema.size) == truth.counts[li].shape
        assert hist.dtype.kind in "iuf" and np.isfinite(hist).all()
        np.testing.assert_allclose(result.answers(li, "total")[:, 0], hist.sum(axis=1))
    # the measurements were simulated: the result says so and is not safe for release
    assert result.randomness["mode"] == "simulation" and not result.safe_for_release


# ---------------------------------------------------------------------------------------------
# promises, checked from the truth and the published statistics
# ---------------------------------------------------------------------------------------------


def failsafe_cells(result: Result, li: int) -> dict[int, list[int]]:
    """Parent unit → cells where a reported failsafe relaxed consistency with level ``li``."""
    geo = result.geography
    out: dict[int, list[int]] = {}
    for report in result.failsafe_reports:
        if report.get("level") == geo.levels[li] and "cells" in report:
            parent = list(geo.geocodes[li - 1]).index(str(report["parent"]))
            out.setdefault(parent, []).extend(int(c) for c in report["cells"])
    return out


def check_consistent(result: Result) -> None:
    geo = result.geography
    for li in range(1, geo.depth):
        hist, above = result.histograms[li], result.histograms[li - 1]
        summed = np.zeros(above.shape, dtype=np.result_type(hist.dtype, above.dtype))
        np.add.at(summed, geo.parents[li], hist)
        if hist.dtype.kind in "iu" and above.dtype.kind in "iu":
            wrong = summed != above
        else:
            wrong = ~np.isclose(summed, above, rtol=1e-9, atol=1e-9 * max(1, np.abs(above).max()))
        for parent, cells in failsafe_cells(result, li).items():
            wrong[parent, cells] = False
        assert not wrong.any(), (f"{geo.levels[li]} units do not sum to their parent in "
                                 f"{int(wrong.sum())} cells")


def check_spec(result: Result, truth, noisy, spec: Spec) -> None:
    """Every invariant and constraint of ``spec`` from the truth: ``tot`` equals the published
    and the true totals; the catalogue constraints against the true units by type (which the
    published ``gqhh`` is); structural zeros and linear constraints from their query's answers."""
    geo, schema = result.geography, result.schema
    tot_levels = spec.invariant_levels("tot", geo.levels)
    for li, level in enumerate(geo.levels):
        hist = result.histograms[li]
        total = hist.sum(axis=1)
        true_total = truth.counts[li].sum(axis=1)
        if level in tot_levels:
            np.testing.assert_array_equal(noisy.invariants[level]["tot"], true_total)
            np.testing.assert_array_equal(total, true_total, err_msg=f"tot at {level}")
        if level in spec.invariant_levels("gqhh", geo.levels):
            np.testing.assert_array_equal(noisy.invariants[level]["gqhh"], truth.units[li])
        units, persons = truth.units[li], by_type(hist, schema)
        for c in spec.constraints:
            if level not in spec.levels_of(c, geo.levels):
                continue
            where = f"{c.name} at {level}"
            if c.name == "hhgq_total_lb":
                assert (persons >= units).all(), where
            elif c.name == "hhgq_total_ub":
                assert (persons[units == 0] == 0).all(), where
                if level in tot_levels:
                    others = units.sum(axis=1, keepdims=True) - units
                    assert (persons <= true_total[:, None] - others).all(), where
            elif c.name == "total_ge_households":
                assert (total >= units[:, spec.household_level]).all(), where
            elif c.type in ("structural_zero", "linear"):
                answers = parse_query(c.query, schema).answer(hist)
                if c.answers is not None:
                    answers = answers[:, list(c.answers)]
                if c.type == "structural_zero":
                    assert (answers == 0).all(), where
                else:
                    assert c.sense == "==" and c.rhs == "tot", f"{where}: no check written"
                    assert (answers == true_total[:, None]).all(), where
            else:
                raise AssertionError(f"{where}: no independent check for this constraint; add "
                                     f"one to check_spec")


@pytest.mark.parametrize("entry", METHODS, ids=_ids(METHODS))
def test_keeps_the_promises_it_declares(entry, case_name):
    truth, noisy, spec = build_case(case_name)
    result = run(entry, case_name)
    if entry.integer:
        assert result.integer and all(h.dtype.kind in "iu" for h in result.histograms)
    if entry.nonnegative:
        for level, hist in zip(result.levels, result.histograms):
            assert (hist >= 0).all(), f"negative cells at {level}"
    if entry.consistent:
        check_consistent(result)
    if entry.invariants and spec is not None:
        check_spec(result, truth, noisy, spec)


@pytest.mark.parametrize("entry", REFUSES_INVARIANTS, ids=_ids(REFUSES_INVARIANTS))
def test_refuses_a_spec_it_does_not_keep(entry, case_name):
    _, noisy, spec = build_case(case_name)
    if spec is None or not spec.invariants:
        spec = e2e_like_spec(noisy.geography.levels)
    with pytest.raises(PostprocError, match=rf"\b{re.escape(entry.name)}\b"):
        entry(noisy, spec, rng=SEED)


@pytest.mark.parametrize("entry", KEEPS_INVARIANTS, ids=_ids(KEEPS_INVARIANTS))
def test_an_invariant_stated_twice_acts_as_stated_once(entry):
    """The ``duplicate_invariants`` case states ``tot`` again as a linear equality and the
    structural zeros again under another name: the result is that of :meth:`Spec.e2e`."""
    _, noisy, spec = build_case("duplicate_invariants")
    once = Spec.e2e(noisy.geography.levels)
    assert len(spec.constraints) > len(once.constraints)
    assert same_histograms(entry(noisy, once, rng=SEED), run(entry, "duplicate_invariants"))


@pytest.mark.parametrize("entry", METHODS, ids=_ids(METHODS))
def test_an_unknown_option_is_an_error_naming_the_method_and_its_options(entry):
    _, noisy, _ = build_case("normal")
    with pytest.raises(PostprocError, match=rf"{re.escape(entry.name)}: unknown option\(s\) "
                                            rf"\['no_such_option'\]; it takes "):
        entry(noisy, None, rng=SEED, no_such_option=1)


# ---------------------------------------------------------------------------------------------
# randomness
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("entry", RANDOMIZED, ids=_ids(RANDOMIZED))
def test_randomized_methods_repeat_for_a_seed(entry, case_name):
    _, noisy, spec = build_case(case_name)
    again = entry(noisy, spec_for(entry, spec), rng=SEED)
    assert same_histograms(again, run(entry, case_name))
    a, b = (entry(noisy, spec_for(entry, spec), rng=np.random.default_rng(7)) for _ in range(2))
    assert same_histograms(a, b)


@pytest.mark.parametrize("entry", RANDOMIZED, ids=_ids(RANDOMIZED))
def test_randomized_methods_depend_on_the_seed(entry):
    """Not on every case (an all-zero case with invariant totals has one possible result), but on
    at least one of them."""
    differ = [name for name in CASE_NAMES
              if not same_histograms(run(entry, name, SEED), run(entry, name, SEED + 1))]
    assert differ, (f"{entry.name} gave the same result for seeds {SEED} and {SEED + 1} "
                    f"on every case")


@pytest.mark.parametrize("entry", DETERMINISTIC, ids=_ids(DETERMINISTIC))
def test_deterministic_methods_ignore_rng(entry, case_name):
    assert same_histograms(run(entry, case_name, SEED), run(entry, case_name, SEED + 1))


# ---------------------------------------------------------------------------------------------
# write / read and frames
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("entry", METHODS, ids=_ids(METHODS))
def test_write_read_round_trip(entry, case_name, tmp_path):
    result = run(entry, case_name)
    back = Result.read(result.write(tmp_path / "out"))
    assert strict_json(tmp_path / "out" / "manifest.json")["method"] == entry.name
    assert back.method == result.method
    assert same_histograms(back, result)
    assert back.provenance == result.provenance
    assert back.geography.equals(result.geography) and back.schema == result.schema
    assert back.workload.names == result.workload.names
    pd.testing.assert_frame_equal(back.node_stats, result.node_stats)


@pytest.mark.parametrize("entry", METHODS, ids=_ids(METHODS))
def test_to_frame_has_labels_parents_and_the_counts(entry, case_name):
    result = run(entry, case_name)
    geo, schema = result.geography, result.schema
    for li, level in enumerate(geo.levels):
        hist = result.histograms[li]
        frame = result.to_frame(level)
        assert list(frame.columns) == [*geo.levels[:li + 1], *schema.names, "count"]
        for attr in schema.attributes:
            assert list(frame[attr.name].cat.categories) == list(attr.labels)
        # parent geocodes: each column is the parent of the column to its right
        for up in range(li):
            parent_of = dict(zip(geo.geocodes[up + 1], geo.geocodes[up][geo.parents[up + 1]]))
            assert frame[geo.levels[up + 1]].map(parent_of).equals(frame[geo.levels[up]])
        # the rows hold exactly the nonzero cells, which rebuild the histograms
        assert (frame["count"] != 0).all() and len(frame) == np.count_nonzero(hist)
        rebuilt = np.zeros_like(hist)
        unit = pd.Index(geo.geocodes[li]).get_indexer(frame[level])
        cell = np.ravel_multi_index([frame[a.name].cat.codes.to_numpy() for a in
                                     schema.attributes], schema.shape)
        rebuilt[unit, cell] = frame["count"].to_numpy()
        np.testing.assert_array_equal(rebuilt, hist)
        full = result.to_frame(level, labels=False, parents=False, zeros=True)
        assert list(full.columns) == [level, *schema.names, "count"]
        assert len(full) == hist.size and full["count"].sum() == pytest.approx(hist.sum())


# ---------------------------------------------------------------------------------------------
# what the catalogue cannot hold, and regressions of bugs the suite found
# ---------------------------------------------------------------------------------------------


def test_a_unit_without_children_above_the_bottom_is_refused_at_construction():
    """Aggregation (``Geography.aggregate``, ``sums_from_bottom``, tabulation) sums each parent's
    contiguous children with ``np.add.reduceat``, which gives a childless parent its next
    sibling's first child instead of 0. Such a geography is not valid input: a unit above the
    bottom level needs at least one (possibly empty) child, and construction says so."""
    from hierarchy.errors import HierarchyError
    from hierarchy.geography import Geography

    frame = pd.DataFrame({"level": ["nation", "state", "state", "county"],
                          "geocode": ["0", "a", "b", "b1"], "parent": ["", "0", "0", "b"]})
    with pytest.raises(HierarchyError, match=r"state unit\(s\) \['a'\] have no county units "
                                             r"below them.*add an empty child unit"):
        Geography.from_frame(frame, ["nation", "state", "county"])


def test_an_invariant_repeated_in_one_spec_is_refused():
    """The literal repetition (two ``tot`` entries) is an error that says how to write it once;
    the ``duplicate_invariants`` case states the same invariants twice in accepted forms."""
    from invariants.errors import SpecError

    with pytest.raises(SpecError, match="'tot' is declared twice; list all its levels in one"):
        Spec.from_dict({"invariant": [{"name": "tot", "levels": ["nation"]},
                                      {"name": "tot", "levels": ["state"]}]})


def test_integer_results_with_negative_counts_read_back(tmp_path):
    """``Result.read`` refused the directories of ``noisy`` and ``bottom_up`` (integer counts
    that may be negative: "counts must be non-negative integers"); fixed in 2806c8c."""
    from hierarchy.geography import Geography
    from hierarchy.queries import Workload, detailed
    from hierarchy.schema import Attribute, Schema

    schema = Schema((Attribute("sex", ("m", "f")),))
    geo = Geography(("nation", "state"), (["0"], ["a", "b"]), ([-1], [0, 0]))
    result = Result("noisy", schema, geo, Workload((detailed(schema),)),
                    (np.array([[-3, 4]]), np.array([[-1, 6], [-2, -2]])))
    back = Result.read(result.write(tmp_path))
    assert same_histograms(back, result) and back.histograms[1].dtype == np.int64


def test_sampling_manifest_is_strict_json_when_no_move_was_proposed(tmp_path):
    """On a chain below the levels with invariant totals no move can be proposed, and the
    sampler's acceptance of such a level was NaN, which ``manifest.json`` then held as ``NaN`` —
    not JSON (jq and JavaScript reject it). It is null now."""
    result = run(next(e for e in METHODS if e.name == "sampling"), "chain")
    result.write(tmp_path)
    manifest = strict_json(tmp_path / "manifest.json")
    acceptance = manifest["provenance"]["sampler"]["acceptance"]
    stats = result.node_stats.groupby("level")[["proposed", "accepted"]].sum()
    assert set(acceptance) == set(result.levels) == set(stats.index)
    for level, (proposed, accepted) in stats.iterrows():
        assert acceptance[level] == (accepted / proposed if proposed else None), level
    assert None in acceptance.values()
