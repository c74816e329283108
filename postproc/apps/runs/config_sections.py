"""The sections of a run configuration (:mod:`postproc.apps.runs.config`): each read from the
TOML document and checked, its errors located at the key that causes them — ``[data]``,
``[schema]``, ``[geography]``, ``[workload]``, ``[budget]``, ``[mechanism]`` with
``[randomness]``, ``[spec]`` and ``[output]`` (``[postprocess]`` and ``[solver]`` are in
:mod:`postproc.apps.runs.config_postprocess`) — and written from Python values into the file's
shape, for :meth:`~postproc.apps.runs.config.RunConfig.build`.

Examples
--------
>>> from hierarchy.io.tomlconfig import parse_toml
>>> text = '[geography]\\nlevels = ["nation", "nation"]\\n'
>>> doc = parse_toml(text, source="run.toml", error=PostprocError)
>>> _levels(doc)
Traceback (most recent call last):
...
postproc.errors.PostprocError: run.toml, line 2: levels repeat a name: ['nation', 'nation']
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from fractions import Fraction
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from hierarchy.budget import Budget
from hierarchy.io.storage import check_file_names
from hierarchy.io.tomlconfig import Table, TomlDocument, read_randomness
from hierarchy.mechanisms import Mechanism, get_mechanism
from hierarchy.presets import SCHEMAS, get_schema
from hierarchy.queries import Workload, check_query_name, e2e_workload, parse_query
from hierarchy.schema import Schema
from invariants.errors import SpecError
from invariants.spec import Spec
from postproc.apps.runs.config_keys import PRESETS, allowed_keys
from postproc.errors import PostprocError

__all__ = ["PRESETS"]

#: One level's multipass order: passes of query names.
Passes = tuple[tuple[str, ...], ...]


# -- read from the TOML document -----------------------------------------------------------------

@dataclass(frozen=True)
class _DataFiles:
    """``[data]``: the files (absolute paths), the column and value mappings, and the section's
    table, where a later check of the mappings locates its error."""

    table: Table
    persons: Path
    units: Path | None
    blocks: Path | None
    columns: dict[str, str]
    values: dict[str, dict[Any, Any]]

    def check_names(self, levels: tuple[str, ...], schema: Schema) -> None:
        """``columns`` and ``values`` name levels and attributes (a misspelt values key would
        otherwise be ignored and the file's codes read unmapped)."""
        mappable = {"columns": list(levels[1:]) + list(schema.names),
                    "values": list(schema.names)}
        for key, mapping in (("columns", self.columns), ("values", self.values)):
            unknown_names = [k for k in mapping if k not in mappable[key]]
            if unknown_names:
                raise self.table.fail(key, f"{key} names {unknown_names}, which are not "
                                           f"{'levels or ' if key == 'columns' else ''}"
                                           f"attributes; valid: {mappable[key]}")


def _data_files(doc: TomlDocument, base: Path) -> _DataFiles:
    """``[data]``: persons (required), units and blocks, and the tables ``columns`` and
    ``values``."""
    d = doc.table("data", required=True, allowed=allowed_keys("data"))
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
    return _DataFiles(d, persons, units, blocks, dict(columns),
                      {k: dict(v) for k, v in values.items()})


def _schema(doc: TomlDocument) -> Schema:
    """``[schema]``: a preset, or the attributes written out."""
    s = doc.table("schema", required=True)
    s.check_keys(allowed_keys("schema", "preset" if "preset" in s else "explicit"))
    return s.located("preset" if "preset" in s else None, lambda: (
        get_schema(s["preset"]) if "preset" in s else Schema.from_dict(s)))


def _levels(doc: TomlDocument) -> tuple[str, ...]:
    """``[geography] levels``: names, root first, none repeated, each one a file name."""
    g = doc.table("geography", required=True, allowed=allowed_keys("geography"))
    levels = g.get("levels")
    if not (isinstance(levels, list) and levels and all(isinstance(x, str) for x in levels)):
        raise g.fail("levels", "levels must be a list of level names, root first, e.g. "
                               "[\"nation\", \"state\", \"county\"]")
    levels = tuple(levels)
    if len(set(levels)) != len(levels):
        raise g.fail("levels", f"levels repeat a name: {list(levels)}")
    # each level is a file of the output: names one file system could take for one are refused
    g.located("levels", lambda: check_file_names(levels, what="level"))
    return levels


def _workload(doc: TomlDocument, schema: Schema) -> Workload:
    """``[workload]``: a preset, or ``[workload.queries]`` of name = expression (each query's
    error at its own line)."""
    w = doc.table("workload", required=True)
    if w.get("preset") == "e2e":
        w.check_keys(allowed_keys("workload", "preset"))
        return w.located(None, lambda: e2e_workload(schema))
    if w.get("preset") == "pl94_2020":
        w.check_keys(allowed_keys("workload", "preset"))
        return _pl94_workload(w, schema)
    if "preset" in w:
        raise w.fail("preset", f"unknown workload preset {w['preset']!r}; presets are "
                               f"{_names(PRESETS['workload'])}")
    w.check_keys(allowed_keys("workload", "explicit"))
    queries = w.get("queries")
    if not isinstance(queries, Mapping) or not queries:
        raise w.fail(None, "[workload] needs preset = \"e2e\" or a [workload.queries] table "
                           "of name = expression")
    for name, expression in queries.items():   # each query's error at its own line
        doc.located("workload.queries", name, lambda: check_query_name(
            parse_query(expression, schema, name=name)) if isinstance(expression, str)
            else None)
    return w.located(None, lambda: Workload.from_expressions(schema, queries))


@dataclass(frozen=True)
class _Noise:
    """``[mechanism]`` and ``[randomness]``: the mechanism, the mode and the seed."""

    mechanism: Any
    mode: str
    seed: int | None


def _noise(doc: TomlDocument, budget: Budget) -> _Noise:
    """``[mechanism]`` (its accounting matching the budget's) and ``[randomness]``; release mode
    refuses floating-point noise, located at the mechanism's name or ``exact``."""
    m = doc.table("mechanism", required=True, allowed=allowed_keys("mechanism"))
    options = {k: v for k, v in m.items() if k != "name"}
    mechanism = m.located("name", lambda: get_mechanism(m.get("name", "geometric"), **options))
    if mechanism.accounting == "zcdp" and budget.kind == "pure":
        raise m.fail("name", f"the {mechanism.name} mechanism needs a zCDP budget: set kind = "
                             "\"zcdp\" in [budget]")
    r = doc.table("randomness", required=True, allowed=allowed_keys("randomness"))
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
    return _Noise(mechanism, mode, seed)


@dataclass(frozen=True)
class _Output:
    """``[output]``: the directory (absolute), microdata, and the error table (``None``: the
    mode's default)."""

    directory: Path
    microdata: bool
    error_table: bool | None


def _output(doc: TomlDocument, base: Path) -> _Output:
    """``[output]``: directory, microdata and error_table."""
    o = doc.table("output", allowed=allowed_keys("output"))
    directory = o.path("directory", "out", base=base)
    return _Output(directory, o.boolean("microdata", False), o.boolean("error_table", None))


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



def _spec(doc: TomlDocument, base: Path, levels: tuple[str, ...], workload: Workload) -> Spec:
    """The ``[spec]``: the E2E preset, a spec file, or the spec written inline; a spec file's
    own errors keep its file and line, after the line of ``file =`` here. Queries named by the
    workload are resolved to their expressions, and every query and answer is checked."""
    sp_ = doc.table("spec")
    try:
        if sp_.get("preset") == "e2e":
            sp_.check_keys(allowed_keys("spec", "preset"))
            spec = Spec.e2e(levels)
        elif sp_.get("preset") == "pl94_2020":
            sp_.check_keys(allowed_keys("spec", "preset"))
            spec = Spec.pl94_2020(levels)
        elif "preset" in sp_:
            raise sp_.fail("preset", f"unknown spec preset {sp_['preset']!r}; presets are "
                                     f"{_names(PRESETS['spec'])}")
        elif "file" in sp_:
            sp_.check_keys(allowed_keys("spec", "file"))
            spec = Spec.from_toml(base / sp_["file"])
        else:
            spec = Spec.from_dict(sp_.data, source=doc.source, text=doc.text, table="spec")
        spec.check_levels(levels)
        spec = spec.resolve_queries(workload)
        spec.check_queries(workload.schema)
    except SpecError as exc:
        message = str(exc)
        if message.startswith(f"{doc.source}, line "):  # an inline spec: located in this file
            raise PostprocError(message) from None
        key = next((k for k in ("file", "preset") if k in sp_), None)
        raise sp_.fail(key, message.removeprefix(f"{doc.source}: ")) from None
    return spec


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


# -- written from Python values (RunConfig.build) ---------------------------------------------

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

