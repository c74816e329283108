"""Print — or write in place — the markdown tables of ``docs/experiments.md`` from the reference
analyses' outputs.

One command regenerates every table of that page (the analyses run one after another into DIR,
about 10 minutes on 2 cores and an hour more for ``petti_flaxman_full``, Petti & Flaxman at the
1940 census's size; an analysis whose ``DIR/NAME/summary.json`` exists is reused)::

    python examples/experiment_tables.py /tmp/full_runs --run --write docs/experiments.md

``--write FILE`` replaces each table of FILE that follows a ``<!-- table: NAME -->`` comment with
the table of that name, and leaves every other line alone; without it the tables are printed.
``--run`` first runs the missing analyses (the full variants, as ``postproc experiment NAME
--out DIR/NAME``); without it the script reads outputs already there::

    postproc experiment petti_flaxman --out experiments/petti_flaxman
    postproc experiment petti_flaxman --persons 132000000 --workers 2 \\
        --out experiments/petti_flaxman_full
    postproc experiment petti_flaxman --persons 132000000 --workers 2 \\
        --composition counties_1940 --out experiments/petti_flaxman_counties_1940
    postproc experiment flaxman2019   --out experiments/flaxman2019
    postproc experiment clark_dajani  --out experiments/clark_dajani
    python examples/experiment_tables.py experiments

Paper numbers come from ``paper_comparison.csv`` (written by ``petti_flaxman`` from
``postproc/apps/experiments/_papers.py``); a cell is ``–`` where the paper has no number. The
prose around the tables quotes some of their numbers: read it again after a regeneration.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import pandas as pd

EPSILONS = [0.25, 0.5, 0.75, 1.0, 2.0, 4.0, 6.0, 8.0]


def _fmt(value, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    if isinstance(value, str):
        return value
    if abs(value) >= 100 or float(value).is_integer():
        return f"{value:.0f}" if abs(value) >= 10 or float(value).is_integer() else f"{value:g}"
    return f"{value:.{digits}g}"


def _epl(epl, low, high=float("nan")) -> str:
    """An EPL cell: the number (with its interval when ``high`` is given), ``≥ b`` for a
    one-sided bound, or ``–``."""
    from postproc.evaluation.epl import epl_text

    text = epl_text(epl, low, high, number=_fmt)
    return "–" if text in ("undefined", "unbounded") else text


def _pct(value) -> str:
    return "–" if value is None or not math.isfinite(value) else f"{100 * value:.0f} %"


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def petti_flaxman(directory: Path, tag_prefix: str = "petti_flaxman", states: bool = False
                  ) -> str:
    """The Petti & Flaxman tables of one run (``tag_prefix``: the name their comments carry;
    ``states``: with the table of the state level, which the paper does not report)."""
    metrics = pd.read_csv(directory / "topdown_metrics.csv").set_index(
        ["epsilon", "level", "query"])
    paper = pd.read_csv(directory / "paper_comparison.csv")
    closest = pd.read_csv(directory / "closest_srs.csv").set_index(
        ["epsilon", "level", "query", "epl_estimator"])
    bias = pd.read_csv(directory / "bias_by_homogeneity.csv")
    epsilons = sorted(metrics.index.get_level_values("epsilon").unique())

    def reference(quantity, level, epsilon, index=None):
        rows = paper[(paper["quantity"] == quantity) & (paper["level"] == level)
                     & (paper["epsilon"] == epsilon)]
        if index is not None:
            rows = rows[rows["homogeneity_index"] == index]
        return float(rows["paper"].iloc[0]) if len(rows) else None

    out = []
    for query, tag, title in (("total", "tc", "TC (totals)"),
                              ("va_hisp_race:authors", "sc",
                               "SC (va_hisp_race, the paper's cells)")):
        rows = []
        for e in epsilons:
            row = [f"{e:g}"]
            for level in ("enum_dist", "county"):
                m = metrics.loc[(e, level, query)]
                row += [_fmt(m["mae"]), _fmt(reference(f"{tag}_mae", level, e)),
                        _fmt(m["epl_published"]),
                        _fmt(reference(f"{tag}_epl_published", level, e)),
                        _epl(m["epl"], m["epl_ci_low"])]
            rows.append(row)
        out.append(f"<!-- table: {tag_prefix} {tag} -->\n**{title}**\n\n" + _table(
            ["ε", "ED MAE", "paper", "ED EPL (published)", "paper", "ED EPL (improved)",
             "county MAE", "paper", "county EPL (published)", "paper", "county EPL (improved)"],
            rows))
    for level, query, tag, title in (("enum_dist", "total", "tc", "ED totals"),
                                     ("county", "total", "tc", "county totals"),
                                     ("county", "va_hisp_race:authors", "sc",
                                      "county SC (the paper's cells)")):
        rows = []
        for e in epsilons:
            improved = closest.loc[(e, level, query, "improved")]
            published = closest.loc[(e, level, query, "published")]
            row = [f"{e:g}", _pct(improved["joint_fraction"]),
                   _pct(improved["joint_interpolated_fraction"]),
                   _pct(published["joint_fraction"]),
                   _pct(reference(f"srs_match_joint_{tag}", level, e)),
                   _pct(published["error_fraction"]),
                   _pct(reference(f"srs_match_error_{tag}", level, e))]
            if tag == "sc":
                row.append(_pct(reference("srs_match_joint_sc_table_1", level, e)))
            rows.append(row)
        header = ["ε", "joint (improved EPL)", "interpolated", "joint (published EPL)",
                  "paper's numbers, joint", "error alone", "paper's numbers, error alone"]
        if tag == "sc":
            header.append("paper's Table 1")
        out.append(f"<!-- table: {tag_prefix} srs {level} {tag} -->\n**{title}**\n\n"
                   + _table(header, rows))
    for level in ("county", "enum_dist"):
        chosen = bias[(bias["level"] == level) & (bias["definition"] == "authors")]
        indices = sorted(set(paper.loc[(paper["quantity"] == "tc_bias")
                                       & (paper["level"] == level), "homogeneity_index"]))
        indices = [int(i) for i in indices] or sorted(chosen["homogeneity_index"].unique())[:8]
        rows = []
        for e in epsilons:
            part = chosen[chosen["epsilon"] == e].set_index("homogeneity_index")
            row = [f"{e:g}"]
            for i in indices:
                ours = part["bias"].get(i)
                theirs = reference("tc_bias", level, e, i)
                row.append(f"{_fmt(ours, 2)} / {_fmt(theirs, 2)}")
            rows.append(row)
        counts = chosen[chosen["epsilon"] == epsilons[0]].set_index("homogeneity_index")["n"]
        seeds = max(1, round(counts.sum() / max(1, metrics.loc[(epsilons[0], level, "total"),
                                                               "units"])))
        rows.append(["units"] + [_fmt(counts.get(i, 0) / seeds) for i in indices])
        out.append(f"<!-- table: {tag_prefix} bias {level} -->\n" + _table(
            ["ε \\ index"] + [str(i) for i in indices], rows))
    zero = bias[(bias["definition"] == "zero_cells") & (bias["homogeneity_index"] == 0)]
    authors = bias[(bias["definition"] == "authors") & (bias["homogeneity_index"] == 0)]
    rows = []
    for e in epsilons:
        row = [f"{e:g}"]
        for level in ("county", "enum_dist"):
            for frame in (authors, zero):
                part = frame[(frame["level"] == level) & (frame["epsilon"] == e)]
                row.append(_fmt(float(part["bias"].iloc[0]), 3) if len(part) else "–")
            row.append(_fmt(reference("tc_bias", level, e, 0), 3))
        rows.append(row)
    out.append(f"<!-- table: {tag_prefix} bias index 0 -->\n" + _table(
        ["ε", "county, authors' index 0", "county, zero cells 0", "paper",
         "ED, authors' index 0", "ED, zero cells 0", "paper"], rows))
    if states:
        rows = []
        for e in epsilons:
            row = [f"{e:g}"]
            for query in ("total", "va_hisp_race:authors", "va_hisp_race>0"):
                m = metrics.loc[(e, "state", query)]
                if m["mae"] == 0 and not math.isfinite(m["epl_published"]):
                    row += ["0", "∞ (exact)", "∞ (exact)"]    # held invariant: every error 0
                    continue
                row += [_fmt(m["mae"]), _fmt(m["epl_published"]), _epl(m["epl"], m["epl_ci_low"])]
            rows.append(row)
        out.append(f"<!-- table: {tag_prefix} state -->\n**States (the paper reports none)**\n\n"
                   + _table(["ε", "TC MAE", "TC EPL (published)", "TC EPL (improved)", "SC MAE",
                             "SC EPL (published)", "SC EPL (improved)", "SC>0 MAE",
                             "SC>0 EPL (published)", "SC>0 EPL (improved)"], rows))
    return "\n\n".join(out)


def petti_flaxman_full(directory: Path) -> str:
    """The tables of the run at the 1940 census's size (markers ``petti_flaxman_full …``)."""
    return petti_flaxman(directory, "petti_flaxman_full", states=True)


