"""Run directories: read what ``postproc run`` wrote, evaluate it against its data, and run
``postproc compare`` into a directory of its own.

:func:`load_run` reads a run's output directory (its result, measurements and configuration:
a :class:`RunOutput`), :func:`load_truth` tabulates the run's confidential data again on its
geography, and :func:`evaluate_run` is ``postproc evaluate``: the run's result against that
truth with :func:`postproc.evaluation.evaluate.evaluate` (and, with ``compare_all``, beside the
raw measurements and the reference post-processors). :func:`run_compare` is ``postproc compare``:
it reads a run configuration and its data once, measures once, compares the methods with
:func:`postproc.evaluation.compare.compare_methods` and writes the comparison
(:func:`~postproc.evaluation.compare.write_comparison`) — under ``DIR/confidential/`` in release
mode — returning a :class:`CompareOutput`.

These read and write directories and configurations, so they belong to the applications: the
evaluation computes on results and tables and knows nothing of runs.

Examples
--------
>>> import tempfile
>>> from hierarchy.synth import write_synthetic_1940
>>> from postproc.apps.runs.config import RunConfig
>>> from postproc.apps.runs.pipeline import run_pipeline
>>> base = Path(tempfile.mkdtemp())
>>> _ = write_synthetic_1940(base / "data", 500, seed=1, progress=False)
>>> _ = run_pipeline(RunConfig.build(persons="data/persons.parquet", units="data/units.parquet",
...                                  levels=["nation", "state"], budget=1, seed=1, base=base),
...                  out=base / "run", progress=False, log=lambda m: None)
>>> table = evaluate_run(base / "run", base / "data", queries=["total"], rng=0,
...                      epl_options={"n_boot": 0})
>>> table.set_index("level").loc["state", "mae"]          # the state totals are invariant
np.float64(0.0)
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from hierarchy.errors import ConfidentialDataError, HierarchyError
from hierarchy.histograms import Hierarchy
from hierarchy.noisy import NoisyHierarchy
from hierarchy.randomness import as_randomness
from postproc.errors import PostprocError
from postproc.evaluation.compare import (
    FILES,
    compare_methods,
    comparison_notes,
    constrained,
    parse_methods,
    write_comparison,
)
from postproc.evaluation.evaluate import evaluate, reference_results
from postproc.gate import label_table, randomness_of
from postproc.reports.numbers import format_number
from postproc.result import Result

__all__ = ["claim_output", "RunOutput", "load_run", "load_truth", "evaluate_run", "CompareOutput",
           "default_directory", "run_compare"]

_MADE_BY = "postproc compare"


# --------------------------------------------------------------------------------------------------
# Run output directories
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class RunOutput:
    """What ``postproc run`` left in a directory: the result, measurements and configuration.

    Made by :func:`load_run`. ``estimate`` is the run's result; ``noisy`` its measurements
    (None when ``noisy/`` was not kept); ``config`` the
    :class:`~postproc.apps.runs.config.RunConfig` its manifest records (None for a manifest without
    one); ``manifest`` the parsed ``manifest.json``.

    Examples
    --------
    A run of Hay et al.'s least squares (real-valued counts, no spec):

    >>> import tempfile
    >>> from hierarchy.synth import write_synthetic_1940
    >>> from postproc.apps.runs.config import RunConfig
    >>> from postproc.apps.runs.pipeline import run_pipeline
    >>> base = Path(tempfile.mkdtemp())
    >>> _ = write_synthetic_1940(base, 500, seed=1, progress=False)
    >>> config = RunConfig.build(persons=base / "persons.parquet", levels=["nation", "state"],
    ...                          budget=1, seed=1, spec=None, method="hay")
    >>> _ = run_pipeline(config, out=base / "hay", progress=False, log=lambda m: None)
    >>> run = load_run(base / "hay")
    >>> run.estimate.method, run.manifest["method"], run.config.method, run.noisy.levels
    ('hay', 'hay', 'hay', ('nation', 'state'))
    """

    directory: Path
    estimate: Result
    noisy: NoisyHierarchy | None
    config: Any
    manifest: dict[str, Any]

    @property
    def release(self) -> bool:
        """Whether the run is treated as release mode: unless its manifest or measurements
        say simulation (a run that records no mode is treated as a release)."""
        modes = {(self.manifest.get("randomness") or {}).get("mode"),
                 (self.noisy.provenance.get("randomness", {}).get("mode")
                  if self.noisy is not None else None)}
        return "simulation" not in modes or "release" in modes


def _run_config(manifest: Mapping[str, Any], directory: Path):
    raw = manifest.get("config")
    if not isinstance(raw, Mapping):
        return None
    from postproc.apps.runs.config import config_from_dict
    resolved = raw.get("resolved", {}) if isinstance(raw.get("resolved"), Mapping) else {}
    source = resolved.get("source")
    base = Path(source).parent if source else directory
    data = {k: v for k, v in raw.items() if k != "resolved"}
    try:
        return config_from_dict(data, base=base, source=str(directory / "manifest.json"))
    except PostprocError as exc:
        raise PostprocError(f"{directory}/manifest.json: its configuration does not parse: "
                            f"{exc}") from None


def load_run(directory: str | Path, *, geography: Any = None) -> RunOutput:
    """Read a ``postproc run`` output directory.

    Parameters
    ----------
    directory : str or Path
        Holds ``manifest.json``, ``<level>.parquet`` for every level and (normally) ``noisy/``;
        a run in parts' directory (``geography.parquet``, no ``noisy/``) is read with
        :meth:`~postproc.result.Result.read`.
    geography : Geography, optional
        Needed only when the directory has no ``noisy/`` measurements to take it from.

    Returns
    -------
    RunOutput
        ``estimate`` is the run's result as a :class:`~postproc.result.Result`, named by the
        method the manifest records (``"topdown"`` for runs older than that record).

    Raises
    ------
    PostprocError
        Missing manifest or level files, or an unreadable configuration; the message names them.

    Examples
    --------
    >>> import tempfile
    >>> from hierarchy.synth import write_synthetic_1940
    >>> from postproc.apps.runs.config import RunConfig
    >>> from postproc.apps.runs.pipeline import run_pipeline
    >>> data = Path(tempfile.mkdtemp()) / "data"
    >>> _ = write_synthetic_1940(data, 500, seed=1, progress=False)
    >>> run_pipeline(RunConfig.build(persons=data / "persons.parquet",
    ...                              units=data / "units.parquet", levels=["nation", "state"],
    ...                              budget=1, seed=1),
    ...              out=data.parent / "run", progress=False, log=lambda m: None).result
    Result('topdown'; integer; nation=1, state=49 units; 500 persons; randomness simulation (unsafe
    for release))
    >>> load_run(data.parent / "run").estimate                # read back from the files
    Result('topdown'; integer; nation=1, state=49 units; 500 persons; randomness simulation (unsafe
    for release))
    >>> load_run(data)
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: .../data is not a postproc run output: no manifest.json there
    (run `postproc run CONFIG --out .../data` first)
    """
    import pyarrow.parquet as pq

    from hierarchy.io.storage import read_json
    from postproc.result import histograms_from_table

    directory = Path(directory)
    if not (directory / "manifest.json").is_file():
        raise PostprocError(f"{directory} is not a postproc run output: no manifest.json there "
                            f"(run `postproc run CONFIG --out {directory}` first)")
    manifest = read_json(directory / "manifest.json")
    config = _run_config(manifest, directory)
    noisy = None
    if (directory / "noisy" / "metadata.json").is_file():
        try:
            noisy = NoisyHierarchy.load(directory / "noisy")
        except HierarchyError as exc:
            raise PostprocError(f"{directory}/noisy: {exc}") from None
    schema = noisy.schema if noisy is not None else getattr(config, "schema", None)
    workload = noisy.workload if noisy is not None else getattr(config, "workload", None)
    geography = noisy.geography if noisy is not None else geography
    if noisy is None and geography is None and (directory / "geography.parquet").is_file():
        # a run in parts: its files are a Result's (Result.write's layout)
        return RunOutput(directory, Result.read(directory), None, config, manifest)
    if schema is None or geography is None:
        raise PostprocError(f"{directory}: no noisy/ measurements to take the schema and "
                            f"geography from; pass the truth's geography")
    method = str(manifest.get("method", "topdown"))       # runs of any registered method
    integer = bool(manifest.get("integer", True))
    hists = []
    for level in geography.levels:
        path = directory / f"{level}.parquet"
        if not path.is_file():
            raise PostprocError(f"{path} is missing: the run did not finish level {level!r} "
                                f"(finish it with `postproc run CONFIG --out {directory} "
                                f"--resume`)")
        hists.append(histograms_from_table(pq.read_table(path), schema, geography, level,
                                           source=str(path), integer=integer))
    randomness = (noisy.provenance.get("randomness") if noisy is not None else None) \
        or manifest.get("randomness") or {}
    estimate = Result(method, schema, geography, workload, tuple(hists),
                      {"method": method, "directory": str(directory),
                       "noisy": {"randomness": dict(randomness)}})
    return RunOutput(directory, estimate, noisy, config, manifest)


def _truth_files(data: Path, run: RunOutput, units: str | Path | None
                 ) -> tuple[Path, Path | None]:
    """The persons file (and units file, if any) of the truth given as a directory or a file."""
    if not data.exists():
        raise PostprocError(f"{data} does not exist; pass --truth with the run's input data (a "
                            f"directory or the persons file)")
    if units is not None and not Path(units).is_file():
        raise PostprocError(f"{units} is not a file; pass --units with the run's units file")
    if not data.is_dir():
        return data, Path(units) if units is not None else None
    config = run.config

    def names(kind: str) -> list[str]:
        out = [f"{kind}.parquet", f"{kind}.csv"]
        own = getattr(config, kind, None)
        if own is not None and Path(own).name not in out:
            out.append(Path(own).name)              # the run's own file name
        return out

    def find(kind: str) -> Path | None:
        return next((data / name for name in names(kind) if (data / name).is_file()), None)

    persons = find("persons")
    if persons is None:
        raise PostprocError(f"{data}: no persons file ({', '.join(names('persons'))}); pass the "
                            f"persons file itself, or the directory `postproc synth1940 --out` "
                            f"wrote")
    return persons, Path(units) if units is not None else find("units")


def load_truth(data: str | Path, run: RunOutput, *, units: str | Path | None = None
               ) -> Hierarchy:
    """Tabulate the confidential data of a run from a data directory or a persons file.

    The run's configuration supplies the schema, levels, column and value mappings and the unit
    attribute; its geography is reused, so the truth lines up unit by unit with the result.

    Parameters
    ----------
    data : str or Path
        A persons file (CSV or parquet, any name), or a directory holding ``persons.parquet``,
        ``persons.csv`` or a file named as the run's persons file (and likewise for units), as
        ``postproc synth1940`` writes them.
    run : RunOutput
    units : str or Path, optional
        The units file; default: the directory's units file, none for a persons file.

    Returns
    -------
    Hierarchy

    Raises
    ------
    PostprocError
        Missing files.
    ConfidentialDataError
        Records that do not fit the run's schema or geography (see :mod:`postproc.gate`).

    Examples
    --------
    The truth tabulated again from the run's input data is the one the run measured:

    >>> import tempfile
    >>> from hierarchy.synth import write_synthetic_1940
    >>> from postproc.apps.runs.config import RunConfig
    >>> from postproc.apps.runs.pipeline import run_pipeline
    >>> base = Path(tempfile.mkdtemp())
    >>> _ = write_synthetic_1940(base / "data", 500, seed=1, progress=False)
    >>> out = run_pipeline(
    ...     RunConfig.build(persons="data/persons.parquet", units="data/units.parquet",
    ...                     levels=["nation", "state"], budget=1, seed=1, base=base),
    ...     out=base / "run", progress=False, log=lambda m: None)
    >>> run = load_run(base / "run")
    >>> truth = load_truth(base / "data", run)
    >>> truth.summary()["state"], bool((truth.counts[-1] == out.truth.counts[-1]).all())
    ({'units': 49, 'persons': 500}, True)

    A persons file of any name works as well:

    >>> _ = (base / "data" / "persons.parquet").rename(base / "people_2024.parquet")
    >>> load_truth(base / "people_2024.parquet", run).summary()["state"]
    {'units': 49, 'persons': 500}
    >>> load_truth(base, run)
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: ...: no persons file (persons.parquet, persons.csv); pass the
    persons file itself, or the directory `postproc synth1940 --out` wrote
    """
    from hierarchy.io import read_microdata
    from hierarchy.tabulation import tabulate

    data = Path(data)
    persons, units = _truth_files(data, run, units)
    config = run.config
    schema = run.estimate.schema
    geography = run.estimate.geography
    unit_attribute = config.spec.unit_attribute if config is not None else "hhgq"
    if unit_attribute not in schema.names:
        units = None
    try:
        records = read_microdata(persons, schema=schema, levels=list(geography.levels),
                                 columns=getattr(config, "columns", None),
                                 values=getattr(config, "values", None), units=units,
                                 unit_attribute=unit_attribute)
        return tabulate(records.persons, schema=schema, levels=list(geography.levels),
                        units=records.units, unit_attribute=unit_attribute
                        if records.units is not None else None, geography=geography)
    except ConfidentialDataError as exc:
        raise exc.with_context(detail_prefix=f"the truth in {data} does not fit the run in "
                                             f"{run.directory}: ",
                               public_suffix=" (the truth does not fit the run)") from None
    except HierarchyError as exc:
        raise PostprocError(f"the truth in {data} does not fit the run in {run.directory}: "
                            f"{exc}") from None


def evaluate_run(directory: str | Path, data: str | Path, *, compare_all: bool = False,
                 units: str | Path | None = None, rng: Any = None,
                 show_confidential: bool = False, **options: Any) -> pd.DataFrame:
    """Evaluate a ``postproc run`` output against its confidential data.

    Parameters
    ----------
    directory : str or Path
        The run's output directory.
    data : str or Path
        The confidential data: a directory or the persons file (see :func:`load_truth`).
    compare_all : bool
        Also evaluate the raw measurements and the reference post-processors on them
        (:func:`~postproc.evaluation.evaluate.reference_results`, with the run's result in place
        of its method's).
    units : str or Path, optional
        The units file (see :func:`load_truth`).
    rng : None, int, numpy.random.Generator or Randomness
        EPL interval draws (when comparing: the reference results' draws, as
        :func:`~postproc.evaluation.evaluate.reference_results` says, and the EPL intervals' from
        its child stream 1).
    show_confidential : bool
        For a release-mode run, let the message of data that fail a check state the counts,
        rows and values it found; otherwise they go to ``directory/confidential/
        validation.txt`` and the message names the column and the rule only
        (:mod:`postproc.gate`).
    **options
        Passed to :func:`evaluate`.

    Returns
    -------
    pandas.DataFrame
        :func:`~postproc.evaluation.evaluate.evaluate`'s table: of the run's result, or with
        ``compare_all`` of every result by name, labelled with the randomness of the run's
        measurements.

    Raises
    ------
    PostprocError
        As :func:`load_run` and :func:`load_truth`; if the data are not the ones the run
        measured (checked against its ``confidential/`` fingerprint); comparing needs
        ``noisy/``.

    Examples
    --------
    >>> import tempfile
    >>> from postproc.apps.runs.demo import run_demo
    >>> out = run_demo(tempfile.mkdtemp() + "/demo", persons=5_000, progress=False,
    ...                log=lambda message: None)                    # data/ and run/
    >>> table = evaluate_run(out.directory, out.directory.parent / "data", queries=["total"],
    ...                      rng=0, epl_options={"n_boot": 0})
    >>> table.set_index("level").loc["state", ["mae", "epl"]].tolist()   # state totals invariant
    [0.0, inf]
    """
    from postproc.apps.runs.pipeline import check_data_fingerprint
    from postproc.gate import data_errors

    run = load_run(directory)
    names = {str(path): f"the truth's {kind} file"
             for kind, path in zip(("persons", "units"), _truth_files(Path(data), run, units))
             if path is not None}
    with data_errors(release=run.release, show=show_confidential,
                     directory=run.directory, names=names):
        truth = load_truth(data, run, units=units)
    if not check_data_fingerprint(directory, truth, required=False):
        why = ("a run in parts fingerprints its data part by part, not as a whole"
               if (Path(directory) / "confidential" / "parts_data_sha256.json").is_file()
               else "no confidential/ directory")
        warnings.warn(f"{directory} holds no fingerprint of its input data ({why}), so the "
                      "truth given cannot be checked to be the data the run measured",
                      stacklevel=2)
    options.setdefault("spec", getattr(run.config, "spec", None))
    if not compare_all:
        return evaluate(run.estimate, truth, rng=rng, **options)
    if run.noisy is None:
        raise PostprocError(f"{directory} has no noisy/ measurements to compare post-processors "
                            f"on")
    rnd = as_randomness(rng)
    made = reference_results(run.noisy, truth, results={run.estimate.method: run.estimate},
                             spec=options.get("spec"), rng=rnd)
    return label_table(evaluate(made, truth, rng=rnd.child(1), **options),
                       randomness_of(run.noisy))


# --------------------------------------------------------------------------------------------------
# postproc compare
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class CompareOutput:
    """What :func:`run_compare` did: the table, where it wrote it, and the mode.

    ``table`` has one row per method, level and query; ``files`` are the comparison's files
    (under ``directory/confidential/`` in release mode, where ``release`` is True).

    Examples
    --------
    Hay's least squares against the raw measurements, on 500 synthetic persons (the published
    EPL estimator, the fast one):

    >>> import tempfile
    >>> from hierarchy.synth import write_synthetic_1940
    >>> from postproc.apps.runs.config import RunConfig
    >>> base = Path(tempfile.mkdtemp())
    >>> _ = write_synthetic_1940(base / "data", 500, seed=1, progress=False)
    >>> config = RunConfig.build(persons="data/persons.parquet", units="data/units.parquet",
    ...                          levels=["nation", "state"], budget=1, seed=1, base=base)
    >>> done = run_compare(config, "hay,noisy", out=base / "compare", log=lambda m: None,
    ...                    queries=["total"], epl_method="published")
    >>> done.release, [p.name for p in done.files]
    (False, ['compare.csv', 'compare.json', 'compare_mae.png', 'compare_epl.png', 'compare.html',
    'manifest.json'])
    >>> print(done.table[["method", "level", "query", "mae"]].round(1).to_string(index=False))
    method  level query   mae
       hay nation total  27.8
       hay  state total  27.3
     noisy nation total 823.0
     noisy  state total 288.0
    >>> from matplotlib.figure import Figure
    >>> ax = done.plot(ax=Figure().subplots())           # MAE by level, one line per method
    >>> [line.get_label() for line in ax.get_lines()]
    ['hay (unconstrained)', 'noisy (unconstrained)']
    >>> "<th>state</th>" in done._repr_html_()
    True
    """

    table: pd.DataFrame
    directory: Path
    files: list[Path]
    release: bool

    def __repr__(self) -> str:
        methods = ", ".join(dict.fromkeys(self.table["method"].astype(str)))
        text = f"CompareOutput({methods}; {len(self.table)} rows; release={self.release})"
        return text if len(text) <= 200 else text[:198] + "…)"

    def _repr_html_(self) -> str:
        """Notebook display: the MAE by method and level for each query — or, in release mode,
        only a note (every number of the table is computed from the confidential data)."""
        if self.release:
            return ("<p>Comparison made in release mode: its table is confidential and is not "
                    "displayed; it was written under the output's confidential/ directory.</p>")
        shown = self.table.assign(method=self.table["method"].astype(str) + np.where(
            self.table["constrained"], "", " (unconstrained)"))
        pivot = shown.pivot_table(index=["query", "method"], columns="level", values="mae",
                                  sort=False)
        pivot = pivot[[lv for lv in dict.fromkeys(self.table["level"]) if lv in pivot.columns]]
        return ("<p>MAE (median absolute error) by level</p>"
                + pivot.to_html(float_format=format_number, na_rep="", escape=True))

    def plot(self, query: str | None = None, *, ax: Any = None,
             confidential: bool = False) -> Any:
        """The MAE by level, one line per method, on a matplotlib Axes (see
        :func:`postproc.evaluation.plots.plot_comparison`); in release mode only with
        ``confidential=True``, under a CONFIDENTIAL banner.

        Raises
        ------
        PostprocError
            In release mode without ``confidential`` (the errors are confidential).
        """
        from postproc.evaluation.plots import plot_comparison

        table = label_table(self.table.copy(), "release") if self.release else self.table
        return plot_comparison(table, query, ax=ax, confidential=confidential)


def default_directory(config: Any) -> Path:
    """``postproc compare``'s default output: the config's output directory + ``-compare``.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> default_directory(SimpleNamespace(output=Path("/x/out/e2e1940"))).name
    'e2e1940-compare'
    """
    output = Path(config.output)
    return output.with_name(output.name + "-compare")


def claim_output(directory: str | Path, made_by: str = _MADE_BY) -> Path:
    """Take ``directory`` as ``made_by``'s output: new, empty, or an earlier output of the same
    command (whose files it then replaces); another program's — the toolkit's other commands'
    included — or a directory the toolkit did not write is refused, and nothing in it touched.

    Examples
    --------
    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp()) / "cmp"
    >>> claim_output(d, "postproc compare") == d, claim_output(d, "postproc compare") == d
    (True, True)
    >>> (d / "table.csv").write_text("x")
    1
    >>> claim_output(d, "postproc nmf run")
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: ... holds the output of postproc compare, not of ...
    """
    from hierarchy.errors import HierarchyError
    from hierarchy.io.storage import MARKER, claim_directory, read_json

    directory = Path(directory)
    marker = directory / MARKER
    if marker.is_file():
        try:
            made_by_before = read_json(marker).get("made_by")
        except HierarchyError:
            made_by_before = None
        if made_by_before != made_by and any(p.name not in (MARKER, ".dapp-lock")
                                             for p in directory.iterdir()):
            raise PostprocError(f"{directory} holds the output of "
                                f"{made_by_before or 'another program'}, not of {made_by}; "
                                "choose another --out")
    try:
        return claim_directory(directory, made_by=made_by, reuse=True)
    except HierarchyError as exc:
        raise PostprocError(str(exc)) from None


def run_compare(config: Any, methods: str | Sequence[str], *, out: str | Path | None = None,
                epl_method: str = "improved", progress: bool = False,
                log: Callable[[str], None] = print, queries: Sequence[str] | None = None,
                epl_options: Mapping[str, Any] | None = None,
                show_confidential: bool = False) -> CompareOutput:
    """``postproc compare``: read the configured data once, measure once, run each method on
    the same measurements and write the comparison.

    Parameters
    ----------
    config : RunConfig
        Data, schema, geography, workload, budget, mechanism, randomness and spec. TopDown
        takes its ``[solver]`` settings, the configured method its ``[postprocess.options]``.
    methods : str or sequence of str
        ``"topdown,sampling,hay,noisy"`` or a list of registered names.
    out : str or Path, optional
        Default :func:`default_directory`. A new or empty directory, or the output of an earlier
        comparison (its files are replaced); anything else is refused.
    epl_method : {'improved', 'published'}
    progress : bool
        Progress per method on stderr.
    log : callable
        One line per step; nothing computed from the confidential data.
    queries : sequence of str, optional
        Default: ``total`` and every query of the workload.
    epl_options : mapping, optional
        Options of the EPL estimator.
    show_confidential : bool
        In release mode, let the message of data that fail a check state the counts, rows and
        values it found; otherwise they go to ``DIR/confidential/validation.txt`` and the
        message names the column or constraint and the rule only (:mod:`postproc.gate`).

    Returns
    -------
    CompareOutput

    Raises
    ------
    PostprocError
        An unknown method, an output directory that is not ours, data that break the spec, a
        method that fails.

    Examples
    --------
    >>> import tempfile
    >>> from postproc.apps.runs.demo import run_demo
    >>> from postproc.apps.runs.config import load_config
    >>> demo = run_demo(tempfile.mkdtemp() + "/demo", persons=2_000, progress=False,
    ...                 log=lambda message: None)
    >>> config = load_config(demo.directory.parent / "config.toml")
    >>> done = run_compare(config, "topdown,noisy", log=lambda m: None, queries=["total"],
    ...                    epl_method="published")
    >>> [p.name for p in done.files]
    ['compare.csv', 'compare.json', 'compare_mae.png', 'compare_epl.png', 'compare.html',
    'manifest.json']
    """
    from hierarchy.io.storage import (
        CONFIDENTIAL_DIR,
        confidential_directory,
        lock_directory,
        package_versions,
        write_json,
    )
    from hierarchy.measurement import measure
    from postproc.apps.runs import pipeline
    from postproc.gate import VALIDATION_FILE, data_errors, source_names
    from postproc.reports.page import CONFIDENTIAL, banner

    names = parse_methods(methods)
    directory = Path(out) if out is not None else default_directory(config)
    claim_output(directory)
    with lock_directory(directory, what=_MADE_BY), \
            data_errors(release=config.release, show=show_confidential, directory=directory,
                        names=source_names(config)):
        for place in (directory, directory / CONFIDENTIAL_DIR):     # our earlier outputs
            for name in (*FILES, "manifest.json", VALIDATION_FILE):
                if (place / name).is_file() and place.is_dir():
                    (place / name).unlink()
        if config.release:
            log("release mode: the comparison is written under "
                f"{directory / CONFIDENTIAL_DIR} only and not printed")
        else:
            log("SIMULATION MODE: seeded randomness, reproducible by anyone with the seed")
        truth = pipeline.load_truth(config)
        # measure checks the data against the spec before drawing any noise
        # accounted here: measured once per comparison, under the output directory's lock
        noisy = measure(truth, config.workload, config.budget, config.mechanism, config.rng,
                        publish=config.publish(), spec=config.spec, accounted_elsewhere=True)
        log(f"measured once; comparing {', '.join(names)} on the same measurements")
        table = compare_methods(noisy, truth, names, config.spec, rng=config.rng,
                                epl_method=epl_method, progress=progress, queries=queries,
                                options={m: pipeline.method_options(config, m) for m in names},
                                epl_options=epl_options)
        randomness = noisy.provenance.get("randomness", {})
        banners = ([CONFIDENTIAL] if config.release else []) + banner(randomness)
        if config.release:
            where = confidential_directory(directory, what="errors and EPL of each method "
                                                           "against the confidential data")
        else:
            where = directory
        files = write_comparison(table, where, notes=comparison_notes(names, epl_method),
                                 banners=banners)
        files.append(where / "manifest.json")
        write_json({"made_by": _MADE_BY, "methods": names,
                    "constrained": {m: constrained(m, config.spec) for m in names},
                    "epl_method": epl_method, "randomness": randomness,
                    "config": config.to_dict(), "versions": package_versions(),
                    "files": [str(p.relative_to(directory)) for p in files]},
                   where / "manifest.json")
    return CompareOutput(table, directory, files, bool(config.release))
