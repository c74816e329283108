"""Parents of many children solved in two stages (:mod:`postproc.methods.topdown.groups`): the
groups' measurements and bounds against a loop over the children, exact recovery of noise-free
data, the fall-back to the whole node when a stage is infeasible, and the option through
``topdown`` and a run in parts, every promise checked independently."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from invariants.spec import Spec
from postproc.errors import PostprocError
from postproc.methods.topdown import NodeTask, QueryData, solve_node, topdown
from postproc.methods.topdown.groups import group_bounds, grouped_task, solve_grouped

from test_topdown import LEVELS, check_e2e_promises, noisy, truth  # noqa: F401 (fixtures)


def random_task(rng, k=9, n=6):
    """A node of ``k`` children over ``n`` cells: the detailed query and a two-answer marginal,
    weights with undrawn answers, zero cells, one constraint row with bounds."""
    marginal = sp.csr_matrix(np.array([[1, 1, 1, 0, 0, 0], [0, 0, 0, 1, 1, 1]], float))
    queries = []
    for name, m in (("detailed", sp.identity(n, format="csr")), ("halves", marginal)):
        values = rng.normal(3, 2, (k, m.shape[0]))
        weights = rng.choice([0.0, 0.25, 0.5, 2.0], size=values.shape, p=[0.1, 0.3, 0.4, 0.2])
        queries.append(QueryData(name, m, values, weights))
    zero = rng.random((k, n)) < 0.25
    lower = rng.integers(0, 3, (k, 1)).astype(float)
    upper = np.where(rng.random((k, 1)) < 0.3, np.inf, lower + 5)
    parent = rng.integers(0, 2, n) * rng.integers(1, 20, n)
    return NodeTask("tract", "c", parent, np.array([f"t{i}" for i in range(k)], dtype=object),
                    tuple(queries), sp.csr_matrix(np.ones((1, n), np.int64)), lower, upper, zero,
                    ("tot: total",))


@pytest.mark.parametrize("seed", range(8))
def test_group_measurements_and_bounds_match_a_loop_over_the_children(seed):
    rng = np.random.default_rng(seed)
    task = random_task(rng)
    bounds = group_bounds(task.k, 4)
    groups = grouped_task(task, bounds)
    live = (task.parent_hist > 0)[None, :] & ~task.zero
    assert groups.k == bounds.size - 1 == 3
    for g, (s, e) in enumerate(zip(bounds[:-1], bounds[1:])):
        np.testing.assert_array_equal(groups.zero[g], task.zero[s:e].all(axis=0))
        assert groups.lower[g, 0] == task.lower[s:e, 0].sum()
        assert groups.upper[g, 0] == task.upper[s:e, 0].sum()
        for q, qg in zip(task.queries, groups.queries):
            dense = q.matrix.toarray()
            for a in range(dense.shape[0]):
                value, variance, unknown = 0.0, 0.0, False
                for c in range(s, e):
                    counts = bool((dense[a] != 0) @ live[c])
                    if not counts:
                        continue          # the answer is exactly 0 for this child
                    if q.weights[c, a] == 0:
                        unknown = True
                    else:
                        value += q.values[c, a]
                        variance += 1 / q.weights[c, a]
                expected = 0.0 if unknown or variance == 0 else 1 / variance
                assert qg.weights[g, a] == pytest.approx(expected, rel=1e-12)
                if not measured_everywhere(q, a, live):
                    assert qg.values[g, a] == pytest.approx(value, abs=1e-12)
    # answers every live child measured: the sum of the projected answers, which add up to the
    # parent's answer over the groups
    projected = 0
    for q, qg in zip(task.queries, groups.queries):
        for a in range(q.matrix.shape[0]):
            if measured_everywhere(q, a, live):
                z = projection_by_qp(q, a, live, task.parent_hist)
                sums = [z[s:e].sum() for s, e in zip(bounds[:-1], bounds[1:])]
                np.testing.assert_allclose(qg.values[:, a], sums, atol=1e-5)
                target = (q.matrix @ task.parent_hist)[a] if counts_live(q, a, live).any() else 0
                assert qg.values[:, a].sum() == pytest.approx(target, abs=1e-6)
                projected += 1
    assert projected > 0


def counts_live(q, a, live):
    return ((q.matrix.toarray()[a] != 0) @ live.T) > 0          # per child


def measured_everywhere(q, a, live):
    return not np.any(counts_live(q, a, live) & (q.weights[:, a] == 0))


def projection_by_qp(q, a, live, parent):
    """The children's answers nearest their measurements, nonnegative, summing to the parent's
    answer — solved as a QP by cvxpy, independently of answer_projection's bisection."""
    import cvxpy as cp

    on = counts_live(q, a, live)
    z = np.zeros(q.values.shape[0])
    target = float((q.matrix @ parent)[a])
    if not on.any() or target == 0:
        return z
    var = cp.Variable(int(on.sum()))
    objective = cp.sum(cp.multiply(q.weights[on, a], cp.square(var - q.values[on, a])))
    cp.Problem(cp.Minimize(objective), [var >= 0, cp.sum(var) == target]).solve(
        solver="CLARABEL")
    z[on] = np.maximum(var.value, 0.0)
    return z


