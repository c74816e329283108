"""Run configurations for tests: built in Python, saved as TOML when a test needs a file.

:func:`e2e_config` builds the E2E 1940 configuration with :meth:`RunConfig.build` (validated as a
TOML file is); :func:`save_config` writes a configuration, or any TOML-shaped mapping, to a file
with some of its keys changed — also to values validation refuses, for the tests of a file's
errors — so no test templates TOML text.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from hierarchy.io.tomlconfig import dumps
from postproc.apps.runs.config import RunConfig

__all__ = ["LEVELS", "e2e_config", "save_config"]

LEVELS = ("nation", "state", "county", "enum_dist")


def e2e_config(data: str | Path, **options: Any) -> RunConfig:
    """The E2E 1940 configuration on ``data`` (a directory as
    :func:`hierarchy.synth.write_synthetic_1940` writes it): ε = 1 split as in the E2E test,
    the E2E spec, simulation mode with seed 1 — each overridden by ``options``
    (:meth:`RunConfig.build`'s keywords)."""
    data = Path(data)
    settings: dict[str, Any] = dict(persons=data / "persons.parquet",
                                    units=data / "units.parquet", levels=LEVELS, budget=1.0,
                                    seed=None if options.get("mode") == "release" else 1)
    settings.update(options)
    return RunConfig.build(**settings)


def save_config(path: str | Path, config: RunConfig | Mapping[str, Any],
                **sections: Mapping[str, Any] | None) -> Path:
    """Write ``config`` (a RunConfig, or a mapping shaped like the TOML file) to ``path``.

    Each keyword names a section and the keys to change in it: ``solver={"workers": 0}``; a key
    set to ``None`` is removed, and a section set to ``None`` too. Relative paths in the file are
    relative to its directory.
    """
    raw = dict(config.raw if isinstance(config, RunConfig) else config)
    for name, changes in sections.items():
        if changes is None:
            raw.pop(name, None)
            continue
        table = dict(raw.get(name, {}))
        for key, value in changes.items():
            if value is None:
                table.pop(key, None)
            else:
                table[key] = value
        raw[name] = table
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dumps(raw), encoding="utf-8")
    return path
