"""Compare post-processors on a synthetic Noisy Measurement File against the truth it keeps
(``postproc nmf compare``).

:func:`compare_nmf` reads the file once (:func:`~postproc.apps.nmf.reader.read_nmf`), runs each
named method on the same measurements — TopDown and BlueDown with the 2020 production options —
and evaluates each against the truth ``postproc synth2020 --nmf`` writes beside the file
(``truth/persons.parquet``, on the spine geography: :func:`nmf_truth`), writing the table, its
figures and its page as ``postproc compare`` does (:func:`~postproc.evaluation.compare.
write_comparison`). The published file has no truth beside it: with ``published=`` (a CSV of
published totals by census GEOID) each method is compared with the published counts instead
(:mod:`postproc.apps.nmf.published`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pyarrow.parquet as pq

from hierarchy.errors import HierarchyError
from hierarchy.histograms import Hierarchy
from hierarchy.io.storage import package_versions, write_json
from hierarchy.noisy import NoisyHierarchy
from postproc.apps.nmf.layout import AXES
from postproc.apps.nmf.published import (
    PublishedUnits,
    _block_totals,
    _run_blocks,
    published_errors,
    published_variables,
    read_published,
    run_published_sums,
)
from postproc.apps.nmf.reader import read_nmf
from postproc.apps.nmf.run import nmf_record, production_options
from postproc.apps.nmf.spine import _truth_path
from postproc.apps.runs.directories import claim_output
from postproc.errors import PostprocError

__all__ = ["nmf_truth", "compare_nmf", "compare_runs"]

#: What claims a ``postproc nmf compare`` output directory.
MADE_BY = "postproc nmf compare"


def nmf_truth(root: str | Path, noisy: NoisyHierarchy) -> Hierarchy:
    """The truth a synthetic file keeps beside it, tabulated on the reader's geography (every
    spine block of the pieces read, empty ones included).

    Raises
    ------
    PostprocError
        No ``truth/persons.parquet`` beside the file (the published file has none), or a
        person in a block the file does not have.

    Examples
    --------
    >>> nmf_truth("/nonexistent", None)
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: /nonexistent has no truth/persons.parquet: a comparison ...
    """
    path = _truth_path(root)
    axes = AXES["persons"]
    table = pq.read_table(path, columns=["block", *axes])
    geo, schema = noisy.geography, noisy.schema
    blocks = table.column("block").to_numpy(zero_copy_only=False).astype(str)
    keep = np.isin(np.array([b[:3] for b in blocks]), np.asarray(geo.geocodes[1], dtype=str))
    bottom_level = geo.levels[-1]
    try:
        index = geo.index_of(bottom_level, blocks[keep])
    except HierarchyError as exc:   # a block the file does not have: the files disagree
        raise PostprocError(f"{path}: {exc}") from None
    cells = np.ravel_multi_index(tuple(table.column(a).to_numpy()[keep].astype(np.int64)
                                       for a in axes), schema.shape)
    n = geo.n_units(bottom_level)
    bottom = np.bincount(index * schema.size + cells, minlength=n * schema.size).reshape(
        n, schema.size).astype(np.int64)
    counts = tuple(geo.aggregate(bottom, geo.depth - 1, li) for li in range(geo.depth))
    return Hierarchy(schema, geo, counts)


def compare_nmf(root: str | Path, methods: str | Sequence[str], out: str | Path, *,
                states: Sequence[str] | None = None,
                state_totals: str | Path | Mapping[str, int] | None = None, seed: int = 0,
                queries: Sequence[str] | None = None, epl_method: str = "improved",
                published: str | Path | None = None,
                log: Callable[[str], None] = print) -> list[Path]:
    """Run each of ``methods`` on a synthetic file's measurements and compare them against its
    truth — or, with ``published``, any file's against published totals; write the comparison
    into ``out``.

    Parameters
    ----------
    root, states, state_totals
        As for :func:`~postproc.apps.nmf.reader.read_nmf`.
    methods : str or sequence of str
        Registered post-processors (``"topdown,gls,noisy"``).
    out : path
        A new or empty directory, or an earlier ``postproc nmf compare``'s.
    seed : int
        The randomized methods' draws and the EPL intervals' (the file's noise is a
        simulation's already).
    queries, epl_method
        As for :func:`~postproc.evaluation.compare.compare_methods`.
    published : path, optional
        A CSV ``geoid,total`` of published total populations by census GEOID
        (:func:`~postproc.apps.nmf.published.read_published`): each method's blocks added up
        to those units and compared (``published.csv``, ``published.png``); no truth needed.

    Returns
    -------
    list of Path
        The files written.

    Examples
    --------
    >>> compare_nmf("/nonexistent", "topdown", "/tmp/never", state_totals={"44": 1})
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: NMF root '/nonexistent' is not a directory
    """
    from postproc.evaluation.compare import (
        compare_methods,
        comparison_notes,
        parse_methods,
        write_comparison,
    )
    from postproc.reports.page import banner

    names = parse_methods(methods)
    wanted = None if published is None else read_published(published)     # before any work
    directory = claim_output(out, MADE_BY)
    noisy, spec = read_nmf(root, states=states, state_totals=state_totals)
    options: dict[str, Any] = {m: production_options(noisy.levels, m) for m in names
                               if m in ("topdown", "bluedown")}
    if wanted is not None:
        return _against_published(noisy, spec, names, options, wanted, directory, seed,
                                  published, log)
    truth = nmf_truth(root, noisy)
    log(f"read {root}: {len(noisy.provenance['pieces'])} state pieces; comparing "
        f"{', '.join(names)} against the truth beside it")
    table = compare_methods(noisy, truth, names, spec, rng=seed, epl_method=epl_method,
                            queries=queries, options=options)
    randomness = noisy.provenance.get("randomness", {})
    files = write_comparison(table, directory, notes=comparison_notes(names, epl_method),
                             banners=banner(randomness))
    write_json({"made_by": MADE_BY, "methods": names, "nmf": nmf_record(noisy.provenance),
        "randomness": randomness, "seed": seed, "epl_method": epl_method,
        "versions": package_versions(),
        "files": [str(p.relative_to(directory)) for p in files]}, directory / "manifest.json")
    log(f"wrote {directory}")
    return files + [directory / "manifest.json"]


def _against_published(noisy: NoisyHierarchy, spec: Any, names: Sequence[str],
                       options: Mapping[str, Mapping[str, Any]], wanted: Any, directory: Path,
                       seed: int, source: str | Path, log: Callable[[str], None]) -> list[Path]:
    """:func:`compare_nmf` with ``published``: each method run once (``options``: by method),
    its block totals added up to the published units; the table, a figure and the manifest."""
    from postproc.methods import postprocess
    from postproc.methods.registry import method_spec

    log(f"comparing {', '.join(names)} with {len(wanted):,} published totals "
        f"({', '.join(sorted(set(wanted['level'])))})")
    whole = any(v not in ("total", "P1_001N") for v in published_variables(wanted))
    values = {}
    for name in names:
        result = postprocess(noisy, name, method_spec(name, spec), rng=seed,
                             **options.get(name, {}))
        bottom = np.asarray(result.histograms[-1])
        values[name] = bottom if whole else bottom.sum(axis=1)
        log(f"{name}: done")
    table = published_errors(noisy.geography.geocodes[-1], values, wanted)
    randomness = noisy.provenance.get("randomness", {})
    return _write_published(table, directory, randomness, {
        "methods": list(names), "nmf": nmf_record(noisy.provenance), "published": str(source),
        "seed": seed}, log)


def compare_runs(runs: Mapping[str, str | Path], published: str | Path | None,
                 out: str | Path, *, truth: str | Path | None = None,
                 log: Callable[[str], None] = print) -> list[Path]:
    """Compare finished run directories (``postproc nmf run``, e.g. the nation streamed) with
    published totals, or with the truth a synthetic file keeps, or both: each run's block
    totals, read a batch at a time, added up to the published census units
    (:mod:`postproc.apps.nmf.published`: ``published.csv``, ``published.png``) and up every
    level of the spine against the truth (:mod:`postproc.apps.nmf.spine`: ``truth.csv``,
    ``truth.png``).

    Parameters
    ----------
    runs : mapping name → directory
        ``{"topdown": "us-topdown", ...}``; every run of the same file (the same blocks).
    published : path or None
        A CSV ``geoid,total`` (:func:`~postproc.apps.nmf.published.read_published`).
    out : path
        A new or empty directory, or an earlier ``postproc nmf compare``'s.
    truth : path, optional
        The synthetic file the runs read (its ``truth/`` beside it).

    Examples
    --------
    >>> compare_runs({"topdown": "/nonexistent"}, "/nonexistent.csv", "/tmp/never")
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: published counts file '/nonexistent.csv' does not exist; ...
    """
    import json

    import pandas as pd

    from postproc.apps.nmf.spine import spine_errors, spine_parents, truth_block_totals

    if published is None and truth is None:
        raise PostprocError("compare runs with what: give published counts or the synthetic "
                            "file whose truth they are compared with")
    wanted = read_published(published) if published is not None else None
    if truth is not None:
        _truth_path(truth)                  # before anything is read: a file without truth
    if not runs:
        raise PostprocError("no run directories to compare: give NAME=DIR pairs")
    directory = claim_output(out, MADE_BY)
    totals, blocks, randomness, sources = {}, None, {}, {}
    for name, run in runs.items():
        blocks_file, index = _run_blocks(run)
        these = index.to_numpy()
        if truth is not None:       # the published counts are added up in their own pass
            totals[name] = _block_totals(blocks_file, index)
        if blocks is not None and not np.array_equal(these, blocks):
            raise PostprocError(f"{run} has other blocks than {sources[next(iter(sources))]}: "
                                "compare runs of the same file and states")
        blocks, sources[name] = these, str(run)
        try:
            manifest = json.loads((Path(run) / "manifest.json").read_text())
        except (OSError, ValueError):
            manifest = {}
        randomness = randomness or dict(manifest.get("randomness") or {})
        persons = f", {totals[name].sum():,.0f} persons" if name in totals else ""
        log(f"{name}: {len(these):,} blocks{persons} from {run}")
    record: dict[str, Any] = {"runs": sources}
    written: list[Path] = []
    if truth is not None:
        true = truth_block_totals(truth, blocks)
        levels, parents = spine_parents(pd.read_parquet(
            Path(next(iter(sources.values()))) / "geography.parquet",
            columns=["level", "geocode", "parent"]))
        table = spine_errors(levels, parents, totals, true)
        record["truth"] = str(truth)
        written += _write_table(table, directory, randomness, "truth", "the truth", log)
    if wanted is not None:
        units, variables = PublishedUnits(blocks, wanted), published_variables(wanted)
        rows = []
        for name, run in sources.items():
            rows += units.errors(name, run_published_sums(run, units, variables), variables)
        table = pd.DataFrame(rows)
        record["published"] = str(published)
        written += _write_table(table, directory, randomness, "published",
                                "the published counts", log)
    manifest = directory / "manifest.json"
    write_json({"made_by": MADE_BY, **record, "randomness": dict(randomness),
                "versions": package_versions(), "files": [p.name for p in written]}, manifest)
    log(f"wrote {directory}")
    return [*written, manifest]


def _write_published(table: Any, directory: Path, randomness: Mapping[str, Any],
                     record: Mapping[str, Any], log: Callable[[str], None]) -> list[Path]:
    """``published.csv`` (each row labelled with the file's randomness), ``published.png`` and
    the manifest."""
    written = _write_table(table, directory, randomness, "published", "the published counts",
                           log)
    manifest = directory / "manifest.json"
    write_json({"made_by": MADE_BY, **record, "randomness": dict(randomness),
                "versions": package_versions(), "files": [p.name for p in written]},
               manifest)
    log(f"wrote {directory}")
    return [*written, manifest]


def _write_table(table: Any, directory: Path, randomness: Mapping[str, Any], name: str,
                 against: str, log: Callable[[str], None]) -> list[Path]:
    """``<name>.csv`` (each row labelled with the file's randomness) and ``<name>.png``."""
    from hierarchy.io.storage import atomic_path

    table.insert(0, "randomness", randomness.get("label", ""))
    csv, figure = directory / f"{name}.csv", directory / f"{name}.png"
    with atomic_path(csv) as tmp:
        table.to_csv(tmp, index=False)
    fig = _published_figure(table, randomness.get("label", ""), against)
    with atomic_path(figure) as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    log(f"{name}: {len(table)} rows against {against}")
    return [csv, figure]


def _published_figure(table: Any, label: str, against: str = "the published counts") -> Any:
    """Mean absolute error of the total population (or the first variable compared) against
    ``against``, by level and method; with other variables, a second panel: the mean over
    each table's variables. ``label``: the file's randomness label, printed under the plot."""
    from matplotlib.figure import Figure  # no pyplot: nothing shown, no backend set

    levels = [lv for lv in ("nation", "state", "county", "tract", "block_group", "block")
              if lv in set(table["level"])]
    variables = list(dict.fromkeys(table["variable"])) if "variable" in table else []
    first = next((v for v in variables if v in ("total", "P1_001N")),
                 variables[0] if variables else None)
    tables = sorted({v.split("_")[0] for v in variables if v not in ("total", first)})
    fig = Figure(figsize=(7 + 4 * bool(tables), 4))
    axes = fig.subplots(1, 1 + bool(tables), squeeze=False)[0]
    methods = list(dict.fromkeys(table["method"]))
    width = 0.8 / max(1, len(methods))
    x = np.arange(len(levels))
    rows = table if first is None else table[table["variable"] == first]
    units = rows.drop_duplicates("level").set_index("level")["units"]
    for i, method in enumerate(methods):
        mine = rows[rows["method"] == method].set_index("level").reindex(levels)
        axes[0].bar(x + i * width, mine["mean_abs"], width, label=method)
    what = "Total population" if first in (None, "total", "P1_001N") else first
    mark = "published" if "published" in against else "truth"
    axes[0].set_title(f"{what} against {against}")
    axes[0].set_ylabel(f"mean |method − {mark}| (persons)")
    if tables:
        ax = axes[1]
        for i, method in enumerate(methods):
            mine = table[table["method"] == method]
            for t, style in zip(tables, ("o-", "s--", "^-.", "v:", "D-")):
                means = [mine[mine["variable"].str.startswith(t + "_")
                              & (mine["level"] == lv)]["mean_abs"].mean() for lv in levels]
                if np.isfinite(means).any():      # the GLS's runs: the total only
                    ax.plot(x, means, style, color=f"C{i}", label=f"{method} {t}")
        ax.set_xticks(x)
        ax.set_xticklabels(levels)
        ax.set_title("Mean over each table's variables")
        ax.set_ylabel(f"mean |method − {mark}| (persons)")
        ax.legend(fontsize=7)
    axes[0].set_xticks(x + width * (len(methods) - 1) / 2)
    axes[0].set_xticklabels([f"{lv}\n({int(units[lv]):,} units)" for lv in levels])
    axes[0].legend()
    fig.tight_layout(rect=(0, 0.06 if label else 0, 1, 1))
    if label:
        fig.text(0.01, 0.01, label, fontsize=6.5, color="firebrick")
    return fig
