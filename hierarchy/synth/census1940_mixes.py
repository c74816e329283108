"""Race × Hispanic composition of the synthetic 1940 data: the mixes of states, counties and EDs.

Step 3 of the model of :mod:`hierarchy.synth.census1940`, which draws every ED's mix and every
person's group from here: 12 groups (Hispanic × race; group = 6 * hispanic + cenrace). County
mix ~ Dirichlet(:data:`COUNTY_CONCENTRATION` × state mix); ED mix ~ Dirichlet(a × county mix)
with a log-uniform concentration ``a`` on :data:`ED_CONCENTRATION`; both raked (:func:`_rake`,
which the 2020 generator uses too) so that state and county mixes hold at every scale; and a few
"cosmopolitan" EDs in large counties. The states' mixes come from
:mod:`hierarchy.synth.census1940_tables`. :class:`Composition` holds the knobs of how mixed
counties and EDs come out (:data:`COMPOSITIONS` names three settings).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from hierarchy.errors import HierarchyError
from hierarchy.synth import census1940_tables as tables
from hierarchy.synth.census1940_tables import STATE_FIPS, STATE_POPULATION_1940

N_GROUPS = 12                       # hispanic (0/1) x cenrace (0..5); group = 6 * hispanic + race
COUNTY_CONCENTRATION = 20.0         # Dirichlet concentration of a county's mix around its state's
ED_CONCENTRATION = (0.3, 300.0)     # log-uniform range of an ED's concentration around its county
COSMOPOLITAN_SHARE = 0.02           # chance an ED in a county of 42,601 persons (the 1940
                                    # mean) is cosmopolitan; grows as sqrt(county size), <= 5 %
COSMOPOLITAN_BLEND = (0.01, 0.8)    # log-uniform range of the diverse share of its mix
COSMOPOLITAN_FLATTEN = 0.3          # the diverse part is the national mix ** this, renormalised
COSMOPOLITAN_CONCENTRATION = 50.0   # Dirichlet concentration of the diverse part


@dataclass(frozen=True)
class Composition:
    """How mixed the synthetic counties and EDs are: the knobs of :func:`_ed_mixes` and
    ``lodgers``, which the persons' step reads.

    Parameters
    ----------
    county_concentration : float
        Dirichlet concentration of a county's mix around its state's (smaller: counties more
        unlike their state).
    cosmopolitan_share : float
        Chance that an ED in a county of 42,601 persons (the 1940 mean) is cosmopolitan; it
        grows as the square root of the county's size, at most 5 %.
    cosmopolitan_blend : (float, float)
        Log-uniform range of the share of a cosmopolitan ED's mix spread over all 12 groups.
    cosmopolitan_flatten : float
        That spread part is the national mix to this power, renormalised (0: even over the
        groups; 1: the national mix, so the rare groups stay rare).
    lodgers : float
        Chance that a household member other than the head is drawn from the county's mix (a
        lodger or a servant) instead of taking the head's group; 0 by default. It puts a person
        or two of the county's other groups into EDs without adding groups to the county.

    The defaults are the synthesizer's since it was written. Raising any cosmopolitan knob
    puts persons of more groups into more counties: more of a county's 24 votingage × hispanic
    × race cells hold someone, most of them a few persons (``docs/experiments.md``, "What makes
    the county totals' error": TopDown's county totals are less accurate on such counties).

    Examples
    --------
    >>> COMPOSITIONS["counties_1940"].cosmopolitan_blend
    (0.001, 0.1)
    >>> Composition.named("default") == Composition()
    True
    >>> Composition(cosmopolitan_blend=(0.5, 0.1))
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: cosmopolitan_blend must be (low, high) with 0 < low <= high \
<= 1, got (0.5, 0.1)
    >>> Composition.named("urban")
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: unknown composition 'urban': use one of default, \
counties_1940, counties_eds_1940 or a Composition
    """

    county_concentration: float = COUNTY_CONCENTRATION
    cosmopolitan_share: float = COSMOPOLITAN_SHARE
    cosmopolitan_blend: tuple[float, float] = COSMOPOLITAN_BLEND
    cosmopolitan_flatten: float = COSMOPOLITAN_FLATTEN
    lodgers: float = 0.0

    def __post_init__(self):
        def number(name: str, value: Any) -> float:
            if isinstance(value, bool) or not isinstance(value, (int, float, np.number)) \
                    or not math.isfinite(value):
                raise HierarchyError(f"{name} must be a finite number, got {value!r}")
            return float(value)

        if number("county_concentration", self.county_concentration) <= 0:
            raise HierarchyError(f"county_concentration must be > 0, got "
                                 f"{self.county_concentration}")
        if not 0 <= number("cosmopolitan_share", self.cosmopolitan_share) <= 1:
            raise HierarchyError(f"cosmopolitan_share must be in [0, 1], got "
                                 f"{self.cosmopolitan_share}")
        if not 0 <= number("lodgers", self.lodgers) <= 1:
            raise HierarchyError(f"lodgers must be in [0, 1], got {self.lodgers}")
        if number("cosmopolitan_flatten", self.cosmopolitan_flatten) < 0:
            raise HierarchyError(f"cosmopolitan_flatten must be >= 0, got "
                                 f"{self.cosmopolitan_flatten}")
        blend = tuple(self.cosmopolitan_blend) if isinstance(
            self.cosmopolitan_blend, (tuple, list)) else ()
        if len(blend) != 2 or not 0 < number("cosmopolitan_blend", blend[0]) <= \
                number("cosmopolitan_blend", blend[1]) <= 1:
            raise HierarchyError(f"cosmopolitan_blend must be (low, high) with 0 < low <= high "
                                 f"<= 1, got {self.cosmopolitan_blend!r}")
        object.__setattr__(self, "cosmopolitan_blend", (float(blend[0]), float(blend[1])))

    @classmethod
    def named(cls, composition: "str | Composition") -> "Composition":
        """A :class:`Composition` as given, or the one :data:`COMPOSITIONS` names."""
        if isinstance(composition, Composition):
            return composition
        if composition not in COMPOSITIONS:
            raise HierarchyError(f"unknown composition {composition!r}: use one of "
                                 f"{', '.join(COMPOSITIONS)} or a Composition")
        return COMPOSITIONS[composition]

    def name(self) -> str | None:
        """The name :data:`COMPOSITIONS` gives this composition, if any.

        >>> Composition(cosmopolitan_blend=(0.001, 0.1)).name(), Composition(0.5).name()
        ('counties_1940', None)
        """
        return next((k for k, v in COMPOSITIONS.items() if v == self), None)


#: Named compositions. ``default``: the synthesizer's own (about 10.8 of a county's 24
#: votingage × hispanic × race cells hold someone at 20M persons). ``counties_1940``: the
#: cosmopolitan EDs' spread part at most a tenth of their mix (log-uniform from 0.001), which
#: gives 8.36 — the real 1940 counties' 8.37, from Petti & Flaxman's published counts
#: (``docs/experiments.md``, "What makes the county totals' error"). ``counties_eds_1940``:
#: those counties with 8 % of household members other than the head drawn from their county's
#: mix, which gives an ED about 4.2 populated cells with a median of 93 persons — the real EDs'
#: 4.00 and 88 (the same source).
COMPOSITIONS = {"default": Composition(),
                "counties_1940": Composition(cosmopolitan_blend=(0.001, 0.1)),
                "counties_eds_1940": Composition(cosmopolitan_blend=(0.001, 0.1), lodgers=0.08)}


def _diverse_mix(flatten: float = COSMOPOLITAN_FLATTEN) -> np.ndarray:
    """The national mix flattened (``share ** flatten``, renormalised): what the diverse part
    of a cosmopolitan ED looks like."""
    return np.array(_diverse_mix_cached(float(flatten)))


@functools.cache
def _diverse_mix_cached(flatten: float) -> tuple[float, ...]:
    national = sum(_state_mix(s) * STATE_POPULATION_1940[s] for s in range(len(STATE_FIPS)))
    flat = national ** flatten
    return tuple(flat / flat.sum())


def _state_mix(state_index: int) -> np.ndarray:
    """The state's share of each of the 12 groups (group = 6 * hispanic + cenrace)."""
    _, _, _, _, black, aian, chinese, japanese, other, hisp = tables.STATES[state_index]
    race = np.array([0.0, black, aian, chinese, japanese, other]) / 100
    hispanic = hisp / 100 * tables.HISPANIC_RACE
    non_hispanic = np.maximum(race - hispanic, 1e-5)
    non_hispanic[0] = 0.0
    non_hispanic[0] = 1.0 - non_hispanic.sum() - hispanic.sum()
    return np.concatenate([non_hispanic, hispanic])


