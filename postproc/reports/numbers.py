"""The one number format of the reports, the comparison page and the comparison's terminal table.

Examples
--------
>>> [format_number(v) for v in (27467, 31967.23, 2.0, 0.02625, float("inf"), 3e-12)]
['27,467', '31,967', '2', '0.0262', 'undefined', '≈ 0']
"""

from __future__ import annotations

import math
import numbers
from typing import Any

__all__ = ["format_number", "DIGITS"]

#: Significant digits of a number that is not a whole number.
DIGITS = 3
#: Below this magnitude a non-zero number is float dust (e.g. a calibrated total that is 0 up to
#: rounding): it is written ``≈ 0``.
DUST = 1e-6
#: From this magnitude on, numbers keep an exponent (they are not counts of people).
HUGE = 1e15


def format_number(value: Any, *, digits: int = DIGITS) -> str:
    """A number as the reports write it.

    The rule, in order:

    * missing (``None``, NaN) → ``""``; a bool → ``yes`` / ``no``; anything that is not a number
      → ``str(value)``;
    * ``+inf`` → ``undefined`` (an EPL that cannot be estimated); ``-inf`` → ``−∞``;
    * ``0 < |x| < 1e-6`` → ``≈ 0`` (float dust of an exact zero);
    * a whole number (an int, or a float equal to its rounding) → digits with thousands
      separators: ``27,467``;
    * any other number → ``digits`` significant digits (default 3), never in scientific
      notation: ``0.0262``, ``5.95``, ``0.000123``; from ``10**digits`` on it is rounded to a
      whole number with separators (``31,967``), so no digit before the decimal point is lost;
    * magnitudes from ``1e15`` on keep an exponent (``1.23e+20``): no count reaches them.

    Parameters
    ----------
    value : any
    digits : int
        Significant digits of a number that is not whole.

    Returns
    -------
    str

    Examples
    --------
    >>> format_number(3.197e4), format_number(27467), format_number(-1234567.0)
    ('31,970', '27,467', '-1,234,567')
    >>> format_number(5.9468), format_number(0.000123456), format_number(-0.5)
    ('5.95', '0.000123', '-0.5')
    >>> format_number(float("nan")), format_number(None), format_number(True)
    ('', '', 'yes')
    >>> format_number(float("inf")), format_number(-float("inf")), format_number(-2e-9)
    ('undefined', '−∞', '≈ 0')
    >>> format_number("enum_dist")
    'enum_dist'
    """
    if value is None:
        return ""
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        return "yes" if value else "no"
    if not isinstance(value, numbers.Real):
        return str(value)
    if isinstance(value, numbers.Integral):
        return f"{int(value):,}"
    x = float(value)
    if math.isnan(x):
        return ""
    if math.isinf(x):
        return "undefined" if x > 0 else "−∞"
    size = abs(x)
    if 0 < size < DUST:
        return "≈ 0"
    if size >= HUGE:
        return f"{x:.{digits}g}"
    if x == round(x) or size >= 10 ** digits:
        return f"{round(x):,}"
    decimals = max(0, digits - 1 - math.floor(math.log10(size)))
    text = f"{x:,.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text
