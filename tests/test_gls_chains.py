"""``gls`` where only children have no measurements (a Noisy Measurement File's): their chains'
measurements moved to the chains' bottoms (``postproc.methods.gls.chains``) give the dense
referee's estimate of the hierarchy as it is, and every answer measured stays measured."""

from __future__ import annotations

import numpy as np
import pytest

from hierarchy.geography import Geography
from hierarchy.noisy import Measurement, NoisyHierarchy
from hierarchy.queries import Workload, detailed, total
from hierarchy.schema import Attribute, Schema
from postproc.errors import PostprocError
from postproc.methods import postprocess
from postproc.methods.gls.chains import measured_at_chain_bottoms, unmeasured_only_children

from test_gls_reference import _dense_gls

SCHEMA = Schema((Attribute("sex", ("m", "f")), Attribute("age", ("young", "old"))))
#: nation → states A, B, C → counties: A has the only child A1, whose only child is A1a (a
#: chain of three below A); B has two counties, each with two tracts; C has one county C1
#: (an only child) with two tracts
COLUMNS = [["A", "B", "B", "B", "B", "C", "C"],
           ["A1", "B1", "B1", "B2", "B2", "C1", "C1"],
           ["A1a", "B1a", "B1b", "B2a", "B2b", "C1a", "C1b"]]
LEVELS = ["nation", "state", "county", "tract"]


def _hierarchy(seed: int) -> NoisyHierarchy:
    """Measured everywhere but the only children A1, A1a and C1 (weight 0); variances drawn."""
    geo, _ = Geography.from_columns(LEVELS, [COLUMNS])
    rng = np.random.default_rng(seed)
    workload = Workload((detailed(SCHEMA), total(SCHEMA)))
    unmeasured = {"county": {"A1", "C1"}, "tract": {"A1a"}}
    measurements = {}
    for li, lv in enumerate(LEVELS):
        codes = geo.geocodes[li]
        drawn = ~np.isin(codes, sorted(unmeasured.get(lv, ())))
        measurements[lv] = {}
        for q in workload:
            a = q.n_answers
            values = np.where(drawn[:, None], rng.integers(0, 40, (codes.size, a)), 0)
            variances = rng.uniform(0.5, 4.0, (codes.size, a))
            measurements[lv][q.name] = Measurement(
                q.name, values, variances, None if drawn.all() else
                np.repeat(drawn[:, None], a, axis=1))
    return NoisyHierarchy(SCHEMA, geo, workload, measurements)


def _referee(noisy: NoisyHierarchy) -> list[np.ndarray]:
    """The dense GLS of the hierarchy as it is (the unmeasured units with weight 0)."""
    geo = noisy.geography
    parents = [np.array([-1])] + [np.repeat(np.arange(geo.n_units(li - 1)),
                                            geo.n_children(li - 1)) for li in range(1, 4)]
    terms = [[(noisy.workload[name].matrix.toarray(), m.values.astype(float), m.weights)
              for name, m in noisy.measurements[lv].items()] for lv in LEVELS]
    means, _ = _dense_gls(parents, terms, SCHEMA.size)
    return means


@pytest.mark.parametrize("seed", range(5))
def test_gls_of_unmeasured_only_children_is_the_referees(seed):
    noisy = _hierarchy(seed)
    assert unmeasured_only_children(noisy)
    result = postprocess(noisy, "gls")
    for li, want in enumerate(_referee(noisy)):
        np.testing.assert_allclose(result.histograms[li], want, rtol=0,
                                   atol=1e-8 * max(1.0, np.abs(want).max()))


def test_moving_keeps_every_answer_and_leaves_every_bottom_unit_measured():
    noisy = _hierarchy(0)
    moved = measured_at_chain_bottoms(noisy)
    geo = noisy.geography
    tract = {c: i for i, c in enumerate(geo.geocodes[3])}
    a1a = moved.measurements["tract"]["detailed"]
    # A's measurements went down the chain A → A1 → A1a
    assert a1a.values[tract["A1a"]].tolist() == noisy.measurements["state"]["detailed"].values[
        0].tolist()
    assert (moved.measurements["state"]["detailed"].weights[0] == 0).all()
    assert (moved.measurements["county"]["total"].weights[
        list(geo.geocodes[2]).index("A1")] == 0).all()
    assert (a1a.weights > 0).all()
    # C1 is C's only child (with two tracts below it): it takes C's measurements
    c1 = list(geo.geocodes[2]).index("C1")
    assert moved.measurements["county"]["detailed"].values[c1].tolist() == \
        noisy.measurements["state"]["detailed"].values[2].tolist()
    total_weight = sum(float(m.weights.sum()) for ms in moved.measurements.values()
                       for m in ms.values())
    assert total_weight == pytest.approx(sum(float(m.weights.sum())
                                             for ms in noisy.measurements.values()
                                             for m in ms.values()))


def test_an_unmeasured_unit_with_siblings_is_still_refused():
    noisy = _hierarchy(0)
    ms = noisy.measurements["tract"]
    drawn = np.ones((7, 4), bool)
    drawn[1] = False                               # B1a has a sibling: not an only child
    values = ms["detailed"].values.copy()
    values[1] = 0
    bad = {**noisy.measurements, "tract": {**ms, "detailed": Measurement(
        "detailed", values, ms["detailed"].variances, drawn)}}
    other = NoisyHierarchy(SCHEMA, noisy.geography, noisy.workload, bad)
    assert not unmeasured_only_children(other)
    with pytest.raises(PostprocError, match="drew only the answers"):
        postprocess(other, "gls")
