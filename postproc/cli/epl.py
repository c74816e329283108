"""``postproc epl``: the empirical privacy loss of a file of errors.

``postproc epl --errors FILE [--method published|improved] [--settings default|paper]
[--bandwidth H] [--percentile P] [--multiplier M] [--reach R] [--precision F] [--n-boot B]
[--seed S] [--json]`` reads
``DP − exact`` errors from ``FILE`` (a ``.npy`` array, or a one-column CSV with or without a
header line) and prints :func:`postproc.evaluation.epl.estimate_epl`'s result: a short summary, or
with ``--json`` one object with keys ``epl, ci_low, ci_high, n, method, kind, parameters, reason``
(non-finite numbers are ``null``). ``kind`` is ``estimate``, ``bound`` (the errors bound the
loss from below but cannot pin it down: ``epl: null``, ``ci_low`` the bound; the summary prints
``EPL >= <bound>`` and the reason) or ``undefined`` (nothing positive is known: the summary
prints ``undefined`` and the reason).
"""

from __future__ import annotations

import argparse
import json
import math
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from postproc.errors import PostprocError

if TYPE_CHECKING:
    import numpy as np

    from postproc.evaluation.epl import EPLResult

ORDER = 50


def register(subparsers: Any) -> None:
    """Add ``epl`` to the ``postproc`` parser."""
    parser = subparsers.add_parser(
        "epl", help="empirical privacy loss of a file of errors (DP - exact)",
        description="Empirical privacy loss (EPL) of errors DP - exact of one level and query: "
                    "the improved estimator (default; the largest log ratio of a smoothed pmf over "
                    "the central 90% of the errors, with an interval, or a one-sided lower bound "
                    "when the errors cannot pin it down) or the published one (Flaxman 2019: "
                    "scipy KDE with "
                    "bandwidth factor 0.1 on a 95% percentile window). See docs/epl.md.")
    parser.add_argument("--errors", required=True, metavar="FILE",
                        help=".npy array or one-column CSV (header line optional)")
    parser.add_argument("--method", choices=["improved", "published"], default="improved",
                        help="estimator (default improved)")
    parser.add_argument("--settings", choices=["default", "paper"],
                        help="published: named settings (default: bandwidth factor 0.1, window "
                             "+-max(|q5|, |q95|); paper: Flaxman 2019's bandwidth factor 0.15, "
                             "window +-1.5 x the 95th percentile of |error|)")
    parser.add_argument("--bandwidth", type=float, metavar="H",
                        help="improved: bin width in counts, the resolution (default 1, or the "
                             "spacing of the errors' lattice); published: scipy's bandwidth "
                             "factor (default 0.1)")
    parser.add_argument("--percentile", type=float, metavar="P",
                        help="published: percentile window (default 95)")
    parser.add_argument("--multiplier", type=float, metavar="M",
                        help="published: window half-width multiplier (default 1)")
    parser.add_argument("--reach", type=float, metavar="R",
                        help="improved: percentile of the window's edges (default 95)")
    parser.add_argument("--precision", type=float, metavar="F",
                        help="improved: largest relative standard error of a ratio that could "
                             "be the largest, else undefined (default 0.1)")
    parser.add_argument("--n-boot", type=_count, metavar="B",
                        help="improved: bootstrap draws of the interval (default 1000; 0 for "
                             "none)")
    parser.add_argument("--seed", type=int, metavar="S",
                        help="improved: seed of the bootstrap (default: unpredictable)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(func=run)


def _count(text: str) -> int:
    """A whole number from the command line; ``1e3`` is accepted as 1000."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid count: {text!r}") from None
    if not (math.isfinite(value) and value == int(value)):
        raise argparse.ArgumentTypeError(f"invalid count: {text!r} is not a whole number")
    return int(value)


def read_errors(path: str | Path) -> np.ndarray:
    """Errors from a ``.npy`` file (1-D, or one column) or a one-column CSV (header optional).

    Parameters
    ----------
    path : str or pathlib.Path
        A ``.npy`` array (by its name or numpy's header, whatever the file is called) is read
        with :func:`numpy.load` (no pickles); text as CSV; other binary data is refused.

    Returns
    -------
    numpy.ndarray
        1-D float array of finite numbers.

    Raises
    ------
    PostprocError
        Missing, unreadable or not a regular file (a directory, named pipe or device), wrong
        shape, several columns, or a value that is not a finite number; the message names the
        file and, for a CSV, the line.

    Examples
    --------
    >>> import tempfile, os
    >>> folder = tempfile.mkdtemp()
    >>> path = os.path.join(folder, "errors.csv")
    >>> _ = open(path, "w").write("error\\n1\\n-2\\n0.5\\n")
    >>> read_errors(path)
    array([ 1. , -2. ,  0.5])
    >>> _ = open(path, "w").write("1\\n2\\nthree\\n")
    >>> read_errors(path)
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: .../errors.csv, line 3 'three' is not a number; expected one
    finite error per line
    """
    from hierarchy.io.storage import special_file_kind

    path = Path(path)
    if not path.exists():
        raise PostprocError(f"{path}: no such file; pass --errors with a .npy or CSV file")
    kind = special_file_kind(path)
    if kind is not None:
        raise PostprocError(f"{path} is not a regular file: it is {kind}; pass --errors with a "
                            ".npy or CSV file on disk (reading a pipe or device could block "
                            "forever)")
    with open(path, "rb") as handle:
        head = handle.read(_SNIFF)
    if path.suffix.lower() == ".npy" or head.startswith(_NPY_MAGIC):
        return _read_npy(path)
    if b"\0" in head or not _is_text(head):
        raise PostprocError(f"{path}: binary data that is not a .npy array (no numpy header); "
                            "pass an array saved with numpy.save, or a CSV with one error per "
                            "line")
    return _read_csv(path)


#: The first bytes of every ``.npy`` file (numpy's format), and how much of a file is sniffed.
_NPY_MAGIC = b"\x93NUMPY"
_SNIFF = 8192


def _is_text(head: bytes) -> bool:
    """Whether the start of a file decodes as UTF-8 (a character cut by the end may be)."""
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start >= len(head) - 3 and exc.reason == "unexpected end of data"
    return True


def _read_npy(path: Path) -> np.ndarray:
    import numpy as np

    try:
        array = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise PostprocError(f"{path}: not a readable .npy array ({exc})") from None
    if not isinstance(array, np.ndarray) or array.dtype == bool or \
            not np.issubdtype(array.dtype, np.number):
        raise PostprocError(f"{path}: holds {getattr(array, 'dtype', type(array).__name__)} "
                            f"values, not numbers")
    if array.ndim == 2 and array.shape[1] == 1:
        array = array[:, 0]
    if array.ndim != 1:
        raise PostprocError(f"{path}: an array of shape {array.shape}; expected one column of "
                            f"errors (shape (n,) or (n, 1))")
    values = array.astype(float)
    bad = np.flatnonzero(~np.isfinite(values))
    if bad.size:
        raise PostprocError(f"{path}: element {bad[0]} is {values[bad[0]]}, not a finite number")
    return values


def _read_csv(path: Path) -> np.ndarray:
    import numpy as np
    import pandas as pd

    try:
        table = pd.read_csv(path, header=None, dtype=str, keep_default_na=False,
                            skip_blank_lines=False)
    except pd.errors.EmptyDataError:
        raise PostprocError(f"{path}: the file is empty; expected one column of errors") from None
    except pd.errors.ParserError as exc:
        found = re.search(r"line (\d+), saw (\d+)", str(exc))
        where = f", line {found[1]}: {found[2]} columns" if found else f": {str(exc).strip()}"
        raise PostprocError(f"{path}{where}; expected one column of errors") from None
    except UnicodeDecodeError:
        raise PostprocError(f"{path}: not a text file; pass a .npy array or a CSV") from None
    if table.shape[1] != 1:
        raise PostprocError(f"{path}: {table.shape[1]} columns in line 1; expected one column "
                            f"of errors")
    text = table[0].str.strip()
    last = len(text)
    while last and text.iloc[last - 1] == "":         # trailing blank lines
        last -= 1
    text = text.iloc[:last]
    values = pd.to_numeric(text, errors="coerce").to_numpy(dtype=float)
    first = 1 if values.size and math.isnan(values[0]) and text.iloc[0] != "" else 0
    if first and text.iloc[0].lower() in ("nan", "inf", "-inf", "+inf", "infinity"):
        first = 0                                      # a value, not a header
    bad = np.flatnonzero(~np.isfinite(values[first:]))
    if bad.size:
        row = int(bad[0]) + first
        value = text.iloc[row]
        parsed = not np.isnan(values[row]) or value.lower() == "nan"   # inf, -inf, 1e999, nan
        problem = ("is empty" if value == "" else
                   f"{value!r} is not finite" if parsed else f"{value!r} is not a number")
        raise PostprocError(f"{path}, line {row + 1} {problem}; expected one finite error per "
                            f"line")
    if values.size == first:
        raise PostprocError(f"{path}: no errors after the header line")
    return values[first:]


def _summary(result: EPLResult) -> str:
    """The text report. A bound reports ``EPL >= bound`` (one-sided, at the level), an undefined
    EPL ``undefined``; both then give the reason and only the settings that were resolved before
    the estimate stopped."""
    p = result.parameters
    if result.kind == "bound":
        lines = [f"EPL ({result.method}): >= {result.ci_low:.4g}   one-sided "
                 f"{100 * p['level']:g}% lower bound"]
    elif result.kind == "undefined":
        lines = [f"EPL ({result.method}): undefined"]
    else:
        lines = [f"EPL ({result.method}): {result.epl:.4g}"
                 + (f"   {100 * p['level']:g}% interval [{result.ci_low:.4g}, "
                    f"{result.ci_high:.4g}]" if math.isfinite(result.ci_low) else "")]
    if result.reason:
        lines.append(f"{result.kind}: {result.reason}")
        settings = ", ".join(f"{name} {value:g}" for name, value in p.items()
                             if isinstance(value, (int, float)) and not isinstance(value, bool))
        lines.append(f"n = {result.n} errors" + (f"; {settings}" if settings else ""))
        return "\n".join(lines)
    if result.method == "published":
        lines.append(f"n = {result.n} errors; "
                     + ("settings paper (window from the percentile of |error|); "
                        if p.get("settings") == "paper" else "")
                     + f"percentile {p['percentile']:g}, multiplier "
                     f"{p['multiplier']:g}, bandwidth factor {p['bandwidth']:g}"
                     + (f"; window [{p['window'][0]:g}, {p['window'][1]:g})"
                        if "window" in p else ""))
    else:
        lines.append(f"n = {result.n} errors; bin width {p['bandwidth']:g} counts; window "
                     f"[{p['window'][0]:g}, {p['window'][1]:g}] ({100 - p['reach']:g}th to "
                     f"{p['reach']:g}th percentile), centre {p['centre']:g}; largest ratio at "
                     f"x = {p['argmax']:g}, standard error of a contender at most "
                     f"{p['max_se']:.3g}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Run ``postproc epl``."""
    from postproc.evaluation.epl import estimate_epl

    errors = read_errors(args.errors)
    options: dict[str, Any] = {}
    if args.bandwidth is not None:
        options["bandwidth"] = args.bandwidth
    if args.method == "published":
        if any(v is not None for v in (args.n_boot, args.seed, args.reach, args.precision)):
            raise PostprocError("--reach, --precision, --n-boot and --seed apply to --method "
                                "improved only (the published estimator has a percentile window "
                                "and no interval)")
        options.update({k: v for k, v in [("percentile", args.percentile),
                                          ("multiplier", args.multiplier),
                                          ("settings", args.settings)] if v is not None})
    else:
        if any(v is not None for v in (args.percentile, args.multiplier, args.settings)):
            raise PostprocError("--percentile, --multiplier and --settings apply to --method "
                                "published only (the improved estimator's window is --reach)")
        options.update({k: v for k, v in [("reach", args.reach), ("precision", args.precision),
                                          ("n_boot", args.n_boot)] if v is not None})
        options["rng"] = args.seed
    result = estimate_epl(errors, method=args.method, **options)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2, allow_nan=False))
    else:
        print(_summary(result))
    return 0
