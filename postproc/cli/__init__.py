"""The ``postproc`` command line: a thin shell over library functions.

Each sub-command lives in a module of this package that exposes ``register(subparsers)`` and an
integer ``ORDER`` (its place in ``postproc --help``); the module adds its parser and sets ``func``
to a function ``run(args) -> int``. Modules are discovered, so adding a command touches no
shared file. The CLI parses,
calls one library function, and maps the packages' base exceptions to exit code 1 with the
message (no traceback): the message already says what is wrong and how to fix it.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

from hierarchy.errors import HierarchyError


def _command_modules() -> list:
    """Every module of this package with a ``register`` function, by ``ORDER``."""
    modules = []
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        if hasattr(module, "register"):
            modules.append(module)
    return sorted(modules, key=lambda m: (getattr(m, "ORDER", 100), m.__name__))


def _user_errors() -> tuple[type[BaseException], ...]:
    """The package base exceptions whose message is the whole story for a user."""
    errors: list[type[BaseException]] = [HierarchyError]
    for module, name in [("invariants.errors", "SpecError"),
                         ("postproc.errors", "PostprocError")]:
        try:
            errors.append(getattr(importlib.import_module(module), name))
        except (ImportError, AttributeError):
            pass
    return tuple(errors)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="postproc",
        description="Disclosure-avoidance post-processing: synthesize, measure, post-process "
                    "(TopDown, conditional sampling, baselines), evaluate error and privacy loss.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for module in _command_modules():
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except _user_errors() as exc:
        print(f"postproc {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"postproc {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
