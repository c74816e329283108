"""``gls`` on noisy hierarchies: the succinct path equals the general one, the promises hold,
errors name what is wrong, and the intervals cover what they say.

The coverage test draws independent measurements of one truth and counts how often the 90 %
interval of each unit's answer holds the true answer: in CI 60 replicates on a small 1940-style
hierarchy, in the full variant (``-m slow``) 500. The standard error of a share over ``R``
replicates of ``N`` independent answers is ``sqrt(0.09 / (R N))``; each test states its ``N``
and how far its bounds are. Wrong covariances move the share far more than chance does:
intervals half as wide as they should be cover about 59 %, twice as wide 99.9 %.
"""

from __future__ import annotations

import numpy as np
import pytest

from hierarchy.budget import Budget
from hierarchy.frames import resolve_query
from hierarchy.measurement import measure
from hierarchy.queries import Workload, detailed, e2e_workload, total
from hierarchy.schema import E2E_1940
from hierarchy.synth import synthesize_1940
from hierarchy.tabulation import tabulate
from invariants.spec import Spec
from postproc.errors import PostprocError
from postproc.methods import postprocess
from postproc.methods.gls import gls
from postproc.methods.gls import method as gls_method

LEVELS = ["nation", "state", "county"]


@pytest.fixture(scope="module")
def truth():
    data = synthesize_1940(4_000, seed=3)
    return tabulate(data.persons, schema=E2E_1940, levels=LEVELS, units=data.units)


@pytest.fixture(scope="module")
def measured(truth):
    spec = Spec.e2e(LEVELS)
    noisy = measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, LEVELS), rng=8, spec=spec)
    return noisy, spec


def _general(noisy, spec):
    """``gls`` with the succinct path switched off."""
    found = gls_method.find_symmetry
    gls_method.find_symmetry = lambda *args: (None, "switched off by the test")
    try:
        return gls(noisy, spec)
    finally:
        gls_method.find_symmetry = found


def test_the_split_by_race_equals_the_general_path(measured):
    """Means and the variances of every workload query at every level agree to 1e-8 of their
    scale: the split is exact, not an approximation."""
    noisy, spec = measured
    split, general = gls(noisy, spec), _general(noisy, spec)
    assert split.provenance.details["structure"] == "split"
    assert general.provenance.details["structure"] == "general"
    for a, b in zip(split.histograms, general.histograms):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-8 * max(1.0, np.abs(b).max()))
    for level in LEVELS:
        for query in ("total", "hhgq", "va_hisp_race", "detailed", "marginal(votingage)"):
            a = split.intervals(level, query).se.to_numpy() ** 2
            b = general.intervals(level, query).se.to_numpy() ** 2
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-8 * max(1.0, b.max()))


def test_a_level_measured_by_nothing_is_solved_alike_on_both_paths(measured):
    """A level without measurements (a Noisy Measurement File's level of only children, whose
    budget their parents spent) adds no information; the split by race handled it as one
    batch and failed on the shapes."""
    from hierarchy.noisy import NoisyHierarchy

    noisy, spec = measured
    bare = NoisyHierarchy(noisy.schema, noisy.geography, noisy.workload,
                          {lv: m for lv, m in noisy.measurements.items() if lv != "state"},
                          noisy.invariants, noisy.provenance)
    split, general = gls(bare, spec), _general(bare, spec)
    assert split.provenance.details["structure"] == "split"
    for a, b in zip(split.histograms, general.histograms):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-8 * max(1.0, np.abs(b).max()))
    # the states' estimates are their counties' sums, and differ from the measured run's
    whole = gls(noisy, spec)
    assert np.abs(split.histograms[1] - whole.histograms[1]).max() > 1e-6


