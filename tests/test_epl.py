"""Empirical privacy loss: the result type, the published recipe line by line, the Gaussian-sum
engine against brute force, degenerate inputs, the entry point, ``postproc epl`` and the
documented example. The improved and direct estimators have their own files
(``tests/test_epl_improved.py``, ``tests/test_epl_direct.py``), and the simulation study
``tests/test_epl_study.py``.
"""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest
from scipy.stats import gaussian_kde

import postproc.evaluation.epl as epl_module
import postproc.evaluation.epl._kernel as epl_kernel
from hierarchy.mechanisms import sample_discrete_gaussian, sample_two_sided_geometric
from postproc.cli import main
from postproc.errors import PostprocError
from postproc.evaluation.epl import EPLResult, estimate_epl, improved_epl, published_epl


# --------------------------------------------------------------------------------------------------
# a reference written from docs/epl.md ("The published estimator, reproduced")
# --------------------------------------------------------------------------------------------------
def published_reference(e, percentile=95, multiplier=1, bandwidth=0.1):
    """Flaxman's (2019) published recipe, line by line."""
    lo, hi = np.percentile(e, [100 - percentile, percentile])
    b = multiplier * max(abs(lo), abs(hi))
    edges = np.arange(-b, b, 1)
    midpoints = (edges[:-1] + edges[1:]) / 2
    f = len(e) * gaussian_kde(e, bw_method=bandwidth)(midpoints)
    epl_x = np.log(f[:-1] / f[1:])
    return np.max(np.abs(epl_x)), midpoints[:-1], epl_x


# --------------------------------------------------------------------------------------------------
# the result type
# --------------------------------------------------------------------------------------------------
def test_result_validates_itself():
    ok = dict(epl=0.5, ci_low=0.4, ci_high=0.6, n=10, method="improved", parameters={})
    EPLResult(**ok)
    for bad in [dict(method="kde"), dict(epl=float("inf")), dict(epl=float("nan")),
                dict(epl=-1.0), dict(reason="why"), dict(n=-1), dict(n=True),
                dict(x=[1.0, 2.0], epl_x=[0.1])]:
        with pytest.raises(PostprocError):
            EPLResult(**{**ok, **bad})


def test_result_is_immutable_and_json_ready():
    r = EPLResult(epl=float("inf"), ci_low=float("nan"), ci_high=float("nan"), n=np.int64(3),
                  method="published", parameters={"window": [np.float64(1.0)]},
                  reason="all errors equal", x=[0.5], epl_x=[np.inf])
    with pytest.raises(AttributeError):
        r.epl = 1.0
    with pytest.raises(ValueError):
        r.x[0] = 2.0
    data = json.loads(json.dumps(r.to_dict(curve=True), allow_nan=False))
    assert data == {"epl": None, "ci_low": None, "ci_high": None, "n": 3, "method": "published",
                    "kind": "undefined", "parameters": {"window": [1.0]},
                    "reason": "all errors equal",
                    "x": [0.5], "epl_x": [None]}


# --------------------------------------------------------------------------------------------------
# the Gaussian-sum engine
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("start, step, size, sigma", [
    (-20.0, 1.0, 41, 0.5),            # on the grid (integer data): bincount + convolution
    (-20.0, 0.5, 81, 0.35),           # half-integer grid, as for the improved estimator's se
    (-20.3, 1.0, 41, 0.01),           # off the grid, tiny kernel: Taylor-corrected binning
    (-7.7, 1.0, 16, 0.3),
    (-300.0, 1.0, 601, 60.0),         # wide kernel: FFT correlation
])
@pytest.mark.parametrize("kind", ["integer", "continuous"])
def test_gaussian_sums_match_brute_force(monkeypatch, kind, start, step, size, sigma):
    rng = np.random.default_rng(11)
    e = rng.normal(0, 8, 20_000)
    if kind == "integer":
        e = np.round(e)
    values, weights = epl_module._compress(e)
    monkeypatch.setattr(epl_kernel, "_DIRECT_LIMIT", 0)        # force the binned paths
    sums = epl_module._gaussian_sums(values, weights, start=start, step=step, size=size,
                                     sigma=sigma)
    x = start + step * np.arange(size)
    brute = np.exp(-0.5 * ((x[:, None] - e[None, :]) / sigma) ** 2).sum(axis=1)
    relevant = brute > (1e-3 * brute.max() if sigma > 50 else 0)   # FFT: relative to the peak
    np.testing.assert_allclose(sums[relevant], brute[relevant], rtol=1e-10)
    assert np.all(sums[brute == 0] == 0)


