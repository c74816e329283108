"""hierarchy.numbers: the one exact-number parser, the one positive-number, non-negative-number
and integer checks, and that every former copy (hierarchy.budget, hierarchy.accounting, the
mechanisms, the EPL estimators, the SafeTab report) now goes through them with its old
behaviour."""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest

from hierarchy import accounting, numbers
from hierarchy.budget import Budget
from hierarchy.errors import AccountingError, HierarchyError
from hierarchy.mechanisms import get_mechanism, round_up_to_rational, sample_two_sided_geometric
from hierarchy.numbers import MAX_FLOAT_DIGITS, as_fraction, integer, nonnegative, positive
from postproc.errors import PostprocError


# ---------------------------------------------------------------------------------- as_fraction
@pytest.mark.parametrize("value, expected", [
    ("0.225", Fraction(9, 40)), ("9/40", Fraction(9, 40)), (" 9/40 ", Fraction(9, 40)),
    ("1/3", Fraction(1, 3)), ("2", Fraction(2)), ("1e-1", Fraction(1, 10)),
    ("1e-300", Fraction(1, 10**300)), (" 0.5 ", Fraction(1, 2)),
    (0.1, Fraction(1, 10)), (0.225, Fraction(9, 40)), (0.25, Fraction(1, 4)), (1.5, Fraction(3, 2)),
    (np.float64(0.675), Fraction(27, 40)), (np.float32(0.5), Fraction(1, 2)),
    (3, Fraction(3)), (np.int32(2), Fraction(2)), (-2, Fraction(-2)),
    (Fraction(1, 7), Fraction(1, 7)), (Decimal("0.1"), Fraction(1, 10)),
    (1e-12, Fraction(1, 10**12)), (123456.789012345, Fraction("123456.789012345")),
])
def test_as_fraction_reads_exact_numbers(value, expected):
    got = as_fraction(value, what="x")
    assert got == expected and type(got) is Fraction


@pytest.mark.parametrize("value, fragment", [
    (True, "x must be a number, not True"), (np.bool_(False), "must be a number"),
    (float("nan"), "finite number"), (float("inf"), "finite number"),
    (np.float64("nan"), "finite number"), (Decimal("NaN"), "finite number"),
    (Decimal("Infinity"), "finite number"), ("abc", "fraction like '9/40'"),
    ("1/0", "finite number"), ("", "finite number"), ("nan", "finite number"),
    (None, "not None"), ([0.5], "not [0.5]"),
])
def test_as_fraction_refuses_what_is_not_an_exact_number(value, fragment):
    with pytest.raises(HierarchyError, match="^x ") as info:
        as_fraction(value, what="x")
    assert fragment in str(info.value)


@pytest.mark.parametrize("value, suggestion", [
    (1 / 3, "'1/3'"), (2 / 3, "'2/3'"), (1 / 7, "'1/7'"), (0.1 + 0.2, "'1/3' or"),
    (math.pi, "'1/3' or '0.1'"),
])
def test_a_computed_float_is_refused_with_the_fraction_to_write(value, suggestion):
    with pytest.raises(HierarchyError) as info:
        as_fraction(value, what="the level fraction")
    message = str(info.value)
    assert message.startswith(f"the level fraction is the float {value!r}")
    assert "not a short decimal" in message and f"write the exact value as a string, e.g. " \
        f"{suggestion}" in message
    # what the message suggests is accepted, and is the float's number
    text = suggestion.split("'")[1]
    assert float(as_fraction(text, what="x")) == value or suggestion.startswith("'1/3' or")


def test_the_float_rule_is_the_round_trip_precision_of_a_decimal():
    # every decimal of at most 15 significant digits comes back exactly ...
    typed = "0." + "3" * MAX_FLOAT_DIGITS
    assert as_fraction(float(typed), what="x") == Fraction(typed)
    # ... and a float needing more digits than that is refused
    with pytest.raises(HierarchyError, match="16 significant digits"):
        as_fraction(float("0." + "3" * 16), what="x")


def test_positive_and_at_most():
    assert as_fraction("1/2", what="g", positive=True, at_most=1) == Fraction(1, 2)
    assert as_fraction(1, what="g", at_most="1") == 1
    with pytest.raises(HierarchyError, match=r"^g must be positive \(> 0\), not 0$"):
        as_fraction(0, what="g", positive=True)
    with pytest.raises(HierarchyError, match="^g must be at most 1, not 3/2$"):
        as_fraction("3/2", what="g", at_most=1)
    assert as_fraction(-1, what="g") == -1       # sign is only checked when asked


def test_error_class_is_the_callers():
    with pytest.raises(PostprocError, match="gamma"):
        as_fraction("x", what="gamma", error=PostprocError)
    with pytest.raises(PostprocError, match="sigma"):
        positive(-1.0, "sigma", error=PostprocError)


