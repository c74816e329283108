"""The run configuration: one TOML file, or Python arguments, validated into one :class:`RunConfig`.

See ``examples/e2e1940.toml`` for a complete, commented example (and ``examples/pl94_2020.toml``
for the 2020 redistricting-data presets). Relative paths are relative to
the config file's directory. Every error names the file, the line where it could be found, the
key, and what would be valid. :meth:`RunConfig.build` takes the same settings as Python values
and validates them through the same code (its errors name the section and key); the TOML layer
itself is :mod:`hierarchy.io.tomlconfig`.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from dataclasses import dataclass, field, fields, replace
from fractions import Fraction
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from hierarchy.budget import Budget
from hierarchy.io.storage import check_file_names
from hierarchy.io.tomlconfig import Table, TomlDocument, dumps, read_randomness, read_toml
from hierarchy.mechanisms import Mechanism, get_mechanism
from hierarchy.presets import SCHEMAS, get_schema
from hierarchy.queries import Workload, check_query_name, e2e_workload, parse_query
from hierarchy.schema import Schema
from invariants.catalogue import statistics_to_publish
from invariants.errors import SpecError
from invariants.spec import Spec
from postproc.errors import PostprocError
from postproc.infra.executors import EXECUTORS
from postproc.infra.solvers import DEFAULT_QP_CHAIN, check_chain
from postproc.methods.topdown.options import CONFIG_KEYS, RUN_FIELDS, TopDownOptions

__all__ = ["RunConfig", "load_config", "config_from_dict", "read_config_text", "read_blocks",
           "PRESETS"]

_SECTIONS = {"data", "schema", "geography", "workload", "budget", "mechanism", "randomness",
             "spec", "postprocess", "solver", "output"}

#: Presets by section: ``[workload]``, ``[budget]`` and ``[spec]`` take ``preset = NAME``,
#: ``[solver]`` takes ``passes = NAME`` and ``round_passes = NAME`` (the per-level production
#: orderings of the fit and of the rounder).
PRESETS = {"workload": ("e2e", "pl94_2020"), "budget": ("e2e", "pl94_2020"),
           "spec": ("e2e", "pl94_2020"), "passes": ("pl94_2020",),
           "round_passes": ("pl94_2020",)}

#: One level's multipass order: passes of query names.
Passes = tuple[tuple[str, ...], ...]


def _deprecated(config: "RunConfig", name: str, option: str | None = None) -> Any:
    """``config.topdown.<option>`` for the old name of a TopDown option (with a warning)."""
    option = option or name
    warnings.warn(f"RunConfig.{name} is deprecated: use RunConfig.topdown.{option} (TopDown's "
                  f"options are one record, TopDownOptions)", DeprecationWarning, stacklevel=3)
    return getattr(config.topdown, option)


@dataclass(frozen=True)
class RunConfig:
    """Everything ``postproc run`` needs, validated.

    Made by :func:`load_config` (a TOML file) or :meth:`RunConfig.build` (Python values); both
    validate every value, and the errors name the section and key. Paths are absolute.

    Examples
    --------
    >>> sim = RunConfig.build(persons="persons.parquet", levels=["nation", "state", "county"],
    ...                       budget=2, seed=3)
    >>> sim.release, sim.rng, sim.wants_error_table, sim.method, sim.mechanism
    (False, 3, True, 'topdown', Geometric(exact=False))
    >>> rel = RunConfig.build(persons="persons.parquet", levels=["nation", "state", "county"],
    ...                       budget=2, mode="release", method="hay")
    >>> rel.release, rel.rng, rel.wants_error_table       # release: secure noise, no errors
    (True, None, False)
    >>> RunConfig.build(persons="persons.parquet", levels=["nation"], budget=1, seed=1)
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: RunConfig.build [spec]: the E2E spec needs at least two levels (nation and below)
    """

    persons: Path
    units: Path | None
    columns: Mapping[str, str]
    values: Mapping[str, Mapping[Any, Any]]
    schema: Schema
    levels: tuple[str, ...]
    workload: Workload
    budget: Budget
    mechanism: Any
    randomness_mode: str
    seed: int | None
    spec: Spec
    topdown: TopDownOptions = field(default_factory=TopDownOptions)
    scheduler: str | None = None
    output: Path = Path("out")
    microdata: bool = False
    error_table: bool | None = None
    source: str = "<config>"
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)
    method: str = "topdown"
    method_options: Mapping[str, Any] = field(default_factory=dict)
    blocks: Path | None = None

    def with_topdown(self, **changes: Any) -> "RunConfig":
        """A copy whose TopDown options have ``changes`` (checked).

        Examples
        --------
        >>> config = RunConfig.build(persons="p.parquet", levels=["nation", "state"], budget=1,
        ...                          seed=1)
        >>> config.with_topdown(workers=2, failsafe=False).topdown.workers
        2
        """
        return replace(self, topdown=self.topdown.replace(**changes))

    def topdown_options(self) -> TopDownOptions:
        """The options TopDown runs with: :attr:`topdown` (``[solver]``), with
        ``[postprocess.options]`` when TopDown is the method (a configuration changed with
        ``dataclasses.replace(config, method_options=…)`` included).

        Examples
        --------
        >>> config = RunConfig.build(persons="p.parquet", levels=["nation", "state"], budget=1,
        ...                          seed=1, method_options={"failsafe_slack": 0})
        >>> config.topdown_options().failsafe_slack
        0.0
        """
        if self.method != "topdown":
            return self.topdown
        return self.topdown.replace(**self.method_options)

    # The TopDown options' names before they were one record: read-only aliases, deprecated.
    solver_chain = property(lambda self: _deprecated(self, "solver_chain", "solver"))
    executor = property(lambda self: _deprecated(self, "executor"))
    workers = property(lambda self: _deprecated(self, "workers"))
    failsafe = property(lambda self: _deprecated(self, "failsafe"))
    failsafe_keep = property(lambda self: _deprecated(self, "failsafe_keep"))
    passes = property(lambda self: _deprecated(self, "passes"))
    round_passes = property(lambda self: _deprecated(self, "round_passes"))

    @property
    def release(self) -> bool:
        """Whether this run's outputs are meant for publication (release mode)."""
        return self.randomness_mode == "release"

    @property
    def wants_error_table(self) -> bool:
        """Whether to compute errors against the confidential data: asked for, or by default in
        simulation mode (never by default in release mode)."""
        return (not self.release) if self.error_table is None else self.error_table

    @property
    def rng(self):
        """The ``rng`` argument: ``None`` (release) or the simulation seed."""
        return None if self.randomness_mode == "release" else self.seed

    def passes_at(self, level: str) -> Passes | None:
        """The multipass order of ``level``: the one list of every level, that level's entry of
        per-level passes, or ``None`` (the engine's default: every query in one pass).

        Examples
        --------
        >>> levels = ["nation", "state", "county", "tract", "block_group", "block"]
        >>> config = RunConfig.build(persons="p.parquet", levels=levels, schema="pl94_2020",
        ...                          workload="pl94_2020", budget="pl94_2020",
        ...                          mechanism="discrete_gaussian", spec="pl94_2020", seed=1,
        ...                          passes="pl94_2020")
        >>> [len(config.passes_at(lv)) for lv in levels]
        [1, 2, 2, 2, 2, 1]
        >>> config.passes_at("state")[0]
        ('total',)
        """
        return self.topdown.passes_at(level)

    def read_geography(self):
        """The geography of ``[data] blocks`` (every block, empty ones too), or ``None`` when
        no blocks file is configured (the geography is then built from the persons and units,
        and a block with neither is not a unit). See :func:`read_blocks`."""
        if self.blocks is None:
            return None
        return read_blocks(self.blocks, self.levels, self.columns)

    def publish(self) -> dict[str, list[str]]:
        """Exact statistics the spec's invariants need published: statistic → levels (see
        :func:`invariants.catalogue.statistics_to_publish`)."""
        return statistics_to_publish(self.spec, self.levels)

    @classmethod
    def build(cls, *, persons: str | Path, levels: Sequence[str], budget: Any,
              schema: str | Schema | Mapping[str, Any] = "e2e_1940",
              workload: str | Workload | Mapping[str, str] = "e2e",
              mechanism: str | Mechanism | Mapping[str, Any] = "geometric",
              mode: str = "simulation", seed: int | None = None,
              spec: str | Spec | Path | None = "e2e", units: str | Path | None = None,
              blocks: str | Path | None = None, columns: Mapping[str, str] | None = None,
              values: Mapping[str, Mapping[Any, Any]] | None = None,
              method: str = "topdown", method_options: Mapping[str, Any] | None = None,
              solver_chain: Sequence[str] | None = None, executor: str = "serial",
              workers: int | None = None, failsafe: bool = True,
              failsafe_keep: Sequence[str] | str = "auto",
              passes: Sequence[Sequence[str]] | Mapping[str, Sequence[Sequence[str]]] | str
              | None = None,
              round_passes: Sequence[Sequence[str]] | Mapping[str, Sequence[Sequence[str]]]
              | str | None = None, output: str | Path = "out",
              microdata: bool = False, error_table: bool | None = None,
              base: str | Path = ".") -> "RunConfig":
        """A run configuration from Python values, validated exactly as a TOML file is.

        The values are written into the TOML file's shape (kept as :attr:`raw`, so
        :meth:`to_toml` saves a file that ``postproc run`` reads back to the same configuration)
        and go through the same checks as :func:`load_config`.

        Parameters
        ----------
        persons : str or Path
            The persons file (relative paths are relative to ``base``).
        levels : sequence of str
            Geography levels, root first.
        budget : number, str, Budget or mapping
            A number (or a string such as ``"1/2"``) is a pure-DP ε split as in the E2E test;
            ``"pl94_2020"`` is the 2020 production budget
            (:func:`hierarchy.presets.pl94.pl94_budget`); a :class:`~hierarchy.budget.Budget`
            is used as is; a mapping is the ``[budget]`` table.
        schema : str, Schema or mapping
            A preset name (``"e2e_1940"``, ``"pl94_2020"``), a Schema, or the ``[schema]`` table.
        workload : "e2e", "pl94_2020", Workload or mapping
            A preset, a Workload, or ``{name: query expression}``.
        mechanism : str, Mechanism or mapping
            A registered name, a mechanism object (its options kept), or the ``[mechanism]``
            table.
        mode : {"simulation", "release"}
        seed : int, optional
            Needed in simulation mode, refused in release mode.
        spec : "e2e", "pl94_2020", Spec, Path or None
            A preset for these levels, a Spec, a spec file, or no invariants.
        units, blocks, columns, values
            As ``[data]`` of the TOML file.
        method, method_options
            The post-processor (``[postprocess]``).
        solver_chain, executor, workers, failsafe, failsafe_keep, passes, round_passes
            As ``[solver]``; ``passes`` is one list of passes for every level, a mapping
            ``{level: passes}``, or ``"pl94_2020"`` (the production ordering of each level);
            ``round_passes`` likewise for the rounder (query names or expressions).
        output, microdata, error_table
            As ``[output]``.
        base : str or Path, optional
            The directory relative paths are relative to (default: the current one).

        Returns
        -------
        RunConfig

        Raises
        ------
        PostprocError
            ``RunConfig.build: [section] …`` or ``RunConfig.build [section]: …`` naming the
            argument's section and key, with what would be valid.

        Examples
        --------
        >>> config = RunConfig.build(persons="persons.parquet", levels=["nation", "state"],
        ...                          budget=1, seed=7)
        >>> config.budget.total, config.rng, config.publish()
        (Fraction(1, 1), 7, {'tot': ['nation', 'state'], 'gqhh': ['state']})
        >>> RunConfig.build(persons="p.parquet", levels=["nation", "state"], budget=1,
        ...                 mode="release", seed=7)
        Traceback (most recent call last):
        ...
        postproc.errors.PostprocError: RunConfig.build: [randomness] release mode cannot be seeded; remove seed or use mode = "simulation"
        """
        data: dict[str, Any] = {
            "data": {"persons": str(persons), "units": None if units is None else str(units),
                     "blocks": None if blocks is None else str(blocks),
                     "columns": None if columns is None else dict(columns),
                     "values": None if values is None else {
                         attr: {str(k): v for k, v in mapping.items()}
                         for attr, mapping in values.items()}},
            "schema": _schema_table(schema),
            "geography": {"levels": list(levels)},
            "workload": _workload_table(workload),
            "budget": _budget_table(budget),
            "mechanism": _mechanism_table(mechanism),
            "randomness": {"mode": mode, "seed": seed},
            "spec": _spec_table(spec),
            "postprocess": {"method": method, "options": dict(method_options or {}) or None},
            "solver": {"chain": None if solver_chain is None else list(solver_chain),
                       "executor": executor, "workers": workers, "failsafe": failsafe,
                       "failsafe_keep": (failsafe_keep if isinstance(failsafe_keep, str)
                                         else list(failsafe_keep)),
                       "passes": _passes_table(passes),
                       "round_passes": _passes_table(round_passes)},
            "output": {"directory": str(output), "microdata": microdata,
                       "error_table": error_table},
        }
        data = _without_none(data)
        return config_from_dict(data, base=base, source="RunConfig.build")

    def to_toml(self) -> str:
        """The TOML text of this configuration (its :attr:`raw` form), which
        :func:`load_config` reads back to an equal configuration when saved in the directory
        its relative paths are relative to.

        Examples
        --------
        >>> import tomllib
        >>> config = RunConfig.build(persons="/data/p.parquet", levels=["nation", "state"],
        ...                          budget="1/2", seed=1)
        >>> config_from_dict(tomllib.loads(config.to_toml())).budget == config.budget
        True
        """
        return dumps(self.raw, error=PostprocError)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready copy for manifests: the parsed TOML, with resolved paths in simulation mode.

        In release mode the input paths are withheld (they can name people, projects or
        places): the ``[data]`` section keeps its column and value mappings only.
        """
        out = {k: v for k, v in self.raw.items()}
        if self.release:
            data = dict(out.get("data", {}))
            for key in ("persons", "units", "blocks"):
                if key in data:
                    data[key] = "(withheld in release mode)"
            out["data"] = data
            return out
        out["resolved"] = {"persons": str(self.persons),
                           "units": str(self.units) if self.units else None,
                           "blocks": str(self.blocks) if self.blocks else None,
                           "output": str(self.output), "source": self.source}
        return out

    def fingerprint(self) -> str:
        """A short hash of everything that determines the run except the input paths (the data
        themselves are fingerprinted separately, see
        :func:`postproc.apps.runs.pipeline.data_fingerprint`) and the execution settings that
        do not change results.

        Examples
        --------
        >>> from dataclasses import replace
        >>> config = RunConfig.build(persons="p.parquet", levels=["nation", "state"],
        ...                          budget=1.0, seed=1)
        >>> config.fingerprint() == config.with_topdown(executor="process").fingerprint()
        True
        >>> config.fingerprint() == replace(config, seed=2).fingerprint()
        False
        """
        raw = {k: v for k, v in self.raw.items() if k not in ("output",)}
        if "data" in raw:
            raw["data"] = {k: v for k, v in raw["data"].items()
                           if k not in ("persons", "units", "blocks")}
        if "solver" in raw:
            raw["solver"] = {k: v for k, v in raw["solver"].items()
                             if k not in ("executor", "workers", "scheduler")}
        # and the parsed values that decide the results: a configuration changed with
        # dataclasses.replace (seed=…, budget=…) keeps its raw form but is another run
        parsed = {"seed": self.seed, "mode": self.randomness_mode, "levels": self.levels,
                  "mechanism": self.mechanism.to_dict(), "budget": self.budget.to_dict(),
                  "spec": self.spec.to_dict(), "workload": self.workload.to_dict(),
                  "schema": self.schema.to_dict(), "passes": self.topdown.passes,
                  "round_passes": self.topdown.round_passes,
                  "failsafe": self.topdown.failsafe,
                  "failsafe_keep": self.topdown.failsafe_keep, "solver": self.topdown.solver,
                  "method": self.method, "options": dict(self.method_options)}
        text = json.dumps({"raw": raw, "parsed": parsed}, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def read_config_text(path: str | Path) -> str:
    """The text of a config file; a missing or unreadable file is a :class:`PostprocError`
    naming it.

    Examples
    --------
    >>> read_config_text("no/such/run.toml")
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: config file no/such/run.toml does not exist
    """
    return read_toml(path, error=PostprocError).text


def load_config(path: str | Path) -> RunConfig:
    """Read and validate a run configuration file.

    Parameters
    ----------
    path : str or Path
        The TOML file; relative paths in it are relative to its directory.

    Returns
    -------
    RunConfig

    Raises
    ------
    PostprocError
        With the file, line and key of the problem and what would be valid.

    Examples
    --------
    >>> config = load_config("examples/e2e1940.toml")
    >>> config.levels, config.method, config.publish()["tot"]
    (('nation', 'state', 'county', 'enum_dist'), 'topdown', ['nation', 'state'])
    """
    path = Path(path)
    document = read_toml(path, error=PostprocError)
    return _from_document(document, base=path.parent)


def config_from_dict(data: Mapping[str, Any], *, base: Path | str = ".",
                     source: str = "<config>", text: str = "") -> RunConfig:
    """Build a :class:`RunConfig` from a parsed TOML mapping (see :func:`load_config`).

    Parameters
    ----------
    data : mapping
        Shaped like the TOML file (sections ``data``, ``schema``, …).
    base : str or Path, optional
        The directory relative paths are relative to.
    source : str, optional
        The file name used in messages.
    text : str, optional
        The TOML text ``data`` was parsed from, for line numbers in messages.

    Returns
    -------
    RunConfig

    Raises
    ------
    PostprocError
        As :func:`load_config`.

    Examples
    --------
    >>> import tomllib
    >>> data = tomllib.loads(open("examples/e2e1940.toml").read())
    >>> data["randomness"]["seed"] = -1
    >>> config_from_dict(data, base="examples")
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: <config>: [randomness] simulation mode needs seed = <non-negative integer>, not -1
    """
    document = TomlDocument(data, text, source=source, error=PostprocError)
    return _from_document(document, base=Path(base))


def _without_none(data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` without ``None`` values and without tables left empty by dropping them."""
    out = {}
    for key, value in data.items():
        if isinstance(value, Mapping):
            value = _without_none(value)
            if not value:
                continue
        if value is not None:
            out[key] = value
    return out


