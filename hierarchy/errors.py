"""The base exception of the ``hierarchy`` package."""


class HierarchyError(ValueError):
    """Bad input to the data model: schema, queries, geography, microdata, budgets or measurements.

    Messages name the offending thing (attribute, query, unit geocode, file and row) and say how to
    fix it.
    """