@pytest.mark.parametrize("kind", ["integer", "continuous"])
def test_percentiles_from_order_statistics_match_numpy(kind):
    e = np.random.default_rng(12).laplace(0, 3, 10_001)
    if kind == "integer":
        e = np.round(e)
    values, weights = epl_module._compress(e)
    order_statistic = epl_module._order_statistics(e, values, weights)
    q = [0, 2.5, 5, 25, 50, 75, 95, 97.5, 100, 33.3333]
    np.testing.assert_allclose(epl_module._percentiles(order_statistic, e.size, q),
                               np.percentile(e, q), rtol=1e-15, atol=1e-15)


# --------------------------------------------------------------------------------------------------
# the published estimator
# --------------------------------------------------------------------------------------------------
def _samples():
    rng = np.random.default_rng(5)
    return {"integer laplace": np.round(rng.laplace(0, 3, 4000)),
            "continuous normal": rng.normal(0.3, 4, 3000),
            "skewed": rng.exponential(5, 3000) - 2,
            "geometric": sample_two_sided_geometric(0.5, 5000, 9).astype(float)}


@pytest.mark.parametrize("name", sorted(_samples()))
@pytest.mark.parametrize("settings", [{}, dict(percentile=90, multiplier=1.5, bandwidth=0.2)])
def test_published_equals_the_recipe_line_by_line(name, settings):
    e = _samples()[name]
    expected, x, epl_x = published_reference(e, **settings)
    r = published_epl(e, fast=False, **settings)
    assert r.epl == pytest.approx(expected, rel=1e-12, abs=0)
    np.testing.assert_allclose(r.x, x, rtol=0, atol=0)
    np.testing.assert_allclose(r.epl_x, epl_x, rtol=1e-12, atol=1e-12)
    assert (r.n, r.method, r.reason) == (e.size, "published", None)
    assert math.isnan(r.ci_low) and math.isnan(r.ci_high)


@pytest.mark.parametrize("name", sorted(_samples()))
@pytest.mark.parametrize("binned", [False, True])
def test_published_fast_agrees_with_scipy(monkeypatch, name, binned):
    e = _samples()[name]
    if binned:
        monkeypatch.setattr(epl_kernel, "_DIRECT_LIMIT", 0)
    exact = published_epl(e, fast=False)
    fast = published_epl(e, fast=True)
    assert fast.epl == pytest.approx(exact.epl, rel=1e-10)
    np.testing.assert_allclose(fast.epl_x, exact.epl_x, rtol=1e-9, atol=1e-10)
    assert fast.parameters["fast"] and not exact.parameters["fast"]


def test_published_fast_with_a_narrow_kernel_between_integers():
    # kernel sd 0.027: the midpoints sit 18 sd away from every (integer) error
    e = sample_two_sided_geometric(1.0, 20_000, 4).astype(float)
    exact, fast = published_epl(e, bandwidth=0.02, fast=False), published_epl(e, bandwidth=0.02,
                                                                              fast=True)
    assert fast.epl == pytest.approx(exact.epl, rel=1e-10)


def test_published_picks_the_fast_path_for_large_inputs():
    e = np.round(np.random.default_rng(2).laplace(0, 3, 400_000))
    r = published_epl(e)
    assert r.parameters["fast"]
    assert r.epl == pytest.approx(published_reference(e)[0], rel=1e-10)


@pytest.mark.parametrize("errors, fragment", [
    ([], "0 error(s)"),
    ([4.0], "1 error(s)"),
    ([2, 2, 2], "all 3 errors equal 2"),
    (np.r_[np.zeros(97), [5, -5, 5]], "holds 0 midpoint(s)"),
    (np.r_[np.zeros(80), np.ones(10), -np.ones(10)], "holds 1 midpoint(s)"),
])
def test_published_degenerate_inputs_are_infinite_with_a_reason(errors, fragment):
    r = published_epl(errors)
    assert r.epl == math.inf and fragment in r.reason


def test_published_underflow_is_infinite_with_a_reason():
    e = np.round(np.random.default_rng(0).laplace(0, 3, 1000))
    r = published_epl(e, bandwidth=0.001)
    assert r.epl == math.inf and "underflows to 0" in r.reason


@pytest.mark.parametrize("kwargs", [dict(percentile=50), dict(percentile=101),
                                    dict(multiplier=0), dict(bandwidth=-0.1),
                                    dict(bandwidth="wide")])