def _schema_table(schema: Any) -> Any:
    if isinstance(schema, str):
        return {"preset": schema}
    if isinstance(schema, Schema):
        preset = SCHEMAS.get(schema.name)
        return {"preset": schema.name} if preset == schema else schema.to_dict()
    return schema


def _workload_table(workload: Any) -> Any:
    if isinstance(workload, str):
        return {"preset": workload}
    if isinstance(workload, Workload):
        return {"queries": workload.to_dict()}
    if isinstance(workload, Mapping) and "preset" not in workload and "queries" not in workload:
        return {"queries": dict(workload)}
    return workload


def _budget_table(budget: Any) -> Any:
    if isinstance(budget, Budget):
        return budget.to_dict()
    if isinstance(budget, str) and budget in PRESETS["budget"]:
        return {"preset": budget}
    if isinstance(budget, Fraction):
        budget = str(budget)
    if isinstance(budget, (int, float, str)) and not isinstance(budget, bool):
        return {"kind": "pure", "total": budget, "preset": "e2e"}
    return budget


def _passes_table(passes: Any) -> Any:
    if passes is None or isinstance(passes, str):
        return passes
    if isinstance(passes, Mapping):
        return {level: _pass_lists(value) for level, value in passes.items()}
    return _pass_lists(passes)


