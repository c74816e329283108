"""A SafeTab-style run: read the persons, tabulate the groups, measure every level, write.

:func:`safetab` is the in-memory core (persons table + config → :class:`SafeTabResult`);
:func:`run_safetab` adds reading the data (or generating synthetic data) and writing the outputs
atomically into one directory:

* ``tables/<level>.parquet`` — the released counts, long form: ``level, geography, iteration,
  table, stat, count, variance, moe`` (the DP output);
* ``choices/<level>.parquet`` — per group, the table it released and its Step-1 noisy total (also
  a DP output);
* ``manifest.json`` — randomness mode and label, configuration, per-level plan (budgets, noise,
  MOEs), the privacy accounting, the realized adaptive choices, the outputs;
* ``accuracy_report.json`` — only when enabled: errors against the truth (confidential).

Every parquet file carries the randomness provenance (release or simulation, with its label) in
its metadata.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import pyarrow as pa
import pyarrow.parquet as pq

from hierarchy.errors import HierarchyError
from hierarchy.randomness import as_randomness
from hierarchy.storage import atomic_directory, package_versions, write_json, write_parquet
from postproc.errors import PostprocError
from postproc.safetab.algorithm import LevelPlan, LevelRelease, measure_level, plan_level
from postproc.safetab.budgets import SafeTabAccounting, account_safetab
from postproc.safetab.config import SafeTabConfig
from postproc.safetab.groups import check_stability, prepare_records, tabulate_groups
from postproc.safetab.report import accuracy_report

__all__ = ["SafeTabResult", "SafeTabRun", "safetab", "load_persons", "write_safetab",
           "run_safetab"]

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

    def manifest(self) -> dict[str, Any]:
        """JSON-ready description of the run (no confidential values)."""
        levels = {}
        for name, plan in self.plans.items():
            release = self.releases[name]
            levels[name] = {**plan.to_dict(), "entities": int(release.geocodes.size),
                            "groups": int(release.choice.size),
                            "released_counts": release.rows, "choices": release.choice_counts()}
        return {
            "tool": "postproc safetab (SPEC §8: SafeTab-style adaptive tabulation)",
            "randomness": dict(self.randomness),
            "config": self.config.to_dict(),
            "records": self.records,
            "mechanism": self.config.mechanism.to_dict(),
            "gamma": str(self.config.gamma),
            "threshold_rule": "noisy total < theta1: total; [theta1, theta2): sex x Age4; "
                              "[theta2, theta3): sex x Age9; >= theta3: sex x Age23",
            "stability_check": "passed: no record belongs to more groups of a level than the "
                               "level's declared stability",
            "geography_note": "the entities of each level are those present in the data; a "
                              "release should take them from a public geography file",
            "levels": levels,
            "accounting": self.accounting.to_dict(),
            "versions": package_versions(),
        }


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
    >>> from hierarchy.synth_detailed import synthesize_detailed_1940
    >>> from hierarchy.mechanisms import get_mechanism
    >>> from postproc.safetab.config import Iteration, Level
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
    iterations = {it.id: it for it in config.iterations}
    counts = tabulate_groups(records, config.levels, iterations)
    for level in config.levels:
        check_stability(level, counts[level.name], records, iterations)
    plans = {level.name: plan_level(level, mechanism=config.mechanism, gamma=config.gamma,
                                    total_only=config.total_only(level))
             for level in config.levels}
    accounting = account_safetab({n: p.budget for n, p in plans.items()},
                                 kinds={n: p.kinds for n, p in plans.items()},
                                 delta=config.delta)
    source = as_randomness(config.rng if rng is _FROM_CONFIG else rng)
    releases = {level.name: measure_level(counts[level.name], plans[level.name], source.child(j))
                for j, level in enumerate(config.levels)}
    return SafeTabResult(config, plans, releases, accounting,
                         {n: c.observed_stability for n, c in counts.items()},
                         source.provenance(), records.size)


def load_persons(config: SafeTabConfig) -> pa.Table:
    """The persons table of a config: its parquet file (only the needed columns) or synthetic
    detailed 1940 data (:func:`hierarchy.synth_detailed.synthesize_detailed_1940`).

    Raises
    ------
    PostprocError
        If the file is missing, unreadable or lacks a needed column.
    """
    if config.synthetic is not None:
        from hierarchy.synth_detailed import synthesize_detailed_1940

        persons, seed = config.synthetic
        try:
            return synthesize_detailed_1940(persons, seed=seed).persons
        except HierarchyError as exc:
            raise PostprocError(f"{config.source} [data] synthetic: {exc}") from None
    path = config.persons
    if not path.exists():
        raise PostprocError(f"{config.source} [data] persons: {path} does not exist")
    try:
        available = pq.read_schema(path).names
    except (OSError, pa.ArrowException) as exc:
        raise PostprocError(f"{config.source} [data] persons: cannot read {path} as parquet: "
                            f"{exc}") from None
    wanted = config.columns.names() + [lv.geography for lv in config.levels]
    missing = [c for c in dict.fromkeys(wanted) if c not in available and c != "nation"]
    if missing:
        raise PostprocError(f"{config.source} [data]: {path} has no column(s) {missing}; its "
                            f"columns are {available}; map them in [data.columns] or fix the "
                            f"levels' geography")
    return pq.read_table(path, columns=[c for c in dict.fromkeys(wanted) if c in available])


@dataclass(frozen=True)
class SafeTabRun:
    """The outputs of :func:`run_safetab`.

    Parameters
    ----------
    directory : Path
    manifest : dict
    report : dict or None
        The accuracy report, when enabled.
    result : SafeTabResult
    """

    directory: Path
    manifest: Mapping[str, Any]
    report: Mapping[str, Any] | None
    result: SafeTabResult


def write_safetab(result: SafeTabResult, directory: str | Path, *, overwrite: bool = False,
                  report: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Write a run's outputs into ``directory``, atomically (all files or none).

    Parameters
    ----------
    result : SafeTabResult
    directory : str or Path
    overwrite : bool, optional
        Replace an existing non-empty directory.
    report : dict, optional
        An accuracy report to write (marked confidential).

    Returns
    -------
    dict
        The manifest written, with ``outputs``.

    Raises
    ------
    PostprocError
        If the directory exists and is not empty (without ``overwrite``) or cannot be written.
    """
    directory = Path(directory)
    manifest = result.manifest()
    outputs: dict[str, Any] = {"tables": {}, "choices": {}, "accuracy_report": None}
    try:
        with atomic_directory(directory, overwrite=overwrite) as tmp:
            for name, release in result.releases.items():
                meta = {"randomness": dict(result.randomness), "level": name,
                        "mechanism": result.config.mechanism.to_dict(),
                        "accounting": result.accounting.levels[name].to_dict(),
                        "plan": result.plans[name].to_dict()}
                file = f"{_safe(name)}.parquet"
                write_parquet(release.to_table(), tmp / "tables" / file,
                              metadata={**meta, "content": "released noisy counts"})
                write_parquet(release.choices_table(), tmp / "choices" / file,
                              metadata={**meta, "content": "table released by each group and "
                                                           "its Step-1 noisy total"})
                outputs["tables"][name] = f"tables/{file}"
                outputs["choices"][name] = f"choices/{file}"
            if report is not None:
                write_json({**report, "randomness": dict(result.randomness)},
                           tmp / "accuracy_report.json")
                outputs["accuracy_report"] = "accuracy_report.json"
            manifest["outputs"] = outputs
            write_json(manifest, tmp / "manifest.json")
    except HierarchyError as exc:
        raise PostprocError(str(exc)) from None
    except OSError as exc:
        raise PostprocError(f"cannot write {directory}: {exc}") from None
    return manifest


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def run_safetab(config: SafeTabConfig, *, out: str | Path | None = None,
                overwrite: bool | None = None, persons: pa.Table | None = None) -> SafeTabRun:
    """Read (or generate) the persons, run :func:`safetab`, write the outputs.

    Parameters
    ----------
    config : SafeTabConfig
    out : str or Path, optional
        Output directory (default ``[output] directory``).
    overwrite : bool, optional
        Default ``[output] overwrite``.
    persons : pyarrow.Table, optional
        Use this table instead of the config's data source.

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
    >>> from postproc.safetab.config import parse_safetab_config
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
    ['accuracy_report.json', 'choices', 'manifest.json', 'tables']
    >>> run.manifest["randomness"]["safe_for_release"]
    False
    """
    if persons is None:
        persons = load_persons(config)
    result = safetab(persons, config)
    report = accuracy_report(result) if config.accuracy_report else None
    directory = Path(out) if out is not None else config.output
    manifest = write_safetab(result, directory,
                             overwrite=config.overwrite if overwrite is None else overwrite,
                             report=report)
    return SafeTabRun(directory, manifest, report, result)

