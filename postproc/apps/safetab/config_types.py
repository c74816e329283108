"""The types of the SafeTab configuration (:mod:`postproc.apps.safetab.config`): an iteration, a
level, the persons file's columns and the whole :class:`SafeTabConfig`, each checking its own
values (so a configuration built in Python is checked as a TOML file is); the TOML file is read
into them by :func:`~postproc.apps.safetab.config.load_safetab_config`.

Examples
--------
>>> level = Level("county", "county", ("1",), 2, "1/2", None, (10, 100, 1000))
>>> config = SafeTabConfig((Iteration("1", "Total", "all"),), (level,), synthetic=(100, 1),
...                        randomness_mode="simulation", seed=1)
>>> config.notion, config.total_only(level)
('zcdp', frozenset())
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Mapping

from hierarchy.accounting import as_fraction
from hierarchy.errors import HierarchyError
from hierarchy.io.storage import check_file_names
from hierarchy.io.tomlconfig import check_randomness
from hierarchy.mechanisms import Mechanism, get_mechanism
from postproc.apps.safetab.budgets import ACCOUNTING_ALGORITHMS, _gamma, _stability, notion_of
from postproc.errors import PostprocError

__all__ = ["Iteration", "Level", "DataColumns", "SafeTabConfig", "MAX_CODE",
           "RESERVED_LEVEL_NAMES", "level_file_names", "ITERATION_LEVELS", "HISPANIC",
           "ACCOUNTING_ALGORITHMS"]

#: Detailed codes are integers in 1..MAX_CODE (0 means "not reported").
MAX_CODE = 99_999

#: File stems a level may not take: its files are ``tables/<level>.parquet`` and
#: ``choices/<level>.parquet``, sub-directories that hold nothing else, so no name of the
#: toolkit's own files can clash there; what is reserved are the names Windows gives to devices
#: (``tables/CON.parquet`` is the console there, not a file).
RESERVED_LEVEL_NAMES = frozenset(
    {"con", "prn", "aux", "nul"} | {f"{port}{k}" for port in ("com", "lpt") for k in range(1, 10)})

#: Written in place of a path in the manifest of a release-mode run.
WITHHELD = "(withheld in release mode)"

#: Characteristic-iteration levels: a specific group (``"detailed"``, e.g. Navajo) or an
#: aggregate of groups (``"regional"``, e.g. American Indian, Central American).
ITERATION_LEVELS = ("detailed", "regional")

#: An iteration's Hispanic-origin condition: ``"not"`` (not Hispanic or Latino: origin code 0) or
#: ``"only"`` (Hispanic or Latino: an origin code); absent, either.
HISPANIC = {"not": "not Hispanic or Latino", "only": "Hispanic or Latino"}


# ---------------------------------------------------------------------------------------------
# value types
# ---------------------------------------------------------------------------------------------
def _codes(value: Any) -> frozenset[int] | None:
    """``"all"`` → None (every record); else a set of codes from ints and ``"lo-hi"`` ranges."""
    if value == "all":
        return None
    if isinstance(value, (set, frozenset)):
        value = sorted(value)
    if not isinstance(value, (list, tuple)) or not value:
        raise PostprocError(f"codes must be \"all\" or a non-empty list of detailed codes and "
                            f"ranges such as [3102, \"3100-3199\"], not {value!r}")
    out: set[int] = set()
    for item in value:
        if isinstance(item, str) and re.fullmatch(r"\s*\d+\s*-\s*\d+\s*", item):
            lo, hi = (int(x) for x in item.split("-"))
            if lo > hi:
                raise PostprocError(f"code range {item!r} is empty: write it low-high")
            codes = range(lo, hi + 1)
        elif isinstance(item, int) and not isinstance(item, bool):
            codes = range(item, item + 1)
        else:
            raise PostprocError(f"a code must be an integer or a range \"low-high\", not {item!r}")
        if codes.start < 1 or codes.stop - 1 > MAX_CODE:
            raise PostprocError(f"codes must be in 1..{MAX_CODE} (0 means not reported), "
                                f"not {item!r}")
        out.update(codes)
    return frozenset(out)


@dataclass(frozen=True)
class Iteration:
    """A race/ethnicity characteristic iteration: a set of detailed codes, and an origin.

    A record belongs to the iteration when any of its codes — race codes and Hispanic origin
    code — is in the set ("alone or in any combination"); with ``alone=True``, when it reports at
    least one race code and all of its race codes are in the set ("alone"; the origin code does
    not matter). ``codes=None`` is every record. With ``hispanic="not"`` only the records that
    also report no Hispanic origin (origin code 0) belong, with ``hispanic="only"`` only those
    that report one: "White alone, not Hispanic or Latino" is ``codes=["1000-1999"],
    alone=True, hispanic="not"``.

    Parameters
    ----------
    id : str
        Short identifier used in outputs, e.g. ``"3102"``.
    name : str
        Human-readable name.
    codes : collection of int, "all" or None
        Detailed codes (integers in 1..:data:`MAX_CODE`; ranges such as ``"3100-3199"``).
    alone : bool, optional
    total_only : bool, optional
        Released as ``TotalOnly`` at every level.
    hispanic : {"not", "only"} or None, optional
        Keep only the records that report no Hispanic origin (``"not"``) or one (``"only"``);
        ``None`` (default): either.
    iteration_level : {"detailed", "regional"} or None, optional
        The characteristic-iteration level (:data:`ITERATION_LEVELS`): thresholds may differ by
        it, and a ``[[level]]`` may take all the iterations of one iteration level.

    Raises
    ------
    PostprocError
        On an empty id, bad codes, ``alone`` without codes, or an unknown ``hispanic`` or
        ``iteration_level``.

    Examples
    --------
    >>> it = Iteration("3000", "American Indian", ["3000-3999"])
    >>> len(it.codes), 3102 in it.codes
    (1000, True)
    >>> Iteration("1002", "White alone, not Hispanic", ["1000-1999"], alone=True,
    ...           hispanic="not", iteration_level="regional").hispanic
    'not'
    >>> Iteration("x", "X", "all", hispanic="no")
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: iteration 'x': hispanic must be "not" (not Hispanic or Latino),
    "only" (Hispanic or Latino) or absent (either), not 'no'
    >>> Iteration("x", "X", "all", alone=True)
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: iteration 'x': alone = true needs a list of race codes, ...
    """

    id: str
    name: str
    codes: frozenset[int] | None
    alone: bool = False
    total_only: bool = False
    hispanic: str | None = None
    iteration_level: str | None = None

    def __post_init__(self):
        if not isinstance(self.id, str) or not self.id.strip():
            raise PostprocError(f"an iteration id must be a non-empty string, not {self.id!r}")
        if not isinstance(self.name, str):
            raise PostprocError(f"iteration {self.id!r}: name must be a string")
        codes = self.codes if self.codes is None else _codes(self.codes)
        object.__setattr__(self, "codes", codes)
        for key in ("alone", "total_only"):
            if not isinstance(getattr(self, key), bool):
                raise PostprocError(f"iteration {self.id!r}: {key} must be true or false")
        if self.alone and codes is None:
            raise PostprocError(f"iteration {self.id!r}: alone = true needs a list of race "
                                f"codes, not \"all\"")
        if self.hispanic is not None and self.hispanic not in HISPANIC:
            raise PostprocError(f"iteration {self.id!r}: hispanic must be \"not\" (not Hispanic "
                                f"or Latino), \"only\" (Hispanic or Latino) or absent (either), "
                                f"not {self.hispanic!r}")
        if self.iteration_level is not None and self.iteration_level not in ITERATION_LEVELS:
            raise PostprocError(f"iteration {self.id!r}: iteration_level must be one of "
                                f"{list(ITERATION_LEVELS)} (or absent), not "
                                f"{self.iteration_level!r}")


@dataclass(frozen=True)
class Level:
    """A population-group level: a geography level crossed with a set of iterations.

    Parameters
    ----------
    name : str
        Unique name, e.g. ``"county"``.
    geography : str
        The column holding the geographic entity of each record (``"nation"`` without such a
        column: one entity, ``"US"``, for all). It need not nest in the other levels' (an
        AIANNH area may cross state lines).
    iterations : tuple of str
        Iteration ids.
    stability : int
        Declared stability ``s``: the most groups of this level a record may belong to. Every
        group gets ``budget / s``. Checked against the data.
    budget : Fraction or None
        ε (geometric) or ρ (discrete Gaussian) of the level; exactly one of budget and moe.
    moe : int or None
        Target 95 % MOE of the Step-2 counts, from which the budget follows.
    thresholds : tuple of three floats
        θ1 < θ2 < θ3 on the noisy total: below θ1 the total, then sex × Age4, sex × Age9, and
        from θ3 on sex × Age23.
    total_only : frozenset of str
        Iterations released as ``TotalOnly`` at this level.
    location : str
        Where the level is defined (for later messages, e.g. a stability the data violates).
    outside : str or None
        The geocode of records in no entity of the level (``"9999"``: not in an AIANNH area).
        They belong to no group of the level; every other geocode is an entity.
    iteration_thresholds : mapping of str to three floats, optional
        Thresholds for the iterations of an iteration level (``{"detailed": (θ1, θ2, θ3)}``),
        instead of ``thresholds`` (:meth:`thresholds_for`).

    Raises
    ------
    PostprocError
        On an invalid value (the message names the key).

    Examples
    --------
    >>> Level("county", "county", ("1",), 2, None, 10, (10, 100, 1000)).budget is None
    True
    >>> aiannh = Level("aiannh", "aiannh", ("1",), 1, None, 10, (10, 100, 1000),
    ...                outside="9999", iteration_thresholds={"detailed": (5, 50, 500)})
    >>> aiannh.thresholds_for("detailed"), aiannh.thresholds_for("regional")
    ((5.0, 50.0, 500.0), (10.0, 100.0, 1000.0))
    >>> Level("county", "county", ("1",), 2, None, 10, (10, 5, 1000))
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: thresholds must be three numbers theta1 < theta2 < theta3, ...
    """

    name: str
    geography: str
    iterations: tuple[str, ...]
    stability: int
    budget: Fraction | None
    moe: int | None
    thresholds: tuple[float, float, float]
    total_only: frozenset[str] = frozenset()
    location: str = field(default="", compare=False)
    outside: str | None = None
    iteration_thresholds: tuple[tuple[str, tuple[float, float, float]], ...] = ()

    def __post_init__(self):
        for key in ("name", "geography"):
            value = getattr(self, key)
            if not isinstance(value, str) or not value.strip():
                raise PostprocError(f"{key} must be a non-empty string, not {value!r}")
        object.__setattr__(self, "iterations", _iteration_ids(self.iterations))
        object.__setattr__(self, "stability", _stability(self.stability))
        budget, moe = _budget_or_moe(self.budget, self.moe)
        object.__setattr__(self, "budget", budget)
        object.__setattr__(self, "moe", moe)
        object.__setattr__(self, "thresholds", _thresholds(self.thresholds))
        total_only = frozenset(_iteration_ids(list(self.total_only), empty=True))
        unknown = sorted(total_only - set(self.iterations))
        if unknown:
            raise PostprocError(f"total_only names iterations {unknown} that the level does not "
                                f"have; its iterations are {list(self.iterations)}")
        object.__setattr__(self, "total_only", total_only)
        _outside(self.outside)
        object.__setattr__(self, "iteration_thresholds",
                           _iteration_thresholds(self.iteration_thresholds))

    def thresholds_for(self, iteration_level: str | None) -> tuple[float, float, float]:
        """The thresholds of the iterations of ``iteration_level`` (``None``: undeclared) at
        this level: its ``iteration_thresholds`` for that iteration level, else
        ``thresholds``."""
        return dict(self.iteration_thresholds).get(iteration_level, self.thresholds)


def _outside(value: Any) -> str | None:
    """A level's ``outside`` geocode: None or a non-empty string."""
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise PostprocError(f"outside must be the geocode (a string, e.g. \"9999\") of records "
                            f"in no entity of the level, not {value!r}")
    return value


