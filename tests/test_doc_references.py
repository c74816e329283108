"""References in the code and docs resolve inside the repository.

* Every ``:mod:`` reference in the packages' docstrings and docs names a module that exists
  (``invariants/spec.py`` cited an ``invariants.catalogue`` that never did).
* No file cites a document the repository does not hold — a design document's sections, a
  style guide, or a data file beside the checkout. The code cited such a document's sections 46
  times in 34 library files; every algorithm is now stated in ``docs/`` (``docs/README.md``
  lists where), and the code cites that.
"""

from __future__ import annotations

import importlib
import io
import re
import tokenize
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


# -- citations of documents outside the repository ---------------------------------------------

#: What cites a document outside the repository. Each pattern is written so that it does not
#: match itself (``S[P]EC``), and the words are whole: ``shared`` alone (a shared machine) and
#: identifiers such as ``SPEC_BODY`` are not citations.
OUTSIDE = {
    "the design document (cite docs/ instead)": re.compile(r"\bS[P]EC\b"),
    "a path beside the checkout": re.compile(
        r"(?:\.\./|/work/)s[h]ared\b|\bs[h]ared/(?:data|S[P]EC|S[T]YLE)\b"
        r"|[\"']s[h]ared[\"']\s*/"),
    "a document outside the repository": re.compile(
        r"\bN[M]F_FORMAT\b|\bG[L]S_BLUEDOWN\b|\bS[T]YLE(?:\.md\b| habit)|\bD[E]VELOPERS\b"),
}

#: Where the repository's text lives: the packages, tests, examples, benchmarks, docs, scripts,
#: CI and the top-level files.
ROOTS = ("hierarchy", "invariants", "postproc", "tests", "examples", "benchmarks", "docs",
         "scripts", ".ci")
TOP_FILES = ("README.md", "pyproject.toml")
SUFFIXES = {".py", ".md", ".toml", ".json", ".j2", ".txt", ".cfg", ".ini", ".yml", ".yaml",
            ".sh", ".csv", ""}
_SKIP_DIRS = {"__pycache__", ".venv", ".git", "build", "dist"}


def _text_files() -> list[Path]:
    files = [ROOT / name for name in TOP_FILES if (ROOT / name).is_file()]
    for top in ROOTS:
        for path in sorted((ROOT / top).rglob("*")):
            if (path.is_file() and path.suffix in SUFFIXES
                    and not _SKIP_DIRS & set(path.relative_to(ROOT).parts)
                    and not path.name.endswith(".egg-info")):
                files.append(path)
    return files


def _prose(path: Path, text: str) -> list[tuple[int, str]]:
    """(line, text) of what may cite something: a Python file's comments and strings (its
    identifiers are names, not citations), every line of any other file."""
    if path.suffix != ".py":
        return list(enumerate(text.splitlines(), start=1))
    kinds = {tokenize.COMMENT, tokenize.STRING}
    kinds |= {getattr(tokenize, "FSTRING_MIDDLE", tokenize.STRING)}
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return list(enumerate(text.splitlines(), start=1))
    out = []
    for token in tokens:
        if token.type in kinds:
            for offset, line in enumerate(token.string.splitlines()):
                out.append((token.start[0] + offset, line))
    return out


def outside_citations(path: Path) -> list[str]:
    """``file:line: what — the line`` for every citation of something outside the repository.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return []
    where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name
    hits = []
    for number, line in _prose(path, text):
        for what, pattern in OUTSIDE.items():
            if pattern.search(line):
                hits.append(f"{where}:{number}: {what} — {line.strip()[:120]}")
                break
    return hits


def test_patterns_find_citations_and_spare_words():
    """The patterns flag every form of citation the tree held, and no ordinary word."""
    cited = ["(S" "PEC §4)", "the S" "PEC's base mechanism", "S" "PEC §2–3", "../sh" "ared/S"
             "TYLE.md", "``sh" "ared/data/gong_sex_age.csv``", 'Path("/work/sh' 'ared/data/x")',
             'HERE.parent / "sh' 'ared" / "data"', "(S" "TYLE habit 5)", "N" "MF_FORMAT.md",
             "G" "LS_BLUEDOWN", "D" "EVELOPERS.md"]
    for line in cited:
        assert any(p.search(line) for p in OUTSIDE.values()), line
    spared = ["a shared 2-CPU machine", "SPEC_BODY.format(p='')", "CATALOGUE_SPEC = {",
              "Spec.e2e(levels)", "the spec's invariants", "styles.md", "developers"]
    for line in spared:
        assert not any(p.search(line) for p in OUTSIDE.values()), line


def test_python_identifiers_are_not_citations(tmp_path):
    """In Python only comments and strings are read: a variable named like the document is a
    name (``tests/test_pandas_input.py`` has one), the same word in a comment is a citation."""
    source = tmp_path / "x.py"
    source.write_text("S" "PEC = 1\nprint(S" "PEC)\n# from S" "PEC \u00a74\n", encoding="utf-8")
    assert [hit.split(": ")[0] for hit in outside_citations(source)] == ["x.py:3"]


def test_no_citation_of_documents_outside_the_repository():
    """Every tracked text file cites only what the repository holds (docs/, papers by author and
    year); each hit names its file and line."""
    files = _text_files()
    assert len(files) > 300            # the walk found the repository, not an empty folder
    hits = [hit for path in files for hit in outside_citations(path)]
    assert not hits, (f"{len(hits)} citation(s) of documents outside the repository; cite the "
                      "project's own docs/ (docs/README.md lists them) instead:\n"
                      + "\n".join(hits))
