"""Shared helpers of the benchmark scripts: timing, peak memory, machine description, tables.

Nothing here asserts anything about speed: the scripts measure and report, and the reader
judges the figures against the targets (on a quiet machine — see ``benchmarks/README.md``).

* :func:`timed` — median wall-clock (and CPU) seconds of repeated calls after a warm-up;
* :func:`run_measured` — run a command in a child process under ``/usr/bin/time -v``: its peak
  resident memory (the largest single process of its tree, as the kernel reports it), the peak
  of the *sum* of resident memory over its whole process tree (sampled from ``/proc``; what
  matters when a process pool or Dask workers run beside it) and its wall/CPU time;
* :func:`run_python` — call ``module.function(**kwargs)`` in a fresh interpreter (so an earlier
  phase's memory cannot hide a later phase's peak) and get its JSON result back;
* :func:`memory_status` / :func:`reset_peak_rss` — this process's resident and peak memory, and a
  reset of the peak (Linux ``/proc/self/clear_refs``), to measure one operation's peak increase;
* :func:`machine`, :func:`load_average`, :func:`git_commit`, :func:`short_commit` — what ran
  where;
* :func:`synthetic_parser` / :func:`workdir_of` — the options and work directory shared by the
  scripts that run on synthetic 2020-style data;
* :func:`markdown_table` and small formatters.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

BENCH_DIR = Path(__file__).resolve().parent
REPO_DIR = BENCH_DIR.parent
TIME_BIN = "/usr/bin/time"
_RESULT_MARK = "@@BENCH-RESULT@@"


# -- timing ----------------------------------------------------------------------------------

def timed(function: Callable[[], Any], repeats: int = 3, *, warmup: int = 1) -> dict[str, Any]:
    """Median wall-clock and CPU seconds of ``repeats`` calls of ``function()``.

    ``warmup`` untimed calls come first (imports, caches, first-touch page faults). CPU time is
    this process's (all its threads): on a busy machine it is the steadier figure.

    Returns
    -------
    dict
        ``seconds`` (median wall), ``cpu_seconds`` (median CPU), ``runs`` (every wall time) and
        ``cpu_runs``.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, not {repeats}")
    for _ in range(warmup):
        function()
    walls, cpus = [], []
    for _ in range(repeats):
        c0, t0 = time.process_time(), time.perf_counter()
        function()
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return {"seconds": statistics.median(walls), "cpu_seconds": statistics.median(cpus),
            "runs": walls, "cpu_runs": cpus}


def median(values: Iterable[float]) -> float:
    values = list(values)
    return statistics.median(values) if values else float("nan")


# -- memory of this process ----------------------------------------------------------------------

def memory_status() -> dict[str, int]:
    """This process's current (``VmRSS``) and peak (``VmHWM``) resident memory, in bytes."""
    out = {}
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key in ("VmRSS", "VmHWM"):
                    out[key] = int(value.split()[0]) * 1024
    except OSError:
        pass
    if "VmHWM" not in out:  # not Linux: ru_maxrss is KiB on Linux, bytes on macOS
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        out["VmHWM"] = peak if sys.platform == "darwin" else peak * 1024
        out.setdefault("VmRSS", out["VmHWM"])
    return {"rss": out["VmRSS"], "peak": out["VmHWM"]}


def reset_peak_rss() -> bool:
    """Reset this process's peak resident memory to its current value (Linux ≥ 4.0).

    Returns False when the kernel does not allow it; the peak then includes everything before.
    """
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


# -- child processes -------------------------------------------------------------------------

# Kernels built with CONFIG_PROC_CHILDREN list each task's children: walking the tree is then
# ~0.3 ms per sample instead of ~7 ms for a scan of every process's parent.
_PROC_CHILDREN = os.path.exists(f"/proc/self/task/{os.getpid()}/children")


def _children(pid: int) -> list[int]:
    """Child processes of ``pid`` from ``/proc/PID/task/*/children`` (exited ones skipped)."""
    out: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as fh:
                out.extend(int(c) for c in fh.read().split())
        except (OSError, ValueError):
            pass
    return out


