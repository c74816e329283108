"""A SafeTab-style run: read the persons, tabulate the groups, measure every level, write.

:func:`safetab` is the in-memory core (persons table + config → :class:`SafeTabResult`);
:func:`run_safetab` adds reading the data (or generating synthetic data) and writing the outputs
atomically into one directory:

* ``tables/<level>.parquet`` — the released counts, long form: ``level, geography, iteration,
  table, stat, count, variance, moe`` (the DP output);
* ``choices/<level>.parquet`` — per group, the table it released and its Step-1 noisy total (also
  a DP output);
* ``manifest.json`` — randomness mode and label, configuration, per-level plan (budgets, noise,
  MOEs), the privacy accounting, the realized adaptive choices, the release files (``outputs``
  and ``release.release_files``);
* ``confidential/accuracy_report.json`` — only when enabled: errors against the truth, computed
  from the confidential data, in a directory with a CONFIDENTIAL banner that is never part of
  the release.

The release gate: nothing computed from the confidential data is written outside
``confidential/``. In release mode the manifest also withholds the input and output paths and
the number of records (an exact count of the confidential data). Every parquet file carries the
randomness provenance (release or simulation, with its label) in its metadata.

Writing is safe against interruption and concurrency: the directory is built under a temporary
name and renamed into place (:func:`hierarchy.io.storage.atomic_directory`, which replaces only a
directory the toolkit wrote and never the current directory); a run holds an exclusive lock on
the output (``.<name>.lock/`` beside it) for its whole duration, so a second run into the same
directory fails at once; and the temporary directories a killed run left beside the output are
removed by the next run into it.
"""

from __future__ import annotations

import re
import shutil
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping

import pyarrow as pa
import pyarrow.parquet as pq

from hierarchy.errors import HierarchyError
from hierarchy.io.storage import (
    CONFIDENTIAL_DIR,
    atomic_directory,
    confidential_directory,
    is_owned,
    lock_directory,
    package_versions,
    special_file_kind,
    write_json,
    write_parquet,
)
from hierarchy.randomness import as_randomness
from postproc.apps.safetab.algorithm import LevelPlan, LevelRelease, measure_level, plan_level
from postproc.apps.safetab.budgets import SafeTabAccounting, account_safetab
from postproc.apps.safetab.config_types import SafeTabConfig, level_file_names
from postproc.apps.safetab.groups import check_stability, prepare_records, tabulate_groups
from postproc.apps.safetab.report import accuracy_report
from postproc.errors import ConfidentialInputError, PostprocError
from postproc.gate import data_errors

__all__ = ["SafeTabResult", "SafeTabRun", "safetab", "load_persons", "write_safetab",
           "run_safetab", "REPORT_FILE"]

#: The accuracy report's file, under ``DIR/confidential/``.
REPORT_FILE = "accuracy_report.json"
_MADE_BY = "postproc safetab"
_NOT_FOR_RELEASE = (f"{CONFIDENTIAL_DIR}/ (computed from the confidential data: never publish "
                    f"it)")
# What tempfile.mkdtemp puts between atomic_directory's prefix ".<name>" and its suffix.
_TMP_SUFFIX = re.compile(r"\.[a-z0-9_]{8}(\.old)?\.tmp")

_FROM_CONFIG = object()


