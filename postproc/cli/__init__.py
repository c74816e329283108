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
import errno
import importlib
import pkgutil
import sys
from concurrent.futures.process import BrokenProcessPool

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
        print(f"postproc {args.command}: interrupted{_resume_hint(args, cause=False)}",
              file=sys.stderr)
        return 130
    except BrokenProcessPool:
        print(f"postproc {args.command}: error: a worker process died (killed, or out of "
              f"memory){_resume_hint(args)}", file=sys.stderr)
        return 1
    except MemoryError:
        print(f"postproc {args.command}: error: out of memory; use a smaller input or fewer "
              f"workers, or a machine with more memory{_resume_hint(args)}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"postproc {args.command}: error: {describe_os_error(exc)}{_resume_hint(args)}",
              file=sys.stderr)
        return 1


def describe_os_error(exc: OSError) -> str:
    """One line for an I/O failure: what failed, on which file, and the usual cause.

    Examples
    --------
    >>> import errno
    >>> describe_os_error(OSError(errno.ENOSPC, "No space left on device", "out/a.parquet"))
    'cannot write out/a.parquet: no space left on device (free some space)'
    """
    hints = {errno.ENOSPC: "no space left on device (free some space)",
             errno.EROFS: "read-only file system (choose a writable --out)",
             errno.EACCES: "permission denied",
             errno.EPERM: "operation not permitted",
             errno.ENOTDIR: "a part of the path is a file, not a directory",
             errno.EISDIR: "is a directory, a file was expected",
             errno.ENOENT: "no such file or directory",
             errno.EDQUOT: "disk quota exceeded"}
    what = hints.get(exc.errno, (exc.strerror or str(exc)).lower())
    if exc.filename is None:
        return f"I/O failure: {what}"
    target = exc.filename if exc.filename2 is None else f"{exc.filename} -> {exc.filename2}"
    verb = "write" if exc.errno in (errno.ENOSPC, errno.EROFS, errno.EDQUOT) else "use"
    return f"cannot {verb} {target}: {what}"


def _resume_hint(args: argparse.Namespace, cause: bool = True) -> str:
    """For a resumable command: what was written is consistent, and how to finish."""
    if not hasattr(args, "resume") or getattr(args, "resume", False) is None:
        return ""
    return ("; the outputs written so far are complete files — "
            + ("fix the cause and " if cause else "")
            + "rerun the same command with --resume to finish the run")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
