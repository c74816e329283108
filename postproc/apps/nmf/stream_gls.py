"""The GLS on a Noisy Measurement File state by state (``postproc nmf run --stream --method
gls``): the best linear unbiased estimate of every unit of the nation with its interval,
without holding more than one state above its blocks and one part of its blocks per worker.

The hierarchical GLS is an upward pass (each unit's subtree estimate ``L`` from its own and its
descendants' measurements, with its covariance) and a downward pass (each unit's estimate
``B = L + C · step`` from its parent's). Cut at the states and, inside each state, at its block
groups, it runs in three steps — each the whole tree's computation, in another order:

1. **Upward, state by state.** A state read down to its block groups; its blocks spilled part
   by part as TopDown's stream spills them (:mod:`postproc.apps.nmf.blocks`); each part solved
   upward on a worker (:func:`~postproc.methods.gls.parts.part_upward`: what its block groups
   need from below, and a :class:`~postproc.methods.gls.parts.PartState` kept on disk for its
   downward pass); then the state's levels from its pieces (under a level of the state's pieces
   summed, which holds the state's published total) to its block groups, upward with what the
   parts gave. What the nation needs from the state — its subtree estimate and covariance — and
   what the state's downward pass needs are kept in ``.states/``.
2. **The nation**, from its own measurements and the states' subtree estimates: its estimate
   and interval, and its step for the states.
3. **Downward, state by state**: the state read again, its levels solved under the nation's
   step (estimates, intervals, and its block groups' steps and step precisions), then its parts
   downward on the workers (:func:`~postproc.methods.gls.parts.part_downward`,
   :func:`~postproc.methods.gls.parts.part_variances`).

**Only children across the cuts.** A unit whose budget moved to its parent has no measurement
in the file; the GLS measures a chain of only children at its bottom unit
(:func:`~postproc.methods.gls.chains.measured_at_chain_bottoms`). Chains inside a state's
levels move there; a block group with one block hands its measurement to the part, which moves
it to the block when the block has none, and says so (the state then drops it). A single
piece's measurements, which a read of one state keeps at its root, go back to the piece.

Outputs (as ``postproc run --parts`` writes a GLS): ``<level>.parquet`` for every level of the
file — each unit's estimates of the requested queries with standard errors and intervals, in
long form (the level's geocode, ``query``, ``answer``, ``estimate``, ``se``, ``lower``,
``upper``); ``geography.parquet``; ``block_geoid.parquet``; ``manifest.json``. The estimates
and standard errors are the whole-file GLS's to float rounding (tested).
"""

from __future__ import annotations

import hashlib
import json
import pickle
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
from tqdm.auto import tqdm

from hierarchy.errors import HierarchyError
from hierarchy.frames import resolve_query
from hierarchy.geography import Geography
from hierarchy.io.joins import join_parquet
from hierarchy.io.storage import atomic_path, write_json, write_parquet
from hierarchy.noisy import Measurement, NoisyHierarchy
from hierarchy.presets.pl94 import LEVELS, PL94_2020, pl94_workload
from invariants.compile import compile_spec
from postproc.apps.nmf.blocks import (
    _part_blocks,
    _part_noisy,
    _spill_blocks,
    block_codes,
    with_blocks,
)
from postproc.apps.nmf.files import _product_dir
from postproc.apps.nmf.layout import CONSTRAINT, DPQUERY
from postproc.apps.nmf.reader import read_nmf
from postproc.apps.nmf.run import MADE_BY, nmf_record, write_block_geoids
from postproc.apps.nmf.tally import _StateFiles
from postproc.apps.runs.directories import claim_output
from postproc.apps.runs.parts_plan import part_geography, plan_parts
from postproc.errors import PostprocError
from postproc.infra.executors import get_executor
from postproc.intervals import interval_table, z_value
from postproc.methods.gls.bluedown import level_measurements, signature_weight
from postproc.methods.gls.chains import measured_at_chain_bottoms
from postproc.methods.gls.method import GLSProblems, gls_problems
from postproc.methods.gls.parts import part_downward, part_upward, part_variances
from postproc.methods.gls.sums import with_sum_levels
from postproc.methods.gls.tree import Below
from postproc.result import file_metadata

__all__ = ["gls_nmf_streamed"]

_PARTS = ".states"


