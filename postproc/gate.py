"""The release gate: what a message or a table computed from the confidential data may show,
and where, by randomness mode (``docs/release.md``).

**Messages.**
The library raises :class:`~hierarchy.errors.ConfidentialDataError` when the confidential data
fail a check (a value outside the schema, a person without a unit, a structural zero the data
contradict, …): its full message states the file, counts, row numbers and example values; its
public part names only the column or constraint, the rule it breaks and the fix. The commands
that read confidential data (``postproc run``, ``validate``, ``compare``, ``evaluate``,
``safetab``) pass their work through :func:`data_errors`, the one place that decides what is
shown (``docs/release.md``):

* **simulation mode**, or ``show=True`` (``--show-confidential``): the full message;
* **release mode**: the public message, the file named by the configuration key that points to it
  (``[data] persons``), never by its path; the full message goes to
  ``DIR/confidential/validation.txt`` when the command has an output directory it owns, and
  otherwise the message says to rerun with ``--show-confidential`` to see it.

**Tables.** Every table the toolkit computes against the truth (:func:`~postproc.evaluate`,
``compare``, ``compare_postprocessors``, ``compare_methods``, the run's error table) carries the
randomness label of the measurements it evaluates in ``table.attrs["randomness"]``
(:func:`label_table`; pandas keeps ``attrs`` through selections, ``assign``, ``round`` and
concatenations of tables with the same label). Every writer and plotter of such tables asks
:func:`table_gate` first:

* a **release**-mode table is refused outside a ``confidential/`` folder unless
  ``confidential=True`` is passed, and is then written or drawn under a CONFIDENTIAL banner;
* a **simulation** table is written as it is, with its label (not safe for release);
* a table with **no label** (a DataFrame of one's own, or a concatenation of tables with
  different labels) may be anything, so it is treated as a release-mode table: label it
  (``label_table(table, "simulation")``) or pass ``confidential=True``.

A written table carries its label in a ``randomness`` column (CSV, JSON records): its value
starts with the mode (``release: CONFIDENTIAL - …``, ``simulation: NOT SAFE FOR RELEASE …``),
so a table read back with ``pandas.read_csv`` knows its mode again (:func:`table_mode`).

Examples
--------
>>> import tempfile
>>> from pathlib import Path
>>> from hierarchy.errors import ConfidentialDataError
>>> error = ConfidentialDataError(
...     "/secret/p.parquet: column 'age': 3 value(s) outside 0..1, e.g. 7 at rows 4, 8, 9",
...     public="column 'age' holds values outside 0..1", source="/secret/p.parquet",
...     role="persons")
>>> names = {"/secret/p.parquet": "[data] persons"}
>>> out = Path(tempfile.mkdtemp())
>>> with data_errors(release=True, directory=out, names=names):
...     raise error
Traceback (most recent call last):
...
postproc.errors.PostprocError: [data] persons: column 'age' holds values outside 0..1 (the details,
computed from the confidential data, are in .../confidential/validation.txt: never publish them)
>>> print((out / "confidential" / "validation.txt").read_text().splitlines()[-1])
/secret/p.parquet: column 'age': 3 value(s) outside 0..1, e.g. 7 at rows 4, 8, 9
>>> with data_errors(release=True, names=names):          # no output directory
...     raise error
Traceback (most recent call last):
...
postproc.errors.PostprocError: [data] persons: column 'age' holds values outside 0..1 (the details
are withheld in release mode: they are computed from the confidential data; rerun with
--show-confidential to see them)
>>> with data_errors(release=False):                       # a simulation: everything
...     raise error
Traceback (most recent call last):
...
postproc.errors.ConfidentialInputError: /secret/p.parquet: column 'age': 3 value(s) outside 0..1,
e.g. 7 at rows 4, 8, 9
"""

from __future__ import annotations

from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator, Mapping

from hierarchy.errors import ConfidentialDataError
from postproc.errors import ConfidentialInputError, PostprocError

__all__ = ["data_errors", "data_error_message", "source_names", "VALIDATION_FILE",
           "SHOW_CONFIDENTIAL", "LABEL", "CONFIDENTIAL_BANNER", "randomness_of", "label_table",
           "combined_randomness", "table_mode", "table_gate", "labelled", "in_confidential_folder",
           "write_csv", "banner_figure", "printed_banner"]

#: Where the full message of a refused release-mode input goes, under ``DIR/confidential/``.
VALIDATION_FILE = "validation.txt"
#: The command-line option that shows the full message in release mode.
SHOW_CONFIDENTIAL = "--show-confidential"


