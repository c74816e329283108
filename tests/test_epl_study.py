"""The EPL simulation study (``benchmarks/bench_epl_study.py``): fast variants on every run, the
full study behind the ``slow`` marker.

Fast variant at the sizes of national data: geometric ``z ∈ {0.05, 1}``, 20 seeds each;
improved at ``n = 200,000``, direct at ``R = 50,000`` runs. Tolerances and their false-failure
rates (for seeds drawn at random; the seeds here are fixed, so the test is deterministic):

* every improved result a number, and direct at ``z = 1``: at these sizes the contenders'
  standard errors are 10–25 times below the precision rule's limit;
* direct at ``z = 0.05`` undefined in every seed: it would need about 640,000 runs (the
  contenders' standard error, about ``4/√R = 0.018``, is 3.6 times the limit);
* every estimate inside its own interval: by construction;
* bias, the mean relative error over 20 seeds, within ±4 % (improved) or ±6 % (direct): the
  study's means are ≤ +0.5 % (improved) and +1.5 % (direct, z = 1) with per-seed sd ≤ 1 %,
  so the mean of 20 has sd ≤ 0.3 %; a false failure needs a 9-sd deviation;
* coverage of the 95 % intervals: at least 33 of the 40 improved ones (both ``z``) and at least
  16 of the 20 direct ones cover. If the true coverage is 95 % (93 %), fewer happen with
  probability 7e-4 (6e-3) and 3e-3 (1e-2).

Fast variant at the sizes users prototype with: 1,000 errors of geometric ``z ∈ {0.05, 2}`` and
of the discrete Gaussian ``σ = 50``, 20 seeds each: at least 19 of every 20 results a number
(the study: 97–100 % numbers, so 2 or more bounds in 20 have probability ≤ 0.12 per case at the
worst rate, 0.017 at 99 %); the mean relative error of each case below +15 %
(study: ≤ +5 % with per-seed sd ≤ 12 %, so the mean of 20 has sd ≤ 2.7 %: a false failure
needs 3.7 sd, probability 1e-4); at least 50 of the (up to) 60 intervals cover (at a true 95 %,
fewer than 50 of 57 has probability 7e-3).

Slow variant: the full study (50 seeds), asserting the targets of ``docs/epl.md``.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import binom

STUDY = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_epl_study.py"


@pytest.fixture(scope="module")
def study():
    spec = importlib.util.spec_from_file_location("bench_epl_study", STUDY)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _check_fast(part, bias_tolerance, least_covered):
    for r in part:
        assert r["seeds"] == 20 and r["numbers"] == 1, r
        assert r["inside"] == 1, r
        assert abs(r["bias"]) < bias_tolerance, r
    covered = sum(round(r["coverage"] * r["seeds"]) for r in part)
    assert covered >= least_covered, part


def test_fast_study(study):
    records = study.run(seeds=20, sizes=(200_000,), runs=(50_000,), geometric=(0.05, 1.0),
                        gaussian=(), log=lambda message: None)
    rows = {(r["estimator"], r["parameter"]): r for r in study.summarise(records)}
    _check_fast([rows["improved", 0.05], rows["improved", 1.0]], 0.04, 33)
    _check_fast([rows["direct", 1.0]], 0.06, 16)
    assert rows["direct", 0.05]["undefined"] == 1
    assert "Pooled over the cases" in study.tables(list(rows.values()))


def test_fast_study_at_a_thousand_errors(study):
    """The sizes a methodologist prototypes with: numbers, with small bias, that cover."""
    records = study.run(seeds=20, sizes=(1_000,), runs=(), geometric=(0.05, 2.0),
                        gaussian=(50.0,), log=lambda message: None)
    rows = study.summarise(records)
    assert len(rows) == 3
    for r in rows:
        assert r["seeds"] == 20 and r["numbers"] >= 19 / 20, r
        assert r["inside"] == 1 and r["bias"] < 0.15, r
    covered = sum(round(r["coverage"] * r["seeds"] * r["numbers"]) for r in rows)
    assert covered >= 50, rows


def test_estimands_from_the_pmf(study):
    families = {(f, p): log_pmf for f, p, _, log_pmf in study.families()}
    geometric, gaussian = families[("geometric", 0.5)], families[("discrete Gaussian", 5.0)]
    assert study.improved_estimand(geometric, [-7, 9]) == pytest.approx(0.5)
    assert study.improved_estimand(gaussian, [-8, 9]) == pytest.approx((2 * 9 - 1) / 50)
    assert study.direct_estimand(geometric, [5, 16]) == pytest.approx(0.5)
    # D: 10 + noise, D′: 11 + noise; at k the ratio is |(k−10)² − (k−11)²| / 50
    assert study.direct_estimand(gaussian, [2, 19]) == pytest.approx((2 * 9 - 1) / 50)


@pytest.mark.slow
def test_full_study_meets_its_targets(study):
    """The issue's targets, 50 seeds per case. A case's coverage fails if, at a true 95 %, as
    few covering intervals had probability below 1e-4 (40 or fewer of 50): false failure
    ≤ 1e-4 per case, < 1e-2 over the 70-odd cases. In the range of the targets (geometric
    0.05 ≤ z ≤ 2 and Gaussian 1 ≤ σ ≤ 50 at n ≥ 1,000) at least 45 of 50 results are numbers
    (the target is 95 %; at a true 97 % — the study's worst — 6 or more bounds in 50 have
    probability 0.004), the bias is at most 15 % at n ≤ 5,000 and 5 % from 200,000 on; z = 5
    and 10 at n = 1,000 give no bare undefined, and their bounds hold in 45 of 50 or more."""
    rows = study.summarise(study.run(seeds=50, log=lambda message: None))
    for r in rows:
        if "coverage" in r:
            reported = round(r["seeds"] * r["numbers"])
            assert r["inside"] == 1, r
            assert binom.cdf(round(r["coverage"] * reported), reported, 0.95) > 1e-4, r
        if r["estimator"] != "improved":
            continue
        in_range = (r["family"] == "geometric" and 0.05 <= r["parameter"] <= 2) or \
            r["family"] != "geometric"
        if in_range:
            assert r["numbers"] >= 0.9, r
            assert abs(r["bias"]) <= (0.05 if r["size"] >= 200_000 else 0.15), r
        if r["family"] == "geometric" and r["parameter"] >= 5 and r["size"] == 1_000:
            assert r["undefined"] == 0 and r["bounds"] > 0.5 and r["bounds_hold"] >= 0.9, r
    for estimator in ("improved", "direct"):
        part = [r for r in rows if r["estimator"] == estimator and "coverage" in r]
        covered = sum(r["coverage"] * r["seeds"] * r["numbers"] for r in part)
        reported = sum(r["seeds"] * r["numbers"] for r in part)
        assert 0.90 <= covered / reported <= 0.99, (estimator, covered / reported)
    unresolvable = [r for r in rows if r["estimator"] == "direct" and r["family"] == "geometric"
                    and r["parameter"] <= 0.1 and r["size"] <= 5_000]
    assert unresolvable and all(r["undefined"] == 1 for r in unresolvable)
    assert all(r["bounds"] == 0 for r in rows if r["estimator"] == "direct")
    assert np.isfinite([r["estimand"] for r in rows]).all()
