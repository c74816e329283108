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
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from hierarchy.errors import ConfidentialDataError, HierarchyError
from hierarchy.histograms import Hierarchy
from hierarchy.io import check_tabulated_units, read_microdata
from hierarchy.io.storage import (
    CONFIDENTIAL_DIR,
    check_file_names,
    claim_directory,
    confidential_directory,
    lock_directory,
    read_json,
    remove_leftovers,
    write_json,
    write_parquet,
)
from hierarchy.measurement import measure
from hierarchy.noisy import NoisyHierarchy
from hierarchy.tabulation import tabulate
from invariants.compile import compile_spec
from postproc.apps.runs.checkpoint import Checkpoint, run_fingerprint, with_level_records
from postproc.apps.runs.config import RunConfig, method_options_problem
from postproc.errors import PostprocError
from postproc.gate import data_errors, source_names, write_csv
from postproc.methods.registry import method_rng, method_spec  # noqa: F401  (their old home)
from postproc.methods.topdown.options import RUN_FIELDS
from postproc.result import RESERVED_STEMS, Result, histograms_from_table, level_table

__all__ = ["run_pipeline", "validate_config", "PipelineResult", "load_truth", "accounting",
           "data_fingerprint", "check_data_fingerprint", "check_data_against_spec",
           "RESERVED_NAMES", "method_spec", "method_rng", "method_options", "run_fingerprint"]

#: File stems of a run directory that a level must not be named after.
RESERVED_NAMES = RESERVED_STEMS + ("checkpoint", "error_table", CONFIDENTIAL_DIR)
_FINGERPRINT_FILE = "data_fingerprint.json"


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
    Result('topdown'; integer; nation=1, state=49 units; 500 persons; randomness simulation (unsafe for release))
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


def data_fingerprint(truth: Hierarchy) -> dict[str, str | None]:
    """SHA-256 digests of the tabulated confidential data: ``persons`` (schema, geography and
    bottom-level histograms) and ``units`` (the units table's bottom level, or None).

    Confidential (a hash of the data lets anyone confirm a guess of it): it is kept under
    ``confidential/`` only.

    Parameters
    ----------
    truth : Hierarchy

    Returns
    -------
    dict
        ``{"persons": hex digest, "units": hex digest or None}``.

    Examples
    --------
    >>> from hierarchy.schema import E2E_1940
    >>> from hierarchy.synth import synthesize_1940
    >>> def truth(seed):
    ...     return tabulate(synthesize_1940(500, seed=seed).persons, schema=E2E_1940,
    ...                     levels=["nation", "state"])
    >>> fingerprint = data_fingerprint(truth(1))
    >>> len(fingerprint["persons"]), fingerprint["units"]
    (64, None)
    >>> data_fingerprint(truth(1)) == fingerprint, data_fingerprint(truth(2)) == fingerprint
    (True, False)
    """
    h = hashlib.sha256()
    h.update(json.dumps(truth.schema.to_dict(), sort_keys=True, default=str).encode())
    geo = truth.geography
    for li, lv in enumerate(geo.levels):
        h.update(lv.encode() + b"\0")
        h.update("\0".join(map(str, geo.geocodes[li])).encode())
        h.update(np.ascontiguousarray(geo.parents[li], dtype=np.int64).tobytes())
    h.update(np.ascontiguousarray(truth.counts[-1], dtype=np.int64).tobytes())
    units = None
    if truth.units is not None:
        units = hashlib.sha256(np.ascontiguousarray(truth.units[-1], dtype=np.int64).tobytes()
                               ).hexdigest()
    return {"persons": h.hexdigest(), "units": units}


def _write_fingerprint(directory: Path, fingerprint: dict[str, str | None]) -> None:
    conf = confidential_directory(directory, what="the input data's fingerprint, error tables")
    write_json({"data_sha256": fingerprint}, conf / _FINGERPRINT_FILE)


