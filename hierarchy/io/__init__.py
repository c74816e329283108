"""The I/O floor: reading microdata, writing files safely, configuration files.

==========================  =====================================================================
:mod:`.microdata`           CSV or parquet microdata, a column mapping, validation that names
                            rows: :func:`read_microdata`, :func:`read_table`, :class:`Microdata`
:mod:`.codes`               an attribute column's codes from a file's values (:class:`Recode`)
:mod:`.units`               persons against their housing units and facilities
                            (:func:`check_units`), records to bottom-level units
                            (:func:`leaf_index`)
:mod:`.storage`             atomic writes, output directories the toolkit owns, locks, the
                            ``confidential/`` directory
:mod:`.tomlconfig`          the TOML layer every configuration file is read through (line
                            numbers, allowed keys, randomness)
==========================  =====================================================================

The readers' names are exported here (``from hierarchy.io import read_microdata``, as when
``hierarchy.io`` was one module), loaded on first use: ``hierarchy.io.storage`` and
``hierarchy.io.tomlconfig`` import neither scipy nor the readers.

Examples
--------
>>> import pyarrow as pa
>>> from hierarchy.io import read_microdata
>>> from hierarchy.schema import Attribute, Schema
>>> schema = Schema((Attribute("age", ("child", "adult")),))
>>> read_microdata(pa.table({"county": ["001"], "age": ["adult"]}), schema=schema,
...                levels=["state", "county"]).persons.column("age").to_pylist()
[1]
"""

from hierarchy.exports import lazy_exports

# exported name -> the module that defines it
_EXPORTS = {
    "read_table": "hierarchy.io.microdata", "read_microdata": "hierarchy.io.microdata",
    "Microdata": "hierarchy.io.microdata", "source_table": "hierarchy.io.microdata",
    "check_tabulated_units": "hierarchy.io.microdata",
    "Recode": "hierarchy.io.codes", "attribute_codes": "hierarchy.io.codes",
    "as_arrow_column": "hierarchy.io.codes",
    "check_units": "hierarchy.io.units", "attribute_totals": "hierarchy.io.units",
    "leaf_index": "hierarchy.io.units",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