def _pass_lists(passes: Any) -> Any:
    """Sequences of passes as lists of lists (anything else as given, for validation to name)."""
    if isinstance(passes, str) or not isinstance(passes, Sequence):
        return passes
    return [p if isinstance(p, str) or not isinstance(p, Sequence) else list(p) for p in passes]


def _mechanism_table(mechanism: Any) -> Any:
    if isinstance(mechanism, str):
        return {"name": mechanism}
    if isinstance(mechanism, Mechanism):
        return {"name": mechanism.name, **{f.name: getattr(mechanism, f.name)
                                           for f in fields(mechanism)}}
    return mechanism


def _spec_table(spec: Any) -> Any:
    if spec is None:
        return {}
    if isinstance(spec, str):
        return {"preset": spec}
    if isinstance(spec, Spec):
        return spec.to_dict()
    if isinstance(spec, Path):
        return {"file": str(spec)}
    return spec


def _from_document(doc: TomlDocument, *, base: Path) -> RunConfig:
    """The one path from TOML-shaped data to a :class:`RunConfig`, each error located."""
    source, data = doc.source, doc.data
    doc.check_sections(_SECTIONS)
    # [data]
    d = doc.table("data", required=True, allowed={"persons", "units", "blocks", "columns",
                                                  "values"})
    if "persons" not in d:
        raise d.fail(None, "[data] needs persons = \"path/to/persons.parquet\"")
    persons = d.path("persons", base=base)
    units = d.path("units", base=base) if d.get("units") else None
    blocks = d.path("blocks", base=base) if "blocks" in d else None
    columns = d.get("columns", {})
    if not (isinstance(columns, Mapping) and all(isinstance(v, str) for v in columns.values())):
        raise d.fail("columns", "columns must be a table of level or attribute = \"column in "
                                "the file\", e.g. { state = \"STATEFIP\" }")
    values = d.get("values", {})
    if not (isinstance(values, Mapping) and all(isinstance(v, Mapping) for v in values.values())):
        raise d.fail("values", "values must be a table of attribute = { \"value in the file\" = "
                               "label or code }, e.g. { cenrace = { \"1\" = \"white\" } }")
    columns = dict(columns)
    values = {k: dict(v) for k, v in values.items()}
    # [schema]
    s = doc.table("schema", required=True)
    s.check_keys({"preset"} if "preset" in s else {"name", "attributes"})
    schema = s.located("preset" if "preset" in s else None, lambda: (
        get_schema(s["preset"]) if "preset" in s else Schema.from_dict(s)))
    # [geography]
    g = doc.table("geography", required=True, allowed={"levels"})
    levels = g.get("levels")
    if not (isinstance(levels, list) and levels and all(isinstance(x, str) for x in levels)):
        raise g.fail("levels", "levels must be a list of level names, root first, e.g. "
                               "[\"nation\", \"state\", \"county\"]")
    levels = tuple(levels)
    if len(set(levels)) != len(levels):
        raise g.fail("levels", f"levels repeat a name: {list(levels)}")
    # each level is a file of the output: names one file system could take for one are refused
    g.located("levels", lambda: check_file_names(levels, what="level"))
    # [data] columns and values name levels and attributes (a misspelt values key would
    # otherwise be ignored and the file's codes read unmapped)
    mappable = {"columns": list(levels[1:]) + list(schema.names), "values": list(schema.names)}
    for key, mapping in (("columns", columns), ("values", values)):
        unknown_names = [k for k in mapping if k not in mappable[key]]
        if unknown_names:
            raise d.fail(key, f"{key} names {unknown_names}, which are not "
                              f"{'levels or ' if key == 'columns' else ''}attributes; valid: "
                              f"{mappable[key]}")
    # [workload]
    w = doc.table("workload", required=True)
    if w.get("preset") == "e2e":
        w.check_keys({"preset"})
        workload = w.located(None, lambda: e2e_workload(schema))
    elif w.get("preset") == "pl94_2020":
        w.check_keys({"preset"})
        workload = _pl94_workload(w, schema)
    elif "preset" in w:
        raise w.fail("preset", f"unknown workload preset {w['preset']!r}; presets are "
                               f"{_names(PRESETS['workload'])}")
    else:
        w.check_keys({"queries"})
        queries = w.get("queries")
        if not isinstance(queries, Mapping) or not queries:
            raise w.fail(None, "[workload] needs preset = \"e2e\" or a [workload.queries] table "
                               "of name = expression")
        for name, expression in queries.items():   # each query's error at its own line
            doc.located("workload.queries", name, lambda: check_query_name(
                parse_query(expression, schema, name=name)) if isinstance(expression, str)
                else None)
        workload = w.located(None, lambda: Workload.from_expressions(schema, queries))
    # [budget]
    b = doc.table("budget", required=True, allowed={"kind", "total", "preset", "neighbours",
                                                    "level_fractions", "query_fractions"})
    budget = _budget(b, levels, workload)
    # [mechanism]
    m = doc.table("mechanism", required=True, allowed={"name", "exact", "max_denominator"})
    options = {k: v for k, v in m.items() if k != "name"}
    mechanism = m.located("name", lambda: get_mechanism(m.get("name", "geometric"), **options))
    if mechanism.accounting == "zcdp" and budget.kind == "pure":
        raise m.fail("name", f"the {mechanism.name} mechanism needs a zCDP budget: set kind = "
                             "\"zcdp\" in [budget]")
    # [randomness]
    r = doc.table("randomness", required=True, allowed={"mode", "seed"})
    mode, seed = read_randomness(r)
    if mode == "release" and not mechanism.discrete:
        exact = "geometric" if mechanism.accounting == "pure" else "discrete_gaussian"
        raise m.fail("name", f"the {mechanism.name} mechanism adds floating-point noise, which "
                             "release mode refuses (its rounding leaks the value it protects, "
                             f"Mironov 2012); use name = \"{exact}\" (exact integer sampling), "
                             "or mode = \"simulation\" in [randomness] for experiments")
    if mode == "release" and mechanism.name == "discrete_gaussian" and not mechanism.exact:
        raise m.fail("exact", "exact = false samples the discrete Gaussian from floating-point "
                              "tables, for simulations only; release mode needs the exact "
                              "sampler: remove exact = false (or set exact = true)")
    # [spec]
    spec = _spec(doc, base, levels)
    # [postprocess]
    pp = doc.table("postprocess", allowed={"method", "options"})
    method, method_options = _postprocess(pp, levels, workload)
    # [solver]
    sv = doc.table("solver", allowed={"chain", "executor", "workers", "scheduler", "failsafe",
                                      "failsafe_keep", "passes", "round_passes"})
    chain = sv.located("chain", lambda: check_chain(sv.get("chain", list(DEFAULT_QP_CHAIN))),
                       catch=(PostprocError,))
    executor = sv.get("executor", "serial")
    if executor not in EXECUTORS:
        raise sv.fail("executor", f"unknown executor {executor!r}; choose from "
                                  f"{sorted(EXECUTORS)}")
    workers = sv.positive_int("workers")
    if sv.get("scheduler") is not None:
        raise sv.fail("scheduler", "a Dask scheduler address is not read from a config file: "
                      "the confidential work items would be sent to that host. Remove scheduler "
                      "here and name it on the command line with --scheduler ADDRESS (a local "
                      "cluster is used otherwise)")
    failsafe = sv.boolean("failsafe", True)
    failsafe_keep = _failsafe_keep(sv, workload)
    passes = _passes(sv, levels, workload, budget)
    round_passes = _round_passes(sv, levels, workload, schema)
    if method == "topdown" and sv.get("passes") == "pl94_2020" \
            and "pass_tolerance" not in method_options:
        # production's passes come with production's hold: without it a file naming the preset
        # but no [postprocess.options] pass_tolerance would hold within TopDown's 0.5
        from hierarchy.presets.pl94 import PRODUCTION_PASS_TOLERANCE

        method_options["pass_tolerance"] = PRODUCTION_PASS_TOLERANCE
    # [output]
    o = doc.table("output", allowed={"directory", "microdata", "error_table"})
    output = o.path("directory", "out", base=base)
    microdata = o.boolean("microdata", False)
    error_table = o.boolean("error_table", None)
    # TopDown's options: [solver] (CONFIG_KEYS), then [postprocess.options] when it is the method
    solver = {"chain": chain, "executor": executor, "workers": workers, "failsafe": failsafe,
              "failsafe_keep": failsafe_keep, "passes": passes, "round_passes": round_passes}
    topdown = TopDownOptions.of({CONFIG_KEYS[key]: value for key, value in solver.items()},
                                **(method_options if method == "topdown" else {}))
    return RunConfig(persons, units, columns, values, schema, levels, workload, budget,
                     mechanism, mode, seed, spec, topdown=topdown, output=output,
                     microdata=microdata, error_table=error_table, source=source,
                     raw=dict(data), method=method, method_options=method_options,
                     blocks=blocks)


