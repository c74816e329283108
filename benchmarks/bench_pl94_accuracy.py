"""TopDown's error of the tract and block-group totals against the raw measurements', over
measurement seeds (the issue's accuracy target: TopDown below the raw measurements).

Run from the repository root::

    python benchmarks/bench_pl94_accuracy.py [--persons 1000000] [--seeds 5] [--workers 2]
        [--pass-tolerances 0.1,0.5] [--no-cells-rounding] [--parts] [--workdir DIR]
        [--out benchmarks/pl94/accuracy.md] [--json ...]

One synthetic population (``postproc demo --preset pl94_2020``'s configuration, synthesis seed
2020) is measured with ``--seeds`` measurement seeds; for each, TopDown runs with the
production fit passes and the production rounder once per ``--pass-tolerances`` value (how
closely a later fit pass holds the earlier passes' answers; default: the preset's, production's
0.1), and once rounding the cells alone (at the first tolerance; ``--no-cells-rounding`` skips
it). Every variant solves the same measurements, so their differences are paired. Reported per
level: the mean absolute error of the totals (raw measurement, each TopDown variant) averaged
over seeds, with its standard error across seeds, and in how many seeds each TopDown variant
beat the raw measurement.

``--parts`` runs each variant in parts (``postproc run --parts``: the measurement keyed by
tract, the answers that count an active cell drawn; the way 10M persons and more are run) and
reads the totals' errors from the run's error table. ``--workdir DIR`` keeps the synthetic data
in ``DIR/data`` and reuses them when they are there with the same number of persons.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import context_end, context_start, describe_context, emit, markdown_table  # noqa: E402

LEVELS = ("county", "tract", "block_group", "block")


def tolerances(text: str) -> list[float]:
    """``--pass-tolerances``: comma-separated positive numbers."""
    from postproc.methods.topdown.options import check_pass_tolerance

    try:
        return [check_pass_tolerance(float(t)) for t in text.split(",")]
    except ValueError as e:     # not a number, or PostprocError: not above 0
        raise argparse.ArgumentTypeError(f"comma-separated numbers, e.g. 0.1,0.5: {e}")


def main(argv=None) -> int:
    from hierarchy.presets.pl94 import PRODUCTION_PASS_TOLERANCE
    from hierarchy.synth.census2020 import synthesize_2020
    from postproc.apps.runs.demo import demo_config
    from postproc.apps.runs.pipeline import load_truth

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--persons", type=int, default=1_000_000)
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--pass-tolerances", type=tolerances, default=[PRODUCTION_PASS_TOLERANCE])
    p.add_argument("--no-cells-rounding", action="store_true")
    p.add_argument("--parts", action="store_true", help="run each variant in parts")
    p.add_argument("--workdir", default=None, help="keep (and reuse) the data in DIR/data")
    p.add_argument("--out", default=None)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    context = context_start()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="bench_pl94_accuracy_"))
    made = made_persons(work / "data")
    if made is None:
        synthesize_2020(args.persons, seed=2020, out=work / "data", progress=False)
    elif made != args.persons:
        p.error(f"{work / 'data'} holds {made:,} synthetic persons, not {args.persons:,}: "
                "give another --workdir")
    config = demo_config(work, preset="pl94_2020", seed=2020)
    runs = [(f"topdown, production rounder, hold {t:g}", config.topdown.round_passes, t)
            for t in args.pass_tolerances]
    if not args.no_cells_rounding:
        runs.append((f"topdown, cells rounding, hold {args.pass_tolerances[0]:g}", None,
                     args.pass_tolerances[0]))
    variants = ["raw"] + [name for name, _, _ in runs]
    errors: dict[str, dict[str, list[float]]] = {v: {lv: [] for lv in LEVELS} for v in variants}
    if args.parts:
        for seed in range(args.seeds):
            for i, (variant, rounder, tol) in enumerate(runs):
                table = parts_errors(work, 1000 + seed, rounder, tol, args.workers)
                for lv in LEVELS:
                    if i == 0:      # every variant draws the same measurements
                        errors["raw"][lv].append(table[lv][0])
                    errors[variant][lv].append(table[lv][1])
            print(f"seed {seed + 1}/{args.seeds} done", file=sys.stderr, flush=True)
        units = parts_units(work)
    else:
        truth = load_truth(config)
        units = {lv: truth.geography.n_units(lv) for lv in LEVELS}
        solve_whole(truth, config, args, runs, errors)
    context = context_end(context)

    def cell(values: list[float]) -> str:
        se = statistics.stdev(values) / len(values) ** 0.5 if len(values) > 1 else float("nan")
        return f"{statistics.mean(values):.3f} ± {se:.3f}"

    rows = []
    for lv in LEVELS:
        wins = [sum(t < r for t, r in zip(errors[v][lv], errors["raw"][lv]))
                for v in variants[1:]]
        rows.append([lv, f"{units[lv]:,}"] + [cell(errors[v][lv]) for v in variants]
                    + [f"{w}/{args.seeds}" for w in wins])
    first, others = variants[1], variants[2:]
    paired = []
    for lv in LEVELS:
        row = [lv]
        for v in others:
            diff = [b - a for a, b in zip(errors[first][lv], errors[v][lv])]
            se = (statistics.stdev(diff) / len(diff) ** 0.5 if len(diff) > 1
                  else float("nan"))
            row.append(f"{statistics.mean(diff):+.4f} ± {se:.4f} "
                       f"({sum(d > 0 for d in diff)}/{len(diff)} above)")
        paired.append(row)
    command = (f"python benchmarks/bench_pl94_accuracy.py --persons {args.persons} --seeds "
               f"{args.seeds} --workers {args.workers} --pass-tolerances "
               + ",".join(f"{t:g}" for t in args.pass_tolerances)
               + (" --no-cells-rounding" if args.no_cells_rounding else "")
               + (" --parts" if args.parts else ""))
    text = "\n".join([
        "# TopDown's error of the totals against the raw measurements', over seeds", "",
        f"Command: `{command}`", "", describe_context(context), "",
        f"{args.persons:,} synthetic persons (synthesis seed 2020), measured with seeds 1000 … "
        f"{999 + args.seeds}; TopDown with the production fit passes, a later pass holding the "
        "earlier passes' answers within the tolerance named (\"hold\")"
        + ("; each run in parts (the measurement keyed by tract, active answers drawn)"
           if args.parts else "") + ". Mean absolute error of the unit totals against the "
        "truth, mean ± standard error over seeds; the last columns count the seeds in which "
        "TopDown's error was below the raw measurement's.", "",
        markdown_table(["level", "units"] + variants
                       + [f"seeds {v} < raw" for v in variants[1:]], rows), ""]
        + ([f"Paired against \"{first}\" (the same measurements): each variant's mean "
            "|error| minus its, mean ± standard error over seeds, and in how many seeds it was "
            "above.", "", markdown_table(["level"] + others, paired), ""] if others else []))
    emit(text, {"args": vars(args), "errors": errors, "context": context},
         out=args.out, json_path=args.json)
    return 0


def made_persons(data: Path) -> int | None:
    """The number of persons of the synthetic data in ``data`` (``None``: none there)."""
    import json

    manifest = data / "manifest.json"
    if not manifest.exists():
        return None
    return json.loads(manifest.read_text())["arguments"]["persons"]


def solve_whole(truth, config, args, runs, errors) -> None:
    """Each seed measured whole and every variant solved on it; errors appended in place."""
    import numpy as np

    from hierarchy.measurement import measure
    from postproc.apps.runs.pipeline import method_options
    from postproc.infra.executors import get_executor
    from postproc.methods.topdown import topdown

    totals = {lv: truth.counts[truth.levels.index(lv)].sum(axis=1) for lv in LEVELS}
    pool = get_executor("process", workers=args.workers)
    try:
        for seed in range(args.seeds):
            noisy = measure(truth, config.workload, config.budget, config.mechanism,
                            1000 + seed, publish=config.publish())
            for lv in LEVELS:
                raw = noisy.get(lv, "total").values[:, 0]
                errors["raw"][lv].append(float(np.abs(raw - totals[lv]).mean()))
            for variant, rounder, tol in runs:
                result = topdown(noisy, config.spec, **{
                    **method_options(config, "topdown"), "round_passes": rounder,
                    "pass_tolerance": tol, "executor": pool})
                for lv in LEVELS:
                    h = result.histograms[result.geography.level_index(lv)]
                    errors[variant][lv].append(float(np.abs(h.sum(axis=1) - totals[lv]).mean()))
            print(f"seed {seed + 1}/{args.seeds} done", file=sys.stderr, flush=True)
    finally:
        pool.close()


def parts_errors(work: Path, seed: int, rounder, tol: float, workers: int
                 ) -> dict[str, tuple[float, float]]:
    """One run in parts measured with ``seed``: level → (raw, TopDown) mean |error| of the
    totals, from the run's error table."""
    import shutil
    from dataclasses import replace

    from postproc.apps.runs.demo import demo_config
    from postproc.apps.runs.parts import run_in_parts

    config = demo_config(work, preset="pl94_2020", seed=seed, executor="process")
    config = replace(config, topdown=config.topdown.replace(round_passes=rounder, workers=workers),
                     method_options={**config.method_options, "pass_tolerance": tol})
    out = work / "parts_run"
    if out.exists():
        shutil.rmtree(out)
    done = run_in_parts(config, out, log=lambda line: None)
    table = done.errors.set_index(["level", "query"])
    return {lv: (float(table.loc[(lv, "total"), "measured_mean_abs"]),
                 float(table.loc[(lv, "total"), "topdown_mean_abs"])) for lv in LEVELS}


def parts_units(work: Path) -> dict[str, int]:
    """Units per level of the last run in parts (its geography table)."""
    import pyarrow.parquet as pq

    geography = pq.read_table(work / "parts_run" / "geography.parquet").to_pandas()
    return {lv: int((geography["level"] == lv).sum()) for lv in LEVELS}


if __name__ == "__main__":
    sys.exit(main())
