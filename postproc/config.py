"""The run configuration: one TOML file, parsed into one typed :class:`RunConfig`.

See ``examples/e2e1940.toml`` for a complete, commented example. Relative paths are relative to
the config file's directory. Every error names the file, the line where it could be found, the
key, and what would be valid.
"""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from hierarchy.budget import Budget
from hierarchy.errors import HierarchyError
from hierarchy.mechanisms import get_mechanism
from hierarchy.queries import Workload, e2e_workload
from hierarchy.schema import Schema, get_schema
from hierarchy.storage import special_file_kind
from invariants.errors import SpecError
from invariants.spec import Spec
from postproc.errors import PostprocError
from postproc.executors import EXECUTORS
from postproc.solvers import DEFAULT_QP_CHAIN, check_chain

__all__ = ["RunConfig", "load_config", "config_from_dict", "read_config_text"]

_SECTIONS = {"data", "schema", "geography", "workload", "budget", "mechanism", "randomness",
             "spec", "postprocess", "solver", "output"}


@dataclass(frozen=True)
class RunConfig:
    """Everything ``postproc run`` needs, validated."""

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
    solver_chain: tuple[str, ...] = DEFAULT_QP_CHAIN
    executor: str = "serial"
    workers: int | None = None
    scheduler: str | None = None
    failsafe: bool = True
    passes: tuple[tuple[str, ...], ...] | None = None
    output: Path = Path("out")
    microdata: bool = False
    error_table: bool | None = None
    source: str = "<config>"
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)
    failsafe_keep: tuple[str, ...] | str = "auto"
    method: str = "topdown"
    method_options: Mapping[str, Any] = field(default_factory=dict)

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

    def publish(self) -> dict[str, list[str]]:
        """Exact statistics the spec's invariants need published, by level."""
        out = {}
        tot = self.spec.invariant_levels("tot", self.levels)
        gqhh = self.spec.invariant_levels("gqhh", self.levels)
        if tot:
            out["tot"] = list(tot)
        if gqhh:
            out["gqhh"] = list(gqhh)
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready copy for manifests: the parsed TOML, with resolved paths in simulation mode.

        In release mode the input paths are withheld (they can name people, projects or
        places): the ``[data]`` section keeps its column and value mappings only.
        """
        out = {k: v for k, v in self.raw.items()}
        if self.release:
            data = dict(out.get("data", {}))
            for key in ("persons", "units"):
                if key in data:
                    data[key] = "(withheld in release mode)"
            out["data"] = data
            return out
        out["resolved"] = {"persons": str(self.persons),
                           "units": str(self.units) if self.units else None,
                           "output": str(self.output), "source": self.source}
        return out

    def fingerprint(self) -> str:
        """A short hash of everything that determines the run except the input paths (the data
        themselves are fingerprinted separately, see :func:`postproc.pipeline.data_fingerprint`)
        and the execution settings that do not change results."""
        raw = {k: v for k, v in self.raw.items() if k not in ("output",)}
        if "data" in raw:
            raw["data"] = {k: v for k, v in raw["data"].items() if k not in ("persons", "units")}
        if "solver" in raw:
            raw["solver"] = {k: v for k, v in raw["solver"].items()
                             if k not in ("executor", "workers", "scheduler")}
        text = json.dumps(raw, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


class _Where:
    """Locate ``key`` inside ``[section]`` of the TOML text for messages."""

    def __init__(self, text: str, source: str):
        self.lines = text.splitlines()
        self.source = source

    def line(self, section: str, key: str | None = None) -> int | None:
        """The line of ``key = …`` in ``[section]``, or (no key) of the section's header or of
        a top-level ``section = …``; None if absent."""
        in_section = False
        top_level = True
        for i, raw in enumerate(self.lines, start=1):
            s = raw.strip()
            m = re.match(r"^\[+([^\]]+)\]+", s)
            if m:
                top_level = False
                in_section = m.group(1).strip() == section or m.group(1).strip().startswith(
                    section + ".")
                if in_section and key is None:
                    return i
                continue
            if key is None:
                if top_level and re.match(rf"^{re.escape(section)}\s*[=.]", s):
                    return i
            elif in_section and re.match(rf"^{re.escape(key)}\s*=", s):
                return i
        return None

    def __call__(self, section: str, key: str | None = None) -> str:
        # The key's line; a key written as its own table ([section.key]); else the section.
        line = None
        if key is not None:
            line = self.line(section, key) or self.line(f"{section}.{key}")
        line = line or self.line(section)
        return f"{self.source}, line {line}" if line else f"{self.source} [{section}]"


def _fail(where: str, message: str) -> PostprocError:
    return PostprocError(f"{where}: {message}")


def read_config_text(path: str | Path) -> str:
    """The text of a config file; a missing or unreadable file is a :class:`PostprocError`
    naming it."""
    path = Path(path)
    kind = special_file_kind(path)   # a FIFO or device would block the read forever
    if kind is not None:
        raise PostprocError(f"config file {path} is not a regular file: it is {kind}; give the "
                            "TOML file")
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PostprocError(f"config file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise PostprocError(f"config file {path} cannot be read as UTF-8 text: "
                            f"{getattr(exc, 'strerror', None) or exc}") from None


def load_config(path: str | Path) -> RunConfig:
    """Read and validate a run configuration file.

    Raises
    ------
    PostprocError
        With the file, line and key of the problem and what would be valid.
    """
    path = Path(path)
    text = read_config_text(path)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PostprocError(f"{path}: invalid TOML: {exc}") from None
    return config_from_dict(data, base=path.parent, source=str(path), text=text)


def config_from_dict(data: Mapping[str, Any], *, base: Path | str = ".",
                     source: str = "<config>", text: str = "") -> RunConfig:
    """Build a :class:`RunConfig` from a parsed TOML mapping (see :func:`load_config`)."""
    base = Path(base)
    where = _Where(text, source)
    unknown = set(data) - _SECTIONS
    if unknown:
        raise _fail(where(sorted(unknown)[0]), f"unknown section(s) {sorted(unknown)}; sections "
                                               f"are {sorted(_SECTIONS)}")

    def section(name: str, required: bool = True) -> Mapping[str, Any]:
        value = data.get(name)
        if value is None:
            if required:
                raise _fail(source, f"missing section [{name}]")
            return {}
        if not isinstance(value, Mapping):
            raise _fail(where(name), f"[{name}] must be a table")
        return value

    def check_keys(name: str, sec: Mapping[str, Any], allowed: set[str]) -> None:
        extra = set(sec) - allowed
        if extra:
            key = sorted(extra)[0]
            raise _fail(where(name, key), f"unknown key {key!r} in [{name}]; allowed: "
                                          f"{sorted(allowed)}")

    # [data]
    d = section("data")
    check_keys("data", d, {"persons", "units", "columns", "values"})
    if "persons" not in d:
        raise _fail(where("data"), "[data] needs persons = \"path/to/persons.parquet\"")
    persons = (base / d["persons"]).resolve()
    units = (base / d["units"]).resolve() if d.get("units") else None
    columns = d.get("columns", {})
    if not (isinstance(columns, Mapping) and all(isinstance(v, str) for v in columns.values())):
        raise _fail(where("data", "columns"), "columns must be a table of level or attribute "
                                              "= \"column in the file\", e.g. "
                                              "{ state = \"STATEFIP\" }")
    values = d.get("values", {})
    if not (isinstance(values, Mapping) and all(isinstance(v, Mapping) for v in values.values())):
        raise _fail(where("data", "values"), "values must be a table of attribute = { \"value in "
                                             "the file\" = label or code }, e.g. { cenrace = "
                                             "{ \"1\" = \"white\" } }")
    columns = dict(columns)
    values = {k: dict(v) for k, v in values.items()}
    # [schema]
    s = section("schema")
    try:
        if "preset" in s:
            check_keys("schema", s, {"preset"})
            schema = get_schema(s["preset"])
        else:
            check_keys("schema", s, {"name", "attributes"})
            schema = Schema.from_dict(s)
    except HierarchyError as exc:
        raise _fail(where("schema", "preset" if "preset" in s else None), str(exc)) from None
    # [geography]
    g = section("geography")
    check_keys("geography", g, {"levels"})
    levels = g.get("levels")
    if not (isinstance(levels, list) and levels and all(isinstance(x, str) for x in levels)):
        raise _fail(where("geography", "levels"), "levels must be a list of level names, root "
                                                  "first, e.g. [\"nation\", \"state\", \"county\"]")
    levels = tuple(levels)
    if len(set(levels)) != len(levels):
        raise _fail(where("geography", "levels"), f"levels repeat a name: {list(levels)}")
    # [data] columns and values name levels and attributes (a misspelt values key would
    # otherwise be ignored and the file's codes read unmapped)
    mappable = {"columns": list(levels[1:]) + list(schema.names), "values": list(schema.names)}
    for key, mapping in (("columns", columns), ("values", values)):
        unknown_names = [k for k in mapping if k not in mappable[key]]
        if unknown_names:
            raise _fail(where("data", key), f"{key} names {unknown_names}, which are not "
                                            f"{'levels or ' if key == 'columns' else ''}"
                                            f"attributes; valid: {mappable[key]}")
    # [workload]
    w = section("workload")
    try:
        if w.get("preset") == "e2e":
            check_keys("workload", w, {"preset"})
            workload = e2e_workload(schema)
        elif "preset" in w:
            raise _fail(where("workload", "preset"), f"unknown workload preset {w['preset']!r}; "
                                                     "the preset is \"e2e\"")
        else:
            check_keys("workload", w, {"queries"})
            queries = w.get("queries")
            if not isinstance(queries, Mapping) or not queries:
                raise _fail(where("workload"), "[workload] needs preset = \"e2e\" or a "
                                               "[workload.queries] table of name = expression")
            workload = Workload.from_expressions(schema, queries)
    except HierarchyError as exc:
        raise _fail(where("workload"), str(exc)) from None
    # [budget]
    b = section("budget")
    check_keys("budget", b, {"kind", "total", "preset", "neighbours", "level_fractions",
                             "query_fractions"})
    budget = _budget(b, levels, workload, where)
    # [mechanism]
    m = section("mechanism")
    check_keys("mechanism", m, {"name", "exact", "max_denominator"})
    try:
        options = {k: v for k, v in m.items() if k != "name"}
        mechanism = get_mechanism(m.get("name", "geometric"), **options)
    except HierarchyError as exc:
        raise _fail(where("mechanism", "name"), str(exc)) from None
    if mechanism.accounting == "zcdp" and budget.kind == "pure":
        raise _fail(where("mechanism", "name"), f"the {mechanism.name} mechanism needs a zCDP "
                                                "budget: set kind = \"zcdp\" in [budget]")
    # [randomness]
    r = section("randomness")
    check_keys("randomness", r, {"mode", "seed"})
    mode = r.get("mode")
    if mode not in ("release", "simulation"):
        raise _fail(where("randomness", "mode"), "mode must be \"release\" (cryptographically "
                                                 "secure, unseedable) or \"simulation\" (seeded, "
                                                 "NOT safe for releases)")
    seed = r.get("seed")
    if mode == "release" and seed is not None:
        raise _fail(where("randomness", "seed"), "release mode cannot be seeded; remove seed or "
                                                 "use mode = \"simulation\"")
    if mode == "simulation" and (not isinstance(seed, int) or isinstance(seed, bool)
                                 or seed < 0):
        raise _fail(where("randomness", "seed"), "simulation mode needs seed = <non-negative "
                                                 "integer>")
    if mode == "release" and not mechanism.discrete:
        exact = "geometric" if mechanism.accounting == "pure" else "discrete_gaussian"
        raise _fail(where("mechanism", "name"), f"the {mechanism.name} mechanism adds "
                    "floating-point noise, which release mode refuses (its rounding leaks the "
                    f"value it protects, Mironov 2012); use name = \"{exact}\" (exact integer "
                    "sampling), or mode = \"simulation\" in [randomness] for experiments")
    # [spec]
    sp_ = section("spec", required=False)
    try:
        if sp_.get("preset") == "e2e":
            check_keys("spec", sp_, {"preset"})
            spec = Spec.e2e(levels)
        elif "preset" in sp_:
            raise _fail(where("spec", "preset"), f"unknown spec preset {sp_['preset']!r}; the "
                                                 "preset is \"e2e\"")
        elif "file" in sp_:
            check_keys("spec", sp_, {"file"})
            spec = Spec.from_toml(base / sp_["file"])
        else:
            spec = Spec.from_dict(sp_, source=source, text=text)
        spec.check_levels(levels)
    except SpecError as exc:
        message = str(exc)
        if message.startswith(f"{source}, line "):  # an inline spec: located in this file
            raise PostprocError(message) from None
        key = next((k for k in ("file", "preset") if k in sp_), None)
        raise _fail(where("spec", key), message.removeprefix(f"{source}: ")) from None
    # [postprocess]
    pp = section("postprocess", required=False)
    check_keys("postprocess", pp, {"method", "options"})
    method, method_options = _postprocess(pp, where)
    # [solver]
    sv = section("solver", required=False)
    check_keys("solver", sv, {"chain", "executor", "workers", "scheduler", "failsafe",
                              "failsafe_keep", "passes"})
    try:
        chain = check_chain(sv.get("chain", list(DEFAULT_QP_CHAIN)))
    except PostprocError as exc:
        raise _fail(where("solver", "chain"), str(exc)) from None
    executor = sv.get("executor", "serial")
    if executor not in EXECUTORS:
        raise _fail(where("solver", "executor"), f"unknown executor {executor!r}; choose from "
                                                 f"{sorted(EXECUTORS)}")
    workers = sv.get("workers")
    if workers is not None and (not isinstance(workers, int) or isinstance(workers, bool)
                                or workers < 1):
        raise _fail(where("solver", "workers"), f"workers must be a positive integer, not "
                                                f"{workers!r}")
    if sv.get("scheduler") is not None:
        raise _fail(where("solver", "scheduler"), "a Dask scheduler address is not read from "
                    "a config file: the confidential work items would be sent to that host. "
                    "Remove scheduler here and name it on the command line with --scheduler "
                    "ADDRESS (a local cluster is used otherwise)")
    failsafe = _boolean(sv, "failsafe", True, where("solver", "failsafe"))
    failsafe_keep = sv.get("failsafe_keep", "auto")
    try:
        from postproc.topdown.failsafe import check_failsafe_keep

        checked = check_failsafe_keep(failsafe_keep, workload)
    except PostprocError as exc:
        raise _fail(where("solver", "failsafe_keep"), str(exc)) from None
    failsafe_keep = "auto" if checked is None else checked
    passes = sv.get("passes")
    if passes is not None:
        if not (isinstance(passes, list) and all(isinstance(p, list) for p in passes)):
            raise _fail(where("solver", "passes"), "passes must be a list of lists of query "
                                                   "names, e.g. [[\"total\"]]")
        bad = [q for p in passes for q in p if q not in workload]
        if bad:
            raise _fail(where("solver", "passes"), f"passes name queries {bad} that are not in "
                                                   f"the workload {list(workload.names)}")
        passes = tuple(tuple(p) for p in passes)
    # [output]
    o = section("output", required=False)
    check_keys("output", o, {"directory", "microdata", "error_table"})
    directory = o.get("directory", "out")
    if not isinstance(directory, str) or not directory.strip():
        raise _fail(where("output", "directory"), "directory must be a non-empty path string")
    output = (base / directory).resolve()
    microdata = _boolean(o, "microdata", False, where("output", "microdata"))
    error_table = _boolean(o, "error_table", None, where("output", "error_table"))
    return RunConfig(persons, units, columns, values, schema, levels, workload, budget,
                     mechanism, mode, seed, spec, chain, executor, workers, None, failsafe,
                     passes, output, microdata, error_table, source, dict(data),
                     failsafe_keep=failsafe_keep, method=method,
                     method_options=method_options)


def _postprocess(section: Mapping[str, Any], where: _Where) -> tuple[str, dict[str, Any]]:
    """``[postprocess] method = "…"`` (a registered post-processor, default TopDown) and its
    ``[postprocess.options]``, checked against what the method takes. TopDown's solver options
    live in ``[solver]``."""
    from postproc.methods import available, get

    method = section.get("method", "topdown")
    if method not in available():
        raise _fail(where("postprocess", "method"), f"unknown method {method!r}; registered: "
                                                    f"{list(available())} (postproc methods "
                                                    "lists them)")
    options = section.get("options", {})
    if not isinstance(options, Mapping):
        raise _fail(where("postprocess", "options"), "options must be a table, e.g. "
                                                     "options = { sweeps = 200 }")
    allowed = set(get(method).options()) - {"solver", "executor", "workers", "scheduler",
                                            "failsafe", "failsafe_keep", "passes", "progress",
                                            "on_level", "resume_from"}
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise _fail(where("postprocess", "options"), f"{method} takes no option(s) {unknown}; "
                    f"it takes {sorted(allowed) or 'none'}"
                    + ("; TopDown's solver options go in [solver]" if method == "topdown"
                       else ""))
    return method, dict(options)


def _boolean(section: Mapping[str, Any], key: str, default: Any, where: str) -> Any:
    """A TOML boolean (``true``/``false``); a string such as ``"false"`` is an error, never
    read as true."""
    value = section.get(key, default)
    if value is default or isinstance(value, bool):
        return value
    raise _fail(where, f"{key} must be true or false (a TOML boolean, without quotes), not "
                       f"{value!r}")


def _budget(b: Mapping[str, Any], levels: tuple[str, ...], workload: Workload,
            where: _Where) -> Budget:
    """The [budget] section as a Budget, each error located at the key that causes it.

    Budget validates kind, neighbours, total, level fractions and query fractions in turn; each
    step below adds one of them to otherwise valid arguments, so a failure belongs to its key.
    """
    if "total" not in b:
        raise _fail(where("budget"), "[budget] needs total = <epsilon or rho>")
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
    elif "preset" in b:
        raise _fail(where("budget", "preset"), f"unknown budget preset {b['preset']!r}; the "
                                               "preset is \"e2e\"")
    elif "level_fractions" not in b or "query_fractions" not in b:
        raise _fail(where("budget"), "[budget] needs preset = \"e2e\" or both "
                                     "level_fractions and query_fractions")
    elif not isinstance(b["query_fractions"], Mapping):
        raise _fail(where("budget", "query_fractions"), "query_fractions must be a table of "
                    "query = fraction (or of level = {query = fraction, …})")
    else:
        steps.append(("level_fractions", lambda: Budget(kind, 1, b["level_fractions"], one)))
        steps.append(("query_fractions", lambda: Budget(kind, b["total"], b["level_fractions"],
                                                        b["query_fractions"], neighbours)))
    budget = None
    for key, build in steps:
        try:
            budget = build()
        except HierarchyError as exc:
            raise _fail(where("budget", key), str(exc)) from None
    if "preset" in b:
        key = "preset"
    elif any(lv not in levels for lv in budget.levels):
        key = "level_fractions"
    else:
        key = "query_fractions"
    try:
        budget.check_against(workload, levels)
    except HierarchyError as exc:
        raise _fail(where("budget", key), str(exc)) from None
    return budget