def check_data_fingerprint(directory: str | Path, truth: Hierarchy, *, required: bool = True
                           ) -> bool:
    """Check that ``truth`` is the data the run in ``directory`` measured.

    The persons must match, and the units (exactly with ``required``, as a resumed run needs;
    otherwise when both sides have them). Returns False if the run has no fingerprint (e.g. a published copy without ``confidential/``) and ``required`` is off.

    Parameters
    ----------
    directory : str or Path
        A ``postproc run`` output directory.
    truth : Hierarchy
        The data to check.
    required : bool
        Whether a missing fingerprint is an error.

    Returns
    -------
    bool
        True if the fingerprint matches; False if there is none and it is not required.

    Raises
    ------
    PostprocError
        If the fingerprints differ (or it is missing and ``required``).

    Examples
    --------
    Two data sets, a run on the first (Hay's least squares, which needs no spec):

    >>> import tempfile
    >>> from hierarchy.synth import write_synthetic_1940
    >>> base = Path(tempfile.mkdtemp())
    >>> for seed in (1, 2):
    ...     _ = write_synthetic_1940(base / f"data{seed}", 500, seed=seed, progress=False)
    >>> config = RunConfig.build(persons="data1/persons.parquet", levels=["nation", "state"],
    ...                          budget=1, seed=1, spec=None, method="hay", base=base)
    >>> out = run_pipeline(config, out=base / "run", progress=False, log=lambda m: None)
    >>> check_data_fingerprint(base / "run", out.truth)
    True
    >>> check_data_fingerprint(base / "data1", out.truth, required=False)   # not a run
    False
    >>> other = load_truth(replace(config, persons=base / "data2" / "persons.parquet"))
    >>> check_data_fingerprint(base / "run", other)
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: the input data differ from the data the run in .../run measured (the persons fingerprint differs): the input changed since. Use the original data, or start a new run in another --out (a new run measures the new data)
    """
    path = Path(directory) / CONFIDENTIAL_DIR / _FINGERPRINT_FILE
    if not path.exists():
        if required:
            raise PostprocError(f"{directory} has no {CONFIDENTIAL_DIR}/{_FINGERPRINT_FILE}, so "
                                "the input data cannot be checked against the ones measured; "
                                "start a new run in another --out")
        return False
    recorded = read_json(path).get("data_sha256") or {}
    now = data_fingerprint(truth)
    # a resumed run needs exactly its data; an evaluation may tabulate without the units
    changed = [k for k in ("persons", "units") if recorded.get(k) != now[k]
               and (required or k == "persons"
                    or (recorded.get(k) is not None and now[k] is not None))]
    if changed:
        raise PostprocError(f"the input data differ from the data the run in {directory} "
                            f"measured (the {' and '.join(changed)} fingerprint differs): the "
                            "input changed since. Use the original data, or start a new run in "
                            "another --out (a new run measures the new data)")
    return True


def check_data_against_spec(config: RunConfig, truth: Hierarchy, stats: Any = None,
                            compiled: Any = None) -> None:
    """Refuse data that break the spec (no release could satisfy it honestly):
    :func:`invariants.compile.check_data` on the configured spec.

    The full message names each broken constraint, how many units break it and one example
    unit; its public part (shown in release mode) names the constraints only.

    Parameters
    ----------
    config : RunConfig
    truth : Hierarchy
        The tabulated data (with units when the spec has units invariants).
    stats, compiled : optional
        The published statistics and compiled spec, when the caller has them already.

    Raises
    ------
    ConfidentialDataError
        Some unit's data contradict a constraint of the spec.

    Examples
    --------
    The E2E spec makes college dormitories (``hhgq = 5``) a structural zero; one student
    breaks it:

    >>> import pyarrow as pa
    >>> from hierarchy.synth import synthesize_1940
    >>> config = RunConfig.build(persons="persons.parquet", levels=["nation", "state"],
    ...                          budget=1, seed=1)
    >>> data = synthesize_1940(500, seed=1)
    >>> def tabulated(persons):
    ...     return tabulate(persons, schema=config.schema, levels=["nation", "state"],
    ...                     units=data.units, unit_attribute="hhgq")
    >>> check_data_against_spec(config, tabulated(data.persons))      # fine: returns None
    >>> student = data.persons.slice(0, 1)
    >>> student = student.set_column(student.schema.get_field_index("hhgq"), "hhgq",
    ...                              pa.array([5], pa.int8()))
    >>> check_data_against_spec(config, tabulated(pa.concat_tables([data.persons, student])))
    Traceback (most recent call last):
    ...
    hierarchy.errors.ConfidentialDataError: the confidential data break the spec, so no release could satisfy it (a structural zero or bound the data contradict):
      structural_zeros & hhgq_total_lb (implied by state) & hhgq_total_ub (implied by state) & structural_zeros (implied by state): 1 of 1 nation units break it, e.g. '0'
      hhgq_total_lb & hhgq_total_ub & structural_zeros: 1 of 49 state units break it, e.g. '01'
    fix the spec (or the data) and rerun
    """
    from hierarchy.measurement import published_statistics
    from invariants.compile import check_data

    if compiled is None:
        stats = published_statistics(truth, config.publish()) if stats is None else stats
        compiled = compile_spec(config.spec, config.schema, truth.geography, stats)
    check_data(config.spec, truth, compiled=compiled)