#: The tables of the full-size run on the ``counties_1940`` composition that
#: ``docs/experiments.md`` shows ("What makes the county totals' error").
COUNTIES_1940_TABLES = ("tc", "bias county", "bias index 0")


def petti_flaxman_counties_1940(directory: Path) -> str:
    """The same study at the 1940 census's size on the ``counties_1940`` composition: its TC and
    county bias tables (markers ``petti_flaxman_counties_1940 …``)."""
    prefix = "petti_flaxman_counties_1940"
    blocks = (MARKER + chunk for chunk in petti_flaxman(directory, prefix).split(MARKER)[1:])
    return "\n\n".join(block.strip() for block in blocks
                        if block[len(MARKER) + len(prefix) + 1:].split(" -->")[0]
                        in COUNTIES_1940_TABLES)


def flaxman2019(directory: Path) -> str:
    leaf = pd.read_csv(directory / "leaf_epl.csv")
    rows = [[f"{r.epsilon:g}", _fmt(r.gdpc), _fmt(r.adpc), _fmt(r.rdpc), _fmt(r.hay)]
            for r in leaf.itertuples()]
    out = ["<!-- table: flaxman2019 residual -->\n" + _table(
        ["ε", "GDPC", "ADPC (P = 4)", "RDPC (J = 3)", "Hay"], rows)]
    direct = pd.read_csv(directory / "neighbour_epl.csv")
    rows = []
    for e, part in direct.groupby("epsilon"):
        row = [f"{e:g}"]
        for method in ("gdpc", "adpc", "rdpc"):
            cells = part[part["method"] == method].set_index("unit")
            for unit in ("source leaf", "destination leaf"):
                r = cells.loc[unit]
                row.append(_epl(r["epl"], r["epl_ci_low"], r["epl_ci_high"]))
            row.append(_fmt(cells["residual_epl"].iloc[0]))
        rows.append(row)
    out.append("<!-- table: flaxman2019 direct -->\n" + _table(
        ["ε", "GDPC source", "GDPC destination", "GDPC residual", "ADPC source",
         "ADPC destination", "ADPC residual", "RDPC source", "RDPC destination",
         "RDPC residual"], rows))
    return "\n\n".join(out)