def _iteration_thresholds(value: Any) -> tuple[tuple[str, tuple[float, float, float]], ...]:
    """Thresholds by iteration level, as sorted ``(iteration level, thresholds)`` pairs."""
    pairs = list(value.items()) if isinstance(value, Mapping) else value
    if not isinstance(pairs, (list, tuple)):
        raise PostprocError(f"iteration_thresholds must map iteration levels "
                            f"{list(ITERATION_LEVELS)} to thresholds, not {value!r}")
    out = {}
    for pair in pairs:
        if not isinstance(pair, (list, tuple)) or len(pair) != 2:
            raise PostprocError(f"iteration_thresholds must map iteration levels "
                                f"{list(ITERATION_LEVELS)} to thresholds, not {value!r}")
        key, thresholds = pair
        if key not in ITERATION_LEVELS:
            raise PostprocError(f"thresholds are given for iteration level {key!r}; iteration "
                                f"levels are {list(ITERATION_LEVELS)}")
        out[key] = _thresholds(thresholds)
    return tuple(sorted(out.items()))


def _iteration_ids(value: Any, *, empty: bool = False) -> tuple[str, ...]:
    if not isinstance(value, (list, tuple)) or (not value and not empty) or not all(
            isinstance(x, str) and x for x in value):
        raise PostprocError(f"iterations must be \"all\" or a list of iteration ids (strings), "
                            f"not {value!r}")
    if len(set(value)) != len(value):
        raise PostprocError(f"iteration ids repeat in {list(value)}")
    return tuple(value)


