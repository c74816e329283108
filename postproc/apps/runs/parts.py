"""TopDown in parts: a geography too large to hold dense, run one part of it at a time.

A level of the 2020 geography held as dense units × cells arrays does not fit in memory: 8
million blocks × 2,016 cells are 130 GB for the truth alone, as much again for TopDown's
output and more for the noisy answers. :func:`run_in_parts` never holds a level below the
*split level* (``tract`` by default) whole. It cuts the split level into parts, runs of
consecutive units with at most ``part_blocks`` bottom-level units below them (cut from the
public geography, never from the data), and runs:

1. **Tabulate, part by part.** Each part's persons and units are read from the parquet files
   (in one pass when their rows come part by part, as a file sorted by geography does; else
   with a filter on the part's split-level geocodes) and tabulated on the part's geography,
   its bottom level sparse (:func:`~hierarchy.tabulation.tabulate_leaf`), by this process:
   one part's rows in memory, never the files. (Sending the rows to the executor's workers
   instead cost more than it saved once the tabulation was sparse:
   ``benchmarks/bench_tabulate_parts.py``.) The split level's histograms and the published
   statistics of the levels below (``gqhh`` per block: units × 8) are kept, and each part's
   bottom-level counts are saved (its nonzero cells) under ``confidential/parts/`` until the
   run ends.
2. **The top**, from the root to the split level: measured (one stream per level and query,
   as :func:`hierarchy.measurement.measure` draws) and solved by :func:`topdown` as one
   hierarchy. The spec is compiled on the *whole* geography, so the rows the levels below
   imply at the top (``imply_upward``) are the same as in a run of the whole.
3. **Each part**, from its saved counts: its levels below the split are measured from streams
   keyed by their split-level ancestor (:func:`hierarchy.measurement.measure_level`) and solved
   by :func:`topdown` starting under the split level's rounded histograms. Its histograms are
   written to ``parts/`` at once; a resumed run skips the parts already written.
4. The parts' files are joined into one ``<level>.parquet`` per level.

**Only the answers that can matter are drawn** (unless ``all_answers``): at every level, the
answers that count an active cell of their unit (:func:`invariants.active.find_active_cells`,
from the spec and the published invariants); the others are known to be 0, and TopDown's
output does not depend on them (``docs/scale2020.md``). At the block level that is about a
quarter of the answers.

**Same results as the whole.** Every node problem of a run in parts is the one a run of the
whole geography solves, with the same noisy answers — when the whole is measured with
``measure(..., key_level=split, active=…)`` — so the histograms are identical, whatever
``part_blocks`` and whichever executor (``tests/test_parts.py`` checks it level by level).

**Memory** is the top's dense levels (84,000 tracts × 2,016 cells: 1.4 GB per array for the
nation) plus one part per worker (about ``part_blocks`` × 2,016 × 8 bytes per array; while
tabulating, two parts' rows per worker in flight): the executor maps the parts over its
workers, and each worker solves its part's nodes serially and writes its files (so a Dask
worker needs the output directory on storage it shares).

**Release mode measures once.** In simulation mode a resumed run measures an unfinished part
(and the top) again: the keyed streams give the same values. Release mode draws from the
operating system's secure source, which cannot draw the same values twice, and a second draw
would be a second measurement of the data: so the top's noisy answers are saved in
``noisy/top/`` before the top is solved, and each part's in ``noisy/parts/part-K/`` before
that part is solved; a resumed run loads them and measures only the parts never measured. The
log then shows the persons count only when the spec publishes the root's total, and no error
table is made.

Output directory::

    <level>.parquet        every level's histograms, long form (as ``postproc run``)
    geography.parquet      the geography
    node_stats.parquet     one row per node problem (solver, seconds, variables, …)
    manifest.json          a result's manifest (``Result.read`` reads the directory), with the
                           parts, their timings and the randomness label
    parts/                 one file per part and level below the split, and one marker per
                           finished part (what a resumed run skips); removed when joined
    noisy/                 release mode: the noisy measurements (``top/``, and ``parts/part-K/``
                           per part), each a NoisyHierarchy (``NoisyHierarchy.load``)
    confidential/          error_table.csv (simulation mode): noisy measurements and TopDown
                           against the data per level and measured query, the columns of
                           ``postproc run``'s table; parts/ while the run lasts

Where the steps live: the plan and its checks in :mod:`postproc.apps.runs.parts_plan`, step 1
in :mod:`postproc.apps.runs.parts_tabulate`, steps 2 and 3 (what measures and solves) here, step 4
and the checkpoint in :mod:`postproc.apps.runs.parts_outputs`, and the error table that adds up
over the parts in :mod:`postproc.apps.runs.parts_errors`.
"""