def test_published_rejects_bad_parameters(kwargs):
    with pytest.raises(PostprocError):
        published_epl(np.arange(10.0), **kwargs)


@pytest.mark.parametrize("errors, fragment", [
    ([1.0, np.nan, 2.0], "element 1 is nan"),
    (np.zeros((3, 2)), "1-D"),
    (["a", "b"], "must be numbers"),
])
def test_bad_errors_are_rejected_by_every_method(errors, fragment):
    for estimate in (published_epl, improved_epl):
        with pytest.raises(PostprocError, match=fragment):
            estimate(errors)


# --------------------------------------------------------------------------------------------------
# one entry point
# --------------------------------------------------------------------------------------------------
def test_estimate_epl_dispatches_and_checks_options():
    e = sample_two_sided_geometric(0.5, 20_000, 51)
    assert estimate_epl(e, n_boot=0).method == "improved"
    assert estimate_epl(e, method="published").epl == published_epl(e).epl
    on_d, on_neighbour = e[:10_000], e[10_000:] + 1
    assert estimate_epl(on_d, method="direct", neighbour=on_neighbour, n_boot=0).method == "direct"
    with pytest.raises(PostprocError, match="unknown EPL method"):
        estimate_epl(e, method="kde")
    with pytest.raises(PostprocError, match="takes no option 'percentile'"):
        estimate_epl(e, percentile=90)
    with pytest.raises(PostprocError, match="needs neighbour="):
        estimate_epl(e, method="direct")


# --------------------------------------------------------------------------------------------------
# postproc epl
# --------------------------------------------------------------------------------------------------
def run_cli(capsys, argv):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def geometric_errors():
    return sample_two_sided_geometric(0.5, 30_000, 61)


def test_cli_json_keys_and_values(tmp_path, capsys, geometric_errors):
    path = tmp_path / "errors.npy"
    np.save(path, geometric_errors)
    code, out, _ = run_cli(capsys, ["epl", "--errors", str(path), "--json", "--seed", "1",
                                    "--n-boot", "20"])
    assert code == 0
    data = json.loads(out)
    assert set(data) == {"epl", "ci_low", "ci_high", "n", "method", "kind", "parameters",
                         "reason"}
    assert data["kind"] == "estimate"
    expected = improved_epl(geometric_errors, n_boot=20, rng=1)
    assert data["epl"] == pytest.approx(expected.epl, rel=1e-12)
    assert data["ci_low"] == pytest.approx(expected.ci_low, rel=1e-12)
    assert (data["n"], data["method"], data["reason"]) == (30_000, "improved", None)
    assert data["parameters"]["n_boot"] == 20


@pytest.mark.parametrize("header", ["", "error\n"])
def test_cli_published_from_csv(tmp_path, capsys, geometric_errors, header):
    path = tmp_path / "errors.csv"
    path.write_text(header + "\n".join(str(v) for v in geometric_errors) + "\n")
    code, out, _ = run_cli(capsys, ["epl", "--errors", str(path), "--method", "published",
                                    "--percentile", "90", "--multiplier", "1.5",
                                    "--bandwidth", "0.2", "--json"])
    assert code == 0
    data = json.loads(out)
    expected = published_epl(geometric_errors, percentile=90, multiplier=1.5, bandwidth=0.2)
    assert data["epl"] == pytest.approx(expected.epl, rel=1e-12)
    assert data["ci_low"] is None and data["n"] == 30_000
    assert data["parameters"]["percentile"] == 90


def test_cli_summary_and_undefined_epl(tmp_path, capsys, geometric_errors):
    path = tmp_path / "errors.npy"
    np.save(path, geometric_errors.reshape(-1, 1))      # one column is fine
    code, out, _ = run_cli(capsys, ["epl", "--errors", str(path), "--n-boot", "0"])
    assert code == 0 and out.startswith("EPL (improved): ") and "n = 30000 errors" in out
    assert "window [-5, 4] (5th to 95th percentile), centre 0" in out
    code, out, _ = run_cli(capsys, ["epl", "--errors", str(path), "--seed", "2", "--reach", "90",
                                    "--precision", "0.2"])
    assert code == 0 and "95% interval [" in out and "(10th to 90th percentile)" in out
    np.save(path, np.zeros(20))
    code, out, _ = run_cli(capsys, ["epl", "--errors", str(path), "--json"])
    data = json.loads(out)
    assert code == 0 and data["epl"] is None and "all 20 errors equal 0" in data["reason"]
    code, out, _ = run_cli(capsys, ["epl", "--errors", str(path), "--method", "published"])
    assert code == 0 and "EPL (published): undefined" in out and "undefined: all 20" in out


