"""Schemas: ordered categorical attributes whose cross-product indexes a histogram's cells.

The detailed histogram of a geographic unit counts persons in every cell of the cross-product of
the schema's attributes, in row-major order (first attribute slowest): docs/data.md, "Schemas".

Examples
--------
>>> E2E_1940.shape, E2E_1940.size
((8, 2, 2, 6), 192)
>>> E2E_1940.cell_index({"hhgq": [0, 7], "votingage": [1, 1], "hispanic": [0, 1],
...                      "cenrace": [0, 5]})
array([ 12, 191])
>>> E2E_1940.cell_labels(191)
{'hhgq': 'other non-institutional', 'votingage': '18+', 'hispanic': 'Hispanic', 'cenrace': 'other'}
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from hierarchy.display import schema_html
from hierarchy.errors import HierarchyError

__all__ = ["Attribute", "Schema", "E2E_1940", "E2E_1940_144", "get_schema", "SCHEMAS"]


@dataclass(frozen=True)
class Attribute:
    """A categorical attribute: a name and the labels of its levels (codes are 0..size-1).

    Examples
    --------
    >>> Attribute("votingage", ("under 18", "18+")).size
    2
    >>> Attribute("votingage", ("a", "a"))
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: attribute 'votingage' has duplicate labels: ['a']
    """

    name: str
    labels: tuple[str, ...]

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise HierarchyError(f"attribute name must be an identifier (letters, digits, _), "
                                 f"not {self.name!r}")
        labels = tuple(str(label) for label in self.labels)
        object.__setattr__(self, "labels", labels)
        if len(labels) < 1:
            raise HierarchyError(f"attribute {self.name!r} needs at least one level")
        if len(set(labels)) != len(labels):
            dup = sorted({x for x in labels if labels.count(x) > 1})
            raise HierarchyError(f"attribute {self.name!r} has duplicate labels: {dup}")

    @property
    def size(self) -> int:
        return len(self.labels)

    def code(self, value: Any) -> int:
        """The code of a level given as its code (int) or its label (str)."""
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
            if 0 <= int(value) < self.size:
                return int(value)
            raise HierarchyError(f"attribute {self.name!r} has codes 0..{self.size - 1}; "
                                 f"{int(value)} is out of range")
        if isinstance(value, str):
            if value in self.labels:
                return self.labels.index(value)
            if value.strip().lstrip("-").isdigit():
                return self.code(int(value))
        raise HierarchyError(f"attribute {self.name!r} has no level {value!r}; levels are "
                             f"{list(self.labels)} (or codes 0..{self.size - 1})")


@dataclass(frozen=True)
class Schema:
    """An ordered tuple of :class:`Attribute`; cells are their cross-product in row-major order.

    Parameters
    ----------
    attributes : sequence of Attribute
    name : str
        A short identifier used in metadata (e.g. ``"e2e_1940"``).

    Raises
    ------
    HierarchyError
        If there is no attribute, an attribute is not an :class:`Attribute`, or two attributes
        share a name.

    Examples
    --------
    >>> schema = Schema((Attribute("sex", ("male", "female")),
    ...                  Attribute("age", ("0-17", "18-64", "65+"))), name="demo")
    >>> schema.shape, schema.size
    ((2, 3), 6)
    >>> schema.cell_index({"sex": [1, 0], "age": [2, 0]})
    array([5, 0])
    >>> schema.cell_labels(5)
    {'sex': 'female', 'age': '65+'}
    >>> Schema((Attribute("sex", ("male", "female")), Attribute("sex", ("any",))), name="demo")
    Traceback (most recent call last):
    ...
    hierarchy.errors.HierarchyError: schema 'demo' repeats attribute names ['sex']
    """

    attributes: tuple[Attribute, ...]
    name: str = "custom"

    def __post_init__(self):
        attrs = tuple(self.attributes)
        object.__setattr__(self, "attributes", attrs)
        if not attrs:
            raise HierarchyError("a schema needs at least one attribute")
        if not all(isinstance(a, Attribute) for a in attrs):
            raise HierarchyError("schema attributes must be Attribute objects")
        names = [a.name for a in attrs]
        if len(set(names)) != len(names):
            dup = sorted({x for x in names if names.count(x) > 1})
            raise HierarchyError(f"schema {self.name!r} repeats attribute names {dup}")

    # -- shape ---------------------------------------------------------------------------------
    @property
    def names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.attributes)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(a.size for a in self.attributes)

    @property
    def size(self) -> int:
        """Number of cells of the detailed histogram."""
        return int(np.prod(self.shape))

    def position(self, name: str) -> int:
        """Position of attribute ``name`` in the schema."""
        try:
            return self.names.index(name)
        except ValueError:
            raise HierarchyError(f"schema {self.name!r} has no attribute {name!r}; attributes are "
                                 f"{list(self.names)}") from None

    def attribute(self, name: str) -> Attribute:
        return self.attributes[self.position(name)]

    # -- cells ---------------------------------------------------------------------------------
    def cell_index(self, columns: Mapping[str, Any]) -> np.ndarray:
        """Row-major cell index of each record given integer code columns, one per attribute.

        Codes are checked against the attribute sizes; a bad code raises with the first offending
        row numbers.
        """
        index = None
        for attr in self.attributes:
            if attr.name not in columns:
                raise HierarchyError(f"missing column for attribute {attr.name!r}")
            col = np.asarray(columns[attr.name])
            if col.dtype.kind not in "iu":
                raise HierarchyError(f"column {attr.name!r} must hold integer codes, "
                                     f"not {col.dtype}")
            bad = (col < 0) | (col >= attr.size)
            if bad.any():
                rows = np.flatnonzero(bad)
                raise HierarchyError(
                    f"column {attr.name!r} has {rows.size} value(s) outside 0..{attr.size - 1}, "
                    f"e.g. {col[rows[0]]} at row {rows[0]}; rows {rows[:10].tolist()}")
            col = col.astype(np.int64)
            index = col if index is None else index * attr.size + col
        return index

    def cell_codes(self) -> np.ndarray:
        """An (size × n_attributes) array: the code of every attribute for every cell."""
        return np.stack(np.unravel_index(np.arange(self.size), self.shape), axis=1)

    def cell_labels(self, cell: int) -> dict[str, str]:
        """Labels of one cell, attribute by attribute."""
        if not 0 <= int(cell) < self.size:
            raise HierarchyError(f"cell {cell} is outside 0..{self.size - 1}")
        codes = np.unravel_index(int(cell), self.shape)
        return {a.name: a.labels[int(c)] for a, c in zip(self.attributes, codes)}

    def _repr_html_(self) -> str:
        """Notebook display: one row per attribute (:func:`hierarchy.display.schema_html`)."""
        return schema_html(self)

    # -- serialization -------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name,
                "attributes": [{"name": a.name, "labels": list(a.labels)}
                               for a in self.attributes]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Schema":
        """Inverse of :meth:`to_dict`; also accepts ``{"preset": "e2e_1940"}``."""
        if "preset" in data:
            return get_schema(data["preset"])
        try:
            attrs = tuple(Attribute(a["name"], tuple(a["labels"])) for a in data["attributes"])
        except (KeyError, TypeError) as exc:
            raise HierarchyError(
                "a schema is {'name': ..., 'attributes': [{'name': ..., 'labels': [...]}, ...]} "
                f"or {{'preset': one of {sorted(SCHEMAS)}}}; got "
                f"{dict(data) if isinstance(data, Mapping) else data!r}") from exc
        return cls(attrs, name=str(data.get("name", "custom")))


_HHGQ_LABELS = ("household", "correctional", "juvenile", "nursing", "other institutional",
                "college", "military", "other non-institutional")
_VA_HISP_RACE = (
    Attribute("votingage", ("under 18", "18+")),
    Attribute("hispanic", ("not Hispanic", "Hispanic")),
    Attribute("cenrace", ("white", "black", "American Indian", "Chinese", "Japanese", "other")),
)

#: The 192-cell schema of the 2018 end-to-end test on 1940 data (docs/data.md, "Schemas").
E2E_1940 = Schema((Attribute("hhgq", _HHGQ_LABELS),) + _VA_HISP_RACE, name="e2e_1940")

#: The 144-cell variant: the six hhgq levels that occur in 1940 data (types 1 and 5 dropped).
E2E_1940_144 = Schema(
    (Attribute("hhgq", tuple(_HHGQ_LABELS[i] for i in (0, 2, 3, 4, 6, 7))),) + _VA_HISP_RACE,
    name="e2e_1940_144")

#: Presets by name: the registry. The 1940 schemas are registered here; :mod:`hierarchy.presets`
#: registers the others when it is imported.
SCHEMAS: dict[str, Schema] = {"e2e_1940": E2E_1940, "e2e_1940_144": E2E_1940_144}


def get_schema(name: str | Schema | Mapping[str, Any]) -> Schema:
    """A preset schema by name (``"e2e_1940"``, ``"e2e_1940_144"``, ``"pl94_2020"``), or a
    schema from a dict.

    ``"pl94_2020"`` is the 2,016-cell PL 94-171 schema of 2020, defined with the other 2020
    presets in :mod:`hierarchy.presets.pl94`; :mod:`hierarchy.presets` registers it when it is
    imported (this module imports no preset), so take ``get_schema`` from there to have every
    preset: ``from hierarchy.presets import get_schema``.

    Examples
    --------
    >>> get_schema("e2e_1940_144").shape
    (6, 2, 2, 6)
    >>> from hierarchy.presets import get_schema
    >>> get_schema("pl94_2020").shape
    (8, 2, 2, 63)
    """
    if isinstance(name, Schema):
        return name
    if isinstance(name, Mapping):
        return Schema.from_dict(name)
    try:
        return SCHEMAS[name]
    except KeyError:
        unregistered = ("" if "hierarchy.presets" in sys.modules else
                        " (the presets of hierarchy.presets, such as 'pl94_2020', register "
                        "when it is imported: from hierarchy.presets import get_schema)")
        raise HierarchyError(f"unknown schema preset {name!r}; presets are {sorted(SCHEMAS)}"
                             f"{unregistered}, or give attributes explicitly") from None


def codes_from_labels(attribute: Attribute, values: Sequence[Any]) -> np.ndarray:
    """Integer codes of a column given as labels or codes (strings of digits allowed).

    Raises with the offending rows when a value is not a level of the attribute.
    """
    values = np.asarray(values, dtype=object)
    uniques, inverse = np.unique(values.astype(str), return_inverse=True)
    lookup = np.empty(uniques.size, dtype=np.int64)
    for i, u in enumerate(uniques):
        try:
            lookup[i] = attribute.code(u)
        except HierarchyError as exc:
            rows = np.flatnonzero(inverse == i)
            raise HierarchyError(f"{exc} (rows {rows[:10].tolist()}"
                                 f"{' …' if rows.size > 10 else ''})") from None
    return lookup[inverse]