from __future__ import annotations

import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa

from hierarchy.errors import HierarchyError
from hierarchy.geography import Geography
from hierarchy.histograms import Hierarchy
from hierarchy.io.storage import (
    claim_directory,
    confidential_directory,
    lock_directory,
    read_json,
    remove_leftovers,
    write_json,
    write_parquet,
)
from hierarchy.measurement import (
    ancestor_offsets,
    exact_answers,
    measure_level,
    measurement_provenance,
)
from hierarchy.noisy import NoisyHierarchy
from hierarchy.queries import sparse_copy
from hierarchy.randomness import as_randomness
from invariants.active import find_active_cells
from invariants.compile import check_data, compile_spec
from postproc.apps.runs.config import RunConfig
from postproc.apps.runs.parts_errors import _Errors
from postproc.apps.runs.parts_outputs import (  # noqa: F401  (PartsResult: its old home)
    _MADE_BY,
    PartsResult,
    _check_settings,
    _finish,
    _finished,
    _meta,
    _Tally,
)
from postproc.apps.runs.parts_plan import (  # noqa: F401  (the plan's names: their old home)
    DEFAULT_PART_BLOCKS,
    PART_ROOT,
    _check,
    _count,
    _progress,
    _Run,
    part_geography,
    plan_parts,
)
from postproc.apps.runs.parts_tabulate import (  # noqa: F401  (their old home)
    Published,
    _load_counts,
    _parts_in_one_pass,
    _publish_at,
    _save_counts,
    _tabulate_all,
    _tabulate_part,
    _tabulate_parts,
    _Tabulated,
    _TabulatePart,
)
from postproc.apps.runs.pipeline import run_fingerprint
from postproc.errors import PostprocError
from postproc.gate import data_errors, source_names
from postproc.infra.executors import Executor, get_executor
from postproc.methods.topdown import topdown
from postproc.result import level_table

__all__ = ["run_in_parts", "plan_parts", "part_geography", "whole_measurement", "active_cells",
           "PartsResult", "DEFAULT_PART_BLOCKS", "PART_ROOT"]