def _budget_or_moe(budget: Any, moe: Any) -> tuple[Fraction | None, int | None]:
    if (budget is None) == (moe is None):
        raise PostprocError("give exactly one of budget (the level's epsilon or rho, e.g. "
                            "\"0.5\") and moe (a target 95% MOE of its released counts)")
    if budget is not None:
        b = as_fraction(budget, name="budget")
        if b <= 0:
            raise PostprocError(f"budget must be > 0, not {budget!r}")
        return b, None
    if isinstance(moe, bool) or not isinstance(moe, int) or moe < 1:
        raise PostprocError(f"moe must be an integer >= 1, not {moe!r}")
    return None, moe


def _thresholds(value: Any) -> tuple[float, float, float]:
    ok = (isinstance(value, (list, tuple)) and len(value) == 3
          and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in value)
          and all(math.isfinite(x) for x in value))
    if not ok or not value[0] < value[1] < value[2]:
        raise PostprocError(f"thresholds must be three numbers theta1 < theta2 < theta3, "
                            f"not {value!r}")
    return tuple(float(x) for x in value)


@dataclass(frozen=True)
class DataColumns:
    """Which columns of the persons file hold what.

    Parameters
    ----------
    sex : str
        Codes 1 male, 2 female.
    age : str
        Single years 0-115.
    races : tuple of str
        Detailed race codes, 0 = not reported (several columns: a record may report several).
    origin : str or None
        Detailed Hispanic origin code, 0 = not Hispanic; None if the file has none.

    Examples
    --------
    >>> DataColumns().races
    ('race1', 'race2', 'race3')
    """

    sex: str = "sex"
    age: str = "age"
    races: tuple[str, ...] = ("race1", "race2", "race3")
    origin: str | None = "hisp_origin"

    def __post_init__(self):
        names = [self.sex, self.age, *self.races] + ([self.origin] if self.origin else [])
        if not self.races or not all(isinstance(n, str) and n for n in names):
            raise PostprocError(f"columns must be non-empty strings, with at least one race "
                                f"column, not {names!r}")
        object.__setattr__(self, "races", tuple(self.races))

    def names(self) -> list[str]:
        """Every column named, in a fixed order."""
        return [self.sex, self.age, *self.races] + ([self.origin] if self.origin else [])


