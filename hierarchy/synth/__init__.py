"""Synthetic microdata for experiments: the generators, one module each.

Synthetic data is no privacy mechanism: every generator draws from ordinary seeded
``numpy.random.Generator`` streams, and the same arguments give identical tables.

==============================  ==================================================================
:mod:`.census1940`              1940-style persons and units on the E2E schema, state by state
                                (``postproc synth1940``); its composition step in
                                :mod:`.census1940_mixes`, its 1940 figures in
                                :mod:`.census1940_tables`
:mod:`.detailed1940`            the 1940-style persons with sex, single-year age and detailed
                                race and Hispanic-origin codes (SafeTab, docs/safetab.md)
:mod:`.census2020`              2020-style persons, units and blocks on the PL 94-171 schema
                                (``postproc synth2020``, docs/pl94_2020.md); its figures in
                                :mod:`.census2020_model`, its states and counties drawn in
                                :mod:`.census2020_counties`
==============================  ==================================================================

The 1940 generator's names are exported here, as they were when ``hierarchy.synth`` was one
module (:func:`synthesize_1940` is also a top-level export of :mod:`hierarchy`).

Examples
--------
>>> from hierarchy.synth import synthesize_1940
>>> synthesize_1940(1_000, seed=0).persons.num_rows
1000
"""

from hierarchy.synth.census1940 import (
    MADE_BY,
    MAX_PERSONS,
    MIN_PERSONS,
    Synthetic1940,
    synthesize_1940,
    write_synthetic_1940,
)
from hierarchy.synth.census1940_mixes import COMPOSITIONS, Composition
from hierarchy.synth.census1940_tables import STATE_FIPS, STATE_POPULATION_1940

__all__ = ["Synthetic1940", "synthesize_1940", "write_synthetic_1940", "STATE_FIPS",
           "STATE_POPULATION_1940", "MIN_PERSONS", "MAX_PERSONS", "MADE_BY", "Composition",
           "COMPOSITIONS"]

# The other public names of the former module hierarchy.synth, still importable from here.
from hierarchy.synth.census1940 import HOUSEHOLD_MIXING as HOUSEHOLD_MIXING
from hierarchy.synth.census1940 import LATER_MEMBER_ADULT as LATER_MEMBER_ADULT
from hierarchy.synth.census1940 import PERSON_COLUMNS as PERSON_COLUMNS
from hierarchy.synth.census1940 import PERSONS_SCHEMA as PERSONS_SCHEMA
from hierarchy.synth.census1940 import SECOND_MEMBER_ADULT as SECOND_MEMBER_ADULT
from hierarchy.synth.census1940 import UNIT_COLUMNS as UNIT_COLUMNS
from hierarchy.synth.census1940 import UNITS_SCHEMA as UNITS_SCHEMA
from hierarchy.synth.census1940 import apportion_states as apportion_states
from hierarchy.synth.census1940_mixes import COSMOPOLITAN_BLEND as COSMOPOLITAN_BLEND
from hierarchy.synth.census1940_mixes import (
    COSMOPOLITAN_CONCENTRATION as COSMOPOLITAN_CONCENTRATION,
)
from hierarchy.synth.census1940_mixes import COSMOPOLITAN_FLATTEN as COSMOPOLITAN_FLATTEN
from hierarchy.synth.census1940_mixes import COSMOPOLITAN_SHARE as COSMOPOLITAN_SHARE
from hierarchy.synth.census1940_mixes import COUNTY_CONCENTRATION as COUNTY_CONCENTRATION
from hierarchy.synth.census1940_mixes import ED_CONCENTRATION as ED_CONCENTRATION
from hierarchy.synth.census1940_mixes import N_GROUPS as N_GROUPS