def run_in_parts(config: RunConfig, out: str | Path, *, split: str = "tract",
                 part_blocks: int = DEFAULT_PART_BLOCKS, all_answers: bool = False,
                 resume: bool = False, progress: bool = False,
                 log: Callable[[str], None] = print,
                 show_confidential: bool = False) -> PartsResult:
    """Run TopDown on ``config`` one part of the geography at a time (see the module).

    Parameters
    ----------
    config : RunConfig
        A TopDown run on parquet files, with a blocks file (the geography); in release mode
        the measurements are saved under ``noisy/`` before they are solved (see the module).
    out : str or Path
        The output directory (created; with ``resume``, an interrupted run's to finish).
    split : str
        The level cut into parts; the levels above it are solved whole.
    part_blocks : int
        At most this many bottom-level units per part (a split-level unit with more is a part
        of its own).
    all_answers : bool
        Draw every answer of every query. By default only the answers that count a cell the
        post-processor can change are drawn (``measure_level(active=…)``): the others are
        known to be 0 from the published invariants, and TopDown's output is the same
        (``docs/scale2020.md``, "Why skipping those answers does not change TopDown's output").
    resume : bool
        Finish an interrupted run in ``out``: the top is solved again (the same measurements
        and histograms), parts already written are skipped, and in release mode the
        measurements saved are loaded, never drawn again.
    progress : bool
        A progress bar over the parts.
    log : callable
        Receives one line per step.
    show_confidential : bool
        In release mode, let the message of data that fail a check state the counts, rows and
        values it found; otherwise they go to ``out/confidential/validation.txt``
        (:mod:`postproc.gate`).

    Returns
    -------
    PartsResult

    Raises
    ------
    PostprocError
        No blocks file, a method other than TopDown, a split level that is the
        root or the bottom, persons outside the blocks file's geography, an ``out`` that
        holds something else, or one another run is writing (two runs into one directory would
        measure the data twice).

    Examples
    --------
    >>> import tempfile
    >>> from hierarchy.synth.census2020 import synthesize_2020
    >>> from postproc.apps.runs.demo import demo_config
    >>> base = Path(tempfile.mkdtemp())
    >>> _ = synthesize_2020(3_000, seed=1, out=base / "data")
    >>> done = run_in_parts(demo_config(base, preset="pl94_2020", seed=1, executor="serial"),
    ...                     base / "parts", part_blocks=40, log=lambda line: None)
    >>> done.parts > 1, sorted(p.name for p in done.directory.glob("*.parquet"))[:3]
    (True, ['block.parquet', 'block_group.parquet', 'county.parquet'])
    """
    t_start = time.perf_counter()
    geo, s = _check(config, split, part_blocks)
    with ExitStack() as stack:
        try:
            directory = claim_directory(Path(out), made_by=_MADE_BY, reuse=resume,
                                        how_to_reuse="pass resume=True (--resume) to finish an "
                                                     "interrupted run there")
            # one run at a time in a directory: a second would measure the data again
            stack.enter_context(lock_directory(directory, what=_MADE_BY))
        except HierarchyError as exc:
            raise PostprocError(str(exc)) from None
        stack.enter_context(data_errors(release=config.release, show=show_confidential,
                                        directory=directory, names=source_names(config)))
        return _run_in_parts_locked(config, directory, geo, s, split=split,
                                    part_blocks=part_blocks, all_answers=all_answers,
                                    resume=resume, progress=progress, log=log, t_start=t_start)

def _run_in_parts_locked(config: RunConfig, directory: Path, geo: Geography, s: int, *,
                         split: str, part_blocks: int, all_answers: bool, resume: bool,
                         progress: bool, log: Callable[[str], None],
                         t_start: float) -> PartsResult:
    """:func:`run_in_parts` in ``directory``, claimed and locked: the plan, checked against an
    interrupted run's, then the four steps of the module's description."""
    parts_dir = directory / "parts"
    if resume and (directory / "manifest.json").exists() and not parts_dir.exists():
        log(f"{directory}: run already finished; nothing to resume")
        return _finished(directory)
    _begin(config, directory, resume, log)
    parts_dir.mkdir(exist_ok=True)
    plan = plan_parts(geo, s, part_blocks)
    _check_settings(parts_dir / "plan.json", {
        "config": run_fingerprint(config), "split": split, "part_blocks": int(part_blocks),
        "parts": len(plan), "all_answers": bool(all_answers)}, directory)
    log(f"    {_count(len(plan), 'part')} of at most {part_blocks:,} {geo.levels[-1]} units "
        f"under {geo.n_units(s):,} {geo.levels[s]} units")
    run = _Run(config, directory, geo, split, s, plan, part_blocks, all_answers, resume,
               progress, log)
    timings: dict[str, Any] = {"levels": dict.fromkeys(geo.levels, 0.0)}
    tally = _Tally(_Errors(), dict.fromkeys(geo.levels, 0), timings["levels"])
    ex = get_executor(config.topdown.executor, workers=config.topdown.workers,
                      scheduler=config.scheduler)
    try:
        publish = Published.of(config)
        cache = confidential_directory(directory, what="error tables, the parts' exact counts "
                                       "while the run lasts") / "parts"
        cache.mkdir(exist_ok=True)
        tabulated = _tabulate_all(run, publish, cache)                  # 1. tabulate
        timings["tabulate"] = tabulated.seconds
        top = _solve_top(run, tabulated, ex, tally)                     # 2. the top
        timings["top"] = top.seconds
        persons = tabulated.persons
        del tabulated           # the top's truth is not held while the parts are solved
        solved = _solve_parts(run, publish, cache, top, ex, tally)      # 3. the parts
        timings["parts"] = solved.seconds
    finally:
        ex.close()
    table = _finish(run, cache, tally, measurement=top.measurement,     # 4. join
                    top=top.provenance, timings=timings, t_start=t_start)
    return PartsResult(directory, geo.levels, len(plan), solved.count, persons, timings, table,
                       config.release)


