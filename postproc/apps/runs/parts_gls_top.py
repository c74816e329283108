"""The top of a tree cut into parts, for ``gls`` and ``bluedown`` in parts
(:mod:`postproc.apps.runs.parts_gls`): the GLS from the root to the split level with what the
parts give it (:func:`_top`; cut under the level above the split when the split units are many,
:func:`_split_top`), the split units' ``M`` kept for the parts' intervals (:class:`_Precisions`),
and what both steps share (the parts' tasks and their mapping over an executor).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa

from hierarchy.frames import resolve_query
from hierarchy.geography import Geography
from hierarchy.io.storage import write_parquet
from hierarchy.noisy import NoisyHierarchy
from postproc.apps.runs.config import RunConfig
from postproc.apps.runs.parts_outputs import _meta
from postproc.apps.runs.parts_plan import _progress, _Run
from postproc.errors import PostprocError
from postproc.intervals import interval_table, z_value
from postproc.methods.gls.information import SharedCovariances
from postproc.methods.gls.method import GLSProblems, gls_problems
from postproc.methods.gls.tree import Below
from postproc.result import Result


@dataclass(frozen=True)
class _GLSTask:
    """One part for a worker: its index and geography, and (downward) its split units' steps
    per problem, a row per split unit of the part, and those rows' span in the split level."""

    index: int
    geography: Geography
    above: tuple[np.ndarray, ...] | None = None
    rows: tuple[int, int] | None = None


class _Precisions:
    """Each split unit's ``M = Σ⁺ V Σ⁺ − Σ⁺`` per problem (split units × k × k), written by the
    top as it finds them and read by the parts' downward passes: one ``.npy`` file per problem
    in ``parts/``, mapped from disk (at national scale 80,841 tracts × 2 × 32 × 32 numbers)."""

    def __init__(self, parts_dir: Path, units: int):
        self.parts_dir, self.units = parts_dir, units
        self.problems = 0

    def path(self, p: int) -> Path:
        return self.parts_dir / f"precision-{p}.npy"

    def write(self, first: int, fits: Sequence[Any], level: int) -> None:
        """The ``M`` of the units of ``level`` of ``fits`` (one per problem), split units
        ``first`` on."""
        for p, fit in enumerate(fits):
            m = fit.step_precisions(level)
            if p >= self.problems:
                np.lib.format.open_memmap(self.path(p), mode="w+", dtype=np.float64,
                                          shape=(self.units, *m.shape[1:])).flush()
                self.problems = p + 1
            out = np.load(self.path(p), mmap_mode="r+")
            out[first:first + m.shape[0]] = m
            out.flush()
            del out

    def rows(self, first: int, stop: int) -> list[np.ndarray]:
        """Split units ``first:stop``'s ``M`` per problem."""
        return [np.array(np.load(self.path(p), mmap_mode="r")[first:stop])
                for p in range(self.problems)]

    def remove(self) -> None:
        for p in range(self.problems):
            self.path(p).unlink(missing_ok=True)


def _query(config: RunConfig, name: str) -> Any:
    """A workload query or a query expression, by name."""
    return resolve_query(name, config.schema, config.workload)


def top_problems(noisy: NoisyHierarchy, compiled_top: Mapping[str, Any]
                 ) -> tuple[GLSProblems, NoisyHierarchy]:
    """The top's GLS problems and the top's measurement without its noisy answers (its
    geography, published statistics and provenance): the caller drops the measurement, whose
    answers the problems hold in their own form (at national scale about 2 GB the top no
    longer carries).

    Examples
    --------
    >>> from hierarchy import E2E_1940, Budget, e2e_workload, measure, synthesize_1940, tabulate
    >>> from invariants.compile import compile_spec
    >>> from invariants.spec import Spec
    >>> truth = tabulate(synthesize_1940(300, seed=1).persons, schema=E2E_1940, levels=["n"])
    >>> noisy = measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, ["n"]), rng=2)
    >>> problems, shell = top_problems(noisy, compile_spec(Spec(), E2E_1940, noisy.geography,
    ...                                                    {}))
    >>> dict(shell.measurements), len(problems.parents)
    ({}, 1)
    """
    problems = gls_problems(noisy, compiled_top)
    return problems, NoisyHierarchy(noisy.schema, noisy.geography, noisy.workload, {},
                                    noisy.invariants, noisy.provenance)