def clark_dajani(directory: Path) -> str:
    table = pd.read_csv(directory / "bottom_up_errors.csv")
    raw = table[table["method"] == "bottom_up"].set_index(["epsilon", "level", "query"])
    epsilons = sorted(raw.index.get_level_values("epsilon").unique())
    rows = []
    for e in epsilons:
        row = [f"{e:g}"]
        for level, query in (("enum_dist", "total"), ("county", "total"),
                             ("enum_dist", "va_hisp_race"), ("county", "va_hisp_race")):
            r = raw.loc[(e, level, query)]
            row += [_fmt(r["l1"]), _fmt(r["l2"]), _fmt(r["rmse_theory"])]
        rows.append(row)
    return "<!-- table: clark_dajani -->\n" + _table(
        ["ε", "ED TC L1", "L2", "exact L2", "county TC L1", "L2", "exact L2",
         "ED SC L1", "L2", "exact L2", "county SC L1", "L2", "exact L2"], rows)


#: (output folder, table function, analysis, its parameters): ``petti_flaxman_full`` is
#: ``postproc experiment petti_flaxman --persons 132000000 --workers 2`` (about an hour), and
#: ``petti_flaxman_counties_1940`` the same with ``--composition counties_1940``.
ANALYSES = (("petti_flaxman", petti_flaxman, "petti_flaxman", {}),
            ("petti_flaxman_full", petti_flaxman_full, "petti_flaxman",
             {"persons": 132_000_000, "executor": "process", "workers": 2}),
            ("petti_flaxman_counties_1940", petti_flaxman_counties_1940, "petti_flaxman",
             {"persons": 132_000_000, "executor": "process", "workers": 2,
              "composition": "counties_1940"}),
            ("flaxman2019", flaxman2019, "flaxman2019", {}),
            ("clark_dajani", clark_dajani, "clark_dajani", {}))
