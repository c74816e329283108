"""Gong & Meng's γ (postproc.methods.sampling.gamma): the paper's three examples, an independent
brute-force computation of the conditioned mechanism's privacy loss, the bound, the CLI.

Gong & Meng (2020), Section 5.1: trivial invariants γ = 0 (Example 5.1); rounding, a query the
invariants pin down, γ = −1 (Example 5.2); the two-bin histogram with its total invariant and
noise calibrated to the histogram's sensitivity 2, γ = −1/2 (Example 4.1, Example 5.3's text).
"""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest

from postproc.cli import main
from postproc.errors import PostprocError
from postproc.methods.sampling.gamma import (
    conditional_gamma,
    conforming_tables,
    table_gamma,
)


def test_example_5_1_trivial_invariants_give_zero():
    """No invariant: M* = M. Datasets one count apart (add a person), outputs every integer
    near them: the double-geometric noise's loss is exactly z = ε, so γ = 0."""
    counts = np.arange(0, 8)
    outputs = np.arange(-200, 210)[:, None]
    gamma = conditional_gamma(np.abs(counts[:, None] - counts[None, :]), counts[:, None],
                              outputs, epsilon=0.7)
    assert gamma.method == "exact" and gamma.distance == 1
    assert gamma.gamma == pytest.approx(0.0, abs=1e-9)