@dataclass(frozen=True)
class SafeTabResult:
    """Everything a run produced, in memory.

    Parameters
    ----------
    config : SafeTabConfig
    plans : dict of str to LevelPlan
    releases : dict of str to LevelRelease
        The released counts (and, beside them, the confidential truth).
    accounting : SafeTabAccounting
    observed_stability : dict of str to int
        The most groups of each level one record belongs to (confidential).
    randomness : dict
        Provenance of the noise (mode, seed, label).
    records : int
        Number of persons tabulated.

    Examples
    --------
    >>> from hierarchy.synth.detailed1940 import synthesize_detailed_1940
    >>> from postproc.apps.safetab.config import Iteration, Level
    >>> config = SafeTabConfig((Iteration("1", "Total", "all"),),
    ...                        (Level("state", "state", ("1",), 1, None, 10, (100, 1000, 10000)),),
    ...                        randomness_mode="simulation", seed=1, synthetic=(2_000, 1))
    >>> result = safetab(synthesize_detailed_1940(2_000, seed=1).persons, config)
    >>> result.records, result.release, result.choices()
    (2000, False, {'state': {'total_only': 0, 'total': 46, 'sex_age4': 3, 'sex_age9': 0,
    'sex_age23': 0}})
    >>> manifest = result.manifest()            # JSON-ready, no confidential values
    >>> manifest["levels"]["state"]["released_counts"], manifest["randomness"]["mode"]
    (70, 'simulation')
    """

    config: SafeTabConfig
    plans: Mapping[str, LevelPlan]
    releases: Mapping[str, LevelRelease]
    accounting: SafeTabAccounting
    observed_stability: Mapping[str, int]
    randomness: Mapping[str, Any]
    records: int

    def choices(self) -> dict[str, dict[str, int]]:
        """Per level, how many groups released each table type."""
        return {name: release.choice_counts() for name, release in self.releases.items()}

    @property
    def release(self) -> bool:
        """Whether the noise came from release-mode randomness (the outputs may be published)."""
        return self.randomness.get("safe_for_release") is True

    def manifest(self) -> dict[str, Any]:
        """JSON-ready description of the run (no confidential values).

        In release mode it withholds, besides the truth, the paths of the configuration
        (:meth:`SafeTabConfig.to_dict`) and the number of records tabulated.
        """
        levels = {}
        for name, plan in self.plans.items():
            release = self.releases[name]
            levels[name] = {**plan.to_dict(), "entities": int(release.geocodes.size),
                            "groups": int(release.choice.size),
                            "released_counts": release.rows, "choices": release.choice_counts()}
        manifest = {
            "tool": "postproc safetab (SafeTab-style adaptive tabulation, docs/safetab.md)",
            "randomness": dict(self.randomness),
            "config": self.config.to_dict(release=self.release),
            "records": self.records,
            "mechanism": self.config.mechanism.to_dict(),
            "gamma": str(self.config.gamma),
            "threshold_rule": "noisy total < theta1: total; [theta1, theta2): sex x Age4; "
                              "[theta2, theta3): sex x Age9; >= theta3: sex x Age23 (the "
                              "level's thresholds, or those it gives the iteration's "
                              "iteration level)",
            "stability_check": "passed: no record belongs to more groups of a level than the "
                               "level's declared stability",
            "geography_note": "the entities of each level are those present in the data "
                              "(without the level's outside geocode, whose records are in no "
                              "entity of the level); a release should take them from a public "
                              "geography file",
            "levels": levels,
            "accounting": self.accounting.to_dict(),
            "versions": package_versions(),
        }
        if self.release:
            del manifest["records"]          # an exact count of the confidential data
        return manifest


def safetab(persons: pa.Table, config: SafeTabConfig, *, rng: Any = _FROM_CONFIG) -> SafeTabResult:
    """Run SafeTab-style adaptive tabulation on a persons table, in memory.

    Parameters
    ----------
    persons : pyarrow.Table
        One row per person, with the configured columns and every level's geography column.
    config : SafeTabConfig
    rng : None, int, numpy.random.Generator or Randomness, optional
        The randomness (:func:`hierarchy.randomness.as_randomness`); by default the config's
        (``[randomness]``: release mode, or simulation with its seed). Level ``j`` (in config
        order) uses the child stream ``j``.

    Returns
    -------
    SafeTabResult

    Raises
    ------
    PostprocError
        If the data lack a column or hold invalid values, or a record belongs to more groups of
        a level than its declared stability.

    Examples
    --------
    >>> from hierarchy.synth.detailed1940 import synthesize_detailed_1940
    >>> from hierarchy.mechanisms import get_mechanism
    >>> from postproc.apps.safetab.config import Iteration, Level
    >>> config = SafeTabConfig(
    ...     (Iteration("1", "Total", "all"), Iteration("3", "American Indian", ["3000-3999"])),
    ...     (Level("state", "state", ("1", "3"), 2, "1", None, (100, 1000, 10000)),),
    ...     mechanism=get_mechanism("geometric"), randomness_mode="simulation", seed=5,
    ...     synthetic=(30_000, 2))
    >>> result = safetab(synthesize_detailed_1940(30_000, seed=2).persons, config)
    >>> result.accounting.total.pure_epsilon, result.randomness["mode"]
    (1.0, 'simulation')
    >>> sum(result.choices()["state"].values())      # 49 states x 2 iterations
    98
    """
    if not isinstance(config, SafeTabConfig):
        raise PostprocError(f"config must be a SafeTabConfig, not {type(config).__name__}")
    records = prepare_records(persons, config.columns, [lv.geography for lv in config.levels])
    iterations = config.iterations_by_id()
    counts = tabulate_groups(records, config.levels, iterations)
    source = as_randomness(config.rng if rng is _FROM_CONFIG else rng)
    for level in config.levels:
        check_stability(level, counts[level.name], records, iterations,
                        release=source.safe_for_release)
    plans = {level.name: plan_level(level, mechanism=config.mechanism, gamma=config.gamma,
                                    total_only=config.total_only(level), iterations=iterations)
             for level in config.levels}
    accounting = account_safetab({n: p.budget for n, p in plans.items()},
                                 kinds={n: p.kinds for n, p in plans.items()},
                                 delta=config.delta, algorithm=config.accounting_algorithm)
    releases = {level.name: measure_level(counts[level.name], plans[level.name], source.child(j))
                for j, level in enumerate(config.levels)}
    return SafeTabResult(config, plans, releases, accounting,
                         {n: c.observed_stability for n, c in counts.items()},
                         source.provenance(), records.size)