def _ed_mixes(state_index: int, ed_persons: np.ndarray, ed_county: np.ndarray,
              rng: np.random.Generator, composition: Composition = COMPOSITIONS["default"]
              ) -> np.ndarray:
    """The group mix (rows sum to 1) of every ED; ``composition``'s knobs below.

    County mix ~ Dirichlet(``county_concentration`` × state mix); ED mix ~ Dirichlet(a × county
    mix) with ``a`` log-uniform on ``ED_CONCENTRATION``, from near single-group (small ``a``) to
    the county's mix (large ``a``). Both are raked (:func:`_rake`) so that the realised state and
    county mixes match their targets at every scale. Finally a few EDs, more likely in large
    (urban) counties, are made "cosmopolitan": a share ``λ`` (log-uniform on
    ``cosmopolitan_blend``) of their mix is spread about evenly over all 12 groups. This puts
    Hispanic persons of every race, and every race of both ages, in some EDs, so the homogeneity
    index (docs/metrics.md) spans 0-23; it adds a few hundredths of a percent of the population
    to each small group (Chinese 0.06 % → about 0.08 % nationally).
    """
    n_eds = ed_persons.size
    county_start = np.flatnonzero(np.diff(ed_county, prepend=-1))
    county_persons = np.add.reduceat(ed_persons, county_start).astype(np.float64)
    state_mix = _state_mix(state_index)
    c = composition
    county_mix = _dirichlet(c.county_concentration * state_mix, county_persons.size, rng)
    county_mix = _rake(county_mix, county_persons, np.array([0]), state_mix[None, :])
    relative_size = (county_persons / 42_601.0)[ed_county]
    chance = np.minimum(c.cosmopolitan_share * np.sqrt(relative_size), 0.05)
    cosmopolitan = rng.random(n_eds) < chance
    blend = np.where(cosmopolitan, np.exp(rng.uniform(*np.log(c.cosmopolitan_blend), n_eds)), 0.0)
    concentration = np.exp(rng.uniform(*np.log(ED_CONCENTRATION), n_eds))
    ed_mix = _dirichlet(concentration[:, None] * county_mix[ed_county], n_eds, rng)
    ed_mix = _rake(ed_mix, ed_persons.astype(np.float64), county_start, county_mix)
    diverse = _dirichlet(COSMOPOLITAN_CONCENTRATION * _diverse_mix(c.cosmopolitan_flatten),
                         n_eds, rng)
    return (1 - blend)[:, None] * ed_mix + blend[:, None] * diverse


