"""Compare post-processors on a synthetic Noisy Measurement File against the truth it keeps
(``postproc nmf compare``).

:func:`compare_nmf` reads the file once (:func:`~postproc.apps.nmf.reader.read_nmf`), runs each
named method on the same measurements — TopDown and BlueDown with the 2020 production options —
and evaluates each against the truth ``postproc synth2020 --nmf`` writes beside the file
(``truth/persons.parquet``, on the spine geography: :func:`nmf_truth`), writing the table, its
figures and its page as ``postproc compare`` does (:func:`~postproc.evaluation.compare.
write_comparison`). The published file has no truth beside it; comparing methods on it against
each other or against published tables is not offered yet (``docs/nmf.md``).
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
from postproc.apps.nmf.reader import read_nmf
from postproc.apps.nmf.run import nmf_record, production_options
from postproc.apps.runs.directories import claim_output
from postproc.errors import PostprocError

__all__ = ["nmf_truth", "compare_nmf"]

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
    path = Path(root) / "truth" / "persons.parquet"
    if not path.is_file():
        raise PostprocError(f"{root} has no truth/persons.parquet: a comparison against the "
                            "truth needs a synthetic file (postproc synth2020 --nmf), which "
                            "keeps it; the published file has none")
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
                log: Callable[[str], None] = print) -> list[Path]:
    """Run each of ``methods`` on a synthetic file's measurements and compare them against its
    truth; write the comparison into ``out``.

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
    directory = claim_output(out, MADE_BY)
    noisy, spec = read_nmf(root, states=states, state_totals=state_totals)
    truth = nmf_truth(root, noisy)
    log(f"read {root}: {len(noisy.provenance['pieces'])} state pieces; comparing "
        f"{', '.join(names)} against the truth beside it")
    options: dict[str, Any] = {m: production_options(noisy.levels, m) for m in names
                               if m in ("topdown", "bluedown")}
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