def read_blocks(path: str | Path, levels: Sequence[str],
                columns: Mapping[str, str] | None = None):
    """The geography of a blocks file: one row per bottom-level unit, empty ones included.

    A geography built from persons and units alone has no unit for a block where nobody lives
    and no facility stands; TopDown then never gives persons to it, and its published counts
    are missing rather than zero. ``postproc synth2020`` writes every block to
    ``blocks.parquet`` (``[data] blocks`` in a run configuration).

    Parameters
    ----------
    path : str or Path
        CSV or parquet with one geocode column per non-root level (other columns are ignored).
    levels : sequence of str
        Level names, root first.
    columns : mapping, optional
        Level name → column name in the file (default: the level's name), as ``[data] columns``.

    Returns
    -------
    Geography

    Raises
    ------
    PostprocError
        If the file cannot be read, lacks a level's column, or its geocodes do not form a tree
        (a missing geocode, or a unit under two parents).

    Examples
    --------
    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "blocks.csv"
    >>> _ = path.write_text("state,block,housing_units\\n01,0100,3\\n01,0101,0\\n02,0200,5\\n")
    >>> geo = read_blocks(path, ["nation", "state", "block"])
    >>> geo.n_units("state"), list(geo.geocodes[2])
    (2, ['0100', '0101', '0200'])
    >>> read_blocks(path, ["nation", "state", "county", "block"])
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: .../blocks.csv: the blocks file has no column 'county' for level 'county'; its columns are ['state', 'block', 'housing_units'] (name it with [data] columns = { county = "..." })
    """
    from hierarchy.errors import HierarchyError
    from hierarchy.geography import Geography
    from hierarchy.io import read_table

    columns = dict(columns or {})
    try:
        table = read_table(path)
    except HierarchyError as exc:
        raise PostprocError(f"[data] blocks: {exc}") from None
    geocodes = []
    for level in levels[1:]:
        name = columns.get(level, level)
        if name not in table.column_names:
            raise PostprocError(f"{path}: the blocks file has no column {name!r} for level "
                                f"{level!r}; its columns are {table.column_names} (name it with "
                                f"[data] columns = {{ {level} = \"...\" }})")
        geocodes.append(table.column(name))
    try:
        geography, _ = Geography.from_columns(levels, [geocodes])
    except HierarchyError as exc:
        raise PostprocError(f"{path}: {exc}") from None
    return geography