def _top(run: _Run, problems: GLSProblems, noisy: NoisyHierarchy,
         compiled_top: Mapping[str, Any], below: list[Below],
         queries: Sequence[str], interval: float, precisions: _Precisions
         ) -> tuple[list[np.ndarray], dict[str, Any]]:
    """Step 3: the GLS from the root to the split level with what the parts give it; every
    level's estimates of ``queries`` with intervals written, the split units' ``M`` to
    ``precisions``. Returns the split units' steps per problem and the problems' structure
    (with ``persons``: the root's estimate).

    With more than :data:`TOP_UNITS` split units the top is itself cut under the level above
    the split (:func:`_split_top`): its memory is that of the levels above and one chunk of
    split units, not of every split unit's operators at once."""
    config, directory = run.config, run.directory
    if problems.parents[-1].size > TOP_UNITS and len(problems.parents) > 2:
        return _split_top(run, noisy, compiled_top, problems, below, queries, interval,
                          precisions)
    fits = problems.fit(below=below)
    del below
    precisions.write(0, fits, len(run.top_levels) - 1)
    means = problems.means(fits)
    for m, lv in zip(means, run.top_levels):
        m[compiled_top[lv].zero] = 0.0        # 0 to float rounding already (exact_zeros)
    top = Result("gls", config.schema, noisy.geography, config.workload, tuple(means),
                 {"noisy": dict(noisy.provenance), **problems.structure},
                 uncertainty=problems.uncertainty(fits))
    for lv in run.top_levels:
        _write_intervals(config, directory, lv, [top.intervals(lv, q, interval=interval)
                                                 for q in queries], queries)
    return ([fit.below_steps for fit in fits],
            {**problems.structure, "persons": float(top.histograms[0].sum())})


def _write_intervals(config: RunConfig, directory: Path, level: str,
                     frames: Sequence[pd.DataFrame], queries: Sequence[str]) -> None:
    """A level's interval frames (one per query) as ``<level>.parquet``."""
    frame = pd.concat([f.assign(query=q) for f, q in zip(frames, queries)], ignore_index=True)
    frame = frame[[level, "query", "answer", "estimate", "se", "lower", "upper"]]
    write_parquet(pa.Table.from_pandas(frame, preserve_index=False),
                  directory / f"{level}.parquet", metadata=_meta(config))


def _split_top(run: _Run, noisy: NoisyHierarchy, compiled_top: Mapping[str, Any],
               problems: GLSProblems, below: list[Below], queries: Sequence[str],
               interval: float, precisions: _Precisions
               ) -> tuple[list[np.ndarray], dict[str, Any]]:
    """The top cut under the level above the split (the county): the split units (tracts) in
    chunks of consecutive parents, upward with what the parts give them; the levels above with
    what the chunks give them; then each chunk again, under its parents' steps, for its
    estimates, intervals and steps. The same estimates and covariances as the top whole
    (``tests/test_gls_parts.py``)."""
    config, directory = run.config, run.directory
    geo, depth = noisy.geography, len(problems.parents)
    parent = problems.parents[-1]
    chunks = _chunks(parent, TOP_UNITS)
    n_parents = problems.parents[-2].size
    gathered = _Gathered(n_parents)
    for _ in _upward_chunks(problems, below, chunks, gathered):         # upward, by chunk
        pass
    upper = problems.upper(depth - 1)
    fits_up = upper.fit(below=gathered.below())                         # the levels above
    del gathered
    means = upper.means(fits_up)
    for m, lv in zip(means, run.top_levels):
        m[compiled_top[lv].zero] = 0.0
    top = Result("gls", config.schema, geo.top(depth - 1), config.workload,
                 tuple(means),
                 {"noisy": dict(noisy.provenance), **problems.structure},
                 uncertainty=upper.uncertainty(fits_up))
    for lv in run.top_levels[:-1]:
        _write_intervals(config, directory, lv, [top.intervals(lv, q, interval=interval)
                                                 for q in queries], queries)
    pairs = [f.pairs_for_children(depth - 2) for f in fits_up]
    steps = [np.empty((parent.size, *f.below_steps.shape[1:])) for f in fits_up]
    split_level, frames = run.top_levels[-1], [[] for _ in queries]
    codes = np.asarray(geo.geocodes[depth - 1])
    z = z_value(interval)
    for c0, c1, t0, t1 in chunks:                                       # downward, by chunk
        part = problems.bottom_rows(slice(t0, t1))
        local = parent[t0:t1]
        fits = part.fit(below=[_rows(b, t0, t1) for b in below],
                        above=[f.below_steps[local] for f in fits_up])
        for p, (f, (ids, distinct)) in enumerate(zip(fits, pairs)):
            f.attach_parents(ids[local], distinct)
            steps[p][t0:t1] = f.below_steps
        precisions.write(t0, fits, 0)
        hist = part.join([f.means[0] for f in fits])
        hist[compiled_top[split_level].zero[t0:t1]] = 0.0
        uncertainty = part.uncertainty(fits)
        for i, name in enumerate(queries):
            frames[i].append(_interval_rows(config, split_level, codes[t0:t1], name, hist,
                                            uncertainty, z))
    _write_intervals(config, directory, split_level,
                     [pd.concat(f, ignore_index=True) for f in frames], queries)
    return steps, {**problems.structure, "persons": float(top.histograms[0].sum()),
                   "top_cut_under": run.top_levels[-2]}


