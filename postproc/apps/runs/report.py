"""One self-contained HTML page of an output directory: ``postproc report DIR`` → DIR/report.html.

Works for the directories of

* ``postproc experiment`` (``summary.json``): title, description, parameters, headline numbers,
  then every figure (PNG embedded as base64) and table with its caption;
* ``postproc run`` (``manifest.json``): randomness mode, configuration, per-level solver summary,
  the per-level error table ``confidential/error_table.csv`` and, after ``postproc evaluate
  --save``, the evaluation (``confidential/evaluation.csv``) and comparison of post-processors
  (``confidential/comparison.csv``, shown as MAE and EPL per method);
* anything else: every PNG and CSV found.

Tables longer than ``max_rows`` are cut, with a relative link to the full CSV. Nothing is fetched
from the network; the page opens from a file.

The release gate: the errors of a run are computed from the confidential data. For a
release-mode run, ``DIR/report.html`` shows only what may be published; the errors appear only
in ``DIR/confidential/report.html``, written when asked for (``confidential=True``,
``postproc report DIR --confidential``) under a CONFIDENTIAL banner. A simulation run (labelled
unsafe throughout) shows them in ``DIR/report.html``.
"""

from __future__ import annotations

import base64
import html
import math
from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from postproc.errors import PostprocError

__all__ = ["write_report", "render_report"]

_CSS = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 2em auto;
       max-width: 1150px; color: #222; line-height: 1.45; padding: 0 1em; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; } h2 { margin-top: 1.8em; border-bottom: 1px solid