def gls_nmf_streamed(root: str | Path, out: str | Path, *,
                     states: Sequence[str] | None = None,
                     state_totals: str | Path | Mapping[str, int] | None = None,
                     queries: Sequence[str] = ("total",), interval: float = 0.9,
                     workers: int | None = None, part_blocks: int | None = None,
                     progress: bool = False, log: Callable[[str], None] = print) -> Path:
    """The GLS of a Noisy Measurement File (the persons' product), state by state and each
    state's blocks part by part (module docstring), into ``out``.

    Parameters
    ----------
    root, states, state_totals
        As for :func:`~postproc.apps.nmf.reader.read_nmf`.
    out : path
        A new or empty directory, or an earlier ``postproc nmf run``'s.
    queries : sequence of str
        The queries whose estimates are written for every unit (workload names or query
        expressions of the PL 94 schema); default the total.
    interval : float
        The coverage of the intervals (0 < interval < 1).
    workers, part_blocks, progress, log
        As for :func:`~postproc.apps.nmf.stream.run_nmf_streamed`.

    Returns
    -------
    pathlib.Path

    Examples
    --------
    >>> gls_nmf_streamed("/nonexistent", "/tmp/never", queries=["nonsense"])
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: gls state by state: unknown query 'nonsense': not in the ...
    """
    resolved = _resolved(queries)
    if isinstance(interval, bool) or not isinstance(interval, (int, float)) \
            or not 0 < interval < 1:
        raise PostprocError(f"interval must be between 0 and 1, not {interval!r}")
    part_blocks = _part_blocks(part_blocks)
    t0 = time.perf_counter()
    directory = claim_output(out, MADE_BY)    # before reading: a wrong --out, at once
    top, top_spec = read_nmf(root, states=states, state_totals=state_totals, down_to="state")
    nation = _Nation.of(top, top_spec)
    meta = file_metadata(top.provenance["randomness"], top.schema)
    parts = directory / _PARTS
    parts.mkdir(exist_ok=True)
    run = _StateRun(root, state_totals, parts, meta, part_blocks, progress, tuple(queries),
                    float(interval), nation.symmetry)
    fips_all = sorted({str(p)[1:] for p in top.geography.geocodes[1]})
    timings: dict[str, float] = {}
    files, nbytes = top.provenance["files"], top.provenance["bytes"]
    with get_executor("serial" if workers == 1 else "process", workers=workers) as ex:
        t = time.perf_counter()
        ups = []
        for fips in fips_all:                                           # 1. upward
            t1 = time.perf_counter()
            up = run.upward_done(fips)
            if up is None:
                up = run.upward(fips, ex, log)
                log(f"state {fips}: upward in {time.perf_counter() - t1:.1f} s")
            else:
                log(f"state {fips}: upward done by an earlier run (resumed)")
            ups.append(up)
            files, nbytes = files + up["files"], nbytes + up["bytes"]
        timings["upward"] = time.perf_counter() - t
        t = time.perf_counter()
        fits = nation.fit([up["contribution"] for up in ups])           # 2. the nation
        _write_levels(parts / "nation-US.parquet", nation.frames(fits, resolved, run.z), meta)
        steps = [f.below_steps for f in fits]
        pairs = [f.pairs_for_children(0) for f in fits]
        timings["nation"] = time.perf_counter() - t
        log(f"nation from {len(fips_all)} state{'s' * (len(fips_all) > 1)} in "
            f"{timings['nation']:.1f} s")
        t = time.perf_counter()
        frames = []
        for fips, up in zip(fips_all, ups):                             # 3. downward
            t1 = time.perf_counter()
            frame, resumed = run.downward(fips, up, steps, pairs, ex)
            frames.append(frame)
            log(f"state {fips}: downward " + ("done by an earlier run (resumed)" if resumed
                                              else f"in {time.perf_counter() - t1:.1f} s"))
        timings["downward"] = time.perf_counter() - t
    t = time.perf_counter()
    for lv in LEVELS:
        names = [f"{lv}-US.parquet"] if lv == LEVELS[0] else \
            [f"{lv}-{fips}.parquet" for fips in fips_all]
        if lv == LEVELS[-1]:
            names = [n for up in ups for n in up["block_files"]]
        join_parquet([parts / n for n in names], directory / f"{lv}.parquet", metadata=meta)
    frame = pd.concat([top.geography.to_frame(), *frames], ignore_index=True)
    write_parquet(pa.Table.from_pandas(frame, preserve_index=False),
                  directory / "geography.parquet", metadata=meta)
    write_block_geoids(frame.loc[frame["level"] == LEVELS[-1], "geocode"], directory)
    timings["join"] = time.perf_counter() - t
    timings["total"] = time.perf_counter() - t0
    randomness = top.provenance["randomness"]
    write_json({"made_by": MADE_BY, "method": "gls", "streamed": "state by state",
                "part_blocks": part_blocks, "queries": list(queries), "interval": interval,
                "levels": list(LEVELS), "structure": nation.structure,
                "persons": float(nation.persons), "timings": timings,
                "nmf": {**nmf_record(top.provenance), "files": files, "bytes": nbytes},
                "randomness": randomness,
                "safe_for_release": bool(randomness.get("safe_for_release", False))},
               directory / "manifest.json")
    shutil.rmtree(parts)
    log(f"wrote {directory} in {timings['total']:.1f} s")
    return directory


