"""Sessions (issue 40, item 3): the confidential data and their total budget, spent once.

A session refuses a measurement that would spend beyond its total (before anything is drawn),
adds the measurements' totals exactly, refuses a budget of another notion, and records what was
spent without anything computed from the data; a bare ``measure`` in release mode is refused
and names the session, unless the caller says it accounts for the budget itself.
"""

from __future__ import annotations

import copy
import json
import pickle
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from hierarchy import (
    E2E_1940,
    ZCDP,
    Budget,
    BudgetExceededError,
    HierarchyError,
    PureDP,
    Randomness,
    Session,
    e2e_workload,
    measure,
    tabulate,
)
from hierarchy.session import SESSION_STREAM

LEVELS = ["nation", "state"]
W = e2e_workload(E2E_1940)


@pytest.fixture(scope="module")
def truth():
    persons = pd.DataFrame({"state": ["01"] * 7 + ["02"] * 3, "hhgq": [0] * 10,
                            "votingage": [1] * 10, "hispanic": [0] * 10, "cenrace": [0] * 10})
    return tabulate(persons, schema=E2E_1940, levels=LEVELS)


@pytest.fixture(scope="module")
def other_truth():
    persons = pd.DataFrame({"state": ["01", "02", "02"], "hhgq": [0, 0, 3],
                            "votingage": [0, 1, 1], "hispanic": [1, 0, 0], "cenrace": [2, 0, 5]})
    return tabulate(persons, schema=E2E_1940, levels=LEVELS)


def third(kind="pure") -> Budget:
    return Budget(kind, "1/3", {"nation": "1/2", "state": "1/2"}, {"detailed": 1})


# -- spending ------------------------------------------------------------------------------------

def test_three_thirds_fit_exactly_and_a_fourth_tiny_spend_is_refused(truth):
    session = Session(truth, 1, rng=3)
    for i in range(3):
        session.measure(W, third())
        assert session.spent == Fraction(i + 1, 3)           # exact: no float drift
    assert session.spent == 1 and session.remaining == 0
    tiny = Budget("pure", "1e-9", {"nation": 1}, {"detailed": 1})
    with pytest.raises(BudgetExceededError) as info:
        session.measure(W, tiny)
    message = str(info.value)
    assert "would spend ε = 1/1000000000" in message
    assert "ε = 0 left of its total ε = 1" in message and "spent 1 in 3 measurements" in message
    assert "nothing was drawn" in message
    assert len(session.history) == 3 and session.spent == 1


def test_a_refused_spend_draws_nothing_and_records_nothing(truth, monkeypatch):
    drawn = []
    real = Randomness.random_raw
    monkeypatch.setattr(Randomness, "random_raw",
                        lambda self, n: drawn.append(int(n)) or real(self, n))
    session = Session(truth, "1/2", rng=11)
    session.measure(W, third())
    words, history = sum(drawn), session.history
    assert words > 0
    with pytest.raises(BudgetExceededError, match=r"spend ε = 1/3, but the session has ε = 1/6 "
                                                  r"left of its total ε = 1/2 \(spent 1/3 in 1 "
                                                  r"measurement\)"):
        session.measure(W, third())
    assert sum(drawn) == words                                # not one random word more
    assert session.history == history and session.spent == Fraction(1, 3)
    assert session.remaining == Fraction(1, 6)


def test_a_measurement_that_fails_spends_nothing(truth):
    session = Session(truth, 1, rng=1)
    unknown = Budget("pure", "1/2", {"county": 1}, {"detailed": 1})
    with pytest.raises(HierarchyError, match="levels"):
        session.measure(W, unknown)
    assert session.spent == 0 and session.history == []


def test_pure_and_zcdp_do_not_mix(truth):
    pure = Session(truth, PureDP(1), rng=1)
    with pytest.raises(HierarchyError, match=r"the session's total is ε = 1 \(pure DP\) but this "
                                             r"budget is zcdp \(ρ = 1/3\).*ZCDP total"):
        pure.measure(W, third("zcdp"), "discrete_gaussian")
    zcdp = Session(truth, ZCDP(1), rng=1)
    with pytest.raises(HierarchyError, match=r"ρ = 1 \(zCDP\) but this budget is pure \(ε = 1/3\)"
                                             r".*never converted"):
        zcdp.measure(W, third())
    assert pure.spent == zcdp.spent == 0
    # a zCDP budget is measured in a zCDP session by a pure-DP mechanism too (ε = sqrt(2ρ))
    zcdp.measure(W, third("zcdp"), "geometric")
    zcdp.measure(W, third("zcdp"), "discrete_gaussian")
    assert zcdp.spent == Fraction(2, 3)
    assert [r["mechanism"] for r in zcdp.history] == ["geometric", "discrete_gaussian"]


def test_the_total_is_read_as_a_budget(truth):
    assert Session(truth, "0.5").total == PureDP("1/2")
    assert Session(truth, ZCDP("1/8")).total == ZCDP("1/8")
    with pytest.raises(HierarchyError, match="must be positive"):
        Session(truth, 0)
    with pytest.raises(HierarchyError, match="a Session holds the exact histograms"):
        Session(truth.counts, 1)
    with pytest.raises(HierarchyError, match="needs a Budget"):
        Session(truth, 1, rng=1).measure(W, PureDP("1/2"))


# -- what a session records ----------------------------------------------------------------------