def test_sums_over_sets_of_units_agree_between_the_split_and_the_general_path(measured):
    """The variance of a query summed over sets of units (``groups=``) is the same on the
    succinct path (mean and contrast problems) as on the general path (whose
    ``TreeGLS.sum_variances`` is checked against the dense referee), to 1e-8 of its scale;
    the estimates are the sums of the units'."""
    noisy, spec = measured
    split, general = gls(noisy, spec), _general(noisy, spec)
    for level in LEVELS[1:]:
        n = noisy.geography.n_units(level)
        sets = [f"set {u % 3}" if u % 4 else None for u in range(n)]
        for query in ("total", "va_hisp_race", "detailed"):
            a = split.intervals(level, query, groups=sets)
            b = general.intervals(level, query, groups=sets)
            np.testing.assert_allclose(a.se ** 2, b.se ** 2, rtol=0,
                                       atol=1e-8 * max(1.0, float((b.se ** 2).max())))
            each = split.intervals(level, query)
            keep = np.repeat([s is not None for s in sets], len(each) // n)
            assert np.isclose(a.estimate.sum(), each.estimate[keep].sum())
    with pytest.raises(PostprocError, match="geocode"):
        split.intervals("state", "total", groups={"nowhere": "x"})
    with pytest.raises(PostprocError, match="names for"):
        split.intervals("state", "total", groups=["x"])


def test_gls_keeps_its_promises_and_the_spec_s_equalities(measured, truth):
    """Registered: consistent (children sum to parents), the invariant totals exact to float
    rounding, the cells the spec fixes at 0 exactly 0; real-valued."""
    noisy, spec = measured
    result = postprocess(noisy, "gls", spec)
    assert result.method == "gls" and not result.integer
    for li in range(1, len(LEVELS)):
        summed = noisy.geography.aggregate(result.histograms[li], li, li - 1)
        np.testing.assert_allclose(summed, result.histograms[li - 1], atol=1e-7)
    for li, level in enumerate(LEVELS[:2]):          # tot is invariant at nation and state
        np.testing.assert_allclose(result.histograms[li].sum(axis=1),
                                   truth.counts[li].sum(axis=1), atol=1e-6)
    from invariants.compile import compile_spec

    compiled = compile_spec(spec, noisy.schema, noisy.geography, noisy.invariants)
    for li, level in enumerate(LEVELS):
        assert (result.histograms[li][compiled[level].zero] == 0).all()


def test_the_kind_of_a_query_agrees_with_its_definition():
    """``_kind`` (which reads the stored entries) against the definition (``q`` minus
    ``Q_a ⊗ I`` or ``Q_a ⊗ 1ᵀ`` is zero) on 600 matrices: Kronecker products, the same with
    one entry changed, dropped or added, and random ones (seed 7). Both kinds and neither
    occur."""
    import scipy.sparse as sp

    from postproc.methods.gls.symmetry import _kind

    def definition(q, groups, size):
        q = sp.csr_matrix(q, dtype=np.float64)
        if q.shape[0] % size == 0:
            qa = q[::size, ::size].toarray()
            if (sp.kron(qa, sp.identity(size)) - q).count_nonzero() == 0:
                return "sliced", qa
        qa = q[:, ::size].toarray()
        if (sp.kron(qa, np.ones((1, size))) - q).count_nonzero() == 0:
            return "summed", qa
        return None, None

    rng = np.random.default_rng(7)
    seen = set()
    for case in range(600):
        groups, size, answers = rng.integers(1, 5), rng.integers(2, 5), rng.integers(1, 5)
        qa = rng.choice([-1.0, 0.0, 0.0, 1.0, 2.0], size=(answers, groups))
        base = [np.kron(qa, np.eye(size)), np.kron(qa, np.ones((1, size))),
                rng.choice([0.0, 1.0], size=(answers * size, groups * size))][case % 3]
        q = base.copy()
        change = rng.integers(0, 4)            # 0: none; 1: a value; 2: drop one; 3: add one
        if change and q.size:
            i, j = rng.integers(q.shape[0]), rng.integers(q.shape[1])
            q[i, j] = {1: q[i, j] + 1.0, 2: 0.0, 3: q[i, j] or 3.0}[int(change)]
        got, want = _kind(sp.csr_matrix(q), groups, size), definition(q, groups, size)
        assert got[0] == want[0], (case, q)
        if want[0] is not None:
            np.testing.assert_array_equal(got[1], want[1])
        seen.add(want[0])
    assert seen == {"sliced", "summed", None}


def test_intervals_and_frames_agree(measured):
    """``to_frame(interval=)`` gives each cell the interval ``intervals(level, "detailed")``
    gives; a TopDown result has none and says where to get approximate ones."""
    noisy, spec = measured
    result = gls(noisy, spec)
    frame = result.to_frame("state", zeros=True, labels=False, parents=False, interval=0.8)
    cells = result.intervals("state", "detailed", interval=0.8)
    np.testing.assert_allclose(frame["se"].to_numpy(), cells["se"].to_numpy())
    np.testing.assert_allclose(frame["lower"].to_numpy(), cells["lower"].to_numpy())
    topdown = postprocess(noisy, "topdown", spec)
    with pytest.raises(PostprocError, match="replicate_intervals"):
        topdown.intervals("state")
    with pytest.raises(PostprocError, match="between 0 and 1"):
        result.intervals("state", interval=90)


def test_a_bottom_unit_without_detailed_measurements_is_named(truth):
    """Only the total measured at the bottom: the message names the level, the unit and the
    cells left free."""
    workload = Workload((detailed(E2E_1940), total(E2E_1940)))
    budget = Budget("pure", 1.0, {"nation": "2/5", "state": "3/10", "county": "3/10"},
                    {"nation": {"detailed": 1.0}, "state": {"detailed": 1.0},
                     "county": {"total": 1.0}})
    noisy = measure(truth, workload, budget, rng=1)
    with pytest.raises(PostprocError, match=r"level 2 unit .*do not determine its histogram"):
        gls(noisy)


@pytest.fixture(scope="module")
def counties():
    """4,000 persons in 49 states, each split at random into up to four counties (about 190)."""
    persons = synthesize_1940(4_000, seed=3).persons.to_pandas()
    draw = np.random.default_rng(4).integers(0, 4, len(persons)).astype(str)
    persons["county"] = persons["state"].astype(str) + draw
    return tabulate(persons, schema=E2E_1940, levels=LEVELS)


QUERIES = ("total", "hhgq", "va_hisp_race", "marginal(votingage)")


def _coverage(truth, replicates: int, seed: int) -> dict[str, dict[str, float]]:
    """Per level, the share of 90 % intervals that hold the true answer over ``replicates``
    independent measurements (no invariants: every answer is estimated), for all the level's
    answers of :data:`QUERIES` together (``"all"``) and for each query."""
    from hierarchy.queries import parse_query

    rng = np.random.default_rng(seed)
    inside: dict[tuple[str, str], list[np.ndarray]] = {}
    for _ in range(replicates):
        noisy = measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, LEVELS),
                        rng=int(rng.integers(2**31)))
        result = gls(noisy)
        for li, level in enumerate(LEVELS):
            for query in QUERIES:
                frame = result.intervals(level, query, interval=0.9)
                q = result.workload[query] if query in result.workload else parse_query(
                    query, E2E_1940)
                true = q.answer(truth.counts[li]).ravel()
                inside.setdefault((level, query), []).append(
                    (frame.lower.to_numpy() <= true) & (true <= frame.upper.to_numpy()))
        counties = len(truth.geography.geocodes[-1])
        sets = np.arange(counties) % 7                  # seven sets of counties across states
        for query in ("total", "hhgq"):
            frame = result.intervals(LEVELS[-1], query, interval=0.9, groups=sets.tolist())
            q = resolve_query(query, E2E_1940, result.workload)
            true = np.zeros((7, q.n_answers))
            np.add.at(true, sets, q.answer(truth.counts[-1]))
            inside.setdefault(("sets", "sets"), []).append(
                (frame.lower.to_numpy() <= true.ravel()) & (true.ravel() <= frame.upper.to_numpy()))
    out: dict[str, dict[str, float]] = {
        "sets of counties": {"all": float(np.concatenate(inside["sets", "sets"]).mean())}}
    for level in LEVELS:
        per = {q: float(np.concatenate(inside[level, q]).mean()) for q in QUERIES}
        pooled = np.concatenate([np.concatenate(inside[level, q]) for q in QUERIES])
        out[level] = {"all": float(pooled.mean()), **per}
    return out


