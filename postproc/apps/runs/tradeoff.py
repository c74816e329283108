"""``postproc tradeoff``: the accuracy–ε curve of a run configuration's table.

:func:`run_tradeoff` reads the configured data once and measures them at every budget of a grid
and every seed — the configuration's budget split, mechanism and workload, its total replaced
by each point — then writes the curve of :mod:`postproc.evaluation.tradeoff`
(:mod:`postproc.evaluation.tradeoff_outputs`): ``tradeoff.csv``
(mean over seeds), ``tradeoff_by_seed.csv``, ``tradeoff.png`` and ``tradeoff.json``.

It is a **simulation tool**. Its noise is seeded (the seeds are arguments), so nothing it draws
could be released, and every number it writes is an error against the data, which a real
release keeps confidential (``docs/release.md``). A release-mode configuration is refused
before anything is read or written, with the change that makes it a simulation.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import pandas as pd

from postproc.errors import PostprocError
from postproc.evaluation.tradeoff import (
    DEFAULT_WITHIN,
    check_arguments,
    tradeoff_curve,
    tradeoff_table,
)
from postproc.evaluation.tradeoff_outputs import write_tradeoff

__all__ = ["TradeoffOutput", "run_tradeoff", "default_directory"]

_MADE_BY = "postproc tradeoff"
_GRID = {"pure": ("epsilons", "ε"), "zcdp": ("rhos", "ρ")}


@dataclass(frozen=True, eq=False)
class TradeoffOutput:
    """What :func:`run_tradeoff` did: the curve (mean over seeds, and per seed), where it wrote
    it and the JSON document it wrote.

    Examples
    --------
    >>> import tempfile
    >>> from hierarchy.synth import write_synthetic_1940
    >>> from postproc.apps.runs.config import RunConfig
    >>> base = Path(tempfile.mkdtemp())
    >>> _ = write_synthetic_1940(base / "data", 1_000, seed=1, progress=False)
    >>> config = RunConfig.build(persons="data/persons.parquet", units="data/units.parquet",
    ...                          levels=["nation", "state"], budget=1, seed=1, base=base)
    >>> done = run_tradeoff(config, epsilons=[0.5, 2], out=base / "curve", queries=["total"],
    ...                     log=lambda m: None)
    >>> [p.name for p in done.files]
    ['tradeoff.csv', 'tradeoff_by_seed.csv', 'tradeoff.png', 'tradeoff.json']
    >>> done.table[["epsilon", "level", "seeds"]].values.tolist()
    [[0.5, 'nation', 1], [0.5, 'state', 1], [2.0, 'nation', 1], [2.0, 'state', 1]]
    >>> done.document["randomness"]["safe_for_release"]
    False
    """

    table: pd.DataFrame
    by_seed: pd.DataFrame
    directory: Path
    files: list[Path]
    document: dict[str, Any]


def default_directory(config: Any) -> Path:
    """The default output: the config's output directory + ``-tradeoff``.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> default_directory(SimpleNamespace(output=Path("/x/out/e2e1940"))).name
    'e2e1940-tradeoff'
    """
    output = Path(config.output)
    return output.with_name(output.name + "-tradeoff")


def _refuse_release(config: Any) -> None:
    if config.release:
        raise PostprocError(
            f"{config.source}: postproc tradeoff is a simulation tool and this configuration "
            "is in release mode ([randomness] mode = \"release\"): the curve is computed "
            "against the data (its errors are confidential in a real release) and its noise is "
            "seeded (never safe to release). Run it on a copy of the configuration with "
            "[randomness] mode = \"simulation\" and seed = <integer> (the curve's seeds are "
            "--seeds), on data you may examine; publish nothing it writes")


def _grid(config: Any, epsilons: Sequence[float] | None, rhos: Sequence[float] | None
          ) -> tuple[str, Sequence[float]]:
    """The grid, given in the notion of the configuration's budget (ε or ρ)."""
    name, symbol = _GRID[config.budget.kind]
    given = {"epsilons": epsilons, "rhos": rhos}
    if sum(v is not None for v in given.values()) != 1:
        raise PostprocError(f"give the grid of budgets once: {name} (the configuration's "
                            f"budget is {config.budget.kind}, its total is {symbol})")
    if given[name] is None:
        other = next(k for k, v in given.items() if v is not None)
        raise PostprocError(f"{config.source}: the budget is {config.budget.kind} (its total is "
                            f"{symbol} = {config.budget.total}): give the grid as {name}, not "
                            f"{other}")
    return name, given[name]


