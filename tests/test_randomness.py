"""Randomness modes, stream determinism and the uniformity of the primitive draws.

Statistical tests use a fixed seed (so the suite is deterministic) and a threshold of
p > 1e-6: were the seed random, each would fail falsely with probability 1e-6.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

import hierarchy.randomness as randomness
from hierarchy.errors import HierarchyError
from hierarchy.randomness import RELEASE_LABEL, UNSAFE_LABEL, Randomness, as_randomness

P_MIN = 1e-6


# ---------------------------------------------------------------------------------------------
# modes
# ---------------------------------------------------------------------------------------------


def test_release_mode_is_the_default_and_says_so():
    r = as_randomness(None)
    assert r.mode == "release" and r.safe_for_release and r.seed is None
    assert r.label == RELEASE_LABEL and "NOT SAFE" not in r.label
    prov = r.provenance()
    assert prov == {"mode": "release", "seed": None, "stream": [], "safe_for_release": True,
                    "label": RELEASE_LABEL}
    assert repr(r) == "Randomness.release()"
    # fresh secure bits each time (a repeat of 4 words has probability 2**-256)
    assert not np.array_equal(r.random_raw(4), r.random_raw(4))
    assert r.child(1, 2).mode == "release"


def test_simulation_mode_is_labelled_unsafe():
    r = as_randomness(7)
    assert r.mode == "simulation" and not r.safe_for_release and r.seed == 7
    assert "NOT SAFE" in r.label and r.label == UNSAFE_LABEL
    assert r.provenance()["safe_for_release"] is False
    assert r.provenance()["label"] == UNSAFE_LABEL
    assert r.child(3).provenance()["stream"] == [3]
    assert as_randomness(np.int64(7)).seed == 7
    g = as_randomness(np.random.default_rng(1))
    assert g.mode == "simulation" and g.seed is None and g.label == UNSAFE_LABEL
    assert as_randomness(r) is r


@pytest.mark.parametrize("make", [
    lambda: Randomness("release", seed=1),
    lambda: Randomness("release", generator=np.random.default_rng(0)),
])
def test_release_mode_cannot_be_seeded(make):
    with pytest.raises(HierarchyError, match="release mode cannot be seeded"):
        make()


@pytest.mark.parametrize("make, message", [
    (lambda: Randomness("bogus"), "mode must be 'release' or 'simulation'"),
    (lambda: Randomness("simulation"), "needs a seed or a numpy Generator"),
    (lambda: Randomness.simulation(-1), "non-negative integer"),
    (lambda: Randomness.simulation(True), "non-negative integer"),
    (lambda: Randomness.simulation(1.5), "non-negative integer"),
    (lambda: as_randomness("7"), "rng must be None"),
    (lambda: as_randomness(1.0), "rng must be None"),
    (lambda: as_randomness(True), "rng must be None"),
    (lambda: Randomness.simulation(0).random_raw(-1), "negative number"),
])
def test_invalid_randomness_raises(make, message):
    with pytest.raises(HierarchyError, match=message):
        make()


# ---------------------------------------------------------------------------------------------
# streams
# ---------------------------------------------------------------------------------------------


def test_simulation_bits_are_seeded_pcg64():
    np.testing.assert_array_equal(Randomness.simulation(7).random_raw(5),
                                  np.random.PCG64(7).random_raw(5))
    assert Randomness.simulation(7).random_raw(0).dtype == np.uint64


def test_child_streams_depend_only_on_seed_and_key():
    a = Randomness.simulation(11)
    fresh = a.child(2, 5).random_raw(8)
    a.random_raw(1000)                       # using the parent does not move its children
    a.child(9).random_raw(10)
    np.testing.assert_array_equal(a.child(2, 5).random_raw(8), fresh)
    np.testing.assert_array_equal(Randomness.simulation(11).child(2, 5).random_raw(8), fresh)
    np.testing.assert_array_equal(a.child(2).child(5).random_raw(8), fresh)
    assert a.child(2, 5).key == (2, 5)
    # different keys, different seeds, and parent vs child all give different streams
    others = [a.child(5, 2), a.child(2, 6), a.child(2), Randomness.simulation(12).child(2, 5),
              Randomness.simulation(11)]
    for o in others:
        assert not np.array_equal(o.random_raw(8), fresh)


def test_children_of_a_wrapped_generator_are_distinct_and_reproducible():
    def draws(seed):
        r = as_randomness(np.random.default_rng(seed))
        return [r.child(0).random_raw(4) for _ in range(3)]
    first = draws(3)
    assert not np.array_equal(first[0], first[1]) and not np.array_equal(first[1], first[2])
    for x, y in zip(first, draws(3)):
        np.testing.assert_array_equal(x, y)


def test_release_random_raw_in_several_os_calls(monkeypatch):
    monkeypatch.setattr(randomness, "_URANDOM_CHUNK_WORDS", 3)
    words = Randomness.release().random_raw(10)
    assert words.shape == (10,) and words.dtype == np.uint64
    assert np.unique(words).size == 10        # a repeat has probability ~45 / 2**64


# ---------------------------------------------------------------------------------------------
# uniform
# ---------------------------------------------------------------------------------------------


def test_uniform_is_open_closed_with_53_bits(monkeypatch):
    r = Randomness.simulation(0)
    monkeypatch.setattr(r.__class__, "random_raw",
                        lambda self, n: np.array([0, 2**64 - 1, 2**11 - 1, 2**11],
                                                 dtype=np.uint64)[:n])
    u = r.uniform(4)
    assert u[0] == 2.0 ** -53            # zero is excluded ...
    assert u[1] == 1.0                   # ... one is included
    assert u[2] == 2.0 ** -53            # the low 11 bits are dropped
    assert u[3] == 2.0 ** -52


@pytest.mark.parametrize("mode", ["simulation", "release"])
def test_uniform_distribution(mode):
    r = Randomness.simulation(2024) if mode == "simulation" else Randomness.release()
    u = r.uniform(200_000)
    assert u.dtype == np.float64 and u.min() > 0 and u.max() <= 1
    assert np.all(np.isfinite(np.log(u)))
    # Kolmogorov–Smirnov against U(0, 1); false-failure rate 1e-6 (release mode is unseeded)
    assert stats.kstest(u, "uniform").pvalue > P_MIN


# ---------------------------------------------------------------------------------------------
# integers_below
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("bound", [2, 3, 5, 7, 8, 10, 17, 64, 100, 1000])
def test_integers_below_is_uniform(bound):
    r = Randomness.simulation(bound)
    n = 200 * bound
    x = r.integers_below(np.full(n, bound))
    assert x.dtype == np.int64 and x.min() >= 0 and x.max() < bound
    counts = np.bincount(x, minlength=bound)
    assert stats.chisquare(counts).pvalue > P_MIN


@pytest.mark.parametrize("bound", [3 * 2**60, 2**62, 2**61 + 1, 10**18])
def test_integers_below_large_bounds_uniform_over_equal_bins(bound):
    r = Randomness.simulation(99)
    x = r.integers_below(np.full(60_000, bound))
    assert x.min() >= 0 and x.max() < bound
    # six equal-probability bins (edges computed in exact integers)
    edges = [bound * i // 6 for i in range(7)]
    counts = np.array([np.count_nonzero((x >= lo) & (x < hi))
                       for lo, hi in zip(edges, edges[1:])])
    assert counts.sum() == x.size
    assert stats.chisquare(counts).pvalue > P_MIN


def test_integers_below_mixed_bounds_shape_and_edge_cases():
    r = Randomness.simulation(5)
    bounds = np.array([[1, 2, 3], [1000, 1, 2**62]])
    x = r.integers_below(bounds)
    assert x.shape == (2, 3)
    assert np.all((x >= 0) & (x < bounds))
    assert x[0, 0] == 0 and x[1, 1] == 0
    assert r.integers_below(np.zeros(0, np.int64)).shape == (0,)
    # each element of a mixed batch is uniform for its own bound
    b = np.tile([2, 3, 5], 30_000)
    y = r.integers_below(b)
    for k in (2, 3, 5):
        assert stats.chisquare(np.bincount(y[b == k], minlength=k)).pvalue > P_MIN
    # reproducible
    np.testing.assert_array_equal(Randomness.simulation(5).integers_below(bounds), x)
    # release mode runs the same code
    z = Randomness.release().integers_below(np.full(1000, 7))
    assert z.min() >= 0 and z.max() < 7


@pytest.mark.parametrize("bad", [0, -3, 2**62 + 1])
def test_integers_below_rejects_bounds(bad):
    with pytest.raises(HierarchyError, match=r"bounds in \[1, 2\*\*62\]"):
        Randomness.simulation(0).integers_below(np.array([5, bad]))


def test_a_callers_generator_is_recorded_so_its_noise_can_be_recomputed():
    """A numpy Generator passed as ``rng`` recorded ``seed: None``, although every output says
    anyone with the seed can recompute the noise: its SeedSequence entropy, spawn key and state
    are recorded, and they do recompute the stream."""
    import json

    seq = np.random.SeedSequence(2024).spawn(3)[2]
    gen = np.random.Generator(np.random.PCG64(seq))
    gen.random(5)                                   # a used generator: the state matters
    rnd = as_randomness(gen)
    prov = json.loads(json.dumps(rnd.provenance()))
    origin = prov["generator"]
    assert origin["seed_sequence_entropy"] == "2024" and origin["spawn_key"] == [2]
    assert origin["bit_generator"] == "PCG64"
    first = rnd.random_raw(4)
    # recompute from the record alone
    again = np.random.PCG64(np.random.SeedSequence(int(origin["seed_sequence_entropy"]),
                                                  spawn_key=tuple(origin["spawn_key"])))
    state = origin["state"]
    again.state = {"bit_generator": "PCG64",
                   "state": {k: int(v) for k, v in state["state"].items()},
                   "has_uint32": int(state["has_uint32"]), "uinteger": int(state["uinteger"])}
    np.testing.assert_array_equal(again.random_raw(4), first)
