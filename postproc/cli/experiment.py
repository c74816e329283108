"""``postproc experiment NAME [--out DIR] [--quick] [--report] [--persons N] [--sensitivity D]
[--data DIR] [--composition NAME]``: run a reference analysis.

``NAME`` is one of ``flaxman2019``, ``petti_flaxman``, ``clark_dajani``, ``clark_dajani_1960`` (see
:mod:`postproc.apps.experiments` and ``docs/experiments.md``). Writes CSV tables, PNG figures and
``summary.json`` into ``DIR`` (default ``experiments/NAME``); ``postproc report DIR`` makes an HTML
page of them. ``--quick`` runs a small variant (used by the tests) in under half a minute:
:data:`QUICK_SECONDS`.
``--persons N`` sets the size of the synthetic data (the full variants' defaults are in
``docs/experiments.md``; ``petti_flaxman --persons 132000000`` is the 1940 census's full size).
``--workers N`` (``petti_flaxman`` only) solves TopDown's nodes on N worker processes.
``--sensitivity D`` (``clark_dajani`` only) sets the sensitivity of the noisy cells, default 1.
``--data DIR`` (``petti_flaxman`` only) runs the study on the E2E files in ``DIR`` (an IPUMS USA
1940 extract through ``postproc ipums1940``) instead of synthetic data.
``--composition NAME`` (``petti_flaxman`` only) sets how mixed the synthetic counties are
(:data:`hierarchy.synth.COMPOSITIONS`: ``default``, ``counties_1940``, ``counties_eds_1940``).
Experiments run in simulation mode: seeded, reproducible, never a release.
"""

from __future__ import annotations

import argparse
from typing import Any

ORDER = 35

#: Wall-clock seconds of each ``--quick`` variant on this project's 2-core machine, rounded up
#: (measured 7 December 2026 with ``nice -n 19`` beside a benchmark using both cores: 6.7, 22.7
#: and 27.2 s, of which 5.9, 21.1 and 25.4 s CPU; each runs on one core). clark_dajani_1960: 2.9 s
#: with ``nice -n 19`` at load average 2.9, 2.4 s CPU, imports included.
QUICK_SECONDS = {"clark_dajani": 7, "flaxman2019": 25, "petti_flaxman": 30,
                 "clark_dajani_1960": 3}


def experiment_names() -> list[str]:
    """The reference analyses: the public modules of :mod:`postproc.apps.experiments`.

    Found without importing the package (which loads pandas), so ``postproc --help`` stays fast;
    :data:`postproc.apps.experiments.EXPERIMENTS` lists the same names.

    Examples
    --------
    >>> experiment_names()
    ['clark_dajani', 'clark_dajani_1960', 'flaxman2019', 'petti_flaxman']
    """
    import pkgutil
    from importlib.util import find_spec

    spec = find_spec("postproc.apps.experiments")
    return sorted(info.name for info in pkgutil.iter_modules(spec.submodule_search_locations)
                  if not info.name.startswith("_"))


