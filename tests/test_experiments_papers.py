"""The published numbers of Petti & Flaxman (``postproc/apps/experiments/_papers.py``).

The paper's text (Gates Open Research 3:1722, version 2, April 2020) quotes some of the numbers
the comparison transcribes from the authors' result files; the quotations below are copied from
that text (its Results section), not from the module, so a value transcribed from the wrong
version of a file — e.g. the August 2019 TopDown EPL, which version 1 quoted (ED totals 0.046 /
0.085 / 0.157 at ε = 0.5 / 1 / 2 in that file) — fails here.
"""

from __future__ import annotations

import numpy as np
import pytest

from postproc.apps.experiments import _papers as paper
from postproc.apps.experiments._matching import match_srs
from postproc.apps.experiments.petti_flaxman import _paper_tables

from _examples import load_example

#: (table, level, ε) → the number the published text states.
QUOTED_TOPDOWN = {
    ("tc_mae", "enum_dist", 0.5): 29, ("tc_mae", "county", 0.5): 45,
    ("tc_mae", "enum_dist", 1.0): 15, ("tc_mae", "county", 1.0): 24,
    ("tc_mae", "enum_dist", 2.0): 8, ("tc_mae", "county", 2.0): 13,
    ("sc_mae", "enum_dist", 0.5): 10, ("sc_mae", "county", 0.5): 11, ("sc_mae", "state", 0.5): 13,
    ("sc_mae", "enum_dist", 1.0): 6, ("sc_mae", "county", 1.0): 6, ("sc_mae", "state", 1.0): 7,
    ("sc_mae", "enum_dist", 2.0): 4, ("sc_mae", "county", 2.0): 4, ("sc_mae", "state", 2.0): 4,
    ("tc_epl", "enum_dist", 0.5): 0.033, ("tc_epl", "county", 0.5): 0.035,
    ("tc_epl", "enum_dist", 1.0): 0.064, ("tc_epl", "county", 1.0): 0.048,
    ("tc_epl", "enum_dist", 2.0): 0.116, ("tc_epl", "county", 2.0): 0.094,
    ("sc_epl", "enum_dist", 0.5): 0.200, ("sc_epl", "county", 0.5): 0.165,
    ("sc_epl", "state", 0.5): 0.104,
    ("sc_epl", "enum_dist", 1.0): 0.241, ("sc_epl", "county", 1.0): 0.164,
    ("sc_epl", "state", 1.0): 0.166,
    ("sc_epl", "enum_dist", 2.0): 0.280, ("sc_epl", "county", 2.0): 0.253,
    ("sc_epl", "state", 2.0): 0.300,
}
#: (measure, query, level, sampling fraction) → the number the published text states.
QUOTED_SRS = {
    ("mae", "total", "enum_dist", 0.05): 74, ("mae", "total", "county", 0.05): 388,
    ("mae", "total", "enum_dist", 0.5): 17, ("mae", "total", "county", 0.5): 90,
    ("mae", "total", "enum_dist", 0.95): 4, ("mae", "total", "county", 0.95): 20,
    ("mae", "sc", "enum_dist", 0.05): 18, ("mae", "sc", "county", 0.05): 19,
    ("mae", "sc", "enum_dist", 0.5): 4, ("mae", "sc", "county", 0.5): 5,
    ("epl", "total", "enum_dist", 0.05): 0.011, ("epl", "sc", "enum_dist", 0.05): 0.098,
    ("epl", "total", "county", 0.05): 0.003, ("epl", "sc", "county", 0.05): 0.034,
    ("epl", "total", "enum_dist", 0.5): 0.050, ("epl", "sc", "enum_dist", 0.5): 0.318,
    ("epl", "total", "county", 0.5): 0.013, ("epl", "sc", "county", 0.5): 0.150,
    ("epl", "total", "enum_dist", 0.95): 0.215, ("epl", "sc", "enum_dist", 0.95): 1.307,
    ("epl", "total", "county", 0.95): 0.063, ("epl", "sc", "county", 0.95): 0.611,
}
#: The published Table 1: ε → closest SRS sampling fraction.
QUOTED_TABLE_1 = {1.0: 0.50, 2.0: 0.75, 4.0: 0.90, 6.0: 0.95}