def _resolved(queries: Sequence[str]) -> list[Any]:
    """The queries by name, an unknown one an error before anything is read."""
    out = []
    for q in queries:
        try:
            out.append(resolve_query(q, PL94_2020, pl94_workload()))
        except HierarchyError as exc:
            raise PostprocError(f"gls state by state: {exc}") from None
    if not out:
        raise PostprocError("gls state by state: no query to write")
    return out


def _piece_measured(noisy: NoisyHierarchy) -> NoisyHierarchy:
    """A read of a single state piece keeps the piece's measurements at its root (the root
    is the piece); here they go back to the piece, the root measured by nothing, so the
    piece's chain is the whole file's."""
    if noisy.geography.n_units(1) != 1 or noisy.measurements.get(noisy.levels[1]):
        return noisy
    measurements = {lv: dict(ms) for lv, ms in noisy.measurements.items()}
    measurements[noisy.levels[1]] = measurements.pop(noisy.levels[0], {})
    measurements[noisy.levels[0]] = {}
    return NoisyHierarchy(noisy.schema, noisy.geography, noisy.workload, measurements,
                          noisy.invariants, noisy.provenance)


def _undrawn(noisy: NoisyHierarchy, level: str, units: np.ndarray) -> NoisyHierarchy:
    """``noisy`` with every answer of ``level``'s ``units`` (a bool mask) undrawn: their
    measurements moved to an only child in a part."""
    if not units.any():
        return noisy
    measurements = {lv: dict(ms) for lv, ms in noisy.measurements.items()}
    for name, m in measurements.get(level, {}).items():
        drawn = np.ones(m.values.shape, bool) if m.drawn is None else m.drawn.copy()
        values = m.values.copy()
        drawn[units], values[units] = False, 0
        measurements[level][name] = Measurement(name, values, m.variances, drawn)
    return NoisyHierarchy(noisy.schema, noisy.geography, noisy.workload, measurements,
                          noisy.invariants, noisy.provenance)


def _measured(noisy: NoisyHierarchy) -> NoisyHierarchy:
    """A read as the GLS takes it: a single piece's measurements back on the piece, each
    chain of only children measured at its bottom."""
    return measured_at_chain_bottoms(_piece_measured(noisy))


def _augmented(tree: NoisyHierarchy, spec: Any) -> tuple[NoisyHierarchy, Any]:
    """The tree the GLS solves (a :func:`_measured` read) with a level of the summed pieces
    inserted where the spec holds sums over them; and its compiled constraints."""
    compiled = compile_spec(spec, tree.schema, tree.geography, tree.invariants)
    augmented = with_sum_levels(tree, compiled)
    if augmented is not None:
        tree, compiled, _ = augmented
    return tree, compiled


def _forest(tree: NoisyHierarchy, spec: Any) -> tuple[GLSProblems, Any, list[str]]:
    """The GLS problems of a state's levels below the root (a forest under the nation) of a
    :func:`_measured` read (its moved block groups' measurements undrawn), the summed pieces
    inserted (:func:`_augmented`); the compiled constraints and the forest's levels (the
    inserted ones included)."""
    tree, compiled = _augmented(tree, spec)
    levels = list(tree.levels[1:])
    return gls_problems(tree, compiled, levels=levels), compiled, levels


