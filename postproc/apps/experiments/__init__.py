"""The reference analyses, one module each, run by name: ``postproc experiment NAME``.

``flaxman2019``
    EPL of GDPC, ADPC (P = 4) and RDPC (J = 3) on Flaxman's synthetic population over a range of ε;
    residual distributions and EPL curves, with the published estimator under the toolkit's
    settings and the paper's own (bandwidth 0.15, window 1.5 × q95); and the D/D′ experiment (one
    person moved between two leaves, each mechanism run many times on both) with the direct
    estimator on point events and on tail events ``{error ≥ k}`` beside their exact values.
``petti_flaxman``
    TopDown on synthetic 1940-style data over a grid of ε and seeds (the full run: the paper's
    ε ∈ {0.25, 0.5, 0.75, 1, 2, 4, 6, 8} and 4 seeds):
    MAE and EPL per level for the total (TC) and ``va_hisp_race`` (SC) counts, the error
    distribution with EPL(x), the MAE-vs-EPL trade-off against simple random samples of 5–95 %
    and the SRS fraction each ε matches (jointly on error and EPL, and on error alone), the bias
    of county and ED totals by homogeneity index, and our numbers beside the paper's.
``clark_dajani``
    Bottom-up (geometric noise on every detailed cell of the bottom level) L1 and L2 errors and
    the share of answers within ±k per level and query against ε, with and without calibration to
    published state totals; the curve for choosing ε (``tradeoff.png``).
``clark_dajani_1960``
    Weighted data: the 1960 long-form special tabulation (sex × group quarters for every county,
    weighted) on a synthetic 25 % sample, bottom-up noise with the weight cap as sensitivity;
    errors against the weighted truth and the full count beside the sampling error alone, and
    calibration to the published state totals where they are consistent, the others reported.

Each writes CSV tables, PNG figures and ``summary.json`` (captions, parameters, headline numbers)
into its output directory, with a sentence saying what this run ran (its own grid and sizes);
``postproc report DIR`` turns them into one HTML page. ``quick=True``
is a small variant that runs in seconds (CI). Everything runs in simulation mode (seeded).

Examples
--------
>>> sorted(EXPERIMENTS)
['clark_dajani', 'clark_dajani_1960', 'flaxman2019', 'petti_flaxman']
>>> import tempfile
>>> summary = run_experiment("flaxman2019", tempfile.mkdtemp(), quick=True, log=lambda m: None,
...                          persons=100_000, levels=2, epsilons=[1.0], replicates=1,
...                          n_boot=0, neighbour_runs=2000, neighbour_epsilons=[1.0])
>>> summary["headline"]["ordering_gdpc_gt_adpc_gt_rdpc_at_every_epsilon"]
True
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any, Callable

from postproc.apps.experiments._common import Output
from postproc.errors import PostprocError

__all__ = ["EXPERIMENTS", "run_experiment", "describe"]

#: Experiment name → module.
EXPERIMENTS = {"flaxman2019": "postproc.apps.experiments.flaxman2019",
               "petti_flaxman": "postproc.apps.experiments.petti_flaxman",
               "clark_dajani": "postproc.apps.experiments.clark_dajani",
               "clark_dajani_1960": "postproc.apps.experiments.clark_dajani_1960"}


def _module(name: str):
    if name not in EXPERIMENTS:
        raise PostprocError(f"unknown experiment {name!r}; experiments are "
                            f"{', '.join(sorted(EXPERIMENTS))}")
    return importlib.import_module(EXPERIMENTS[name])


def describe(name: str) -> str:
    """The experiment's title and description (its module docstring).

    Parameters
    ----------
    name : str

    Returns
    -------
    str

    Raises
    ------
    PostprocError
        Unknown name.

    Examples
    --------
    >>> describe("clark_dajani").splitlines()[0]
    'Clark & Dajani (2019): error of the bottom-up mechanism against ε.'
    """
    return (_module(name).__doc__ or name).strip()


def run_experiment(name: str, out: str | Path | None = None, *, quick: bool = False,
                   log: Callable[[str], None] = print, **overrides: Any) -> dict[str, Any]:
    """Run a reference analysis and write its tables, figures and ``summary.json``.

    Parameters
    ----------
    name : str
        A key of :data:`EXPERIMENTS`.
    out : str or Path, optional
        Output directory (default ``experiments/<name>``, or ``…-quick`` for the quick variant).
    quick : bool
        The small, fast variant.
    log : callable
        Progress messages.
    **overrides
        Parameters of the experiment (see its module's ``FULL`` / ``QUICK``).

    Returns
    -------
    dict
        The summary written to ``summary.json``.

    Raises
    ------
    PostprocError
        Unknown experiment or parameter, or a parameter's bad value (checked before anything is
        written).

    Examples
    --------
    Clark & Dajani's bottom-up errors at one ε on two states of synthetic 1940-style data:

    >>> import tempfile
    >>> summary = run_experiment("clark_dajani", tempfile.mkdtemp(), quick=True,
    ...                          log=lambda m: None, persons=1_000_000, states=2, seeds=[1],
    ...                          epsilons=[1.0])
    >>> [t["file"] for t in summary["tables"]], [f["file"] for f in summary["figures"]]
    (['bottom_up_errors.csv', 'bottom_up_errors_by_seed.csv'], ['l1_vs_epsilon.png',
    'l2_vs_epsilon.png', 'calibration.png', 'tradeoff.png'])
    >>> summary["parameters"]["units"]
    {'nation': 1, 'state': 2, 'county': 3, 'enum_dist': 156}
    >>> run_experiment("clark_dajani", quick=True, replicates=3)
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: experiment 'clark_dajani' has no parameter 'replicates'; its
    parameters are persons, data_seed, states, seeds, epsilons, sensitivity
    """
    module = _module(name)
    defaults = module.QUICK if quick else module.FULL
    unknown = sorted(set(overrides) - set(defaults))
    if unknown:
        raise PostprocError(f"experiment {name!r} has no parameter {unknown[0]!r}; its "
                            f"parameters are {', '.join(defaults)}")
    check = getattr(module, "check_parameters", None)
    if check is not None:                 # before the output directory exists
        overrides = check(overrides)
    directory = Path(out) if out is not None else Path("experiments") / (
        name + ("-quick" if quick else ""))
    output = Output(directory, name, module.TITLE, log)
    result = module.run(output, quick=quick, **overrides)
    summary = output.finish({**result["parameters"], "quick": quick}, result["headline"],
                            result.get("notes"), ran=("Quick variant: " if quick else "")
                            + result.get("ran", ""))
    log(f"{name}: wrote {len(output.tables)} tables and {len(output.figures)} figures to "
        f"{directory} in {summary['seconds']:.0f} s")
    return summary
