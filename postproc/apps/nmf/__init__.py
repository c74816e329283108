"""The 2020 P.L. 94-171 Noisy Measurement File (NMF): its published layout
(:mod:`~postproc.apps.nmf.layout`), its reader (:mod:`~postproc.apps.nmf.reader`) and a synthetic
NMF in that layout, with the truth beside it (:mod:`~postproc.apps.nmf.synthetic`). Names load on
first use.

Examples
--------
>>> from postproc.apps.nmf import PRODUCTS, block_geoid
>>> PRODUCTS["units"], block_geoid("0441000700491024400701070233001")
('US_Unit_PL_PROD', '440070107023001')
"""

from hierarchy.exports import lazy_exports

# exported name -> the module that defines it
_EXPORTS = {
    **dict.fromkeys(("PRODUCTS", "GEOLEVELS", "LEVEL_NAMES", "DPQUERY", "CONSTRAINT", "DATASETS",
                     "PARTITION", "SUCCESS", "AXES", "AXIS_RECODES", "GEOCODE_WIDTHS",
                     "STATE_PIECES_2020", "AIAN_STATES_2020", "RowKind", "row_kinds",
                     "state_piece", "split_piece", "partition_name", "dataset_path",
                     "tabulation_block", "block_geoid", "county_fips"),
                    "postproc.apps.nmf.layout"),
    "write_synthetic_nmf": "postproc.apps.nmf.synthetic",
    **dict.fromkeys(("read_nmf", "read_state_totals", "STATE_TOTALS_2020"),
                    "postproc.apps.nmf.reader"),
    "inspect_nmf": "postproc.apps.nmf.summary",
    **dict.fromkeys(("run_nmf", "production_options"), "postproc.apps.nmf.run"),
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