def register(subparsers: Any) -> None:
    """Add ``experiment`` to the ``postproc`` parser."""
    p = subparsers.add_parser(
        "experiment", help="run a reference analysis (tables, figures, summary)",
        description="Run a reference analysis and write its CSV tables, PNG figures and "
                    "summary.json: flaxman2019 (EPL of GDPC, ADPC, RDPC; residual and D/D′ "
                    "direct estimates), petti_flaxman (TopDown MAE and EPL on 1940-style data, "
                    "SRS matches, county and ED bias by homogeneity, beside the paper's "
                    "numbers), clark_dajani (bottom-up L1/L2 error against ε), "
                    "clark_dajani_1960 (weighted 1960 long-form tabulation: sampling and noise "
                    "error, calibration where consistent).")
    p.add_argument("name", choices=experiment_names(), help="which analysis")
    p.add_argument("--out", metavar="DIR",
                   help="output directory (default experiments/NAME, or experiments/NAME-quick)")
    times = ", ".join(f"{name} about {seconds} s" for name, seconds in QUICK_SECONDS.items())
    p.add_argument("--quick", action="store_true",
                   help=f"a small variant, for a first look and the tests: {times} on 2 cores "
                        f"(the full analyses take longer: docs/experiments.md)")
    p.add_argument("--report", action="store_true", help="also write DIR/report.html")
    p.add_argument("--sensitivity", metavar="D",
                   help="clark_dajani only: sensitivity of the noisy ED cells, noise z = eps/D "
                        "(default 1: adding or deleting a person changes one cell by 1, the "
                        "paper's neighbours; 2: changing a person's record, the E2E neighbours, "
                        "twice the noise)")
    p.add_argument("--persons", metavar="N",
                   help="persons of the synthetic data (default: the analysis's own, "
                        "docs/experiments.md; e.g. 132000000 for Petti & Flaxman at the 1940 "
                        "census's full size)")
    p.add_argument("--workers", metavar="N",
                   help="petti_flaxman only: solve TopDown's node problems on N worker "
                        "processes (default: one process; 2 on this project's 2 cores roughly "
                        "halves the TopDown runs of a full-size study)")
    p.add_argument("--data", metavar="DIR",
                   help="petti_flaxman only: run on the E2E persons.parquet and units.parquet in "
                        "DIR (postproc ipums1940 writes them from an IPUMS USA 1940 extract) "
                        "instead of synthetic data; the E2E spec without its structural zeros")
    p.add_argument("--composition", metavar="NAME",
                   help="petti_flaxman only: how mixed the synthetic counties are: default; "
                        "counties_1940 (as many populated votingage x hispanic x race cells per "
                        "county as the real 1940 counties, 8.4 of 24); counties_eds_1940 (those "
                        "counties, and EDs with the real EDs' small cells; docs/experiments.md)")
    p.set_defaults(func=run)


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The experiment parameters given as options (``--persons``, ``--workers``, ``--data``,
    ``--composition``, ``--sensitivity``), checked."""
    from postproc.errors import PostprocError

    given = {} if getattr(args, "persons", None) is None else {
        "persons": _persons(args.persons)}
    if getattr(args, "workers", None) is not None:
        if args.name != "petti_flaxman":
            raise PostprocError(f"--workers applies to petti_flaxman only, not {args.name}")
        given["executor"], given["workers"] = "process", _persons(args.workers, "--workers")
    if getattr(args, "composition", None) is not None:
        from hierarchy.synth import COMPOSITIONS

        if args.name != "petti_flaxman":
            raise PostprocError(f"--composition applies to petti_flaxman only, not {args.name}")
        if args.composition not in COMPOSITIONS:
            raise PostprocError(f"--composition must be one of {', '.join(COMPOSITIONS)}, not "
                                f"{args.composition!r}")
        if getattr(args, "data", None) is not None:
            raise PostprocError("--composition shapes the synthetic data; with --data the files "
                                "are the data: leave --composition out")
        given["composition"] = args.composition
    if getattr(args, "data", None) is not None:
        if args.name != "petti_flaxman":
            raise PostprocError(f"--data applies to petti_flaxman only, not {args.name}")
        if args.sensitivity is not None:
            raise PostprocError("--sensitivity applies to clark_dajani only, not petti_flaxman")
        if "persons" in given:
            raise PostprocError("--persons sets the size of the synthetic data; with --data the "
                                "files' persons are the data: leave --persons out")
        return {**given, "data": args.data}
    if args.sensitivity is None:
        return given
    if args.name != "clark_dajani":
        raise PostprocError(f"--sensitivity applies to clark_dajani only, not {args.name}")
    try:
        value = float(args.sensitivity)
    except ValueError:
        value = args.sensitivity
    try:
        from postproc.apps.experiments.clark_dajani import check_sensitivity

        return {**given, "sensitivity": check_sensitivity(value)}
    except PostprocError as exc:
        raise PostprocError(f"--{exc}") from None


def _persons(text: str, option: str = "--persons") -> int:
    """``--persons`` (or ``option``): a whole number ≥ 1 (``132000000``, ``132_000_000`` or
    ``132,000,000``).

    Examples
    --------
    >>> _persons("132,000,000"), _persons("3_000_000")
    (132000000, 3000000)
    >>> _persons("1e6")
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: --persons must be a whole number of persons ≥ 1 (e.g. \
132000000), not '1e6'
    """
    from postproc.errors import PostprocError

    cleaned = str(text).replace(",", "").replace("_", "").strip()
    if not cleaned.isdigit() or int(cleaned) < 1:
        what = "of persons ≥ 1 (e.g. 132000000)" if option == "--persons" else "≥ 1 (e.g. 2)"
        raise PostprocError(f"{option} must be a whole number {what}, not {text!r}")
    return int(cleaned)


def run(args: argparse.Namespace) -> int:
    """Run ``postproc experiment``."""
    from pathlib import Path

    from postproc.apps.experiments import run_experiment

    out = args.out or str(Path("experiments") / (args.name + ("-quick" if args.quick else "")))
    summary = run_experiment(args.name, out, quick=args.quick, **_overrides(args))
    for key, value in list(summary["headline"].items())[:12]:
        shown = f"{value:.4g}" if isinstance(value, float) else value
        print(f"  {key}: {shown}")
    if args.report:
        from postproc.apps.runs.report import write_report

        print(f"report: {write_report(out)}")
    return 0
