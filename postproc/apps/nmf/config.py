"""A run configuration whose data are a Noisy Measurement File: ``[data] nmf = "ROOT"``.

``postproc run CONFIG`` and ``postproc validate CONFIG`` take it where a configuration names
microdata (``docs/nmf.md``, "A run configuration")::

    [data]
    nmf = "nmf"                  # the folder that holds US_Person_PL_PROD/
    state_totals = "2020"        # or a CSV state,total; the file does not hold them
    states = ["44", "04"]        # optional: these states' pieces only
    product = "persons"          # or "units" (housing units: no state_totals needed)
    stream = true                # optional: state by state (topdown, gls, bluedown; docs/nmf.md)
    part_blocks = 20000          # optional, with stream: each state's blocks in parts

    [postprocess]
    method = "topdown"           # any registered method; options in [postprocess.options]

    [output]
    directory = "out/nmf-topdown"

The file gives the schema, the levels, the workload and the spec (the PL 94 preset's, and its
constraint rows), and its measurements are made: the sections that state those for microdata
(``[schema]``, ``[geography]``, ``[workload]``, ``[budget]``, ``[mechanism]``,
``[randomness]``, ``[spec]``, ``[solver]``) are refused, naming the section. Relative paths
are relative to the configuration's directory.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from hierarchy.io.tomlconfig import TomlDocument, read_toml
from hierarchy.presets.pl94 import LEVELS, pl94_workload
from postproc.errors import PostprocError

__all__ = ["NmfRunConfig", "load_nmf_config", "names_nmf"]

_SECTIONS = {"data", "postprocess", "output"}
_FROM_THE_FILE = ("schema", "geography", "workload", "budget", "mechanism", "randomness",
                  "spec", "solver")


@dataclass(frozen=True)
class NmfRunConfig:
    """A validated ``[data] nmf`` configuration (:func:`load_nmf_config`).

    Attributes
    ----------
    root : Path
        The folder that holds ``US_Person_PL_PROD/``.
    state_totals : Path, "2020" or None (the units' product)
    states : tuple of str or None
    method : str
    method_options : dict or None
        ``[postprocess.options]``; ``None``: the method's production options where it has them
        (:func:`~postproc.apps.nmf.run.production_options`).
    output : Path or None
    source : str
        The configuration file.

    Examples
    --------
    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> _ = (folder / "run.toml").write_text('[data]\\nnmf = "nmf"\\nstate_totals = "2020"\\n'
    ...                                      '[postprocess]\\nmethod = "gls"\\n')
    >>> config = load_nmf_config(folder / "run.toml")
    >>> config.root == folder / "nmf", config.state_totals, config.method, config.output
    (True, '2020', 'gls', None)
    """

    root: Path
    state_totals: Path | str | None
    states: tuple[str, ...] | None
    method: str
    method_options: dict[str, Any] | None
    output: Path | None
    source: str
    product: str = "persons"
    stream: bool = False
    part_blocks: int | None = None

    def read(self) -> tuple[Any, Any]:
        """The file as configured: ``read_nmf``'s noisy hierarchy and spec (every row checked:
        what ``postproc validate`` does)."""
        from postproc.apps.nmf.reader import read_nmf

        return read_nmf(self.root, product=self.product, states=self.states,
                        state_totals=self.state_totals)

    def run(self, out: str | Path | None = None, *, method: str | None = None,
            workers: int | None = None, log=print) -> Path:
        """Post-process the file into ``out`` (default ``[output] directory``); ``method``
        overrides ``[postprocess] method`` (its options then the method's defaults);
        ``workers``: processes (every CPU when left out)."""
        from postproc.apps.nmf.run import run_nmf
        from postproc.apps.nmf.stream import run_nmf_streamed

        directory = out if out is not None else self.output
        if directory is None:
            raise PostprocError(f"{self.source}: no output directory: give [output] directory "
                                "or --out DIR")
        options = self.method_options if method in (None, self.method) else None
        common = dict(method=method or self.method, states=self.states,
                      state_totals=self.state_totals, options=options, product=self.product,
                      workers=workers, log=log)
        if self.stream:
            return run_nmf_streamed(self.root, directory, part_blocks=self.part_blocks,
                                    **common)
        return run_nmf(self.root, directory, **common)


def names_nmf(path: str | Path) -> bool:
    """Whether the configuration file at ``path`` names a Noisy Measurement File
    (``[data] nmf``); ``False`` for any other (or unreadable) file, which the run
    configuration's reader then explains.

    Examples
    --------
    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "run.toml"
    >>> _ = path.write_text('[data]\\nnmf = "nmf"\\nstate_totals = "2020"\\n')
    >>> names_nmf(path), names_nmf("examples/e2e1940.toml")
    (True, False)
    """
    try:
        doc = read_toml(path, error=PostprocError)
    except PostprocError:
        return False
    data = doc.data.get("data")
    return isinstance(data, Mapping) and "nmf" in data


def load_nmf_config(path: str | Path) -> NmfRunConfig:
    """Read and check a ``[data] nmf`` configuration (the module's form).

    Raises
    ------
    PostprocError
        Naming the file, line and key: a section the file states itself, a missing
        ``state_totals``, ``states`` that are not two-digit FIPS codes, an unknown method or a
        bad option of it.

    Examples
    --------
    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> _ = (folder / "run.toml").write_text('[data]\\nnmf = "nmf"\\nstate_totals = "2020"\\n'
    ...                                      '[budget]\\ntotal = 1\\n')
    >>> load_nmf_config(folder / "run.toml")
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: ...run.toml, line 4: [budget] is not part of a run on a Noisy ...
    """
    path = Path(path)
    doc = read_toml(path, error=PostprocError)
    return _from_document(doc, base=path.parent)


def _from_document(doc: TomlDocument, *, base: Path) -> NmfRunConfig:
    given = [s for s in _FROM_THE_FILE if s in doc.data]
    if given:
        raise doc.fail(given[0], None, f"[{given[0]}] is not part of a run on a Noisy "
                                       "Measurement File: the file gives the schema, levels, "
                                       "workload, spec and measurements (PL 94-171); remove "
                                       f"{', '.join(f'[{s}]' for s in given)}")
    doc.check_sections(_SECTIONS)
    d = doc.table("data", required=True, allowed={"nmf", "state_totals", "states", "product",
                                                  "stream", "part_blocks"})
    root = d.path("nmf", base=base)
    product = d.string("product", "persons")
    if product not in ("persons", "units"):
        raise d.fail("product", f"product must be \"persons\" or \"units\", not {product!r}")
    if "state_totals" not in d and product == "persons":
        raise d.fail(None, "[data] needs state_totals = \"2020\" (the 2020 Census's, shipped) "
                           "or the path of a CSV state,total: the file does not hold the "
                           "states' totals")
    totals = d.string("state_totals")
    state_totals: Path | str | None = (totals if totals in (None, "2020")
                                       else d.path("state_totals", base=base))
    states = d.strings("states")
    if states is not None and not all(len(s) == 2 and s.isdigit() for s in states):
        raise d.fail("states", f"states must be two-digit state FIPS codes, e.g. [\"44\"], not "
                               f"{list(states)}")
    from postproc.apps.runs.config_postprocess import postprocess_section

    section = doc.table("postprocess", allowed={"method", "options"})
    method, options = postprocess_section(section, LEVELS, pl94_workload())
    o = doc.table("output", allowed={"directory"})
    output = o.path("directory", base=base)
    stream = d.boolean("stream", False)
    part_blocks = d.positive_int("part_blocks")
    if part_blocks is not None and not stream:
        raise d.fail("part_blocks", "part_blocks splits the blocks of a run state by state: "
                                    "set stream = true too")
    return NmfRunConfig(root, state_totals, states, method,
                        options if "options" in section else None, output, doc.source,
                        product, stream, part_blocks)