@dataclass
class _Nation:
    """The nation's problem (its own measurements and equalities; its children's subtree
    estimates come from the states' upward passes) and the split found on the top levels."""

    problems: GLSProblems
    compiled: Any
    persons: float = 0.0

    @classmethod
    def of(cls, top: NoisyHierarchy, spec: Any) -> "_Nation":
        tree, compiled = _augmented(_measured(top), spec)
        return cls(gls_problems(tree, compiled).upper(1), compiled[tree.levels[0]])

    @property
    def symmetry(self) -> Any:
        return self.problems.symmetry

    @property
    def structure(self) -> dict[str, Any]:
        return self.problems.structure

    def _below(self, contributions: Sequence[Sequence[Below]]) -> list[Below]:
        """The nation's children's subtree estimates summed over the states
        (``contributions``: per state, a :class:`Below` of one unit per problem)."""
        below = []
        for p in range(len(self.problems.terms)):
            pieces = [c[p] for c in contributions]
            sums = sum(np.asarray(b.sums, dtype=np.float64) for b in pieces)
            cov = sum(np.asarray(b.covariances[int(b.ids[0])], dtype=np.float64) for b in pieces)
            below.append(Below(sums, np.zeros(1, np.int64), [cov]))
        return below

    def fit(self, contributions: Sequence[Sequence[Below]]) -> list[Any]:
        """The nation solved with what the states give it (:meth:`_below`)."""
        fits = self.problems.fit(below=self._below(contributions))
        hist = self.problems.means(fits)[0]
        hist[self.compiled.zero] = 0.0
        self.hist, self.uncertainty = hist, self.problems.uncertainty(fits)
        self.persons = float(hist.sum())
        return fits

    def subtrees(self, contributions: Sequence[Sequence[Below]]) -> list[Any]:
        """The nation's subtree estimate as BlueDown's root node reads it."""
        fits = self.problems.fit(below=self._below(contributions), downward=False)
        return level_measurements(self.problems.uncertainty(fits), 0)

    def frames(self, fits: Sequence[Any], queries: Sequence[Any], z: float) -> list[pd.DataFrame]:
        """The nation's estimates of ``queries`` with intervals (after :meth:`fit`)."""
        return [_interval_frame(LEVELS[0], np.array(["US"], dtype=object), q,
                                q.answer(self.hist), self.uncertainty.variances(0, q.matrix), z)
                for q in queries]


def _interval_frame(level: str, codes: np.ndarray, query: Any, estimate: np.ndarray,
                    variance: np.ndarray, z: float) -> pd.DataFrame:
    frame = interval_table(level, codes, query, np.asarray(estimate, dtype=np.float64),
                           np.sqrt(np.maximum(variance, 0.0)), z).assign(query=query.name)
    return frame[[level, "query", "answer", "estimate", "se", "lower", "upper"]]


def _write_levels(path: Path, frames: Sequence[pd.DataFrame], meta: Mapping[str, Any]) -> None:
    write_parquet(pa.Table.from_pandas(pd.concat(frames, ignore_index=True),
                                       preserve_index=False), path, metadata=dict(meta))