def _begin(config: RunConfig, directory: Path, resume: bool, log: Callable[[str], None]) -> None:
    """A resumed run's leftovers of an interrupted write removed; the simulation mode's
    warning."""
    if resume:
        removed = remove_leftovers(directory)
        if removed:
            log(f"    resume: removed {len(removed)} leftover(s) of an interrupted write")
    if config.randomness_mode == "simulation":
        log("    SIMULATION MODE: seeded randomness, reproducible by anyone with the seed — "
            "outputs are labelled NOT SAFE FOR RELEASE")


@dataclass(frozen=True)
class _MeasuredTop:
    """The top's measurement (measured, or loaded in a resumed release-mode run), its noisy
    answers per level and query, their exact answers (those the measurement and the error
    table need) and the measurement's provenance, which every part's measurement shares."""

    noisy: NoisyHierarchy
    measurements: dict[str, dict[str, Any]]
    exact: dict[str, dict[str, np.ndarray]]
    provenance: dict[str, Any]


@dataclass(frozen=True)
class _Top:
    """What solving the top gives the parts and the manifest: the split level's rounded
    histograms (each part starts under its rows), the measurement's provenance, TopDown's
    provenance and the seconds the step took."""

    split_hist: np.ndarray
    measurement: dict[str, Any]
    provenance: dict[str, Any]
    seconds: float


@dataclass(frozen=True)
class _PartsSolved:
    """How many parts this call solved (the others were done before it resumed), and the
    seconds the step took."""

    count: int
    seconds: float


def _solve_top(run: _Run, tabulated: _Tabulated, ex: Executor, tally: _Tally) -> _Top:
    """Step 2: the top, from the root to the split level, compiled on the whole geography,
    checked against the spec before anything is drawn, measured and solved by TopDown as one
    hierarchy; its levels' files written, its errors, persons and node statistics tallied."""
    config, geo, top_levels = run.config, run.geo, run.top_levels
    t = time.perf_counter()
    compiled = compile_spec(config.spec, config.schema, geo, tabulated.published)
    compiled_top = {lv: compiled[lv] for lv in top_levels}
    del compiled
    top_spec = config.spec.restricted(top_levels, geo.levels)
    check_data(top_spec, tabulated.top_truth, compiled=compiled_top)  # before anything is drawn
    measured = _measure_top(run, tabulated, top_spec, compiled_top)
    top = topdown(measured.noisy, top_spec, compiled=compiled_top,
                  options=config.topdown_options().at_levels(top_levels).replace(executor=ex))
    for lv, seconds in top.provenance["timings"]["levels"].items():
        tally.seconds[lv] += seconds
    tally.node_stats.append(top.node_stats)
    for li, lv in enumerate(top_levels):
        tally.persons[lv] = int(top.histograms[li].sum())
        write_parquet(level_table(config.schema, measured.noisy.geography, lv,
                                  top.histograms[li]),
                      run.directory / f"{lv}.parquet", metadata=_meta(config))
        if config.wants_error_table:
            for name, m in measured.measurements[lv].items():
                tally.errors.add(lv, config.workload[name], measured.exact[lv][name], m,
                                 top.histograms[li])
    seconds = time.perf_counter() - t
    run.log(f"    TopDown {' → '.join(top_levels)} in {seconds:.1f} s")
    return _Top(top.histograms[run.s], measured.provenance, top.provenance, seconds)


