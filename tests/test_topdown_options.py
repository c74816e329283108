"""TopDown's options are one frozen, self-validating record (TopDownOptions) that the registry,
a run configuration, runs in parts and the command line share; the pipeline runs TopDown
through ``postprocess`` with a per-level checkpoint hook (issue 36, item 1)."""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest

from hierarchy import E2E_1940, Budget, e2e_workload, measure, synthesize_1940, tabulate
from invariants.spec import Spec
from postproc.apps.runs.config import RunConfig
from postproc.errors import PostprocError
from postproc.methods import get, postprocess
from postproc.methods.registry import LevelCheckpoint, OptionError
from postproc.methods.topdown import TopDownOptions, topdown
from postproc.methods.topdown.options import CONFIG_KEYS, FIELDS, RUN_FIELDS

LEVELS = ["nation", "state", "county"]


@pytest.fixture(scope="module")
def measured():
    data = synthesize_1940(4_000, seed=5)
    truth = tabulate(data.persons, schema=E2E_1940, levels=LEVELS, units=data.units)
    spec = Spec.e2e(LEVELS)
    noisy = measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, LEVELS), "geometric", rng=6,
                    spec=spec)
    return noisy, spec


def test_the_record_is_frozen_and_normalizes_its_values():
    options = TopDownOptions(solver="osqp", failsafe_keep=["total"], passes=[["total"]],
                             group_children={"county": 8}, failsafe_slack=0)
    assert options.solver == ("osqp",) and options.failsafe_keep == ("total",)
    assert options.passes == (("total",),) and options.failsafe_slack == 0.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.workers = 2
    assert TopDownOptions() == TopDownOptions.of({}) == TopDownOptions.of(None)
    assert options.replace(workers=3).workers == 3 and options.workers is None


@pytest.mark.parametrize("changes, message", [
    ({"batch_children": 0}, "batch_children must be a positive integer"),
    ({"workers": 0}, "workers must be a positive integer"),
    ({"executor": "threads"}, "executor must be one of"),
    ({"failsafe": "yes"}, "failsafe must be true or false"),
    ({"failsafe_keep": "total"}, "failsafe_keep must be 'auto' or a list"),
    ({"failsafe_slack": -1}, "failsafe_slack must be a finite number"),
    ({"pass_tolerance": 0}, "pass_tolerance must be a finite number above 0"),
    ({"passes": "total"}, "passes must be a list of passes"),
    ({"round_passes": [["total"], "hhgq"]}, "round_passes must be a list of passes"),
    ({"group_children": 1}, "group_children must be at least 2"),
    ({"solver": ["gurobi"]}, "unknown solver"),
    ({"damping": 0.5}, r"TopDown has no option\(s\) \['damping'\]"),
])
def test_a_bad_value_is_refused_when_the_record_is_made(changes, message):
    with pytest.raises(PostprocError, match=message):
        TopDownOptions.of(**changes)


def test_the_registry_reads_its_options_and_types_from_the_record():
    entry = get("topdown")
    assert entry.options() == FIELDS and entry.levelwise
    assert entry.option_types()["failsafe_slack"] is float
    with pytest.raises(OptionError, match="failsafe_slack must be a finite number") as info:
        entry.check_options({"failsafe_slack": -2})
    assert info.value.option == "failsafe_slack"
    with pytest.raises(OptionError, match="must be a number"):
        entry.check_options({"pass_tolerance": "0.1"})


def test_checks_against_the_measurements_name_the_query_or_level(measured):
    noisy, spec = measured
    with pytest.raises(PostprocError, match="multipass names unknown queries"):
        topdown(noisy, spec, passes=[["nonesuch"]])
    with pytest.raises(PostprocError, match="failsafe_keep names unknown queries"):
        topdown(noisy, spec, options=TopDownOptions(failsafe_keep=["nonesuch"]))
    with pytest.raises(PostprocError, match="names levels"):
        topdown(noisy, spec, passes={"tracts": [["total"]]})


def test_a_record_and_keywords_give_the_same_result_as_keywords_alone(measured):
    noisy, spec = measured
    a = topdown(noisy, spec, failsafe_slack=0, passes=[["va_hisp_race"], ["detailed"]])
    b = topdown(noisy, spec, options=TopDownOptions(passes=[["hhgq"]]), failsafe_slack=0,
                passes=[["va_hisp_race"], ["detailed"]])                   # keywords win
    c = postprocess(noisy, "topdown", spec, failsafe_slack=0,
                    passes=[["va_hisp_race"], ["detailed"]])
    for x, y in zip(a.histograms, b.histograms):
        np.testing.assert_array_equal(x, y)
    for x, y in zip(a.histograms, c.histograms):
        np.testing.assert_array_equal(x, y)
    assert a.provenance["solver"]["passes"] == [["va_hisp_race"], ["detailed"]]


def test_a_level_checkpoint_resumes_below_the_levels_done(measured):
    """postprocess with a LevelCheckpoint: the levels given are kept, the rest solved as in
    an uninterrupted run, and on_level hears of each level solved."""
    noisy, spec = measured
    whole = postprocess(noisy, "topdown", spec)
    heard = []
    resumed = postprocess(noisy, "topdown", spec, checkpoint=LevelCheckpoint(
        whole.histograms[:2], lambda li, hist, partial: heard.append(li)))
    assert heard == [2]
    for x, y in zip(whole.histograms, resumed.histograms):
        np.testing.assert_array_equal(x, y)
    with pytest.raises(PostprocError, match="hay does not solve level by level"):
        postprocess(noisy, "hay", checkpoint=LevelCheckpoint())
    with pytest.raises(PostprocError, match="checkpoint must be a LevelCheckpoint"):
        postprocess(noisy, "topdown", spec, checkpoint={"done": []})


def test_a_configuration_holds_one_record_and_the_old_names_warn():
    config = RunConfig.build(persons="p.parquet", levels=["nation", "state"], budget=1, seed=1,
                             solver_chain=["osqp"], workers=2, failsafe=False,
                             method_options={"failsafe_slack": 0.5})
    assert isinstance(config.topdown, TopDownOptions)
    assert config.topdown.solver == ("osqp",) and config.topdown.workers == 2
    assert config.topdown_options().failsafe_slack == 0.5
    assert config.with_topdown(workers=1).topdown.workers == 1
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert config.solver_chain == ("osqp",) and config.failsafe is False
    assert [w.category for w in caught] == [DeprecationWarning] * 2
    assert "RunConfig.topdown.solver" in str(caught[0].message)
    # every [solver] key maps onto an option, and the run sets those (not [postprocess.options])
    assert set(CONFIG_KEYS.values()) <= set(FIELDS) and set(CONFIG_KEYS.values()) <= RUN_FIELDS
