"""The 2020-style TopDown engine against an earlier commit's, on the same measurements.

Run from the repository root::

    python benchmarks/bench_pl94_engine.py [--persons 200000] [--repeats 3]
        [--baseline 701b6e0] [--workdir DIR] [--out benchmarks/pl94/engine.md]
        [--json benchmarks/pl94/engine.json]

The data are synthesized, tabulated and measured once (this checkout, the ``postproc demo
--preset pl94_2020`` configuration) and pickled. The baseline commit is checked out with ``git
worktree add --detach`` under the work directory (kept for the next run; ``git worktree remove
DIR`` when done). Then, ``--repeats`` times and in turn, each
variant runs TopDown (serial executor, the production passes per level) on the pickled
measurements in a fresh interpreter whose ``PYTHONPATH`` is its own tree:

* **baseline** — the earlier commit's engine;
* **current, cells rounding** — this checkout, rounding the cells alone as the baseline does
  (its histograms must equal the baseline's: the fit's reductions are exact);
* **current, production rounding** — this checkout with the production rounder's passes
  (``round_passes = "pl94_2020"``), as ``postproc demo --preset pl94_2020`` runs it.

Reported: the median over repeats of the seconds per level and in all, the ratio to the
baseline measured in the same run, the QP variables and auxiliaries, whether the histograms equal
the baseline's, and the mean absolute error of the tract, block-group and block totals against
the truth beside the raw measurements'. Nothing is asserted; see ``benchmarks/README.md`` on
quiet machines.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import pickle
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import REPO_DIR, context_end, context_start, describe_context, emit, markdown_table  # noqa: E402

VARIANTS = ("baseline", "current, cells rounding", "current, production rounding")


def prepare(persons: int, workdir: str, seed: int = 2020) -> dict[str, Any]:
    """Synthesize, tabulate and measure once; pickle what TopDown needs and the truth's
    totals. Returns the pickle's path and what it holds."""
    import numpy as np

    from hierarchy.measurement import measure
    from hierarchy.synth.census2020 import synthesize_2020
    from postproc.apps.runs.demo import demo_config
    from postproc.apps.runs.pipeline import load_truth

    work = Path(workdir)
    synthesize_2020(persons, seed=seed, out=work / "data", overwrite=True, progress=False)
    config = demo_config(work, preset="pl94_2020", seed=seed)
    truth = load_truth(config)
    noisy = measure(truth, config.workload, config.budget, config.mechanism, config.rng,
                    publish=config.publish())
    totals = {lv: truth.counts[li].sum(axis=1) for li, lv in enumerate(truth.levels)}
    raw = {lv: np.abs(noisy.get(lv, "total").values[:, 0] - totals[lv]).mean()
           for lv in noisy.levels if "total" in noisy.queries(lv)}
    path = work / "measurements.pkl"
    with open(path, "wb") as f:
        pickle.dump({"noisy": noisy, "spec": config.spec, "passes": config.topdown.passes,
                     "round_passes": config.topdown.round_passes, "totals": totals,
                     "options": dict(config.method_options)}, f)
    return {"path": str(path), "levels": list(truth.levels),
            "units": {lv: int(c.shape[0]) for lv, c in zip(truth.levels, truth.counts)},
            "raw_total_mae": {lv: float(v) for lv, v in raw.items()}}


def run_variant(path: str, production_rounding: bool) -> dict[str, Any]:
    """TopDown on the pickled measurements with whichever engine is on ``sys.path``."""
    import numpy as np

    import postproc
    from postproc.methods.topdown import topdown

    with open(path, "rb") as f:
        saved = pickle.load(f)
    levels = list(saved["noisy"].geography.levels)
    clock = {"t": time.perf_counter()}
    seconds: dict[str, float] = {}

    def on_level(li, hist, partial):
        seconds[levels[li]] = time.perf_counter() - clock["t"]
        clock["t"] = time.perf_counter()

    options: dict[str, Any] = {"passes": saved["passes"], "on_level": on_level,
                               **saved.get("options", {})}   # the preset's pass_tolerance
    if production_rounding:
        options["round_passes"] = saved["round_passes"]
    t = time.perf_counter()
    result = topdown(saved["noisy"], saved["spec"], **options)
    total = time.perf_counter() - t
    stats = result.node_stats
    digest = hashlib.sha256(b"".join(np.ascontiguousarray(h).tobytes()
                                     for h in result.histograms)).hexdigest()
    mae = {lv: float(np.abs(h.sum(axis=1) - saved["totals"][lv]).mean())
           for lv, h in zip(levels, result.histograms)}
    return {"engine": str(Path(postproc.__file__).resolve().parent.parent),
            "seconds": seconds, "total": total, "digest": digest, "total_mae": mae,
            "variables": {lv: int(s["variables"].sum()) for lv, s in stats.groupby("level")},
            "fit": {lv: float(s["fit_seconds"].sum()) for lv, s in stats.groupby("level")},
            "round": {lv: float(s["round_seconds"].sum()) for lv, s in stats.groupby("level")}}


