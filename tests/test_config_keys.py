"""The keys of a run configuration are defined once (``postproc/apps/runs/config_keys.py``):
the parser takes its allowed keys from there, the spec's reader agrees with it, and
``docs/config.md`` is generated from it.

Every check here compares the registry with something independent of it — the parser's own
error messages for an unknown key, the spec reader's (``invariants``), the parser's refusal of a
missing required section or key — so a key added on one side only fails a test.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import pytest

from hierarchy.schema import E2E_1940, Schema
from invariants.errors import SpecError
from invariants.spec import Spec
from postproc.apps.runs.config import config_from_dict
from postproc.apps.runs.config_keys import SECTIONS, allowed_keys, section_names
from postproc.apps.runs.config_reference import config_reference_markdown
from postproc.errors import PostprocError

ROOT = Path(__file__).resolve().parents[1]
PARSER = [ROOT / "postproc" / "apps" / "runs" / name
          for name in ("config.py", "config_sections.py", "config_postprocess.py")]

BASE = {
    "data": {"persons": "p.parquet"},
    "schema": {"preset": "e2e_1940"},
    "geography": {"levels": ["nation", "state"]},
    "workload": {"preset": "e2e"},
    "budget": {"kind": "pure", "total": 1, "preset": "e2e"},
    "mechanism": {"name": "geometric"},
    "randomness": {"mode": "simulation", "seed": 1},
}

# one valid table of every (section, form): the unknown-key test adds a key to each
FORMS = {
    ("data", None): {"persons": "p.parquet"},
    ("schema", "preset"): {"preset": "e2e_1940"},
    ("schema", "explicit"): E2E_1940.to_dict(),
    ("geography", None): {"levels": ["nation", "state"]},
    ("workload", "preset"): {"preset": "e2e"},
    ("workload", "explicit"): {"queries": {"detailed": "detailed"}},
    ("budget", None): {"kind": "pure", "total": 1, "preset": "e2e"},
    ("mechanism", None): {"name": "geometric"},
    ("randomness", None): {"mode": "simulation", "seed": 1},
    ("spec", "preset"): {"preset": "e2e"},
    ("spec", "file"): {"file": "spec.toml"},
    ("postprocess", None): {"method": "topdown"},
    ("solver", None): {"executor": "serial"},
    ("output", None): {"directory": "out"},
}


def _listed(message: str, after: str) -> set[str]:
    """The Python list printed after ``after`` in an error message."""
    match = re.search(re.escape(after) + r"\s*(\[[^\]]*\])", message)
    assert match, f"no list after {after!r} in {message!r}"
    return set(ast.literal_eval(match.group(1)))


def _refusal(data: dict) -> str:
    with pytest.raises(PostprocError) as info:
        config_from_dict(data)
    return str(info.value)


# -- the parser reads the registry -------------------------------------------------------------

def _calls(path: Path, name: str) -> list[ast.Call]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [node for node in ast.walk(tree) if isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", None)) == name]


def _reads_registry(node: ast.expr) -> bool:
    return isinstance(node, ast.Call) and getattr(node.func, "id", None) == "allowed_keys"


def test_every_allowed_set_of_the_parser_comes_from_the_registry():
    sites = 0
    for path in PARSER:
        for call in _calls(path, "table") + _calls(path, "tables"):
            for keyword in call.keywords:
                if keyword.arg == "allowed":
                    sites += 1
                    assert _reads_registry(keyword.value), \
                        f"{path.name}:{call.lineno}: allowed= is not allowed_keys(...)"
        for call in _calls(path, "check_keys"):
            sites += 1
            assert len(call.args) == 1 and _reads_registry(call.args[0]), \
                f"{path.name}:{call.lineno}: check_keys(...) does not read allowed_keys(...)"
    assert sites >= 14      # every section's check (a check removed would go unnoticed)


def test_the_sections_the_parser_accepts_are_the_registrys():
    data = {**BASE, "extras": {}}
    assert _listed(_refusal(data), "sections are") == section_names()
    assert section_names() == {name for name in SECTIONS if "." not in name}


@pytest.mark.parametrize("section,form", sorted(FORMS, key=str))
def test_each_section_refuses_an_unknown_key_listing_the_registrys(section, form):
    data = {**BASE, section: {**FORMS[section, form], "unknown_key": 1}}
    assert _listed(_refusal(data), "allowed:") == allowed_keys(section, form)


def test_an_inline_spec_refuses_an_unknown_key_listing_the_registrys():
    data = {**BASE, "spec": {"invariant": [{"name": "tot", "levels": ["nation"]}],
                             "unknown_key": 1}}
    assert _listed(_refusal(data), "a spec has") == allowed_keys("spec", "inline")


@pytest.mark.parametrize("table,entry", [
    ("invariant", {"name": "tot"}),
    ("constraint", {"name": "c"}),
    ("sum", {"name": "s"}),
])
def test_the_spec_entries_keys_are_the_spec_readers(table, entry):
    """``[[spec.invariant]]``, ``[[spec.constraint]]``, ``[[spec.sum]]``: the keys
    ``invariants.spec.Spec.from_dict`` takes are the registry's."""
    with pytest.raises(SpecError) as info:
        Spec.from_dict({table: [{**entry, "unknown_key": 1}]})
    assert _listed(str(info.value), "allowed:") == {k.name for k in SECTIONS[f"spec.{table}"].keys}


