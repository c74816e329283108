"""Sessions: confidential data and their total privacy budget, spent once.

Every call of :func:`hierarchy.measurement.measure` on the same data spends the budget again:
nothing in a measurement knows what was spent before it. A :class:`Session` holds the
confidential data and the *total* budget they may cost; every measurement goes through it, and
one that would spend more than what remains is refused before anything is drawn. The session
records what each measurement spent (never anything computed from the data).

**Composition.** Measurements of the same data compose sequentially: the loss of the whole
session is the sum of the totals of the measurements' budgets, in the session's notion (ε for
pure DP, ρ for zCDP). The sums are exact :class:`fractions.Fraction` arithmetic, so three
measurements of a third of the total fit exactly and nothing more does. A pure-DP session pays
only for pure-DP budgets and a zCDP session only for zCDP budgets: a measurement of another
notion is refused, never converted behind the user's back (a zCDP budget measured with a pure-DP
mechanism such as ``geometric`` spends ε = sqrt(2ρ) per query: how a zCDP session measures with
pure-DP noise).

In release mode (``rng=None``) a bare :func:`~hierarchy.measurement.measure` is refused and says
to use a session; code that accounts for the budget itself passes ``accounted_elsewhere=True``
(``docs/measurement.md``, "Sessions: a budget spent once").

Examples
--------
>>> from hierarchy import Budget, E2E_1940, Session, e2e_workload, tabulate
>>> persons = pd.DataFrame({"state": ["01", "02"], "hhgq": [0, 0], "votingage": [1, 1],
...                         "hispanic": [0, 0], "cenrace": [0, 1]})
>>> truth = tabulate(persons, schema=E2E_1940, levels=["nation", "state"])
>>> with Session(truth, 1) as session:                  # ε = 1 in all; release mode
...     noisy = session.measure(e2e_workload(E2E_1940), Budget.e2e("1/4", truth.levels))
...     session.remaining
Fraction(3, 4)
"""

from __future__ import annotations

import copy
import threading
from datetime import datetime, timezone
from fractions import Fraction
from typing import Any, Mapping, Sequence

from hierarchy.budget import ZCDP, Budget, PureDP, as_privacy
from hierarchy.errors import HierarchyError
from hierarchy.histograms import Hierarchy
from hierarchy.measurement import measure
from hierarchy.noisy import NoisyHierarchy
from hierarchy.queries import Workload
from hierarchy.randomness import Randomness, as_randomness

__all__ = ["Session", "BudgetExceededError", "SESSION_STREAM"]

#: First element of the stream key of a session's measurements: measurement ``i`` draws from
#: ``rng.child(SESSION_STREAM, i)``. No level index is this large and it differs from
#: :data:`hierarchy.measurement.KEYED_STREAM`, so a session's streams meet no stream of a bare
#: measurement with the same seed, and two measurements of one session draw independent noise.
SESSION_STREAM = 2 ** 32 + 29


class BudgetExceededError(HierarchyError):
    """A measurement would spend more than what remains of its session's total budget.

    The message states the total, what was spent, what remains and what was requested (all
    budgets, nothing computed from the data); nothing was drawn.

    Examples
    --------
    >>> issubclass(BudgetExceededError, HierarchyError)
    True
    """