def load_persons(config: SafeTabConfig) -> pa.Table:
    """The persons table of a config: its parquet file (only the needed columns) or synthetic
    detailed 1940 data (:func:`hierarchy.synth.detailed1940.synthesize_detailed_1940`).

    Raises
    ------
    PostprocError
        If the file is missing, unreadable or lacks a needed column.

    Examples
    --------
    >>> import tempfile
    >>> import pyarrow.parquet as pq
    >>> from hierarchy.synth.detailed1940 import synthesize_detailed_1940
    >>> from postproc.apps.safetab.config import Iteration, Level
    >>> path = Path(tempfile.mkdtemp()) / "persons.parquet"
    >>> pq.write_table(synthesize_detailed_1940(2_000, seed=1).persons, path)
    >>> config = SafeTabConfig((Iteration("1", "Total", "all"),),
    ...                        (Level("state", "state", ("1",), 1, None, 10, (100, 1000, 10000)),),
    ...                        randomness_mode="simulation", seed=1, persons=path)
    >>> persons = load_persons(config)          # only the columns SafeTab needs
    >>> persons.num_rows, persons.column_names
    (2000, ['sex', 'age', 'race1', 'race2', 'race3', 'hisp_origin', 'state'])
    >>> import dataclasses
    >>> load_persons(dataclasses.replace(config, persons=path.with_name("missing.parquet")))
    Traceback (most recent call last):
    ...
    postproc.errors.ConfidentialInputError: <config> [data] persons: .../missing.parquet does not
    exist
    """
    if config.synthetic is not None:
        from hierarchy.synth.detailed1940 import synthesize_detailed_1940

        persons, seed = config.synthetic
        try:
            return synthesize_detailed_1940(persons, seed=seed).persons
        except HierarchyError as exc:
            raise PostprocError(f"{config.source} [data] synthetic: {exc}") from None
    path = config.persons
    key = f"{config.source} [data] persons"

    def refuse(detail: str, public: str, *, reader: bool = False) -> ConfidentialInputError:
        # the path is named in the full message only (and the reader's own message, which
        # may quote a record)
        return ConfidentialInputError(f"{key}: {detail}", public=f"{key}: {public}",
                                      has_detail=reader)

    if not path.exists():
        raise refuse(f"{path} does not exist", "the file does not exist")
    kind = special_file_kind(path)
    if kind is not None and not (kind == "a directory" and path.suffix in (".parquet", ".pq")):
        advice = (f"is not a regular file: it is {kind}; give a parquet file on disk (reading "
                  f"a pipe or device could block forever)")
        raise refuse(f"{path} {advice}", f"the file {advice}")
    try:
        available = pq.read_schema(path).names
    except (OSError, pa.ArrowException) as exc:
        raise refuse(f"cannot read {path} as parquet: {exc}", "cannot read the file as "
                     "parquet (the reader's message is withheld)", reader=True) from None
    wanted = config.columns.names() + [lv.geography for lv in config.levels]
    missing = [c for c in dict.fromkeys(wanted) if c not in available and c != "nation"]
    if missing:
        columns = (f"has no column(s) {missing}; its columns are {available}; map them in "
                   f"[data.columns] or fix the levels' geography")
        raise refuse(f"{path} {columns}", f"the file {columns}")
    try:
        return pq.read_table(path, columns=[c for c in dict.fromkeys(wanted) if c in available])
    except (OSError, pa.ArrowException) as exc:
        raise refuse(f"cannot read {path} as parquet: {exc}", "cannot read the file as "
                     "parquet (the reader's message is withheld)", reader=True) from None


