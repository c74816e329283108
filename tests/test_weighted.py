"""Weighted (sample) data (issue 39, item 2): the weighted tabulation, its sensitivity and clipping,
bad weights refused with a message fit for the mode, release mode's refusals, the noise's law, and
the synthetic 1960-style long-form generator.

Statistical test. ``test_laplace_noise_has_the_variance_of_its_scale`` compares the sample
variance of 40,000 Laplace draws with ``2 (cap/ε)²``. For a Laplace law (kurtosis 6) the sample
variance has relative standard deviation ``sqrt((6 − 1)/n) = 0.011``; the tolerance of 6 % is 5.4
standard deviations, a false failure below 1e-7 (normal approximation of the sample variance; the
seed is fixed, so the test is deterministic, and the bound says how unlucky a seed would have to
be). The geometric check is the same with its own variance (kurtosis below 6).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from hierarchy.errors import ConfidentialDataError, HierarchyError
from hierarchy.mechanisms import two_sided_geometric_variance
from hierarchy.schema import Attribute, Schema
from hierarchy.synth.longform1960 import (
    DEFAULT_WEIGHTS,
    LONG_FORM_1960,
    synthesize_long_form_1960,
)
from hierarchy.tabulation import tabulate
from hierarchy.weighted import WeightedHierarchy, measure_weighted, tabulate_weighted
from postproc.errors import ConfidentialInputError, PostprocError
from postproc.gate import data_errors

SCHEMA = Schema((Attribute("sex", ("male", "female")),
                 Attribute("gq", ("household", "institution", "other"))))
LEVELS = ["nation", "state", "county"]


def sample_frame(n: int = 3_000, seed: int = 0, *, integer: bool = False) -> pd.DataFrame:
    """``n`` sampled persons in 4 states × 3 counties, rows shuffled, weights in [1, 9)."""
    rng = np.random.default_rng(seed)
    state = rng.integers(0, 4, n)
    county = rng.integers(0, 3, n)
    weights = rng.integers(1, 9, n) if integer else rng.uniform(1.0, 9.0, n)
    return pd.DataFrame({"state": [f"S{s}" for s in state],
                         "county": [f"S{s}C{c}" for s, c in zip(state, county)],
                         "sex": rng.integers(0, 2, n), "gq": rng.integers(0, 3, n),
                         "wt": weights})


# -- the weighted sums ---------------------------------------------------------------------------

def test_weighted_sums_equal_an_independent_groupby():
    frame = sample_frame()
    weighted = tabulate_weighted(frame, schema=SCHEMA, levels=LEVELS, cap=10)
    frame = frame.assign(cell=frame["sex"] * 3 + frame["gq"], nation="US")
    for level in LEVELS:
        expected = frame.pivot_table(index=level, columns="cell", values="wt", aggfunc="sum",
                                     fill_value=0.0).reindex(columns=range(6), fill_value=0.0)
        geocodes = weighted.geography.geocodes[weighted.geography.level_index(level)]
        units = ["US"] if level == "nation" else [str(g) for g in geocodes]
        got = weighted.level_sums(level)
        np.testing.assert_allclose(got, expected.loc[units].to_numpy(), rtol=1e-12)
        assert got.sum() == pytest.approx(frame["wt"].sum(), rel=1e-12)
    # every level is the sum of its children
    geo = weighted.geography
    for li in (1, 2):
        summed = np.zeros_like(weighted.sums[li - 1])
        np.add.at(summed, geo.parents[li], weighted.sums[li])
        np.testing.assert_allclose(summed, weighted.sums[li - 1], rtol=1e-12)


def test_a_csv_file_with_text_weights_tabulates_like_the_table(tmp_path):
    frame = sample_frame(500, seed=3)
    path = tmp_path / "sample.csv"
    frame.to_csv(path, index=False)
    from_file = tabulate_weighted(path, schema=SCHEMA, levels=LEVELS, cap=10)
    from_frame = tabulate_weighted(frame, schema=SCHEMA, levels=LEVELS, cap=10)
    np.testing.assert_allclose(from_file.sums[-1], from_frame.sums[-1], rtol=1e-12)
    table = pa.Table.from_pandas(frame)
    np.testing.assert_allclose(tabulate_weighted(table, schema=SCHEMA, levels=LEVELS,
                                                 cap=10).sums[-1], from_frame.sums[-1])


def test_a_prebuilt_geography_keeps_units_nobody_was_sampled_in():
    everyone = sample_frame(2_000, seed=1)
    full = tabulate(everyone, schema=SCHEMA, levels=LEVELS)
    few = everyone[everyone["county"] != "S0C0"]
    weighted = tabulate_weighted(few, schema=SCHEMA, levels=LEVELS, cap=10,
                                 geography=full.geography)
    empty = int(np.flatnonzero(full.geography.geocodes[2].astype(str) == "S0C0")[0])
    assert weighted.sums[2].shape == full.counts[2].shape
    assert weighted.sums[2][empty].sum() == 0


# -- sensitivity and clipping --------------------------------------------------------------------

def test_clipping_is_applied_and_counted():
    data = {"state": ["A", "A", "B", "B"], "county": ["A1", "A1", "B1", "B1"],
            "sex": [0, 0, 1, 1], "gq": [0, 0, 2, 2], "wt": [2, 7, 9, 6]}
    weighted = tabulate_weighted(data, schema=SCHEMA, levels=LEVELS, cap=6)
    assert (weighted.clipped, weighted.clipped_weight) == (2, 4.0)
    assert weighted.totals("county").tolist() == [8.0, 12.0]      # 2 + 6, 6 + 6
    assert weighted.bound == 6.0 and not weighted.data_dependent
    unclipped = tabulate_weighted(data, schema=SCHEMA, levels=LEVELS)
    assert unclipped.clipped == 0 and unclipped.totals("nation").tolist() == [24.0]
    # a simulation states the clipping; release mode withholds it
    noisy = measure_weighted(weighted, 1.0, rng=1)
    assert noisy.provenance["weights"]["clipped"] == 2
    released = measure_weighted(weighted, 1.0, rng=None, accounted_elsewhere=True)
    assert "withheld" in released.provenance["weights"]["clipped"]
    assert "clipped_weight" not in released.provenance["weights"]


def test_the_sensitivity_is_the_cap_in_release_mode_and_the_largest_weight_in_simulation():
    frame = sample_frame(integer=True)                  # weights 1..8
    capped = tabulate_weighted(frame, schema=SCHEMA, levels=LEVELS, cap=6)
    released = measure_weighted(capped, 0.5, rng=None, accounted_elsewhere=True)
    p = released.provenance
    assert p["sensitivity"] == 6.0 and p["parameters"]["county"]["detailed"]["z"] == 0.5 / 6
    assert p["weights"]["differentially_private"] is True
    assert p["randomness"]["mode"] == "release"
    assert released.get("county", "detailed").values.dtype == np.int64
    simulated = measure_weighted(capped, 0.5, rng=2)
    assert simulated.provenance["sensitivity"] == 6.0
    # no cap: a simulation uses the data's largest weight, labelled data-dependent
    uncapped = tabulate_weighted(frame, schema=SCHEMA, levels=LEVELS)
    assert uncapped.bound == frame["wt"].max() == 8
    noisy = measure_weighted(uncapped, 0.5, rng=2)
    assert noisy.provenance["sensitivity"] == 8.0
    assert noisy.provenance["weights"]["differentially_private"] is False
    assert "data-dependent" in noisy.provenance["weights"]["sensitivity_from"]
    # a changed record moves two cells: twice the bound
    assert capped.sensitivity("change") == 12.0
    assert measure_weighted(capped, 0.5, rng=2, neighbours="change").provenance[
        "sensitivity"] == 12.0
    with pytest.raises(HierarchyError, match="neighbours must be"):
        capped.sensitivity("substitute")


@pytest.mark.parametrize("cap", [0, -1, math.nan, math.inf, "6"])
def test_a_bad_cap_is_refused(cap):
    with pytest.raises(HierarchyError, match="the weight cap"):
        tabulate_weighted(sample_frame(10), schema=SCHEMA, levels=LEVELS, cap=cap)


# -- bad weights: the row in simulation, the column only in release ------------------------------

BAD_ROW = 137


@pytest.mark.parametrize("bad", [-3.5, math.nan, math.inf, -math.inf, None, "heavy"])
def test_a_bad_weight_names_the_row_in_simulation_and_only_the_column_in_release(bad):
    frame = sample_frame(300, seed=2)
    frame["wt"] = frame["wt"].astype(object)
    frame.loc[BAD_ROW, "wt"] = bad
    with pytest.raises(ConfidentialDataError) as caught:
        tabulate_weighted(frame, schema=SCHEMA, levels=LEVELS, cap=10)
    error = caught.value
    assert f"row {BAD_ROW}" in str(error) and "'wt'" in str(error)
    assert "'wt'" in error.public and str(BAD_ROW) not in error.public
    assert "row" not in error.public and repr(bad) not in error.public
    # release mode: the public message only
    with pytest.raises(PostprocError) as released:
        with data_errors(release=True):
            tabulate_weighted(frame, schema=SCHEMA, levels=LEVELS, cap=10)
    message = str(released.value)
    assert not isinstance(released.value, ConfidentialInputError)
    assert message.startswith("column 'wt' holds weights that are negative")
    assert str(BAD_ROW) not in message and "rows" not in message
    assert "withheld in release mode" in message
    # a simulation: everything
    with pytest.raises(ConfidentialInputError) as simulated:
        with data_errors(release=False):
            tabulate_weighted(frame, schema=SCHEMA, levels=LEVELS, cap=10)
    assert f"row {BAD_ROW}" in str(simulated.value)


def test_a_bad_weight_in_a_file_names_the_file_only_in_the_full_message(tmp_path):
    frame = sample_frame(200, seed=4)
    frame.loc[BAD_ROW, "wt"] = -2.0
    path = tmp_path / "secret_sample.csv"
    frame.to_csv(path, index=False)
    with pytest.raises(ConfidentialDataError) as caught:
        tabulate_weighted(path, schema=SCHEMA, levels=LEVELS, cap=10)
    assert str(path) in str(caught.value) and f"row {BAD_ROW}" in str(caught.value)
    assert str(path) not in caught.value.public
    with pytest.raises(PostprocError) as released:
        with data_errors(release=True, names={str(path): "[data] persons"}):
            tabulate_weighted(path, schema=SCHEMA, levels=LEVELS, cap=10)
    assert str(released.value).startswith("[data] persons: column 'wt'")
    assert "secret_sample" not in str(released.value) and str(BAD_ROW) not in str(
        released.value)


def test_a_weight_column_that_is_not_numbers_is_refused():
    frame = sample_frame(20)
    with pytest.raises(HierarchyError, match="must hold numbers"):
        tabulate_weighted(frame.assign(wt=frame["wt"] > 3), schema=SCHEMA, levels=LEVELS)
    with pytest.raises(HierarchyError, match="has no column 'weight'"):
        tabulate_weighted(frame, schema=SCHEMA, levels=LEVELS, weight="weight")


# -- release mode ------------------------------------------------------------------------------

def test_release_mode_refuses_what_it_cannot_protect():
    frame = sample_frame(integer=True)
    uncapped = tabulate_weighted(frame, schema=SCHEMA, levels=LEVELS)
    with pytest.raises(HierarchyError, match="release mode needs a public cap"):
        measure_weighted(uncapped, 1.0, rng=None, accounted_elsewhere=True)
    capped = tabulate_weighted(frame, schema=SCHEMA, levels=LEVELS, cap=6)
    with pytest.raises(HierarchyError, match="floating-point noise"):
        measure_weighted(capped, 1.0, rng=None, mechanism="laplace", accounted_elsewhere=True)
    with pytest.raises(HierarchyError, match="spends the privacy budget anew"):
        measure_weighted(capped, 1.0, rng=None)
    half = tabulate_weighted(frame, schema=SCHEMA, levels=LEVELS, cap=6.5)
    with pytest.raises(HierarchyError, match="whole-number cap, not 6.5"):
        measure_weighted(half, 1.0, rng=None, accounted_elsewhere=True)
    with pytest.raises(HierarchyError, match="geometric or laplace"):
        measure_weighted(capped, 1.0, rng=1, mechanism="discrete_gaussian")


def test_geometric_noise_on_fractional_weights_is_refused_with_the_row_only_in_simulation():
    frame = sample_frame(300, seed=5, integer=True)
    frame["wt"] = frame["wt"].astype(float)
    frame.loc[BAD_ROW, "wt"] = 4.5
    weighted = tabulate_weighted(frame, schema=SCHEMA, levels=LEVELS, cap=6)
    assert not weighted.integer_weights
    with pytest.raises(PostprocError) as released:
        with data_errors(release=True):
            measure_weighted(weighted, 1.0, rng=None, accounted_elsewhere=True)
    assert "not whole numbers" in str(released.value) and str(BAD_ROW) not in str(
        released.value) and "4.5" not in str(released.value)
    with pytest.raises(ConfidentialInputError, match=f"4.5 at row {BAD_ROW}"):
        with data_errors(release=False):
            measure_weighted(weighted, 1.0, rng=1)
    # Laplace noise takes any weights, in a simulation
    noisy = measure_weighted(weighted, 1.0, rng=1, mechanism="laplace")
    assert noisy.get("county", "detailed").values.dtype == np.float64


# -- the noise's law ---------------------------------------------------------------------------

def _many_cells(n_counties: int, cap: float) -> WeightedHierarchy:
    """One person of weight ``cap`` in every county of one state: ``6 n_counties`` cells."""
    data = {"state": ["A"] * n_counties, "county": [f"C{i:05d}" for i in range(n_counties)],
            "sex": [0] * n_counties, "gq": [0] * n_counties, "wt": [cap] * n_counties}
    return tabulate_weighted(data, schema=SCHEMA, levels=LEVELS, cap=cap)


def test_laplace_noise_has_the_variance_of_its_scale():
    cap, epsilon = 5.0, 0.8
    weighted = _many_cells(40_000 // 6 + 1, cap)
    noisy = measure_weighted(weighted, epsilon, rng=11, mechanism="laplace")
    m = noisy.get("county", "detailed")
    expected = 2 * (cap / epsilon) ** 2
    assert float(m.variances[0, 0]) == pytest.approx(expected, rel=1e-12)
    assert noisy.provenance["parameters"]["county"]["detailed"]["scale"] == cap / epsilon
    noise = (m.values - weighted.sums[-1]).ravel()
    assert noise.size >= 40_000
    assert noise.var() == pytest.approx(expected, rel=0.06)
    assert abs(noise.mean()) < 4 * math.sqrt(expected / noise.size)


def test_geometric_noise_has_the_variance_of_z():
    cap, epsilon = 4, 1.0
    weighted = _many_cells(40_000 // 6 + 1, cap)
    noisy = measure_weighted(weighted, epsilon, rng=12)
    m = noisy.get("county", "detailed")
    expected = two_sided_geometric_variance(epsilon / cap)
    assert float(m.variances[0, 0]) == pytest.approx(expected, rel=1e-12)
    noise = (m.values - weighted.sums[-1]).ravel()
    assert noise.var() == pytest.approx(expected, rel=0.06)


def test_bottom_up_sums_of_the_measurement_are_consistent():
    from postproc.methods.baselines.reconcile import bottom_up_sums

    weighted = tabulate_weighted(sample_frame(integer=True), schema=SCHEMA, levels=LEVELS,
                                 cap=8)
    result = bottom_up_sums(measure_weighted(weighted, 1.0, rng=3))
    assert result.integer
    np.testing.assert_array_equal(result.histograms[0], result.histograms[2].sum(axis=0,
                                                                                 keepdims=True))


# -- the synthetic long form ----------------------------------------------------------------------

def test_the_long_form_generator_is_reproducible_and_weights_its_sample():
    a = synthesize_long_form_1960(60_000, states=4, counties=20, seed=5)
    b = synthesize_long_form_1960(60_000, states=4, counties=20, seed=5)
    assert a.persons.equals(b.persons) and a.sample.equals(b.sample)
    full = tabulate(a.persons, schema=LONG_FORM_1960, levels=LEVELS)
    per_state = np.bincount(full.geography.parents[2])
    assert per_state.min() >= 3 and per_state.sum() == 20
    assert full.totals("county").min() >= 50
    weights = a.sample.column("wt").to_numpy()
    assert set(np.unique(weights)) == set(DEFAULT_WEIGHTS)
    # the weighted total estimates the population: mean weight 4 × rate 0.25 = 1
    weighted = tabulate_weighted(a.sample, schema=LONG_FORM_1960, levels=LEVELS, cap=6,
                                 geography=full.geography)
    assert weighted.totals("nation")[0] == pytest.approx(60_000, rel=0.02)
    assert weighted.clipped == 0 and weighted.integer_weights


@pytest.mark.parametrize("kwargs,match", [
    ({"rate": 1.5}, "rate must be in"), ({"weights": {4: 0.5}}, "sum to 1"),
    ({"weights": {-1: 1.0}}, "finite and ≥ 0"), ({"counties": 5}, "3 per state"),
])
def test_the_long_form_generator_refuses_bad_arguments(kwargs, match):
    arguments = {"persons": 10_000, "states": 2, "counties": 8, "seed": 1, **kwargs}
    with pytest.raises(HierarchyError, match=match):
        synthesize_long_form_1960(**arguments)
