"""The SafeTab configuration: one TOML file, parsed into one typed :class:`SafeTabConfig`.

See ``examples/safetab_1940.toml`` for a complete, commented example and ``docs/safetab.md`` for
every key. In short::

    [data]              persons = "file.parquet"  or  synthetic = { persons = N, seed = S }
    [data.columns]      sex, age, races = [...], origin   (defaults: the detailed generator's)
    [mechanism]         name = "discrete_gaussian" (zCDP, budgets are rho) | "geometric" (pure),
                        exact (geometric: exact integer sampler; always in release mode)
    [adaptive]          gamma = "0.1", thresholds = [theta1, theta2, theta3],
                        thresholds_detailed, thresholds_regional (by iteration level)
    [accounting]        delta = 1e-10, algorithm = "full" (default) | "as_released"
    [randomness]        mode = "release" (default) | "simulation" (then seed = <int>)
    [output]            directory, overwrite, accuracy_report (written to DIR/confidential/)
    [[iteration]]       id, name, codes = "all" | [code, "lo-hi", ...], alone, total_only,
                        hispanic = "not" | "only", iteration_level = "detailed" | "regional"
    [[level]]           name, geography, outside (e.g. "9999": in no entity), iterations =
                        "all" | "detailed" | "regional" | [ids], stability, budget | moe,
                        thresholds, thresholds_detailed, thresholds_regional,
                        total_only = [iteration ids]

An iteration's thresholds at a level are the first given of: the level's thresholds for its
iteration level, the level's ``thresholds``, ``[adaptive]``'s for its iteration level,
``[adaptive] thresholds``.

Relative paths are relative to the config file's directory. Every error names the file and the
line of the offending key and says what would be valid. The types the file is read into, each
checking its own values, are in :mod:`postproc.apps.safetab.config_types`.

Examples
--------
>>> text = '''
... [data]
... synthetic = { persons = 5000, seed = 1 }
... [randomness]
... mode = "simulation"
... seed = 3
... [[iteration]]
... id = "1"
... name = "Total"
... codes = "all"
... [[level]]
... name = "state"
... geography = "state"
... stability = 1
... moe = 10
... thresholds = [10, 100, 1000]
... '''
>>> config = parse_safetab_config(text, source="demo.toml")
>>> config.levels[0].moe, config.notion, config.rng
(10, 'zcdp', 3)
>>> parse_safetab_config(text.replace("stability = 1", "stability = 0"), source="demo.toml")
Traceback (most recent call last):
...
postproc.errors.PostprocError: demo.toml, line 14: stability must be a positive integer ...
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from hierarchy.errors import HierarchyError
from hierarchy.io.tomlconfig import Table, TomlDocument, parse_toml, read_randomness, read_toml
from hierarchy.mechanisms import Mechanism, get_mechanism
from postproc.apps.safetab.budgets import ACCOUNTING_ALGORITHMS, _gamma, _stability, notion_of
from postproc.apps.safetab.config_types import (  # noqa: F401  (their old home)
    HISPANIC,
    ITERATION_LEVELS,
    MAX_CODE,
    RESERVED_LEVEL_NAMES,
    WITHHELD,
    DataColumns,
    Iteration,
    Level,
    SafeTabConfig,
    _budget_or_moe,
    _codes,
    _delta,
    _iteration_ids,
    _outside,
    _release_noise,
    _synthetic,
    _thresholds,
    level_file_names,
)
from postproc.errors import PostprocError

__all__ = ["Iteration", "Level", "DataColumns", "SafeTabConfig", "load_safetab_config",
           "parse_safetab_config", "MAX_CODE", "RESERVED_LEVEL_NAMES", "level_file_names"]


_SECTIONS = {"data", "mechanism", "adaptive", "accounting", "randomness", "output",
             "iteration", "level"}


# ---------------------------------------------------------------------------------------------
# parsing with locations
# ---------------------------------------------------------------------------------------------
def load_safetab_config(path: str | Path) -> SafeTabConfig:
    """Read and validate a SafeTab configuration file.

    Parameters
    ----------
    path : str or Path

    Returns
    -------
    SafeTabConfig

    Raises
    ------
    PostprocError
        If the file is missing or unreadable, is not TOML, or a value is invalid — with the file,
        the line and what would be valid.

    Examples
    --------
    >>> load_safetab_config("no/such/file.toml")
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: config file no/such/file.toml does not exist
    """
    doc = read_toml(path, error=PostprocError)
    return _from_document(doc, base=Path(path).parent)


def parse_safetab_config(text: str, *, source: str = "<config>",
                         base: str | Path = ".") -> SafeTabConfig:
    """Parse SafeTab configuration TOML text (see :func:`load_safetab_config`).

    Parameters
    ----------
    text : str
        TOML.
    source : str, optional
        Name used in messages (the file name).
    base : str or Path, optional
        Directory that relative paths are relative to.

    Returns
    -------
    SafeTabConfig

    Raises
    ------
    PostprocError
        With ``source``, the line and the key of the problem.

    Examples
    --------
    A county level of one iteration with geometric noise at ε = 1/2, reading a persons file
    relative to ``base``:

    >>> text = '''
    ... [data]
    ... persons = "persons.parquet"
    ... [randomness]
    ... mode = "simulation"
    ... seed = 1
    ... [mechanism]
    ... name = "geometric"
    ... [[iteration]]
    ... id = "4000"
    ... name = "Asian alone or in combination"
    ... codes = ["4000-4999"]
    ... [[level]]
    ... name = "county"
    ... iterations = ["4000"]
    ... stability = 1
    ... budget = "1/2"
    ... thresholds = [10, 100, 1000]
    ... '''
    >>> config = parse_safetab_config(text, source="county.toml", base="/data")
    >>> config.notion, config.persons.as_posix(), config.levels[0].budget
    ('pure', '/data/persons.parquet', Fraction(1, 2))
    >>> parse_safetab_config(text.replace('s = ["4000"]', 's = ["4001"]'),
    ...                      source="county.toml")
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: county.toml, line 15: level 'county' names iterations ['4001']
    that no [[iteration]] defines; defined: ['4000']
    """
    return _from_document(parse_toml(text, source=source, error=PostprocError), base=Path(base))


#: What the value types of this module and of hierarchy raise, located by the parser.
_CAUGHT = (PostprocError, HierarchyError)


def _from_document(doc: TomlDocument, *, base: Path) -> SafeTabConfig:
    """The parsed TOML as a :class:`SafeTabConfig`, each error located at its key."""
    data, source = doc.data, doc.source
    doc.check_sections(_SECTIONS)

    # [data]
    d = doc.table("data", allowed={"persons", "synthetic", "columns"})
    persons = synthetic = None
    if ("persons" in d) == ("synthetic" in d):
        raise d.fail(None, "[data] needs exactly one of persons = \"persons.parquet\" and "
                           "synthetic = { persons = N, seed = S }")
    if "persons" in d:
        persons = d.path("persons", base=base)
    else:
        synthetic = d.located("synthetic", lambda: _synthetic(d["synthetic"]), _CAUGHT)
    columns = d.located("columns", lambda: _columns(d.get("columns", {})), _CAUGHT)

    # [randomness]
    mode, seed = read_randomness(doc.table("randomness", allowed={"mode", "seed"}),
                                 default_mode="release")

    # [mechanism], [adaptive], [accounting]
    m = doc.table("mechanism", allowed={"name", "exact", "max_denominator"})
    mechanism = _mechanism(m, release=mode == "release")
    a = doc.table("adaptive", allowed={"gamma", "thresholds"} | _BY_ITERATION_LEVEL)
    gamma = a.located("gamma", lambda: _gamma(a.get("gamma", "0.1")), _CAUGHT)
    default_thresholds = _thresholds_of(a)
    acc = doc.table("accounting", allowed={"delta", "algorithm"})
    delta = acc.located("delta", lambda: _delta(acc.get("delta", 1e-10)), _CAUGHT)
    algorithm = acc.get("algorithm", "full")
    if algorithm not in ACCOUNTING_ALGORITHMS:
        raise acc.fail("algorithm", f"algorithm must be \"full\" (SafeTab's full algorithm: "
                                    f"every level charged as if its groups could be TotalOnly at "
                                    f"the full group budget; the default) or \"as_released\" "
                                    f"(each level charged for the kinds of group it released), "
                                    f"not {algorithm!r}")

    # [output]
    o = doc.table("output", allowed={"directory", "overwrite", "accuracy_report"})
    overwrite = o.boolean("overwrite", False)
    accuracy = o.boolean("accuracy_report", mode == "simulation")
    output = o.path("directory", "safetab_out", base=base)

    # [[iteration]], [[level]]
    iterations = _iterations(doc)
    levels = _levels(doc, iterations, default_thresholds)

    if not columns.origin:
        for item, it in zip(doc.tables("iteration"), iterations):
            if it.hispanic is not None:
                raise item.fail("hispanic", f"iteration {it.id!r} keeps only the records that "
                                            f"are {HISPANIC[it.hispanic]}, but [data.columns] "
                                            f"origin is empty; name the origin column")
    return doc.located("", None, lambda: SafeTabConfig(
        iterations, levels, mechanism, gamma, delta, mode, seed, persons, synthetic,
        columns, output, overwrite, accuracy, source, dict(data),
        accounting_algorithm=algorithm), catch=_CAUGHT)


#: The keys of thresholds by iteration level: ``thresholds_detailed``, ``thresholds_regional``.
_BY_ITERATION_LEVEL = {f"thresholds_{name}" for name in ITERATION_LEVELS}


def _thresholds_of(table: Table) -> dict[str | None, Any]:
    """The thresholds a table gives, each checked at its line: ``None`` → ``thresholds``, an
    iteration level → ``thresholds_<level>``."""
    out: dict[str | None, Any] = {}
    for name in (None, *ITERATION_LEVELS):
        key = "thresholds" if name is None else f"thresholds_{name}"
        if key in table:
            value = table[key]
            out[name] = table.located(key, lambda: _thresholds(value), _CAUGHT)
    return out



def _columns(value: Any) -> DataColumns:
    if not isinstance(value, Mapping) or set(value) - {"sex", "age", "races", "origin"}:
        raise PostprocError(f"columns must be a table with keys among sex, age, races, origin, "
                            f"not {dict(value) if isinstance(value, Mapping) else value!r}")
    races = value.get("races", DataColumns.races)
    if isinstance(races, str):
        races = [races]
    origin = value.get("origin", DataColumns.origin)
    return DataColumns(value.get("sex", "sex"), value.get("age", "age"), tuple(races),
                       origin or None)


def _mechanism(m: Table, *, release: bool) -> Mechanism:
    """The ``[mechanism]``: each option checked at its own line; in release mode the geometric
    mechanism samples exactly (``exact = true`` by default, ``exact = false`` refused)."""
    name = m.get("name", "discrete_gaussian")
    mechanism = m.located("name", lambda: get_mechanism(name), _CAUGHT)
    notion = m.located("name", lambda: notion_of(mechanism), _CAUGHT)
    options = {k: v for k, v in m.items() if k != "name"}
    if release and notion == "pure":
        options.setdefault("exact", True)
    for key, value in options.items():
        m.located(key if key in m else "name", lambda: get_mechanism(name, **{key: value}),
                  _CAUGHT)
    mechanism = get_mechanism(name, **options)
    m.located("exact" if "exact" in m else "name",
              lambda: _release_noise(mechanism, "release" if release else "simulation"), _CAUGHT)
    return mechanism


def _entries(doc: TomlDocument, name: str, allowed: set[str], needs: str) -> list[Table]:
    """The ``[[name]]`` tables (at least one), their keys checked."""
    value = doc.data.get(name)
    if not isinstance(value, list) or not value:
        raise doc.fail(name, None, f"define at least one [[{name}]] with {needs}")
    return doc.tables(name, allowed=allowed)


def _iterations(doc: TomlDocument) -> tuple[Iteration, ...]:
    out = []
    seen: dict[str, int] = {}
    for item in _entries(doc, "iteration", {"id", "name", "codes", "alone", "total_only",
                                            "hispanic", "iteration_level"},
                         "id, name and codes"):
        k = item.index
        for key in ("id", "codes"):
            if key not in item:
                raise item.fail(None, f"[[iteration]] number {k + 1} needs {key}")
        ident = item["id"]
        if isinstance(ident, int) and not isinstance(ident, bool):
            ident = str(ident)
        if ident in seen:
            raise item.fail("id", f"iteration id {ident!r} is already used by [[iteration]] "
                                  f"number {seen[ident] + 1}")
        seen[ident] = k
        codes = item["codes"]
        item.located("codes", lambda: _codes(codes), _CAUGHT)
        name = item.get("name", ident)
        if not isinstance(name, str):
            raise item.error("name", f"must be a string, not {name!r}")
        alone, total_only = item.boolean("alone", False), item.boolean("total_only", False)
        hispanic, iteration_level = item.get("hispanic"), item.get("iteration_level")
        for key in ("hispanic", "iteration_level"):
            if key in item:
                item.located(key, lambda: Iteration(ident, name, codes, **{key: item[key]}),
                             _CAUGHT)
        out.append(item.located("alone" if alone else "id",
                                lambda: Iteration(ident, name, codes, alone, total_only,
                                                  hispanic, iteration_level), _CAUGHT))
    return tuple(out)


_LEVEL_KEYS = {"name", "geography", "outside", "iterations", "stability", "budget", "moe",
               "thresholds", "total_only"} | _BY_ITERATION_LEVEL


def _levels(doc: TomlDocument, iterations: tuple[Iteration, ...],
            default_thresholds: dict[str | None, Any]) -> tuple[Level, ...]:
    out = []
    names: dict[str, int] = {}
    for item in _entries(doc, "level", _LEVEL_KEYS,
                         "name, geography, stability and budget or moe"):
        k = item.index
        for key in ("name", "stability"):
            if key not in item:
                raise item.fail(None, f"[[level]] number {k + 1} needs {key}")
        name = item["name"]
        if name in names:
            raise item.fail("name", f"level name {name!r} is already used by [[level]] number "
                                    f"{names[name] + 1}")
        names[name] = k
        geography = item.get("geography", name)
        its = _level_iterations(item, name, iterations)
        item.located("stability", lambda: _stability(item["stability"]), _CAUGHT)
        budget, moe = item.get("budget"), item.get("moe")
        key = "budget" if "budget" in item else "moe" if "moe" in item else None
        item.located(key, lambda: _budget_or_moe(budget, moe), _CAUGHT)
        thresholds, by_level = _level_thresholds(doc, item, name, default_thresholds)
        total_only = item.get("total_only", [])
        outside = item.get("outside")
        item.located("outside", lambda: _outside(outside), _CAUGHT)
        out.append(item.located("total_only" if "total_only" in item else "name", lambda: Level(
            name, geography, tuple(its), item["stability"], budget, moe, tuple(thresholds),
            frozenset(total_only) if isinstance(total_only, list) else total_only,
            item.where("stability"), outside, by_level), _CAUGHT))
        item.located("name", lambda: level_file_names([lv.name for lv in out]), _CAUGHT)
    return tuple(out)


def _level_iterations(item: Table, name: str, iterations: tuple[Iteration, ...]) -> list[str]:
    """A level's ``iterations``: ``"all"`` (default), ``"detailed"`` or ``"regional"`` (every
    iteration of that iteration level) or a list of ids, checked at its line."""
    ids = [it.id for it in iterations]
    its = item.get("iterations", "all")
    if its == "all":
        return list(ids)
    if isinstance(its, str) and its in ITERATION_LEVELS:
        chosen = [it.id for it in iterations if it.iteration_level == its]
        if not chosen:
            raise item.fail("iterations", f"level {name!r}: iterations = {its!r} selects no "
                                          f"iteration: no [[iteration]] has iteration_level = "
                                          f"{its!r}")
        return chosen
    if isinstance(its, str):
        raise item.fail("iterations", f"iterations must be \"all\", an iteration level "
                                      f"({', '.join(repr(x) for x in ITERATION_LEVELS)}) or a "
                                      f"list of iteration ids, not {its!r}")
    item.located("iterations", lambda: _iteration_ids(its), _CAUGHT)
    unknown = [i for i in its if i not in ids]
    if unknown:
        raise item.fail("iterations", f"level {name!r} names iterations {unknown} that no "
                                      f"[[iteration]] defines; defined: {ids}")
    return list(its)


def _level_thresholds(doc: TomlDocument, item: Table, name: str,
                      default: dict[str | None, Any]) -> tuple[Any, dict[str, Any]]:
    """A level's thresholds and its thresholds by iteration level: its own, else
    ``[adaptive]``'s (by iteration level only where the level gives no ``thresholds``)."""
    own = _thresholds_of(item)
    thresholds = own.get(None, default.get(None))
    if thresholds is None:
        raise item.fail(None, f"level {name!r} needs thresholds = [theta1, theta2, theta3] "
                              "(or give a default in [adaptive])")
    fallback = {} if None in own else default
    by_level = {lv: own.get(lv, fallback.get(lv)) for lv in ITERATION_LEVELS}
    return thresholds, {lv: t for lv, t in by_level.items() if t is not None}
