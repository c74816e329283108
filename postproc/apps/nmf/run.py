"""Post-process a Noisy Measurement File into a run directory (``postproc nmf run``).

:func:`run_nmf` reads the file (:func:`~postproc.apps.nmf.reader.read_nmf`), post-processes it
with a registered method — TopDown with the 2020 production options (the fit passes and
rounding passes of :mod:`hierarchy.presets.pl94`, pass tolerance 0.1) unless told otherwise —
and writes what :meth:`Result.write <postproc.result.Result.write>` writes (every level's
histograms in long form, the geography, the node statistics, a manifest naming the file read)
and ``block_geoid.parquet``, each spine block's 15-character census GEOID, so that the blocks
join to published tables. The file holds published measurements only: nothing here is
confidential, but every output says what it was computed from.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import pyarrow as pa

from hierarchy.io.storage import write_parquet
from postproc.apps.nmf.layout import block_geoid
from postproc.apps.nmf.reader import read_nmf
from postproc.apps.runs.directories import claim_output
from postproc.errors import PostprocError

__all__ = ["run_nmf", "production_options", "nmf_record", "write_block_geoids"]

#: What claims a ``postproc nmf run`` output directory.
MADE_BY = "postproc nmf run"


def production_options(levels: Sequence[str], method: str = "topdown") -> dict[str, Any]:
    """The 2020 production TopDown options on the PL 94 levels: the fit passes and the
    rounding passes of every level and the pass tolerance (BlueDown takes the rounding passes
    only: each child has one pseudo-measurement).

    Examples
    --------
    >>> opts = production_options(["nation", "state", "county", "tract", "block_group",
    ...                            "block"])
    >>> sorted(opts), len(opts["passes"]["county"])
    (['pass_tolerance', 'passes', 'round_passes'], 2)
    >>> sorted(production_options(["nation", "state", "county", "tract", "block_group",
    ...                            "block"], "bluedown"))
    ['round_passes']
    """
    from hierarchy.presets.pl94 import PRODUCTION_PASS_TOLERANCE, pl94_passes, pl94_round_passes

    rounding = {lv: pl94_round_passes(lv, levels) for lv in levels}
    if method == "bluedown":
        return {"round_passes": rounding}
    return {"passes": {lv: pl94_passes(lv, levels) for lv in levels},
            "round_passes": rounding, "pass_tolerance": PRODUCTION_PASS_TOLERANCE}


def run_nmf(root: str | Path, out: str | Path, *, method: str = "topdown",
            states: Sequence[str] | None = None,
            state_totals: str | Path | Mapping[str, int] | None = None,
            options: Mapping[str, Any] | None = None, product: str = "persons",
            workers: int | None = None, log: Callable[[str], None] = print) -> Path:
    """Read a Noisy Measurement File, post-process it and write the result to ``out``.

    Parameters
    ----------
    root, states, state_totals, product
        As for :func:`~postproc.apps.nmf.reader.read_nmf`.
    out : path
        A new (or empty) directory, or one an earlier ``postproc nmf run`` wrote; never another
        program's.
    method : str
        A registered post-processor (``postproc methods`` lists them); default TopDown.
    options : mapping, optional
        The method's options; for ``topdown`` and ``bluedown`` the production options
        (:func:`production_options`) by default.
    workers : int, optional
        TopDown's and BlueDown's node problems on this many processes (every CPU when left
        out; 1: in this process), unless ``options`` names an executor.
    log : callable
        Where the progress lines go.

    Returns
    -------
    pathlib.Path
        ``out``.

    Raises
    ------
    PostprocError
        Bad input (as :func:`read_nmf`), an unknown method, an output directory that is not
        ours.

    Examples
    --------
    >>> run_nmf("/nonexistent", "/tmp/never", state_totals={"44": 1})
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: NMF root '/nonexistent' is not a directory
    """
    import time

    from postproc.methods import available, postprocess

    if method not in available():
        raise PostprocError(f"unknown method {method!r}; registered: {sorted(available())}")
    directory = claim_output(out, MADE_BY)    # before reading: a wrong --out, at once
    t0 = time.perf_counter()
    noisy, spec = read_nmf(root, product=product, states=states, state_totals=state_totals)
    levels = noisy.levels
    log(f"read {noisy.provenance['files']:,} files of {root} ({len(noisy.provenance['pieces'])} "
        f"state pieces, {noisy.geography.n_units(levels[-1]):,} blocks) in "
        f"{time.perf_counter() - t0:.1f} s")
    if options is None and method in ("topdown", "bluedown") and product == "persons":
        options = production_options(levels, method)
    options = dict(options or {})
    if method in ("topdown", "bluedown") and workers != 1 and "executor" not in options:
        options.update(executor="process", workers=workers)
    t1 = time.perf_counter()
    result = postprocess(noisy, method, spec, **options)
    log(f"{method} in {time.perf_counter() - t1:.1f} s")
    result.write(directory, extra_manifest={"nmf": nmf_record(noisy.provenance)})
    write_block_geoids(noisy.geography.geocodes[-1], directory)
    log(f"wrote {directory}")
    return directory


def nmf_record(provenance: Mapping[str, Any]) -> dict[str, Any]:
    """What an output's manifest says of the file it was computed from (``"nmf"``): from a
    read hierarchy's provenance, the file, product, pieces and states read, files and bytes,
    and the state totals used.

    Examples
    --------
    >>> nmf_record({"source": "nmf", "root": "nmf", "pieces": ["044"], "randomness": {}})
    {'source': 'nmf', 'root': 'nmf', 'pieces': ['044']}
    """
    return {k: provenance[k] for k in ("source", "product", "root", "pieces", "states",
                                       "files", "bytes", "state_totals") if k in provenance}


def write_block_geoids(blocks: Sequence[Any], directory: Path) -> Path:
    """``directory/block_geoid.parquet``: each spine block and its 15-character census GEOID
    (:func:`~postproc.apps.nmf.layout.block_geoid`), so the blocks join to published tables.

    Examples
    --------
    >>> import tempfile, pyarrow.parquet as pq
    >>> path = write_block_geoids(["0440000700491024400701070233001"], Path(tempfile.mkdtemp()))
    >>> pq.read_table(path).to_pydict()["geoid"]
    ['440070107023001']
    """
    blocks = [str(b) for b in blocks]
    return write_parquet(pa.table({"block": pa.array(blocks),
                                   "geoid": pa.array([block_geoid(b) for b in blocks])}),
                         Path(directory) / "block_geoid.parquet")

