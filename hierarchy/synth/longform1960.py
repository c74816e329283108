"""Synthetic 1960-style long-form data: persons by county, sex and group quarters, and a weighted
25 % sample of them.

The 1960 census asked its long-form items of a 25 % sample and published estimates weighted up to
the population; Clark & Dajani (2019) take a 1960 special tabulation of sex × group quarters for
every county, weighted, as their example of weighted data (``docs/experiments.md``). This
generator makes such data, synthetically — nothing here is drawn from 1960 figures:

* **Geography.** ``states`` states, ``counties`` counties (at least 3 per state; the rest spread
  over states in proportion to random lognormal shares), county populations lognormal (σ = 1.1)
  above a floor of 50 persons. State ``s`` has code ``f"{s + 1:02d}"``, its counties
  ``state + "001"``, ``"003"``, … (odd numbers, as FIPS county codes).
* **Group quarters** (:data:`LONG_FORM_1960`'s ``gq``: household, institution, other group
  quarters). Each county draws its shares: institutions Beta(1.2, 90) (mean 1.3 %), other group
  quarters — college dormitories, barracks, rooming houses — Beta(0.8, 50) (mean 1.6 %, a few
  counties far more).
* **Sex** given group quarters: male with probability 0.49 in households, 0.60 in institutions
  and 0.72 in other group quarters (our guesses, not 1960 figures).
* **The sample.** Every person independently with probability ``rate`` (Poisson sampling; the
  1960 sample was of housing units, a cluster sample of persons — ``docs/accounting.md``). Each
  sampled person's weight is drawn independently from ``weights`` (default 3, 4, 5 or 6 with
  probabilities 0.3, 0.5, 0.1, 0.1: mean 4 = 1/0.25), standing in for non-response and ratio
  adjustments. A weight is its own record's attribute — not computed from other records — so the
  sensitivity of :mod:`hierarchy.weighted` holds.

Examples
--------
>>> data = synthesize_long_form_1960(20_000, states=3, counties=12, seed=1)
>>> data.persons.column_names, data.sample.column_names
(['state', 'county', 'sex', 'gq'], ['state', 'county', 'sex', 'gq', 'wt'])
>>> 0.23 < data.sample.num_rows / data.persons.num_rows < 0.27
True
>>> sorted(set(data.sample.column("wt").to_pylist()))
[3, 4, 5, 6]
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

import numpy as np
import pyarrow as pa

from hierarchy.errors import HierarchyError
from hierarchy.numbers import integer, positive
from hierarchy.randomness import Randomness
from hierarchy.schema import Attribute, Schema

__all__ = ["LONG_FORM_1960", "DEFAULT_WEIGHTS", "LongForm1960", "synthesize_long_form_1960",
           "MIN_COUNTY_PERSONS"]

#: Sex × group quarters: the cells of the 1960 special tabulation (6 cells, sex-major).
LONG_FORM_1960 = Schema((Attribute("sex", ("male", "female")),
                         Attribute("gq", ("household", "institution", "other group quarters"))),
                        name="long_form_1960")
#: Weight → probability of a sampled person's weight: mean 4, the inverse of a 25 % sample.
DEFAULT_WEIGHTS = {3: 0.3, 4: 0.5, 5: 0.1, 6: 0.1}
#: The fewest persons a county has.
MIN_COUNTY_PERSONS = 50
_MALE = np.array([0.49, 0.60, 0.72])          # P(male | household, institution, other GQ)


@dataclass(frozen=True)
class LongForm1960:
    """Synthetic long-form data: the full count and the weighted sample.

    Attributes
    ----------
    persons : pyarrow.Table
        Everyone: ``state``, ``county`` (dictionary-encoded text), ``sex``, ``gq`` (int8 codes
        of :data:`LONG_FORM_1960`), sorted by county.
    sample : pyarrow.Table
        The sampled persons, the same columns and ``wt`` (int64 when every weight is whole).
    rate : float
        The sampling rate.
    weights : dict
        The law the weights were drawn from (weight → probability).

    Examples
    --------
    >>> data = synthesize_long_form_1960(5_000, states=2, counties=6, seed=3)
    >>> data.rate, data.persons.num_rows
    (0.25, 5000)
    """

    persons: pa.Table
    sample: pa.Table
    rate: float
    weights: dict


def synthesize_long_form_1960(persons: int, *, states: int, counties: int, seed: int,
                              rate: float = 0.25,
                              weights: Mapping[float, float] | None = None) -> LongForm1960:
    """Generate synthetic 1960-style persons and a weighted Poisson sample of them (see the
    module).

    Parameters
    ----------
    persons : int
        Everyone, at least ``MIN_COUNTY_PERSONS × counties``.
    states : int
        Number of states (at least 1).
    counties : int
        Number of counties, at least 3 per state.
    seed : int
        Non-negative; the same arguments give identical tables.
    rate : float
        The chance each person is sampled, in (0, 1].
    weights : mapping, optional
        Weight → probability (default :data:`DEFAULT_WEIGHTS`): weights finite and ≥ 0,
        probabilities ≥ 0 summing to 1.

    Returns
    -------
    LongForm1960

    Raises
    ------
    HierarchyError
        An argument out of range.

    Examples
    --------
    >>> data = synthesize_long_form_1960(50_000, states=4, counties=20, seed=7)
    >>> counties = data.persons.column("county").combine_chunks().dictionary.to_pylist()
    >>> len(counties), counties[:3]
    (20, ['01001', '01003', '01005'])
    >>> synthesize_long_form_1960(100, states=2, counties=6, seed=1)
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: persons must be at least 50 × 6 counties = 300, not 100
    """
    states = integer(states, "states", minimum=1)
    counties = integer(counties, "counties", minimum=3 * states, why="3 per state")
    persons = integer(persons, "persons", minimum=0)
    if persons < MIN_COUNTY_PERSONS * counties:
        raise HierarchyError(f"persons must be at least {MIN_COUNTY_PERSONS} × {counties} "
                             f"counties = {MIN_COUNTY_PERSONS * counties}, not {persons}")
    rate = float(positive(rate, "rate"))
    if rate > 1:
        raise HierarchyError(f"rate must be in (0, 1], not {rate:g}")
    law = _weight_law(DEFAULT_WEIGHTS if weights is None else weights)
    source = Randomness.simulation(integer(seed, "seed", minimum=0))
    geo_rng, cell_rng, sample_rng = (source.child(k).generator for k in range(3))
    county_state = _county_states(states, counties, geo_rng)
    sizes = MIN_COUNTY_PERSONS + geo_rng.multinomial(
        persons - MIN_COUNTY_PERSONS * counties, _shares(geo_rng.lognormal(0.0, 1.1, counties)))
    institution = geo_rng.beta(1.2, 90.0, counties)
    other = geo_rng.beta(0.8, 50.0, counties)
    gq = np.stack([1.0 - institution - other, institution, other], axis=1)
    cells = np.concatenate([gq * _MALE, gq * (1.0 - _MALE)], axis=1)   # sex-major, 6 cells
    counts = cell_rng.multinomial(sizes, cells / cells.sum(axis=1, keepdims=True))
    key = np.repeat(np.arange(counties * 6), counts.ravel())
    county, cell = np.divmod(key, 6)
    full = _table(county, cell, county_state)
    drawn = sample_rng.random(key.size) < rate
    values = np.array(list(law), dtype=np.float64)
    wt = sample_rng.choice(values, size=int(drawn.sum()), p=np.array(list(law.values())))
    weight_column = pa.array(wt.astype(np.int64) if np.all(values == np.floor(values)) else wt)
    sample = _table(county[drawn], cell[drawn], county_state).append_column("wt", weight_column)
    return LongForm1960(full, sample, rate, dict(law))


def _weight_law(weights: Mapping[float, float]) -> dict:
    if not isinstance(weights, Mapping) or not weights:
        raise HierarchyError("weights must map each weight to its probability")
    values = np.array([float(w) for w in weights], dtype=np.float64)
    probs = np.array([float(p) for p in weights.values()], dtype=np.float64)
    if not (np.all(np.isfinite(values)) and np.all(values >= 0)):
        raise HierarchyError(f"weights must be finite and ≥ 0, not {list(weights)}")
    if not (np.all(probs >= 0) and math.isclose(probs.sum(), 1.0, abs_tol=1e-9)):
        raise HierarchyError(f"the weights' probabilities must be ≥ 0 and sum to 1, not "
                             f"{list(weights.values())}")
    return dict(weights)


def _shares(values: np.ndarray) -> np.ndarray:
    return values / values.sum()


def _county_states(states: int, counties: int, rng: np.random.Generator) -> np.ndarray:
    """The state of every county, in state order: 3 each, the rest spread by lognormal
    shares."""
    extra = rng.multinomial(counties - 3 * states, _shares(rng.lognormal(0.0, 0.6, states)))
    return np.repeat(np.arange(states), 3 + extra)


def _table(county: np.ndarray, cell: np.ndarray, county_state: np.ndarray) -> pa.Table:
    """Persons with dictionary-encoded geocodes and int8 codes of sex and group quarters."""
    n_states = int(county_state.max()) + 1
    state_codes = [f"{s + 1:02d}" for s in range(n_states)]
    first = np.searchsorted(county_state, np.arange(n_states))
    county_codes = [f"{state_codes[s]}{2 * (c - first[s]) + 1:03d}"
                    for c, s in enumerate(county_state)]
    sex, gq = np.divmod(cell, 3)

    def geocodes(index: np.ndarray, names: list[str]) -> pa.DictionaryArray:
        return pa.DictionaryArray.from_arrays(pa.array(index, pa.int32()),
                                              pa.array(names, pa.string()))

    return pa.table({"state": geocodes(county_state[county], state_codes),
                     "county": geocodes(county, county_codes),
                     "sex": pa.array(sex, pa.int8()), "gq": pa.array(gq, pa.int8())})