def test_cli_prints_a_bound_and_why(tmp_path, capsys):
    """Too few errors for their spread: the summary gives the one-sided bound and the reason,
    whose advice (a precision) then gives a number; JSON says ``kind: bound``."""
    path = tmp_path / "errors.npy"
    np.save(path, sample_discrete_gaussian(400, 60, 0))
    code, out, _ = run_cli(capsys, ["epl", "--errors", str(path), "--seed", "1"])
    lines = out.splitlines()
    assert code == 0 and lines[0].startswith("EPL (improved): >= ")
    assert "one-sided 95% lower bound" in lines[0]
    assert lines[1].startswith("bound: too few errors (60) for their spread")
    assert "precision 0.25" in lines[2] and "estimate " in lines[2]
    advised = re.search(r"pass precision=([0-9.]+)", lines[1]).group(1)
    code, out, _ = run_cli(capsys, ["epl", "--errors", str(path), "--seed", "1",
                                    "--precision", advised])
    assert code == 0 and re.match(r"EPL \(improved\): [0-9.]+ +95% interval", out)
    code, out, _ = run_cli(capsys, ["epl", "--errors", str(path), "--json", "--seed", "1"])
    data = json.loads(out)
    assert data["epl"] is None and data["kind"] == "bound" and data["ci_low"] > 0
    assert data["reason"].startswith("too few errors (60)")


def test_cli_prints_undefined_when_nothing_is_known(tmp_path, capsys):
    path = tmp_path / "errors.csv"
    path.write_text("3\n")
    code, out, _ = run_cli(capsys, ["epl", "--errors", str(path)])
    assert code == 0 and out.splitlines()[0] == "EPL (improved): undefined"
    assert out.splitlines()[1].startswith("undefined: 1 error(s): too few units")


@pytest.mark.parametrize("name, content, fragment", [
    ("missing.csv", None, "missing.csv: no such file"),
    ("wide.npy", np.zeros((4, 2)), "wide.npy: an array of shape (4, 2)"),
    ("text.npy", np.array(["a", "b"]), "text.npy: holds <U1 values, not numbers"),
    ("nan.npy", np.array([1.0, np.nan]), "nan.npy: element 1 is nan"),
    ("two.csv", "1,2\n3,4\n", "two.csv: 2 columns in line 1"),
    ("ragged.csv", "1\n2\n3,4\n", "ragged.csv, line 3: 2 columns"),
    ("word.csv", "error\n1\n2\nthree\n", "word.csv, line 4 'three' is not a number"),
    ("inf.csv", "1\ninf\n", "inf.csv, line 2 'inf' is not finite"),
    ("blank.csv", "1\n\n3\n", "blank.csv, line 2 is empty"),
    ("empty.csv", "", "empty.csv: the file is empty"),
    ("header.csv", "error\n", "header.csv: no errors after the header line"),
])
def test_cli_bad_files_name_the_file_and_exit_1(tmp_path, capsys, name, content, fragment):
    path = tmp_path / name
    if isinstance(content, np.ndarray):
        np.save(path, content)
    elif content is not None:
        path.write_text(content)
    code, out, err = run_cli(capsys, ["epl", "--errors", str(path)])
    assert code == 1 and out == ""
    assert err.startswith("postproc epl: error: ") and fragment in err, err


@pytest.mark.parametrize("options, fragment", [
    (["--percentile", "90"], "apply to --method published only"),
    (["--method", "published", "--seed", "1"], "apply to --method improved only"),
    (["--method", "published", "--precision", "0.2"], "apply to --method improved only"),
    (["--precision", "2"], "precision must be in (0, 1)"),
    (["--bandwidth", "-1"], "bandwidth must be a positive number"),
])
def test_cli_rejects_options_of_the_other_method(tmp_path, capsys, options, fragment):
    path = tmp_path / "errors.npy"
    np.save(path, np.arange(-50.0, 50.0))
    code, _, err = run_cli(capsys, ["epl", "--errors", str(path), *options])
    assert code == 1 and fragment in err


def test_the_documented_example_runs():
    import doctest
    from pathlib import Path
    path = Path(__file__).resolve().parents[1] / "docs" / "epl.md"
    result = doctest.testfile(str(path), module_relative=False,
                              optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted >= 10
