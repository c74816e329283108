"""``postproc init``: a working, commented run configuration written from a data file.

The geography is the columns named as levels, under a root of one unit; every other column
becomes an attribute of the schema (:mod:`postproc.apps.runs.init_schema` says how: labels
from text and categoricals, integers grouped in ranges through ``[data] values``); the workload
is the detailed histogram and each attribute's marginal; the budget is pure ε (1 unless given)
split equally over the levels and over the queries, in exact fractions; the noise is the
geometric mechanism in simulation mode with a seed; the spec publishes the total population of
the root, with commented examples of a query invariant, a structural zero and a linear
constraint. ``postproc validate`` and ``postproc run`` take the file as written.

The labels come from the confidential file: the file says so at its top, since in release mode
they are published metadata the user must vet. The file's first line marks it as written by
``postproc init``: an existing file is replaced only with ``force``, and only if it carries that
line.

Examples
--------
>>> import pandas as pd
>>> people = pd.DataFrame({"region": ["N", "N", "S"], "district": ["N1", "N2", "S1"],
...                        "sex": ["f", "m", "f"]})
>>> text = config_text(people, ["region", "district"], data_path="people.csv")
>>> text.splitlines()[0]
'# Written by postproc init from people.csv: a run configuration for these data.'
>>> import tomllib
>>> tomllib.loads(text)["geography"]["levels"]
['country', 'region', 'district']
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from dataclasses import dataclass
from fractions import Fraction
from math import prod
from pathlib import Path
from typing import Any, Sequence

import pyarrow as pa

from hierarchy.errors import HierarchyError
from hierarchy.io.tomlconfig import randomness_problem
from postproc.apps.runs.init_schema import ColumnPlan, check_levels, config_name, plan_columns
from postproc.errors import PostprocError

__all__ = ["init_config", "config_text", "InitResult", "MARKER"]

#: How the first line of a file ``postproc init`` wrote begins (it may replace such a file).
MARKER = "# Written by postproc init"

_COMMENT_COLUMN = 31


@dataclass(frozen=True)
class InitResult:
    """What :func:`init_config` wrote: the file, the levels (root first), the columns made
    attributes and those left out.

    Examples
    --------
    >>> result = InitResult(Path("people.toml"), ("country", "region"), ("sex", "age"), ("id",))
    >>> print(result.summary())
    wrote people.toml: levels country, region; attributes sex, age; left out id
    next: postproc validate people.toml, then postproc run people.toml
    """

    path: Path
    levels: tuple[str, ...]
    attributes: tuple[str, ...]
    skipped: tuple[str, ...] = ()

    def summary(self) -> str:
        """Two lines for the terminal: what was written, and what to run next."""
        left = f"; left out {', '.join(self.skipped)}" if self.skipped else ""
        return (f"wrote {self.path}: levels {', '.join(self.levels)}; attributes "
                f"{', '.join(self.attributes)}{left}\n"
                f"next: postproc validate {self.path}, then postproc run {self.path}")


def init_config(data: str | os.PathLike, levels: Sequence[str], *,
                out: str | os.PathLike | None = None, seed: int = 1, epsilon: Any = 1,
                root: str = "country", skip: Sequence[str] = (),
                force: bool = False) -> InitResult:
    """Write a run configuration for the data file ``data`` (see the module).

    Parameters
    ----------
    data : str or path-like
        The persons file: CSV or parquet (:func:`hierarchy.io.read_table`).
    levels : sequence of str
        The geocode columns, largest units first; a root of one unit is put above them.
    out : str or path-like, optional
        The file to write (default: ``<data's stem>.toml`` in the current directory).
    seed : int, optional
        The simulation's seed.
    epsilon : number or str, optional
        The total ε (``"1/2"`` is a half).
    root : str, optional
        The root level's name.
    skip : sequence of str, optional
        Columns to leave out of the schema.
    force : bool, optional
        Replace ``out`` if it exists and ``postproc init`` wrote it (its first line is
        :data:`MARKER`); a file it did not write is never replaced.

    Returns
    -------
    InitResult

    Raises
    ------
    PostprocError
        Before anything is written: ``out`` exists (without ``force``, or not written by
        ``postproc init``); the data cannot be read; a level is not a column or its geocodes
        do not nest; a column cannot be an attribute; ε, the seed or the root is invalid.

    Examples
    --------
    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> _ = (folder / "people.csv").write_text("region,sex\\nN,f\\nS,m\\nS,f\\n")
    >>> result = init_config(folder / "people.csv", ["region"], out=folder / "people.toml")
    >>> result.attributes, (folder / "people.toml").read_text().startswith(MARKER)
    (('sex',), True)
    >>> init_config(folder / "people.csv", ["region"], out=folder / "people.toml")
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: .../people.toml exists; pass --force to replace it (only a
    file postproc init wrote is replaced)
    """
    from hierarchy.io import read_table
    from hierarchy.io.storage import atomic_path

    data = Path(data)
    out = Path(out) if out is not None else Path(f"{_stem(data)}.toml")
    _check_replaceable(out, force)
    try:
        table = read_table(data, role="persons")
    except HierarchyError as exc:
        raise PostprocError(f"cannot read the data: {exc}") from None
    data_path = Path(os.path.relpath(data.resolve(), out.resolve().parent)).as_posix()
    composed = _compose(table, levels, data_path=data_path, seed=seed, epsilon=epsilon,
                        root=root, skip=skip, config_file=out.name)
    _check_parses(composed.text, out)
    with atomic_path(out) as tmp:
        tmp.write_text(composed.text, encoding="utf-8")
    return InitResult(out, composed.levels,
                      tuple(p.name for p in composed.plans if p.is_attribute),
                      tuple(p.column for p in composed.plans if not p.is_attribute))


def config_text(data: Any, levels: Sequence[str], *, data_path: str, seed: int = 1,
                epsilon: Any = 1, root: str = "country", skip: Sequence[str] = (),
                config_file: str | None = None) -> str:
    """The commented TOML text of a run configuration for ``data`` (what :func:`init_config`
    writes): the same data give the same text.

    Parameters
    ----------
    data : pyarrow.Table or pandas.DataFrame
        The persons, one row each.
    levels : sequence of str
        The geocode columns, largest units first.
    data_path : str
        ``[data] persons``: the file's path relative to the configuration.
    seed, epsilon, root, skip
        As :func:`init_config`.
    config_file : str, optional
        The configuration's file name, for the commands its first lines show (default:
        ``<data's stem>.toml``).

    Returns
    -------
    str

    Raises
    ------
    PostprocError
        As :func:`init_config`, but for the output file.

    Examples
    --------
    >>> import pandas as pd
    >>> people = pd.DataFrame({"region": ["N", "S"], "sex": ["f", "m"], "weight": [0.5, 1.5]})
    >>> config_text(people, ["region"], data_path="p.csv")
    Traceback (most recent call last):
    ...
    postproc.errors.PostprocError: column 'weight' holds floating-point numbers, which no
    attribute can: a histogram counts persons by labels. Group its values into labels or
    integers in the data, or leave it out with --skip weight
    >>> text = config_text(people, ["region"], data_path="p.csv", skip=["weight"], epsilon="1/2")
    >>> "total = \\"1/2\\"" in text, "# column weight: left out (--skip)" in text
    (True, True)
    """
    table = data if isinstance(data, pa.Table) else pa.Table.from_pandas(
        data, preserve_index=False)
    return _compose(table, levels, data_path=data_path, seed=seed, epsilon=epsilon, root=root,
                    skip=skip, config_file=config_file).text


@dataclass(frozen=True)
class _Composed:
    """A configuration's text, its levels (root first) and the columns' plans."""

    text: str
    levels: tuple[str, ...]
    plans: tuple[ColumnPlan, ...]


def _compose(table: pa.Table, levels: Sequence[str], *, data_path: str, seed: int,
             epsilon: Any, root: str, skip: Sequence[str], config_file: str | None
             ) -> _Composed:
    """:func:`config_text`, with what it was made of."""
    levels = list(levels)
    if not levels or len(set(levels)) != len(levels):
        raise PostprocError(f"--levels must name one or more distinct geocode columns, largest "
                            f"units first, e.g. --levels region,district; got {levels}")
    check_levels(table, levels)
    plans = plan_columns(table, exclude=levels, skip=skip)
    attributes = [p for p in plans if p.is_attribute]
    if not attributes:
        raise PostprocError(f"the data have no column besides the levels {levels} to make an "
                            "attribute of: a schema needs at least one (sex, age, …)")
    level_names = [config_name(lv) for lv in levels]
    taken = set(level_names) | {p.name for p in attributes}
    if root in taken or root in table.column_names:
        raise PostprocError(f"the root level's name {root!r} is a column or level of the data; "
                            "choose another with --root NAME")
    total = _total(epsilon)
    problem = randomness_problem("simulation", seed)
    if problem is not None:
        raise PostprocError(f"--seed: {problem[1]}")
    columns = {n: c for n, c in zip(level_names, levels) if n != c}
    columns.update({p.name: p.column for p in attributes if p.name != p.column})
    all_levels = [root, *level_names]
    queries = _queries(attributes)
    stem = _stem(Path(data_path))
    parts = [_header(data_path, config_file or f"{stem}.toml", f"{stem}_out"),
             _data_section(data_path, columns, attributes),
             _schema_section(config_name(stem), plans),
             _geography_section(all_levels),
             _workload_section(queries, attributes),
             _budget_section(total, all_levels, list(queries)),
             _noise_sections(seed),
             _spec_section(all_levels, attributes, queries),
             _end_sections(f"{stem}_out")]
    return _Composed("\n".join(parts), tuple(all_levels), tuple(plans))


# -- the sections ------------------------------------------------------------------------------

def _header(data_path: str, config_file: str, output: str) -> str:
    name = Path(data_path).name
    return f"""\
{MARKER} from {name}: a run configuration for these data.
# Edit it freely; postproc init --force replaces it only while this first line is kept.
#
#   postproc validate {config_file}
#       read and check the data and this file, measuring nothing
#   postproc run {config_file}
#       measure, post-process (TopDown), write {output}/
#
# SIMULATION MODE ([randomness]): the noise is seeded, so the results are reproducible and
# every output is labelled NOT safe for release. For a release, set mode = "release" and
# remove the seed.
#
# PRIVACY: the labels below ([schema], [data.values]) and the ranges of the integer columns
# were drawn from the confidential file. In release mode they are published with the results:
# check that each one may be made public (no rare value, no extreme that points at a person),
# or replace them with labels and ranges fixed in advance (a code list, ages in decades).
#
# Every key, its type and its default: docs/config.md. Paths are relative to this file.
"""


def _data_section(data_path: str, columns: dict[str, str],
                  attributes: list[ColumnPlan]) -> str:
    lines = ["[data]", _line(f"persons = {_string(data_path)}", "one row per person")]
    if columns:
        lines.append(_line(f"columns = {_inline(columns)}", "name in this file = column"))
    for plan in attributes:
        if not plan.values:
            continue
        what = ("the file's values → the schema's groups"
                if plan.kind == "ranges" else "the file's values → the schema's labels")
        lines += ["", _line(f"[data.values.{_key(plan.name)}]", what)]
        lines += [f"{_string(k)} = {_string(v)}" for k, v in plan.values.items()]
        if plan.alternative is not None:
            labels, values = plan.alternative
            lines.append(f"# or, in {len(labels)} wider groups (with the other labels in "
                         "[schema]):")
            lines += [f"# {_string(k)} = {_string(v)}" for k, v in values.items()]
    return "\n".join(lines) + "\n"


def _schema_section(name: str, plans: list[ColumnPlan]) -> str:
    lines = ["[schema]", _line(f"name = {_string(name)}", "the attributes below, in order")]
    lines += [f"# column {p.column}: {p.note}" for p in plans if not p.is_attribute]
    for plan in plans:
        if not plan.is_attribute:
            continue
        column = f"column {plan.column}" + (" (renamed)" if plan.name != plan.column else "")
        lines += ["", _line("[[schema.attributes]]", f"{column}: {plan.note}"),
                  f"name = {_string(plan.name)}", f"labels = {_list(plan.labels)}"]
        if plan.alternative is not None:
            lines.append(f"# or: labels = {_list(plan.alternative[0])}")
    return "\n".join(lines) + "\n"


def _geography_section(levels: list[str]) -> str:
    return "\n".join([
        "[geography]",
        _line(f"levels = {_list(levels)}", "root first"),
        f"# {levels[0]}: the root, one unit for the whole file (no column); the others are the "
        "file's",
        "# geocode columns, each unit in one unit of the level above", ""])


def _queries(attributes: list[ColumnPlan]) -> dict[str, str]:
    """The workload: the detailed histogram and each attribute's marginal (none when there is
    one attribute: its marginal is the detailed histogram)."""
    queries = {"detailed": "detailed"}
    if len(attributes) > 1:
        for plan in attributes:
            name = plan.name if plan.name not in ("total", "detailed") else f"{plan.name}_marginal"
            queries[name] = f"marginal({plan.name})"
    return queries


def _workload_section(queries: dict[str, str], attributes: list[ColumnPlan]) -> str:
    cells = " × ".join(str(len(p.labels)) for p in attributes)
    size = prod(len(p.labels) for p in attributes)
    lines = [_line("[workload.queries]", "what may be measured: name = query expression")]
    for name, expression in queries.items():
        comment = (f"every cell: {cells} = {size:,}" if len(attributes) > 1
                   else f"every cell: {size:,}") if name == "detailed" else ""
        lines.append(_line(f"{_key(name)} = {_string(expression)}", comment))
    return "\n".join(lines) + "\n"


def _budget_section(total: Any, levels: list[str], queries: list[str]) -> str:
    share_level, share_query = _share(len(levels)), _share(len(queries))
    lines = ["[budget]",
             _line('kind = "pure"', "total is ε (pure differential privacy)"),
             _line(f"total = {total}", "ε of the whole release, spent once"),
             _line('neighbours = "change"', "one person's record changes"),
             "", _line("[budget.level_fractions]", "each level's share of ε: equal")]
    lines += [f"{_key(lv)} = {share_level}" for lv in levels]
    lines += ["", _line("[budget.query_fractions]", "each query's share of its level's ε: equal")]
    lines += [f"{_key(q)} = {share_query}" for q in queries]
    return "\n".join(lines) + "\n"


def _noise_sections(seed: int) -> str:
    return "\n".join([
        "[mechanism]",
        _line('name = "geometric"', "two-sided geometric noise: integers, pure DP"),
        "",
        "[randomness]",
        _line('mode = "simulation"', 'seeded, NOT safe for release; "release": secure'),
        _line(f"seed = {seed}", 'remove it with mode = "release"'), ""])


def _spec_section(levels: list[str], attributes: list[ColumnPlan],
                  queries: dict[str, str]) -> str:
    first = attributes[0]
    query = next(name for name, q in queries.items() if q == f"marginal({first.name})") \
        if len(queries) > 1 else "detailed"
    ranged = next((p for p in attributes if p.kind == "ranges"), attributes[-1])
    return "\n".join([
        _line("[spec]", "what the post-processors keep exact, and what units obey"),
        "",
        _line("[[spec.invariant]]", "the root's persons, published exactly"),
        'name = "tot"', f"levels = {_list(levels[:1])}", "",
        "# More: uncomment and edit (docs/spec.md states each; postproc validate checks that the",
        "# data obey the constraints).",
        "#",
        _line("# [[spec.invariant]]", f"the answers of {query} in every {levels[-1]}, exact"),
        f"# query = {_string(query)}",
        f"# levels = {_list(levels[-1:])}",
        "#",
        _line("# [[spec.constraint]]", "a structural zero: cells no person can be in"),
        '# name = "impossible"',
        '# type = "structural_zero"',
        f"# query = {_string(f'marginal({ranged.name})')}",
        f"# answers = {_list(ranged.labels[-1:])}",
        '# levels = "all"',
        "#",
        _line("# [[spec.constraint]]", f"a linear constraint: no {levels[-1]} is empty"),
        '# name = "not_empty"',
        '# type = "linear"',
        '# query = "total"',
        '# sense = ">="',
        "# rhs = 1",
        f"# levels = {_list(levels[-1:])}", ""])


def _end_sections(output: str) -> str:
    return "\n".join([
        "[postprocess]",
        _line('method = "topdown"', "postproc methods lists the others"),
        "",
        "[output]",
        _line(f"directory = {_string(output)}", "postproc run --out DIR overrides it"), ""])


# -- values ------------------------------------------------------------------------------------

def _total(epsilon: Any) -> str:
    """ε as TOML: an integer or a decimal number as written, else a fraction string."""
    from hierarchy.budget import Budget

    one = {"_": 1}
    try:
        Budget("pure", epsilon, one, one)
    except HierarchyError as exc:
        raise PostprocError(f"--epsilon: {exc}") from None
    if isinstance(epsilon, bool):
        raise PostprocError(f"--epsilon must be a number, not {epsilon!r}")
    if isinstance(epsilon, (int, float)):
        return repr(epsilon)
    text = str(epsilon).strip()
    if re.fullmatch(r"[0-9]+", text):
        return str(int(text))
    if re.fullmatch(r"[0-9]+\.[0-9]+", text):
        return text
    return _string(text)


def _share(n: int) -> str:
    return _string(str(Fraction(1, n)))


def _string(text: str) -> str:
    return json.dumps(str(text), ensure_ascii=False)


def _key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else _string(key)


def _list(values: Sequence[str]) -> str:
    return "[" + ", ".join(_string(v) for v in values) + "]"


def _inline(mapping: dict[str, str]) -> str:
    return "{ " + ", ".join(f"{_key(k)} = {_string(v)}" for k, v in mapping.items()) + " }"


def _line(text: str, comment: str = "") -> str:
    if not comment:
        return text
    return f"{text.ljust(_COMMENT_COLUMN - 1)} # {comment}"


def _stem(path: Path) -> str:
    name = path.name
    for suffix in (".csv.gz", ".csv", ".parquet", ".pq", ".txt"):
        if name.lower().endswith(suffix):
            return name[: -len(suffix)] or "data"
    return path.stem or "data"


# -- the file ----------------------------------------------------------------------------------

def _check_replaceable(out: Path, force: bool) -> None:
    """Refuse to replace ``out`` unless ``force`` and ``postproc init`` wrote it."""
    if not out.exists() and not out.is_symlink():
        return
    if out.is_dir() or not out.is_file():
        raise PostprocError(f"{out} exists and is not a regular file; choose another --out")
    if not force:
        raise PostprocError(f"{out} exists; pass --force to replace it (only a file postproc "
                            "init wrote is replaced)")
    try:
        with out.open(encoding="utf-8") as handle:
            first = handle.readline()
    except (OSError, UnicodeDecodeError):
        first = ""
    if not first.startswith(MARKER):
        raise PostprocError(f"{out} was not written by postproc init (its first line does not "
                            f"begin {MARKER!r}), so it is not replaced, even with --force; "
                            "choose another --out")


def _check_parses(text: str, out: Path) -> None:
    """The text is a valid run configuration (a failure is a bug of this module)."""
    from postproc.apps.runs.config import config_from_dict

    config_from_dict(tomllib.loads(text), base=out.resolve().parent, source=str(out),
                     text=text)