MARKER = "<!-- table: "


def write_tables(path: Path, tables: str) -> list[str]:
    """Replace, in the markdown file ``path``, each table that follows a ``<!-- table: NAME -->``
    comment by the block of that name in ``tables``; return the names replaced.

    A block runs from its comment to the last line of its table (lines starting with ``|``); the
    lines between the comment and the table (a title) are replaced too, everything else is kept.
    A name in ``tables`` that ``path`` lacks is an error (nothing is written).
    """
    blocks = {}
    for chunk in tables.split(MARKER)[1:]:
        name = chunk.split(" -->", 1)[0]
        blocks[name] = (MARKER + chunk).rstrip("\n")
    lines = Path(path).read_text(encoding="utf-8").split("\n")
    out, done, i = [], [], 0
    while i < len(lines):
        line = lines[i]
        name = line[len(MARKER):].split(" -->", 1)[0] if line.startswith(MARKER) else None
        if name not in blocks:
            out.append(line)
            i += 1
            continue
        j = i + 1
        while j < len(lines) and not lines[j].startswith("|"):
            j += 1
        while j < len(lines) and lines[j].startswith("|"):
            j += 1
        out.extend(blocks[name].split("\n"))
        done.append(name)
        i = j
    missing = sorted(set(blocks) - set(done))
    if missing:
        raise SystemExit(f"{path} has no '<!-- table: NAME -->' comment for "
                         f"{', '.join(missing)}; add one where the table belongs")
    Path(path).write_text("\n".join(out), encoding="utf-8")
    return done


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", nargs="?", default="experiments",
                        help="holds one output directory per analysis (default experiments)")
    parser.add_argument("--run", action="store_true",
                        help="first run the analyses whose DIR/NAME/summary.json is missing")
    parser.add_argument("--write", metavar="FILE",
                        help="replace the tables of FILE (e.g. docs/experiments.md) in place")
    args = parser.parse_args(argv)
    base = Path(args.directory)
    parts = []
    for name, function, analysis, params in ANALYSES:
        directory = base / name
        if args.run and not (directory / "summary.json").exists():
            from postproc.apps.experiments import run_experiment

            run_experiment(analysis, directory, **params)
        if (directory / "summary.json").exists():
            parts.append(function(directory))
        else:
            print(f"(no {directory}/summary.json: skipped {name})", file=sys.stderr)
    text = "\n\n".join(parts)
    if args.write:
        names = write_tables(Path(args.write), text)
        print(f"{args.write}: replaced {len(names)} tables ({', '.join(names)})")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
