"""SafeTab-style adaptive tabulation of detailed race/ethnicity groups (docs/safetab.md).

Population groups are (geographic entity, race/ethnicity characteristic iteration) pairs of a
level; a record belongs to at most one entity per level (none when its geocode is the level's
``outside`` code, e.g. ``"9999"``: in no AIANNH area) and to every iteration whose detailed codes
(and Hispanic-origin condition) it matches, detailed and regional iterations alike, so to up to
``s`` groups per level (the stability). With level budget ``B`` (ε of
geometric noise, or ρ of discrete Gaussian noise, given directly or implied by a target MOE),
each group gets ``B/s``. A ``TotalOnly`` group releases one noisy total; any other group spends
``γ`` of its budget on a noisy total whose value, against thresholds ``θ1 < θ2 < θ3``, decides
whether the remaining ``1 − γ`` releases the total, or sex × Age4, sex × Age9 or sex × Age23
counts (the thresholds may differ by iteration level). Counts may be negative; no consistency is
imposed. A run is accounted as SafeTab's full algorithm (TotalOnly groups at the full group
budget at every level) unless it asks for the as-released accounting.

Modules, one idea each: :mod:`~postproc.apps.safetab.recodes` (Age4/Age9/Age23, table types),
:mod:`~postproc.apps.safetab.config` (the TOML configuration), :mod:`~postproc.apps.safetab.groups`
(membership, stability, true counts), :mod:`~postproc.apps.safetab.budgets` (exact budget split,
noise, accounting), :mod:`~postproc.apps.safetab.algorithm` (one level's adaptive release),
:mod:`~postproc.apps.safetab.report` (accuracy report), :mod:`~postproc.apps.safetab.run` (a whole
run).

Examples
--------
>>> from hierarchy.synth.detailed1940 import synthesize_detailed_1940
>>> config = SafeTabConfig(
...     (Iteration("0001", "Total", "all"), Iteration("4000", "Asian", ["4000-4999"])),
...     (Level("state", "state", ("0001", "4000"), 2, None, 8, (50, 500, 5000)),),
...     randomness_mode="simulation", seed=11, synthetic=(50_000, 1))
>>> result = safetab(synthesize_detailed_1940(50_000, seed=1).persons, config)
>>> result.plans["state"].noise["step2"].moe
8
>>> release = result.releases["state"]
>>> release.to_table().column_names
['level', 'geography', 'iteration', 'table', 'stat', 'count', 'variance', 'moe']
"""

from postproc.apps.safetab.algorithm import (
    LevelPlan,
    LevelRelease,
    choose_tables,
    measure_level,
    plan_level,
)
from postproc.apps.safetab.budgets import (
    LevelBudget,
    Noise,
    SafeTabAccounting,
    account_safetab,
    notion_of,
)
from postproc.apps.safetab.config import (
    DataColumns,
    Iteration,
    Level,
    SafeTabConfig,
    load_safetab_config,
    parse_safetab_config,
)
from postproc.apps.safetab.groups import (
    GroupCounts,
    Records,
    check_stability,
    iteration_members,
    prepare_records,
    tabulate_groups,
)
from postproc.apps.safetab.recodes import (
    AGE4,
    AGE9,
    AGE23,
    STAT_LABELS,
    TABLE_TYPES,
    AgeRecode,
    cell_labels,
)
from postproc.apps.safetab.report import accuracy_report, format_accounting, format_report
from postproc.apps.safetab.run import (
    SafeTabResult,
    SafeTabRun,
    load_persons,
    run_safetab,
    safetab,
    write_safetab,
)

__all__ = [
    "AGE4", "AGE9", "AGE23", "AgeRecode", "STAT_LABELS", "TABLE_TYPES", "cell_labels",
    "Iteration", "Level", "DataColumns", "SafeTabConfig", "load_safetab_config",
    "parse_safetab_config",
    "Records", "prepare_records", "iteration_members", "GroupCounts", "tabulate_groups",
    "check_stability",
    "LevelBudget", "Noise", "SafeTabAccounting", "account_safetab", "notion_of",
    "LevelPlan", "plan_level", "LevelRelease", "measure_level", "choose_tables",
    "accuracy_report", "format_report", "format_accounting",
    "SafeTabResult", "SafeTabRun", "safetab", "load_persons", "write_safetab", "run_safetab",
]