@pytest.mark.parametrize("group", [2, 3, 5, 8])
def test_noise_free_children_are_recovered_exactly(group):
    """Exact measurements of integer children that meet their bounds: both stages, and the
    whole node, return the children themselves."""
    rng = np.random.default_rng(group)
    k, n = 11, 6
    counts = rng.integers(0, 5, (k, n)) * (rng.random((k, n)) < 0.7)
    zero = (counts == 0) & (rng.random((k, n)) < 0.5)
    tot = counts.sum(axis=1, keepdims=True).astype(float)
    detailed = QueryData("detailed", sp.identity(n, format="csr"), counts.astype(float),
                         np.ones((k, n)))
    task = NodeTask("tract", "c", counts.sum(axis=0), np.arange(k).astype(str).astype(object),
                    (detailed,), sp.csr_matrix(np.ones((1, n), np.int64)), tot, tot.copy(),
                    zero, ("tot: total",))
    result = solve_grouped(task, group)
    np.testing.assert_array_equal(result.histograms, counts)
    assert result.stats["groups"] == len(group_bounds(k, group)) - 1 > 1
    assert result.stats["children"] == k and not result.stats["failsafe"]


def test_an_infeasible_stage_falls_back_to_the_whole_node():
    """Children a and b hold one person each, a only in cell 0 and b only in cell 1. Their
    group's measurements put both persons in cell 0, which the group's summed bounds allow but
    its children cannot split: the node is solved whole, and its statistics say so."""
    n = 2
    tot = np.ones((4, 1))
    zero = np.array([[0, 1], [1, 0], [0, 0], [0, 0]], bool)
    values = np.array([[5.0, 0.0], [0.0, 0.0], [0.0, 2.0], [0.0, 2.0]])
    detailed = QueryData("detailed", sp.identity(n, format="csr"), values, np.ones((4, n)))
    task = NodeTask("tract", "c", np.array([2, 2]), np.array(list("abcd"), dtype=object),
                    (detailed,), sp.csr_matrix(np.ones((1, n), np.int64)), tot, tot.copy(), zero,
                    ("tot: total",))
    first = solve_node(grouped_task(task, group_bounds(4, 2)), failsafe=False)
    assert first.histograms[0].tolist() == [2, 0]          # the split the children cannot make
    result = solve_grouped(task, 2)
    assert result.stats["groups"] == 1
    assert "infeasible" in result.stats["attempts"] and "solved whole" in result.stats["attempts"]
    np.testing.assert_array_equal(result.histograms, solve_node(task).histograms)
    assert result.histograms[:2].tolist() == [[1, 0], [0, 1]]


def test_topdown_in_groups_keeps_every_promise(noisy, truth):
    whole = topdown(noisy, Spec.e2e(LEVELS))
    grouped = topdown(noisy, Spec.e2e(LEVELS), group_children=2)
    check_e2e_promises(grouped, truth)
    assert grouped.failsafe_reports == []
    stats = grouped.node_stats
    assert (stats["groups"] > 1).sum() > 0
    assert (stats.loc[stats["groups"] > 1, "children"] > 2).all()
    assert grouped.provenance["solver"]["group_children"] == 2
    assert whole.provenance["solver"]["group_children"] is None
    assert "groups" not in whole.node_stats
    # the levels above the first grouped parent are identical; the grouped ones are not
    first = min(LEVELS.index(lv) for lv in stats.loc[stats["groups"] > 1, "level"])
    for li in range(first):
        np.testing.assert_array_equal(grouped.histograms[li], whole.histograms[li])
    assert any((g != w).any() for g, w in zip(grouped.histograms[first:],
                                              whole.histograms[first:]))


def _grouped_levels(result) -> set[str]:
    stats = result.node_stats
    return set(stats.loc[stats["groups"] > 1, "level"]) if "groups" in stats else set()


def test_group_children_per_level_groups_only_the_levels_it_names(noisy, truth):
    """A mapping level → size groups the parents of the levels it names and no other: through
    the level it names, a run equals the run grouped everywhere; above it, the whole run."""
    whole = topdown(noisy, Spec.e2e(LEVELS))
    everywhere = topdown(noisy, Spec.e2e(LEVELS), group_children=2)
    levels = sorted(_grouped_levels(everywhere), key=LEVELS.index)
    assert len(levels) == 2          # the fixture has large parents at two levels
    upper, lower = levels
    first = topdown(noisy, Spec.e2e(LEVELS), group_children={upper: 2, LEVELS[0]: None})
    last = topdown(noisy, Spec.e2e(LEVELS), group_children={lower: 2})
    for run, named in ((first, upper), (last, lower)):
        check_e2e_promises(run, truth)
        assert _grouped_levels(run) == {named}
    for li in range(LEVELS.index(upper) + 1):
        np.testing.assert_array_equal(first.histograms[li], everywhere.histograms[li])
    for li in range(LEVELS.index(lower)):
        np.testing.assert_array_equal(last.histograms[li], whole.histograms[li])
    assert any((f != e).any() for f, e in zip(first.histograms, everywhere.histograms))
    assert first.provenance["solver"]["group_children"] == {upper: 2, LEVELS[0]: None}


