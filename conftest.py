"""Shared setup of the doctests: the names numpy-style documentation takes for granted.

Every doctest pytest collects (the docstrings of ``hierarchy/``, ``invariants/`` and
``postproc/``, README.md and ``docs/*.md``) starts with ``np`` (numpy), ``sp`` (scipy.sparse)
and ``pd`` (pandas) defined, through pytest's ``doctest_namespace``, so the examples need not
import them; anything else an example uses it imports itself. The test fixtures of
``tests/`` are in tests/conftest.py.
"""

import numpy
import pandas
import pytest
import scipy.sparse


@pytest.fixture(autouse=True)
def _doctest_names(doctest_namespace: dict) -> None:
    doctest_namespace.update(np=numpy, sp=scipy.sparse, pd=pandas)