def test_ninety_percent_intervals_cover_about_ninety_percent(counties):
    """CI variant: 60 replicates; the share of each level's answers (35 per unit) covered is
    between 0.87 and 0.93. The nation has 2,100 answers over the replicates: standard error
    0.0065 if independent (its answers are correlated, so somewhat more), the bounds 4.6 of
    those away; the states and counties have 49 and about 190 times as many. (Measured with
    100 replicates: 0.903, 0.904, 0.904.) The same for the totals and hhgq counts of seven sets
    of counties across states (``groups=``: 3,780 answers)."""
    coverage = _coverage(counties, 60, seed=2026)
    bad = {level: round(c["all"], 3) for level, c in coverage.items()
           if not 0.87 <= c["all"] <= 0.93}
    assert not bad, f"coverage outside 0.87–0.93: {bad} (all: {coverage})"


@pytest.mark.slow
def test_ninety_percent_intervals_cover_88_to_92_percent_over_500_replicates(counties):
    """Full variant (issue 37): 500 replicates; each level's share between 0.88 and 0.92, and
    each query's share at the states and counties too (the nation's single total is one answer
    per replicate: its share has a standard error of 0.013 over 500, so it is printed, not
    bounded)."""
    coverage = _coverage(counties, 500, seed=37)
    print({level: {q: round(v, 4) for q, v in c.items()} for level, c in coverage.items()})
    bad = {(level, q): round(v, 3) for level, c in coverage.items() for q, v in c.items()
           if (q == "all" or level != "nation") and not 0.88 <= v <= 0.92}
    assert not bad, f"coverage outside 0.88–0.92: {bad} (all: {coverage})"
