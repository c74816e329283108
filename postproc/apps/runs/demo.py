"""``postproc demo``: the whole path on synthetic 1940-style data, in a couple of minutes.

Synthesizes persons and units, builds the E2E run configuration at the chosen ε in Python
(:func:`demo_config`) and saves it as ``DIR/config.toml`` to be rerun, runs it (tabulate →
measure → TopDown → write) into ``DIR/run``, and prints a per-level error table of the noisy
measurements and the TopDown result against the confidential data. Everything runs in
simulation mode (seeded, labelled unsafe for releases).
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Callable

from postproc.errors import PostprocError

__all__ = ["run_demo", "demo_config"]

_MARKER = ".postproc-demo"

#: The demo's levels, root first.
DEMO_LEVELS = ("nation", "state", "county", "enum_dist")


def run_demo(out: str | Path = "postproc-demo", *, persons: int = 1_000_000, seed: int = 2024,
             epsilon: float = 1.0, executor: str = "serial", progress: bool = True,
             log: Callable[[str], None] = print):
    """Run the demo into ``out`` (a previous demo there is replaced; anything else is kept).

    Returns the :class:`~postproc.apps.runs.pipeline.PipelineResult`.
    """
    from hierarchy.storage import atomic_path
    from hierarchy.synth import write_synthetic_1940
    from postproc.apps.runs.pipeline import run_pipeline

    out = Path(out)
    if out.exists() and not out.is_dir():
        raise PostprocError(f"{out} exists and is not a directory; choose another --out")
    if out.exists() and any(out.iterdir()):
        if not (out / _MARKER).is_file():
            raise PostprocError(f"{out} exists and was not made by `postproc demo`; choose "
                                "another --out")
        cwd = Path.cwd().resolve()
        if out.resolve() == cwd or out.resolve() in cwd.parents:
            raise PostprocError(f"{out} is (or contains) the current directory and is never "
                                "replaced; choose another --out")
        shutil.rmtree(out)
    out.mkdir(parents=True)
    (out / _MARKER).write_text("made by postproc demo; safe to delete\n")
    t0 = time.perf_counter()
    log(f"1/3 synthesizing {persons:,} 1940-style persons (seed {seed}) …")
    write_synthetic_1940(out / "data", persons, seed=seed, progress=False)
    config = demo_config(out, epsilon=epsilon, seed=seed, executor=executor)
    with atomic_path(out / "config.toml") as path:
        path.write_text(f"# The E2E 1940 configuration, as written by `postproc demo`. Rerun it "
                        f"with\n#   postproc run {out}/config.toml --out {out}/run-again\n"
                        + config.to_toml(), encoding="utf-8")
    log(f"2/3 measuring at ε = {epsilon} (E2E split) and running TopDown "
        f"(nation → state → county → enum_dist) …")
    result = run_pipeline(config, out=out / "run", progress=progress, log=log)
    log(f"3/3 done in {time.perf_counter() - t0:.1f} s")
    return result


def demo_config(directory: str | Path, *, epsilon: float = 1.0, seed: int = 2024,
                executor: str = "serial"):
    """The demo's run configuration: the E2E test on ``directory/data`` (as
    :func:`hierarchy.synth.write_synthetic_1940` writes it) at ``epsilon``, seeded, with its
    output in ``directory/run``.

    Parameters
    ----------
    directory : str or Path
        Where the data are and the configuration file goes (its paths are relative to it).
    epsilon : float, optional
    seed : int, optional
        Simulation seed.
    executor : str, optional

    Returns
    -------
    RunConfig

    Examples
    --------
    >>> config = demo_config("demo", epsilon=0.5, seed=3)
    >>> config.levels, str(config.budget.total), config.rng
    (('nation', 'state', 'county', 'enum_dist'), '1/2', 3)
    >>> config.persons == (Path("demo") / "data" / "persons.parquet").resolve()
    True
    """
    from postproc.apps.runs.config import RunConfig

    return RunConfig.build(persons="data/persons.parquet", units="data/units.parquet",
                           levels=DEMO_LEVELS, budget=epsilon, mechanism="geometric",
                           mode="simulation", seed=seed, spec="e2e", executor=executor,
                           output="run", base=directory)
