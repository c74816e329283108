"""HTML reports: one layout, one number format, descriptions rendered from reST.

* :mod:`postproc.reports.numbers` — :func:`~postproc.reports.numbers.format_number`, the one way
  every report, the comparison page and its terminal table write a number;
* :mod:`postproc.reports.notes` — :func:`~postproc.reports.notes.epl_notes`, the reasons a
  table's EPLs are not numbers said once per kind, under the table;
* :mod:`postproc.reports.rest` — the small reST subset of the experiments' descriptions
  (paragraphs, bullet lists, ````literal````, ``:func:`x``` roles, ``*emphasis*``) as HTML;
* :mod:`postproc.reports.page` — the Jinja2 templates (``templates/*.html.j2``, autoescaped):
  ``base.html.j2`` (style, banners, navigation) that the run and experiment reports
  (:mod:`postproc.apps.runs.report`) and the comparison page (:mod:`postproc.evaluation.compare`)
  extend, and the tables and figures they show.

Nothing here reads an output directory or knows what a run is: the callers decide what a page
shows (and what the release gate keeps off it).
"""