def _names(names: Sequence[str]) -> str:
    return " and ".join(f'"{n}"' for n in names)


def _pl94_workload(w: Table, schema: Schema) -> Workload:
    """``[workload] preset = "pl94_2020"``: the production strategy's 11 queries."""
    from hierarchy.presets.pl94 import PL94_2020, pl94_workload

    if schema != PL94_2020:
        raise w.fail("preset", "the pl94_2020 workload is defined on the pl94_2020 schema; set "
                               "[schema] preset = \"pl94_2020\" (or list the queries in "
                               "[workload.queries])")
    return pl94_workload()


def _per_level_passes(sv: Table, key: str, levels: tuple[str, ...],
                      preset: Callable[[str, tuple[str, ...]], list[list[str]]]) -> Any:
    """A ``[solver]`` order (``passes``, ``round_passes``) as given: ``None``; ``(None, list)``
    for one list of every level; or ``(dict level → list, None)`` from the preset
    ``"pl94_2020"`` (``preset(level, levels)``) or a table ``level = passes``."""
    value = sv.get(key)
    if value is None:
        return None
    if isinstance(value, str):
        if value != "pl94_2020":
            raise sv.fail(key, f"unknown {key} preset {value!r}; the preset is "
                               f"{_names(PRESETS[key])}, or give a list of lists of query "
                               "names, or a table of level = list of lists")
        return sv.located(key, lambda: {lv: preset(lv, levels) for lv in levels}), None
    if isinstance(value, Mapping):
        unknown = [lv for lv in value if lv not in levels]
        if unknown:
            raise sv.fail(key, f"{key} name levels {unknown} that are not in [geography] "
                               f"levels {list(levels)}")
        return dict(value), None
    return None, value