@dataclass(frozen=True)
class SafeTabRun:
    """The outputs of :func:`run_safetab`.

    Parameters
    ----------
    directory : Path
    manifest : dict
    report : dict or None
        The accuracy report, when enabled (confidential: computed from the truth).
    result : SafeTabResult
    report_path : Path or None
        Where the report was written: ``directory/confidential/accuracy_report.json``.

    Examples
    --------
    Without an accuracy report (``[output] accuracy_report = false``) nothing confidential is
    kept beside the release:

    >>> import tempfile
    >>> from postproc.apps.safetab.config import Iteration, Level
    >>> config = SafeTabConfig((Iteration("1", "Total", "all"),),
    ...                        (Level("state", "state", ("1",), 1, "1/10", None, (10, 50, 100)),),
    ...                        randomness_mode="simulation", seed=2, synthetic=(1_000, 2))
    >>> run = run_safetab(config, out=Path(tempfile.mkdtemp()) / "safetab")
    >>> run.report, run.report_path, run.result.records
    (None, None, 1000)
    >>> run.manifest["outputs"]
    {'tables': {'state': 'tables/state.parquet'}, 'choices': {'state': 'choices/state.parquet'}}
    """

    directory: Path
    manifest: Mapping[str, Any]
    report: Mapping[str, Any] | None
    result: SafeTabResult
    report_path: Path | None = None