@dataclass(frozen=True)
class _StateRun(_StateFiles):
    """One state's upward and downward passes (module docstring), its files in ``parts``."""

    queries: tuple[str, ...]
    interval: float
    symmetry: Any
    keep_means: bool = False        # BlueDown's: the parts' bottom estimates and the pieces'

    @property
    def z(self) -> float:
        return z_value(self.interval)

    def _read(self, fips: str) -> tuple[NoisyHierarchy, Any]:
        upper, spec = read_nmf(self.root, states=[fips], state_totals=self.state_totals,
                               down_to="block_group")
        return _measured(upper), spec

    def _problems(self, tree: NoisyHierarchy, spec: Any, fips: str
                  ) -> tuple[GLSProblems, Any, list[str]]:
        problems, compiled, levels = _forest(tree, spec)
        _same_split(self.symmetry, problems.symmetry, f"state {fips}'s levels above its blocks")
        return problems, compiled, levels

    def upward(self, fips: str, ex: Any, log: Callable[[str], None]) -> dict[str, Any]:
        """Step 1 for state ``fips``: returns what the nation and the downward pass need."""
        t0 = time.perf_counter()
        tree, spec = self._read(fips)
        own = [str(p) for p in tree.geography.geocodes[1]]
        pdir = _product_dir(self.root, "persons")
        geo = with_blocks(tree.geography, block_codes(pdir, own))
        split = geo.depth - 2
        cuts = plan_parts(geo, split, self.part_blocks)
        spill = self.parts / f"spill-{fips}"
        shutil.rmtree(spill, ignore_errors=True)
        files, nbytes, _ = _spill_blocks(pdir, own, spill, np.asarray(geo.geocodes[split]),
                                         np.array([stop for _, stop in cuts]), ex)
        files += tree.provenance["files"]
        nbytes += tree.provenance["bytes"]
        log(f"state {fips}: read, {files:,} files; its blocks in {len(cuts):,} "
            f"part{'s' * (len(cuts) > 1)} in {time.perf_counter() - t0:.1f} s")
        lone = np.bincount(geo.parents[-1], minlength=geo.n_units(split)) == 1
        groups = tree.measurements.get(geo.levels[split], {})
        task = _BlocksUpward(spill, tree.provenance, self.queries, self.keep_means)
        items = [(k, part_geography(geo, split, a, b), _lone_measurements(groups, lone, a, b),
                  spill / f"gls-{k:05d}.pkl") for k, (a, b) in enumerate(cuts)]
        gathered, moved = [], np.zeros(geo.n_units(split), bool)
        bar = tqdm(total=len(items), desc=f"state {fips} upward", unit="part",
                   disable=not self.progress, leave=False)
        for (k, below, gave, symmetry), (a, b) in zip(ex.map(task, items), cuts):
            _same_split(self.symmetry, symmetry, f"state {fips}'s blocks (part {k})")
            gathered.append(below)          # in the parts' order: consecutive block groups
            moved[a:b] = gave
            bar.update()
        bar.close()
        below = [Below.join([part[p] for part in gathered]) for p in range(len(gathered[0]))]
        del gathered
        problems, _, levels = self._problems(_undrawn(tree, geo.levels[split], moved), spec,
                                             fips)
        fits = problems.fit(below=below, downward=False)
        contribution = [Below.of_part(f, problems.parents[0], 1) for f in fits]
        pieces = (dict(_pieces_subtrees(problems, fits, levels.index(LEVELS[1])), codes=own)
                  if self.keep_means else None)
        for dataset in (CONSTRAINT, DPQUERY):        # the parts' rows: in their states now
            shutil.rmtree(spill / dataset, ignore_errors=True)
        frame = geo.to_frame()
        up = {"key": self.key(fips), "below": below, "moved": moved, "cuts": cuts, "geo": geo,
              "contribution": contribution, "files": files, "bytes": nbytes, "pieces": pieces,
              "geography": frame[~frame["level"].isin(geo.levels[:2])],
              "block_files": [f"block-{fips}-{k:05d}.parquet" for k in range(len(cuts))]}
        with atomic_path(self.parts / f"up-{fips}.pkl") as path:   # last: the upward is done
            path.write_bytes(pickle.dumps(up, protocol=pickle.HIGHEST_PROTOCOL))
        return _light(up)

    def key(self, fips: str, *more: bytes) -> str:
        """What a state's pass depends on: the file, the parts' size, what is written (and,
        for the downward pass, ``more``: the nation's steps)."""
        digest = hashlib.sha256(f"{Path(self.root).resolve()}|{fips}|{self.part_blocks}|"
                                f"{self.queries}|{self.interval}|{self.keep_means}".encode())
        for m in more:
            digest.update(m)
        return digest.hexdigest()

    def upward_done(self, fips: str) -> dict[str, Any] | None:
        """State ``fips``'s upward pass as an earlier, interrupted run into the same directory
        left it (its record and every part's state), if it is this run's; else None."""
        path = self.parts / f"up-{fips}.pkl"
        try:
            up = pickle.loads(path.read_bytes()) if path.is_file() else None
        except (OSError, pickle.UnpicklingError, EOFError):
            return None
        if not isinstance(up, dict) or up.get("key") != self.key(fips):
            return None
        spill = self.parts / f"spill-{fips}"
        if not all((spill / f"gls-{k:05d}.pkl").is_file() for k in range(len(up["cuts"]))):
            return None
        return _light(up)

    def downward_done(self, fips: str, steps_key: bytes) -> bool:
        """Whether an earlier run into the same directory finished state ``fips``'s downward
        pass under the same nation's steps (its files all there)."""
        marker = self.parts / f"down-{fips}.json"
        try:
            record = json.loads(marker.read_text()) if marker.is_file() else {}
        except (OSError, ValueError):
            return False
        return (record.get("key") == self.key(fips, steps_key)
                and all((self.parts / n).is_file() for n in record.get("files", [])))

    def downward(self, fips: str, up: Mapping[str, Any], steps: Sequence[np.ndarray],
                 pairs: Sequence[Any], ex: Any) -> tuple[pd.DataFrame, bool]:
        """Step 3 for state ``fips`` under the nation's ``steps`` (and its estimate's
        covariance, ``pairs``): its levels' and its parts' files; returns its geography
        below the pieces and whether an earlier run had done it."""
        steps_key = b"".join(np.ascontiguousarray(s).tobytes() for s in steps)
        geo = up["geography"]
        if self.downward_done(fips, steps_key):
            return geo, True
        saved = pickle.loads((self.parts / f"up-{fips}.pkl").read_bytes())
        tree, spec = self._read(fips)
        problems, compiled, levels = self._problems(
            _undrawn(tree, tree.levels[-1], saved["moved"]), spec, fips)
        roots = problems.parents[0]
        fits = problems.fit(below=saved["below"], above=[s[roots] for s in steps])
        for f, (ids, distinct) in zip(fits, pairs):
            f.attach_parents(ids[roots], distinct)
        means, uncertainty = problems.means(fits), problems.uncertainty(fits)
        resolved = _resolved(self.queries)
        names = dict(zip(tree.levels[1:], tree.geography.geocodes[1:]))
        written = []
        for li, lv in enumerate(levels):
            if lv not in names:         # the pieces summed: not a level of the file
                continue
            hist = means[li]
            hist[compiled[lv].zero] = 0.0
            codes = np.asarray(names[lv], dtype=object)
            _write_levels(self.parts / f"{lv}-{fips}.parquet",
                          [_interval_frame(lv, codes, q, q.answer(hist),
                                           uncertainty.variances(li, q.matrix), self.z)
                           for q in resolved], self.meta)
            written.append(f"{lv}-{fips}.parquet")
        bottom = len(levels) - 1
        below_steps = [f.below_steps for f in fits]
        precisions = [f.step_precisions(bottom) for f in fits]
        spill = self.parts / f"spill-{fips}"
        task = _BlocksDownward(self.queries, self.interval, dict(self.meta))
        items = [(spill / f"gls-{k:05d}.pkl", [s[a:b] for s in below_steps],
                  [m[a:b] for m in precisions], self.parts / f"block-{fips}-{k:05d}.parquet")
                 for k, (a, b) in enumerate(saved["cuts"])]
        bar = tqdm(total=len(items), desc=f"state {fips} downward", unit="part",
                   disable=not self.progress, leave=False)
        for _ in ex.map(task, items):
            bar.update()
        bar.close()
        write_json({"key": self.key(fips, steps_key),
                    "files": written + [item[3].name for item in items]},
                   self.parts / f"down-{fips}.json")     # last: the state is done
        return geo, False