def _measure_top(run: _Run, tabulated: _Tabulated, top_spec: Any,
                 compiled_top: Mapping[str, Any]) -> _MeasuredTop:
    """The top's levels measured (one stream per level and query, only the answers that count
    an active cell unless ``all_answers``) and every level's noise parameters; in release mode
    saved in ``noisy/top/`` before anything is solved from them, and loaded from there (never
    drawn again) when the run resumes."""
    config, geo, s = run.config, run.geo, run.s
    top_truth = tabulated.top_truth
    rnd = as_randomness(config.rng)
    mech = config.mechanism
    saved_top = run.directory / "noisy" / "top" if config.release else None
    loaded = saved_top is not None and run.resume and (saved_top / "metadata.json").exists()
    measurements, parameters = {}, {}
    top_exact = ({lv: _level_answers(config, top_truth.counts[li], lv)
                  for li, lv in enumerate(run.top_levels)}
                 if not loaded or config.wants_error_table else {})
    if loaded:
        measurements = NoisyHierarchy.load(saved_top).measurements
        run.log("    resume: loaded the top's measurements from noisy/top (the data are not "
                "measured again)")
    no_units = np.zeros((0, config.schema.size), np.int64)
    for li, lv in enumerate(geo.levels):
        if li > s or loaded:    # the parts' levels, or a top loaded: noise parameters only
            _, parameters[lv] = measure_level(no_units, lv, li, config.workload, config.budget,
                                              mech, rnd)     # (no unit: no draw)
        else:
            measurements[lv], parameters[lv] = measure_level(
                top_truth.counts[li], lv, li, config.workload, config.budget, mech, rnd,
                answers=top_exact[lv],
                active=None if run.all_answers else find_active_cells(compiled_top[lv]))
    provenance = measurement_provenance(config.budget, mech, rnd, parameters, config.publish(),
                                        key_level=run.split,
                                        active_levels=() if run.all_answers else geo.levels)
    queries = config.query_invariants()
    if queries:     # as a whole run's measurement states them
        provenance["query_invariants_published"] = dict(queries)
    top_published = {lv: tabulated.published[lv] for lv in run.top_levels
                     if lv in tabulated.published}
    noisy_top = NoisyHierarchy(config.schema, top_truth.geography, config.workload,
                               measurements, top_published,
                               {**provenance, "spec_checked": top_spec.to_dict()})
    if saved_top is not None and not loaded:    # saved before anything is solved from it
        noisy_top.save(saved_top)
    return _MeasuredTop(noisy_top, measurements, top_exact, provenance)


def _solve_parts(run: _Run, publish: Published, cache: Path, top: _Top,
                 ex: Executor, tally: _Tally) -> _PartsSolved:
    """Step 3: the parts, each solved whole by one worker, which writes its files; a part
    whose marker an interrupted run wrote is tallied from it, not solved again."""
    config, geo, s = run.config, run.geo, run.s
    t = time.perf_counter()
    parts_dir = run.parts_dir
    solver = _SolvePart(config, geo.levels, s, publish, top.measurement, parts_dir, cache,
                        run.directory / "noisy" / "parts" if config.release else None,
                        run.all_answers)
    todo = []
    for k, (first, stop) in enumerate(run.plan):
        marker = parts_dir / f"part-{k:06d}.json"
        if marker.exists():
            tally.account(read_json(marker),
                          pd.read_parquet(parts_dir / f"node_stats-{k:06d}.parquet"))
        else:
            todo.append(_PartTask(k, part_geography(geo, s, first, stop),
                                  top.split_hist[first:stop]))
    bar = _progress(run.progress, len(todo), "TopDown parts")
    for done_part, node_stats_part in ex.map(solver, todo):
        tally.account(done_part, node_stats_part)
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    seconds = time.perf_counter() - t
    run.log(f"    TopDown {' → '.join(run.low_levels)} in {_count(len(run.plan), 'part')} in "
            f"{seconds:.1f} s ({len(todo):,} solved now)")
    return _PartsSolved(len(todo), seconds)


