"""The house's targets (issue 36): sizes a newcomer can read, layers that data cross one way, and
TopDown's route through the modules.

Read from the source with :mod:`ast` (the import graph of :mod:`test_surface`, which sees every
import — at module level, inside functions, under ``if TYPE_CHECKING:`` and through
``import_module("…")``), except the route, which is traced as TopDown runs.
"""

from __future__ import annotations

import ast
import functools
import sys
from functools import cache

import pytest

from test_surface import ROOT, _graph, _modules

#: The longest module and function the library keeps (lines, docstrings included).
MOST_MODULE_LINES = 700
MOST_FUNCTION_LINES = 120

#: The floors, lowest first: a module may import its own floor and those below, never above.
#: A module belongs to the longest prefix listed (a package and its modules); ``=name`` is that
#: module alone (a package's face, which hands on names from every floor of it, or a
#: deprecated module that hands on another's).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("hierarchy",),                 # the data model (and its files: hierarchy.io)
    ("hierarchy.presets",),         # named schemas, workloads and budgets
    ("hierarchy.synth",),           # synthetic data
    ("=hierarchy", "=hierarchy.pl94", "=hierarchy.synth_2020", "=hierarchy.synth_detailed",
     "=hierarchy._synth_1940_tables", "=hierarchy.storage", "=hierarchy.tomlconfig"),
    ("invariants",),
    ("postproc.errors",),
    ("postproc.infra",),
    ("postproc.result", "postproc.intervals", "postproc.gate", "postproc.reports",
     "postproc.inference"),
    ("postproc.methods",),
    ("postproc.evaluation",),
    ("postproc.apps",),
    ("postproc.cli",),
    ("=postproc", "postproc.__main__"),
)


def _floor(module: str) -> int:
    """The floor of a module: that of the longest prefix :data:`LAYERS` lists."""
    best, floor = -1, None
    for i, prefixes in enumerate(LAYERS):
        if "=" + module in prefixes:
            return i
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, floor = len(prefix), i
    if floor is None:
        raise KeyError(f"{module} is on no floor of LAYERS: add its package there")
    return floor


def test_floors_name_every_module():
    assert {_floor(m) for m in _modules()} == set(range(len(LAYERS)))
    assert _floor("postproc.methods.topdown.fit") == _floor("postproc.methods")
    assert _floor("postproc") > _floor("postproc.cli") > _floor("postproc.apps.runs.pipeline")
    assert _floor("hierarchy.synth.census2020") > _floor("hierarchy.presets.pl94") \
        > _floor("hierarchy.schema")
    assert _floor("hierarchy") > _floor("hierarchy.synth")


def test_no_import_from_a_lower_floor_to_a_higher_one():
    upward = sorted(f"{m} (floor {_floor(m)}) -> {t} (floor {_floor(t)})"
                    for m, targets in _graph(typing_too=True).items() for t in targets
                    if _floor(t) > _floor(m))
    assert not upward, ("imports that climb a floor (move the piece down, or pass it in):\n"
                        + "\n".join(upward))


@cache
def _trees() -> dict[str, ast.Module]:
    return {m: ast.parse(p.read_text(), filename=str(p)) for m, p in _modules().items()}


def test_no_module_over_the_limit():
    long = sorted((len(p.read_text().splitlines()), str(p.relative_to(ROOT)))
                  for p in _modules().values())
    over = [f"{path}: {n} lines" for n, path in long if n > MOST_MODULE_LINES]
    assert not over, f"modules over {MOST_MODULE_LINES} lines: split them where they part:\n" \
                     + "\n".join(over)


def _functions(tree: ast.Module):
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node, node.end_lineno - node.lineno + 1


def test_no_function_over_the_limit():
    over = sorted(f"{_modules()[m].relative_to(ROOT)}:{node.lineno} {node.name}: {n} lines"
                  for m, tree in _trees().items() for node, n in _functions(tree)
                  if n > MOST_FUNCTION_LINES)
    assert not over, (f"functions over {MOST_FUNCTION_LINES} lines: name their steps and "
                      "make each a function:\n" + "\n".join(over))


def test_the_limits_see_what_they_measure():
    tree = ast.parse("def f():\n" + "    x = 1\n" * 130 + "\ndef g():\n    pass\n")
    sizes = {node.name: n for node, n in _functions(tree)}
    assert sizes == {"f": 131, "g": 2}


