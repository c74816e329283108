"""What a conditional sampler returns: the released draw, the chain and its diagnostics."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from postproc.methods.sampling.diagnostics import summarize_ess
from postproc.methods.sampling.target import ConditionalTarget

__all__ = ["SamplingResult"]


@dataclass(frozen=True, eq=False)
class SamplingResult:
    """A conditional sampler's output.

    Attributes
    ----------
    sampler : {'mis', 'lattice'}
    released : array (n,)
        The draw to publish: the chain's final state (chain 0). int64 for integer data.
    chain : array (chains, kept, n)
        The kept states after burn-in and thinning (MIS: one chain).
    acceptance_rate : float
        Accepted / proposed after burn-in (lattice: over single moves).
    proposals : int
        Proposals made, burn-in included (MIS: iterations; lattice: single moves).
    seconds : float
        Wall time of the sampling itself (no tuning, no diagnostics).
    ess : array (n,)
        Effective sample size of the kept draws per cell (``nan`` for constant cells).
    randomness : dict
        Provenance of the randomness: ``mode`` (``'release'`` or ``'simulation'``), ``label``,
        ``safe_for_release``, seed and stream.
    settings : dict
        The sampler's settings (burn-in, thinning, ``I``/``I^c``, ``ε̃``, step size, chains, …).
    target : ConditionalTarget
    final_states : array (chains, n)
        Every chain's final state (row 0 is ``released``): with several chains started at the
        same point these are independent releases.

    Examples
    --------
    >>> from postproc.methods.sampling import conditional_target, sample_lattice
    >>> t = conditional_target([[1, 1, 1]], [9], centre=[3, 3, 3], epsilon=1.0)
    >>> res = sample_lattice(t, draws=200, rng=0, chains=2)
    >>> res.chain.shape, res.final_states.shape, res.invariants_hold
    ((2, 200, 3), (2, 3), True)
    >>> sorted(res.to_dict())[:4]
    ['acceptance_rate', 'ess', 'invariants_hold', 'kept_draws']
    """

    sampler: str
    released: np.ndarray
    chain: np.ndarray = field(repr=False)
    acceptance_rate: float
    proposals: int
    seconds: float
    ess: np.ndarray = field(repr=False)
    randomness: Mapping[str, Any] = field(repr=False)
    settings: Mapping[str, Any] = field(repr=False)
    target: ConditionalTarget = field(repr=False)
    final_states: np.ndarray | None = field(default=None, repr=False)

    def __post_init__(self):
        if self.final_states is None:
            object.__setattr__(self, "final_states", self.released[None].copy())

    @property
    def mode(self) -> str:
        """``'release'`` or ``'simulation'``."""
        return str(self.randomness.get("mode"))

    @property
    def safe_for_release(self) -> bool:
        return bool(self.randomness.get("safe_for_release", False))

    @property
    def ess_min(self) -> float:
        return summarize_ess(self.ess)["min"]

    @property
    def ess_median(self) -> float:
        return summarize_ess(self.ess)["median"]

    @property
    def ess_per_second(self) -> float:
        """Smallest per-cell ESS divided by the sampling time."""
        return self.ess_min / self.seconds if self.seconds > 0 else math.nan

    @property
    def proposals_per_second(self) -> float:
        return self.proposals / self.seconds if self.seconds > 0 else math.nan

    @property
    def invariants_hold(self) -> bool:
        """The released draw and every kept state are in ``S*`` (exact for integer data)."""
        states = np.concatenate([self.released[None], self.chain.reshape(-1, self.target.n)])
        return bool(np.all(self.target.feasible(states)))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready summary (no chain)."""
        def num(v):
            v = float(v)
            return v if math.isfinite(v) else None

        released = self.released.tolist()
        return {
            "sampler": self.sampler, "released": released,
            "acceptance_rate": num(self.acceptance_rate), "proposals": int(self.proposals),
            "seconds": num(self.seconds), "proposals_per_second": num(self.proposals_per_second),
            "ess": {"min": num(self.ess_min), "median": num(self.ess_median),
                    "per_cell": [num(v) for v in self.ess],
                    "min_per_second": num(self.ess_per_second)},
            "kept_draws": int(self.chain.shape[0] * self.chain.shape[1]),
            "invariants_hold": self.invariants_hold,
            "target": self.target.describe(), "settings": _json(dict(self.settings)),
            "randomness": dict(self.randomness),
        }


def _json(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        v = float(value)
        return v if math.isfinite(v) else None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
