"""The EPL estimator's command-line options, shared by every command that computes EPL
(``postproc evaluate``, ``postproc compare``)."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["add_epl_arguments", "epl_options"]


def add_epl_arguments(parser: argparse.ArgumentParser) -> None:
    """The EPL estimator's options, as ``postproc epl`` names them, prefixed by ``--epl-method``.

    Examples
    --------
    >>> parser = argparse.ArgumentParser()
    >>> add_epl_arguments(parser)
    >>> epl_options(parser.parse_args(["--reach", "90", "--precision", "0.2"]))
    ('improved', {'reach': 90.0, 'precision': 0.2})
    """
    parser.add_argument("--epl-method", choices=["improved", "published"], default="improved",
                        help="EPL estimator (default improved)")
    parser.add_argument("--n-boot", type=int, default=None, metavar="B",
                        help="improved: draws that calibrate the EPL interval (default 1000; 0 "
                             "for none)")
    parser.add_argument("--reach", type=float, metavar="R",
                        help="improved: percentile of the window's edges (default 95; smaller "
                             "when an EPL is undefined for too few errors)")
    parser.add_argument("--precision", type=float, metavar="F",
                        help="improved: largest relative standard error of a ratio that could "
                             "be the largest, else undefined (default 0.1)")
    parser.add_argument("--bandwidth", type=float, metavar="H",
                        help="improved: bin width in counts (default 1); published: scipy's "
                             "bandwidth factor (default 0.1)")
    parser.add_argument("--percentile", type=float, metavar="P",
                        help="published: percentile window (default 95)")
    parser.add_argument("--multiplier", type=float, metavar="M",
                        help="published: window half-width multiplier (default 1)")


def epl_options(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    """The estimator and its options from :func:`add_epl_arguments`'s arguments.

    Raises
    ------
    PostprocError
        A negative ``--n-boot``, or an option of the other estimator.

    Examples
    --------
    >>> args = argparse.Namespace(epl_method="published", n_boot=None, reach=90.0,
    ...                           precision=None, bandwidth=None, percentile=None,
    ...                           multiplier=None)
    >>> epl_options(args)
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: --reach applies to --epl-method improved only; the published
    estimator takes --percentile, --multiplier and --bandwidth
    """
    from postproc.errors import PostprocError

    own = {"improved": ("n_boot", "reach", "precision", "bandwidth"),
           "published": ("percentile", "multiplier", "bandwidth")}
    method = args.epl_method
    other = "published" if method == "improved" else "improved"
    for name in own[other]:
        if name not in own[method] and getattr(args, name) is not None:
            flags = ", ".join(f"--{n.replace('_', '-')}" for n in own[method])
            flags = " and".join(flags.rsplit(",", 1))
            raise PostprocError(f"--{name.replace('_', '-')} applies to --epl-method {other} "
                                f"only; the {method} estimator takes {flags}")
    if getattr(args, "n_boot", None) is not None and args.n_boot < 0:
        raise PostprocError("--n-boot must be a non-negative integer")
    return method, {name: getattr(args, name) for name in own[method]
                    if getattr(args, name) is not None}