#ddd; padding-bottom: 0.2em; } h3 { margin-top: 1.4em; }
.banner { padding: 0.6em 1em; border-radius: 4px; margin: 1em 0; font-weight: 600; }
.unsafe { background: #fff3cd; border: 1px solid #e0b000; }
.safe { background: #e7f5e7; border: 1px solid #4a4; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.6em 0; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.55em; text-align: right; }
th { background: #f2f2f2; } td.text, th.text { text-align: left; }
figure { margin: 1.2em 0; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption, .caption { color: #444; font-size: 0.92em; margin-top: 0.3em; }
.note { color: #666; font-size: 0.85em; } pre { background: #f7f7f7; padding: 0.8em;
overflow-x: auto; font-size: 0.85em; white-space: pre-wrap; }
nav a { margin-right: 1em; }
"""


def _fmt(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if math.isnan(value):
            return ""
        if math.isinf(value):
            return "undefined" if value > 0 else "−inf"
        if 0 < abs(value) < 1e-6:
            return "≈ 0"                  # float rounding of an exact 0 (e.g. a calibrated total)
        if value == int(value) and abs(value) < 1e15:
            return f"{int(value):,}"
        return f"{value:,.4g}" if abs(value) >= 1e-3 else f"{value:.3g}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _table_html(frame: pd.DataFrame, *, max_rows: int = 60, link: str | None = None) -> str:
    shown = frame.head(max_rows)
    text = {c: not pd.api.types.is_numeric_dtype(frame[c]) for c in frame.columns}
    head = "".join(f"<th class='{'text' if text[c] else ''}'>"
                   f"{html.escape(str(c))}</th>" for c in frame.columns)
    body = []
    for row in shown.itertuples(index=False):
        cells = []
        for column, value in zip(frame.columns, row):
            cls = "text" if text[column] else ""
            cells.append(f"<td class='{cls}'>{html.escape(_fmt(value))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    out = f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    if len(frame) > max_rows:
        more = f" — full table: <a href='{html.escape(link)}'>{html.escape(link)}</a>" \
            if link else ""
        out += (f"<p class='note'>showing {max_rows} of {len(frame):,} rows{more}</p>")
    return out


def _plain(value: Any) -> str:
    if isinstance(value, dict):
        return "; ".join(f"{k} = {_plain(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return ", ".join(_plain(v) for v in value)
    return _fmt(value)


def _mapping_table(mapping: dict[str, Any]) -> str:
    rows = "".join(f"<tr><th class='text'>{html.escape(str(k))}</th>"
                   f"<td class='text'>{html.escape(_plain(v))}</td></tr>"
                   for k, v in mapping.items())
    return f"<table>{rows}</table>"


def _figure_html(path: Path, caption: str) -> str:
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return (f"<figure><img alt='{html.escape(path.name)}' src='data:image/png;base64,{data}'>"
            f"<figcaption><b>{html.escape(path.name)}</b> — {html.escape(caption)}"
            f"</figcaption></figure>")


def _csv_section(directory: Path, file: str, caption: str, max_rows: int,
                 link_prefix: str = "") -> str:
    path = directory / file
    try:
        frame = pd.read_csv(path)
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        return f"<p class='note'>{html.escape(file)}: unreadable ({html.escape(str(exc))})</p>"
    return (f"<h3>{html.escape(file)}</h3><p class='caption'>{html.escape(caption)}</p>"
            + _table_html(frame, max_rows=max_rows, link=link_prefix + file))


def _banner(randomness: dict[str, Any] | None) -> str:
    if not randomness:
        return ""
    safe = bool(randomness.get("safe_for_release"))
    label = randomness.get("label") or ("release mode" if safe else "simulation mode")
    return f"<div class='banner {'safe' if safe else 'unsafe'}'>{html.escape(label)}</div>"


def _description(text: str) -> str:
    paragraphs = [p.strip() for p in text.split("\n\n") if p.strip()]
    return "".join(f"<p>{html.escape(' '.join(p.split()))}</p>" for p in paragraphs)


def _experiment_body(directory: Path, summary: dict[str, Any], max_rows: int) -> tuple[str, set]:
    from postproc.apps.experiments import EXPERIMENTS, describe

    parts = []
    name = summary.get("experiment", "")
    if name in EXPERIMENTS:
        text = describe(name)
        parts.append(_description(text.split("\n", 1)[1] if "\n" in text else text))
    parts.append(_banner(summary.get("randomness")))
    parts.append("<h2 id='headline'>Headline numbers</h2>")
    parts.append(_mapping_table(summary.get("headline", {})))
    for note in summary.get("notes", []):
        parts.append(f"<p class='note'>Note: {html.escape(note)}</p>")
    parts.append("<h2 id='figures'>Figures</h2>")
    used = set()
    for item in summary.get("figures", []):
        path = directory / item["file"]
        if path.is_file():
            parts.append(_figure_html(path, item.get("caption", "")))
            used.add(item["file"])
    parts.append("<h2 id='tables'>Tables</h2>")
    for item in summary.get("tables", []):
        if (directory / item["file"]).is_file():
            parts.append(_csv_section(directory, item["file"], item.get("caption", ""),
                                      max_rows))
            used.add(item["file"])
    parts.append("<h2 id='parameters'>Parameters</h2>")
    parameters = dict(summary.get("parameters", {}))
    parameters["run time (s)"] = summary.get("seconds")
    parts.append(_mapping_table(parameters))
    return "".join(parts), used


_CONFIDENTIAL_BANNER = ("<div class='banner unsafe'>CONFIDENTIAL - this page shows errors "
                        "computed from the confidential data. Do not publish it.</div>")


def _run_body(directory: Path, manifest: dict[str, Any], max_rows: int, *,
              errors: bool, errors_dir: Path, link_prefix: str) -> tuple[str, set]:
    parts = [_banner(manifest.get("randomness"))]
    config = manifest.get("config", {})
    if config:
        described = {section: config.get(section) for section in
                     ("schema", "geography", "workload", "budget", "mechanism", "spec",
                      "randomness") if section in config}
        parts.append("<h2 id='configuration'>Configuration</h2>")
        parts.append(_mapping_table(described))
    levels = manifest.get("levels", {})
    if levels:
        parts.append("<h2 id='levels'>Levels</h2>")
        frame = pd.DataFrame([{"level": lv, **{k: v for k, v in info.items()
                                                 if not isinstance(v, dict)}}
                              for lv, info in levels.items()])
        parts.append(_table_html(frame, max_rows=max_rows))
    used = set()
    if not errors:
        parts.append("<h2 id='errors'>Errors</h2><p class='note'>Release mode: errors against "
                     "the confidential data are not part of this page. Write them (under "
                     "confidential/, never to publish) with <code>postproc report "
                     f"{html.escape(str(directory))} --confidential</code>.</p>")
        return "".join(parts), used
    sections = [("error_table.csv", "Errors of the noisy measurements and of TopDown against the "
                                    "confidential data, per level and query (MAE = median "
                                    "absolute error), written by postproc run."),
                ("evaluation.csv", "postproc evaluate: error metrics and EPL (improved estimator, "
                                   "95% bootstrap interval; undefined where every error is 0) "
                                   "per level and query.")]
    parts.append("<h2 id='errors'>Errors</h2>")
    found = False
    for file, caption in sections:
        if (errors_dir / file).is_file():
            parts.append(_csv_section(errors_dir, file, caption, max_rows, link_prefix))
            used.add(file)
            found = True
    if (errors_dir / "comparison.csv").is_file():
        from postproc.evaluation.evaluate import pivot

        frame = pd.read_csv(errors_dir / "comparison.csv")
        for value, what in (("mae", "MAE (median absolute error)"),
                            ("rmse", "RMSE"), ("epl", "EPL (improved estimator)")):
            if value in frame:
                parts.append(f"<h3>Comparison of post-processors: {what}</h3>"
                             f"<p class='caption'>Same measurements, same budget; bottom-up "
                             f"draws its own measurement at the same total ε.</p>")
                parts.append(_table_html(pivot(frame, value), max_rows=max_rows))
        parts.append(_csv_section(errors_dir, "comparison.csv", "All metrics of every method.",
                                  max_rows, link_prefix))
        used.add("comparison.csv")
        found = True
    if not found:
        parts.append("<p class='note'>No error tables yet: run <code>postproc evaluate "
                     f"{html.escape(str(directory))} --truth DATA_DIR --save</code> (add "
                     "<code>--compare</code> to compare post-processors).</p>")
    return "".join(parts), used


def _others(directory: Path, used: set, max_rows: int) -> str:
    pngs = sorted(p for p in directory.glob("*.png") if p.name not in used)
    csvs = sorted(p for p in directory.glob("*.csv") if p.name not in used)
    if not pngs and not csvs:
        return ""
    parts = ["<h2 id='other'>Other files</h2>"]
    parts += [_figure_html(p, "") for p in pngs]
    parts += [_csv_section(directory, p.name, "", max_rows) for p in csvs]
    return "".join(parts)


def render_report(directory: str | Path, *, title: str | None = None, max_rows: int = 60,
                  confidential: bool = False) -> str:
    """The HTML page of an output directory (see the module docstring).

    Parameters
    ----------
    directory : str or Path
    title : str, optional
        Default: the experiment's title, or "postproc run: <directory>".
    max_rows : int
        Rows shown per table.
    confidential : bool
        The page for ``DIR/confidential/report.html``: a run's errors against the confidential
        data, under a CONFIDENTIAL banner.

    Returns
    -------
    str

    Raises
    ------
    PostprocError
        The directory does not exist, or holds nothing to report.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "numbers.csv").write_text("x,y\\n1,2.5\\n")
    >>> page = render_report(d)
    >>> "<td class=''>2.5</td>" in page, page.startswith("<!DOCTYPE html>")
    (True, True)
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise PostprocError(f"{directory} is not a directory")
    from hierarchy.storage import read_json

    if (directory / "summary.json").is_file():
        summary = read_json(directory / "summary.json")
        body, used = _experiment_body(directory, summary, max_rows)
        title = title or summary.get("title") or summary.get("experiment", "experiment")
    elif (directory / "manifest.json").is_file():
        manifest = read_json(directory / "manifest.json")
        release = bool(manifest.get("safe_for_release"))
        errors_dir = directory / "confidential"
        if not (errors_dir / "error_table.csv").is_file() and not release:
            errors_dir = directory  # a run written before confidential/ existed
        body, used = _run_body(directory, manifest, max_rows,
                               errors=confidential or not release, errors_dir=errors_dir,
                               link_prefix="" if confidential or errors_dir == directory
                               else "confidential/")
        if confidential:
            body = _CONFIDENTIAL_BANNER + body
        title = title or f"postproc run: {directory.name}"
    elif confidential:
        raise PostprocError(f"{directory} is not a postproc run directory (no manifest.json); "
                            "--confidential applies to runs")
    else:
        body, used = "", set()
        title = title or f"Report: {directory.name}"
    body += _others(directory, used, max_rows)
    if not body:
        raise PostprocError(f"{directory} holds no summary.json, manifest.json, PNG or CSV to "
                            f"report on")
    nav = "".join(f"<a href='#{a}'>{t}</a>" for a, t in _anchors(body))
    return ("<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
            f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>"
            f"<h1>{html.escape(title)}</h1><nav>{nav}</nav>{body}</body></html>\n")


def _anchors(body: str) -> Iterable[tuple[str, str]]:
    names = {"headline": "Headline", "figures": "Figures", "tables": "Tables",
             "parameters": "Parameters", "configuration": "Configuration", "levels": "Levels",
             "errors": "Errors", "other": "Other files"}
    return [(a, t) for a, t in names.items() if f"id='{a}'" in body]


def write_report(directory: str | Path, *, title: str | None = None, max_rows: int = 60,
                 confidential: bool = False) -> Path:
    """Write ``directory/report.html`` (or, with ``confidential``, the run's
    ``directory/confidential/report.html``) atomically and return its path.

    Parameters
    ----------
    directory : str or Path
    title : str, optional
    max_rows : int
    confidential : bool
        See :func:`render_report`.

    Returns
    -------
    pathlib.Path

    Raises
    ------
    PostprocError
        As :func:`render_report`.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "t.csv").write_text("a\\n1\\n")
    >>> write_report(d).name
    'report.html'
    """
    from hierarchy.storage import atomic_path, confidential_directory

    page = render_report(directory, title=title, max_rows=max_rows, confidential=confidential)
    path = (confidential_directory(directory, what="errors against the confidential data")
            if confidential else Path(directory)) / "report.html"
    with atomic_path(path) as tmp:
        tmp.write_text(page, encoding="utf-8")
    return path