def test_transcribed_topdown_numbers_are_the_ones_the_published_text_quotes():
    tables = {"tc_mae": paper.TC_MAE, "sc_mae": paper.SC_MAE, "tc_epl": paper.TC_EPL,
              "sc_epl": paper.SC_EPL}
    for (table, level, epsilon), quoted in QUOTED_TOPDOWN.items():
        assert tables[table][level][epsilon] == quoted, (table, level, epsilon)


def test_transcribed_srs_numbers_are_the_ones_the_published_text_quotes():
    tables = {"mae": paper.SRS_MAE, "epl": paper.SRS_EPL}
    for (measure, query, level, fraction), quoted in QUOTED_SRS.items():
        assert tables[measure][query][level][fraction] == quoted, (measure, query, level,
                                                                   fraction)


def test_every_table_covers_the_papers_grid():
    for table in (paper.TC_MAE, paper.SC_MAE, paper.TC_EPL, paper.SC_EPL):
        for values in table.values():
            assert tuple(values) == paper.EPSILONS
    for table in (paper.SRS_MAE, paper.SRS_EPL):
        for by_level in table.values():
            for values in by_level.values():
                assert tuple(values) == paper.SRS_FRACTIONS
    assert paper.TABLE_1[("county", "sc")] == QUOTED_TABLE_1


def test_srs_sc_epl_rises_with_the_sample_as_the_paper_states():
    """"We found empirical privacy loss increased as sample size increased" (SC: strictly)."""
    for level in ("county", "enum_dist"):
        values = np.array(list(paper.SRS_EPL["sc"][level].values()))
        assert (np.diff(values) > 0).all(), level


def test_sources_name_a_commit_of_the_authors_repository():
    for key in ("mae", "epl", "bias", "srs", "table_1"):
        assert "aflaxman/dp_2020_census" in paper.SOURCES[key]
        assert " @ " in paper.SOURCES[key]
    assert "4b289689fd" in paper.SOURCES["epl"] and "abdc48b875" in paper.SOURCES["srs"]


def test_our_joint_rule_on_the_papers_numbers_gives_its_table_1():
    """Our joint rule (log-log distance to the SRS curve) on the authors' own TopDown and SRS
    numbers gives every fraction of the published Table 1 for county SC (ε = 1 → 50 %,
    2 → 75 %, 4 → 90 %, 6 → 95 %); matching on the error alone does not (35 %, 55 %, 80 %)."""
    derived = match_srs(*_paper_tables(), measure={"total": "mae", "sc": "mae"})
    derived = derived[(derived["epl_estimator"] == "published") & (derived["query"] == "sc")
                      & (derived["level"] == "county")].set_index("epsilon")
    for epsilon, fraction in QUOTED_TABLE_1.items():
        assert derived.loc[epsilon, "joint_fraction"] == pytest.approx(fraction), epsilon
    assert derived.loc[[1.0, 2.0, 4.0], "error_fraction"].tolist() == pytest.approx(
        [0.35, 0.55, 0.80])


def test_their_gdpc_check_noise_loses_half_of_epsilon_per_unit():
    """The errors of their check, ``geometric(ε/2) − geometric(ε/2)``, have the per-unit log
    ratio ``−log(1 − ε/2)`` ≈ ε/2, not ε: the slope of log frequency against |k| over 2·10⁶
    draws (standard error a few 10⁻⁴ at ε = 0.1) is within 3 % of it and far from ε."""
    check = load_example("petti_flaxman_gdpc_check")
    for epsilon in (0.1, 0.5):
        errors = check.gdpc_errors(epsilon, 2_000_000, np.random.default_rng(7))
        k = np.arange(0, 30)
        counts = np.array([np.count_nonzero(errors == j) for j in k])
        slope = -np.polyfit(k, np.log(counts), 1)[0]
        assert slope == pytest.approx(check.true_loss(epsilon), rel=0.03)
        assert check.true_loss(epsilon) < 0.6 * epsilon


def test_the_published_estimator_overestimates_their_check_about_twice():
    """On 2,663 errors the published (their) estimator's mean over 5 seeded replicates is at
    least 1.5× the true per-unit loss at ε = 0.1 (observed 0.1015 over 20 replicates, 1.98×; one
    replicate's sd is about 0.011, so the mean of 5 is ≈ 4 sd above the 1.5× line)."""
    check = load_example("petti_flaxman_gdpc_check")
    table = check.gdpc_check((0.1,), replicates=5, n_boot=0).iloc[0]
    assert table["true_loss"] == pytest.approx(-np.log(0.95))
    assert table["published_mean"] > 1.5 * table["true_loss"]


