"""Sources of randomness for privacy mechanisms.

Two modes, explicit everywhere:

* **release** — random bits come from the operating system's cryptographically secure generator
  (``os.urandom``, i.e. ``getrandom(2)`` on Linux). It cannot be seeded, so nobody can reproduce
  the noise. Use it for anything that will be published.
* **simulation** — random bits come from a seeded ``numpy.random.Generator`` (PCG64). Runs are
  reproducible, which is what experiments need, and for the same reason the output is **not safe
  to release**: every output made in this mode carries :data:`UNSAFE_LABEL` in its provenance.

Every sampler in :mod:`hierarchy.mechanisms` draws its randomness through
:meth:`Randomness.random_raw` (64-bit words), so release and simulation run exactly the same
sampling code and differ only in where the bits come from: simulations exercise the release path.

Examples
--------
>>> rng = Randomness.simulation(7)
>>> rng.mode, rng.safe_for_release
('simulation', False)
>>> bool(np.array_equal(rng.child(1).random_raw(3),
...                      Randomness.simulation(7).child(1).random_raw(3)))
True
>>> as_randomness(None).mode
'release'
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from hierarchy.errors import HierarchyError

__all__ = ["Randomness", "as_randomness", "UNSAFE_LABEL", "RELEASE_LABEL"]

UNSAFE_LABEL = (
    "SIMULATION MODE - seeded, reproducible randomness: anyone with the seed can recompute the "
    "noise. NOT SAFE FOR A REAL RELEASE."
)
RELEASE_LABEL = ("release mode - noise from the operating system's cryptographically secure "
                 "generator")

_URANDOM_CHUNK_WORDS = 1 << 22  # 32 MiB of random bytes per os.urandom call


class Randomness:
    """A source of random 64-bit words in *release* or *simulation* mode.

    Construct with :meth:`release` or :meth:`simulation`; :func:`as_randomness` normalises the
    ``rng`` argument every public function accepts.

    Parameters
    ----------
    mode : {'release', 'simulation'}
    seed : int or None
        The simulation seed (``None`` in release mode, or when a caller's own generator was
        wrapped).
    generator : numpy.random.Generator or None
        The simulation generator; ``None`` in release mode.
    key : tuple of int
        The spawn key of a child stream (see :meth:`child`).

    Raises
    ------
    HierarchyError
        An unknown mode, a seed or generator in release mode, or simulation mode without one.

    Examples
    --------
    A seeded stream for an experiment, with a child stream per level (fair dice rolls here):

    >>> rng = Randomness.simulation(7)
    >>> rng.child(2)
    Randomness.simulation(seed=7, stream=(2,))
    >>> rng.child(2).integers_below([6, 6, 6]).tolist()
    [5, 4, 3]
    >>> rng.provenance()["label"]
    'SIMULATION MODE - seeded, reproducible randomness: anyone with the seed can recompute the
    noise. NOT SAFE FOR A REAL RELEASE.'

    Release mode draws from the operating system and cannot be seeded:

    >>> Randomness.release().safe_for_release
    True
    >>> Randomness("release", seed=3)
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: release mode cannot be seeded; use Randomness.simulation(seed)
    for reproducible (unsafe) runs
    """

    __slots__ = ("mode", "seed", "key", "_generator", "origin")

    def __init__(self, mode: str, seed: int | None = None,
                 generator: np.random.Generator | None = None, key: tuple[int, ...] = ()):
        if mode not in ("release", "simulation"):
            raise HierarchyError(f"randomness mode must be 'release' or 'simulation', not {mode!r}")
        if mode == "release" and (seed is not None or generator is not None):
            raise HierarchyError("release mode cannot be seeded; use Randomness.simulation(seed) "
                                 "for reproducible (unsafe) runs")
        if mode == "simulation" and generator is None:
            raise HierarchyError("simulation mode needs a seed or a numpy Generator")
        self.mode = mode
        self.seed = seed
        self.key = tuple(key)
        self._generator = generator
        # A caller's own generator has no seed: record what recomputes its stream instead.
        self.origin = _generator_origin(generator) if seed is None and generator is not None \
            else None

    # -- constructors -------------------------------------------------------------------------
    @classmethod
    def release(cls) -> "Randomness":
        """Cryptographically secure, unseedable randomness for real releases."""
        return cls("release")

    @classmethod
    def simulation(cls, seed: int) -> "Randomness":
        """Seeded, reproducible randomness for experiments. Unsafe for releases."""
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise HierarchyError(f"a simulation seed must be a non-negative integer, not {seed!r}")
        seed = int(seed)
        return cls("simulation", seed=seed, generator=np.random.Generator(np.random.PCG64(seed)))

    # -- properties ---------------------------------------------------------------------------
    @property
    def safe_for_release(self) -> bool:
        """True only in release mode."""
        return self.mode == "release"

    @property
    def label(self) -> str:
        """The line every output made with this randomness carries."""
        return RELEASE_LABEL if self.safe_for_release else UNSAFE_LABEL

    def provenance(self) -> dict[str, Any]:
        """A JSON-ready description for output metadata."""
        out = {"mode": self.mode, "seed": self.seed, "stream": list(self.key),
               "safe_for_release": self.safe_for_release, "label": self.label}
        if self.origin is not None:
            out["generator"] = self.origin
        return out

    def __repr__(self) -> str:
        if self.mode == "release":
            return "Randomness.release()"
        return f"Randomness.simulation(seed={self.seed}, stream={self.key})"

    # -- streams ------------------------------------------------------------------------------
    def child(self, *key: int) -> "Randomness":
        """An independent stream identified by ``key``.

        In simulation mode the child depends only on the seed and the key (not on how much this
        stream has been used), so a level or a batch can be re-drawn identically on resume or on
        another worker. In release mode every child is a fresh secure source.
        """
        if self.mode == "release":
            return Randomness.release()
        if self.seed is None:
            # A caller-supplied generator has no seed to derive from: spawn from its state.
            seq = self._generator.bit_generator.seed_seq.spawn(1)[0]
            return Randomness("simulation", None, np.random.Generator(np.random.PCG64(seq)),
                              self.key + tuple(key))
        full = self.key + tuple(int(k) for k in key)
        seq = np.random.SeedSequence(self.seed, spawn_key=full)
        return Randomness("simulation", self.seed, np.random.Generator(np.random.PCG64(seq)), full)

    @property
    def generator(self) -> np.random.Generator:
        """A numpy Generator for work that is *not* a privacy mechanism (e.g. a bootstrap).

        In release mode it is seeded from the secure source, so it is unpredictable, but its
        output must still not be used as privacy noise.
        """
        if self._generator is not None:
            return self._generator
        seed = int.from_bytes(os.urandom(32), "little")
        return np.random.Generator(np.random.PCG64(seed))

    # -- bits ---------------------------------------------------------------------------------
    def random_raw(self, n: int) -> np.ndarray:
        """``n`` independent uniformly random 64-bit words (``uint64``)."""
        n = int(n)
        if n < 0:
            raise HierarchyError(f"cannot draw a negative number ({n}) of random words")
        if self._generator is not None:
            return self._generator.bit_generator.random_raw(n)
        if n <= _URANDOM_CHUNK_WORDS:
            return np.frombuffer(os.urandom(8 * n), dtype=np.uint64)
        out = np.empty(n, dtype=np.uint64)
        for start in range(0, n, _URANDOM_CHUNK_WORDS):
            stop = min(n, start + _URANDOM_CHUNK_WORDS)
            out[start:stop] = np.frombuffer(os.urandom(8 * (stop - start)), dtype=np.uint64)
        return out

    def uniform(self, n: int) -> np.ndarray:
        """``n`` uniform doubles on the open-closed interval (0, 1], with 53 random bits each.

        Zero is excluded so that ``log(u)`` is always finite.
        """
        words = self.random_raw(n)
        return ((words >> np.uint64(11)).astype(np.float64) + 1.0) * (1.0 / 9007199254740992.0)

    def integers_below(self, bound) -> np.ndarray:
        """Exactly uniform integers in ``[0, bound)`` for each element of ``bound`` (int64, ≥ 1).

        Uses masked rejection on 64-bit words, so it is exact for every bound up to 2**62.
        """
        bound = np.asarray(bound, dtype=np.int64)
        if bound.size and (bound.min() < 1 or bound.max() > (1 << 62)):
            raise HierarchyError("integers_below needs bounds in [1, 2**62]")
        flat = bound.ravel()
        out = np.empty(flat.shape, dtype=np.int64)
        if not flat.size:
            return out.reshape(bound.shape)
        # an all-ones mask >= bound - 1: rejection from [0, mask] is exact for any such mask
        if flat.min() == flat.max():   # one bound (the usual case): one Python-int mask
            mask: Any = np.uint64((1 << (int(flat[0]) - 1).bit_length()) - 1)
        else:
            # frexp's exponent is the bit length, or one more where float64 rounds bound - 1
            # up to a power of two (above 2**53): the mask is never too small
            _, exponent = np.frexp((flat - 1).astype(np.float64))
            mask = (np.uint64(1) << exponent.astype(np.uint64)) - np.uint64(1)
        todo = np.arange(flat.size)
        while todo.size:
            draw = (self.random_raw(todo.size) & (mask if mask.ndim == 0 else mask[todo])
                    ).astype(np.int64)
            ok = draw < flat[todo]
            out[todo[ok]] = draw[ok]
            todo = todo[~ok]
        return out.reshape(bound.shape)


def _generator_origin(generator: np.random.Generator) -> dict[str, Any]:
    """What recomputes a caller's generator's stream: its bit generator, its ``SeedSequence``
    entropy and spawn key, and its state when it was wrapped (as JSON-ready values)."""
    bit = generator.bit_generator
    seq = getattr(bit, "seed_seq", None)
    entropy = getattr(seq, "entropy", None)
    out: dict[str, Any] = {
        "bit_generator": type(bit).__name__,
        "seed_sequence_entropy": None if entropy is None else str(entropy),
        "spawn_key": [int(k) for k in getattr(seq, "spawn_key", ())],
        "state": _json_state(bit.state)}
    return out


def _json_state(state: Any) -> Any:
    """A bit generator's state with its integers as strings (exact in any JSON reader)."""
    if isinstance(state, dict):
        return {k: _json_state(v) for k, v in state.items()}
    if isinstance(state, (int, np.integer)) and not isinstance(state, bool):
        return str(int(state))
    if isinstance(state, np.ndarray):
        return [str(int(v)) for v in state.ravel()]
    return state


