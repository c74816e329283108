"""Build every kind of HTML report on small data and screenshot each in headless Chromium.

    .venv/bin/python scripts/screenshot_reports.py [--out DIR] [--persons N] [--skip-build]

What it builds under ``DIR`` (default ``./report-screenshots``), all in seconds to a minute:

* ``demo/``: ``postproc demo`` at ``--persons`` (simulation mode; at small sizes every state has
  one county, the case where county and state coincide), then ``postproc evaluate --save`` and
  ``postproc evaluate --compare --save`` of its run, then ``postproc report demo/run``;
* ``compare/``: ``postproc compare`` of the demo's configuration (topdown, hay, noisy), whose
  ``compare.html`` is the comparison page; ``postproc report compare`` too;
* ``exp_<name>/``: ``postproc experiment NAME --quick --report`` for every experiment;
* ``exp_<name>_small/``: Petti–Flaxman and Clark–Dajani's quick variants on 200,000 persons in
  all 49 states — one county per state, so the county level repeats the state level (the case
  of coinciding series in their figures) — and their reports (through the library: the command
  line has no overrides);
* ``release/``: the demo's configuration in release mode (no seed), ``postproc run
  --error-table``, then ``postproc report release`` (public: no errors) and ``postproc report
  release --confidential`` (``release/confidential/report.html``).

Then it writes one full-page PNG per page into ``DIR/screenshots/`` with Debian's
``/usr/bin/chromium`` (``apt-get install -y chromium``): the page height is measured first (a
copy of the page with a script that writes ``document.documentElement.scrollHeight`` into the
DOM, read back with ``--dump-dom``), then ``--screenshot`` at 1280 × that height (at most
``--max-height``; a longer page is cut, and the script says so).

This is a tool for looking at the reports, not a test: CI has no Chromium.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

EXPERIMENTS = ("clark_dajani", "flaxman2019", "petti_flaxman")
#: Experiments also run at a size where every state has one county.
SMALL = ("clark_dajani", "petti_flaxman")
CHROMIUM = "/usr/bin/chromium"
WIDTH = 1280


def postproc(*args: str) -> None:
    """Run ``postproc ARGS`` with this interpreter; stop on failure."""
    command = [sys.executable, "-m", "postproc", *args]
    print("$ postproc " + " ".join(args), flush=True)
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"failed ({done.returncode}): {' '.join(command)}\n{done.stdout}\n{done.stderr}")


def build(out: Path, persons: int) -> None:
    """Every report of the module docstring, under ``out``."""
    demo = out / "demo"
    postproc("demo", "--out", str(demo), "--persons", str(persons), "--no-progress")
    run = demo / "run"
    postproc("evaluate", str(run), "--truth", str(demo / "data"), "--save", "--n-boot", "50")
    postproc("evaluate", str(run), "--truth", str(demo / "data"), "--save", "--compare",
             "--n-boot", "50")
    postproc("report", str(run))
    postproc("compare", str(demo / "config.toml"), "--methods", "topdown,hay,noisy",
             "--out", str(out / "compare"), "--n-boot", "50", "--no-progress")
    postproc("report", str(out / "compare"))
    for name in EXPERIMENTS:
        postproc("experiment", name, "--quick", "--out", str(out / f"exp_{name}"), "--report")
    from postproc.apps.experiments import run_experiment
    from postproc.apps.runs.report import write_report

    for name in SMALL:
        print(f"$ run_experiment({name!r}, quick=True, persons=200_000, states=None)",
              flush=True)
        run_experiment(name, out / f"exp_{name}_small", quick=True, persons=200_000,
                       states=None, log=lambda message: None)
        write_report(out / f"exp_{name}_small")
    config = (demo / "config.toml").read_text()
    release = re.sub(r'mode = "simulation"\nseed = \d+', 'mode = "release"', config)
    if release == config:
        sys.exit("could not turn the demo's configuration into a release-mode one")
    release = release.replace('persons = "data/', f'persons = "{demo}/data/').replace(
        'units = "data/', f'units = "{demo}/data/')
    (out / "release.toml").write_text(release)
    postproc("run", str(out / "release.toml"), "--out", str(out / "release"), "--error-table",
             "--no-progress")
    postproc("report", str(out / "release"))
    postproc("report", str(out / "release"), "--confidential")


def page_height(page: Path) -> int:
    """The rendered height of ``page`` in CSS pixels at :data:`WIDTH`."""
    probe = "<script>document.body.setAttribute('data-height', " \
            "document.documentElement.scrollHeight)</script>"
    text = page.read_text(encoding="utf-8")
    with tempfile.NamedTemporaryFile("w", suffix=".html", dir=page.parent, delete=False,
                                     encoding="utf-8") as tmp:
        tmp.write(text.replace("</body>", probe + "</body>") if "</body>" in text
                  else text + probe)
    try:
        done = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                               "--hide-scrollbars", f"--window-size={WIDTH},1000",
                               "--dump-dom", f"file://{tmp.name}"],
                              capture_output=True, text=True, timeout=120)
    finally:
        Path(tmp.name).unlink()
    found = re.search(r'data-height="(\d+)"', done.stdout)
    return int(found.group(1)) if found else 4000


def screenshot(page: Path, png: Path, max_height: int) -> tuple[int, bool]:
    """A full-page PNG of ``page``; returns the page height and whether it was cut."""
    height = page_height(page)
    shown = min(height, max_height)
    subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                    "--hide-scrollbars", f"--window-size={WIDTH},{shown}",
                    f"--screenshot={png}", f"file://{page}"],
                   capture_output=True, text=True, timeout=120, check=True)
    return height, height > max_height


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="report-screenshots", help="working directory")
    parser.add_argument("--persons", type=int, default=5_000,
                        help="persons of the demo (default 5,000: one county per state)")
    parser.add_argument("--max-height", type=int, default=16_000,
                        help="tallest screenshot in pixels (default 16,000)")
    parser.add_argument("--skip-build", action="store_true",
                        help="screenshot the pages already in --out")
    args = parser.parse_args(argv)
    if not Path(CHROMIUM).is_file():
        sys.exit(f"{CHROMIUM} not found: apt-get install -y chromium")
    out = Path(args.out).resolve()
    if not args.skip_build:
        if out.exists():
            shutil.rmtree(out)
        out.mkdir(parents=True)
        build(out, args.persons)
    shots = out / "screenshots"
    shots.mkdir(exist_ok=True)
    pages = sorted(p for p in out.rglob("*.html") if shots not in p.parents)
    for page in pages:
        name = "__".join(page.relative_to(out).with_suffix("").parts) + ".png"
        height, cut = screenshot(page, shots / name, args.max_height)
        print(f"{shots / name}: {page.relative_to(out)}, {height:,} px"
              + (f" (cut at {args.max_height:,})" if cut else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
