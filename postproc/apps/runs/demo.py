"""``postproc demo``: the whole path on synthetic data, in one command.

Two presets. ``e2e_1940`` (the default): 1940-style persons and units, the E2E run configuration
at the chosen ε (nation → state → county → enum_dist), in a couple of minutes for 1M persons.
``pl94_2020``: 2020-style persons, units and blocks
(:func:`hierarchy.synth.census2020.synthesize_2020`) and the 2020 redistricting-data production
configuration (:mod:`hierarchy.presets.pl94`: schema, workload, budget ρ = (542/339)², spec,
multipass order; nation → state → county → tract → block_group → block).

Either way the configuration is built in Python (:func:`demo_config`) and saved as
``DIR/config.toml`` to be rerun, the run (tabulate → measure → TopDown → write) goes into
``DIR/run`` with the layout of ``postproc run``, and a per-level error table of the noisy
measurements and the TopDown result against the confidential data is printed. Everything runs in
simulation mode (seeded, labelled unsafe for releases).
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from postproc.apps.runs.config import RunConfig
from postproc.errors import PostprocError

__all__ = ["run_demo", "demo_config", "DEMO_PRESETS"]

_MARKER = ".postproc-demo"
#: Above this many persons the pl94_2020 demo runs in parts by default.
PARTS_ABOVE = 3_000_000

#: The demo's levels, root first.
DEMO_LEVELS = ("nation", "state", "county", "enum_dist")

#: Demo presets: name → what it synthesizes and runs.
DEMO_PRESETS = {"e2e_1940": "1940-style persons, the E2E configuration at ε",
                "pl94_2020": "2020-style persons, units and blocks, the 2020 PL 94-171 "
                             "production configuration"}


def run_demo(out: str | Path = "postproc-demo", *, preset: str = "e2e_1940",
             persons: int = 1_000_000, seed: int = 2024, epsilon: float | None = None,
             executor: str | None = None, parts: int | None = None, progress: bool = True,
             log: Callable[[str], None] = print):
    """Synthesize data, write the preset's configuration and run it into ``out``.

    A previous demo in ``out`` is replaced; a directory the demo did not make is never touched.

    Parameters
    ----------
    out : str or Path
        The demo's directory: ``data/``, ``config.toml`` and the run in ``run/``.
    preset : {"e2e_1940", "pl94_2020"}
        What to synthesize and run (:data:`DEMO_PRESETS`).
    persons : int
        Synthetic persons.
    seed : int
        Seeds the synthesis and the measurements.
    epsilon : float, optional
        The total ε of ``e2e_1940`` (default 1). ``pl94_2020`` spends the production ρ and
        takes no ε.
    executor : {"serial", "process", "dask"}, optional
        Default: ``"serial"`` for ``e2e_1940`` (seconds), ``"process"`` for ``pl94_2020`` (a
        worker per core; identical results).
    parts : int, optional
        ``pl94_2020`` only: run TopDown in parts of at most this many blocks
        (:func:`postproc.apps.runs.parts.run_in_parts`). Default: 20,000 above
        :data:`PARTS_ABOVE` persons (a run of the whole needs about 2 GiB per million), else a
        run of the whole.
    progress : bool
        Progress bars (synthesis, TopDown per level) on stderr.
    log : callable
        Receives one line per step and, after TopDown, one per level.

    Returns
    -------
    PipelineResult or PartsResult
        See :func:`postproc.apps.runs.pipeline.run_pipeline` and
        :func:`postproc.apps.runs.parts.run_in_parts`.

    Raises
    ------
    PostprocError
        ``out`` is a file, a directory the demo did not make or the current directory; an
        unknown preset; ε given to ``pl94_2020``.

    Examples
    --------
    >>> import tempfile
    >>> lines = []
    >>> out = run_demo(tempfile.mkdtemp() + "/demo", preset="pl94_2020", persons=2_000,
    ...                progress=False, log=lines.append)
    >>> out.result.levels
    ('nation', 'state', 'county', 'tract', 'block_group', 'block')
    >>> int(out.result.histograms[-1].sum()) == int(out.truth.counts[0].sum())
    True
    >>> sum(line.startswith("  TopDown") for line in lines)   # one line per level
    6
    """
    from postproc.apps.runs.pipeline import run_pipeline

    _check_arguments(preset, parts, epsilon)
    out = _fresh_directory(Path(out))
    t0 = time.perf_counter()
    demo = _synthesize(out, preset, persons, seed, epsilon, executor, progress, log)
    _write_config(out, demo)
    if preset == "pl94_2020" and (parts is not None or persons > PARTS_ABOVE):
        from postproc.apps.runs.parts import DEFAULT_PART_BLOCKS, run_in_parts

        log(demo.step.replace(" …", f", in parts of at most {parts or DEFAULT_PART_BLOCKS:,} "
                                    f"blocks …"))
        done = run_in_parts(demo.config, out / "run", part_blocks=parts or DEFAULT_PART_BLOCKS,
                            progress=progress, log=log)
        log(f"3/3 done in {time.perf_counter() - t0:.1f} s")
        return done
    log(demo.step)
    result = run_pipeline(demo.config, out=out / "run", progress=progress, log=log)
    _log_steps(result, log)
    log(f"3/3 done in {time.perf_counter() - t0:.1f} s")
    return result


def _check_arguments(preset: str, parts: int | None, epsilon: float | None) -> None:
    """Refuse an unknown preset, and parts or ε the preset does not take."""
    if preset not in DEMO_PRESETS:
        raise PostprocError(f"unknown demo preset {preset!r}; choose from {list(DEMO_PRESETS)}")
    if parts is not None and preset != "pl94_2020":
        raise PostprocError("parts= (--parts) is for the pl94_2020 preset: the 1940 "
                            "geography has no blocks file to cut into parts")
    if preset == "pl94_2020" and epsilon is not None:
        raise PostprocError("the pl94_2020 demo spends the production budget, ρ = (542/339)² "
                            "(zCDP), and takes no ε; leave out --epsilon, or rescale ρ with "
                            "[budget] total in the config.toml it writes and rerun that")


@dataclass(frozen=True)
class _Demo:
    """The demo's data written, and its configuration with the title its file gets and the log
    line of the run step."""

    config: RunConfig
    title: str
    step: str


def _synthesize(out: Path, preset: str, persons: int, seed: int, epsilon: float | None,
                executor: str | None, progress: bool, log: Callable[[str], None]) -> _Demo:
    """Step 1: the preset's synthetic data in ``out/data``, and its configuration."""
    if preset == "e2e_1940":
        from hierarchy.synth import write_synthetic_1940

        epsilon = 1.0 if epsilon is None else epsilon
        log(f"1/3 synthesizing {persons:,} 1940-style persons (seed {seed}) …")
        write_synthetic_1940(out / "data", persons, seed=seed, progress=False)
        config = demo_config(out, epsilon=epsilon, seed=seed, executor=executor or "serial")
        return _Demo(config, "The E2E 1940 configuration",
                     f"2/3 measuring at ε = {epsilon} (E2E split) and running TopDown "
                     f"({' → '.join(DEMO_LEVELS)}) …")
    from hierarchy.synth.census2020 import synthesize_2020

    log(f"1/3 synthesizing {persons:,} 2020-style persons (seed {seed}) …")
    made = synthesize_2020(persons, seed=seed, out=out / "data", progress=progress)
    log(f"    {made['persons']:,} persons, {made['blocks']:,} blocks "
        f"({made['empty_blocks']:,} empty), {made['seconds']:.1f} s")
    config = demo_config(out, preset=preset, seed=seed, executor=executor or "process")
    return _Demo(config, "The 2020 PL 94-171 production configuration",
                 f"2/3 tabulating, measuring (discrete Gaussian, ρ = "
                 f"{float(config.budget.total):.4f}, 11 queries) and running TopDown "
                 f"({' → '.join(config.levels)}) …")


