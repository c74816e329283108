"""``postproc demo``: the whole path on synthetic 1940-style data, in a couple of minutes.

Synthesizes persons and units, writes them and a run configuration (``DIR/config.toml``, the E2E
configuration at the chosen ε), runs it (tabulate → measure → TopDown → write) into ``DIR/run``,
and prints a per-level error table of the noisy measurements and the TopDown result against the
confidential data. Everything runs in simulation mode (seeded, labelled unsafe for releases).
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Callable

from postproc.errors import PostprocError

__all__ = ["run_demo", "DEMO_CONFIG"]

_MARKER = ".postproc-demo"

DEMO_CONFIG = """\
# The E2E 1940 configuration, as written by `postproc demo`. Rerun it with
#   postproc run {dir}/config.toml --out {dir}/run-again
[data]
persons = "data/persons.parquet"
units = "data/units.parquet"

[schema]
preset = "e2e_1940"

[geography]
levels = ["nation", "state", "county", "enum_dist"]

[workload]
preset = "e2e"

[budget]
kind = "pure"
total = {epsilon}
preset = "e2e"

[mechanism]
name = "geometric"

[randomness]
mode = "simulation"
seed = {seed}

[spec]
preset = "e2e"

[solver]
executor = "{executor}"

[output]
directory = "run"
"""


def run_demo(out: str | Path = "postproc-demo", *, persons: int = 1_000_000, seed: int = 2024,
             epsilon: float = 1.0, executor: str = "serial", progress: bool = True,
             log: Callable[[str], None] = print):
    """Run the demo into ``out`` (a previous demo there is replaced; anything else is kept).

    Returns the :class:`~postproc.pipeline.PipelineResult`.
    """
    from hierarchy.synth import write_synthetic_1940
    from postproc.config import load_config
    from postproc.pipeline import run_pipeline

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
    (out / "config.toml").write_text(DEMO_CONFIG.format(epsilon=epsilon, seed=seed, dir=out,
                                                        executor=executor))
    log(f"2/3 measuring at ε = {epsilon} (E2E split) and running TopDown "
        f"(nation → state → county → enum_dist) …")
    result = run_pipeline(load_config(out / "config.toml"), out=out / "run", progress=progress,
                          log=log)
    log(f"3/3 done in {time.perf_counter() - t0:.1f} s")
    return result