def _passes(sv: Table, levels: tuple[str, ...], workload: Workload,
            budget: Budget) -> Passes | dict[str, Passes] | None:
    """``[solver] passes``: one list of passes for every level, a table ``level = passes``, or
    the preset ``"pl94_2020"``. Per-level passes may name only queries measured at the level."""
    from hierarchy.presets.pl94 import pl94_passes

    given = _per_level_passes(sv, "passes", levels, pl94_passes)
    if given is None:
        return None
    per_level, passes = given
    if per_level is None:
        bad = [q for q in _pass_names(sv, passes, "passes") if q not in workload]
        if bad:
            raise sv.fail("passes", f"passes name queries {bad} that are not in the workload "
                                    f"{list(workload.names)}")
        return tuple(tuple(p) for p in passes)
    out = {}
    for lv, value in per_level.items():
        measured = budget.queries(lv) if lv in budget.levels else ()
        bad = [q for q in _pass_names(sv, value, f"passes of level {lv!r}") if q not in measured]
        if bad:
            raise sv.fail("passes", f"passes of level {lv!r} name queries {bad} that are not "
                                    f"measured at {lv!r}; the budget measures "
                                    f"{list(measured)} there")
        out[lv] = tuple(tuple(p) for p in value)
    return out


def _round_passes(sv: Table, levels: tuple[str, ...], workload: Workload,
                  schema: Schema) -> Passes | dict[str, Passes] | None:
    """``[solver] round_passes``: the rounder's passes — one list for every level, a table
    ``level = passes``, or the preset ``"pl94_2020"``. Entries are workload query names or
    query expressions on the schema (the production rounder targets unmeasured queries)."""
    from hierarchy.errors import HierarchyError
    from hierarchy.frames import resolve_query
    from hierarchy.presets.pl94 import pl94_round_passes

    given = _per_level_passes(sv, "round_passes", levels, pl94_round_passes)
    if given is None:
        return None

    def checked(passes: Any, what: str) -> Passes:
        for q in _pass_names(sv, passes, what, key="round_passes"):
            try:
                resolve_query(q, schema, workload)
            except HierarchyError as exc:
                raise sv.fail("round_passes", f"{what}: {exc}") from None
        return tuple(tuple(p) for p in passes)

    per_level, passes = given
    if per_level is None:
        return checked(passes, "round_passes")
    return {lv: checked(v, f"round_passes of level {lv!r}") for lv, v in per_level.items()}


