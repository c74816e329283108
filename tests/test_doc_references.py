"""Every ``:mod:`` reference in the packages' docstrings and docs names a module that exists
(``invariants/spec.py`` cited an ``invariants.catalogue`` that never did)."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_MOD = re.compile(r":mod:`~?([A-Za-z_][\w.]*)`")


def _references() -> list[tuple[str, str]]:
    files = [p for pkg in ("hierarchy", "invariants", "postproc") for p in
             (ROOT / pkg).rglob("*.py")] + list((ROOT / "docs").glob("*.md"))
    return sorted({(str(p.relative_to(ROOT)), m) for p in files
                   for m in _MOD.findall(p.read_text(encoding="utf-8"))})


@pytest.mark.parametrize("where,module", _references())
def test_module_reference_resolves(where, module):
    importlib.import_module(module)   # our modules, or a dependency's (installed with us)