# ------------------------------------------------------------------------------------ positive
@pytest.mark.parametrize("value", [2, 0.5, np.float64(1e-300), np.int64(7), Fraction(1, 3),
                                   Decimal("0.25"), 1e308])
def test_positive_accepts_positive_finite_numbers(value):
    got = positive(value, "x")
    assert type(got) is float and got == float(value) and got > 0
    exact = positive(value, "x", exact=True)
    assert type(exact) is Fraction and exact == Fraction(value)


@pytest.mark.parametrize("value, fragment", [
    (0, "x must be > 0, not 0"), (0.0, "x must be > 0"), (-1.0, "x must be a positive number"),
    (float("nan"), "finite"), (float("inf"), "finite"), (True, "not True"),
    ("1", "(a string); pass the number itself"), (None, "not None"), ([1.0], "not [1.0]"),
    (10**400, "too large for a float"),
])
def test_positive_refuses(value, fragment):
    with pytest.raises(HierarchyError, match="^x ") as info:
        positive(value, "x")
    assert fragment in str(info.value)


def test_positive_integer():
    assert positive(3, "n", integer=True) == 3 and type(positive(3.0, "n", integer=True)) is int
    with pytest.raises(HierarchyError, match="n must be a whole number, not 2.5"):
        positive(2.5, "n", integer=True)
    with pytest.raises(HierarchyError, match="n must be > 0"):
        positive(0, "n", integer=True)


# --------------------------------------------------------------------------------- nonnegative
@pytest.mark.parametrize("value, expected", [
    (0, 0.0), (0.0, 0.0), (2, 2.0), (np.float64(0.5), 0.5), (np.int64(3), 3.0),
    (Fraction(1, 4), 0.25), (Decimal("1.5"), 1.5), ("0.5", 0.5), (" 2 ", 2.0),
])
def test_nonnegative_reads_what_float_reads(value, expected):
    got = nonnegative(value, "x")
    assert type(got) is float and got == expected


@pytest.mark.parametrize("value, message", [
    (True, "x must be a number, not True"), (None, "x must be a number, not None"),
    ("abc", "x must be a number, not 'abc'"), ([1.0], "x must be a number, not [1.0]"),
    (-1, "x must be a finite number >= 0, not -1"),
    (float("nan"), "x must be a finite number >= 0, not nan"),
    (float("inf"), "x must be a finite number >= 0, not inf"),
    (10**400, "x must be a finite number >= 0, not 1" + "0" * 400),
])
def test_nonnegative_refuses(value, message):
    with pytest.raises(HierarchyError) as info:
        nonnegative(value, "x")
    assert str(info.value) == message


def test_nonnegative_at_most_gives_the_range_and_why():
    assert nonnegative(10, "x", at_most=10) == 10.0
    for bad in (11, -1, "abc", True, float("inf")):
        with pytest.raises(AccountingError) as info:
            nonnegative(bad, "x", at_most=10, why="the reason", error=AccountingError)
        assert str(info.value) == f"x must be a finite number in [0, 10], not {bad!r} (the reason)"
    with pytest.raises(HierarchyError, match=r"^x must be a finite number in \[0, 10\], not 11$"):
        nonnegative(11, "x", at_most=10)


# ------------------------------------------------------------------------------------- integer
@pytest.mark.parametrize("value, minimum", [(1, 1), (7, 1), (np.int64(3), 1), (np.uint8(0), 0),
                                            (0, 0), (5, 5)])
def test_integer_accepts_ints_of_at_least_the_minimum(value, minimum):
    got = integer(value, "n", minimum=minimum)
    assert type(got) is int and got == value


@pytest.mark.parametrize("value, minimum, message", [
    (0, 1, "n must be a positive integer, not 0"),
    (3.0, 1, "n must be a positive integer, not 3.0"),
    (True, 1, "n must be a positive integer, not True"),
    (np.bool_(True), 1, "n must be a positive integer, not np.True_"),
    ("2", 1, "n must be a positive integer, not '2'"),
    (-1, 0, "n must be an integer >= 0, not -1"),
    (2, 3, "n must be an integer >= 3, not 2"),
])
def test_integer_refuses(value, minimum, message):
    with pytest.raises(HierarchyError) as info:
        integer(value, "n", minimum=minimum)
    assert str(info.value) == message.replace("np.True_", repr(np.bool_(True)))


def test_integer_says_what_the_value_counts():
    with pytest.raises(PostprocError, match=r"^runs must be a positive integer \(one per draw\), "
                                            r"not 0$"):
        integer(0, "runs", why="one per draw", error=PostprocError)