def _pass_names(sv: Table, passes: Any, what: str, key: str = "passes") -> list[str]:
    """The query names of one list of passes, refusing anything but lists of lists of names."""
    if not (isinstance(passes, list) and passes and all(
            isinstance(p, list) and p and all(isinstance(q, str) for q in p) for p in passes)):
        raise sv.fail(key, f"{what} must be a list of lists of query names, e.g. "
                           "[[\"total\"], [\"detailed\"]], not " + repr(passes))
    return [q for p in passes for q in p]


def _spec(doc: TomlDocument, base: Path, levels: tuple[str, ...]) -> Spec:
    """The ``[spec]``: the E2E preset, a spec file, or the spec written inline; a spec file's
    own errors keep its file and line, after the line of ``file =`` here."""
    sp_ = doc.table("spec")
    try:
        if sp_.get("preset") == "e2e":
            sp_.check_keys({"preset"})
            spec = Spec.e2e(levels)
        elif sp_.get("preset") == "pl94_2020":
            sp_.check_keys({"preset"})
            spec = Spec.pl94_2020(levels)
        elif "preset" in sp_:
            raise sp_.fail("preset", f"unknown spec preset {sp_['preset']!r}; presets are "
                                     f"{_names(PRESETS['spec'])}")
        elif "file" in sp_:
            sp_.check_keys({"file"})
            spec = Spec.from_toml(base / sp_["file"])
        else:
            spec = Spec.from_dict(sp_.data, source=doc.source, text=doc.text, table="spec")
        spec.check_levels(levels)
    except SpecError as exc:
        message = str(exc)
        if message.startswith(f"{doc.source}, line "):  # an inline spec: located in this file
            raise PostprocError(message) from None
        key = next((k for k in ("file", "preset") if k in sp_), None)
        raise sp_.fail(key, message.removeprefix(f"{doc.source}: ")) from None
    return spec


def _failsafe_keep(sv: Table, workload: Workload) -> tuple[str, ...] | str:
    """``[solver] failsafe_keep``: "auto" or workload queries the failsafe keeps exact."""
    from postproc.methods.topdown.options import check_failsafe_keep

    checked = sv.located("failsafe_keep", lambda: check_failsafe_keep(
        sv.get("failsafe_keep", "auto"), workload), catch=(PostprocError,))
    return "auto" if checked is None else checked


#: Options a run gives a post-processor itself — TopDown's from ``[solver]``, and the run's own
#: progress and checkpoints — so never in ``[postprocess.options]``.
RUN_OPTIONS = RUN_FIELDS | {"scheduler", "on_level", "resume_from"}


def method_options_problem(method: str, options: Mapping[str, Any], *,
                           levels: Sequence[str] | None = None,
                           workload: Workload | None = None) -> str | None:
    """What is wrong with ``options`` for the registered post-processor ``method`` (options it
    does not take, or that the run sets itself: :data:`RUN_OPTIONS`; a value of the wrong type
    or range: :meth:`~postproc.methods.registry.PostProcessor.check_options`), or ``None``.

    Examples
    --------
    >>> method_options_problem("sampling", {"sweeps": 10}) is None
    True
    >>> method_options_problem("topdown", {"workers": 2})
    "topdown takes no option(s) ['workers']; it takes ['batch_children', 'failsafe_slack', 'group_children', 'pass_tolerance']; TopDown's solver options go in [solver]"
    >>> method_options_problem("sampling", {"sweeps": "200"})
    "sampling: option sweeps must be an integer, not '200' (without the quotes: sweeps = 200)"
    """
    problem = _options_error(method, options, levels=levels, workload=workload)
    return None if problem is None else str(problem)


