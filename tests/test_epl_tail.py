"""The tail-event direct estimate (``direct_tail_epl``, ``exact_tail_epl``), the published
estimator's named settings (``settings="paper"``), and both in the Flaxman (2019) analysis.

Statistical tests and their false-failure rates (every one with a fixed seed, so a run is
deterministic; the rates say how likely a seed is to fail by chance, under the normal
approximation of a log count, which is accurate at the counts used — thousands of runs a tail):

* *Convergence* — ``|ε̂_tail(k) − ε_tail(k)| ≤ 5 · max(se_upper, se_lower)`` at every ``k``. The
  estimate's error is at most the larger of the two tails' errors, each beyond 5 standard errors
  with probability 5.7e-7: at most 1.2e-5 over the 10 (z, k) pairs (ADPC: 4 more, 5e-6). With 2
  million runs the standard errors at ``k ≤ 4`` are at most 0.012, so the estimate is within 0.06
  of the exact value there: it converges (as ``1/√R``).
* *Coverage* — over 400 seeds of 20,000 runs the Bonferroni 95 % interval must cover the exact
  value at ``k = 0`` and ``k = 2`` in at least 90 % of the seeds; each covers with probability at
  least 95 % (each tail's own interval is at 97.5 %), so falling to 90 % is 4.6 binomial standard
  deviations below: about 2e-6 per threshold.
* *ADPC below ε* — the exact ADPC values are below ε (deterministic), and each estimate's upper
  end ``ε̂ + 2.24 se`` is below ε at every estimable threshold: at ``k = 8`` the exact value
  is 0.745 and the standard error 0.024, so a failure needs an estimate more than 5 standard
  errors too high (below 1e-6).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import gaussian_kde

from hierarchy.mechanisms import sample_two_sided_geometric, two_sided_geometric_pmf
from postproc.cli import main
from postproc.errors import PostprocError
from postproc.evaluation.epl import (
    MIN_TAIL_COUNT,
    PUBLISHED_SETTINGS,
    TailEPL,
    direct_tail_epl,
    estimate_epl,
    exact_tail_epl,
    published_epl,
)


def geometric_runs(z, runs, seed, exact, size=1):
    """``runs`` released values ``exact + mean of size geometric noises``."""
    noise = sample_two_sided_geometric(z, (runs, size), seed).mean(axis=1)
    return exact + noise


def averaged_pmf(z, size, reach=400):
    """The pmf of the mean of ``size`` two-sided geometric noises: values and probabilities."""
    support = np.arange(-reach, reach + 1)
    pmf = two_sided_geometric_pmf(support, z)
    total = pmf
    for _ in range(size - 1):
        total = np.convolve(total, pmf)
    half = total.size // 2
    return np.arange(-half, half + 1) / size, total


# --------------------------------------------------------------------------------------------------
# the exact value
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("z", [0.1, 0.5, 1.0, 3.0])
@pytest.mark.parametrize("shift", [1, -1])
def test_exact_geometric_tail_is_z_at_every_k(z, shift):
    """P(E ≥ k) = e^{−zk}/(1 + e^{−z}) for k ≥ 1: each tail is z for k ≥ 1, and at k = 0 the
    larger one is z (the other log(1 + e^{−z} − e^{−2z}))."""
    support = np.arange(-4000, 4001)
    ks = [0, 1, 2, 5, 10]
    exact = exact_tail_epl(support, two_sided_geometric_pmf(support, z), ks, shift=shift)
    assert np.allclose(exact, z, rtol=1e-12, atol=0)
    # the one-sided tail at k = 0, from the closed form
    a = math.exp(-z)
    p_at_least_0 = 1 / (1 + a)
    p_at_least_minus_1 = 1 - a * a / (1 + a)
    assert math.log(p_at_least_minus_1 / p_at_least_0) == pytest.approx(
        math.log(1 + a - a * a), rel=1e-12)
    assert math.log(1 + a - a * a) < z


def test_exact_tail_of_an_averaged_mechanism_is_below_epsilon_and_rises():
    values, pmf = averaged_pmf(0.25, 4)                    # ADPC at ε = 1
    exact = exact_tail_epl(values, pmf, [0, 1, 2, 4, 8, 16], shift=1)
    assert (exact < 1.0).all() and (np.diff(exact) > 0).all()
    assert np.round(exact[[0, 3, 4]], 2).tolist() == [0.35, 0.62, 0.75]


# --------------------------------------------------------------------------------------------------
# convergence, coverage, averaged mechanisms
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("z, seed", [(0.5, 41), (1.0, 43)])
def test_direct_tail_converges_to_the_exact_geometric_value(z, seed):
    ks = [0, 1, 2, 4, 8]
    runs = 2_000_000
    r = direct_tail_epl(geometric_runs(z, runs, seed, 10), geometric_runs(z, runs, seed + 1, 11),
                        ks, exact=10)
    support = np.arange(-2000, 2001)
    exact = exact_tail_epl(support, two_sided_geometric_pmf(support, z), ks, shift=1)
    se = np.fmax(r.upper_se, r.lower_se)
    assert r.estimable.all() and r.runs == (runs, runs)
    assert (np.abs(r.epl - exact) <= 5 * se).all()
    assert (se[:4] <= 0.012).all()
    assert ((r.ci_low <= r.epl) & (r.epl <= r.ci_high)).all()
    # the counts behind it: the share of runs with an error >= k on D is P(E >= k)
    share = r.upper_d / runs
    expected = np.exp(-z * np.array(ks[1:])) / (1 + np.exp(-z))
    assert np.allclose(share[1:], expected, rtol=0.05)


def test_direct_tail_interval_covers_the_exact_value():
    z, runs, seeds = 1.0, 20_000, 400
    covered = np.zeros(2)
    for seed in range(seeds):
        r = direct_tail_epl(geometric_runs(z, runs, 2 * seed + 1000, 10),
                            geometric_runs(z, runs, 2 * seed + 1001, 11), [0, 2], exact=10)
        assert r.estimable.all()
        covered += (r.ci_low <= z) & (z <= r.ci_high)
    assert (covered / seeds >= 0.90).all(), covered / seeds


def test_direct_tail_of_adpc_is_below_epsilon():
    epsilon, runs, ks = 1.0, 1_000_000, [0, 2, 4, 8]
    on_d = geometric_runs(epsilon / 4, runs, 31, 10, size=4)
    on_neighbour = geometric_runs(epsilon / 4, runs, 32, 11, size=4)
    r = direct_tail_epl(on_d, on_neighbour, ks, exact=10)
    values, pmf = averaged_pmf(epsilon / 4, 4)
    exact = exact_tail_epl(values, pmf, ks, shift=1)
    assert r.estimable.all()
    assert (exact < epsilon).all()
    assert (np.abs(r.epl - exact) <= 5 * np.fmax(r.upper_se, r.lower_se)).all()
    assert (r.epl < epsilon).all() and (r.ci_high < epsilon).all()


# --------------------------------------------------------------------------------------------------
# not estimable
# --------------------------------------------------------------------------------------------------
def test_too_few_tail_draws_are_not_estimable():
    # z = 0.5: at k = 1 every tail holds 230 runs or more of 1,000 (the thinnest expects 230,
    # 10 binomial sd from 100); at k = 12 each expects 2 or fewer
    r = direct_tail_epl(geometric_runs(0.5, 1000, 5, 0), geometric_runs(0.5, 1000, 6, 1),
                        [0, 1, 12], exact=0)
    assert r.estimable.tolist() == [True, True, False]
    assert math.isnan(r.epl[2]) and math.isnan(r.ci_low[2]) and r.tail[2] == ""
    assert r.reasons[:2] == (None, None)
    assert "min_count = 100" in r.reasons[2] and "of the 1,000 runs on D" in r.reasons[2]
    assert f"{{error >= 12}} holds {r.upper_d[2]} of the 1,000" in r.reasons[2]
    frame = r.to_frame()
    assert frame.loc[2, "reason"] == r.reasons[2] and not frame.loc[2, "estimable"]
    assert list(frame.columns[:5]) == ["k", "epl", "ci_low", "ci_high", "tail"]


def test_the_minimum_count_is_exact_and_per_tail():
    """A tail with 99 runs on one dataset makes the threshold not estimable; 100 suffices.
    The other tail's log ratio is still reported."""
    assert MIN_TAIL_COUNT == 100
    on_d = np.r_[np.zeros(300), np.full(100, 5.0), np.full(100, -5.0)]
    on_neighbour = np.r_[np.zeros(300), np.full(99, 5.0), np.full(200, -5.0)]
    r = direct_tail_epl(on_d, on_neighbour, [5], exact=0)
    assert (r.upper_d[0], r.upper_neighbour[0]) == (100, 99)
    assert not r.estimable[0] and math.isnan(r.upper[0])
    assert r.lower[0] == pytest.approx(math.log(100 / 500) - math.log(200 / 599))
    r = direct_tail_epl(on_d, on_neighbour, [5], exact=0, min_count=99)
    assert r.estimable[0] and r.epl[0] == pytest.approx(max(abs(r.upper[0]), abs(r.lower[0])))