# ------------------------------------------------------------- the former copies keep behaving
@pytest.mark.parametrize("call, message", [
    (lambda: accounting.check_sensitivity(2.0),
     "sensitivity of a geometric mechanism must be a positive integer (counts change by whole "
     "units), not 2.0"),
    (lambda: accounting.check_stability(0),
     "stability must be a positive integer (the most groups of one level a record can belong "
     "to), not 0"),
    (lambda: accounting.compose_parallel(1, degree=True),
     "the composition degree (stability) must be a positive integer, not True"),
    (lambda: accounting.coverage_geometric(1.0, moe=-1),
     "an MOE must be an integer >= 0, not -1"),
    (lambda: accounting.check_epsilon(-1),
     "epsilon must be a finite number in [0, 1e+15], not -1 (above 1e+15 its zCDP rho = "
     "epsilon²/2 exceeds 1e+30, where the (epsilon, delta) conversions break down)"),
    (lambda: accounting.check_rho("x", "the rho"),
     "the rho must be a finite number in [0, 1e+30], not 'x' (above 1e+30 the best Renyi order "
     "1 + sqrt(log(1/delta)/rho) rounds to 1 in float64 and the (epsilon, delta) conversions "
     "break down)"),
    (lambda: accounting.rdp_geometric(2.0, -0.5),
     "epsilon must be a finite number >= 0, not -0.5"),
    (lambda: accounting.check_moe("x", level=2),
     "MOE of level 2 must be an integer >= 1, not 'x'"),
])
def test_accounting_checks_are_the_numbers_checks_with_their_messages(call, message):
    with pytest.raises(AccountingError) as info:
        call()
    assert str(info.value) == message


def test_accounting_keeps_reading_numeric_strings():
    from hierarchy.accounting import check_epsilon, check_moe, check_rho
    assert check_epsilon("0.5") == 0.5 and check_rho("2") == 2.0
    assert check_moe("6", level=1) == 6 and check_moe(6.0, level=1) == 6


@pytest.mark.parametrize("function", [
    lambda: round_up_to_rational(0.3, max_denominator=0),
    lambda: get_mechanism("discrete_gaussian", max_denominator=2.0),
])
def test_max_denominator_is_checked_with_integer(function):
    with pytest.raises(HierarchyError, match="^max_denominator must be a positive integer, not "):
        function()


# ------------------------------------------------------------- the former copies keep behaving
def test_hierarchy_budget_reads_fractions_through_the_one_parser():
    from hierarchy import budget
    assert budget.as_fraction is numbers.as_fraction
    b = Budget("pure", "0.5", {"a": 0.5, "b": "1/2"}, {"x": 0.6, "y": 0.3, "z": 0.1})
    assert b.query_budget("a", "y") == Fraction(1, 2) * Fraction(1, 2) * Fraction(3, 10)
    with pytest.raises(HierarchyError, match=r"query fractions 'x' is the float 0\.3333333333333333"
                                             r".*'1/3'"):
        Budget("pure", 1, {"a": 1}, {"x": 1 / 3, "y": 2 / 3})


def test_accounting_as_fraction_is_the_parser_with_accounting_errors_and_no_negatives():
    from hierarchy.accounting import as_fraction as accounting_fraction
    from hierarchy.accounting import split_budget
    for value in ("0.225", " 9/40 ", 0.675, Fraction(1, 3), np.float64(0.1), 2, Decimal("0.5")):
        assert accounting_fraction(value) == numbers.as_fraction(value, what="x")
    for bad in (-1, "-0.1", float("nan"), True, "abc", None, 1 / 3):
        with pytest.raises(AccountingError):
            accounting_fraction(bad)
    with pytest.raises(AccountingError, match="must be >= 0"):
        accounting_fraction("-1/2", name="the budget")
    with pytest.raises(AccountingError, match="'1/3'"):
        split_budget(1, {"a": 1 / 3, "b": "2/3"})


@pytest.mark.parametrize("function, name", [
    (lambda v: sample_two_sided_geometric(v, 3, 1), "z"),
    (lambda v: get_mechanism("laplace").parameter(v, 1), "epsilon"),
    (lambda v: get_mechanism("gaussian").parameter(1.0, v), "sensitivity"),
])
def test_mechanisms_check_parameters_with_positive(function, name):
    for bad in (0, -1.0, float("nan"), "1", True):
        with pytest.raises(HierarchyError, match=name):
            function(bad)


def test_accounting_and_epl_positive_checks_raise_their_packages_errors():
    from hierarchy.accounting import coverage_geometric, rdp_gaussian
    from postproc.evaluation.epl import direct_epl
    with pytest.raises(AccountingError, match="epsilon must be > 0"):
        coverage_geometric(0.0)
    with pytest.raises(AccountingError, match="sigma must be a positive number"):
        rdp_gaussian(2.0, -1.0)
    with pytest.raises(PostprocError, match="bin_width must be a positive number"):
        direct_epl(np.arange(10.0), np.arange(10.0), bin_width=-1.0)


def test_safetab_report_reads_exact_budget_strings():
    from postproc.apps.safetab import report
    assert report._budget("9/100") == 0.09
    with pytest.raises(PostprocError, match="a budget of the accounting report"):
        report._budget("nine")
