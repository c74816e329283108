"""The run configuration: one TOML file, or Python arguments, validated into one :class:`RunConfig`.

See ``examples/e2e1940.toml`` for a complete, commented example (and ``examples/pl94_2020.toml``
for the 2020 redistricting-data presets). Relative paths are relative to
the config file's directory. Every error names the file, the line where it could be found, the
key, and what would be valid. :meth:`RunConfig.build` takes the same settings as Python values
and validates them through the same code (its errors name the section and key); the TOML layer
itself is :mod:`hierarchy.io.tomlconfig`; each section is read by
:mod:`postproc.apps.runs.config_sections`, ``[postprocess]`` and ``[solver]`` by
:mod:`postproc.apps.runs.config_postprocess`.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from hierarchy.budget import Budget
from hierarchy.io.tomlconfig import TomlDocument, dumps, read_toml
from hierarchy.measurement import published_statistics, spec_queries
from hierarchy.mechanisms import Mechanism
from hierarchy.queries import Workload
from hierarchy.schema import Schema
from invariants.catalogue import statistics_to_publish
from invariants.spec import Spec
from postproc.apps.runs.config_keys import allowed_keys, section_names
from postproc.apps.runs.config_postprocess import (  # noqa: F401  (their old home)
    RUN_OPTIONS,
    _solver,
    _with_production_tolerance,
    method_options_problem,
    postprocess_section,
)
from postproc.apps.runs.config_sections import (  # noqa: F401  (PRESETS: its old home)
    PRESETS,
    Passes,
    _budget,
    _budget_table,
    _data_files,
    _levels,
    _mechanism_table,
    _noise,
    _output,
    _passes_table,
    _schema,
    _schema_table,
    _spec,
    _spec_table,
    _without_none,
    _workload,
    _workload_table,
)
from postproc.errors import PostprocError
from postproc.methods.topdown.options import CONFIG_KEYS, TopDownOptions

__all__ = ["RunConfig", "load_config", "config_from_dict", "read_config_text", "read_blocks",
           "PRESETS"]

_SECTIONS = section_names()      # postproc.apps.runs.config_keys: every key, defined once


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
    postproc.errors.PostprocError: RunConfig.build [spec]: the E2E spec needs at least two levels
    (nation and below)
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

    def query_invariants(self) -> dict[str, dict[str, Any]]:
        """The spec's query invariants, their queries resolved on the workload: name →
        ``{"query", "answers", "levels"}`` (:func:`hierarchy.published_queries.spec_queries`).

        Examples
        --------
        >>> from invariants.spec import Spec
        >>> spec = Spec.from_dict({"invariant": [{"name": "adults", "query": "marginal(votingage)",
        ...                                      "answers": [1], "levels": ["state"]}]})
        >>> config = RunConfig.build(persons="p.parquet", levels=["nation", "state"], budget=1,
        ...                          seed=1, spec=spec)
        >>> config.query_invariants()
        {'adults': {'query': 'marginal(votingage)', 'answers': [1], 'levels': ['state']}}
        """
        return spec_queries(self.spec, self.schema, self.levels, workload=self.workload)

    def published(self, truth: Any) -> dict[str, dict[str, Any]]:
        """What the spec publishes exactly, computed from ``truth``: the statistics of
        :meth:`publish` and the answers of its :meth:`query_invariants`
        (:func:`hierarchy.measurement.published_statistics`)."""
        return published_statistics(truth, self.publish(), queries=self.query_invariants())

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
            (:func:`hierarchy.presets.pl94.pl94_budget`); a :class:`~hierarchy.budget.Budget` is
            used as is; a mapping is the ``[budget]`` table.
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
        postproc.errors.PostprocError: RunConfig.build: [randomness] release mode cannot be seeded;
        remove seed or use mode = "simulation"
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
    postproc.errors.PostprocError: <config>: [randomness] simulation mode needs seed = <non-negative
    integer>, not -1
    """
    document = TomlDocument(data, text, source=source, error=PostprocError)
    return _from_document(document, base=Path(base))



def _from_document(doc: TomlDocument, *, base: Path) -> RunConfig:
    """The one path from TOML-shaped data to a :class:`RunConfig`, each error located: the
    sections in turn, each checked against those read before it."""
    doc.check_sections(_SECTIONS)
    files = _data_files(doc, base)                                          # [data]
    schema = _schema(doc)                                                   # [schema]
    levels = _levels(doc)                                                   # [geography]
    files.check_names(levels, schema)     # [data] columns and values name levels, attributes
    workload = _workload(doc, schema)                                       # [workload]
    budget = _budget(doc.table("budget", required=True,                    # [budget]
                               allowed=allowed_keys("budget")), levels, workload)
    noise = _noise(doc, budget)                                 # [mechanism], [randomness]
    spec = _spec(doc, base, levels, workload)                               # [spec]
    method, method_options = postprocess_section(                           # [postprocess]
        doc.table("postprocess", allowed=allowed_keys("postprocess")), levels, workload)
    solver = _solver(doc, levels, workload, budget, schema)                 # [solver]
    method_options = _with_production_tolerance(method, method_options, solver)
    output = _output(doc, base)                                             # [output]
    # TopDown's options: [solver] (CONFIG_KEYS), then [postprocess.options] when it is the method
    topdown = TopDownOptions.of({CONFIG_KEYS[key]: value for key, value in solver.options.items()},
                                **(method_options if method == "topdown" else {}))
    return RunConfig(files.persons, files.units, files.columns, files.values, schema, levels,
                     workload, budget, noise.mechanism, noise.mode, noise.seed, spec,
                     topdown=topdown, output=output.directory, microdata=output.microdata,
                     error_table=output.error_table, source=doc.source, raw=dict(doc.data),
                     method=method, method_options=method_options, blocks=files.blocks)


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
    postproc.errors.PostprocError: .../blocks.csv: the blocks file has no column 'county' for level
    'county'; its columns are ['state', 'block', 'housing_units'] (name it with [data] columns = {
    county = "..." })
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