def source_names(config: Any) -> dict[str, str]:
    """``{path: configuration key}`` of a configuration's ``[data]`` files, to name them in
    release-mode messages (``[data] persons`` instead of the path).

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> source_names(SimpleNamespace(persons=Path("/d/p.parquet"), units=None))
    {'/d/p.parquet': '[data] persons'}
    """
    return {str(path): f"[data] {key}" for key in ("persons", "units", "blocks")
            if (path := getattr(config, key, None)) is not None}


def data_error_message(error: ConfidentialDataError, *, release: bool, show: bool = False,
                       directory: str | Path | None = None,
                       names: Mapping[str, str] | None = None) -> str:
    """What may be said of ``error`` (see the module); writes the full message to
    ``directory/confidential/validation.txt`` when it is withheld and ``directory`` is given.

    Parameters
    ----------
    error : ConfidentialDataError
    release : bool
        Whether the work is in release mode.
    show : bool
        Show the full message in release mode too (``--show-confidential``).
    directory : path, optional
        An output directory the command owns (created and locked by it).
    names : mapping, optional
        Source (path as given) → the configuration key that names it.

    Returns
    -------
    str

    Examples
    --------
    >>> error = ConfidentialDataError("/d/p.csv: column 'age': 1 value(s) outside 0..1, e.g. 5",
    ...                               public="column 'age' holds values outside 0..1",
    ...                               source="/d/p.csv", role="persons")
    >>> data_error_message(error, release=False)                   # a simulation: all of it
    "/d/p.csv: column 'age': 1 value(s) outside 0..1, e.g. 5"
    >>> data_error_message(error, release=True, show=True) == error.detail
    True
    >>> data_error_message(error, release=True).split(" (")[0]    # no directory: nothing kept
    "the persons data: column 'age' holds values outside 0..1"
    """
    if not release or show:
        return error.detail
    public = error.public_message(dict(names or {}))
    if not error.has_detail:
        return public
    if directory is None:
        return (f"{public} (the details are withheld in release mode: they are computed from "
                f"the confidential data; rerun with {SHOW_CONFIDENTIAL} to see them)")
    from hierarchy.io.storage import atomic_path, confidential_directory

    where = confidential_directory(directory, what="the details of a refused input (counts, "
                                                   "rows and values of the confidential data)")
    path = where / VALIDATION_FILE
    stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
    with atomic_path(path) as tmp:
        tmp.write_text(f"CONFIDENTIAL - computed from the confidential input data. DO NOT "
                       f"PUBLISH.\n{stamp}: the input was refused:\n{error.detail}\n",
                       encoding="utf-8")
    return (f"{public} (the details, computed from the confidential data, are in {path}: "
            f"never publish them)")


@contextmanager
def data_errors(*, release: bool, show: bool = False, directory: str | Path | None = None,
                names: Mapping[str, str] | None = None) -> Iterator[None]:
    """Raise a :class:`~hierarchy.errors.ConfidentialDataError` of the block as a
    :class:`PostprocError`: in simulation mode (or with ``show``) a
    :class:`~postproc.errors.ConfidentialInputError` with the full message (and both parts),
    in release mode one whose message is :func:`data_error_message`'s. When the block ends
    without one, the details an earlier refusal wrote to ``directory`` are removed (they
    describe an input that has since been fixed).

    Parameters
    ----------
    release, show, directory, names
        As :func:`data_error_message`.

    Examples
    --------
    >>> with data_errors(release=True, names={"/d/p.csv": "[data] persons"}):
    ...     raise ConfidentialDataError("/d/p.csv: the file does not exist",
    ...                                 public="the file does not exist", source="/d/p.csv")
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: [data] persons: the file does not exist
    """
    try:
        yield
        if directory is not None:       # the input passed: an earlier refusal's details are stale
            from hierarchy.io.storage import CONFIDENTIAL_DIR

            (Path(directory) / CONFIDENTIAL_DIR / VALIDATION_FILE).unlink(missing_ok=True)
    except ConfidentialDataError as exc:
        if not release or show:
            if isinstance(exc, PostprocError):
                raise
            raise ConfidentialInputError(exc.detail, public=exc.public, source=exc.source,
                                         role=exc.role, has_detail=exc.has_detail) from None
        raise PostprocError(data_error_message(exc, release=release, show=show,
                                               directory=directory, names=names)) from None


# -------------------------------------------------------------------------------------------------
# Tables computed against the truth
# -------------------------------------------------------------------------------------------------
#: The ``DataFrame.attrs`` key, and the column of a written table, that carry its label.
LABEL = "randomness"
#: The banner of a table, figure or page computed from the confidential data.
CONFIDENTIAL_BANNER = ("CONFIDENTIAL - computed from the confidential data in release mode; "
                       "do not publish")
