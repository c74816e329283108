"""The input data of a run (:mod:`postproc.apps.runs.pipeline`): read, validated and tabulated,
checked against the spec, and fingerprinted — the fingerprint, kept under ``confidential/``,
is what a resumed run and ``postproc evaluate`` check their data against.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np

from hierarchy.errors import ConfidentialDataError, HierarchyError
from hierarchy.histograms import Hierarchy
from hierarchy.io import check_tabulated_units, read_microdata
from hierarchy.io.storage import CONFIDENTIAL_DIR, confidential_directory, read_json, write_json
from hierarchy.tabulation import tabulate
from invariants.compile import compile_spec
from postproc.apps.runs.config import RunConfig
from postproc.errors import PostprocError

__all__ = ["load_truth", "data_fingerprint", "check_data_fingerprint",
           "check_data_against_spec"]

_FINGERPRINT_FILE = "data_fingerprint.json"


def load_truth(config: RunConfig) -> Hierarchy:
    """Read, validate and tabulate the configured microdata.

    Parameters
    ----------
    config : RunConfig
        Its ``[data]`` files, schema, levels and the spec's unit attribute.

    Returns
    -------
    Hierarchy
        The confidential truth, with the units table when ``config.units`` is set.

    Raises
    ------
    ConfidentialDataError
        A file with no records, missing columns, values outside the schema, records outside
        the blocks file's geography (the full message names the rows and values; see
        :mod:`postproc.gate` for what is shown in release mode).
    HierarchyError
        The blocks file cannot be read.

    Examples
    --------
    >>> import tempfile
    >>> from hierarchy.synth import write_synthetic_1940
    >>> base = Path(tempfile.mkdtemp())
    >>> _ = write_synthetic_1940(base, 500, seed=1, progress=False)
    >>> config = RunConfig.build(persons="persons.parquet", units="units.parquet",
    ...                          levels=["nation", "state"], budget=1, seed=1, base=base)
    >>> truth = load_truth(config)
    >>> truth.summary()
    {'nation': {'units': 1, 'persons': 500}, 'state': {'units': 49, 'persons': 500}}
    >>> truth.units is not None
    True
    """
    data = read_microdata(config.persons, schema=config.schema, levels=config.levels,
                          columns=config.columns, values=config.values, units=config.units,
                          unit_attribute=config.spec.unit_attribute, check_units=False)
    geography = config.read_geography()      # every block of [data] blocks, empty ones too
    try:
        truth = tabulate(data.persons, schema=config.schema, levels=config.levels,
                         units=data.units, geography=geography,
                         unit_attribute=config.spec.unit_attribute if data.units is not None
                         else None)
    except HierarchyError as exc:
        if geography is None:
            raise
        note = "every person's and unit's geocodes must be listed there"
        if isinstance(exc, ConfidentialDataError):
            raise exc.with_context(
                detail_suffix=f" (the geography comes from the blocks file {config.blocks}: "
                              f"{note})",
                public_suffix=f" (the geography comes from [data] blocks: {note})") from None
        raise HierarchyError(f"{exc} (the geography comes from the blocks file "
                             f"{config.blocks}: {note})") from None
    check_tabulated_units(truth, data)
    return truth


def check_data_against_spec(config: RunConfig, truth: Hierarchy, stats: Any = None,
                            compiled: Any = None) -> None:
    """Refuse data that break the spec (no release could satisfy it honestly):
    :func:`invariants.compile.check_data` on the configured spec.

    The full message names each broken constraint, how many units break it and one example
    unit; its public part (shown in release mode) names the constraints only.

    Parameters
    ----------
    config : RunConfig
    truth : Hierarchy
        The tabulated data (with units when the spec has units invariants).
    stats, compiled : optional
        The published statistics and compiled spec, when the caller has them already.

    Raises
    ------
    ConfidentialDataError
        Some unit's data contradict a constraint of the spec.

    Examples
    --------
    The E2E spec makes college dormitories (``hhgq = 5``) a structural zero; one student
    breaks it:

    >>> import pyarrow as pa
    >>> from hierarchy.synth import synthesize_1940
    >>> config = RunConfig.build(persons="persons.parquet", levels=["nation", "state"],
    ...                          budget=1, seed=1)
    >>> data = synthesize_1940(500, seed=1)
    >>> def tabulated(persons):
    ...     return tabulate(persons, schema=config.schema, levels=["nation", "state"],
    ...                     units=data.units, unit_attribute="hhgq")
    >>> check_data_against_spec(config, tabulated(data.persons))      # fine: returns None
    >>> student = data.persons.slice(0, 1)
    >>> student = student.set_column(student.schema.get_field_index("hhgq"), "hhgq",
    ...                              pa.array([5], pa.int8()))
    >>> check_data_against_spec(config, tabulated(pa.concat_tables([data.persons, student])))
    Traceback (most recent call last):
    ...
    hierarchy.errors.ConfidentialDataError: the confidential data break the spec, so no release
    could satisfy it (a structural zero or bound the data contradict):
      structural_zeros & hhgq_total_lb (implied by state) & hhgq_total_ub (implied by state) &
        structural_zeros (implied by state): 1 of 1 nation units break it, e.g. '0'
      hhgq_total_lb & hhgq_total_ub & structural_zeros: 1 of 49 state units break it, e.g. '01'
    fix the spec (or the data) and rerun
    """
    from invariants.compile import check_data

    if compiled is None:
        stats = config.published(truth) if stats is None else stats
        compiled = compile_spec(config.spec, config.schema, truth.geography, stats)
    check_data(config.spec, truth, compiled=compiled)


def data_fingerprint(truth: Hierarchy) -> dict[str, str | None]:
    """SHA-256 digests of the tabulated confidential data: ``persons`` (schema, geography and
    bottom-level histograms) and ``units`` (the units table's bottom level, or None).

    Confidential (a hash of the data lets anyone confirm a guess of it): it is kept under
    ``confidential/`` only.

    Parameters
    ----------
    truth : Hierarchy

    Returns
    -------
    dict
        ``{"persons": hex digest, "units": hex digest or None}``.

    Examples
    --------
    >>> from hierarchy.schema import E2E_1940
    >>> from hierarchy.synth import synthesize_1940
    >>> def truth(seed):
    ...     return tabulate(synthesize_1940(500, seed=seed).persons, schema=E2E_1940,
    ...                     levels=["nation", "state"])
    >>> fingerprint = data_fingerprint(truth(1))
    >>> len(fingerprint["persons"]), fingerprint["units"]
    (64, None)
    >>> data_fingerprint(truth(1)) == fingerprint, data_fingerprint(truth(2)) == fingerprint
    (True, False)
    """
    h = hashlib.sha256()
    h.update(json.dumps(truth.schema.to_dict(), sort_keys=True, default=str).encode())
    geo = truth.geography
    for li, lv in enumerate(geo.levels):
        h.update(lv.encode() + b"\0")
        h.update("\0".join(map(str, geo.geocodes[li])).encode())
        h.update(np.ascontiguousarray(geo.parents[li], dtype=np.int64).tobytes())
    h.update(np.ascontiguousarray(truth.counts[-1], dtype=np.int64).tobytes())
    units = None
    if truth.units is not None:
        units = hashlib.sha256(np.ascontiguousarray(truth.units[-1], dtype=np.int64).tobytes()
                               ).hexdigest()
    return {"persons": h.hexdigest(), "units": units}


def _write_fingerprint(directory: Path, fingerprint: dict[str, str | None]) -> None:
    conf = confidential_directory(directory, what="the input data's fingerprint, error tables")
    write_json({"data_sha256": fingerprint}, conf / _FINGERPRINT_FILE)


def check_data_fingerprint(directory: str | Path, truth: Hierarchy, *, required: bool = True
                           ) -> bool:
    """Check that ``truth`` is the data the run in ``directory`` measured.

    The persons must match, and the units (exactly with ``required``, as a resumed run needs;
    otherwise when both sides have them). Returns False if the run has no fingerprint (e.g. a
    published copy without ``confidential/``) and ``required`` is off.

    Parameters
    ----------
    directory : str or Path
        A ``postproc run`` output directory.
    truth : Hierarchy
        The data to check.
    required : bool
        Whether a missing fingerprint is an error.

    Returns
    -------
    bool
        True if the fingerprint matches; False if there is none and it is not required.

    Raises
    ------
    PostprocError
        If the fingerprints differ (or it is missing and ``required``).

    Examples
    --------
    Two data sets, a run on the first (Hay's least squares, which needs no spec):

    >>> import tempfile
    >>> from dataclasses import replace
    >>> from hierarchy.synth import write_synthetic_1940
    >>> from postproc.apps.runs.pipeline import run_pipeline
    >>> base = Path(tempfile.mkdtemp())
    >>> for seed in (1, 2):
    ...     _ = write_synthetic_1940(base / f"data{seed}", 500, seed=seed, progress=False)
    >>> config = RunConfig.build(persons="data1/persons.parquet", levels=["nation", "state"],
    ...                          budget=1, seed=1, spec=None, method="hay", base=base)
    >>> out = run_pipeline(config, out=base / "run", progress=False, log=lambda m: None)
    >>> check_data_fingerprint(base / "run", out.truth)
    True
    >>> check_data_fingerprint(base / "data1", out.truth, required=False)   # not a run
    False
    >>> other = load_truth(replace(config, persons=base / "data2" / "persons.parquet"))
    >>> check_data_fingerprint(base / "run", other)
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: the input data differ from the data the run in .../run measured
    (the persons fingerprint differs): the input changed since. Use the original data, or start a
    new run in another --out (a new run measures the new data)
    """
    path = Path(directory) / CONFIDENTIAL_DIR / _FINGERPRINT_FILE
    if not path.exists():
        if required:
            raise PostprocError(f"{directory} has no {CONFIDENTIAL_DIR}/{_FINGERPRINT_FILE}, so "
                                "the input data cannot be checked against the ones measured; "
                                "start a new run in another --out")
        return False
    recorded = read_json(path).get("data_sha256") or {}
    now = data_fingerprint(truth)
    # a resumed run needs exactly its data; an evaluation may tabulate without the units
    changed = [k for k in ("persons", "units") if recorded.get(k) != now[k]
               and (required or k == "persons"
                    or (recorded.get(k) is not None and now[k] is not None))]
    if changed:
        raise PostprocError(f"the input data differ from the data the run in {directory} "
                            f"measured (the {' and '.join(changed)} fingerprint differs): the "
                            "input changed since. Use the original data, or start a new run in "
                            "another --out (a new run measures the new data)")
    return True