def _tree_rss(root: int, page: int) -> int:
    """Sum of resident memory of ``root`` and all its descendants (bytes; shared pages count
    once per process, so this errs high)."""
    if not _PROC_CHILDREN:
        return _tree_rss_scan(root, page)
    total, stack, seen = 0, [root], set()
    while stack:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.add(pid)
        kids = _children(pid)
        try:
            with open(f"/proc/{pid}/statm") as fh:
                total += int(fh.read().split()[1]) * page
        except (OSError, IndexError, ValueError):
            pass
        stack.extend(kids)
    return total


def _tree_rss_scan(root: int, page: int) -> int:
    """:func:`_tree_rss` by scanning every process's parent (slower; any Linux)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        children.setdefault(int(fields[1]), []).append(int(entry))
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        try:
            with open(f"/proc/{pid}/statm") as fh:
                total += int(fh.read().split()[1]) * page
        except (OSError, IndexError, ValueError):
            pass
        stack.extend(children.get(pid, ()))
    return total


class _TreeSampler(threading.Thread):
    """Poll the summed RSS of a process tree until stopped; keep the maximum, and the maximum
    of each phase (a phase ends at each :meth:`mark`)."""

    def __init__(self, pid: int, interval: float):
        super().__init__(daemon=True)
        self.pid, self.interval, self.peak = pid, interval, 0
        self.enabled = os.path.isdir("/proc/self")
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._phase = 0
        self.phases: list[dict[str, Any]] = []

    def run(self) -> None:
        if not self.enabled:
            return
        page = os.sysconf("SC_PAGE_SIZE")
        while not self._done.is_set():
            rss = _tree_rss(self.pid, page)
            with self._lock:
                self.peak = max(self.peak, rss)
                self._phase = max(self._phase, rss)
            self._done.wait(self.interval)

    def mark(self, label: str) -> None:
        """End the current phase: its peak is kept under ``label`` (e.g. the log line that
        ends it); the next phase starts at zero."""
        with self._lock:
            self.phases.append({"ended_by": label, "tree_peak_rss_bytes": self._phase})
            self._phase = 0

    def stop(self) -> None:
        self._done.set()
        self.join()


_TIME_FIELDS = {
    "Maximum resident set size (kbytes)": ("max_rss_bytes", lambda v: int(v) * 1024),
    "User time (seconds)": ("user_seconds", float),
    "System time (seconds)": ("system_seconds", float),
    "Percent of CPU this job got": ("cpu_percent", lambda v: float(v.rstrip("%") or "nan")),
    "Elapsed (wall clock) time (h:mm:ss or m:ss)": ("elapsed_seconds", lambda v: _clock(v)),
    "Exit status": ("exit_status", int),
}


def _clock(text: str) -> float:
    seconds = 0.0
    for part in text.split(":"):
        seconds = seconds * 60 + float(part)
    return seconds


def _parse_time_v(stderr: str) -> tuple[dict[str, Any], str]:
    """Split GNU time's ``-v`` report (at the end of stderr) from the command's own stderr."""
    marker = stderr.rfind("\tCommand being timed:")
    if marker < 0:
        return {}, stderr
    report, rest = stderr[marker:], stderr[:marker]
    out: dict[str, Any] = {}
    for line in report.splitlines():
        key, _, value = line.strip().rpartition(": ")
        if key in _TIME_FIELDS:
            name, convert = _TIME_FIELDS[key]
            try:
                out[name] = convert(value.strip())
            except ValueError:
                pass
    return out, rest


def run_measured(command: Sequence[str], *, cwd: str | os.PathLike | None = None,
                 env: dict[str, str] | None = None, sample_interval: float = 0.2,
                 echo_stderr: bool = False) -> dict[str, Any]:
    """Run ``command`` in a child process and measure it.

    Parameters
    ----------
    command : sequence of str
    cwd, env : optional
        Working directory and environment of the child.
    sample_interval : float
        Seconds between samples of the process tree's summed resident memory.
    echo_stderr : bool
        Also copy the child's stderr to ours as it arrives (progress messages).

    Returns
    -------
    dict
        ``returncode``, ``wall_seconds`` (measured here), ``stdout``, ``stderr`` (the command's
        own), ``max_rss_bytes`` (``/usr/bin/time -v``: the peak of the largest single process
        of the tree, *not* a sum; from ``RUSAGE_CHILDREN`` when GNU time is missing, then a
        maximum over every child this process has reaped so far), ``tree_peak_rss_bytes``
        (largest sampled sum over the tree), ``phase_peaks`` (per line the command wrote to
        stderr: the largest sampled sum since the line before it), ``user_seconds``,
        ``system_seconds``, ``rss_source``.
    """
    use_time = os.access(TIME_BIN, os.X_OK)
    full = [TIME_BIN, "-v", *command] if use_time else list(command)
    t0 = time.perf_counter()
    proc = subprocess.Popen(full, cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    sampler = _TreeSampler(proc.pid, sample_interval)
    sampler.start()
    err_lines: list[str] = []

    def pump() -> None:
        for line in proc.stderr:  # type: ignore[union-attr]
            err_lines.append(line)
            if not line.startswith("\t") and line.strip():
                sampler.mark(line.strip())
            if echo_stderr and not line.startswith("\t"):
                sys.stderr.write(line)
                sys.stderr.flush()

    pumper = threading.Thread(target=pump, daemon=True)
    pumper.start()
    stdout = proc.stdout.read()  # type: ignore[union-attr]
    proc.wait()
    pumper.join()
    wall = time.perf_counter() - t0
    sampler.stop()
    stderr = "".join(err_lines)
    report, own_stderr = _parse_time_v(stderr) if use_time else ({}, stderr)
    out: dict[str, Any] = {"returncode": proc.returncode, "wall_seconds": wall,
                           "stdout": stdout, "stderr": own_stderr,
                           "tree_peak_rss_bytes": sampler.peak if sampler.enabled else None,
                           "phase_peaks": sampler.phases if sampler.enabled else []}
    if report:
        out.update(report)
        out["rss_source"] = "/usr/bin/time -v"
    else:
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        out.update(max_rss_bytes=usage.ru_maxrss * 1024, user_seconds=usage.ru_utime,
                   system_seconds=usage.ru_stime,
                   rss_source="RUSAGE_CHILDREN (max over all children so far)")
    return out


def run_python(module: str, function: str, kwargs: dict[str, Any], *,
               echo_stderr: bool = True, cwd: str | os.PathLike | None = None
               ) -> dict[str, Any]:
    """Call ``module.function(**kwargs)`` (a module of ``benchmarks/``) in a fresh interpreter.

    The function must return something JSON-serializable. Returns ``{"result": ...,
    "process": <run_measured figures without stdout>}``; raises ``RuntimeError`` with the
    child's stderr when it fails. The interpreter imports the toolkit from ``cwd`` (default:
    this checkout; another worktree runs that revision's code).
    """
    code = (f"import json, sys; sys.path.insert(0, {str(BENCH_DIR)!r}); import {module}; "
            f"r = {module}.{function}(**json.loads(sys.argv[1])); "
            f"print({_RESULT_MARK!r} + json.dumps(r, default=lambda o: o.tolist() "
            "if hasattr(o, 'tolist') else str(o)))")
    measured = run_measured([sys.executable, "-c", code, json.dumps(kwargs)],
                            cwd=REPO_DIR if cwd is None else cwd, echo_stderr=echo_stderr)
    lines = [ln for ln in measured["stdout"].splitlines() if ln.startswith(_RESULT_MARK)]
    if measured["returncode"] != 0 or not lines:
        raise RuntimeError(f"{module}.{function}({kwargs}) failed with exit code "
                           f"{measured['returncode']}:\n{measured['stderr'][-4000:]}")
    result = json.loads(lines[-1][len(_RESULT_MARK):])
    process = {k: v for k, v in measured.items() if k not in ("stdout", "stderr")}
    return {"result": result, "process": process}


# -- what ran where ----------------------------------------------------------------------------

def load_average() -> tuple[float, float, float]:
    """1-, 5- and 15-minute load averages (NaN where unavailable)."""
    try:
        return tuple(os.getloadavg())  # type: ignore[return-value]
    except (AttributeError, OSError):
        return (float("nan"),) * 3


def _meminfo() -> dict[str, int]:
    out = {}
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                out[key] = int(value.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return out


def machine() -> dict[str, Any]:
    """CPU model, cores, memory and software versions of this machine."""
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    mem = _meminfo()
    import numpy

    return {"cpu": model, "cores": os.cpu_count(), "usable_cores": usable,
            "memory_bytes": mem.get("MemTotal"), "available_bytes": mem.get("MemAvailable"),
            "python": platform.python_version(), "numpy": numpy.__version__,
            "platform": platform.platform()}


def git_commit(repo: str | os.PathLike = REPO_DIR) -> dict[str, Any]:
    """The checked-out commit and whether tracked files differ from it."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True,
                              check=True).stdout.strip()
    try:
        commit = git("rev-parse", "HEAD")
        dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
        subject = git("log", "-1", "--format=%s")
    except (OSError, subprocess.CalledProcessError):
        return {"commit": "unknown", "dirty": None, "subject": ""}
    return {"commit": commit, "dirty": dirty, "subject": subject}



