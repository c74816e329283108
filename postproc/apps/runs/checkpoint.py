"""A run directory's checkpoint (``checkpoint.json``): what ``postproc run --resume`` needs to
finish a run as if it had never been interrupted, and to tell which changes it may accept.

It records

* the **measurement settings** (schema, levels, workload, budget, mechanism, randomness mode,
  seed, the published invariants, the unit attribute) as one digest each: a resumed run reuses
  the saved measurements, so a change to any of them is refused, naming it (the data themselves
  are checked against ``confidential/data_fingerprint.json``);
* the **post-processing settings** (method, its options, the spec, the solver settings) and the
  **output choices** (microdata, error table) as they are: a resume may change them. A changed
  post-processing is run again on the saved measurements — no noise is drawn, no budget spent —
  and the change is recorded (old and new) in ``changes`` and in the manifest;
* the **levels done** and, for each, its **provenance** (:func:`level_record`: the queries the
  failsafe kept, its reports, the seconds), which a resumed run puts back
  (:func:`with_level_records`), so its manifest is an uninterrupted run's;
* ``finished`` once every output is written.

A resumed level-wise run (TopDown) takes as done the checkpointed levels whose level file,
provenance and node statistics are all there (``_levels_to_reuse``).

Examples
--------
>>> import tempfile
>>> from postproc.apps.runs.config import RunConfig
>>> config = RunConfig.build(persons="p.parquet", levels=["nation", "state"], budget=1, seed=1)
>>> path = Path(tempfile.mkdtemp()) / "checkpoint.json"
>>> Checkpoint.new(path, config).save()
>>> resumed = Checkpoint.resumed(path, replace(config, method="hay"), log=print)
resume: the post-processing changed since the run was measured (method); the saved measurements are
reused (no noise is drawn, no budget spent) and post-processed again
>>> resumed.changes[0]["old"], resumed.changes[0]["new"]
({'method': 'topdown'}, {'method': 'hay'})
>>> Checkpoint.resumed(path, replace(config, seed=2))
Traceback (most recent call last):
...
postproc.errors.PostprocError: ... measured its data with another configuration: the seed changed
since. ...
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from hierarchy.errors import HierarchyError
from hierarchy.io.storage import read_json, write_json
from hierarchy.noisy import NoisyHierarchy
from postproc.apps.runs.config import RunConfig
from postproc.errors import PostprocError
from postproc.result import histograms_from_table

__all__ = ["Checkpoint", "measurement_settings", "postprocess_settings", "level_record",
           "with_level_records", "run_fingerprint"]


def run_fingerprint(config: RunConfig) -> str:
    """One digest of everything that determines a run's results but its data:
    :meth:`RunConfig.fingerprint`, extended by the method and its options unless the method is
    TopDown with none. A run in parts checks it on resume; a checkpoint of an earlier version of
    the toolkit records only this (a resume then accepts no change, having no way to tell
    which settings changed).

    Examples
    --------
    >>> from dataclasses import replace
    >>> config = RunConfig.build(persons="persons.parquet", levels=["nation", "state"],
    ...                          budget=1.0, seed=1)
    >>> run_fingerprint(config) == config.fingerprint()
    True
    >>> run_fingerprint(replace(config, method="hay")) == config.fingerprint()
    False
    """
    base = config.fingerprint()
    if config.method == "topdown" and not config.method_options:
        return base
    extra = json.dumps({"method": config.method, "options": dict(config.method_options)},
                       sort_keys=True, default=str)
    return hashlib.sha256((base + extra).encode()).hexdigest()[:16]


def _plain(value: Any) -> Any:
    """``value`` as JSON gives it back (tuples as lists, keys as strings; other objects by
    their repr), so that what is compared is what is saved."""
    return json.loads(json.dumps(value, sort_keys=True, default=repr))


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(_plain(value), sort_keys=True).encode()).hexdigest()[:16]


def measurement_settings(config: RunConfig) -> dict[str, Any]:
    """What determines the measurements of a run besides its data, by the name a message uses.

    Examples
    --------
    >>> config = RunConfig.build(persons="p.parquet", levels=["nation", "state"], budget=1,
    ...                          seed=1)
    >>> list(measurement_settings(config))
    ['schema', 'levels', 'workload', 'budget', 'mechanism', 'randomness mode', 'seed', 'published
    invariants', 'unit attribute']
    """
    return {"schema": config.schema.to_dict(), "levels": list(config.levels),
            "workload": config.workload.to_dict(), "budget": config.budget.to_dict(),
            "mechanism": config.mechanism.to_dict(), "randomness mode": config.randomness_mode,
            "seed": config.seed, "published invariants": _published(config),
            "unit attribute": config.spec.unit_attribute}


def _published(config: RunConfig) -> dict[str, Any]:
    """What the run publishes exactly: the statistics by level and, by name, the query
    invariants (their queries resolved on the workload, answers and levels)."""
    return {**config.publish(), **{f"query invariant {name}": entry
                                   for name, entry in config.query_invariants().items()}}


def postprocess_settings(config: RunConfig, *, error_table: bool | None = None
                         ) -> dict[str, Any]:
    """What a resume may change: the post-processing (``method``, ``options``, ``spec``,
    ``solver``) and the output choices (``microdata``, ``error_table``: the one in force,
    ``error_table`` if given), as JSON.

    Examples
    --------
    >>> config = RunConfig.build(persons="p.parquet", levels=["nation", "state"], budget=1,
    ...                          seed=1, method="sampling", method_options={"sweeps": 20})
    >>> settings = postprocess_settings(config)
    >>> settings["method"], settings["options"], settings["error_table"]
    ('sampling', {'sweeps': 20}, True)
    """
    # every [solver] key as written (a setting added later is covered too), but the execution
    # settings, which do not change results; and the parsed values (a config changed in Python)
    solver = {**{key: value for key, value in dict(config.raw.get("solver", {})).items()
                 if key not in ("executor", "workers", "scheduler")},
              "chain": config.topdown.solver, "failsafe": config.topdown.failsafe,
              "failsafe_keep": config.topdown.failsafe_keep, "passes": config.topdown.passes,
              "round_passes": config.topdown.round_passes}
    return _plain({"method": config.method, "options": dict(config.method_options),
                   "spec": config.spec.to_dict(), "solver": solver,
                   "microdata": config.microdata,
                   "error_table": (config.wants_error_table if error_table is None
                                   else bool(error_table))})


#: The post-processing settings whose change means post-processing again; the others are
#: output choices, written from the results as they are.
RESULT_SETTINGS = ("method", "options", "spec", "solver")


def level_record(provenance: Mapping[str, Any], level: str) -> dict[str, Any]:
    """What a result's provenance says of one level: the queries the failsafe kept there, its
    failsafe reports, and the seconds it took — what a resumed run cannot recompute.

    Examples
    --------
    >>> provenance = {"solver": {"failsafe_keep": {"state": ["total"]}},
    ...               "failsafe_reports": [{"level": "state", "parent": "0"}],
    ...               "timings": {"levels": {"nation": 0.5, "state": 1.5}}}
    >>> level_record(provenance, "state")
    {'failsafe_keep': ['total'], 'failsafe_reports': [{'level': 'state', 'parent': '0'}], 'seconds':
    1.5}
    >>> level_record(provenance, "nation")
    {'failsafe_reports': [], 'seconds': 0.5}
    """
    record = {"failsafe_reports": [r for r in provenance.get("failsafe_reports", [])
                                   if r.get("level") == level],
              "seconds": provenance.get("timings", {}).get("levels", {}).get(level)}
    kept = provenance.get("solver", {}).get("failsafe_keep", {})
    if level in kept:
        record["failsafe_keep"] = kept[level]
    return _plain(record)


def with_level_records(provenance: Mapping[str, Any], records: Mapping[str, Mapping[str, Any]],
                       levels: Sequence[str]) -> dict[str, Any]:
    """``provenance`` of the levels solved in this session with ``records`` of the levels
    solved before (:func:`level_record`) put back, every per-level entry in level order.

    Examples
    --------
    >>> now = {"solver": {"failsafe_keep": {"county": ["total"]}}, "failsafe_reports": [],
    ...        "timings": {"levels": {"county": 2.0}, "total": 2.0}}
    >>> before = {"state": {"failsafe_keep": ["total"], "seconds": 1.0,
    ...                     "failsafe_reports": [{"level": "state", "parent": "0"}]}}
    >>> merged = with_level_records(now, before, ["nation", "state", "county"])
    >>> merged["solver"]["failsafe_keep"], merged["timings"]["levels"]
    ({'state': ['total'], 'county': ['total']}, {'state': 1.0, 'county': 2.0})
    >>> merged["failsafe_reports"]
    [{'level': 'state', 'parent': '0'}]
    """
    out = dict(provenance)
    solver, timings = dict(out.get("solver", {})), dict(out.get("timings", {}))
    kept = {**{lv: r["failsafe_keep"] for lv, r in records.items() if "failsafe_keep" in r},
            **solver.get("failsafe_keep", {})}
    seconds = {**{lv: r["seconds"] for lv, r in records.items() if r.get("seconds") is not None},
               **timings.get("levels", {})}
    solver["failsafe_keep"] = {lv: kept[lv] for lv in levels if lv in kept}
    timings["levels"] = {lv: seconds[lv] for lv in levels if lv in seconds}
    earlier = [r for lv in levels if lv in records
               for r in records[lv].get("failsafe_reports", [])]
    now = [r for r in out.get("failsafe_reports", []) if r.get("level") not in records]
    out.update(solver=solver, timings=timings, failsafe_reports=earlier + now)
    return out


@dataclass
class Checkpoint:
    """The state of a run directory (see the module docstring), saved as JSON at ``path``.

    ``changed`` says whether this session changed the post-processing or the output choices
    (the outputs must then be written again even when the run had finished); it is not saved.

    Examples
    --------
    >>> import tempfile
    >>> config = RunConfig.build(persons="p.parquet", levels=["nation", "state"], budget=1,
    ...                          seed=1)
    >>> checkpoint = Checkpoint.new(Path(tempfile.mkdtemp()) / "checkpoint.json", config)
    >>> checkpoint.level_done("nation", ["nation"], {"timings": {"levels": {"nation": 0.5}}})
    >>> again = Checkpoint.resumed(checkpoint.path, config)
    >>> again.completed, again.levels, again.changed
    (['nation'], {'nation': {'failsafe_reports': [], 'seconds': 0.5}}, False)
    """

    path: Path
    config: str
    measurement: dict[str, str]
    postprocess: dict[str, Any]
    completed: list[str] = field(default_factory=list)
    levels: dict[str, dict[str, Any]] = field(default_factory=dict)
    changes: list[dict[str, Any]] = field(default_factory=list)
    finished: bool = False
    changed: bool = False

    @classmethod
    def new(cls, path: str | Path, config: RunConfig, *, error_table: bool | None = None
            ) -> "Checkpoint":
        """The checkpoint of a run of ``config`` that has done nothing yet."""
        return cls(Path(path), run_fingerprint(config),
                   {name: _digest(value) for name, value in measurement_settings(config).items()},
                   postprocess_settings(config, error_table=error_table))

    def save(self) -> None:
        """Write the checkpoint (atomically)."""
        state = {"config": self.config, "measurement": self.measurement,
                 "postprocess": self.postprocess, "completed": list(self.completed),
                 "levels": {lv: self.levels[lv] for lv in self.completed if lv in self.levels},
                 "changes": self.changes}
        if self.finished:
            state["finished"] = True
        write_json(state, self.path)

    def level_done(self, level: str, completed: Sequence[str],
                   provenance: Mapping[str, Any]) -> None:
        """Record ``level`` done (``completed`` the levels done so far) with its provenance,
        and save."""
        self.completed = list(completed)
        self.levels[level] = level_record(provenance, level)
        self.save()

    @classmethod
    def resumed(cls, path: str | Path, config: RunConfig, *, error_table: bool | None = None,
                log: Callable[[str], None] = print) -> "Checkpoint":
        """The checkpoint a resumed run of ``config`` continues from: the saved one (a new one
        if there is none), after checking that ``config`` measures as the saved run did.

        Raises
        ------
        PostprocError
            A measurement setting changed (each named), or a checkpoint of an earlier version
            of the toolkit (which records one digest of everything) for another configuration.
        """
        path = Path(path)
        fresh = cls.new(path, config, error_table=error_table)
        if not path.exists():
            return fresh
        saved = read_json(path)
        where = path.parent
        if "measurement" not in saved:             # written before these records existed
            if saved.get("config") != fresh.config:
                raise PostprocError(f"{where} was started with a different configuration (its "
                                    "checkpoint, of an earlier version of the toolkit, cannot "
                                    "say what differs); resume with the same config or choose "
                                    "another --out")
            return replace(fresh, completed=list(saved.get("completed", [])),
                           finished=bool(saved.get("finished")))
        changed = [name for name, digest in fresh.measurement.items()
                   if saved["measurement"].get(name) != digest]
        if changed:
            names = " and ".join(", ".join(changed).rsplit(", ", 1))
            raise PostprocError(
                f"{where} measured its data with another configuration: the {names} changed "
                f"since. A resumed run reuses the saved measurements, so it needs the settings "
                f"they were made with: restore {'it' if len(changed) == 1 else 'them'}, or "
                "start a new run in another --out (which measures the data again, spending the "
                "budget again). A resume may change the post-processing alone (method, "
                "options, solver, spec constraints, output choices)")
        old = saved.get("postprocess", {})
        differ = [key for key in fresh.postprocess if old.get(key) != fresh.postprocess[key]]
        state = replace(fresh, completed=list(saved.get("completed", [])),
                        levels=dict(saved.get("levels", {})),
                        changes=list(saved.get("changes", [])),
                        finished=bool(saved.get("finished")), changed=bool(differ))
        if not differ:
            return state
        again = [key for key in differ if key in RESULT_SETTINGS]
        state.changes.append({"old": {key: old.get(key) for key in differ},
                              "new": {key: fresh.postprocess[key] for key in differ},
                              "post_processed_again": bool(again),
                              "levels_done_before": list(state.completed)})
        if again:
            state.completed, state.levels, state.finished = [], {}, False
            log(f"resume: the post-processing changed since the run was measured "
                f"({', '.join(differ)}); the saved measurements are reused (no noise is drawn, "
                "no budget spent) and post-processed again")
        else:
            log(f"resume: the output choices changed ({', '.join(differ)}); the results are "
                "kept and the outputs written again")
        return state


@dataclass(frozen=True)
class _ReusedLevels:
    """The levels a resumed level-wise run takes as done, their histograms and the rows of
    ``node_stats.parquet`` of those levels."""

    levels: list[str]
    hists: list[np.ndarray]
    stats: pd.DataFrame


def _levels_to_reuse(config: RunConfig, directory: Path, noisy: NoisyHierarchy,
                     checkpoint: Checkpoint, log: Callable[[str], None]) -> _ReusedLevels:
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
    return _ReusedLevels(levels, hists[:len(levels)], stats)


def _join_stats(earlier: pd.DataFrame, new: pd.DataFrame) -> pd.DataFrame:
    """Node statistics of the levels done before a resume followed by this run's."""
    frames = [f for f in (earlier, new) if len(f)]
    return pd.concat(frames, ignore_index=True) if len(frames) > 1 else (frames or [new])[0]