def load_truth(config: RunConfig) -> Hierarchy:
    """Read, validate and tabulate the configured microdata.

    Parameters
    ----------
    config : RunConfig
        Its ``[data]`` files, schema, levels and the spec's unit attribute.

    Returns
    -------
    Hierarchy
        The confidential truth, with the units table when ``config.units`` is set.

    Raises
    ------
    ConfidentialDataError
        A file with no records, missing columns, values outside the schema, records outside
        the blocks file's geography (the full message names the rows and values; see
        :mod:`postproc.gate` for what is shown in release mode).
    HierarchyError
        The blocks file cannot be read.

    Examples
    --------
    >>> import tempfile
    >>> from hierarchy.synth import write_synthetic_1940
    >>> base = Path(tempfile.mkdtemp())
    >>> _ = write_synthetic_1940(base, 500, seed=1, progress=False)
    >>> config = RunConfig.build(persons="persons.parquet", units="units.parquet",
    ...                          levels=["nation", "state"], budget=1, seed=1, base=base)
    >>> truth = load_truth(config)
    >>> truth.summary()
    {'nation': {'units': 1, 'persons': 500}, 'state': {'units': 49, 'persons': 500}}
    >>> truth.units is not None
    True
    """
    data = read_microdata(config.persons, schema=config.schema, levels=config.levels,
                          columns=config.columns, values=config.values, units=config.units,
                          unit_attribute=config.spec.unit_attribute, check_units=False)
    geography = config.read_geography()      # every block of [data] blocks, empty ones too
    try:
        truth = tabulate(data.persons, schema=config.schema, levels=config.levels,
                         units=data.units, geography=geography,
                         unit_attribute=config.spec.unit_attribute if data.units is not None
                         else None)
    except HierarchyError as exc:
        if geography is None:
            raise
        note = "every person's and unit's geocodes must be listed there"
        if isinstance(exc, ConfidentialDataError):
            raise exc.with_context(
                detail_suffix=f" (the geography comes from the blocks file {config.blocks}: "
                              f"{note})",
                public_suffix=f" (the geography comes from [data] blocks: {note})") from None
        raise HierarchyError(f"{exc} (the geography comes from the blocks file "
                             f"{config.blocks}: {note})") from None
    check_tabulated_units(truth, data)
    return truth


def accounting(config: RunConfig) -> dict[str, Any]:
    """Privacy accounting of the configured measurements, per level and query and in total.

    Reported in every notion (pure ε where it applies, ρ, RDP and zCDP conversions to
    (ε, δ)); written to the run's manifest. An accounting error is reported in the result
    (``{"error": message}``), never raised: it must not block a run.

    Parameters
    ----------
    config : RunConfig

    Returns
    -------
    dict
        ``notion``, ``mechanism``, ``delta``, ``composition``, ``levels`` (per level and
        query) and ``total``.

    Examples
    --------
    >>> config = RunConfig.build(persons="persons.parquet", levels=["nation", "state"],
    ...                          budget=1, seed=1)
    >>> report = accounting(config)
    >>> report["notion"], report["total"]["budget"], report["total"]["loss"]["pure_epsilon"]
    ('pure', '1', 1.0)
    >>> {q: v["budget"] for q, v in report["levels"]["state"]["queries"].items()}
    {'detailed': '1/20', 'hhgq': '9/80', 'va_hisp_race': '27/80'}
    """
    from hierarchy.accounting import account_levels

    b = config.budget
    budgets = {lv: {q: b.query_budget(lv, q) for q in b.queries(lv)} for lv in b.levels}
    sens = {q.name: int(round(b.sensitivity(q)[0])) for q in config.workload}
    notion = "pure" if b.kind == "pure" else "zcdp"
    try:
        out = account_levels(budgets, notion=notion, sensitivity=sens).to_dict()
    except PostprocError as exc:  # accounting is reported, never blocks a run
        return {"error": str(exc)}
    out["mechanism_configured"] = config.mechanism.name
    if out.get("mechanism") != config.mechanism.name:
        # Pure-DP ε and zCDP ρ compose the same for every mechanism of the notion; the RDP curve
        # is the assumed mechanism's own, so it does not describe the configured one.
        out["note"] = (f"rdp_epsilon values are for the {out.get('mechanism')} mechanism's RDP "
                       f"curve; this run used {config.mechanism.name}, so they are omitted "
                       "(pure_epsilon, rho and the zCDP conversions hold)")
        for entry in _loss_entries(out):
            entry["rdp_epsilon"] = None
    return out