#: Split units above which the top is cut under the level above them, and the most in a chunk
#: (the 331M nation's 80,841 tracts at once needed more than 23 GiB; in chunks of 20,000 the
#: top's peak was 18.8 GiB).
TOP_UNITS = 10_000


def _chunks(parent: np.ndarray, most: int) -> list[tuple[int, int, int, int]]:
    """Runs of consecutive parents with at most ``most`` children (a parent with more is a run
    of its own): ``(first parent, stop, first child, stop)``."""
    starts = np.flatnonzero(np.r_[True, parent[1:] != parent[:-1]])
    stops = np.r_[starts[1:], parent.size]
    out, lo = [], 0
    while lo < starts.size:
        hi = lo + 1
        while hi < starts.size and stops[hi] - starts[lo] <= most:
            hi += 1
        out.append((int(parent[starts[lo]]), int(parent[starts[hi - 1]]) + 1,
                    int(starts[lo]), int(stops[hi - 1])))
        lo = hi
    return out


def _upward_chunks(problems: GLSProblems, below: Sequence[Below],
                   chunks: Sequence[tuple[int, int, int, int]], gathered: "_Gathered"
                   ) -> Iterator[tuple[int, int, GLSProblems, list[Any]]]:
    """The split units solved upward chunk by chunk (:func:`_chunks`) with what the parts give
    them (``below``), each chunk's sums and covariances added to ``gathered`` for the level
    above; yields each chunk's first and stop split unit, its problems and its fits."""
    parent = problems.parents[-1]
    for c0, c1, t0, t1 in chunks:
        chunk = problems.bottom_rows(slice(t0, t1))
        fits = chunk.fit(below=[_rows(b, t0, t1) for b in below], downward=False)
        gathered.add(c0, [Below.of_part(f, parent[t0:t1] - c0, c1 - c0) for f in fits])
        yield t0, t1, chunk, fits


def _rows(below: Below, t0: int, t1: int) -> Below:
    """A Below's rows ``t0:t1``."""
    return Below(below.sums[t0:t1], below.ids[t0:t1], below.covariances)


def _interval_rows(config: RunConfig, level: str, codes: np.ndarray, name: str,
                   hist: np.ndarray, uncertainty: Any, z: float) -> pd.DataFrame:
    """One query's estimates, standard errors and intervals for some units of a level (the
    columns of :func:`postproc.intervals.interval_frame`)."""
    q = _query(config, name)
    return interval_table(level, codes, q, q.answer(hist).astype(np.float64),
                          np.sqrt(uncertainty.variances(0, q.matrix)), z)


class _Gathered:
    """What the parts' upward passes give the split units, gathered as they arrive: their
    children's sums in one array per problem, their covariances kept once each."""

    def __init__(self, units: int):
        self.units = units
        self.sums: list[np.ndarray] = []
        self.ids: list[np.ndarray] = []
        self.shared: list[SharedCovariances] = []

    def add(self, first: int, pieces: Sequence[Below]) -> None:
        """A part's pieces (one per problem) for the split units from ``first`` on."""
        if not self.sums:
            for piece in pieces:
                self.sums.append(np.empty((self.units, *np.shape(piece.sums)[1:])))
                self.ids.append(np.full(self.units, -1, dtype=np.int64))
                self.shared.append(SharedCovariances())
        for p, piece in enumerate(pieces):
            stop = first + np.shape(piece.sums)[0]
            self.sums[p][first:stop] = piece.sums
            self.ids[p][first:stop] = self.shared[p].ids_of(piece.covariances)[piece.ids]

    def below(self) -> list[Below]:
        """One :class:`Below` per problem (every split unit given)."""
        if any((ids < 0).any() for ids in self.ids):
            raise PostprocError("gls in parts: a split unit got nothing from below (a part "
                                "that did not finish)")
        return [Below(s, i, c.items) for s, i, c in zip(self.sums, self.ids, self.shared)]


def _mapped(ex: Any, solver: Callable[[_GLSTask], Any], tasks: Sequence[_GLSTask], progress: bool,
            what: str) -> Iterator[Any]:
    """``solver`` over ``tasks`` on the executor, with a progress bar."""
    bar = _progress(progress, len(tasks), what)
    for item in ex.map(solver, tasks):
        if bar is not None:
            bar.update(1)
        yield item
    if bar is not None:
        bar.close()
