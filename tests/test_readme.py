"""The README holds exactly two set-up commands, and CI runs the test one verbatim."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _setup_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Set up", 1)[1].split("\n## ", 1)[0]
    return [line.strip() for line in section.splitlines() if line.startswith("    ")]


def test_readme_has_exactly_two_setup_commands():
    commands = _setup_commands()
    assert len(commands) == 2
    assert commands[0].endswith("postproc demo")
    assert "pytest" in commands[1]
    for command in commands:
        assert command.startswith("python3 -m venv .venv && .venv/bin/pip install ")


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert _setup_commands()[1] in [line.strip() for line in ci]
    assert re.search(r"^rm -rf \.venv$", "\n".join(ci), re.M), "CI must start from a fresh venv"
