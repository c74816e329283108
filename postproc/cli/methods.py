"""``postproc methods``: the registered post-processors, their promises and options."""

from __future__ import annotations

import argparse

ORDER = 25
WIDTH = 100


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("methods", help="list the registered post-processors",
                       description="List every registered post-processor: its name (for "
                                   "[postprocess] method, run --method and compare --methods), "
                                   "the promises every result of it keeps (checked on every "
                                   "run), its options and what it does.")
    p.set_defaults(func=run)


def describe(entries, width: int = WIDTH) -> str:
    """The registry as text no wider than ``width`` columns: one block per method.

    Examples
    --------
    >>> from postproc.methods import get
    >>> print(describe([get("hay")], width=60))
    hay   Hay et al.: closed-form consistent least squares of
          every measurement (real-valued, may be negative)
          promises: consistent
          options:  none
    """
    import textwrap

    entries = list(entries)
    indent = max(len(e.name) for e in entries) + 3
    pad = " " * indent
    blocks = []
    for e in entries:
        lines = textwrap.wrap(e.summary, width=width - indent) or [""]
        block = [e.name.ljust(indent) + lines[0]] + [pad + line for line in lines[1:]]
        promises = ", ".join(e.promises) or "none"
        if e.randomized:
            promises += "; randomized (draws from rng)"
        block += textwrap.wrap(promises, width=width, initial_indent=pad + "promises: ",
                               subsequent_indent=pad + " " * 10)
        block += textwrap.wrap(", ".join(e.options()) or "none", width=width,
                               initial_indent=pad + "options:  ",
                               subsequent_indent=pad + " " * 10)
        blocks.append("\n".join(block))
    return "\n\n".join(blocks)


def run(args: argparse.Namespace) -> int:
    """Print the registry."""
    from postproc.methods import catalogue

    print(describe(catalogue()))
    print("\nRun one: postproc run CONFIG --method NAME (or [postprocess] method = \"NAME\"); "
          "compare\nseveral on the same measurements: postproc compare CONFIG --methods A,B,C. "
          "TopDown's\nsolver options go in [solver]; the others' in [postprocess.options].")
    return 0