def _loss_entries(accounting_dict: dict[str, Any]):
    """Every ``loss`` mapping inside an accounting report (per query, per level, total)."""
    stack = [accounting_dict]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if isinstance(node.get("loss"), dict):
                yield node["loss"]
            stack.extend(v for k, v in node.items() if k != "loss")


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
    spec at state: 9 constraint rows from tot, total_ge_households, hhgq_total_lb, hhgq_total_ub, structural_zeros; 8,184 zero cells over 49 units
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
    from hierarchy.measurement import published_statistics

    stats = published_statistics(truth, config.publish())
    compiled = compile_spec(config.spec, config.schema, truth.geography, stats)
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
    Result('rake'; real; nation=1, state=49, county=..., enum_dist=... units; 2,000.0 persons; randomness simulation (unsafe for release))
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
    timings: dict[str, float] = {}
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
    if config.randomness_mode == "simulation":
        log("SIMULATION MODE: seeded randomness, reproducible by anyone with the seed — outputs "
            "are labelled NOT SAFE FOR RELEASE")
    t = time.perf_counter()
    truth = load_truth(config)
    timings["read_tabulate"] = time.perf_counter() - t
    t = time.perf_counter()
    check_data_against_spec(config, truth)
    timings["check_spec"] = time.perf_counter() - t
    noisy_dir = directory / "noisy"
    t = time.perf_counter()
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
    else:
        # the fingerprint goes first: measurements on disk always have one to be checked against
        _write_fingerprint(directory, data_fingerprint(truth))
        noisy = measure(truth, config.workload, config.budget, config.mechanism, config.rng,
                        spec=config.spec)
        # and the checkpoint: saved measurements always have the settings they were made with
        checkpoint = Checkpoint.new(checkpoint_path, config, error_table=wants_errors)
        checkpoint.save()
        noisy.save(noisy_dir)
    timings["measure"] = time.perf_counter() - t
    finished = checkpoint.finished
    levelwise = _registered(config.method).levelwise
    if levelwise:
        result, completed = _run_levelwise(config, directory, noisy, checkpoint, progress, log,
                                           timings)
        written = [lv for lv in noisy.levels if lv not in completed]
    else:
        result = _run_method(config, directory, noisy, finished, log, timings, progress)
        written = [] if finished else list(noisy.levels)
        completed = list(noisy.levels) if finished else []
    t = time.perf_counter()
    errors = None
    if wants_errors:
        from postproc.evaluation.tables import level_error_table

        errors = level_error_table(truth, noisy, result.histograms, noisy.workload,
                                   method=result.method)
        conf = confidential_directory(directory, what="the input data's fingerprint, errors "
                                                      "against the confidential data")
        write_csv(errors, conf / "error_table.csv")
    if not levelwise and finished and not checkpoint.changed:
        timings["write"] = time.perf_counter() - t     # complete outputs are left as they are
        return PipelineResult(result, noisy, truth, directory, timings, errors)
    release_files = ["manifest.json", "checkpoint.json", "geography.parquet"] + (
        ["node_stats.parquet"] if len(result.node_stats) or levelwise else []) + [
        "noisy/"] + [f"{lv}.parquet" for lv in noisy.levels] + (
        ["microdata.parquet"] if config.microdata else [])
    entry = _registered(config.method)
    extra = {"config": config.to_dict(), "accounting": accounting(config),
             "postprocess": {"method": config.method,
                             "options": _json_options(config.method_options),
                             "promises": list(entry.promises),
                             "constrained": method_spec(config.method, config.spec) is not None,
                             "randomness": (method_rng(config.rng, config.method).provenance()
                                            if entry.randomized else None)},
             "pipeline_timings": timings, "resumed_levels": completed,
             "postprocess_changes": checkpoint.changes,
             "release": {"release_files": release_files,
                         "not_for_release": f"{CONFIDENTIAL_DIR}/ (computed from the "
                                            "confidential data: never publish it)"}}
    result.write(directory, levels=written, extra_manifest=extra)
    if config.microdata:
        meta = {"randomness_label": noisy.provenance.get("randomness", {}).get("label"),
                "schema": config.schema.to_dict()}
        write_parquet(result.to_microdata(), directory / "microdata.parquet", metadata=meta)
    # what an earlier post-processing of these measurements wrote and this one does not
    _remove_outputs(directory, [name for name in ("node_stats.parquet", "microdata.parquet")
                                if name not in release_files])
    checkpoint.completed, checkpoint.finished = list(noisy.levels), True
    checkpoint.save()
    timings["write"] = time.perf_counter() - t
    return PipelineResult(result, noisy, truth, directory, timings, errors)


