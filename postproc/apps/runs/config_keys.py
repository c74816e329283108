"""Every key of a run configuration, defined once: its section, type, default, meaning and an
example.

The parser (:mod:`postproc.apps.runs.config`, :mod:`~postproc.apps.runs.config_sections`,
:mod:`~postproc.apps.runs.config_postprocess`) takes its allowed sections and keys from here
(:func:`allowed_keys`, :func:`section_names`), and ``docs/config.md`` is generated from here
(:mod:`postproc.apps.runs.config_reference`), so the reference cannot drift from what a file may
say. The spec's tables (``[[spec.invariant]]``, ``[[spec.constraint]]``, ``[[spec.sum]]``) are
read by :meth:`invariants.spec.Spec.from_dict`; their keys are listed here too, and a test holds
the two lists equal.

A section may have **forms** — ``[schema]`` is a preset or written out — each allowing its own
keys; a key belongs to the forms it lists, or to every form when it lists none.

Examples
--------
>>> sorted(allowed_keys("output"))
['directory', 'error_table', 'microdata']
>>> sorted(allowed_keys("schema", "preset")), sorted(allowed_keys("schema", "explicit"))
(['preset'], ['attributes', 'name'])
>>> SECTIONS["budget"].key("total").type
'number or fraction string'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from hierarchy.mechanisms import DEFAULT_MAX_DENOMINATOR
from invariants.spec import CATALOGUE_CONSTRAINTS, INVARIANTS, SENSES
from postproc.errors import PostprocError
from postproc.infra.executors import EXECUTORS
from postproc.infra.solvers import DEFAULT_QP_CHAIN

__all__ = ["Key", "Section", "SECTIONS", "PRESETS", "allowed_keys", "section_names"]

#: Presets by section: ``[workload]``, ``[budget]`` and ``[spec]`` take ``preset = NAME``,
#: ``[solver]`` takes ``passes = NAME`` and ``round_passes = NAME`` (the per-level production
#: orderings of the fit and of the rounder).
PRESETS = {"workload": ("e2e", "pl94_2020"), "budget": ("e2e", "pl94_2020"),
           "spec": ("e2e", "pl94_2020"), "passes": ("pl94_2020",),
           "round_passes": ("pl94_2020",)}

#: The schemas ``[schema] preset`` names (:data:`hierarchy.presets.SCHEMAS`).
SCHEMA_PRESETS = ("e2e_1940", "e2e_1940_144", "pl94_2020")


@dataclass(frozen=True)
class Key:
    """One key of a section: its type and default in words, whether it is required, its
    meaning, an example TOML value, and the forms of the section it belongs to (every form when
    empty).

    Examples
    --------
    >>> Key("seed", "integer ≥ 0", "—", "the simulation's seed", "1").forms
    ()
    """

    name: str
    type: str
    default: str
    meaning: str
    example: str
    required: bool = False
    forms: tuple[str, ...] = ()


@dataclass(frozen=True)
class Section:
    """One table of the file: its name (``spec.invariant`` for ``[[spec.invariant]]``), what it
    holds, whether it is required, whether it is an array of tables, its forms (name →
    meaning) and its keys. ``free`` describes a table whose keys are the user's own (query
    names, a method's options) — then ``keys`` is empty.

    Examples
    --------
    >>> SECTIONS["geography"].key("levels").required
    True
    >>> SECTIONS["workload.queries"].free
    'query name = query expression'
    """

    name: str
    meaning: str
    keys: tuple[Key, ...] = ()
    required: bool = False
    array: bool = False
    forms: Mapping[str, str] | None = None
    free: str = ""

    def key(self, name: str) -> Key:
        """The key called ``name``.

        Examples
        --------
        >>> SECTIONS["randomness"].key("mode").example
        '"simulation"'
        """
        for key in self.keys:
            if key.name == name:
                return key
        raise PostprocError(f"[{self.name}] has no key {name!r}; its keys are "
                            f"{[k.name for k in self.keys]}")

    @property
    def header(self) -> str:
        """The TOML header: ``[name]`` or ``[[name]]``.

        Examples
        --------
        >>> SECTIONS["spec.sum"].header
        '[[spec.sum]]'
        """
        return f"[[{self.name}]]" if self.array else f"[{self.name}]"


def _names(values) -> str:
    return ", ".join(f'"{v}"' for v in values)


_LEVEL_OR_ALL = 'list of level names, or "all"'

_SECTIONS = (
    Section("data", "The microdata: where they are and how their columns and values map onto "
            "the levels and the schema. Paths are relative to the config file.", (
                Key("persons", "path string", "—", "the persons file: CSV (read as text) or "
                    "parquet, one row per person, one geocode column per level below the root "
                    "and one column per attribute", '"people.csv"', required=True),
                Key("units", "path string", "none", "housing units and group-quarters "
                    "facilities, for the catalogue's units invariants and constraints "
                    "(gqhh_vect, hhgq_total_lb, …)", '"units.parquet"'),
                Key("blocks", "path string", "none (units are those with persons or units)",
                    "every bottom-level unit, empty ones too (one geocode column per level "
                    "below the root)", '"blocks.parquet"'),
                Key("columns", "table: level or attribute = column name", "{} (each is read "
                    "from the column of its own name)", "the file's column for a level or an "
                    "attribute", '{ district = "DIST", sex = "SEX" }'),
                Key("values", "table: attribute = { file value = label }", "{} (the file "
                    "holds the labels, or the codes 0, 1, …)", "the file's values of an "
                    "attribute mapped to its labels; a key may be a range of integers "
                    '"lo-hi" or an open one "lo-" or "lo+"',
                    '{ age = { "0-17" = "child", "18-64" = "adult", "65+" = "senior" } }'),
            ), required=True),
    Section("schema", "The attributes of a person and their labels, in order; the histogram "
            "of a unit has one cell per combination.", (
                Key("preset", "string", "—", f"a named schema: {_names(SCHEMA_PRESETS)}",
                    '"e2e_1940"', forms=("preset",)),
                Key("name", "string", '"custom"', "the schema's name, kept in the outputs' "
                    "metadata", '"survey"', forms=("explicit",)),
                Key("attributes", "array of tables [[schema.attributes]]", "—", "the "
                    "attributes, in order (the last varies fastest in the cells)",
                    '[{ name = "sex", labels = ["female", "male"] }]', forms=("explicit",)),
            ), required=True, forms={"preset": "a named schema", "explicit": "the attributes "
                                     "written out"}),
    Section("schema.attributes", "One attribute of the written-out schema (read by "
            "hierarchy.schema.Schema.from_dict).", (
                Key("name", "string", "—", "the attribute's name, used in queries and in "
                    "[data] columns and values", '"sex"', required=True),
                Key("labels", "list of strings", "—", "its labels, in the order of their codes "
                    "0, 1, …", '["female", "male"]', required=True),
            ), array=True),
    Section("geography", "The levels of the geographic tree.", (
        Key("levels", "list of strings", "—", "level names, root first; the root needs no "
            "column (its one unit has the geocode \"0\"), every other level is a geocode "
            "column whose codes are unique within the level", '["country", "region", "district"]',
            required=True),
    ), required=True),
    Section("workload", "The queries that may be measured (the budget chooses which, where).", (
        Key("preset", "string", "—", f"a named workload: {_names(PRESETS['workload'])}",
            '"e2e"', forms=("preset",)),
        Key("queries", "table [workload.queries]", "—", "query name = query expression",
            '{ detailed = "detailed", sex = "marginal(sex)" }', forms=("explicit",)),
    ), required=True, forms={"preset": "a named workload", "explicit": "the queries written "
                             "out"}),
    Section("workload.queries", "The workload's queries: each a name and a query expression "
            "(total, detailed, marginal(a, b), recode(a: x=0,1; y=2) * marginal(b), …). A name "
            "that is itself a query (total, detailed) must be that query.",
            free="query name = query expression"),
    Section("budget", "The privacy-loss budget and its split over levels and queries: "
            "fractions are exact (0.225 is read as 9/40, \"1/3\" as a third) and sum to 1 at "
            "each stage.", (
                Key("kind", "string", '"pure" ("zcdp" with preset "pl94_2020")', '"pure" '
                    '(total is ε) or "zcdp" (total is ρ)', '"pure"'),
                Key("total", "number or fraction string", "— (production's ρ with preset "
                    '"pl94_2020")', "the total ε (pure) or ρ (zCDP)", "1", required=True),
                Key("preset", "string", "none", f"a named split: {_names(PRESETS['budget'])} "
                    "(e2e: equal levels, 0.1 / 0.225 / 0.675 to the E2E queries; pl94_2020: "
                    "the 2020 production shares)", '"e2e"'),
                Key("neighbours", "string", '"change" ("add_remove" with preset "pl94_2020")',
                    '"change" (one record changes, sensitivity 2) or "add_remove" (one record '
                    "added or removed, sensitivity 1)", '"change"'),
                Key("level_fractions", "table: level = fraction", "— (needed without a "
                    "preset)", "each level's share of the total", '{ country = "1/3", region '
                    '= "1/3", district = "1/3" }'),
                Key("query_fractions", "table: query = fraction, or level = { query = "
                    "fraction }", "— (needed without a preset)", "each query's share of its "
                    "level's budget, the same at every level or per level",
                    '{ detailed = "1/2", sex = "1/2" }'),
            ), required=True),
    Section("mechanism", "The noise.", (
        Key("name", "string", '"geometric"', "geometric (pure DP), discrete_gaussian (zCDP), "
            "laplace or gaussian (floating-point noise: simulations only)", '"geometric"'),
        Key("exact", "boolean", "false for geometric, true for discrete_gaussian", "sample "
            "with the exact integer sampler in simulations too (release mode always does; it "
            "refuses discrete_gaussian with exact = false)", "true"),
        Key("max_denominator", "integer ≥ 1", str(DEFAULT_MAX_DENOMINATOR), "discrete_gaussian "
            "only: a float σ² is rounded up to a fraction with at most this denominator",
            "1000000"),
    ), required=True),
    Section("randomness", "Where the noise comes from.", (
        Key("mode", "string", "—", '"simulation" (seeded: reproducible, every output labelled '
            'NOT safe for release) or "release" (the operating system\'s cryptographically '
            "secure source; unseedable)", '"simulation"', required=True),
        Key("seed", "integer ≥ 0", "—", "the simulation's seed; required in simulation mode, "
            "refused in release mode", "1"),
    ), required=True),
    Section("spec", "What the post-processors keep exact (invariants) and what every unit's "
            "histogram obeys (constraints); docs/spec.md states each. Absent: no invariant "
            "and no constraint.", (
                Key("preset", "string", "none", f"a named spec: {_names(PRESETS['spec'])}",
                    '"e2e"', forms=("preset",)),
                Key("file", "path string", "none", "a spec file of its own ([[invariant]], "
                    "[[constraint]], [[sum]] at its top level), relative to the config",
                    '"spec.toml"', forms=("file",)),
                Key("invariant", "array of tables [[spec.invariant]]", "none", "statistics "
                    "published exactly", '[{ name = "tot", levels = ["country"] }]',
                    forms=("inline",)),
                Key("constraint", "array of tables [[spec.constraint]]", "none", "restrictions "
                    "every unit's histogram obeys", '[{ name = "total_ge_households", levels = '
                    '"all" }]', forms=("inline",)),
                Key("sum", "array of tables [[spec.sum]]", "none", "exact answers over groups "
                    "of sibling units", '[{ name = "s", level = "region", groups = [["N", "S"]], '
                    "values = [100] }]", forms=("inline",)),
                Key("unit_attribute", "string", '"hhgq"', "the attribute typing housing units, "
                    "for the catalogue constraints", '"hhgq"', forms=("inline",)),
                Key("household_level", "integer ≥ 0", "0", "the code of occupied households in "
                    "unit_attribute", "0", forms=("inline",)),
                Key("imply_upward", "boolean", "true", "also impose on every parent the sums of "
                    "its children's constraints", "true", forms=("inline",)),
            ), forms={"preset": "a named spec", "file": "a spec file", "inline": "the entries "
                      "written here"}),
    Section("spec.invariant", "A statistic published exactly: a catalogue entry (tot: persons "
            "per unit; gqhh_vect, gqhh_tot: units data by type) or the answers of any query.", (
                Key("name", "string", "the query as written (a query invariant)",
                    f"a catalogue invariant ({', '.join(INVARIANTS)}) or a query invariant's "
                    "own name", '"tot"'),
                Key("levels", _LEVEL_OR_ALL, '"all"', "where it holds", '["country", "region"]'),
                Key("query", "string", "none (a catalogue invariant)", "a query expression or "
                    "a workload query's name: its answers are held exact", '"sex"'),
                Key("answers", "list of indices or labels", "every answer", "the query's "
                    "answers to hold", '["female"]'),
            ), array=True),
    Section("spec.constraint", "A restriction on every unit's histogram: a catalogue "
            "constraint, a structural zero, a linear constraint or a published one.", (
                Key("name", "string", "—", "a catalogue constraint "
                    f"({', '.join(CATALOGUE_CONSTRAINTS)}) or the constraint's own name",
                    '"no_empty_village"', required=True),
                Key("levels", _LEVEL_OR_ALL, '"all"', "where it holds", '["village"]'),
                Key("type", "string", '"catalogue"', '"catalogue", "structural_zero", "linear" '
                    'or "published"', '"linear"'),
                Key("query", "string", "none", "structural_zero, linear, published: a query "
                    "expression or a workload query's name", '"total"'),
                Key("answers", "list of indices or labels", "every answer", "the query's "
                    "answers it restricts", "[0]"),
                Key("sense", "string", "none", f"linear, published: one of {_names(SENSES)}",
                    '">="'),
                Key("rhs", 'number, list of numbers, or "tot", "gqhh", "gqhh[i]"', "none",
                    "linear: the right-hand side (one per answer, or a published statistic)",
                    "1"),
            ), array=True),
    Section("spec.sum", "Exact answers over groups of sibling units (a state's total over its "
            "pieces).", (
                Key("name", "string", "—", "its name", '"region_pair"', required=True),
                Key("level", "string", "—", "the level of the units grouped", '"region"',
                    required=True),
                Key("query", "string", '"total"', "the query whose answers are exact",
                    '"total"'),
                Key("groups", "list of lists of geocodes", "—", "the groups of units",
                    '[["N", "S"]]', required=True),
                Key("values", "list of numbers (one per group)", "—", "each group's exact "
                    "answers", "[1500]", required=True),
            ), array=True),
    Section("postprocess", "Which post-processor runs.", (
        Key("method", "string", '"topdown"', "a registered post-processor (`postproc methods` "
            "lists them; `postproc run --method NAME` overrides it)", '"topdown"'),
        Key("options", "table [postprocess.options]", "{}", "the method's options, checked "
            "against what it takes", "{ sweeps = 200 }"),
    )),
    Section("postprocess.options", "The method's options: `postproc methods` lists each "
            "method's, with their types. TopDown's solver settings are in [solver].",
            free="option = value"),
    Section("solver", "TopDown's solver settings.", (
        Key("chain", "list of strings", f"[{_names(DEFAULT_QP_CHAIN)}]",
            "QP backends, tried in turn", '["clarabel", "osqp"]'),
        Key("executor", "string", '"serial"', f"one of {_names(EXECUTORS)}", '"process"'),
        Key("workers", "integer ≥ 1", "the executor's default", "parallel workers", "2"),
        Key("scheduler", "—", "—", "refused: a Dask scheduler is named on the command line "
            "(--scheduler ADDRESS), never in a file", '"tcp://…"'),
        Key("failsafe", "boolean", "true", "relax parent consistency where a node is "
            "infeasible (reported) instead of failing", "true"),
        Key("failsafe_keep", '"auto" or list of query names', '"auto"', "what the failsafe "
            "keeps exact while it moves persons", '["total"]'),
        Key("passes", 'list of lists of query names, table level = such a list, or '
            '"pl94_2020"', "none (every query in one pass)", "the fit's multipass order",
            '[["sex"], ["detailed"]]'),
        Key("round_passes", 'list of lists of queries, table level = such a list, or '
            '"pl94_2020"', "none (one pass)", "the rounder's multipass order (query names or "
            "expressions)", '[["total"], ["detailed"]]'),
    )),
    Section("output", "Where the results go.", (
        Key("directory", "path string", '"out"', "the output directory, relative to the "
            "config (`postproc run --out DIR` overrides it)", '"out"'),
        Key("microdata", "boolean", "false", "also write synthetic microdata from the bottom "
            "level (microdata.parquet)", "false"),
        Key("error_table", "boolean", "true in simulation mode, false in release mode",
            "compute errors against the confidential data, into confidential/", "true"),
    )),
)

#: Every table of a run configuration, by name (``spec.invariant`` for ``[[spec.invariant]]``),
#: in the file's order.
SECTIONS: dict[str, Section] = {s.name: s for s in _SECTIONS}


def section_names() -> set[str]:
    """The top-level sections a run configuration may have.

    Examples
    --------
    >>> sorted(section_names())[:4]
    ['budget', 'data', 'geography', 'mechanism']
    """
    return {name for name in SECTIONS if "." not in name}


def allowed_keys(section: str, form: str | None = None) -> set[str]:
    """The keys ``section`` allows (in ``form``, for a section with forms).

    Parameters
    ----------
    section : str
        A name of :data:`SECTIONS`.
    form : str, optional
        One of the section's forms; required for a section that has forms.

    Returns
    -------
    set of str

    Raises
    ------
    PostprocError
        An unknown section or form, or a section with forms asked without one.

    Examples
    --------
    >>> sorted(allowed_keys("spec", "file"))
    ['file']
    >>> allowed_keys("workload")
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: [workload] has forms ['explicit', 'preset']: name one
    """
    if section not in SECTIONS:
        raise PostprocError(f"no section [{section}]; sections are {sorted(SECTIONS)}")
    entry = SECTIONS[section]
    forms = sorted(entry.forms or {})
    if (form is None) != (not forms) or (form is not None and form not in forms):
        raise PostprocError(f"[{section}] has forms {forms}: name one" if forms else
                            f"[{section}] has no forms; call allowed_keys({section!r})")
    return {k.name for k in entry.keys if not k.forms or form in k.forms}