_COLUMN_TEXT = {"release": f"release: {CONFIDENTIAL_BANNER}",
                "simulation": "simulation: NOT SAFE FOR RELEASE (seeded noise; errors against "
                              "the data)",
                "unknown": f"unknown: {CONFIDENTIAL_BANNER}"}


def randomness_of(source: Any) -> dict[str, Any] | None:
    """The randomness label of the measurements behind ``source`` — a
    :class:`~hierarchy.noisy.NoisyHierarchy`, a :class:`~postproc.result.Result`, a mapping
    with ``mode`` — or None when it records none.

    What makes a table of errors confidential is the truth it is computed against, and the
    measurements' mode says whether that truth is real (release) or an experiment's
    (simulation); a seeded sampler run on release-mode measurements does not make their errors
    public, so the measurements' mode is the one used.

    Examples
    --------
    >>> randomness_of({"mode": "simulation", "label": "SIMULATION"})["mode"]
    'simulation'
    >>> randomness_of(object()) is None
    True
    """
    if isinstance(source, Mapping):
        found = source
    else:
        provenance = getattr(source, "provenance", None)
        if not isinstance(provenance, Mapping):
            return None
        found = provenance.get("randomness")
        if not isinstance(found, Mapping) or "mode" not in found:   # a Result
            found = provenance.get("noisy", {}).get("randomness") \
                if isinstance(provenance.get("noisy"), Mapping) else None
    if not isinstance(found, Mapping) or found.get("mode") not in ("release", "simulation"):
        return None
    from hierarchy.randomness import RELEASE_LABEL, UNSAFE_LABEL

    release = found["mode"] == "release"
    return {"mode": found["mode"], "safe_for_release": release,
            "label": str(found.get("label") or (RELEASE_LABEL if release else UNSAFE_LABEL))}


def label_table(table: Any, randomness: Any) -> Any:
    """Set ``table.attrs["randomness"]`` from ``randomness`` (a mode ``"release"`` or
    ``"simulation"``, a randomness provenance, or anything :func:`randomness_of` reads); a
    source with no label leaves the table unlabelled. Returns ``table``.

    Examples
    --------
    >>> table = label_table(pd.DataFrame({"mae": [1.0]}), "simulation")
    >>> table.attrs["randomness"]["mode"], table_mode(table[["mae"]])
    ('simulation', 'simulation')
    """
    if isinstance(randomness, str):
        randomness = {"mode": randomness}
    found = randomness_of(randomness)
    if found is not None:
        table.attrs[LABEL] = found
    else:
        table.attrs.pop(LABEL, None)
    return table


def combined_randomness(sources: Any) -> dict[str, Any] | None:
    """The label of a table made from several sources: release if any is release (its truth is
    real), else simulation if any is, else None.

    Examples
    --------
    >>> combined_randomness([{"mode": "simulation"}, {"mode": "release"}])["mode"]
    'release'
    >>> combined_randomness([{"mode": "simulation"}, None])["mode"]
    'simulation'
    """
    found = [r for r in (randomness_of(s) if s is not None else None for s in sources) if r]
    for mode in ("release", "simulation"):
        for r in found:
            if r["mode"] == mode:
                return r
    return None


def table_mode(table: Any) -> str:
    """``"release"``, ``"simulation"`` or ``"unknown"``: from ``table.attrs``, else from the
    ``randomness`` column of a table read back from a file (every row must agree).

    Examples
    --------
    >>> table_mode(pd.DataFrame({"randomness": ["release: CONFIDENTIAL - ..."] * 2}))
    'release'
    >>> table_mode(pd.DataFrame({"mae": [1.0]}))
    'unknown'
    """
    found = randomness_of(getattr(table, "attrs", {}).get(LABEL) or {})
    if found is not None:
        return found["mode"]
    columns = getattr(table, "columns", ())
    if LABEL in columns and len(table):
        modes = {str(v).split(":", 1)[0].strip() for v in table[LABEL]}
        if len(modes) == 1 and modes <= {"release", "simulation"}:
            return modes.pop()
    return "unknown"


def in_confidential_folder(path: str | Path) -> bool:
    """Whether ``path`` lies in a folder named ``confidential`` (what the toolkit never
    publishes).

    Examples
    --------
    >>> in_confidential_folder("run/confidential/compare.csv"), in_confidential_folder("run/a.csv")
    (True, False)
    """
    from hierarchy.io.storage import CONFIDENTIAL_DIR

    return CONFIDENTIAL_DIR in Path(path).resolve().parent.parts