# --------------------------------------------------------------------------------------------------
# bad input
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs, message", [
    (dict(k=-1), "k must be non-negative, not -1"),
    (dict(k=[0, 2, -0.5]), "k must be non-negative, not -0.5"),
    (dict(k=[]), "k holds no threshold"),
    (dict(k=[1, np.inf]), "k must be finite"),
    (dict(k="two"), "k must be numbers"),
    (dict(on_d=[]), "on_d holds no runs"),
    (dict(on_neighbour=np.zeros(0)), "on_neighbour holds no runs"),
    (dict(on_d=[1.0, np.nan, 2.0]), "on_d must be finite; element 1 is nan"),
    (dict(on_neighbour=[1.0, -np.inf]), "on_neighbour must be finite; element 1 is -inf"),
    (dict(exact=np.nan), "exact must be finite"),
    (dict(exact="ten"), "exact must be a number"),
    (dict(min_count=0), "min_count must be a positive whole number"),
    (dict(min_count=2.5), "min_count must be a positive whole number"),
    (dict(min_count=True), "min_count must be a positive whole number"),
    (dict(level=1.0), r"level must be in \[0.5, 1\)"),
])
def test_bad_input_raises_the_package_error(kwargs, message):
    args = dict(on_d=[0.0, 1.0, 2.0], on_neighbour=[1.0, 2.0, 3.0], k=[0, 1], exact=0.0)
    args.update(kwargs)
    with pytest.raises(PostprocError, match=message):
        direct_tail_epl(args.pop("on_d"), args.pop("on_neighbour"), args.pop("k"), **args)


