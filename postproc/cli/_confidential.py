"""``--show-confidential``, shared by every command that reads the confidential data
(``postproc run``, ``validate``, ``compare``, ``evaluate``, ``safetab``): what a message may say
of input that fails a check is decided by :mod:`postproc.gate`."""

from __future__ import annotations

import argparse

__all__ = ["add_show_confidential"]


def add_show_confidential(parser: argparse.ArgumentParser) -> None:
    """Add ``--show-confidential`` to ``parser``.

    Examples
    --------
    >>> parser = argparse.ArgumentParser()
    >>> add_show_confidential(parser)
    >>> parser.parse_args(["--show-confidential"]).show_confidential
    True
    """
    parser.add_argument("--show-confidential", action="store_true",
                        help="release mode: when the confidential data fail a check, print "
                             "the counts, row numbers and values found (by default the message "
                             "names the column and the rule only, and the details go to "
                             "DIR/confidential/validation.txt when there is an output "
                             "directory). Simulation mode always prints them")