@pytest.mark.parametrize("bad", [1, 0, "64", True, 2.5, {"county": 1}, {"county": "64"}])
def test_topdown_refuses_a_bad_group_size(noisy, bad):
    with pytest.raises(PostprocError, match="group_children"):
        topdown(noisy, Spec.e2e(LEVELS), group_children=bad)


def test_topdown_refuses_group_children_of_an_unknown_level(noisy):
    with pytest.raises(PostprocError, match=r"group_children names levels \['tracts'\] that "
                                            r"the geography does not have; its levels are"):
        topdown(noisy, Spec.e2e(LEVELS), group_children={"tracts": 2})


def test_run_in_parts_passes_topdown_options(tmp_path):
    """``[postprocess] options`` reach TopDown in a run in parts (they were ignored there)."""
    from dataclasses import replace

    from hierarchy.synth.census2020 import synthesize_2020
    from postproc.apps.runs.demo import demo_config
    from postproc.apps.runs.parts import run_in_parts

    synthesize_2020(60_000, seed=5, out=tmp_path / "data", overwrite=True,
                    states=["11", "44"])
    config = replace(demo_config(tmp_path, preset="pl94_2020", seed=5),
                     method_options={"group_children": 4})
    run_in_parts(config, tmp_path / "out", part_blocks=2_000, log=lambda line: None)
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["provenance"]["solver"]["group_children"] == 4
    import pyarrow.parquet as pq

    stats = pq.read_table(tmp_path / "out" / "node_stats.parquet").to_pandas()
    assert (stats["groups"] > 1).any()


@pytest.mark.parametrize("level", ["tract", "block"])
def test_run_in_parts_groups_the_levels_named(tmp_path, level):
    """A per-level group_children reaches the part of the run that solves its level (the top
    or the parts) and no other level; the manifest records it as given."""
    from dataclasses import replace

    from hierarchy.synth.census2020 import synthesize_2020
    from postproc.apps.runs.demo import demo_config
    from postproc.apps.runs.parts import run_in_parts

    synthesize_2020(60_000, seed=5, out=tmp_path / "data", overwrite=True,
                    states=["11", "44"])
    config = replace(demo_config(tmp_path, preset="pl94_2020", seed=5),
                     method_options={"group_children": {level: 4}})
    run_in_parts(config, tmp_path / "out", part_blocks=2_000, log=lambda line: None)
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["provenance"]["solver"]["group_children"] == {level: 4}
    import pyarrow.parquet as pq

    stats = pq.read_table(tmp_path / "out" / "node_stats.parquet").to_pandas()
    assert set(stats.loc[stats["groups"] > 1, "level"]) == {level}
    assert (stats["children"] > 4).sum() > (stats["groups"] > 1).sum()   # others solved whole


def test_a_bad_group_size_in_a_config_is_refused_at_its_line(tmp_path):
    from postproc.apps.runs.config import load_config

    text = (Path(__file__).parents[1] / "examples" / "pl94_2020.toml").read_text()
    assert "\n# group_children = { county = 64, tract = 64 }" in text
    good = text.replace("\n# group_children = { county = 64, tract = 64 }",
                        "\ngroup_children = 64")
    (tmp_path / "good.toml").write_text(good)
    assert load_config(tmp_path / "good.toml").method_options == {"pass_tolerance": 0.1,
                                                                  "group_children": 64}
    (tmp_path / "bad.toml").write_text(good.replace("group_children = 64", "group_children = 1"))
    line = good.splitlines().index("group_children = 64") + 1     # the option's own line
    with pytest.raises(PostprocError, match=rf"bad.toml, line {line}: topdown: group_children "
                                            r"must be at least 2"):
        load_config(tmp_path / "bad.toml")
    per_level = good.replace("group_children = 64", "group_children = { county = 64, tract = 64 }")
    (tmp_path / "levels.toml").write_text(per_level)
    assert load_config(tmp_path / "levels.toml").method_options["group_children"] == {
        "county": 64, "tract": 64}
    (tmp_path / "bad.toml").write_text(per_level.replace("tract = 64", "tracts = 64"))
    with pytest.raises(PostprocError, match=rf"bad.toml, line {line}: topdown: group_children "
                                            r"names levels \['tracts'\] that the geography "
                                            r"does not have; its levels are \['nation', 'state'"):
        load_config(tmp_path / "bad.toml")


def test_answer_projection_refuses_a_live_child_without_weight():
    from postproc.methods.topdown.groups import answer_projection

    with pytest.raises(ValueError, match="no positive weight"):
        answer_projection(np.array([[1.0], [2.0]]), np.array([[1.0], [0.0]]),
                          np.ones((2, 1), bool), np.array([3.0]))