@pytest.mark.parametrize("args, kwargs, message", [
    (([0, 1], [0.5], [0]), {}, "must be as many"),
    (([], [], [0]), {}, "must be as many, and at least one"),
    (([0, 1], [0.5, -0.5], [0]), {}, "non-negative"),
    (([0, 1], [0.5, 0.5], [-2]), {}, "k must be non-negative"),
    (([0, 1], [0.5, 0.5], [0]), {"shift": np.nan}, "shift must be finite"),
    (([0, np.nan], [0.5, 0.5], [0]), {}, "values must be finite"),
])
def test_exact_tail_rejects_bad_input(args, kwargs, message):
    with pytest.raises(PostprocError, match=message):
        exact_tail_epl(*args, **kwargs)


def test_tail_result_validates_itself_and_is_immutable():
    r = direct_tail_epl(np.arange(500.0) - 250, np.arange(500.0) - 249, [0, 10], exact=0)
    with pytest.raises(ValueError):
        r.epl[0] = 1.0
    with pytest.raises(AttributeError):
        r.k = np.zeros(2)
    fields = {name: getattr(r, name) for name in TailEPL.__dataclass_fields__}
    with pytest.raises(PostprocError, match="TailEPL.epl has 1 entries"):
        TailEPL(**{**fields, "epl": r.epl[:1]})
    with pytest.raises(PostprocError, match="estimable exactly when"):
        TailEPL(**{**fields, "estimable": ~r.estimable})


# --------------------------------------------------------------------------------------------------
# the published estimator's named settings
# --------------------------------------------------------------------------------------------------
def reference(e, *, bandwidth, half_width):
    """The published recipe line by line, on the window [−b, b)."""
    edges = np.arange(-half_width, half_width, 1)
    midpoints = (edges[:-1] + edges[1:]) / 2
    f = len(e) * gaussian_kde(e, bw_method=bandwidth)(midpoints)
    return np.max(np.abs(np.log(f[:-1] / f[1:])))


@pytest.fixture(scope="module")
def averaged_errors():
    """Leaf errors of an averaged mechanism (ADPC at ε = 1): a ratio that grows into the tails,
    so the window matters."""
    return sample_two_sided_geometric(0.25, (40_000, 4), 7).mean(axis=1)


def test_paper_settings_use_their_bandwidth_and_window(averaged_errors):
    e = averaged_errors
    ours, paper = published_epl(e), published_epl(e, settings="paper")
    assert PUBLISHED_SETTINGS["paper"] == {"bandwidth": 0.15, "percentile": 95.0,
                                           "multiplier": 1.5, "window": "absolute"}
    assert (paper.parameters["bandwidth"], paper.parameters["multiplier"],
            paper.parameters["percentile"], paper.parameters["settings"]) == (0.15, 1.5, 95.0,
                                                                              "paper")
    assert (ours.parameters["bandwidth"], ours.parameters["multiplier"],
            ours.parameters["settings"]) == (0.1, 1.0, "default")
    b_paper = 1.5 * np.percentile(np.abs(e), 95)
    lo, hi = np.percentile(e, [5, 95])
    assert paper.parameters["window"] == [-b_paper, b_paper]
    assert ours.parameters["window"] == [-max(abs(lo), abs(hi)), max(abs(lo), abs(hi))]
    # the results differ, and each is its recipe line by line
    assert paper.epl > ours.epl + 0.05
    assert paper.epl == pytest.approx(reference(e, bandwidth=0.15, half_width=b_paper),
                                      rel=1e-10)
    assert ours.epl == pytest.approx(
        reference(e, bandwidth=0.1, half_width=max(abs(lo), abs(hi))), rel=1e-10)