def _write_config(out: Path, demo: _Demo) -> None:
    """``out/config.toml``: the demo's configuration, to be rerun."""
    from hierarchy.io.storage import atomic_path

    with atomic_path(out / "config.toml") as path:
        path.write_text(f"# {demo.title}, as written by `postproc demo`. Rerun it "
                        f"with\n#   postproc run {out}/config.toml --out {out}/run-again\n"
                        + demo.config.to_toml(), encoding="utf-8")


def _fresh_directory(out: Path) -> Path:
    """``out``, emptied of a previous demo (and only of one) and marked as the demo's."""
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
    return out


def _log_steps(result, log: Callable[[str], None]) -> None:
    """One line per step of the pipeline and one per TopDown level: seconds and units."""
    steps = ", ".join(f"{name.replace('_', ' ')} {seconds:.1f} s"
                      for name, seconds in result.timings.items())
    log(f"    steps: {steps}")
    levels = result.result.provenance.get("timings", {}).get("levels", {})
    geo = result.result.geography
    for level, seconds in levels.items():
        n = geo.n_units(level)
        log(f"  TopDown {level}: {n:,} unit{'s' if n != 1 else ''} in {seconds:.1f} s")


def demo_config(directory: str | Path, *, preset: str = "e2e_1940", epsilon: float = 1.0,
                seed: int = 2024, executor: str = "serial"):
    """The demo's run configuration on ``directory/data``, seeded, with its output in
    ``directory/run``.

    ``e2e_1940``: the E2E test at ``epsilon`` on the files
    :func:`hierarchy.synth.write_synthetic_1940` writes. ``pl94_2020``: the production presets
    (schema, workload, budget, spec; :mod:`hierarchy.presets.pl94`) with the discrete Gaussian
    mechanism on the persons, units and blocks :func:`hierarchy.synth.census2020.synthesize_2020`
    writes, fitted in production's passes per level (the total alone first at state, county,
    tract and block group, then the other queries, each pass holding the earlier passes'
    answers within production's 0.1; one pass at the nation and the block). The
    noise is drawn by the fast simulation sampler (``exact = false``: tables, total variation
    below 2⁻⁴⁵ from the exact law; the demo is a simulation, never a release).

    Parameters
    ----------
    directory : str or Path
        Where the data are and the configuration file goes (its paths are relative to it).
    preset : {"e2e_1940", "pl94_2020"}
    epsilon : float, optional
        The E2E total ε (``e2e_1940`` only).
    seed : int, optional
        Simulation seed.
    executor : str, optional

    Returns
    -------
    RunConfig

    Raises
    ------
    PostprocError
        An unknown preset.

    Examples
    --------
    >>> config = demo_config("demo", epsilon=0.5, seed=3)
    >>> config.levels, str(config.budget.total), config.rng
    (('nation', 'state', 'county', 'enum_dist'), '1/2', 3)
    >>> config.persons == (Path("demo") / "data" / "persons.parquet").resolve()
    True
    >>> config = demo_config("demo", preset="pl94_2020", seed=3)
    >>> config.schema.size, config.mechanism.name, config.mechanism.exact
    (2016, 'discrete_gaussian', False)
    >>> config.passes_at("state")[0], len(config.passes_at("block"))
    (('total',), 1)
    >>> config.method_options
    {'pass_tolerance': 0.1}
    """
    if preset == "e2e_1940":
        return RunConfig.build(persons="data/persons.parquet", units="data/units.parquet",
                               levels=DEMO_LEVELS, budget=epsilon, mechanism="geometric",
                               mode="simulation", seed=seed, spec="e2e", executor=executor,
                               output="run", base=directory)
    if preset != "pl94_2020":
        raise PostprocError(f"unknown demo preset {preset!r}; choose from {list(DEMO_PRESETS)}")
    from hierarchy.presets.pl94 import LEVELS, PRODUCTION_PASS_TOLERANCE

    return RunConfig.build(persons="data/persons.parquet", units="data/units.parquet",
                           blocks="data/blocks.parquet", levels=LEVELS, schema="pl94_2020",
                           workload="pl94_2020", budget="pl94_2020",
                           mechanism={"name": "discrete_gaussian", "exact": False},
                           mode="simulation", seed=seed, spec="pl94_2020", passes="pl94_2020",
                           round_passes="pl94_2020",
                           method_options={"pass_tolerance": PRODUCTION_PASS_TOLERANCE},
                           executor=executor, output="run", base=directory)