def _pieces_subtrees(problems: GLSProblems, fits: Sequence[Any], li: int) -> dict[str, Any]:
    """A state's pieces' subtree estimates (pieces × cells), each piece's signature and the
    signatures' weights, as BlueDown's nation → pieces node reads them (joined over the
    states: :func:`~postproc.methods.gls.bluedown.subtree_measurements`); ``li``: the pieces'
    level in the state's problems."""
    uncertainty = problems.uncertainty(fits)
    distinct, inverse = np.unique(uncertainty.subtree_ids(li), return_inverse=True)
    return {"means": np.asarray(uncertainty.subtree_means(li), dtype=np.float64),
            "ids": inverse.ravel().astype(np.int64),
            "weights": [signature_weight(uncertainty, int(i)) for i in distinct]}


def _light(up: Mapping[str, Any]) -> dict[str, Any]:
    """A state's upward record without what only its downward pass reads again."""
    return {k: v for k, v in up.items() if k not in ("below", "moved", "geo")}


def _same_split(expected: Any, found: Any, where: str) -> None:
    """The succinct path's split must be the same everywhere (the pieces of the tree hand
    each other its problems' arrays)."""
    key = [None if s is None else (s.groups, s.size) for s in (expected, found)]
    if key[0] != key[1]:
        raise PostprocError(f"gls state by state: the nation's levels are solved "
                            f"{'on the general path' if expected is None else 'split'} but "
                            f"{where} {'on the general path' if found is None else 'split'}; "
                            "a run state by state needs one path for every level")