def test_paper_settings_define_what_the_default_window_cannot():
    e = sample_two_sided_geometric(2.0, 200_000, 8)
    assert published_epl(e).kind == "undefined"
    paper = published_epl(e, settings="paper")
    assert paper.parameters["window"] == [-1.5, 1.5] and paper.epl == pytest.approx(2.0, abs=0.01)


def test_default_results_are_unchanged(averaged_errors):
    e = sample_two_sided_geometric(0.3, 50_000, 3).astype(float)
    for errors in (e, averaged_errors):
        for fast in (False, True):
            default = published_epl(errors, fast=fast)
            explicit = published_epl(errors, settings="default", percentile=95.0,
                                     multiplier=1.0, bandwidth=0.1, fast=fast)
            assert default.epl == explicit.epl
            assert np.array_equal(default.epl_x, explicit.epl_x)
            assert np.array_equal(default.x, explicit.x)
            assert default.parameters == explicit.parameters


def test_an_explicit_option_overrides_its_setting(averaged_errors):
    r = published_epl(averaged_errors, settings="paper", bandwidth=0.1)
    b = 1.5 * np.percentile(np.abs(averaged_errors), 95)
    assert r.parameters["bandwidth"] == 0.1 and r.parameters["window"] == [-b, b]
    assert r.epl == pytest.approx(reference(averaged_errors, bandwidth=0.1, half_width=b),
                                  rel=1e-10)


@pytest.mark.parametrize("settings", ["Paper", "flaxman", None, ["paper"]])
def test_unknown_settings_are_refused(settings):
    with pytest.raises(PostprocError, match="unknown settings .* use one of default, paper"):
        published_epl(np.arange(10.0), settings=settings)


def test_estimate_epl_and_the_cli_take_the_settings(tmp_path, capsys, averaged_errors):
    r = estimate_epl(averaged_errors, method="published", settings="paper")
    assert r.parameters["settings"] == "paper"
    path = tmp_path / "errors.npy"
    np.save(path, averaged_errors)
    assert main(["epl", "--errors", str(path), "--method", "published", "--settings", "paper",
                 "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["parameters"]["settings"] == "paper"
    assert data["epl"] == pytest.approx(r.epl, rel=1e-12)
    assert main(["epl", "--errors", str(path), "--method", "published", "--settings",
                 "paper"]) == 0
    assert "settings paper (window from the percentile of |error|)" in capsys.readouterr().out
    assert main(["epl", "--errors", str(path), "--settings", "paper"]) == 1
    assert "--settings apply to --method published only" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------------
# the Flaxman (2019) analysis
# --------------------------------------------------------------------------------------------------
def test_flaxman_run_reports_tail_events_and_paper_settings(tmp_path):
    """A small run (as the module's doctest, with 20,000 D/D′ runs): GDPC's tail estimates are
    within 5 standard errors of the exact ε (false failure below 1e-5 over its thresholds), the
    exact ADPC values are below ε, and the published EPL is reported with both settings."""
    from postproc.apps.experiments import run_experiment

    summary = run_experiment("flaxman2019", tmp_path, quick=True, log=lambda m: None,
                             persons=100_000, levels=2, epsilons=[1.0], replicates=1, n_boot=0,
                             neighbour_runs=20_000, neighbour_epsilons=[1.0])
    tails = pd.read_csv(tmp_path / "tail_epl.csv")
    assert set(tails["method"]) == {"gdpc", "adpc", "rdpc"}
    assert sorted(set(tails["k"])) == [0, 1, 2, 4, 8]
    gdpc = tails[tails["method"] == "gdpc"]
    assert np.allclose(gdpc["exact"], 1.0)
    estimated = gdpc[gdpc["estimable"]]
    assert len(estimated) >= 2
    se = np.fmax(estimated["upper_se"], estimated["lower_se"])
    assert (np.abs(estimated["epl"] - 1.0) <= 5 * se).all()
    adpc = tails[tails["method"] == "adpc"]
    assert (adpc["exact"] < 1.0).all() and tails[tails["method"] == "rdpc"]["exact"].isna().all()
    assert (~tails["estimable"] == tails["reason"].notna()).all()
    settings = pd.read_csv(tmp_path / "published_settings.csv")
    assert {"epl_improved", "epl_published", "epl_published_paper", "window_published",
            "window_published_paper"} <= set(settings.columns)
    assert (settings["window_published_paper"] > settings["window_published"]).all()
    leaf = pd.read_csv(tmp_path / "epl_by_epsilon.csv")
    assert leaf["epl_published_paper"].notna().sum() == 4          # the leaves of 4 methods
    figures = {f["file"] for f in summary["figures"]}
    assert {"tail_epl.png", "published_settings.png"} <= figures
    assert summary["headline"]["tail_adpc_below_epsilon_at_every_k"] is True