def _options_error(method: str, options: Mapping[str, Any], *,
                   levels: Sequence[str] | None = None,
                   workload: Workload | None = None) -> PostprocError | None:
    """:func:`method_options_problem` as the error (an ``OptionError`` names the option)."""
    from postproc.methods import get
    from postproc.methods.registry import OptionError

    entry = get(method)
    allowed = set(entry.options()) - RUN_OPTIONS
    unknown = sorted(set(options) - allowed)
    if unknown:
        return OptionError(f"{method} takes no option(s) {unknown}; it takes "
                           f"{sorted(allowed) or 'none'}"
                           + ("; TopDown's solver options go in [solver]"
                              if method == "topdown" else ""), unknown[0])
    try:
        entry.check_options(options, levels=levels, workload=workload)
    except PostprocError as exc:
        return exc
    return None


def _postprocess(section: Table, levels: Sequence[str], workload: Workload
                 ) -> tuple[str, dict[str, Any]]:
    """``[postprocess] method = "…"`` (a registered post-processor, default TopDown) and its
    ``[postprocess.options]``, each checked against what the method takes, its declared type
    and the method's own checks (a table of ``group_children`` per level names only
    ``levels``; ``queries`` only the workload's) — in the registry, so a method's new option
    needs no code here. An error names the option's line. TopDown's solver options live in
    ``[solver]``."""
    from postproc.methods import available

    method = section.get("method", "topdown")
    if method not in available():
        raise section.fail("method", f"unknown method {method!r}; registered: "
                                       f"{list(available())} (postproc methods lists them)")
    options = section.get("options", {})
    if not isinstance(options, Mapping):
        raise section.fail("options", "options must be a table, e.g. options = { sweeps = 200 }")
    problem = _options_error(method, options, levels=levels, workload=workload)
    if problem is not None:
        option = getattr(problem, "option", None)
        doc = section.document
        where = (doc.line("postprocess.options", option) if option is not None else None) \
            or doc.line("postprocess", "options")
        raise PostprocError(f"{doc.source}, line {where}: {problem}" if where is not None
                            else f"{doc.source} [postprocess.options]: {problem}")
    return method, dict(options)


def _budget(b: Table, levels: tuple[str, ...], workload: Workload) -> Budget:
    """The [budget] section as a Budget, each error located at the key that causes it.

    Budget validates kind, neighbours, total, level fractions and query fractions in turn; each
    step below adds one of them to otherwise valid arguments, so a failure belongs to its key.
    """
    if "preset" in b and b["preset"] not in PRESETS["budget"]:
        raise b.fail("preset", f"unknown budget preset {b['preset']!r}; presets are "
                               f"{_names(PRESETS['budget'])}")
    if b.get("preset") == "pl94_2020":
        return _pl94_budget(b, levels, workload)
    if "total" not in b:
        raise b.fail(None, "[budget] needs total = <epsilon or rho>")
    kind = b.get("kind", "pure")
    neighbours = b.get("neighbours", "change")
    one = {"_": 1}
    steps: list[tuple[str, Callable[[], Budget]]] = [
        ("kind", lambda: Budget(kind, 1, one, one)),
        ("neighbours", lambda: Budget("pure", 1, one, one, neighbours)),
        ("total", lambda: Budget(kind, b["total"], one, one)),
    ]
    if b.get("preset") == "e2e":
        steps.append(("preset", lambda: Budget.e2e(b["total"], levels, kind=kind,
                                                   neighbours=neighbours)))
    elif "level_fractions" not in b or "query_fractions" not in b:
        raise b.fail(None, "[budget] needs preset = \"e2e\" or both level_fractions and "
                           "query_fractions")
    elif not isinstance(b["query_fractions"], Mapping):
        raise b.fail("query_fractions", "query_fractions must be a table of query = fraction "
                                        "(or of level = {query = fraction, …})")
    else:
        steps.append(("level_fractions", lambda: Budget(kind, 1, b["level_fractions"], one)))
        steps.append(("query_fractions", lambda: Budget(kind, b["total"], b["level_fractions"],
                                                        b["query_fractions"], neighbours)))
    budget = None
    for key, build in steps:
        budget = b.located(key, build)
    if "preset" in b:
        key = "preset"
    elif any(lv not in levels for lv in budget.levels):
        key = "level_fractions"
    else:
        key = "query_fractions"
    b.located(key, lambda: budget.check_against(workload, levels))
    return budget


def _pl94_budget(b: Table, levels: tuple[str, ...], workload: Workload) -> Budget:
    """``[budget] preset = "pl94_2020"``: the production shares of every level and query, at
    the production ρ = (542/339)² unless ``total`` says otherwise; zCDP; add/remove
    neighbours unless ``neighbours`` says otherwise (see
    :func:`hierarchy.presets.pl94.pl94_budget`)."""
    from hierarchy.presets.pl94 import TOTAL_RHO, pl94_budget

    fixed = sorted({"level_fractions", "query_fractions"} & set(b))
    if fixed:
        raise b.fail(fixed[0], "preset = \"pl94_2020\" sets every level and query fraction "
                               f"(the production strategy's); remove {' and '.join(fixed)}, or "
                               "remove the preset and give both tables")
    if b.get("kind", "zcdp") != "zcdp":
        raise b.fail("kind", "the pl94_2020 budget is zCDP (production's ρ); set kind = "
                             "\"zcdp\" or remove kind")
    neighbours = b.get("neighbours", "add_remove")
    one = {"_": 1}
    b.located("neighbours", lambda: Budget("zcdp", 1, one, one, neighbours))
    total = b.located("total", lambda: Budget("zcdp", b.get("total", str(TOTAL_RHO)), one,
                                              one).total)
    preset = b.located("preset", lambda: pl94_budget(levels, neighbours=neighbours))
    budget = b.located("total", lambda: Budget(
        "zcdp", total, dict(preset.level_fractions),
        {lv: dict(q) for lv, q in preset.query_fractions}, neighbours))
    b.located("preset", lambda: budget.check_against(workload, levels))
    return budget
