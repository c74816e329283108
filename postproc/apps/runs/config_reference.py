"""``docs/config.md``, generated: every key of a run configuration
(:mod:`postproc.apps.runs.config_keys`), with an example of what ``postproc init`` writes.

Regenerate the page after changing a key::

    python -m postproc.apps.runs.config_reference > docs/config.md

(``tests/test_config_keys.py`` fails while the page and the keys differ.)

Examples
--------
>>> page = config_reference_markdown()
>>> page.splitlines()[0]
'# The run configuration: every section and key'
>>> "| `level_fractions` |" in page
True
"""

from __future__ import annotations

import sys
import textwrap

import pyarrow as pa

from postproc.apps.runs.config_keys import SECTIONS, Key, Section
from postproc.apps.runs.init import config_text
from postproc.apps.runs.init_schema import (
    ALTERNATIVE_GROUPS,
    MAX_GROUPS,
    MAX_LABELS,
    MAX_TEXT_LABELS,
)

__all__ = ["config_reference_markdown", "example_people"]

_INTRO = """\
# The run configuration: every section and key

A run configuration is one TOML file that `postproc validate`, `postproc run`, `postproc
compare` and `postproc tradeoff` read: where the microdata are, the schema and the geography,
the workload and the budget, the noise and its randomness, the spec, the post-processor and the
output. `postproc init` writes one for a data file of your own; `examples/e2e1940.toml` and
`examples/pl94_2020.toml` are the presets' configurations. Every error names the file, the line,
the key and what would be valid.

This page is generated from `postproc/apps/runs/config_keys.py`, where every key is defined
once and whence the parser takes what each section allows, so the two cannot differ. After
changing a key, regenerate it:

    python -m postproc.apps.runs.config_reference > docs/config.md

(`tests/test_config_keys.py` fails while the page is out of date.)

## Your own data, from the command line

    postproc init people.parquet --levels region,district,village
    postproc validate people.toml
    postproc run people.toml

`postproc init DATA --levels A,B,C [--out CONFIG] [--seed N] [--epsilon E] [--root NAME]
[--skip COLUMNS] [--force]` reads the persons file (CSV or parquet, one row per person) and
writes a working, commented configuration for it:

* **geography** — the columns `--levels` names, largest units first, under a root of one unit
  (`--root`, default `country`); a level's geocodes must be unique within it;
* **schema** — every other column, by its values:
{rules}
* **workload** — the detailed histogram and each attribute's marginal;
* **budget** — pure ε (`--epsilon`, default 1) split equally over the levels and over the
  queries, in exact fractions;
* **noise** — the geometric mechanism in **simulation mode** with a seed (`--seed`, default 1):
  every output is labelled not safe for release until you set `mode = "release"` and remove
  the seed;
* **spec** — the root's total published exactly (`tot`), with commented examples of a query
  invariant, a structural zero and a linear constraint (`docs/spec.md`);
* **output** — `<name>_out/` beside the configuration.

The labels come from the confidential file, and so do the integer ranges' ends: in release mode
they are published with the results, so check that each may be made public (the file says so
at its top). An existing CONFIG is replaced only with `--force`, and only if `postproc init`
wrote it (its first line says so); `postproc validate` and `postproc run` then take the file
as it is.

For a parquet file with the columns `person` (an identifier), `region`, `district`, `village`,
`sex` (text), `age` (whole years), `tenure` (a pandas categorical) and `children`
(integers 0 to 3), `postproc init people.parquet --levels region,district,village` writes:

```toml
{example}```

## Sections and keys

A section's keys are listed with their type, their default (*required* when there is none),
their meaning and an example value. Paths are relative to the configuration's directory.
A section with **forms** takes the keys of one of them.
"""

_RULES = f"""\
  * text and booleans: one label per value, sorted; a categorical: its categories, in their
    order;
  * integers with at most {MAX_LABELS} distinct values: one label per value, through
    `[data.values]`;
  * more integers (none below 0): ranges of a round width (1, 2, 2.5 or 5 × 10^k), the
    narrowest that gives at most {MAX_GROUPS} groups, the last one open (`"90+"`), with a
    coarser alternative of at most {ALTERNATIVE_GROUPS} groups in a comment — equal widths
    rather than quantiles, so that only the column's smallest and largest values shape them;
  * a column whose every value is distinct (an identifier: text, or a run of consecutive
    integers) is left out, with a comment;
  * floating-point numbers, missing values, text with more than {MAX_TEXT_LABELS:,} values and
    other types are refused, naming the column (`--skip COLUMN` leaves one out);"""


def example_people() -> pa.Table:
    """The small table whose configuration ``docs/config.md`` shows: 40 persons in 2 regions,
    4 districts and 8 villages, built without randomness (the page must not change).

    Examples
    --------
    >>> table = example_people()
    >>> table.num_rows, table.column_names[:4]
    (40, ['person', 'region', 'district', 'village'])
    """
    rows = range(40)
    village = [f"V{i % 8}" for i in rows]
    district = [f"D{i % 8 // 2}" for i in rows]
    region = ["North" if i % 8 < 4 else "South" for i in rows]
    tenure = pa.DictionaryArray.from_arrays(pa.array([i % 3 for i in rows], pa.int8()),
                                            pa.array(["owner", "renter", "group quarters"]))
    return pa.table({"person": [f"P{i:03d}" for i in rows], "region": region,
                     "district": district, "village": village,
                     "sex": ["female" if i % 2 else "male" for i in rows],
                     "age": [(i // 2 * 37) % 100 for i in rows], "tenure": tenure,
                     "children": [i % 4 for i in rows]})


def config_reference_markdown() -> str:
    """The text of ``docs/config.md``: an introduction, the configuration ``postproc init``
    writes for :func:`example_people`, and one table per section of
    :data:`~postproc.apps.runs.config_keys.SECTIONS`.

    Returns
    -------
    str

    Examples
    --------
    >>> "## `[[spec.constraint]]`" in config_reference_markdown()
    True
    """
    example = config_text(example_people(), ["region", "district", "village"],
                          data_path="people.parquet")
    parts = [_INTRO.format(rules=_RULES, example=example)]
    parts += [_section(section) for section in SECTIONS.values()]
    return "\n".join(parts)


def _section(section: Section) -> str:
    about = (section.meaning + (" Required." if section.required else "")
             + (" An array of tables: the header repeats for each entry." if section.array
                else ""))
    lines = [f"## `{section.header}`", "", textwrap.fill(about, 100), ""]
    if section.forms:
        forms = "; ".join(
            f"**{form}** ({meaning}): "
            + ", ".join(f"`{k.name}`" for k in section.keys if not k.forms or form in k.forms)
            for form, meaning in section.forms.items())
        lines += [textwrap.fill(f"Forms — {forms}.", 100), ""]
    if section.free:
        lines += [f"Its keys are your own: `{section.free}`.", ""]
        return "\n".join(lines)
    lines += ["| key | type | default | meaning | example |", "|---|---|---|---|---|"]
    lines += [_row(key) for key in section.keys]
    return "\n".join(lines) + "\n"


def _row(key: Key) -> str:
    default = key.default
    if key.required:
        rest = default.removeprefix("—").strip()
        default = "*required*" + (f" {rest}" if rest else "")
    cells = [f"`{key.name}`", key.type, default, key.meaning, f"`{key.example}`"]
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


if __name__ == "__main__":  # pragma: no cover - the regeneration command
    sys.stdout.write(config_reference_markdown())