def as_randomness(rng: Any) -> Randomness:
    """Normalise an ``rng`` argument to a :class:`Randomness`.

    ``None`` means **release** mode (secure by default); an ``int`` is a simulation seed; a
    ``numpy.random.Generator`` is wrapped as simulation randomness; a :class:`Randomness` is
    returned unchanged.

    Parameters
    ----------
    rng : None, int, numpy.random.Generator or Randomness

    Returns
    -------
    Randomness

    Raises
    ------
    HierarchyError
        Any other type, or a negative seed.

    Examples
    --------
    >>> as_randomness(3)
    Randomness.simulation(seed=3, stream=())
    >>> as_randomness(None)
    Randomness.release()
    >>> wrapped = as_randomness(np.random.default_rng(0))
    >>> wrapped.mode, wrapped.provenance()["generator"]["bit_generator"]
    ('simulation', 'PCG64')
    >>> as_randomness(0.5)
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: rng must be None (release mode), an integer seed, a numpy
    Generator or a Randomness, not float
    """
    if rng is None:
        return Randomness.release()
    if isinstance(rng, Randomness):
        return rng
    if isinstance(rng, np.random.Generator):
        return Randomness("simulation", None, rng)
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool):
        return Randomness.simulation(int(rng))
    raise HierarchyError(
        f"rng must be None (release mode), an integer seed, a numpy Generator or a Randomness, "
        f"not {type(rng).__name__}")