def test_a_schemas_attributes_take_the_registrys_keys():
    keys = {k.name: tomllib.loads(f"v = {k.example}")["v"]
            for k in SECTIONS["schema.attributes"].keys}
    schema = Schema.from_dict({"name": "s", "attributes": [keys]})
    assert schema.names == (keys["name"],)
    for key in keys:                      # each is required
        with pytest.raises(Exception, match="a schema is"):
            Schema.from_dict({"attributes": [{k: v for k, v in keys.items() if k != key}]})


def test_required_sections_are_the_ones_the_parser_requires():
    for name in section_names():
        data = {k: v for k, v in BASE.items() if k != name}
        if SECTIONS[name].required:
            assert f"missing section [{name}]" in _refusal(data), name
        else:
            config_from_dict(data)        # parses without it


@pytest.mark.parametrize("section,key", [(s.name, k.name) for s in SECTIONS.values()
                                         if s.name in BASE for k in s.keys if k.required])
def test_a_required_key_is_required(section, key):
    data = {**BASE, section: {k: v for k, v in BASE[section].items() if k != key}}
    if section == "budget":               # total is required with a preset of e2e
        data["budget"] = {"preset": "e2e"}
    _refusal(data)


def test_every_example_is_a_toml_value_and_every_key_is_described():
    for section in SECTIONS.values():
        assert section.meaning and (section.keys or section.free), section.name
        for key in section.keys:
            tomllib.loads(f"value = {key.example}")
            assert key.type and key.default and key.meaning, (section.name, key.name)
            if section.forms:
                assert set(key.forms) <= set(section.forms), (section.name, key.name)


def test_allowed_keys_of_an_unknown_section_or_form_is_an_error():
    with pytest.raises(PostprocError, match="no section"):
        allowed_keys("extras")
    with pytest.raises(PostprocError, match="has forms"):
        allowed_keys("spec", "inline_spec")
    with pytest.raises(PostprocError, match="has no forms"):
        allowed_keys("output", "preset")


# -- docs/config.md ----------------------------------------------------------------------------

def test_docs_config_md_is_generated_from_the_registry():
    page = (ROOT / "docs" / "config.md").read_text(encoding="utf-8")
    assert page == config_reference_markdown(), (
        "docs/config.md is out of date: regenerate it with "
        "python -m postproc.apps.runs.config_reference > docs/config.md")


def test_the_reference_names_every_section_and_key():
    page = config_reference_markdown()
    for section in SECTIONS.values():
        assert f"## `{section.header}`" in page
        for key in section.keys:
            assert f"| `{key.name}` |" in page, (section.name, key.name)


def test_the_reference_example_is_a_valid_configuration():
    page = config_reference_markdown()
    text = page.split("```toml\n", 1)[1].split("```", 1)[0]
    config = config_from_dict(tomllib.loads(text), text=text)
    assert config.levels == ("country", "region", "district", "village")
    assert config.schema.names == ("sex", "age", "tenure", "children")
