"""Which side of a multipass rounding tie is nearer the truth: the held answer's, or the other?

Run from the repository root::

    python benchmarks/bench_multipass_ties.py [--persons 1000000] [--seeds 1-8]
        [--workdir DIR] [--out benchmarks/pl94/....md] [--json ...]

A later fit pass holds an earlier pass's answer ``h`` within ``±pass_tolerance``; where the
later pass leaves a child's total on an exact half, TopDown's rounding goes toward ``h``
(:func:`postproc.methods.topdown.rounding.toward_held`). For synthetic 2020-style data (seed 2020)
and each measurement seed, the production configuration (with its hold of ±0.1; the figures in
``benchmarks/pl94/multipass_ties_1m.md`` were taken at TopDown's default ±0.5, where such ties
are far more common) is run whole and serially
(:func:`postproc.apps.runs.parts.whole_measurement`, then ``topdown``), every node's rounding
is watched, and each tie of a child's total — a target within 10⁻⁵ of a half, with a held
answer off that half — is recorded. Against the confidential totals, exactly one of the two
integers around the half is nearer; the script counts, per level, how often that is the held
answer's side, with a 95 % Wilson interval. A rule is better for accuracy when its side is
nearer more often than half the time. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import context_end, context_start, describe_context, emit, markdown_table  # noqa: E402


def _seeds(text: str) -> list[int]:
    if "-" in text:
        first, last = (int(x) for x in text.split("-"))
        return list(range(first, last + 1))
    return [int(x) for x in text.split(",")]


def ties_of_one_seed(directory: str, seed: int) -> list[dict[str, Any]]:
    """Every held-bound tie of a child's total in one whole run, with the truth's side."""
    import numpy as np

    import postproc.methods.topdown.node as node
    from postproc.apps.runs.demo import demo_config
    from postproc.apps.runs.parts import whole_measurement
    from postproc.apps.runs.pipeline import load_truth, method_options
    from postproc.methods.topdown import topdown

    config = demo_config(directory, preset="pl94_2020", seed=seed, executor="serial")
    truth = load_truth(config)
    noisy = whole_measurement(config, truth)
    seen: list[tuple[str, np.ndarray, np.ndarray, np.ndarray]] = []
    original = node.round_node

    def watch(task, x_star, layout, failsafe=False, keep=(), held=None):
        rounds_totals = any(name == "total" for p in (task.round_passes or ())
                            for name, _ in p)
        if held and "total" in held and rounds_totals and not failsafe:
            t = np.maximum(x_star, 0.0).sum(axis=1)
            h = held["total"][:, 0]
            mid = np.round(t - 0.5) + 0.5
            tie = (np.abs(t - mid) <= 1e-5) & (np.abs(h - mid) > 1e-5)
            if tie.any():
                seen.append((task.level, np.asarray(task.children)[tie], mid[tie], h[tie]))
        return original(task, x_star, layout, failsafe=failsafe, keep=keep, held=held)

    node.round_node = watch
    try:
        topdown(noisy, config.spec, **method_options(config, "topdown"))
    finally:
        node.round_node = original
    out = []
    geography = truth.geography
    for level, children, mid, h in seen:
        li = geography.level_index(level)
        exact = truth.counts[li].sum(axis=1)[geography.index_of(level, children)]
        toward = np.where(h < mid, mid - 0.5, mid + 0.5)
        away = np.where(h < mid, mid + 0.5, mid - 0.5)
        for e, a, b in zip(exact, toward, away):
            out.append({"seed": seed, "level": level,
                        "held_side_nearer": bool(abs(a - e) < abs(b - e))})
    return out


def _wilson(k: int, n: int) -> tuple[float, float]:
    """The 95 % Wilson interval of ``k`` successes in ``n`` (SciPy's)."""
    if not n:
        return float("nan"), float("nan")
    from scipy.stats import binomtest

    ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    return float(ci.low), float(ci.high)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--persons", type=int, default=1_000_000)
    parser.add_argument("--seeds", type=_seeds, default=_seeds("1-8"))
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--out", default=None)
    parser.add_argument("--json", dest="json_path", default=None)
    args = parser.parse_args(argv)
    from bench_pl94_parts import synthesize

    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="bench_multipass_ties_"))
    workdir.mkdir(parents=True, exist_ok=True)
    context = context_start()
    synthesize(args.persons, str(workdir))
    records: list[dict[str, Any]] = []
    for seed in args.seeds:
        records += ties_of_one_seed(str(workdir), seed)
        print(f"seed {seed}: {len(records)} ties so far", file=sys.stderr, flush=True)
    context = context_end(context)
    rows, summary = [], {}
    levels = list(dict.fromkeys(r["level"] for r in records))
    for level in levels + ["all"]:
        chosen = [r for r in records if level in ("all", r["level"])]
        k, n = sum(r["held_side_nearer"] for r in chosen), len(chosen)
        lo, hi = _wilson(k, n)
        summary[level] = {"ties": n, "held_side_nearer": k, "ci95": [lo, hi]}
        rows.append([level, n, k, f"{k / n:.3f}" if n else "–", f"{lo:.3f}–{hi:.3f}"])
    text = ["# Multipass rounding ties: is the held answer's side nearer the truth?", "",
            f"`python benchmarks/bench_multipass_ties.py --persons {args.persons} --seeds "
            f"{','.join(map(str, args.seeds))}`", "", describe_context(context), "",
            f"{args.persons:,} synthetic persons (seed 2020), measured with seeds "
            f"{', '.join(map(str, args.seeds))}; every tie of a child's total on a held bound "
            "(target within 10⁻⁵ of a half, the held answer off it). Nearer: how often the "
            "integer on the held answer's side is nearer the confidential total (exactly one "
            "of the two is); 95 % Wilson interval.", "",
            markdown_table(["level", "ties", "held side nearer", "share", "95 % interval"],
                           rows)]
    emit("\n".join(text) + "\n", {"persons": args.persons, "seeds": args.seeds,
                                  "summary": summary, "records": records,
                                  "context": context},
         out=args.out, json_path=args.json_path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
