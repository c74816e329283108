"""Conformance of every registered post-processor on the catalogue of small cases
(``tests/conftest.py``), and regressions of the bugs it found."""

from __future__ import annotations

import functools
from typing import Any

from conftest import build_case
from invariants.spec import Spec
from postproc.methods import PostProcessor, catalogue
from postproc.result import Result

METHODS = catalogue()
SEED = 1


def spec_for(entry: PostProcessor, spec: Spec | None) -> Spec | None:
    """The case's spec for a method that keeps invariants; none for the others."""
    return spec if entry.invariants else None


@functools.lru_cache(maxsize=None)
def run(entry: PostProcessor, case_name: str, rng: Any = SEED) -> Result:
    """``entry`` on the case, through the registry (which also verifies the promises)."""
    _, noisy, spec = build_case(case_name)
    return entry(noisy, spec_for(entry, spec), rng=rng)


def test_sampling_manifest_is_strict_json_when_no_move_was_proposed(tmp_path):
    """On a chain below the levels with invariant totals no move can be proposed, and the
    sampler's acceptance of such a level was NaN, which ``manifest.json`` then held as ``NaN`` —
    not JSON (jq and JavaScript reject it). It is null now."""
    import json

    result = run(next(e for e in METHODS if e.name == "sampling"), "chain")
    result.write(tmp_path)

    def refuse(constant):
        raise ValueError(f"manifest.json holds {constant}, which is not JSON")

    manifest = json.loads((tmp_path / "manifest.json").read_text(), parse_constant=refuse)
    acceptance = manifest["provenance"]["sampler"]["acceptance"]
    stats = result.node_stats.groupby("level")[["proposed", "accepted"]].sum()
    assert set(acceptance) == set(result.levels) == set(stats.index)
    for level, (proposed, accepted) in stats.iterrows():
        assert acceptance[level] == (accepted / proposed if proposed else None), level
    assert None in acceptance.values()