@dataclass(frozen=True)
class SafeTabConfig:
    """Everything ``postproc safetab`` needs, validated.

    Parameters
    ----------
    iterations : tuple of Iteration
    levels : tuple of Level
    mechanism : Mechanism
        Geometric (pure DP) or discrete Gaussian (zCDP).
    gamma : Fraction
    delta : float
    randomness_mode : {'release', 'simulation'}
    seed : int or None
    persons : Path or None
        The persons parquet file; or
    synthetic : tuple of (persons, seed) or None
        detailed synthetic 1940 data generated on the fly
        (:func:`hierarchy.synth.detailed1940.synthesize_detailed_1940`).
    columns : DataColumns
    output : Path
    overwrite : bool
    accuracy_report : bool
        Compare the noisy counts with the confidential truth (a diagnostic computed from the
        confidential data, *not* a DP output). It is written under ``DIR/confidential/``.
    source : str
    raw : dict
    accounting_algorithm : {"full", "as_released"}
        How the run accounts for its privacy loss (:data:`ACCOUNTING_ALGORITHMS`): ``"full"``
        (default) charges every level as SafeTab's full algorithm, whose groups may be TotalOnly
        at the full group budget; ``"as_released"`` only the kinds of group each level released.

    Raises
    ------
    PostprocError
        On repeated ids or names, level names that would share an output file, a level naming
        an unknown iteration, an iteration with a Hispanic-origin condition but no origin
        column, an inconsistent randomness mode and seed, floating-point noise in
        release mode (the geometric mechanism must then be ``get_mechanism("geometric",
        exact=True)``), an unknown accounting algorithm, or an option of the wrong type
        (``overwrite`` and ``accuracy_report`` are booleans, ``delta`` a number in (0, 1),
        ``synthetic`` a pair of integers).

    Examples
    --------
    >>> levels = (Level("state", "state", ("1",), 1, "1", None, (1, 2, 3)),)
    >>> SafeTabConfig((Iteration("1", "T", "all"),), levels, synthetic=(100, 1),
    ...               mechanism=get_mechanism("geometric"))
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: release mode needs exact integer noise: ...
    >>> SafeTabConfig((Iteration("1", "T", "all"),), levels, synthetic=(100, 1),
    ...               accuracy_report="no")
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: accuracy_report must be true or false, not 'no'
    """

    iterations: tuple[Iteration, ...]
    levels: tuple[Level, ...]
    mechanism: Mechanism = field(default_factory=lambda: get_mechanism("discrete_gaussian"))
    gamma: Fraction = Fraction(1, 10)
    delta: float = 1e-10
    randomness_mode: str = "release"
    seed: int | None = None
    persons: Path | None = None
    synthetic: tuple[int, int] | None = None
    columns: DataColumns = DataColumns()
    output: Path = Path("safetab_out")
    overwrite: bool = False
    accuracy_report: bool = False
    source: str = "<config>"
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    accounting_algorithm: str = "full"

    def __post_init__(self):
        notion_of(self.mechanism)
        if self.accounting_algorithm not in ACCOUNTING_ALGORITHMS:
            raise PostprocError(f"the accounting algorithm must be one of "
                                f"{list(ACCOUNTING_ALGORITHMS)}, not "
                                f"{self.accounting_algorithm!r}")
        object.__setattr__(self, "gamma", _gamma(self.gamma))
        for key in ("overwrite", "accuracy_report"):
            if not isinstance(getattr(self, key), bool):
                raise PostprocError(f"{key} must be true or false, not {getattr(self, key)!r}")
        object.__setattr__(self, "delta", _delta(self.delta))
        if self.synthetic is not None:
            object.__setattr__(self, "synthetic", _synthetic(
                {"persons": self.synthetic[0], "seed": self.synthetic[1]}
                if isinstance(self.synthetic, (tuple, list)) and len(self.synthetic) == 2
                else self.synthetic))
        ids = [it.id for it in self.iterations]
        if not ids or len(set(ids)) != len(ids):
            raise PostprocError(f"iteration ids must be present and unique, got {ids}")
        needs_origin = [it.id for it in self.iterations if it.hispanic is not None]
        if needs_origin and not self.columns.origin:
            raise PostprocError(f"iterations {needs_origin} have a Hispanic-origin condition "
                                f"(hispanic = ...) but the data have no origin column; name "
                                f"it in [data.columns] origin")
        names = [lv.name for lv in self.levels]
        if not names or len(set(names)) != len(names):
            raise PostprocError(f"level names must be present and unique, got {names}")
        level_file_names(names)
        for level in self.levels:
            unknown = sorted(set(level.iterations) - set(ids))
            if unknown:
                raise PostprocError(f"level {level.name!r} names iterations {unknown} that are "
                                    f"not defined; defined: {ids}")
        check_randomness(self.randomness_mode, self.seed, error=PostprocError)
        _release_noise(self.mechanism, self.randomness_mode)
        if (self.persons is None) == (self.synthetic is None):
            raise PostprocError("give exactly one data source: persons (a parquet file) or "
                                "synthetic = { persons = N, seed = S }")

    @property
    def notion(self) -> str:
        """``'pure'`` (geometric, budgets are ε) or ``'zcdp'`` (discrete Gaussian, ρ)."""
        return notion_of(self.mechanism)

    @property
    def release(self) -> bool:
        """Whether the run is meant for publication (``[randomness] mode = "release"``)."""
        return self.randomness_mode == "release"

    @property
    def rng(self) -> int | None:
        """The ``rng`` argument: ``None`` (release mode) or the simulation seed."""
        return None if self.randomness_mode == "release" else self.seed

    def iteration(self, iteration_id: str) -> Iteration:
        """The iteration with this id."""
        for it in self.iterations:
            if it.id == iteration_id:
                return it
        raise PostprocError(f"no iteration {iteration_id!r}")

    def total_only(self, level: Level) -> frozenset[str]:
        """Iterations released as TotalOnly at ``level`` (its list and the iterations' flags)."""
        return level.total_only | {i for i in level.iterations if self.iteration(i).total_only}

    def iterations_by_id(self) -> dict[str, Iteration]:
        """Every iteration by its id."""
        return {it.id: it for it in self.iterations}

    def to_dict(self, *, release: bool | None = None) -> dict[str, Any]:
        """JSON-ready copy for manifests: the parsed TOML, plus the resolved paths outside
        release mode.

        In release mode the paths are withheld (the persons file, the output directory; their
        names can identify people, projects or places, and a release does not need them), and
        so is the configuration file's name.

        Parameters
        ----------
        release : bool, optional
            Withhold the paths; default :attr:`release`.

        Returns
        -------
        dict
        """
        out = dict(self.raw)
        if self.release if release is None else release:
            for section, key in (("data", "persons"), ("output", "directory")):
                if isinstance(out.get(section), Mapping) and key in out[section]:
                    out[section] = {**out[section], key: WITHHELD}
            return out
        out["resolved"] = {"persons": str(self.persons) if self.persons else None,
                           "synthetic": list(self.synthetic) if self.synthetic else None,
                           "output": str(self.output), "source": self.source}
        return out


