"""The ``postproc`` command line: a thin shell over library functions.

Each sub-command lives in a module of this package that exposes ``register(subparsers)`` and an
integer ``ORDER`` (its place in ``postproc --help``); the module adds its parser and sets ``func``
to a function ``run(args) -> int``. Modules are discovered, so adding a command touches no
shared file. The CLI parses,
calls one library function, and maps the toolkit's base exception
(:class:`hierarchy.errors.DappError`) to exit code 1 with the message (no traceback): the
message already says what is wrong and how to fix it.

A command module imports only the standard library at module level and in ``register``; its
library imports go inside ``run`` (``postproc --help`` stays fast: no numpy, pandas, scipy or
solver is loaded to build the parser).
"""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import pkgutil
import signal
import sys
import threading
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager

from hierarchy.errors import DappError


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


def build_parser() -> argparse.ArgumentParser:
    """The ``postproc`` parser, with every discovered command.

    Examples
    --------
    >>> parser = build_parser()
    >>> parser.parse_args(["synth1940", "--persons", "10", "--seed", "1", "--out", "d"]).command
    'synth1940'
    """
    import hierarchy

    parser = argparse.ArgumentParser(
        prog="postproc",
        description="Disclosure-avoidance post-processing: synthesize, measure, post-process "
                    "(TopDown, conditional sampling, baselines), evaluate error and privacy loss.")
    parser.add_argument("--version", action="version",
                        version=f"%(prog)s {hierarchy.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for module in _command_modules():
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run ``postproc`` with ``argv`` (default ``sys.argv[1:]``); return the exit code.

    Examples
    --------
    >>> main(["account", "convert", "--epsilon", "1", "--json"]) == 0  # doctest: +ELLIPSIS
    {...
    True
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        with _terminated_as_an_exception():
            return int(args.func(args) or 0)
    except DappError as exc:
        print(f"postproc {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"postproc {args.command}: interrupted{_resume_hint(args, cause=False)}",
              file=sys.stderr)
        return 130
    except Terminated:
        print(f"postproc {args.command}: terminated (SIGTERM){_resume_hint(args, cause=False)}",
              file=sys.stderr)
        return 128 + signal.SIGTERM
    except BrokenProcessPool:
        print(f"postproc {args.command}: error: a worker process died (killed, or out of "
              f"memory){_resume_hint(args)}", file=sys.stderr)
        return 1
    except MemoryError:
        print(f"postproc {args.command}: error: out of memory; use a smaller input or fewer "
              f"workers, or a machine with more memory{_resume_hint(args)}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # whatever read our output has gone (`postproc nmf inspect ROOT | head`): stop
        # quietly, as the commands of a pipeline do; the interpreter's last flush must not
        # fail again
        sys.stdout = open(os.devnull, "w")
        return 128 + signal.SIGPIPE
    except OSError as exc:
        print(f"postproc {args.command}: error: {describe_os_error(exc)}{_resume_hint(args)}",
              file=sys.stderr)
        return 1


class Terminated(BaseException):
    """The process received SIGTERM (``kill PID``, a scheduler ending a job). Raised in the
    main thread, like :class:`KeyboardInterrupt` for SIGINT, so that what is being written is
    cleaned up and the command says what happened (a BaseException: no ``except Exception``
    swallows it)."""


@contextmanager
def _terminated_as_an_exception():
    """SIGTERM raises :class:`Terminated` in this process while the block runs (the default
    would end it without a word). Only from the main thread, where Python handles signals;
    a child process that inherited the handler is ended as by default."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pid = os.getpid()

    def handler(signum, frame):
        if os.getpid() != pid:              # a forked child: die as SIGTERM would
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
            return
        raise Terminated

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


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