def whole_measurement(config: RunConfig, truth: Hierarchy, *, split: str = "tract",
                      all_answers: bool = False) -> NoisyHierarchy:
    """The measurement of the whole geography that a run in parts draws, part by part: streams
    keyed by ``split`` and, unless ``all_answers``, only the answers that count an active cell.
    TopDown on it gives the run in parts' histograms (to check the run, or to compare with it).

    Examples
    --------
    >>> import tempfile
    >>> from hierarchy.synth.census2020 import synthesize_2020
    >>> from postproc.apps.runs.demo import demo_config
    >>> from postproc.apps.runs.pipeline import load_truth
    >>> base = Path(tempfile.mkdtemp())
    >>> _ = synthesize_2020(2_000, seed=1, out=base / "data")
    >>> config = demo_config(base, preset="pl94_2020", seed=1)
    >>> noisy = whole_measurement(config, load_truth(config))
    >>> noisy.provenance["noise_streams"], noisy.get("block", "detailed").drawn is not None
    ({'key_level': 'tract'}, True)
    """
    from hierarchy.measurement import measure

    return measure(truth, config.workload, config.budget, config.mechanism, config.rng,
                   spec=config.spec, key_level=split,
                   active=None if all_answers else active_cells(config, truth))


def active_cells(config: RunConfig, truth: Hierarchy) -> dict[str, Any]:
    """Every level's active cells (:func:`invariants.active.find_active_cells`), from the spec
    compiled on the published statistics of ``truth`` (never its histograms).

    Examples
    --------
    >>> import tempfile
    >>> from hierarchy.synth.census2020 import synthesize_2020
    >>> from postproc.apps.runs.demo import demo_config
    >>> from postproc.apps.runs.pipeline import load_truth
    >>> base = Path(tempfile.mkdtemp())
    >>> _ = synthesize_2020(2_000, seed=1, out=base / "data")
    >>> config = demo_config(base, preset="pl94_2020", seed=1)
    >>> active = active_cells(config, load_truth(config))
    >>> blocks = active["block"]
    >>> blocks.n_units == load_truth(config).geography.n_units("block"), blocks.n_patterns < 40
    (True, True)
    """
    compiled = compile_spec(config.spec, config.schema, truth.geography,
                            config.published(truth))
    return {lv: find_active_cells(compiled[lv]) for lv in truth.levels}


@dataclass(frozen=True)
class _PartTask:
    """One part for a worker: its index, its geography and the split level's histograms."""

    index: int
    geography: Geography
    given: np.ndarray