def short_commit(repo: str | os.PathLike = REPO_DIR) -> str:
    """``repo``'s commit as 12 hex digits (as :func:`describe_context` shows it), marked when
    tracked files differ from it."""
    made = git_commit(repo)
    return made["commit"][:12] + (" (modified)" if made["dirty"] else "")


# -- the scripts' shared options ---------------------------------------------------------------

def synthetic_parser(description: str, *, persons: int = 10_000_000,
                     repeats: int = 3) -> argparse.ArgumentParser:
    """An argument parser with the options every benchmark on synthetic 2020-style data has:
    ``--persons``, ``--repeats``, ``--workdir`` (the data, kept and reused), ``--out`` and
    ``--json`` (as :func:`emit` takes them). A script adds its own options to it."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--persons", type=int, default=persons)
    parser.add_argument("--repeats", type=int, default=repeats)
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--out", default=None)
    parser.add_argument("--json", dest="json_path", default=None)
    return parser


def workdir_of(args: argparse.Namespace, prefix: str) -> Path:
    """``--workdir``, made if it is missing, or a new temporary directory named ``prefix``…"""
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix=prefix))
    workdir.mkdir(parents=True, exist_ok=True)
    return workdir

#: Environment variables that change how fast the code runs (allocation, threads): recorded
#: with every benchmark when set.
TUNING_ENVIRON = ("NUMPY_MADVISE_HUGEPAGE", "MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_",
                  "MALLOC_ARENA_MAX", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                  "MKL_NUM_THREADS")


def tuning() -> dict[str, Any]:
    """The :data:`TUNING_ENVIRON` variables set, and the kernel's transparent-huge-page policy
    (``enabled`` and ``defrag``, the bracketed choices; absent where the kernel has none)."""
    out: dict[str, Any] = {"environ": {k: os.environ[k] for k in TUNING_ENVIRON
                                       if k in os.environ}}
    for name in ("enabled", "defrag"):
        try:
            text = Path(f"/sys/kernel/mm/transparent_hugepage/{name}").read_text()
        except OSError:
            continue
        chosen = re.search(r"\[(\S+)\]", text)
        out[f"thp_{name}"] = chosen.group(1) if chosen else text.strip()
    return out


def context_start() -> dict[str, Any]:
    """Date, machine, commit, load average and :func:`tuning` at the start of a benchmark."""
    return {"date": _dt.datetime.now().astimezone().isoformat(timespec="seconds"),
            "machine": machine(), "git": git_commit(), "load_start": load_average(),
            "tuning": tuning()}


def context_end(context: dict[str, Any]) -> dict[str, Any]:
    """Add the load average at the end (and the available memory then)."""
    context = dict(context)
    context["load_end"] = load_average()
    return context


def describe_context(context: dict[str, Any]) -> str:
    """A few markdown lines: date, machine, commit, load averages."""
    m, g = context["machine"], context["git"]
    mem = fmt_bytes(m["memory_bytes"]) if m.get("memory_bytes") else "?"
    lines = [f"- date: {context['date']}",
             (f"- machine: {m['cpu']}, {m['cores']} cores ({m['usable_cores']} usable), "
              f"{mem} RAM; Python {m['python']}, numpy {m['numpy']}"),
             (f"- commit: `{g['commit'][:12]}`"
              + (" (tracked files modified: timings are of the working tree)" if g["dirty"]
                 else "") + (f" — {g['subject']}" if g.get("subject") else ""))]
    tuned = context.get("tuning")
    if tuned:
        set_vars = ", ".join(f"{k}={v}" for k, v in tuned.get("environ", {}).items())
        thp = (f"transparent huge pages {tuned['thp_enabled']}, defrag {tuned['thp_defrag']}"
               if "thp_enabled" in tuned and "thp_defrag" in tuned else "")
        lines.append("- tuning: " + "; ".join(x for x in (thp, set_vars) if x)
                     if thp or set_vars else "- tuning: nothing set")
    load = "- load average (1/5/15 min): start " + fmt_load(context["load_start"])
    if "load_end" in context:
        load += ", end " + fmt_load(context["load_end"])
    lines.append(load + f" on {m['cores']} cores"
                 + (" — the machine was busy; treat timings as upper bounds"
                    if busy(context, m["cores"]) else ""))
    return "\n".join(lines)


def busy(context: dict[str, Any], cores: int | None) -> bool:
    """Whether the 1-minute load at start or end exceeded half the cores."""
    cores = cores or 1
    loads = [context.get("load_start", (0,))[0], context.get("load_end", (0,))[0]]
    return any(not math.isnan(x) and x > 0.5 * cores for x in loads)


# -- formatting ------------------------------------------------------------------------------

def markdown_table(headers: Sequence[str], rows: Iterable[Sequence[Any]],
                   align: str | None = None) -> str:
    """A markdown table; ``align`` is one character per column, ``l`` or ``r`` (default: the
    first column left, the others right)."""
    headers = list(headers)
    align = align or "l" + "r" * (len(headers) - 1)
    sep = ["---:" if a == "r" else "---" for a in align]
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(sep) + "|"]
    for row in rows:
        lines.append("| " + " | ".join(str(c) for c in row) + " |")
    return "\n".join(lines)


def fmt_bytes(n: float | None) -> str:
    if n is None or math.isnan(n):
        return "n/a"
    for unit, size in (("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if abs(n) >= size:
            return f"{n / size:,.2f} {unit}"
    return f"{n:,.0f} B"


def fmt_seconds(s: float | None) -> str:
    if s is None or math.isnan(s):
        return "n/a"
    if s >= 120:
        return f"{s:,.1f} s ({s / 60:.1f} min)"
    if s >= 1:
        return f"{s:,.2f} s"
    return f"{s * 1000:,.1f} ms"


def fmt_ratio(r: float | None) -> str:
    return "n/a" if r is None or math.isnan(r) else f"{r:,.2f}×"


def fmt_load(load: Sequence[float]) -> str:
    return "/".join(f"{x:.2f}" for x in load)


def verdict(met: bool | None) -> str:
    """How a figure compares with its target (a report, never an assertion)."""
    return "n/a" if met is None else ("yes" if met else "**no**")


def parse_count(text: str) -> int:
    """``"132.2M"``, ``"1e6"``, ``"200_000"``, ``"10k"`` → an int (for ``--persons``)."""
    t = text.strip().lower().replace("_", "").replace(",", "")
    mult = {"k": 1_000, "m": 1_000_000, "g": 1_000_000_000}.get(t[-1:], 1)
    if mult != 1:
        t = t[:-1]
    try:
        value = float(t) * mult
    except ValueError:
        raise ValueError(f"not a count: {text!r} (use e.g. 200000, 1e6, 10M)") from None
    whole = round(value)
    if abs(value - whole) > 1e-9 * max(1.0, value) or whole < 1:
        raise ValueError(f"not a positive whole count: {text!r}")
    return int(whole)


def count_list(text: str) -> list[int]:
    """``"1M,10M,30M,132.2M"`` → ints."""
    return [parse_count(p) for p in re.split(r"[,\s]+", text.strip()) if p]


def json_default(obj: Any) -> Any:
    """For ``json.dumps(default=...)``: numpy scalars and arrays, paths."""
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serializable: {type(obj).__name__}")


def emit(text: str, result: dict[str, Any], *, out: str | None, json_path: str | None) -> None:
    """Print a report; also write it to ``out`` and every raw figure to ``json_path``."""
    print(text)
    if out:
        Path(out).write_text(text + "\n")
    if json_path:
        Path(json_path).write_text(json.dumps(result, indent=1, default=json_default))