def table_gate(table: Any, destination: str | Path | None = None, *, confidential: bool = False,
               what: str = "this table") -> str | None:
    """Whether ``table`` may be written to ``destination`` (a file; ``None`` to draw it on
    screen): raises for a release-mode or unlabelled table outside a ``confidential/`` folder
    without ``confidential=True``; else returns the banner to show (CONFIDENTIAL for such a
    table, None for a simulation's).

    Parameters
    ----------
    table : pandas.DataFrame
    destination : path, optional
    confidential : bool
        The caller knows the table is confidential and wants it written or drawn anyway.
    what : str
        The table or figure, for the message.

    Raises
    ------
    PostprocError

    Examples
    --------
    >>> table = label_table(pd.DataFrame({"mae": [1.0]}), "release")
    >>> table_gate(table, "out/compare.csv")
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: this table was computed against the confidential data of a
    release-mode measurement, so it is written only under a confidential/ folder: write it to
    DIR/confidential/, or pass confidential=True to write it under a CONFIDENTIAL banner
    >>> table_gate(table, "out/confidential/compare.csv")
    'CONFIDENTIAL - computed from the confidential data in release mode; do not publish'
    >>> table_gate(label_table(table, "simulation"), "out/compare.csv") is None
    True
    """
    mode = table_mode(table)
    if mode == "simulation":
        return None
    if confidential or (destination is not None and in_confidential_folder(destination)):
        return CONFIDENTIAL_BANNER
    where = ("so it is drawn only when asked: pass confidential=True to draw it under a "
             "CONFIDENTIAL banner" if destination is None else
             "so it is written only under a confidential/ folder: write it to "
             "DIR/confidential/, or pass confidential=True to write it under a CONFIDENTIAL "
             "banner")
    if mode == "release":
        raise PostprocError(f"{what} was computed against the confidential data of a "
                            f"release-mode measurement, {where}")
    raise PostprocError(f"{what} carries no randomness label (table.attrs['randomness']), so "
                        f"it may hold numbers computed from confidential data, {where}; a "
                        f"table of a simulation is labelled with "
                        f"postproc.gate.label_table(table, 'simulation')")


def labelled(table: Any) -> Any:
    """A copy of ``table`` with its label as a ``randomness`` column (for a CSV or JSON file)
    — or ``table`` itself when it has that column already.

    Examples
    --------
    >>> labelled(label_table(pd.DataFrame({"mae": [1.0]}), "simulation"))["randomness"][0]
    'simulation: NOT SAFE FOR RELEASE (seeded noise; errors against the data)'
    """
    if LABEL in table.columns:
        return table
    return table.assign(**{LABEL: _COLUMN_TEXT[table_mode(table)]})


def write_csv(table: Any, path: str | Path, *, confidential: bool = False,
              what: str | None = None) -> Path:
    """Write ``table`` as CSV, atomically, if :func:`table_gate` allows it, with its label in a
    ``randomness`` column.

    Examples
    --------
    >>> import tempfile
    >>> table = label_table(pd.DataFrame({"mae": [1.0]}), "release")
    >>> path = write_csv(table, Path(tempfile.mkdtemp()) / "confidential" / "errors.csv")
    >>> pd.read_csv(path).columns.tolist(), table_mode(pd.read_csv(path))
    (['mae', 'randomness'], 'release')
    """
    from hierarchy.io.storage import atomic_path

    path = Path(path)
    table_gate(table, path, confidential=confidential, what=what or path.name)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        labelled(table).to_csv(tmp, index=False)
    return path


def printed_banner(table: Any) -> str | None:
    """The line printed above a table computed against the truth on the terminal (``postproc
    evaluate``): None for a simulation's, the CONFIDENTIAL banner for any other.

    Examples
    --------
    >>> printed_banner(label_table(pd.DataFrame({"mae": [1.0]}), "simulation")) is None
    True
    >>> printed_banner(pd.DataFrame({"mae": [1.0]}))[:16]
    '*** CONFIDENTIAL'
    """
    if table_mode(table) == "simulation":
        return None
    return (f"*** {CONFIDENTIAL_BANNER}: every number below is computed against the "
            f"confidential data ***")


def banner_figure(figure: Any, banner: str | None) -> None:
    """Draw ``banner`` (if any) across the top of a matplotlib figure, in red, above its
    title (the figure's ``suptitle``).

    Examples
    --------
    >>> from matplotlib.figure import Figure
    >>> fig = Figure()
    >>> _ = fig.suptitle("MAE by level")
    >>> banner_figure(fig, CONFIDENTIAL_BANNER)
    >>> fig.get_suptitle() == CONFIDENTIAL_BANNER + "\\nMAE by level"
    True
    """
    title = figure.get_suptitle()
    if banner and banner not in title:
        figure.suptitle(banner + (f"\n{title}" if title else ""), color="#b00020",
                        fontweight="bold", fontsize=9)