def _rake(mix: np.ndarray, weight: np.ndarray, starts: np.ndarray, target: np.ndarray,
          iterations: int = 10) -> np.ndarray:
    """Iterative proportional fitting of row mixes to the weighted mixes of their parents.

    Rows ``starts[j]:starts[j+1]`` of ``mix`` (each summing to 1, weights ``weight``) belong to
    parent ``j`` with mix ``target[j]``. Each group's shares are scaled so that the parent's
    weighted mix matches its target, then rows are renormalised; a few rounds converge. Segregation
    (which rows hold a group) is kept; only the level is corrected, so the realised state and
    county mixes do not drift with the number of units. A group absent from every row of a
    parent stays absent.
    """
    row_parent = np.repeat(np.arange(starts.size), np.diff(np.append(starts, mix.shape[0])))
    parent_weight = np.add.reduceat(weight, starts)[:, None]
    for _ in range(iterations):
        have = np.add.reduceat(mix * weight[:, None], starts, axis=0)
        # a group whose total underflowed is left as it is (a factor beyond 1e200 would overflow)
        factor = np.divide(target * parent_weight, have, out=np.ones_like(have),
                           where=have > 1e-200 * parent_weight)
        mix = mix * factor[row_parent]
        mix /= mix.sum(axis=1, keepdims=True)
    return mix


def _dirichlet(alpha: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` Dirichlet draws, one per row of ``alpha`` (broadcast to ``(n, N_GROUPS)``)."""
    gamma = rng.standard_gamma(np.broadcast_to(alpha, (n, N_GROUPS)))
    total = gamma.sum(axis=1, keepdims=True)
    empty = total[:, 0] <= 0                          # every component underflowed: use the mean
    if empty.any():
        mean = np.broadcast_to(alpha, (n, N_GROUPS))[empty]
        gamma[empty] = mean / mean.sum(axis=1, keepdims=True)
        total[empty] = 1.0
    return gamma / total


def _draw_groups(ed: np.ndarray, cut_points: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One group per element of ``ed``, drawn from that ED's mix.

    ``cut_points`` holds, for ED ``e``, ``e`` plus its 11 interior cumulative shares, so that
    one ``searchsorted`` of ``e + u`` finds the group for every draw at once.
    """
    where = np.searchsorted(cut_points, ed + rng.random(ed.size), side="right")
    # ed + u can round up to ed + 1 when u is within ~1e-12 of 1: clip to the last group
    return np.minimum(where - (N_GROUPS - 1) * ed.astype(np.int64), N_GROUPS - 1).astype(np.int8)
