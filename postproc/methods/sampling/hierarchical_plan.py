"""What one call of :func:`~postproc.methods.sampling.hierarchical.sample_topdown` works from.

* the noise law of each level's measurements (:func:`level_noise`), the queries that enter the
  law, and the terms they add to the log-density and to the start's misfit;
* :class:`_Plan`, the checked inputs of one call, and :class:`_LevelSetup`, the units sampled at
  one level and everything their engine needs;
* :class:`_Clock` (the ``time_limit``) and :class:`_Progress` (the tqdm bar of each level).

Examples
--------
>>> _INTEGER_LAW["laplace"][:2]          # Laplace noise is sampled as its integer analogue
('geometric', 'scale')
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from hierarchy.noisy import NoisyHierarchy
from invariants.compile import LevelConstraints
from invariants.spec import Spec
from postproc.errors import PostprocError
from postproc.result import Result

__all__ = ["level_noise"]

#: How a measurement mechanism's law is used for integer histograms.
_INTEGER_LAW = {"geometric": ("geometric", "z", lambda v: v),
                "discrete_gaussian": ("discrete_gaussian", "sigma2", lambda v: v),
                "laplace": ("geometric", "scale", lambda v: 1.0 / v),
                "gaussian": ("discrete_gaussian", "sigma2", lambda v: v)}


def level_noise(noisy: NoisyHierarchy, level: str, mechanism: str | None = None,
                query: str = "detailed") -> tuple[str, float]:
    """``(law, parameter)`` of a level's measurements of ``query`` for the sampler.

    Raises
    ------
    PostprocError
        ``query`` not measured at ``level``, or no mechanism/parameter in the provenance.

    Examples
    --------
    >>> from hierarchy.budget import Budget
    >>> from hierarchy.measurement import measure
    >>> from hierarchy.queries import e2e_workload
    >>> from hierarchy.schema import E2E_1940
    >>> from hierarchy.tabulation import tabulate
    >>> persons = pd.DataFrame({"state": ["01", "02"], "hhgq": [0, 0], "votingage": [1, 1],
    ...                         "hispanic": [0, 0], "cenrace": [0, 1]})
    >>> truth = tabulate(persons, schema=E2E_1940, levels=["nation", "state"])
    >>> noisy = measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, ["nation", "state"]),
    ...                 "geometric", rng=1)
    >>> level_noise(noisy, "state")          # 10 % of ε/2, sensitivity 2
    ('geometric', 0.025)
    """
    if query not in noisy.queries(level):
        raise PostprocError(f"conditional sampling needs the {query!r} query measured at every "
                            f"level; level {level!r} has {list(noisy.queries(level))}. Give "
                            f"{query!r} a share of the budget at every level")
    name = mechanism or noisy.provenance.get("mechanism", {}).get("name")
    if name not in _INTEGER_LAW:
        raise PostprocError(f"unknown measurement mechanism {name!r}; pass mechanism= one of "
                            f"{sorted(_INTEGER_LAW)}")
    law, key, convert = _INTEGER_LAW[name]
    try:
        value = float(noisy.provenance["parameters"][level][query][key])
    except (KeyError, TypeError, ValueError):
        raise PostprocError(f"the noisy hierarchy's provenance has no {key!r} for the {query!r} "
                            f"query at level {level!r}; it must come from measure()") from None
    return law, convert(value)


def _queries(noisy: NoisyHierarchy, queries: Any) -> list[str]:
    if queries == "detailed":
        return ["detailed"]
    if queries == "all":
        names = set()
        for lv in noisy.levels:
            names |= set(noisy.queries(lv))
        return [q for q in noisy.workload.names if q in names]
    chosen = [str(q) for q in queries] if not isinstance(queries, str) else [queries]
    unknown = [q for q in chosen if q not in noisy.workload.names]
    if unknown or not chosen:
        raise PostprocError(f"queries must be 'detailed', 'all' or names from the workload "
                            f"{list(noisy.workload.names)}; got {queries!r}")
    return chosen


def _answer_terms(noisy: NoisyHierarchy, level: str, queries: list[str], units: np.ndarray,
                  mechanism: str | None):
    """Log-density terms of non-detailed measured queries: answer index per cell and query."""
    answer_of, centre, param = [], [], []
    for q in queries:
        if q == "detailed":
            continue
        Q = noisy.workload[q].matrix.tocsc()
        counts = np.diff(Q.indptr)
        if np.any(counts > 1) or np.any(Q.data != 1):
            raise PostprocError(f"query {q!r} counts a cell in more than one answer; conditional "
                                "sampling supports marginals and recodes (one answer per cell)")
        ans = np.full(Q.shape[1], -1, dtype=np.int64)
        has = counts == 1
        ans[has] = Q.indices[Q.indptr[:-1][has]]
        answer_of.append(ans)
        centre.append(np.asarray(noisy.get(level, q).values, dtype=np.float64)[units])
        law, value = level_noise(noisy, level, mechanism, q)
        param.append(np.full(Q.shape[0], value))
    if not answer_of:
        return None
    # answers beyond the largest used index still need a slot: pad the centre accordingly
    sizes = [int(a.max()) + 1 for a in answer_of]
    centre = np.concatenate([c[:, :k] for c, k in zip(centre, sizes)], axis=1)
    param = np.concatenate([p[:k] for p, k in zip(param, sizes)])
    return {"answer_of": np.stack(answer_of), "centre": centre, "parameter": param}


def _fits(noisy: NoisyHierarchy, level: str, used: list[str], units: np.ndarray,
          y: np.ndarray, mechanism: str | None) -> list[tuple[Any, np.ndarray, float]]:
    """The misfit terms of the start: the detailed cells first (weight = its log-density slope
    ``z``, or ``1/σ``), then every other used query."""
    out = []
    for q in (["detailed"] if "detailed" not in used else []) + used:
        if q == "detailed":
            centre = y[units]
            if "detailed" in noisy.queries(level):
                law, value = level_noise(noisy, level, mechanism, "detailed")
            else:
                law, value = "geometric", 1e-6
            Q = sp.identity(noisy.schema.size, format="csr")
        else:
            centre = np.asarray(noisy.get(level, q).values, dtype=np.float64)[units]
            law, value = level_noise(noisy, level, mechanism, q)
            Q = noisy.workload[q].matrix
        weight = value if law == "geometric" else 1.0 / np.sqrt(value)
        out.append((Q, centre, weight))
    return out


@dataclass(frozen=True, eq=False)
class _LevelSetup:
    """The units that are sampled at one level and everything their engine needs.

    ``hist`` is the level's histogram (units × cells), filled in by the sampler: a parent with
    one child is copied into it here (``copies``, indices of those parents); the others'
    children (``units``, in ``groups`` of siblings; ``group_of`` gives each unit's group) are
    drawn. ``multi`` are the parents with two or more children and ``parents`` their released
    histograms; at the root every unit is its own group and there are no parents.
    """

    level: str
    lc: LevelConstraints
    y: np.ndarray
    hist: np.ndarray
    units: np.ndarray
    groups: list[slice]
    upper: np.ndarray
    step: np.ndarray
    group_of: np.ndarray
    cross: bool
    parents: np.ndarray | None
    parent_hist: np.ndarray | None
    multi: np.ndarray
    parent_codes: np.ndarray | None
    copies: np.ndarray

    @classmethod
    def root(cls, noisy: NoisyHierarchy, lc: LevelConstraints, sd_step: float) -> _LevelSetup:
        """The root level: every unit sampled on its own, capped only by its zero cells."""
        geo, n = noisy.geography, noisy.schema.size
        y, hist = _centre_and_hist(noisy, 0)
        units = np.arange(geo.n_units(0))
        groups = [slice(int(u), int(u) + 1) for u in units]
        upper = np.where(lc.zero, 0.0, np.inf)
        step = np.full((units.size, n), float(max(1.0, sd_step)))
        return cls(level=geo.levels[0], lc=lc, y=y, hist=hist, units=units, groups=groups,
                   upper=upper, step=step, group_of=units, cross=False, parents=None,
                   parent_hist=None, multi=units, parent_codes=None,
                   copies=np.zeros(0, np.int64))

    @classmethod
    def below(cls, noisy: NoisyHierarchy, lc: LevelConstraints, li: int,
              parent_hist: np.ndarray, sd_step: float) -> _LevelSetup:
        """Level ``li`` under the released ``parent_hist``: only children must be copied, the
        children of the other parents are sampled, each capped by its parent."""
        geo = noisy.geography
        y, hist = _centre_and_hist(noisy, li)
        offsets = geo.child_offsets(li - 1)
        k = np.diff(offsets)
        single = np.flatnonzero(k == 1)
        hist[offsets[single]] = parent_hist[single]
        multi = np.flatnonzero(k >= 2)
        groups = [slice(int(offsets[p]), int(offsets[p + 1])) for p in multi]
        units = (np.concatenate([np.arange(g.start, g.stop) for g in groups])
                 if groups else np.zeros(0, np.int64))
        group_of = np.repeat(np.arange(multi.size), k[multi])
        cap = parent_hist[multi][group_of].astype(np.float64)
        upper = np.where(lc.rows_of(units)[2], 0.0, cap)
        share = cap / k[multi][group_of][:, None]
        step = np.maximum(1.0, np.minimum(sd_step, share))
        return cls(level=geo.levels[li], lc=lc, y=y, hist=hist, units=units, groups=groups,
                   upper=upper, step=step, group_of=group_of, cross=True,
                   parents=parent_hist[multi], parent_hist=parent_hist, multi=multi,
                   parent_codes=geo.geocodes[li - 1][multi], copies=single)


def _centre_and_hist(noisy: NoisyHierarchy, li: int) -> tuple[np.ndarray, np.ndarray]:
    """A level's detailed measurements (zeros when it has none: only the start uses them then)
    and its empty int64 histogram."""
    geo, n = noisy.geography, noisy.schema.size
    level = geo.levels[li]
    if "detailed" in noisy.queries(level):
        y = np.asarray(noisy.get(level, "detailed").values, dtype=np.float64)
    else:   # only the start uses y then
        y = np.zeros((geo.n_units(li), n))
    return y, np.zeros((geo.n_units(li), n), dtype=np.int64)


@dataclass(frozen=True, eq=False)
class _Plan:
    """The checked inputs of one :func:`~postproc.methods.sampling.hierarchical.sample_topdown`
    call and what every level needs from them: each level's law (``laws``, of the detailed
    query, or the first used one) and its smallest noise sd among the used queries (``sds``),
    the compiled constraints, and the start (``kind``, and a ``given`` TopDown result)."""

    noisy: NoisyHierarchy
    spec: Spec
    source: Any
    used: list[str]
    laws: list[tuple[str, float]]
    sds: list[float]
    compiled: dict[str, LevelConstraints]
    kind: str
    given: Result | None
    sweeps: int
    retries: int
    step_factor: float
    mechanism: str | None
    time_limit: float | None

    @property
    def geo(self):
        return self.noisy.geography

    def setup(self, li: int, parent_hist: np.ndarray | None) -> _LevelSetup:
        """The units sampled at level ``li`` (under the released ``parent_hist`` below the
        root)."""
        lc = self.compiled[self.geo.levels[li]]
        sd_step = self.sds[li] * self.step_factor
        if li == 0:
            return _LevelSetup.root(self.noisy, lc, sd_step)
        return _LevelSetup.below(self.noisy, lc, li, parent_hist, sd_step)


class _Clock:
    """The ``time_limit`` of one call: what is being done, seconds left, and the error naming
    the level and what was done when they run out."""

    def __init__(self, limit: float | None, sweeps: int, start: str):
        self.limit, self.sweeps, self.start = limit, sweeps, start
        self.t0 = time.perf_counter()
        self.level, self.doing, self.done = "", "starting", []

    def at(self, level: str, doing: str) -> None:
        self.level, self.doing = level, doing
        self.check()

    def remaining(self) -> float | None:
        return None if self.limit is None else self.limit - (time.perf_counter() - self.t0)

    def check(self) -> None:
        left = self.remaining()
        if left is not None and left <= 0:
            raise self.error()

    def error(self) -> PostprocError:
        advice = [f"a larger time_limit (now {self.limit:g} s)",
                  f"fewer sweeps (now {self.sweeps} per level)"]
        if self.start == "l1":
            advice.append("start='topdown' (the default: TopDown's node solves instead of one "
                          "weighted-L1 LP per level, which can take minutes on large levels)")
        return PostprocError(
            f"conditional sampling stopped by time_limit={self.limit:g} s at level "
            f"{self.level!r}, while {self.doing}, after "
            f"{time.perf_counter() - self.t0:.1f} s; levels finished: "
            f"{', '.join(self.done) or 'none'}. To go on, try " + ", or ".join(advice))


class _Progress:
    """A tqdm bar of the current level's sweeps on stderr; every call does nothing when
    ``progress`` is off."""

    def __init__(self, progress: bool, sweeps: int, level: str):
        self.progress, self.sweeps = progress, sweeps
        self.bar = self._open(level)

    def _open(self, level: str):
        if not self.progress:
            return None
        import sys

        from tqdm.auto import tqdm

        return tqdm(total=self.sweeps, desc=f"sampling {level}", unit="sweep", file=sys.stderr,
                    leave=True)

    def postfix(self, text: str) -> None:
        """Say what the level is doing: its sweeps, its start or its split check."""
        if self.bar is not None:
            self.bar.set_postfix_str(text)

    def update(self, sweeps: int) -> None:
        if self.bar is not None:
            self.bar.update(sweeps)

    def extend(self, sweeps: int) -> None:
        """``sweeps`` more to run (a retry)."""
        if self.bar is not None:
            self.bar.total += sweeps

    def next_level(self, level: str | None) -> None:
        """Close the level's bar and open the next one's (none after the last level)."""
        if self.bar is not None:
            self.bar.close()
            self.bar = None if level is None else self._open(level)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