def test_provenance_records_the_session(truth, tmp_path):
    session = Session(truth, 1, rng=5)
    session.measure(W, third())
    noisy = session.measure(W, third())
    assert noisy.provenance["session"] == {"kind": "pure", "total": "1", "measurement": 1,
                                           "spent_before": "1/3", "spent_after": "2/3"}
    from hierarchy import NoisyHierarchy
    loaded = NoisyHierarchy.load(noisy.save(tmp_path / "noisy"))
    assert loaded.provenance["session"] == noisy.provenance["session"]


def test_history_holds_budgets_not_data(truth, other_truth):
    def history(data):
        session = Session(data, 1, rng=2)
        session.measure(W, third())
        session.measure(W, third(), "geometric", spec=None)
        return session.history

    records = history(truth)
    assert set(records[0]) == {"measurement", "time", "budget", "charged", "spent_after",
                               "mechanism", "workload", "mode"}
    assert records[0]["budget"] == third().to_dict() and records[1]["charged"] == "1/3"
    assert records[1]["spent_after"] == "2/3" and records[1]["mechanism"] == "geometric"
    assert records[0]["workload"] == list(W.names) and records[0]["mode"] == "simulation"
    json.dumps(records)                                      # JSON-ready
    # nothing computed from the data: other data give the same records, but for the times
    untimed = [{k: v for k, v in r.items() if k != "time"} for r in records]
    assert untimed == [{k: v for k, v in r.items() if k != "time"}
                       for r in history(other_truth)]
    session = Session(truth, 1, rng=2)
    session.measure(W, third())
    session.history[0]["charged"] = "0"                      # a copy: the session keeps its own
    assert session.history[0]["charged"] == "1/3"


def test_repr_shows_budgets_only_and_the_data_are_private(truth):
    session = Session(truth, 1)
    assert repr(session) == ("Session(ε = 1 (pure DP); spent 0, remaining 1, in 0 measurements; "
                             "release mode)")
    public = [name for name in dir(session) if not name.startswith("_")]
    assert public == ["close", "closed", "history", "measure", "remaining", "spent", "total"]
    assert all(getattr(session, name) is not truth for name in public)
    assert "10" not in repr(session) and "persons" not in repr(session)   # 10 persons


def test_a_session_cannot_be_copied_or_pickled(truth):
    session = Session(truth, 1, rng=1)
    for duplicate in (copy.copy, copy.deepcopy, pickle.dumps):
        with pytest.raises(HierarchyError, match="cannot be copied or pickled"):
            duplicate(session)


def test_closing_lets_go_of_the_data(truth):
    with Session(truth, 1, rng=1) as session:
        session.measure(W, third())
    assert session.closed and session.spent == Fraction(1, 3)
    assert repr(session).endswith("simulation mode; closed)")
    with pytest.raises(HierarchyError, match="this session is closed"):
        session.measure(W, third())


# -- randomness ----------------------------------------------------------------------------------

def test_a_seeded_session_is_reproducible_and_its_measurements_independent(truth):
    def values(session):
        return [session.measure(W, third()).get("state", "detailed").values for _ in range(2)]

    first, again = values(Session(truth, 1, rng=4)), values(Session(truth, 1, rng=4))
    assert all(np.array_equal(a, b) for a, b in zip(first, again))
    assert not np.array_equal(first[0], first[1])            # two draws, not one twice
    # measurement i draws from rng.child(SESSION_STREAM, i)
    direct = measure(truth, W, third(), rng=Randomness.simulation(4).child(SESSION_STREAM, 1))
    assert np.array_equal(direct.get("state", "detailed").values, first[1])


def test_a_release_session_measures_in_release_mode(truth):
    session = Session(truth, 1)
    noisy = session.measure(W, third())
    assert noisy.safe_for_release and noisy.provenance["sampler"] == "exact integer"
    assert noisy.provenance["session"]["spent_after"] == "1/3"
    assert session.history[0]["mode"] == "release"


# -- a bare measure ------------------------------------------------------------------------------

def test_a_bare_release_measure_is_refused_and_names_the_session(truth):
    for rng in (None, Randomness.release()):
        with pytest.raises(HierarchyError) as info:
            measure(truth, W, third(), rng=rng)
        message = str(info.value)
        assert "measure through a Session" in message
        assert "session = Session(truth, total)" in message and "session.measure(" in message
        assert "accounted_elsewhere=True" in message


def test_the_escape_hatch_measures_in_release_mode(truth):
    noisy = measure(truth, W, third(), accounted_elsewhere=True)
    assert noisy.safe_for_release and "session" not in noisy.provenance
    with pytest.raises(HierarchyError, match="measure through a Session"):
        measure(truth, W, third(), accounted_elsewhere="yes")   # only True opens it


def test_a_seeded_bare_measure_is_unchanged(truth):
    # simulation mode needs no session: query q of level l draws from child(l, q), as before
    from hierarchy.mechanisms import get_mechanism

    noisy = measure(truth, W, third(), rng=9)
    assert "session" not in noisy.provenance and not noisy.safe_for_release
    mech = get_mechanism("geometric")
    for li, level in enumerate(LEVELS):
        z = noisy.provenance["parameters"][level]["detailed"]["z"]
        exact = truth.answers(level, W["detailed"])
        noise = mech.sample(z, exact.shape, Randomness.simulation(9).child(li, 0))
        assert np.array_equal(noisy.get(level, "detailed").values, exact + noise)
    again = measure(truth, W, third(), rng=9, accounted_elsewhere=True)   # ignored here
    assert np.array_equal(again.get("state", "detailed").values,
                          noisy.get("state", "detailed").values)