def test_transcribed_error_spread_and_counts_are_the_result_files():
    """RMSE and 95th percentiles beside the MAE (the same file, results_dp_error.json), and the
    counts' summary (results_dp_counts.json): spot values, and the populated cells per county the
    composition comparison uses."""
    assert (paper.TC_RMSE["county"][1.0], paper.TC_P95["county"][1.0]) == (41, 81)
    assert (paper.TC_RMSE["enum_dist"][0.25], paper.TC_P95["enum_dist"][8.0]) == (93, 7)
    for table in (paper.TC_RMSE, paper.TC_P95):
        for level, values in table.items():
            assert tuple(values) == paper.EPSILONS
            # the spread is above the median absolute error at every ε, and falls with ε
            assert all(values[e] > paper.TC_MAE[level][e] for e in paper.EPSILONS)
            assert list(values.values()) == sorted(values.values(), reverse=True)
    assert paper.COUNTS["county"]["tc"]["median"] == 18679
    assert paper.populated_cells("county") == pytest.approx(8.372, abs=1e-3)
    assert "results_dp_counts.json" in paper.SOURCES["counts"]


def test_composition_sweep_sets_county_errors_beside_populated_cells(tmp_path):
    """examples/petti_flaxman_composition.py on the quick variant's three states (one seed,
    ε = 1): a row per composition with its populated cells and its errors beside the paper's;
    the counties_1940 composition has fewer populated cells per county than the default; the
    figure is written."""
    sweep = load_example("petti_flaxman_composition")
    from hierarchy.synth import COMPOSITIONS

    table = sweep.sweep(dict(COMPOSITIONS), persons=3_000_000, states=3, seeds=[1],
                        full_grid=(1.0,), workers=1, log=lambda m: None)
    assert list(table.composition) == list(COMPOSITIONS)
    assert set(table.epsilon) == {1.0}
    by = table.set_index("composition")
    assert by.loc["counties_1940", "county_populated_cells"] < \
        by.loc["default", "county_populated_cells"]
    for level in ("county", "enum_dist"):
        assert (table[f"{level}_mae_paper"] == paper.TC_MAE[level][1.0]).all()
        assert (table[f"{level}_p95_paper"] == paper.TC_P95[level][1.0]).all()
        assert (table[f"{level}_mae"] > 0).all()
        assert (table[f"{level}_p95"] >= table[f"{level}_mae"]).all()
        # P(|e| >= median) >= 1/2, so E e^2 >= median^2 / 2
        assert (table[f"{level}_rmse"] >= table[f"{level}_mae"] / np.sqrt(2)).all()
    sweep.figure(table, tmp_path / "sweep.png")
    assert (tmp_path / "sweep.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_sc_size_reweighting_reaches_the_real_sizes_and_moves_a_size_dependent_loss():
    """examples/petti_flaxman_sc_sizes.py: the resampled cells have the real EDs' median size
    (88), and where small cells' errors are more peaked than large ones' the paper's estimator
    finds a larger loss once small cells weigh more (errors drawn, no TopDown)."""
    sizes_check = load_example("petti_flaxman_sc_sizes")
    rng = np.random.default_rng(5)
    sizes = np.exp(rng.uniform(np.log(20), np.log(3000), 40_000)).round()     # median ~245
    spread = np.where(sizes < 88, 1.0, 8.0)                   # small cells: tight errors
    errors = np.round(rng.laplace(0, spread))
    table = sizes_check.compare({"enum_dist": (errors, sizes)}, replicates=3).iloc[0]
    # seeds 5-10: resampled medians 86-89.5, the loss 1.40-1.43 times the pooled one (0.44-0.45)
    assert abs(table["resampled_size_median"] - 88) <= 6
    assert table["size_median"] > 200
    assert table["epl_real_sizes"] > 1.25 * table["epl_pooled"]
    weights = sizes_check.size_weights(sizes, 88, 967)
    assert weights.sum() == pytest.approx(1.0)
    assert weights[sizes < 88].sum() == pytest.approx(0.5)
    assert weights[sizes >= 967].sum() == pytest.approx(0.05)