def run_tradeoff(config: Any, *, epsilons: Sequence[float] | None = None,
                 rhos: Sequence[float] | None = None, seeds: Sequence[int] | None = None,
                 within: Sequence[int] = DEFAULT_WITHIN, out: str | Path | None = None,
                 method: str | None = None, queries: Sequence[str] | None = None,
                 progress: bool = False, log: Callable[[str], None] = print) -> TradeoffOutput:
    """Measure the configured table at every budget of a grid and every seed, and write its
    accuracy curve.

    Parameters
    ----------
    config : RunConfig
        Data, schema, geography, workload, budget (its split; its total is replaced by each
        point of the grid), mechanism and spec. Simulation mode only.
    epsilons, rhos : sequence of float
        The grid of totals: ``epsilons`` for a pure-DP budget, ``rhos`` for a zCDP one (one of
        them).
    seeds : sequence of int, optional
        Default: the configuration's seed.
    within : sequence of int
        The ``k`` of the shares within ±k (:data:`~postproc.evaluation.tradeoff.DEFAULT_WITHIN`).
    out : str or Path, optional
        Default :func:`default_directory`: a new or empty directory, or an earlier curve's (its
        files are replaced); anything else is refused.
    method : str, optional
        Post-process each replicate with this registered method (with the configuration's
        options for it, :func:`postproc.apps.runs.pipeline.method_options`); default: the curve
        of the noisy measurements themselves.
    queries : sequence of str, optional
        Default ``total`` and every query of the workload.
    progress : bool
        A progress bar over budgets × seeds on stderr.
    log : callable
        One line per step.

    Returns
    -------
    TradeoffOutput

    Raises
    ------
    PostprocError
        A release-mode configuration; a grid in the wrong notion; bad grid, seeds or
        tolerances (naming the argument); an unknown method; an output directory that is not
        ours; data that fail a check.

    Examples
    --------
    >>> from postproc.apps.runs.config import RunConfig
    >>> release = RunConfig.build(persons="p.parquet", levels=["nation", "state"], budget=1,
    ...                           mode="release")
    >>> run_tradeoff(release, epsilons=[1])
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: RunConfig.build: postproc tradeoff is a simulation tool and this
    configuration is in release mode ...
    """
    from hierarchy.io.storage import lock_directory, package_versions
    from postproc.apps.runs.directories import claim_output
    from postproc.apps.runs.inputs import load_truth
    from postproc.apps.runs.pipeline import method_options
    from postproc.gate import data_errors, source_names
    from postproc.methods import get

    _refuse_release(config)
    name, grid = _grid(config, epsilons, rhos)
    seeds = [config.seed] if seeds is None else seeds
    check_arguments(grid, seeds, within, grid_name=name)       # before anything is written
    if method is not None:
        get(method)                   # an unknown name: the message lists the registered ones
    directory = Path(out) if out is not None else default_directory(config)
    claim_output(directory, _MADE_BY)
    with lock_directory(directory, what=_MADE_BY), \
            data_errors(release=False, names=source_names(config)):
        log("SIMULATION MODE: seeded noise, errors against the data; not safe for release")
        truth = load_truth(config)
        by_seed = tradeoff_curve(truth, workload=config.workload, budget=config.budget,
                                 grid=grid, mechanism=config.mechanism, seeds=seeds,
                                 within=within, queries=queries, method=method,
                                 spec=config.spec, publish=config.publish(),
                                 method_options=None if method is None
                                 else method_options(config, method),
                                 progress=progress)
        about = {"made_by": _MADE_BY, "config": config.to_dict(), "versions": package_versions()}
        files = write_tradeoff(by_seed, directory, about=about)
    document = json.loads(files[-1].read_text(encoding="utf-8"))
    log(f"wrote {', '.join(p.name for p in files)} in {directory}")
    return TradeoffOutput(tradeoff_table(by_seed), by_seed, directory, files, document)