class Session:
    """Confidential data and the total privacy budget they may cost, spent by measurements.

    Parameters
    ----------
    truth : Hierarchy
        The exact histograms (:func:`hierarchy.tabulation.tabulate`). The session keeps them to
        itself: no attribute returns them, and ``repr`` shows only budgets.
    total : PureDP, ZCDP or number
        The whole budget of these data; a bare number is ε (pure DP), read exactly
        (:func:`hierarchy.budget.as_privacy`).
    rng : None, int, numpy Generator or Randomness, optional
        ``None`` = release mode (cryptographically secure). A seed makes a simulation: the
        session's ``i``-th measurement draws from ``rng.child(SESSION_STREAM, i)``, so it is
        reproducible and independent of the session's other measurements.

    Attributes
    ----------
    total : PureDP or ZCDP
    spent, remaining : Fraction
        ε or ρ (the total's notion) spent so far, and what is left of the total.
    history : list of dict
        One record per measurement, in order (see :meth:`measure`).

    Raises
    ------
    HierarchyError
        If ``truth`` is not a :class:`~hierarchy.histograms.Hierarchy`, or on an invalid total
        or ``rng``.

    Examples
    --------
    Three measurements of a third of ε = 1 fit exactly; nothing more does:

    >>> from hierarchy import Budget, E2E_1940, PureDP, e2e_workload, tabulate
    >>> persons = pd.DataFrame({"state": ["01", "02"], "hhgq": [0, 0], "votingage": [1, 1],
    ...                         "hispanic": [0, 0], "cenrace": [0, 1]})
    >>> truth = tabulate(persons, schema=E2E_1940, levels=["nation", "state"])
    >>> session = Session(truth, PureDP(1), rng=7)          # seeded: a simulation
    >>> third = Budget.e2e("1/3", ["nation", "state"])
    >>> for _ in range(3):
    ...     noisy = session.measure(e2e_workload(E2E_1940), third)
    >>> session
    Session(ε = 1 (pure DP); spent 1, remaining 0, in 3 measurements; simulation mode)
    >>> noisy.provenance["session"]
    {'kind': 'pure', 'total': '1', 'measurement': 2, 'spent_before': '2/3', 'spent_after': '1'}
    >>> session.measure(e2e_workload(E2E_1940), Budget.e2e("1e-6", ["nation"]))
    Traceback (most recent call last):
    ...
    hierarchy.session.BudgetExceededError: this measurement would spend ε = 1/1000000, but the
    session has ε = 0 left of its total ε = 1 (spent 1 in 3 measurements); nothing was drawn. ...
    >>> session.history[0]["budget"]["total"], session.history[0]["workload"]
    ('1/3', ['detailed', 'hhgq', 'va_hisp_race'])
    """

    __slots__ = ("_truth", "_total", "_rnd", "_spent", "_history", "_lock")

    def __init__(self, truth: Hierarchy, total: Any, *, rng: Any = None):
        if not isinstance(truth, Hierarchy):
            raise HierarchyError(f"a Session holds the exact histograms (a Hierarchy, from "
                                 f"tabulate(...)), not {type(truth).__name__}")
        self._truth: Hierarchy | None = truth
        self._total = as_privacy(total, what="the session's total budget")
        self._rnd: Randomness = as_randomness(rng)
        self._spent = Fraction(0)
        self._history: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    # -- what was spent ---------------------------------------------------------------------
    @property
    def total(self) -> PureDP | ZCDP:
        """The whole budget of the data."""
        return self._total

    @property
    def spent(self) -> Fraction:
        """The ε (or ρ) spent so far: the sum of the measurements' totals."""
        return self._spent

    @property
    def remaining(self) -> Fraction:
        """What is left of the total."""
        return self._total.value - self._spent

    @property
    def history(self) -> list[dict[str, Any]]:
        """A copy of the records of the measurements made, in order (:meth:`measure`)."""
        return copy.deepcopy(self._history)

    @property
    def closed(self) -> bool:
        """True once :meth:`close` has run (the data are released and nothing more is
        measured)."""
        return self._truth is None

    # -- measuring --------------------------------------------------------------------------
    def measure(self, workload: Workload, budget: Budget, mechanism: Any = "geometric", *,
                publish: Mapping[str, Sequence[str]] | None = None, spec: Any = None,
                key_level: str | None = None, active: Mapping[str, Any] | None = None
                ) -> NoisyHierarchy:
        """Measure the session's data with ``budget``, if what remains of the total pays for it.

        The arguments are :func:`hierarchy.measurement.measure`'s (the data and the randomness
        are the session's). The budget's total is checked against what remains *before*
        anything is drawn; it is spent only when the measurement succeeds (one that raises
        returns nothing, so it spends nothing).

        Parameters
        ----------
        workload : Workload
        budget : Budget
            Its total is what this measurement spends; its notion must be the session's.
        mechanism : str or mechanism object, optional
        publish, spec, key_level, active
            As in :func:`hierarchy.measurement.measure`.

        Returns
        -------
        NoisyHierarchy
            Its provenance records the session (``provenance["session"]``: the notion, the
            total, the measurement's index, and what was spent before and after it, as exact
            fractions in strings).

        Raises
        ------
        BudgetExceededError
            If the budget's total exceeds what remains (the message states the total, what was
            spent and what remains); nothing is drawn and nothing is recorded.
        HierarchyError
            A budget that is not a :class:`~hierarchy.budget.Budget` or of another notion than
            the session's total, a closed session, or any of
            :func:`~hierarchy.measurement.measure`'s errors.

        Examples
        --------
        >>> from hierarchy import Budget, E2E_1940, ZCDP, e2e_workload, tabulate
        >>> persons = pd.DataFrame({"state": ["01"], "hhgq": [0], "votingage": [1],
        ...                         "hispanic": [0], "cenrace": [0]})
        >>> truth = tabulate(persons, schema=E2E_1940, levels=["nation", "state"])
        >>> session = Session(truth, ZCDP("1/2"))
        >>> session.measure(e2e_workload(E2E_1940), Budget.e2e(1, truth.levels))
        Traceback (most recent call last):
        ...
        hierarchy.errors.HierarchyError: the session's total is ρ = 1/2 (zCDP) but this budget
        is pure (ε = 1); ...
        >>> noisy = session.measure(e2e_workload(E2E_1940), Budget.e2e(ZCDP("1/8"), truth.levels),
        ...                         "discrete_gaussian")
        >>> record = session.history[-1]
        >>> record["charged"], record["spent_after"], record["mechanism"]
        ('1/8', '1/8', 'discrete_gaussian')
        """
        if not isinstance(budget, Budget):
            raise HierarchyError(f"Session.measure needs a Budget (its total is what the "
                                 f"measurement spends), not {type(budget).__name__}")
        with self._lock:      # one measurement at a time: a check and its spend are one step
            if self._truth is None:
                raise HierarchyError("this session is closed (its data were released); open a "
                                     "new one only for data whose budget is not spent")
            charge = self._charge(budget)
            index, before = len(self._history), self._spent
            noisy = measure(self._truth, workload, budget, mechanism,
                            self._rnd.child(SESSION_STREAM, index), publish=publish,
                            spec=spec, key_level=key_level, active=active,
                            # the session is the account: it checked the spend above
                            accounted_elsewhere=True)
            self._spent = before + charge
            noisy.provenance["session"] = {
                "kind": self._total.kind, "total": str(self._total.value),
                "measurement": index, "spent_before": str(before),
                "spent_after": str(self._spent)}
            self._history.append({
                "measurement": index,
                "time": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                "budget": budget.to_dict(), "charged": str(charge),
                "spent_after": str(self._spent),
                "mechanism": noisy.provenance.get("mechanism", {}).get("name", str(mechanism)),
                "workload": list(workload.names), "mode": self._rnd.mode})
            return noisy

    def _charge(self, budget: Budget) -> Fraction:
        """What ``budget`` spends of the session's total; raises if it cannot be paid."""
        total, requested = self._total, budget.privacy
        if type(requested) is not type(total):
            fix = ("give the measurement a zCDP budget (Budget('zcdp', ρ, ...) or "
                   "Budget.e2e(ZCDP(ρ), levels)): pure-DP mechanisms such as geometric take "
                   "it, spending ε = sqrt(2ρ) per query" if isinstance(total, ZCDP) else
                   "a pure-DP session cannot pay for zCDP (ρ-zCDP implies no finite ε): "
                   "measure with a pure budget, or hold the data in a session with a ZCDP total")
            raise HierarchyError(f"the session's total is {total} but this budget is "
                                 f"{requested.kind} ({requested.symbol} = {requested.value}); "
                                 f"budgets are never converted silently: {fix}")
        if self._spent + requested.value > total.value:
            symbol = total.symbol
            raise BudgetExceededError(
                f"this measurement would spend {symbol} = {requested.value}, but the session "
                f"has {symbol} = {self.remaining} left of its total {symbol} = {total.value} "
                f"(spent {self._spent} in {_count(len(self._history))}); nothing was drawn. "
                f"Measure with a budget of total at most {self.remaining}; the session's total "
                f"is the whole budget of these data, so a new session on them spends it again")
        return requested.value

    # -- lifetime ---------------------------------------------------------------------------
    def close(self) -> None:
        """Let go of the data: nothing more can be measured in this session (the totals and
        the history stay readable).

        Examples
        --------
        >>> from hierarchy import Budget, E2E_1940, e2e_workload, tabulate
        >>> persons = pd.DataFrame({"state": ["01"], "hhgq": [0], "votingage": [1],
        ...                         "hispanic": [0], "cenrace": [0]})
        >>> session = Session(tabulate(persons, schema=E2E_1940, levels=["nation"]), 1, rng=1)
        >>> session.close()
        >>> session.closed, session.remaining
        (True, Fraction(1, 1))
        >>> session.measure(e2e_workload(E2E_1940), Budget.e2e("1/2", ["nation"]))
        Traceback (most recent call last):
        ...
        hierarchy.errors.HierarchyError: this session is closed (its data were released); ...
        """
        with self._lock:
            self._truth = None

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "; closed" if self._truth is None else ""
        return (f"Session({self._total}; spent {self._spent}, remaining {self.remaining}, in "
                f"{_count(len(self._history))}; {self._rnd.mode} mode{state})")

    # a copy would hold the same data with the same remaining budget: two accounts for one
    # budget, the double spending a session exists to prevent
    def __copy__(self) -> "Session":
        raise HierarchyError(_NO_COPY)

    def __deepcopy__(self, memo: Any) -> "Session":
        raise HierarchyError(_NO_COPY)

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise HierarchyError(_NO_COPY)


_NO_COPY = ("a Session cannot be copied or pickled: the copy would spend the same budget a "
            "second time; pass the session itself to whatever measures the data")


def _count(n: int) -> str:
    return f"{n} measurement" if n == 1 else f"{n} measurements"