def _lone_measurements(groups: Mapping[str, Measurement], lone: np.ndarray, a: int, b: int
                       ) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The measurements of block groups ``a:b`` that have one block (the others undrawn): a
    part moves them to the block when the block has none."""
    keep = lone[a:b]
    out = {}
    for name, m in groups.items():
        drawn = np.ones(m.values.shape, bool) if m.drawn is None else m.drawn
        drawn = drawn[a:b] & keep[:, None]
        if drawn.any():
            out[name] = (np.where(drawn, m.values[a:b], 0), np.asarray(m.variances)[a:b],
                         drawn)
    return out


@dataclass(frozen=True)
class _BlocksUpward:
    """A part's upward pass on a worker (picklable): its blocks read from the spill, given
    the measurements of its one-block block groups, solved upward; its state kept on disk.
    Returns the part's index, what its block groups need from below (per problem), which
    block groups' measurements moved to their blocks, and the split found."""

    spill: Path
    provenance: Mapping[str, Any]
    queries: tuple[str, ...]
    keep_means: bool = False

    def __call__(self, item: tuple[int, Geography, Mapping[str, Any], Path]
                 ) -> tuple[int, list[Below], np.ndarray, Any]:
        k, geography, lone, path = item
        noisy, spec = _part_noisy(self.spill, k, geography, self.provenance)
        level, groups = geography.levels[2], geography.levels[1]
        given = np.zeros(geography.n_units(1), bool)
        if lone:
            measurements = {lv: dict(ms) for lv, ms in noisy.measurements.items()}
            measurements[groups] = {n: Measurement(n, v, w, d) for n, (v, w, d) in lone.items()}
            given = np.any([d.any(axis=1) for _, _, d in lone.values()], axis=0)
            noisy = measured_at_chain_bottoms(NoisyHierarchy(
                noisy.schema, geography, noisy.workload, measurements, noisy.invariants,
                noisy.provenance))
        left = np.zeros_like(given)
        for m in noisy.measurements.get(groups, {}).values():
            left |= np.ones(m.values.shape[0], bool) if m.drawn is None else m.drawn.any(axis=1)
        compiled = compile_spec(spec, noisy.schema, geography, noisy.invariants)
        matrices = [q.matrix for q in _resolved(self.queries)]
        state, below = part_upward(noisy, compiled, [level], geography.n_units(1), matrices,
                                   keep_means=self.keep_means)
        saved = {"state": state, "blocks": np.asarray(geography.geocodes[2], dtype=object)}
        if self.keep_means:         # BlueDown's node problems: the blocks' published rows
            saved.update(invariants=noisy.invariants, provenance=dict(noisy.provenance))
        with atomic_path(path) as tmp:
            tmp.write_bytes(pickle.dumps(saved, protocol=pickle.HIGHEST_PROTOCOL))
        return k, below, given & ~left, state.symmetry


@dataclass(frozen=True)
class _BlocksDownward:
    """A part's downward pass on a worker (picklable): its blocks' estimates and intervals
    from its block groups' steps and step precisions, written to ``item[3]``."""

    queries: tuple[str, ...]
    interval: float
    metadata: Mapping[str, Any]

    def __call__(self, item: tuple[Path, list[np.ndarray], list[np.ndarray], Path]) -> int:
        state_file, steps, precisions, out = item
        saved = pickle.loads(state_file.read_bytes())     # written by the upward pass
        state, codes = saved["state"], saved["blocks"]
        resolved = _resolved(self.queries)
        matrices = [q.matrix for q in resolved]
        _, answers = part_downward(state, steps, matrices)
        variances = part_variances(state, precisions, matrices)[-1]
        z = z_value(self.interval)
        _write_levels(out, [_interval_frame(LEVELS[-1], codes, q, a, v, z)
                            for q, a, v in zip(resolved, answers, variances)], self.metadata)
        return int(codes.size)