def write_safetab(result: SafeTabResult, directory: str | Path, *, overwrite: bool = False,
                  report: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Write a run's outputs into ``directory``, atomically (all files or none).

    Parameters
    ----------
    result : SafeTabResult
    directory : str or Path
    overwrite : bool, optional
        Replace an existing non-empty directory — only one this toolkit wrote (it carries the
        ``.dapp-output`` marker), never the current directory or one holding it.
    report : dict, optional
        An accuracy report to write, to ``directory/confidential/accuracy_report.json``.

    Returns
    -------
    dict
        The manifest written, with ``outputs`` (the release files).

    Raises
    ------
    PostprocError
        If the directory exists and is not empty (without ``overwrite``), cannot be replaced or
        written, is being written by another run, or two levels would share a file.

    Examples
    --------
    >>> import tempfile
    >>> from hierarchy.synth.detailed1940 import synthesize_detailed_1940
    >>> from postproc.apps.safetab.config import Iteration, Level
    >>> config = SafeTabConfig((Iteration("1", "Total", "all"),),
    ...                        (Level("state", "state", ("1",), 1, "1/2", None, (10, 50, 100)),),
    ...                        randomness_mode="simulation", seed=3, synthetic=(1_000, 3))
    >>> result = safetab(synthesize_detailed_1940(1_000, seed=3).persons, config)
    >>> out = Path(tempfile.mkdtemp()) / "release"
    >>> write_safetab(result, out)["outputs"]["tables"]
    {'state': 'tables/state.parquet'}
    >>> sorted(p.relative_to(out).as_posix() for p in out.rglob("*.*"))
    ['.dapp-output', 'choices/state.parquet', 'manifest.json', 'tables/state.parquet']
    >>> write_safetab(result, out)
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: ... already exists and is not empty; choose another directory, or
    allow replacing it (overwrite=True, --overwrite)
    >>> _ = write_safetab(result, out, overwrite=True)     # replaces what this toolkit wrote
    """
    overwrite = _flag(overwrite, "overwrite")
    directory = _output_path(directory)
    level_file_names(result.releases)
    _check_not_an_input(directory, result.config)
    with _output_lock(directory):
        _remove_interrupted_writes(directory)
        with _atomic_output(directory, overwrite) as tmp:
            return _write_outputs(tmp, result, report, directory)


def _write_outputs(tmp: Path, result: SafeTabResult, report: Mapping[str, Any] | None,
                   directory: Path) -> dict[str, Any]:
    """Write the release files into ``tmp`` and the report, if any, under ``tmp/confidential``."""
    stems = level_file_names(result.releases)
    manifest = result.manifest()
    outputs: dict[str, Any] = {"tables": {}, "choices": {}}
    try:
        for name, release in result.releases.items():
            meta = {"randomness": dict(result.randomness), "level": name,
                    "mechanism": result.config.mechanism.to_dict(),
                    "accounting": result.accounting.levels[name].to_dict(),
                    "plan": result.plans[name].to_dict()}
            file = f"{stems[name]}.parquet"
            write_parquet(release.to_table(), tmp / "tables" / file,
                          metadata={**meta, "content": "released noisy counts"})
            write_parquet(release.choices_table(), tmp / "choices" / file,
                          metadata={**meta, "content": "table released by each group and "
                                                       "its Step-1 noisy total"})
            outputs["tables"][name] = f"tables/{file}"
            outputs["choices"][name] = f"choices/{file}"
        manifest["outputs"] = outputs
        manifest["release"] = {
            "release_files": ["manifest.json"] + [file for group in outputs.values()
                                                  for file in group.values()],
            "not_for_release": _NOT_FOR_RELEASE}
        if report is not None:
            folder = confidential_directory(
                tmp, what="the accuracy report: errors of the released counts against the "
                          "true counts")
            write_json({**report, "randomness": dict(result.randomness)}, folder / REPORT_FILE)
        write_json(manifest, tmp / "manifest.json")
    except OSError as exc:
        raise PostprocError(f"cannot write {directory}: {exc}") from None
    return manifest


def _flag(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise PostprocError(f"{name} must be True or False, not {value!r}")
    return value


def _output_path(directory: str | Path) -> Path:
    """``directory`` as a path whose last part names it (``.`` and ``..`` resolved)."""
    path = Path(directory)
    return path.resolve() if path.name in ("", ".", "..") else path


def _check_not_an_input(directory: Path, config: SafeTabConfig) -> None:
    """Refuse an output directory that is (or holds) the current directory, the configuration
    file or the persons file: before the lock beside it is taken, before the data are read."""
    target = directory.resolve()
    for what, path in (("configuration file", Path(config.source)),
                       ("persons file", config.persons)):
        if path is None or not path.exists():
            continue
        resolved = path.resolve()
        if resolved == target or target in resolved.parents:
            raise PostprocError(f"the output directory {directory} holds the {what} "
                                f"{path.name}, which writing the outputs there could replace; "
                                f"choose a new directory for the outputs, e.g. [output] "
                                f"directory = \"safetab_out\" or --out safetab_out")
    cwd = Path.cwd().resolve()
    if target == cwd or target in cwd.parents:
        raise PostprocError(f"the output directory {directory} is (or contains) the current "
                            f"directory, which is never written over; choose a new directory "
                            f"below it, e.g. --out safetab_out")


@contextmanager
def _output_lock(directory: Path) -> Iterator[None]:
    """Hold the lock of output ``directory`` for the block.

    The output is built elsewhere and renamed into place, so it cannot hold its own lock: the
    lock is :func:`hierarchy.io.storage.lock_directory` on ``.<name>.lock/`` beside it (kept
    afterwards: removing a lock file races with the next run's open).
    """
    lock = directory.parent / f".{directory.name}.lock"
    try:
        lock.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise PostprocError(f"cannot write {directory}: cannot create its lock {lock} "
                            f"({exc.strerror}); choose another output directory") from None
    with ExitStack() as stack:
        try:
            stack.enter_context(lock_directory(lock, what=_MADE_BY))
        except HierarchyError as exc:
            raise PostprocError(f"another run is writing {directory}: {exc}") from None
        yield


def _remove_interrupted_writes(directory: Path) -> list[Path]:
    """Remove the temporary directories a killed write of ``directory`` left beside it.

    Only ``.<name>.XXXXXXXX.tmp`` and ``.<name>.XXXXXXXX.old.tmp`` (the names
    :func:`hierarchy.io.storage.atomic_directory` gives them, ``XXXXXXXX`` from
    :func:`tempfile.mkdtemp`, so ``.<name>.v2.….tmp`` of an output ``<name>.v2`` is not one)
    that carry the toolkit's ownership marker. Call it only while holding
    :func:`_output_lock`: a running write's directory looks the same.
    """
    parent, prefix = directory.parent, f".{directory.name}"
    removed: list[Path] = []
    if not parent.is_dir():
        return removed
    for entry in sorted(parent.iterdir()):
        name = entry.name
        if (name.startswith(prefix) and _TMP_SUFFIX.fullmatch(name[len(prefix):])
                and entry.is_dir() and not entry.is_symlink() and is_owned(entry)):
            shutil.rmtree(entry)
            removed.append(entry)
    return removed


@contextmanager
def _atomic_output(directory: Path, overwrite: bool) -> Iterator[Path]:
    """:func:`hierarchy.io.storage.atomic_directory`, its own errors as :class:`PostprocError`
    (errors of the block pass through unchanged)."""
    inside = False
    try:
        with atomic_directory(directory, overwrite=overwrite, made_by=_MADE_BY) as tmp:
            inside = True
            yield tmp
            inside = False
    except HierarchyError as exc:
        if inside:
            raise
        raise PostprocError(str(exc)) from None
    except OSError as exc:
        if inside:
            raise
        raise PostprocError(f"cannot write {directory}: {exc}") from None


def run_safetab(config: SafeTabConfig, *, out: str | Path | None = None,
                overwrite: bool | None = None, persons: pa.Table | None = None,
                show_confidential: bool = False) -> SafeTabRun:
    """Read (or generate) the persons, run :func:`safetab`, write the outputs.

    The output directory is locked and checked before the data are read: a second run into it,
    a directory that cannot be replaced or one holding the inputs fails at once, before any
    noise is drawn.

    Parameters
    ----------
    config : SafeTabConfig
    out : str or Path, optional
        Output directory (default ``[output] directory``).
    overwrite : bool, optional
        Default ``[output] overwrite``.
    persons : pyarrow.Table, optional
        Use this table instead of the config's data source.
    show_confidential : bool
        In release mode, let the message of data that fail a check state the counts, records
        and values it found; otherwise it names the column and the rule only, and says to rerun
        with ``--show-confidential`` (:mod:`postproc.gate`).

    Returns
    -------
    SafeTabRun

    Raises
    ------
    PostprocError
        On invalid data, a violated stability or an unwritable output.

    Examples
    --------
    >>> import tempfile
    >>> from postproc.apps.safetab.config import parse_safetab_config
    >>> text = '''
    ... [data]
    ... synthetic = { persons = 20000, seed = 3 }
    ... [randomness]
    ... mode = "simulation"
    ... seed = 9
    ... [[iteration]]
    ... id = "0001"
    ... name = "Total population"
    ... codes = "all"
    ... [[level]]
    ... name = "state"
    ... stability = 1
    ... moe = 10
    ... thresholds = [100, 500, 2000]
    ... '''
    >>> out = tempfile.mkdtemp() + "/safetab"
    >>> run = run_safetab(parse_safetab_config(text), out=out)
    >>> sorted(p.name for p in run.directory.iterdir())
    ['.dapp-output', 'choices', 'confidential', 'manifest.json', 'tables']
    >>> run.report_path.relative_to(run.directory).as_posix()
    'confidential/accuracy_report.json'
    >>> run.manifest["randomness"]["safe_for_release"]
    False
    """
    if not isinstance(config, SafeTabConfig):
        raise PostprocError(f"config must be a SafeTabConfig, not {type(config).__name__}")
    overwrite = _flag(config.overwrite if overwrite is None else overwrite, "overwrite")
    directory = _output_path(out if out is not None else config.output)
    _check_not_an_input(directory, config)
    with _output_lock(directory):
        _remove_interrupted_writes(directory)
        with _atomic_output(directory, overwrite) as tmp, \
                data_errors(release=config.release, show=show_confidential):
            if persons is None:
                persons = load_persons(config)
            result = safetab(persons, config)
            report = accuracy_report(result) if config.accuracy_report else None
            manifest = _write_outputs(tmp, result, report, directory)
    report_path = directory / CONFIDENTIAL_DIR / REPORT_FILE if report is not None else None
    return SafeTabRun(directory, manifest, report, result, report_path)