def _in_tree(tree: Path, path: str, production_rounding: bool) -> dict[str, Any]:
    """:func:`run_variant` in a fresh interpreter that imports the package from ``tree``."""
    import json

    code = (f"import json, sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); "
            "import bench_pl94_engine as b; "
            f"print('RESULT' + json.dumps(b.run_variant({path!r}, {production_rounding})))")
    env = dict(os.environ, PYTHONPATH=str(tree))
    done = subprocess.run([sys.executable, "-c", code], cwd=tree, env=env, text=True,
                          capture_output=True)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT")]
    if done.returncode or not lines:
        raise RuntimeError(f"variant in {tree} failed:\n{done.stderr[-3000:]}")
    out = json.loads(lines[-1][len("RESULT"):])
    if Path(out["engine"]) != tree.resolve():
        raise RuntimeError(f"the variant imported {out['engine']}, not {tree}")
    return out


def _worktree(workdir: Path, commit: str) -> Path:
    tree = workdir / f"baseline-{commit}"
    if not tree.exists():
        subprocess.run(["git", "worktree", "add", "--detach", str(tree), commit], cwd=REPO_DIR,
                       check=True, capture_output=True)
    return tree


def _report(args, prepared, runs, context) -> str:
    levels = prepared["levels"]
    med = {v: {lv: statistics.median(r["seconds"].get(lv, 0.0) for r in runs[v])
               for lv in levels} for v in VARIANTS}
    tot = {v: statistics.median(r["total"] for r in runs[v]) for v in VARIANTS}
    rows = []
    for lv in levels + ["TopDown"]:
        get = (lambda v: tot[v]) if lv == "TopDown" else (lambda v, lv=lv: med[v][lv])
        base = get("baseline")
        rows.append([lv, f"{prepared['units'].get(lv, ''):,}" if lv in prepared["units"]
                     else ""] + [f"{get(v):.2f}" for v in VARIANTS]
                    + [f"{base / get(v):.2f} ×" if get(v) > 0 else "" for v in VARIANTS[1:]])
    first = {v: runs[v][0] for v in VARIANTS}
    acc = [[lv, f"{prepared['raw_total_mae'].get(lv, float('nan')):.3f}"]
           + [f"{first[v]['total_mae'][lv]:.3f}" for v in VARIANTS]
           for lv in levels if lv in prepared["raw_total_mae"]]
    var = [[lv] + [f"{first[v]['variables'].get(lv, 0):,}" for v in VARIANTS] for lv in levels]
    same = first["current, cells rounding"]["digest"] == first["baseline"]["digest"]
    lines = [
        "# The 2020-style TopDown engine against an earlier commit's, same measurements", "",
        f"Command: `python benchmarks/bench_pl94_engine.py --persons {args.persons} "
        f"--repeats {args.repeats} --baseline {args.baseline}`", "",
        describe_context(context), "",
        f"{args.persons:,} synthetic persons, the `postproc demo --preset pl94_2020` "
        "configuration, measured once; TopDown serial, production fit passes; each variant "
        f"in a fresh interpreter, {args.repeats} repeats in turn. Baseline: commit "
        f"`{args.baseline}`.", "",
        "## Seconds per level (median of repeats) and speed-up over the baseline", "",
        markdown_table(["level", "units"] + list(VARIANTS)
                       + [f"× ({v})" for v in VARIANTS[1:]], rows), "",
        f"Histograms of *current, cells rounding* equal the baseline's: **{same}** (the fit's "
        "problem reductions are exact; the same rounding gives the same integers).", "",
        "## QP variables per level (summed over parents)", "",
        markdown_table(["level"] + list(VARIANTS), var), "",
        "## Mean absolute error of the totals against the truth", "",
        markdown_table(["level", "raw measurement"] + list(VARIANTS), acc), "",
    ]
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--persons", type=int, default=200_000)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--baseline", default="701b6e0")
    p.add_argument("--workdir", default=None)
    p.add_argument("--out", default=None)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    import tempfile

    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="bench_pl94_engine_"))
    workdir.mkdir(parents=True, exist_ok=True)
    context = context_start()
    prepared = prepare(args.persons, str(workdir))
    baseline = _worktree(workdir, args.baseline)
    trees = {"baseline": (baseline, False), "current, cells rounding": (REPO_DIR, False),
             "current, production rounding": (REPO_DIR, True)}
    runs: dict[str, list[dict[str, Any]]] = {v: [] for v in VARIANTS}
    for r in range(args.repeats):
        for v in VARIANTS:
            tree, production = trees[v]
            runs[v].append(_in_tree(Path(tree), prepared["path"], production))
            print(f"repeat {r + 1}: {v}: {runs[v][-1]['total']:.1f} s", file=sys.stderr)
    context = context_end(context)
    text = _report(args, prepared, runs, context)
    emit(text, {"args": vars(args), "prepared": prepared, "runs": runs, "context": context},
         out=args.out, json_path=args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