# -- the noisy hierarchy's route through TopDown ----------------------------------------------

#: How often following the noisy hierarchy through TopDown may come back to a module it had left.
MOST_RETURNS = 10


def _route(parts, run, packages=("hierarchy", "invariants", "postproc")
           ) -> list[tuple[str, list[str]]]:
    """The modules of ``packages`` that the objects ``parts`` enter while ``run()`` runs, in
    order: a function call whose arguments (``self`` included) hold one of them (property
    reads are not calls), each call site once (a loop over levels walks the same code again; a
    static reading would walk it once). Consecutive calls in one module are one stay:
    ``[(module, [functions…]), …]``."""
    seen, stays = set(), []

    def profile(frame, event, arg):
        if event != "call" or not frame.f_globals.get("__name__", "").startswith(packages):
            return
        code = frame.f_code
        names = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
        if not any(any(frame.f_locals.get(n) is part for part in parts) for n in names):
            return
        owner = type(frame.f_locals.get("self"))
        if isinstance(getattr(owner, code.co_name, None), (property, functools.cached_property)):
            return
        site = (frame.f_back.f_code if frame.f_back else None, code)
        if site in seen:
            return
        seen.add(site)
        module = frame.f_globals["__name__"]
        if stays and stays[-1][0] == module:
            stays[-1][1].append(code.co_name)
        else:
            stays.append((module, [code.co_name]))

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(previous)
    return stays


def _returns(stays: list[tuple[str, list[str]]]) -> int:
    entered, returns = set(), 0
    for module, _ in stays:
        returns += module in entered
        entered.add(module)
    return returns


def test_returns_count_a_module_entered_again_after_leaving_it():
    assert _returns([("a", ["f"]), ("b", ["g"]), ("a", ["h"]), ("c", []), ("b", [])]) == 2
    assert _returns([("a", ["f", "g"])]) == 0


def test_following_the_noisy_hierarchy_through_topdown(e2e_small):
    """TopDown's route for the noisy hierarchy: into the run's plan (checks, compiled spec,
    what each level needs), to the data model for what it reads, then level by level through
    the engine — at most :data:`MOST_RETURNS` returns to a module already left; and within the
    engine's modules, the same for the noisy hierarchy with the parts it carries (schema,
    geography, workload, invariants). Issue 36 measured a static walk of the route, which
    follows every name derived from it, at 26 returns before the engine was made plain (run.py
    entered 10 times); it reads 10 now (run.py 4 times: the entry, the level loop
    of ``solve_plan``, each level's solve, the result). Not counted: the compiler's calls into
    the data model to build each catalogue row (23 returns with the parts in all packages)."""
    from postproc.methods.topdown import topdown

    noisy, spec = e2e_small
    stays = _route([noisy], lambda: topdown(noisy, spec))
    route = " -> ".join(f"{m}({', '.join(fs)})" for m, fs in stays)
    assert stays[0] == ("postproc.methods.topdown.run", ["topdown"]), route
    assert stays[1] == ("postproc.methods.topdown.plan", ["plan_run"]), route
    assert 0 < _returns(stays) <= MOST_RETURNS, route
    parts = [noisy, noisy.schema, noisy.geography, noisy.workload, noisy.invariants]
    engine = _route(parts, lambda: topdown(noisy, spec), ("postproc.methods.topdown",))
    route = " -> ".join(f"{m}({', '.join(fs)})" for m, fs in engine)
    assert {m for m, _ in engine} >= {"postproc.methods.topdown.plan",
                                      "postproc.methods.topdown.options",
                                      "postproc.methods.topdown.verify"}, route
    assert 0 < _returns(engine) <= MOST_RETURNS, route


@pytest.fixture(scope="module")
def e2e_small():
    from hierarchy.budget import Budget
    from hierarchy.measurement import measure
    from hierarchy.queries import e2e_workload
    from hierarchy.schema import E2E_1940
    from hierarchy.synth import synthesize_1940
    from hierarchy.tabulation import tabulate
    from invariants.spec import Spec

    levels = ["nation", "state", "county", "enum_dist"]
    data = synthesize_1940(3_000, seed=1)
    truth = tabulate(data.persons, schema=E2E_1940, levels=levels, units=data.units)
    spec = Spec.e2e(levels)
    return measure(truth, e2e_workload(E2E_1940), Budget.e2e(1, levels), "geometric", rng=3,
                   spec=spec), spec
