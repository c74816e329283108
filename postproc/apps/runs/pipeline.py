"""The whole path of ``postproc run``: read, tabulate, measure, post-process, write — resumable.

The post-processor is any registered one (:mod:`postproc.methods`): ``config.method`` with
``config.method_options`` (``[postprocess]`` in the config, ``--method`` on the command line).
TopDown takes its options from ``[solver]`` and checkpoints after every level; any other method
runs in one step on the same measurements and writes the same layout.

Output directory::

    noisy/                 the NoisyHierarchy (measured once; reused on --resume)
    <level>.parquet        post-processed histograms, long form (TopDown: written as each level
                           finishes); integer counts, or real-valued for methods that make them
    checkpoint.json        the settings the data were measured with, the post-processing
                           settings, the levels completed so far with each one's provenance
                           (:mod:`postproc.apps.runs.checkpoint`)
    node_stats.parquet     per-parent solver (or sampler) statistics, if the method has any
    manifest.json          config, the method and its options, versions, randomness mode,
                           accounting, solver statistics, timings, failsafe reports, the list of
                           release files
    microdata.parquet      synthetic microdata from the bottom level (if asked for)
    confidential/          NOT FOR PUBLICATION: the input data's fingerprint (checked on --resume
                           and by ``postproc evaluate``) and, when asked for (always in simulation
                           mode), ``error_table.csv``: errors against the confidential data

The release gate: in release mode nothing computed from the confidential data — errors, exact
counts that are not published invariants, input paths — is written outside ``confidential/`` or
printed. The run measures the data once: the directory is locked for the run's duration (a
second run into it fails at once), and a resumed run reuses ``noisy/`` after checking that the
input data are the ones measured.

Every file is written atomically; the checkpoint is updated only after its level's parquet is in
place, so an interrupted run resumes from the last complete level and, because measurements are
reloaded and every solver is deterministic, finishes with identical results. The node statistics
are saved with each level, and the level's provenance (the queries the failsafe kept, its
reports, the seconds) in the checkpoint, so a resumed run's manifest is an uninterrupted run's
but for timings and the records of the resume; a level missing any of them is solved again.
Leftovers of an interrupted write are removed when the run resumes. Another method is not
checkpointed level by level: a resumed run whose outputs are complete is left as it is, and an
incomplete one runs the method again on the saved measurements (a randomized method draws from
the stream :func:`method_rng` derives from the seed, so a simulation gives the same result).

A resume may change the post-processing (method, options, solver settings, spec constraints)
and the output choices, never the measurement: the saved measurements are post-processed again
(no noise drawn, no budget spent) and the manifest's ``postprocess_changes`` records the old
and new settings; a changed measurement setting is refused, naming it
(:class:`~postproc.apps.runs.checkpoint.Checkpoint`).

The input data are read, checked and fingerprinted by :mod:`postproc.apps.runs.inputs`, the
outputs and the manifest's records written by :mod:`postproc.apps.runs.outputs`; this module
measures and post-processes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd
import pyarrow as pa

from hierarchy.errors import HierarchyError
from hierarchy.histograms import Hierarchy
from hierarchy.io.storage import (
    CONFIDENTIAL_DIR,
    check_file_names,
    claim_directory,
    confidential_directory,
    lock_directory,
    remove_leftovers,
    write_parquet,
)
from hierarchy.measurement import measure
from hierarchy.noisy import NoisyHierarchy
from invariants.compile import compile_spec
from postproc.apps.runs.checkpoint import (
    Checkpoint,
    _join_stats,
    _levels_to_reuse,
    run_fingerprint,
    with_level_records,
)
from postproc.apps.runs.config import RunConfig, method_options_problem
from postproc.apps.runs.inputs import (  # noqa: F401  (their old home)
    _FINGERPRINT_FILE,
    _write_fingerprint,
    check_data_against_spec,
    check_data_fingerprint,
    data_fingerprint,
    load_truth,
)
from postproc.apps.runs.outputs import (  # noqa: F401  (accounting: its old home)
    _json_options,
    _loss_entries,
    _PostProcessed,
    _registered,
    _remove_outputs,
    _write_outputs,
    accounting,
)
from postproc.errors import PostprocError
from postproc.gate import data_errors, source_names, write_csv
from postproc.methods.registry import method_rng, method_spec  # noqa: F401  (their old home)
from postproc.methods.topdown.options import RUN_FIELDS
from postproc.result import RESERVED_STEMS, Result, level_table

__all__ = ["run_pipeline", "validate_config", "PipelineResult", "load_truth", "accounting",
           "data_fingerprint", "check_data_fingerprint", "check_data_against_spec",
           "RESERVED_NAMES", "method_spec", "method_rng", "method_options", "run_fingerprint"]

#: File stems of a run directory that a level must not be named after.
RESERVED_NAMES = RESERVED_STEMS + ("checkpoint", "error_table", CONFIDENTIAL_DIR)


@dataclass(frozen=True, eq=False)
class PipelineResult:
    """What :func:`run_pipeline` returns: the result, its measurements and the truth.

    Parameters
    ----------
    result : Result
        The post-processed histograms of every level.
    noisy : NoisyHierarchy
        The measurements (saved in ``directory/noisy``).
    truth : Hierarchy
        The tabulated confidential data (in memory only).
    directory : Path
        The run's output directory.
    timings : dict of str to float
        Seconds per step.
    error_table : pandas.DataFrame or None
        Errors against the confidential data, when asked for (always in simulation mode);
        saved in ``directory/confidential/error_table.csv``.

    Examples
    --------
    >>> import tempfile
    >>> from hierarchy.synth import write_synthetic_1940
    >>> base = Path(tempfile.mkdtemp())
    >>> _ = write_synthetic_1940(base / "data", 500, seed=1, progress=False)
    >>> config = RunConfig.build(persons="data/persons.parquet", units="data/units.parquet",
    ...                          levels=["nation", "state"], budget=1, seed=1, base=base)
    >>> out = run_pipeline(config, out=base / "run", progress=False, log=lambda m: None)
    >>> out.result
    Result('topdown'; integer; nation=1, state=49 units; 500 persons; randomness simulation (unsafe
    for release))
    >>> out.release, sorted(out.timings)
    (False, ['check_spec', 'measure', 'read_tabulate', 'topdown', 'write'])
    >>> columns = ["level", "query", "measured_mae", "topdown_mae"]
    >>> print(out.error_table[columns].to_string(index=False))
     level        query  measured_mae  topdown_mae
    nation        total       26.0          0.0
    nation     detailed       29.0          0.0
    nation         hhgq        6.5          0.0
    nation va_hisp_race        3.0          0.0
     state        total       24.0          0.0
     state     detailed       28.0          0.0
     state         hhgq       13.0          0.0
     state va_hisp_race        4.0          0.0
    """

    result: Result
    noisy: NoisyHierarchy
    truth: Hierarchy
    directory: Path
    timings: dict[str, float]
    error_table: pd.DataFrame | None = None

    @property
    def release(self) -> bool:
        """Whether the run was in release mode (its outputs may be published)."""
        return bool(self.noisy.safe_for_release)


def method_options(config: RunConfig, method: str) -> dict[str, Any]:
    """The options a configuration gives the registered post-processor ``method``.

    TopDown takes its ``[solver]`` settings (chain, executor, workers, failsafe, passes); the
    configured method (``[postprocess] method``) takes ``[postprocess.options]``; any other
    method runs with its defaults.

    Parameters
    ----------
    config : RunConfig
    method : str

    Returns
    -------
    dict

    Examples
    --------
    >>> config = RunConfig.build(persons="persons.parquet", levels=["nation", "state"],
    ...                          budget=1.0, seed=1, method="sampling",
    ...                          method_options={"sweeps": 20})
    >>> method_options(config, "sampling"), method_options(config, "hay")
    ({'sweeps': 20}, {})
    >>> sorted(method_options(config, "topdown"))
    ['executor', 'failsafe', 'failsafe_keep', 'passes', 'round_passes', 'solver', 'workers']
    """
    options: dict[str, Any] = {}
    if method == "topdown":
        options = {name: getattr(config.topdown, name) for name in RUN_FIELDS - {"progress"}}
    if method == config.method:
        options.update(config.method_options)
    return options


def validate_config(config: RunConfig, *, log: Callable[[str], None] = print,
                    show_confidential: bool = False) -> Hierarchy:
    """Check a configuration end to end without measuring: data, geography, spec and its data.

    Returns the tabulated truth (kept in memory only). ``postproc run --check`` prints what it
    logs; in release mode the persons count is logged only if the spec publishes it.

    Parameters
    ----------
    config : RunConfig
    log : callable
        Receives one line per step.
    show_confidential : bool
        In release mode, let the message of data that fail a check state the counts, rows and
        values it found (``--show-confidential``); otherwise it names the column or
        constraint and the rule only, and says how to see the rest (:mod:`postproc.gate`).

    Returns
    -------
    Hierarchy

    Raises
    ------
    PostprocError
        The budget does not cover the workload, or the data fail a check (in release mode the
        message names the column or constraint and the rule only).

    Examples
    --------
    A release-mode configuration is checked without drawing any noise; the national total is
    logged because the spec publishes it (``tot`` at the nation):

    >>> import tempfile
    >>> from hierarchy.synth import write_synthetic_1940
    >>> data = Path(tempfile.mkdtemp()) / "data"
    >>> _ = write_synthetic_1940(data, 500, seed=1, progress=False)
    >>> config = RunConfig.build(persons=data / "persons.parquet", units=data / "units.parquet",
    ...                          levels=["nation", "state"], budget=1, mode="release")
    >>> truth = validate_config(config)
    data: 500 persons; nation 1, state 49
    spec at nation: 9 constraint rows from tot, ...; 120 zero cells over 1 units
    spec at state: 9 constraint rows from tot, total_ge_households, hhgq_total_lb, hhgq_total_ub,
    structural_zeros; 8,184 zero cells over 49 units
    configuration valid (... s)
    """
    with data_errors(release=config.release, show=show_confidential,
                     names=source_names(config)):
        return _validate(config, log)


def _validate(config: RunConfig, log: Callable[[str], None]) -> Hierarchy:
    t0 = time.perf_counter()
    truth = load_truth(config)
    persons = (f"{truth.summary()[config.levels[0]]['persons']:,} persons; "
               if not config.release or config.levels[0] in config.publish().get("tot", [])
               else "")
    log(f"data: {persons}" + ", ".join(f"{lv} {truth.geography.n_units(lv):,}"
                                       for lv in config.levels))
    config.budget.check_against(config.workload, config.levels)
    compiled = compile_spec(config.spec, config.schema, truth.geography,
                            config.published(truth))
    for lv in config.levels:
        lc = compiled[lv]
        log(f"spec at {lv}: {lc.n_rows} constraint rows from "
            f"{', '.join(lc.constraint_names()) or 'nothing'}; "
            f"{lc.n_zero_cells:,} zero cells over {lc.n_units:,} units")
    check_data_against_spec(config, truth, compiled=compiled)
    log(f"configuration valid ({time.perf_counter() - t0:.1f} s)")
    return truth


def run_pipeline(config: RunConfig, *, out: Path | str | None = None, resume: bool = False,
                 progress: bool = True, log: Callable[[str], None] = print,
                 error_table: bool | None = None,
                 show_confidential: bool = False) -> PipelineResult:
    """Run the configured job, writing outputs (and checkpoints) to ``out``.

    Parameters
    ----------
    config : RunConfig
        ``config.method`` names the post-processor (any registered one) and
        ``config.method_options`` its options.
    out : path, optional
        The output directory (default ``config.output``); created, or resumed with ``resume``.
    resume : bool
        Finish an interrupted run in ``out``: its measurements are reused (the data are not
        measured again) after checking that the input data are the ones measured.
    progress : bool
        Progress bars.
    log : callable
        Receives one line per step; never anything confidential in release mode.
    error_table : bool, optional
        Compute errors against the confidential data into ``out/confidential/error_table.csv``.
        Default ``config.wants_error_table`` (on in simulation mode, off in release mode).
    show_confidential : bool
        In release mode, let the message of data that fail a check state the counts, rows and
        values it found; otherwise they go to ``out/confidential/validation.txt`` and the
        message names the column or constraint and the rule only (:mod:`postproc.gate`).

    Returns
    -------
    PipelineResult

    Raises
    ------
    PostprocError
        If ``out`` already holds a run and ``resume`` is off (nothing is overwritten), was not
        written by this toolkit, is in use by another run, or belongs to a different
        configuration or other input data; if the data break the spec; an unknown method or
        option; microdata asked of a method whose counts are not nonnegative integers.

    Examples
    --------
    >>> import tempfile
    >>> from dataclasses import replace
    >>> from postproc.apps.runs.demo import run_demo
    >>> demo = run_demo(tempfile.mkdtemp() + "/demo", persons=2_000, progress=False,
    ...                 log=lambda message: None)
    >>> from postproc.apps.runs.config import load_config
    >>> config = replace(load_config(demo.directory.parent / "config.toml"), method="rake")
    >>> out = run_pipeline(config, out=demo.directory.parent / "rake", log=lambda m: None)
    >>> out.result
    Result('rake'; real; nation=1, state=49, county=..., enum_dist=... units; 2,000.0 persons;
    randomness simulation (unsafe for release))
    """
    from postproc.methods import get

    directory = Path(out) if out is not None else config.output
    try:
        check_file_names(config.levels, what="level", reserved=RESERVED_NAMES)
    except HierarchyError as exc:
        raise PostprocError(f"{config.source}: {exc} in [geography] levels") from None
    entry = get(config.method)
    problem = method_options_problem(config.method, config.method_options,
                                     levels=config.levels, workload=config.workload)
    if problem:
        raise PostprocError(f"{config.source}: {problem}")
    if config.microdata and not (entry.integer and entry.nonnegative):
        raise PostprocError(f"{config.source}: [output] microdata = true needs nonnegative "
                            f"integer counts, which {config.method} does not promise; set "
                            "microdata = false or use topdown or sampling")
    wants_errors = config.wants_error_table if error_table is None else bool(error_table)
    try:
        claim_directory(directory, made_by="postproc run", reuse=resume,
                        how_to_reuse="use --resume to finish an interrupted run there")
        with lock_directory(directory, what="postproc run") as locked, \
                data_errors(release=config.release, show=show_confidential, directory=locked,
                            names=source_names(config)):
            return _run_locked(config, locked, resume, progress, log, wants_errors)
    except HierarchyError as exc:
        raise PostprocError(str(exc)) from None


def _run_locked(config: RunConfig, directory: Path, resume: bool, progress: bool,
                log: Callable[[str], None], wants_errors: bool) -> PipelineResult:
    """:func:`run_pipeline` in ``directory``, claimed and locked: the checkpoint, the data read
    and checked against the spec, measured once, post-processed, the error table, the outputs."""
    timings: dict[str, float] = {}
    checkpoint = _checkpoint(config, directory, resume, wants_errors, log)
    if config.randomness_mode == "simulation":
        log("SIMULATION MODE: seeded randomness, reproducible by anyone with the seed — outputs "
            "are labelled NOT SAFE FOR RELEASE")
    t = time.perf_counter()
    truth = load_truth(config)
    timings["read_tabulate"] = time.perf_counter() - t
    t = time.perf_counter()
    check_data_against_spec(config, truth)
    timings["check_spec"] = time.perf_counter() - t
    t = time.perf_counter()
    noisy, checkpoint = _measurements(config, directory, truth, checkpoint, resume,
                                      wants_errors, log)
    timings["measure"] = time.perf_counter() - t
    finished = checkpoint.finished
    done = _postprocess(config, directory, noisy, checkpoint, finished, progress, log, timings)
    t = time.perf_counter()
    errors = (_error_table(config, directory, truth, noisy, done.result) if wants_errors
              else None)
    complete = not done.levelwise and finished and not checkpoint.changed
    if not complete:            # a finished run's complete outputs are left as they are
        _write_outputs(config, directory, noisy, done, checkpoint, timings)
    timings["write"] = time.perf_counter() - t
    return PipelineResult(done.result, noisy, truth, directory, timings, errors)


def _checkpoint(config: RunConfig, directory: Path, resume: bool, wants_errors: bool,
                log: Callable[[str], None]) -> Checkpoint:
    """A new run's checkpoint; or, resuming, the saved one (after checking that the
    measurement settings did not change) with the leftovers of an interrupted write removed."""
    checkpoint_path = directory / "checkpoint.json"
    checkpoint = Checkpoint.new(checkpoint_path, config, error_table=wants_errors)
    if resume:
        removed = remove_leftovers(directory)
        if removed:
            log(f"resume: removed {len(removed)} leftover(s) of an interrupted write: "
                + ", ".join(str(p.relative_to(directory)) for p in removed))
        checkpoint = Checkpoint.resumed(checkpoint_path, config, error_table=wants_errors,
                                        log=log)
        if checkpoint.finished and not checkpoint.changed:
            log(f"{directory}: run already finished; nothing to resume")
    return checkpoint


def _measurements(config: RunConfig, directory: Path, truth: Hierarchy, checkpoint: Checkpoint,
                  resume: bool, wants_errors: bool, log: Callable[[str], None]
                  ) -> tuple[NoisyHierarchy, Checkpoint]:
    """The measurements: a resumed run's, loaded from ``noisy/`` once the data are checked
    against the fingerprint of the data measured; else measured now and saved, after the
    fingerprint and a new checkpoint. Returns them and the checkpoint the run continues
    with."""
    noisy_dir = directory / "noisy"
    if resume and (noisy_dir / "metadata.json").exists():
        check_data_fingerprint(directory, truth)
        noisy = NoisyHierarchy.load(noisy_dir)
        log(f"resume: loaded measurements from {noisy_dir} (the data are not measured again)")
        if checkpoint.changed and not checkpoint.completed:
            # post-processed again: the old results' summaries go, and the checkpoint says so
            # before any level file is replaced (a level file is never taken for another's)
            _remove_outputs(directory, ["manifest.json", "node_stats.parquet",
                                        "microdata.parquet",
                                        f"{CONFIDENTIAL_DIR}/error_table.csv"])
            checkpoint.save()
        return noisy, checkpoint
    # the fingerprint goes first: measurements on disk always have one to be checked against
    _write_fingerprint(directory, data_fingerprint(truth))
    # accounted here: a run measures once, under the output directory's lock, and a resume
    # reuses the saved measurements (docs/release.md, "One run, one output")
    noisy = measure(truth, config.workload, config.budget, config.mechanism, config.rng,
                    spec=config.spec, accounted_elsewhere=True)
    # and the checkpoint: saved measurements always have the settings they were made with
    checkpoint = Checkpoint.new(directory / "checkpoint.json", config, error_table=wants_errors)
    checkpoint.save()
    noisy.save(noisy_dir)
    return noisy, checkpoint


def _postprocess(config: RunConfig, directory: Path, noisy: NoisyHierarchy,
                 checkpoint: Checkpoint, finished: bool, progress: bool,
                 log: Callable[[str], None], timings: dict[str, float]) -> _PostProcessed:
    """The configured method on the measurements: level by level with a checkpoint after each
    (TopDown), or in one step (read back instead when a finished run's outputs are
    complete)."""
    if _registered(config.method).levelwise:
        result, completed = _run_levelwise(config, directory, noisy, checkpoint, progress, log,
                                           timings)
        return _PostProcessed(result, [lv for lv in noisy.levels if lv not in completed],
                              completed, True)
    result = _run_method(config, directory, noisy, finished, log, timings, progress)
    return _PostProcessed(result, [] if finished else list(noisy.levels),
                          list(noisy.levels) if finished else [], False)


def _error_table(config: RunConfig, directory: Path, truth: Hierarchy, noisy: NoisyHierarchy,
                 result: Result) -> pd.DataFrame:
    """Errors against the confidential data, per level and query, written under
    ``confidential/``."""
    from postproc.evaluation.tables import level_error_table

    errors = level_error_table(truth, noisy, result.histograms, noisy.workload,
                               method=result.method)
    conf = confidential_directory(directory, what="the input data's fingerprint, errors "
                                                  "against the confidential data")
    write_csv(errors, conf / "error_table.csv")
    return errors


def _run_method(config: RunConfig, directory: Path, noisy: NoisyHierarchy, finished: bool,
                log: Callable[[str], None], timings: dict[str, float],
                progress: bool = False) -> Result:
    """A registered post-processor other than TopDown, in one step; a finished run's outputs
    are read back instead (when they are complete). A method with a ``progress`` option shows
    its progress bars when the run does."""
    from postproc.methods import get, postprocess

    if finished:
        try:
            result = Result.read(directory)
            if result.levels == noisy.levels and result.method == config.method:
                return result
        except (OSError, pa.ArrowException, HierarchyError, PostprocError) as exc:
            log(f"resume: the outputs cannot be read ({type(exc).__name__}); running "
                f"{config.method} again on the saved measurements")
        else:
            log(f"resume: the outputs are incomplete; running {config.method} again")
    spec = method_spec(config.method, config.spec)
    if spec is None and (config.spec.invariants or config.spec.constraints):
        log(f"{config.method} does not keep invariants or constraints: it runs without the "
            "spec (unconstrained)")
    t = time.perf_counter()
    options = dict(config.method_options)
    if "progress" in get(config.method).options():
        options["progress"] = progress
    result = postprocess(noisy, config.method, spec, rng=method_rng(config.rng, config.method),
                         **options)
    timings["postprocess"] = time.perf_counter() - t
    return result


def _run_levelwise(config: RunConfig, directory: Path, noisy: NoisyHierarchy,
                   checkpoint: Checkpoint, progress: bool, log: Callable[[str], None],
                   timings: dict[str, float]) -> tuple[Result, list[str]]:
    """A level-wise method (TopDown) through ``postprocess``, with a checkpoint after each
    level (:class:`~postproc.methods.registry.LevelCheckpoint`); resumes after the last one whose
    level file, node statistics and provenance are all there (a level missing any of them is
    solved again: the same measurements give the same result)."""
    from postproc.methods import get, postprocess
    from postproc.methods.registry import LevelCheckpoint

    reused = _levels_to_reuse(config, directory, noisy, checkpoint, log)
    hists, earlier_stats, completed = reused.hists, reused.stats, reused.levels
    records = {lv: checkpoint.levels[lv] for lv in completed}
    reports = [r for lv in completed for r in records[lv].get("failsafe_reports", [])]
    checkpoint.completed, checkpoint.levels = list(completed), dict(records)
    if completed:
        log(f"resume: levels {completed} already done")
    stats_path = directory / "node_stats.parquet"
    label = noisy.provenance.get("randomness", {}).get("label")
    meta = {"randomness_label": label, "schema": config.schema.to_dict()}

    def on_level(li: int, hist: np.ndarray, partial: Result) -> None:
        lv = noisy.levels[li]
        write_parquet(level_table(config.schema, noisy.geography, lv, hist),
                      directory / f"{lv}.parquet", metadata=meta)
        stats = _join_stats(earlier_stats, partial.node_stats)
        if len(stats):
            write_parquet(pa.Table.from_pandas(stats, preserve_index=False), stats_path,
                          metadata=meta)
        checkpoint.level_done(lv, noisy.levels[:li + 1], partial.provenance)

    t = time.perf_counter()
    with _executor(config) as ex:
        options = {**method_options(config, config.method), "executor": ex}
        if "progress" in get(config.method).options():
            options["progress"] = progress
        result = postprocess(noisy, config.method, method_spec(config.method, config.spec),
                             rng=method_rng(config.rng, config.method),
                             checkpoint=LevelCheckpoint(hists, on_level, reports),
                             **options)
    timings[config.method] = time.perf_counter() - t
    result = replace(result, node_stats=_join_stats(earlier_stats, result.node_stats),
                     provenance=with_level_records(result.provenance, records, noisy.levels))
    return result, completed


def _executor(config: RunConfig):
    from postproc.infra.executors import get_executor

    return get_executor(config.topdown.executor, workers=config.topdown.workers,
                        scheduler=config.scheduler)
