"""The post-processing of a run configuration (:mod:`postproc.apps.runs.config`):
``[postprocess]`` — the registered method and its options, checked against what the method
takes — and ``[solver]`` — TopDown's solver settings: the solver chain, the executor, the
failsafe, and the multipass orders of the fit and of the rounder (``passes``,
``round_passes``).

Examples
--------
>>> method_options_problem("hay", {"sweeps": 10})
"hay takes no option(s) ['sweeps']; it takes none"
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from hierarchy.budget import Budget
from hierarchy.io.tomlconfig import Table, TomlDocument
from hierarchy.queries import Workload
from hierarchy.schema import Schema
from postproc.apps.runs.config_keys import PRESETS, allowed_keys
from postproc.apps.runs.config_sections import Passes, _names
from postproc.errors import PostprocError
from postproc.infra.executors import EXECUTORS
from postproc.infra.solvers import DEFAULT_QP_CHAIN, check_chain
from postproc.methods.topdown.options import RUN_FIELDS

__all__ = ["RUN_OPTIONS", "method_options_problem", "postprocess_section"]


@dataclass(frozen=True)
class _SolverSection:
    """``[solver]`` read: TopDown's options by their keys in the file (the keys of
    :data:`~postproc.methods.topdown.options.CONFIG_KEYS`), and whether ``passes`` names the
    production preset (which brings production's pass tolerance)."""

    options: dict[str, Any]
    production_passes: bool


def _solver(doc: TomlDocument, levels: tuple[str, ...], workload: Workload, budget: Budget,
            schema: Schema) -> _SolverSection:
    """``[solver]``: chain, executor, workers, failsafe, failsafe_keep, passes and round_passes,
    each checked at its line; a scheduler is refused (it is named on the command line)."""
    sv = doc.table("solver", allowed=allowed_keys("solver"))
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
    return _SolverSection({"chain": chain, "executor": executor, "workers": workers,
                           "failsafe": failsafe, "failsafe_keep": failsafe_keep,
                           "passes": passes, "round_passes": round_passes},
                          sv.get("passes") == "pl94_2020")


def _with_production_tolerance(method: str, options: dict[str, Any],
                               solver: _SolverSection) -> dict[str, Any]:
    """``options`` (``[postprocess.options]``), with production's pass tolerance when TopDown
    runs production's passes and the file sets no ``pass_tolerance``."""
    if method == "topdown" and solver.production_passes and "pass_tolerance" not in options:
        # production's passes come with production's hold: without it a file naming the preset
        # but no [postprocess.options] pass_tolerance would hold within TopDown's 0.5
        from hierarchy.presets.pl94 import PRODUCTION_PASS_TOLERANCE

        options["pass_tolerance"] = PRODUCTION_PASS_TOLERANCE
    return options


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
    "topdown takes no option(s) ['workers']; it takes ['batch_children', 'failsafe_slack',
    'group_children', 'pass_tolerance']; TopDown's solver options go in [solver]"
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


def postprocess_section(section: Table, levels: Sequence[str], workload: Workload
                        ) -> tuple[str, dict[str, Any]]:
    """``[postprocess] method = "…"`` (a registered post-processor, default TopDown) and its
    ``[postprocess.options]``, each checked against what the method takes, its declared type
    and the method's own checks (a table of ``group_children`` per level names only
    ``levels``; ``queries`` only the workload's) — in the registry, so a method's new option
    needs no code here. An error names the option's line. TopDown's solver options live in
    ``[solver]``.

    Examples
    --------
    >>> from hierarchy.io.tomlconfig import parse_toml
    >>> from hierarchy.presets.pl94 import LEVELS, pl94_workload
    >>> doc = parse_toml("[postprocess]\\nmethod = 'gls'", source="run.toml")
    >>> postprocess_section(doc.table("postprocess"), LEVELS, pl94_workload())
    ('gls', {})
    """
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