def _remove_outputs(directory: Path, names: list[str]) -> None:
    """Remove the named outputs of this toolkit from the run ``directory`` (it owns them)."""
    for name in names:
        (directory / name).unlink(missing_ok=True)


def _registered(method: str):
    from postproc.methods import get

    return get(method)


def _json_options(options: Any) -> dict[str, Any]:
    """Options as the manifest records them (JSON values; anything else by its repr)."""
    return json.loads(json.dumps(dict(options), default=repr))


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

    completed = _levels_to_reuse(config, directory, noisy, checkpoint, log)
    hists = completed["hists"]
    earlier_stats = completed["stats"]
    completed = completed["levels"]
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


def _levels_to_reuse(config: RunConfig, directory: Path, noisy: NoisyHierarchy,
                     checkpoint: Checkpoint, log: Callable[[str], None]) -> dict[str, Any]:
    """The checkpointed levels a resumed TopDown takes as done — each with its level file, its
    provenance in the checkpoint and its rows of ``node_stats.parquet``, up to the first level
    missing one of them — with their histograms and node statistics."""
    hists: list[np.ndarray] = []
    for lv in checkpoint.completed:
        path = directory / f"{lv}.parquet"
        if lv not in checkpoint.levels:
            log(f"resume: the checkpoint holds no provenance of level {lv!r} (written by an "
                f"earlier version, or edited); solving again from level {lv} (the same "
                "measurements give the same result)")
            break
        try:
            table = pq.read_table(path)
            hists.append(histograms_from_table(table, config.schema, noisy.geography, lv,
                                               source=str(path)))
        except (OSError, pa.ArrowException, HierarchyError, PostprocError) as exc:
            log(f"resume: {path.name} cannot be read ({type(exc).__name__}); recomputing from "
                f"level {lv} (the same measurements give the same result)")
            break
    levels = list(checkpoint.completed[:len(hists)])
    stats = pd.DataFrame()
    stats_path = directory / "node_stats.parquet"
    if levels:
        try:    # solver statistics of the levels done before the interruption
            stats = pq.read_table(stats_path).to_pandas()
        except (OSError, pa.ArrowException) as exc:
            log(f"resume: {stats_path.name} cannot be read ({type(exc).__name__}); solving "
                "again from the first level (the same measurements give the same result)")
            levels = []
    geo = noisy.geography
    for li, lv in enumerate(levels):
        parents = 1 if li == 0 else geo.n_units(li - 1)
        if "level" not in stats or int((stats["level"] == lv).sum()) != parents:
            log(f"resume: {stats_path.name} lacks the solver statistics of level {lv!r}; "
                f"solving again from level {lv} (the same measurements give the same result)")
            levels = levels[:li]
            break
    if len(stats):
        stats = stats[stats["level"].isin(levels)].reset_index(drop=True)
    return {"levels": levels, "hists": hists[:len(levels)], "stats": stats}


def _join_stats(earlier: pd.DataFrame, new: pd.DataFrame) -> pd.DataFrame:
    """Node statistics of the levels done before a resume followed by this run's."""
    frames = [f for f in (earlier, new) if len(f)]
    return pd.concat(frames, ignore_index=True) if len(frames) > 1 else (frames or [new])[0]


def _executor(config: RunConfig):
    from postproc.infra.executors import get_executor

    return get_executor(config.topdown.executor, workers=config.topdown.workers,
                        scheduler=config.scheduler)