def test_example_5_2_rounding_gives_minus_one():
    """s(x) = ceil(sum/10) with the sum invariant in 41..50: every conforming dataset has s = 5,
    S* = {5}, M* is degenerate; neighbours at distance 1 exist and cannot be told apart."""
    t = np.arange(41, 51)
    gamma = conditional_gamma(np.abs(t[:, None] - t[None, :]), -(-t[:, None] // 10), [[5]],
                              epsilon=1.3)
    assert (gamma.gamma, gamma.distance, gamma.pairs) == (-1.0, 1, 9)


@pytest.mark.parametrize("total", [1, 6, 15])
def test_example_4_1_two_bins_with_their_total_give_minus_one_half(total):
    gamma = table_gamma([[1, 1]], [total], epsilon=1.0, sensitivity=2, outputs="integers")
    assert gamma.distance == 2
    assert gamma.gamma == pytest.approx(-0.5, abs=1e-12)
    # the same noise calibrated to the tight loss (z = ε per cell) costs exactly its ε per unit
    assert table_gamma([[1, 1]], [total], epsilon=1.0, outputs="integers").gamma == \
        pytest.approx(0.0, abs=1e-12)


def _brute_force_gamma(A, a, z, epsilon, nonnegative=True, reach=60):
    """γ from first principles, written independently: every integer table with A x = a in a
    box, the conditional pmf of each conforming table by direct normalization, the nearest
    conforming pairs by distance, the largest |log ratio| over outputs."""
    A = np.asarray(A)
    top = int(max(a))
    box = range(0 if nonnegative else -reach, top + 1 + (0 if nonnegative else reach))
    outs = [np.array(y) for y in itertools.product(box, repeat=A.shape[1])
            if np.array_equal(A @ np.array(y), a)]
    data = [y for y in outs if (y >= 0).all()]

    def pmf(x):
        w = np.array([math.exp(-z * np.abs(y - x).sum()) for y in outs])
        return w / w.sum()

    laws = [pmf(x) for x in data]
    dist = {(i, j): int(np.abs(data[i] - data[j]).sum())
            for i in range(len(data)) for j in range(i + 1, len(data))}
    k = min(dist.values())
    loss = max(np.max(np.abs(np.log(laws[i]) - np.log(laws[j])))
               for (i, j), d in dist.items() if d == k)
    return loss / (k * epsilon) - 1


@pytest.mark.parametrize("A, a, epsilon, sensitivity", [
    ([[1, 1, 1]], [4], 1.0, 1),
    ([[1, 1, 1]], [4], 0.5, 2),
    ([[1, 1, 1, 1], [1, 1, 0, 0]], [5, 2], 0.8, 1),
    ([[1, 1, 1, 1], [1, 0, 1, 0]], [4, 3], 2.0, 2),
])
def test_exact_gamma_equals_an_independent_brute_force(A, a, epsilon, sensitivity):
    """With nonnegative outputs (what postproc mis releases) the normalizing constants depend on
    the data, so γ is not a round number: checked against a direct computation."""
    got = table_gamma(A, a, epsilon=epsilon, sensitivity=sensitivity)
    want = _brute_force_gamma(A, a, epsilon / sensitivity, epsilon)
    assert got.method == "exact"
    assert got.gamma == pytest.approx(want, abs=1e-10)
    assert -1 <= got.gamma <= 1


def test_integer_outputs_equal_the_brute_force_over_a_wide_box():
    got = table_gamma([[1, 1, 1]], [3], epsilon=1.0, outputs="integers", limit=10_000)
    assert got.method == "exact"                  # 7,141 outputs: above the default limit
    assert table_gamma([[1, 1, 1]], [3], epsilon=1.0, outputs="integers").method == "bound"
    want = _brute_force_gamma([[1, 1, 1]], [3], 1.0, 1.0, nonnegative=False, reach=25)
    assert got.gamma == pytest.approx(want, abs=1e-9)


def test_too_many_or_unbounded_tables_give_the_stated_bound():
    free = table_gamma([[1, 1, 0]], [4], epsilon=1.0)            # cell 3 unbounded
    assert (free.gamma, free.method) == (1.0, "bound") and "Theorem 2.1" in free.reason
    many = table_gamma([[1] * 6], [30], epsilon=1.0, limit=100)  # 324,632 tables
    assert (many.gamma, many.method) == (1.0, "bound")


def test_conforming_tables_are_all_and_only_the_solutions():
    A, a = [[1, 1, 1, 0], [0, 0, 1, 1]], [3, 2]
    found = {tuple(x) for x in conforming_tables(A, a)}
    want = {x for x in itertools.product(range(4), repeat=4)
            if np.array_equal(np.array(A) @ np.array(x), a)}
    assert found == want


def test_bad_input_is_refused():
    with pytest.raises(PostprocError, match="epsilon must be a positive"):
        table_gamma([[1, 1]], [2], epsilon=0)
    with pytest.raises(PostprocError, match="sensitivity must be a positive whole number"):
        table_gamma([[1, 1]], [2], epsilon=1, sensitivity=0)
    with pytest.raises(PostprocError, match="outputs must be"):
        table_gamma([[1, 1]], [2], epsilon=1, outputs="reals")
    with pytest.raises(PostprocError, match="no nonnegative integer table"):
        table_gamma([[1, 1], [1, 0]], [2, 3], epsilon=1)
    with pytest.raises(PostprocError, match="distance 0"):
        conditional_gamma([[0, 0], [0, 0]], [[1], [1]], [[1]], epsilon=1)


def test_cli_prints_gamma_and_its_method(tmp_path, capsys):
    table = tmp_path / "bins.csv"
    table.write_text("bin,count\n0,2\n1,4\n")
    assert main(["gamma", "--table", str(table), "--invariant", "total", "--epsilon", "1",
                 "--sensitivity", "2", "--outputs", "integers", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["gamma"] == pytest.approx(-0.5) and out["method"] == "exact"
    assert out["distance"] == 2
    assert main(["gamma", "--table", str(table), "--invariant", "marginal(colour)",
                 "--epsilon", "1"]) == 1
    assert "colour" in capsys.readouterr().err


def test_postproc_mis_states_the_gamma_of_its_release(tmp_path, capsys):
    table = tmp_path / "three.csv"
    table.write_text("cell,count\na,1\nb,2\nc,1\n")
    assert main(["mis", "--table", str(table), "--invariant", "total", "--epsilon", "1",
                 "--seed", "1", "--draws", "60", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    want = table_gamma([[1, 1, 1]], [4], epsilon=1.0)
    assert out["gamma"]["method"] == "exact"
    assert out["gamma"]["gamma"] == pytest.approx(want.gamma, abs=1e-12)