def level_file_names(names: Any) -> dict[str, str]:
    """The file stem of each level (``tables/<stem>.parquet``), refusing two levels that would
    share a file (``a/b`` and ``a_b``; ``State`` and ``state`` on a case-insensitive file system)
    and the reserved :data:`RESERVED_LEVEL_NAMES`.

    Parameters
    ----------
    names : iterable of str
        Level names.

    Returns
    -------
    dict of str to str

    Raises
    ------
    PostprocError
        Naming the two levels, or the level with a reserved name, and the fix.

    Examples
    --------
    >>> level_file_names(["state", "county/2"])
    {'state': 'state', 'county/2': 'county_2'}
    >>> level_file_names(["a/b", "a_b"])
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: level names 'a/b' and 'a_b' would both be written as 'a_b'; ...
    """
    try:
        return check_file_names(list(names), what="level", reserved=RESERVED_LEVEL_NAMES)
    except HierarchyError as exc:
        raise PostprocError(f"{exc} (levels are written as tables/<level>.parquet, with every "
                            f"character but letters, digits, '-', '_' and '.' replaced by '_')"
                            ) from None


def _release_noise(mechanism: Mechanism, mode: str) -> None:
    """Refuse floating-point noise in release mode: only exact integer samplers may publish."""
    if mode != "release":
        return
    if not mechanism.discrete:
        raise PostprocError(f"release mode needs exact integer noise, not the floating-point "
                            f"{mechanism.name} mechanism; use \"geometric\" or "
                            f"\"discrete_gaussian\"")
    if getattr(mechanism, "exact", True) is not True:
        raise PostprocError(
            f"release mode needs exact integer noise: the {mechanism.name} mechanism with "
            f"exact = false samples from floating-point tables (simulation only), whose rounding "
            f"can leak the true counts; set exact = true in [mechanism] "
            f"(get_mechanism({mechanism.name!r}, exact=True)), or use mode = \"simulation\" "
            f"for experiments")


def _delta(value: Any) -> float:
    if (isinstance(value, bool) or not isinstance(value, (int, float))
            or not math.isfinite(value) or not 0 < value < 1):
        raise PostprocError(f"delta must be a number in (0, 1), e.g. 1e-10, not {value!r}")
    return float(value)


def _synthetic(value: Any) -> tuple[int, int]:
    if not isinstance(value, Mapping) or set(value) != {"persons", "seed"} or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in value.values()):
        raise PostprocError(f"synthetic must be {{ persons = <int>, seed = <int> }}, "
                            f"not {dict(value) if isinstance(value, Mapping) else value!r}")
    if value["persons"] < 1 or value["seed"] < 0:
        raise PostprocError(f"synthetic needs persons >= 1 and seed >= 0, not "
                            f"{dict(value)!r}")
    return int(value["persons"]), int(value["seed"])
