"""TopDown's error of the tract and block-group totals against the raw measurements', over
measurement seeds (the issue's accuracy target: TopDown below the raw measurements).

Run from the repository root::

    python benchmarks/bench_pl94_accuracy.py [--persons 1000000] [--seeds 5] [--workers 2]
        [--out benchmarks/pl94/accuracy.md] [--json ...]

One synthetic population (``postproc demo --preset pl94_2020``'s configuration, synthesis seed
2020) is measured with ``--seeds`` measurement seeds; for each, TopDown runs with the
production fit passes, once with the production rounder and once rounding the cells alone.
Reported per level: the mean absolute error of the totals (raw measurement, both TopDown
variants) averaged over seeds, with its standard error across seeds, and in how many seeds
each TopDown variant beat the raw measurement.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import context_end, context_start, describe_context, emit, markdown_table  # noqa: E402

LEVELS = ("tract", "block_group", "block")
VARIANTS = ("raw", "topdown, production rounder", "topdown, cells rounding")


def main(argv=None) -> int:
    import numpy as np

    from hierarchy.measurement import measure
    from hierarchy.synth_2020 import synthesize_2020
    from postproc.apps.runs.demo import demo_config
    from postproc.apps.runs.pipeline import load_truth
    from postproc.infra.executors import get_executor
    from postproc.methods.topdown import topdown

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--persons", type=int, default=1_000_000)
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--out", default=None)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    context = context_start()
    work = Path(tempfile.mkdtemp(prefix="bench_pl94_accuracy_"))
    synthesize_2020(args.persons, seed=2020, out=work / "data", progress=False)
    config = demo_config(work, preset="pl94_2020", seed=2020)
    truth = load_truth(config)
    totals = {lv: truth.counts[truth.levels.index(lv)].sum(axis=1) for lv in LEVELS}
    errors: dict[str, dict[str, list[float]]] = {v: {lv: [] for lv in LEVELS} for v in VARIANTS}
    pool = get_executor("process", workers=args.workers)
    try:
        for seed in range(args.seeds):
            noisy = measure(truth, config.workload, config.budget, config.mechanism,
                            1000 + seed, publish=config.publish())
            for lv in LEVELS:
                raw = noisy.get(lv, "total").values[:, 0]
                errors["raw"][lv].append(float(np.abs(raw - totals[lv]).mean()))
            for variant, rounder in ((VARIANTS[1], config.round_passes), (VARIANTS[2], None)):
                result = topdown(noisy, config.spec, passes=config.passes,
                                 round_passes=rounder, executor=pool)
                for lv in LEVELS:
                    h = result.histograms[result.geography.level_index(lv)]
                    errors[variant][lv].append(float(np.abs(h.sum(axis=1) - totals[lv]).mean()))
            print(f"seed {seed + 1}/{args.seeds} done", file=sys.stderr)
    finally:
        pool.close()
    context = context_end(context)

    def cell(values: list[float]) -> str:
        se = statistics.stdev(values) / len(values) ** 0.5 if len(values) > 1 else float("nan")
        return f"{statistics.mean(values):.3f} ± {se:.3f}"

    rows = []
    for lv in LEVELS:
        wins = [sum(t < r for t, r in zip(errors[v][lv], errors["raw"][lv])) for v in VARIANTS[1:]]
        rows.append([lv, f"{truth.geography.n_units(lv):,}"] + [cell(errors[v][lv]) for v in VARIANTS]
                    + [f"{w}/{args.seeds}" for w in wins])
    text = "\n".join([
        "# TopDown's error of the totals against the raw measurements', over seeds", "",
        f"Command: `python benchmarks/bench_pl94_accuracy.py --persons {args.persons} "
        f"--seeds {args.seeds} --workers {args.workers}`", "", describe_context(context), "",
        f"{args.persons:,} synthetic persons (synthesis seed 2020), measured with seeds 1000 … "
        f"{999 + args.seeds}; TopDown with the production fit passes. Mean absolute error of the "
        "unit totals against the truth, mean ± standard error over seeds; the last columns count "
        "the seeds in which TopDown's error was below the raw measurement's.", "",
        markdown_table(["level", "units"] + list(VARIANTS)
                       + [f"seeds {v} < raw" for v in VARIANTS[1:]], rows), ""])
    emit(text, {"args": vars(args), "errors": errors, "context": context},
         out=args.out, json_path=args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