class _SolvePart:
    """Solve one part (picklable: an executor maps it over the parts): its saved counts, its
    measurement from keyed streams, TopDown below the split (serially: the parts are what runs
    in parallel), its files in ``parts/`` and last its marker. Returns the marker's contents
    and the part's node statistics."""

    def __init__(self, config: RunConfig, levels: Sequence[str], split: int,
                 publish: Published, provenance: dict[str, Any],
                 parts_dir: Path, cache: Path, noisy_dir: Path | None = None,
                 all_answers: bool = False):
        self.config, self.split = config, split
        self.low_levels = tuple(levels[split + 1:])
        self.spec = config.spec.restricted(self.low_levels, levels)
        self.publish, self.provenance = publish, provenance
        self.parts_dir, self.cache = parts_dir, cache
        self.noisy_dir = noisy_dir     # release mode: where each part's measurement is saved
        self.all_answers = all_answers

    def measured(self, task: _PartTask) -> tuple[NoisyHierarchy, dict[str, Any],
                                                  dict[str, dict[str, np.ndarray]]]:
        """The part's measurement (loaded when an interrupted release-mode run saved it, else
        drawn from keyed streams after the part is checked against the spec, and saved in
        release mode before anything is solved from it), its compiled spec and its exact
        answers (level → query; those the measurement and the error table need)."""
        config, part, k = self.config, task.geography, task.index
        saved = None if self.noisy_dir is None else self.noisy_dir / f"part-{k:06d}"
        loaded = saved is not None and (saved / "metadata.json").exists()
        exact: dict[str, dict[str, np.ndarray]] = {}
        noisy = NoisyHierarchy.load(saved) if loaded else None
        # a part is checked against the spec before it is measured; a part measured by an
        # older version recorded no check, and is checked now
        unchecked = noisy is None or "spec_checked" not in noisy.provenance
        if not loaded or config.wants_error_table or unchecked:
            leaf = _load_counts(config, part, self.cache / f"truth-{k:06d}.npz")
            truth = leaf.to_hierarchy()
            exact = {part.levels[li]: _level_answers(
                config, truth.counts[li], part.levels[li],
                leaf.leaf_counts if li == part.depth - 1 else None)
                for li in range(2, part.depth)}
        if loaded:      # measured before an interruption: never measured again
            published = noisy.invariants
        else:
            published = self.publish.answers(truth, self.low_levels)
        compiled = compile_spec(self.spec, config.schema, part, published)
        if unchecked:   # before the part is measured: data that break the spec are refused
            check_data(self.spec, truth, compiled=compiled)
            checked = {**(noisy.provenance if loaded else self.provenance),
                       "spec_checked": self.spec.to_dict()}
            if loaded:
                noisy = NoisyHierarchy(noisy.schema, noisy.geography, noisy.workload,
                                       noisy.measurements, noisy.invariants, checked)
        if not loaded:
            noisy = _measure_part(config, truth, part, self.split, as_randomness(config.rng),
                                  published, checked, exact,
                                  None if self.all_answers else compiled)
            if saved is not None:   # saved before anything is solved from it
                noisy.save(saved)
        return noisy, compiled, exact

    def __call__(self, task: _PartTask) -> tuple[dict[str, Any], pd.DataFrame]:
        config, part, k = self.config, task.geography, task.index
        noisy, compiled, exact = self.measured(task)
        given = task.given
        result = topdown(noisy, self.spec, start=(2, [given.sum(axis=0, keepdims=True), given]),
                         compiled=compiled, options=config.topdown_options().at_levels(
                             self.low_levels).replace(executor="serial", workers=None))
        errors = _Errors()
        for li in range(2, part.depth):
            lv = part.levels[li]
            write_parquet(level_table(config.schema, part, lv, result.histograms[li]),
                          self.parts_dir / f"{lv}-{k:06d}.parquet")
            if config.wants_error_table:
                post = result.histograms[li]
                post_sparse = sparse_copy(post)
                for name in noisy.queries(lv):
                    errors.add(lv, config.workload[name], exact[lv][name],
                               noisy.get(lv, name), post, post_sparse)
        write_parquet(pa.Table.from_pandas(result.node_stats, preserve_index=False),
                      self.parts_dir / f"node_stats-{k:06d}.parquet")
        marker = {"part": k, "errors": errors.to_dict(),
                  "persons": {lv: int(h.sum()) for lv, h in zip(part.levels[2:],
                                                                result.histograms[2:])},
                  "levels": result.provenance["timings"]["levels"],
                  "failsafe_reports": result.provenance.get("failsafe_reports", [])}
        write_json(marker, self.parts_dir / f"part-{k:06d}.json")
        return marker, result.node_stats


def _level_answers(config: RunConfig, counts: np.ndarray, level: str, sparse: Any = None
                   ) -> dict[str, np.ndarray]:
    """The exact answers of every query the budget measures at ``level``: computed once for
    the measurement and the error table, from one sparse copy of a mostly empty level (made
    per query, the copies cost 0.1 s each on a part's blocks; ``sparse``: the copy, when the
    caller has it)."""
    if sparse is None:
        sparse = sparse_copy(counts)
    return {q: exact_answers(config.workload[q], counts, sparse)
            for q in config.budget.queries(level)}



def _measure_part(config: RunConfig, truth: Hierarchy, part: Geography, split: int, rnd: Any,
                  published: Mapping[str, Any], provenance: dict[str, Any],
                  exact: Mapping[str, Mapping[str, np.ndarray]],
                  compiled: Mapping[str, Any] | None) -> NoisyHierarchy:
    """The part's levels below the split, measured from streams keyed by their split-level
    ancestor: the values a measurement of the whole with ``key_level`` gets. ``exact``: level
    → query → exact answers, computed once for the measurement and the errors; with
    ``compiled`` (the part's constraints), only the answers that count an active cell."""
    codes = part.geocodes[1]
    measurements = {}
    for li in range(2, part.depth):
        lv = part.levels[li]
        measurements[lv], _ = measure_level(
            truth.counts[li], lv, split + li - 1, config.workload, config.budget,
            config.mechanism, rnd, keys=(codes, ancestor_offsets(part, li, 1)),
            answers=exact.get(lv),
            active=None if compiled is None else find_active_cells(compiled[lv]))
    return NoisyHierarchy(config.schema, part, config.workload, measurements, published,
                          provenance)

