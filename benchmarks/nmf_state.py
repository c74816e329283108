"""TopDown on one large state of a synthetic Noisy Measurement File, state by state and its
blocks part by part (``postproc nmf run --stream``): wall time and the peak of the whole process
tree's memory, over several runs.

Run from the repository root::

    python benchmarks/nmf_state.py [--persons 29000000] [--state 48] [--repeats 3]
        [--workers 2] [--part-blocks 20000] [--workdir /var/tmp/nmf-state]
        [--json benchmarks/nmf/texas.json] [--out benchmarks/nmf/texas.md]
        [--nmf ROOT] [--method topdown|gls|bluedown] [--keep] [--one-file]
        [--target-minutes 15] [--target-gib 12]

``--nmf ROOT`` runs on a file already written (the nation's: ``postproc synth2020 --persons
331449281 --nmf ROOT``; ``--persons`` and ``--state`` then only label the report), and
``--method gls`` (or ``bluedown``) that method state by state instead of TopDown; ``--keep``
keeps the runs' directories. ``--one-file`` lays the synthesized file out as the published zip
does — each partition's part files rewritten as one file, one row group per former part file
(about 45,000 rows), in ``WORKDIR/nmf-one-file`` — and runs on that.

The file is written once (``postproc synth2020 --persons N --states S --nmf``, seed 2020; kept
in ``--workdir`` and reused) and its synthesis timed; then ``--repeats`` runs of ``postproc nmf
run ROOT --stream`` in fresh processes, each into a new directory, the process tree's resident
memory summed and sampled every 0.5 s (the pool's workers included). Reported: the median wall
time and the largest peak over the runs, and each run's steps as the run logs them (the nation
and the state pieces; the state down to its block groups; its block files read, checked and
split into parts; its blocks). Targets (issue 38): a Texas-sized state (29M persons) ≤ 15 min
and ≤ 12 GiB on 2 cores. Nothing is asserted: the script measures and reports.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    context_end,
    context_start,
    describe_context,
    fmt_bytes,
    markdown_table,
    median,
    run_measured,
)

_STEP = re.compile(r"^(?P<what>.*?) in (?P<seconds>[0-9.]+) s$")


def _postproc() -> str:
    return str(Path(sys.executable).with_name("postproc"))


def _synthesize(args: argparse.Namespace, nmf: Path) -> dict[str, Any] | None:
    if (nmf / "manifest.json").is_file():
        return None
    run = run_measured([_postproc(), "synth2020", "--persons", str(args.persons), "--states",
                        args.state, "--out", str(args.workdir / "data"), "--nmf", str(nmf),
                        "--no-progress", "--overwrite"])
    if run["returncode"]:
        raise SystemExit(f"synth2020 failed:\n{run['stderr']}")
    return {"wall_seconds": run["wall_seconds"], "tree_peak_rss_bytes":
            run["tree_peak_rss_bytes"]}


def _one_file(nmf: Path, dest: Path) -> Path:
    """``nmf`` rewritten with one file per partition (module docstring); a part file at a time,
    so memory stays at one part file's rows."""
    import pyarrow.parquet as pq

    if dest.is_dir():               # complete: it is renamed into place last
        return dest
    partial = dest.with_name(dest.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    shutil.copytree(nmf, partial, ignore=shutil.ignore_patterns("part-*.parquet"))
    for folder in sorted({f.parent for f in nmf.rglob("part-*.parquet")}):
        files = sorted(folder.glob("part-*.parquet"))
        target = partial / folder.relative_to(nmf) / "part-00000-one-file-c000.snappy.parquet"
        schema = pq.read_schema(files[0])
        with pq.ParquetWriter(target, schema, compression="snappy") as writer:
            for f in files:
                writer.write_table(pq.read_table(f).cast(schema))
    partial.rename(dest)
    return dest


def _one_run(args: argparse.Namespace, nmf: Path, k: int) -> dict[str, Any]:
    out = args.workdir / f"run-{args.method}-{k}"
    if out.exists():
        shutil.rmtree(out)
    command = [_postproc(), "nmf", "run", str(nmf), "--stream", "--state-totals",
               str(nmf / "state_totals.csv"), "--out", str(out), "--no-progress",
               "--part-blocks", str(args.part_blocks), "--method", args.method]
    if args.workers:
        command += ["--workers", str(args.workers)]
    run = run_measured(command, sample_interval=0.5)
    if run["returncode"]:
        raise SystemExit(f"postproc nmf run failed:\n{run['stderr']}")
    steps = []
    for line in run["stderr"].splitlines():
        m = _STEP.match(line.strip())
        if m and not line.startswith("\t"):
            steps.append({"step": m["what"], "seconds": float(m["seconds"])})
    manifest = json.loads((out / "manifest.json").read_text())
    levels = pd.read_parquet(out / "geography.parquet", columns=["level"])["level"]
    if not args.keep:
        shutil.rmtree(out)
    return {"wall_seconds": run["wall_seconds"], "tree_peak_rss_bytes":
            run["tree_peak_rss_bytes"], "max_rss_bytes": run["max_rss_bytes"],
            "user_seconds": run["user_seconds"], "system_seconds": run["system_seconds"],
            "steps": steps, "units": {str(lv): int(n) for lv, n in
                                      levels.value_counts(sort=False).items()},
            "persons": manifest["levels"]["block"]["persons"] if "levels" in manifest
            and isinstance(manifest["levels"], dict) else manifest["persons"]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--persons", type=int, default=29_000_000)
    p.add_argument("--state", default="48", help="two-digit FIPS (default 48, Texas)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--workers", type=int, default=None, help="default every CPU")
    p.add_argument("--part-blocks", type=int, default=20_000)
    p.add_argument("--workdir", type=Path, default=Path("/var/tmp/nmf-state"))
    p.add_argument("--json", type=Path, default=Path("benchmarks/nmf/texas.json"))
    p.add_argument("--out", type=Path, default=Path("benchmarks/nmf/texas.md"))
    p.add_argument("--nmf", type=Path, default=None,
                   help="a file already written (default: synthesized in --workdir)")
    p.add_argument("--method", choices=("topdown", "gls", "bluedown"), default="topdown")
    p.add_argument("--keep", action="store_true",
                   help="keep the runs' directories (WORKDIR/run-METHOD-K), e.g. for "
                        "postproc nmf compare ROOT --runs")
    p.add_argument("--one-file", action="store_true",
                   help="run on the file laid out one file per partition, as published")
    p.add_argument("--target-minutes", type=float, default=15.0)
    p.add_argument("--target-gib", type=float, default=12.0)
    args = p.parse_args(argv)
    args.workdir.mkdir(parents=True, exist_ok=True)
    context = context_start()
    nmf = args.nmf if args.nmf is not None else args.workdir / "nmf"
    synthesis = None if args.nmf is not None else _synthesize(args, nmf)
    if args.one_file:
        nmf = _one_file(nmf, args.workdir / "nmf-one-file")
    runs = []
    for k in range(args.repeats):
        runs.append(_one_run(args, nmf, k))
        print(f"run {k + 1}/{args.repeats}: {runs[-1]['wall_seconds']:.1f} s, peak "
              f"{fmt_bytes(runs[-1]['tree_peak_rss_bytes'])}", file=sys.stderr)
    result = {"context": context_end(context), "persons": args.persons, "state": args.state,
              "method": args.method, "nmf": str(nmf), "one_file": args.one_file,
              "part_blocks": args.part_blocks, "workers": args.workers, "synthesis": synthesis,
              "runs": runs, "median_wall_seconds": median(r["wall_seconds"] for r in runs),
              "max_tree_peak_rss_bytes": max(r["tree_peak_rss_bytes"] for r in runs)}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1) + "\n")
    rows = [[f"run {k + 1}", f"{r['wall_seconds']:.0f}", fmt_bytes(r["tree_peak_rss_bytes"]),
             fmt_bytes(r["max_rss_bytes"]), f"{r['user_seconds'] + r['system_seconds']:.0f}"]
            for k, r in enumerate(runs)]
    steps = [[s["step"]] + [f"{r['steps'][i]['seconds']:.1f}" if i < len(r["steps"]) else ""
                            for r in runs] for i, s in enumerate(runs[0]["steps"])]
    units = runs[0]["units"]
    name = {"topdown": "TopDown", "gls": "The GLS", "bluedown": "BlueDown"}[args.method]
    where = (f"--nmf {args.nmf} " if args.nmf is not None else "") + \
        ("--one-file " if args.one_file else "")
    text = (f"# {name} on a synthetic {args.persons:,}-person NMF, streamed\n\n"
            f"`python benchmarks/nmf_state.py {where}--persons {args.persons} --state "
            f"{args.state} --repeats {args.repeats} --method {args.method}` — "
            f"{units['block']:,} blocks, "
            f"{units['block_group']:,} block groups, {units['tract']:,} tracts, "
            f"{units['county']:,} spine counties; parts of ≤ {args.part_blocks:,} blocks.\n\n"
            f"{describe_context(result['context'])}\n\n"
            f"**Median wall time {result['median_wall_seconds'] / 60:.1f} min; peak memory of "
            f"the process tree {fmt_bytes(result['max_tree_peak_rss_bytes'])}** (targets: "
            f"≤ {args.target_minutes:g} min, ≤ {args.target_gib:g} GiB).\n\n"
            + markdown_table(["run", "wall s", "tree peak", "largest process", "CPU s"], rows)
            + "\n\nSteps as each run logs them (seconds):\n\n"
            + markdown_table(["step"] + [f"run {k + 1}" for k in range(len(runs))], steps)
            + "\n")
    args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
