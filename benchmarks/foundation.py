"""Foundation benchmarks (issue 2): tabulation vs one plain bincount, samplers, generator.

Run ``python benchmarks/foundation.py [--persons 132.2M] [--repeats 3]`` (``--help`` for all
options). It prints markdown: the date, machine, commit and load average at start and end, one
summary table of figures, ratios and targets, and the details behind it.

**(a) Tabulation vs the bincount floor.** ``synthesize_1940(persons)`` builds the E2E persons
and units in memory (seed ``--seed``); they are saved once to a work directory (Arrow IPC and
``.npy``), together with the records' pre-encoded leaf index (``Geography.from_columns``), their
attribute columns and the precomputed key ``leaf × 192 + cell``. Then each phase runs in a fresh
interpreter that loads only its own inputs, so no earlier phase's memory can hide its peak:

* ``tabulate`` — :func:`hierarchy.tabulation.tabulate` of the persons table (E2E schema, levels
  nation/state/county/enum_dist) with the units table: geography from the dictionary-encoded
  geocodes, counts of every unit at every level, units data;
* ``count_cells`` — the core kernel :func:`hierarchy.tabulation.count_cells` on the pre-encoded
  leaf index and the four int8 attribute columns (it still forms the keys, chunk by chunk);
* ``naive`` — a one-line numpy tabulation for reference: the int64 key computed from the same
  leaf index and columns over whole arrays, then ``np.bincount``;
* ``floor`` — **the baseline of the ratios**: one ``np.bincount(key, minlength=leaves × 192)``
  of the *precomputed* int64 key of the same records (building the key is not timed).

Each phase times a first call (during which it measures the peak), then ``--repeats`` calls, and
reports the median of those. Its peak memory is the rise of the process's peak resident memory
(``VmHWM``, reset just before the first call) over its resident memory once its inputs are
loaded; the memory ratio is ``(input bytes + that rise) / input bytes`` — the process's
footprint while tabulating relative to the input columns (target ≤ 3×). The leaf-level counts of
every phase are checked equal to the floor's.

**(b) Sampler throughput** — :mod:`bench_mechanisms` (every sampler, simulation and release
mode) at ``--sampler-draws`` (default 10M; the exact integer samplers at a tenth of that).
Target ≥ 10M two-sided geometric draws per second in simulation mode.

**(c) Generator throughput** — :mod:`bench_synth` at ``--synth-persons`` (default 10M): in-memory
generation and writing Parquet, each in a fresh process. Target ≥ 2M persons per second in
memory.

Nothing here asserts a timing; the figures need a quiet machine to mean anything.
"""

from __future__ import annotations

import argparse
import gc
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as common  # noqa: E402

LEVELS = ["nation", "state", "county", "enum_dist"]
TABULATE_RATIO_TARGET = 2.0       # tabulate ≤ 2 × one np.bincount of the same records
MEMORY_RATIO_TARGET = 3.0         # peak ≤ 3 × the input columns
GEOMETRIC_TARGET = 10_000_000     # draws per second, simulation mode
GENERATOR_TARGET = 2_000_000      # persons per second, in memory
PHASES = ("tabulate", "count_cells", "naive", "floor")


# -- child-process phases ----------------------------------------------------------------------

def prepare(persons: int, seed: int, directory: str) -> dict[str, Any]:
    """Synthesize the records and save every phase's inputs to ``directory`` (child process)."""
    import numpy as np
    import pyarrow as pa

    from hierarchy.geography import Geography
    from hierarchy.schema import E2E_1940
    from hierarchy.synth import synthesize_1940

    d = Path(directory)
    t0 = time.perf_counter()
    data = synthesize_1940(persons, seed=seed)
    synth_seconds = time.perf_counter() - t0
    for name, table in (("persons", data.persons), ("units", data.units)):
        table = table.combine_chunks()
        with pa.OSFile(str(d / f"{name}.arrow"), "wb") as sink, \
                pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
    geography, leaves = Geography.from_columns(
        LEVELS, [[data.persons.column(c) for c in LEVELS[1:]],
                 [data.units.column(c) for c in LEVELS[1:]]])
    leaf = leaves[0]
    np.save(d / "leaf.npy", leaf)
    key = leaf.astype(np.int64) * E2E_1940.size
    strides = [int(np.prod(E2E_1940.shape[i + 1:])) for i in range(len(E2E_1940.shape))]
    for attr, stride in zip(E2E_1940.attributes, strides):
        col = data.persons.column(attr.name).to_numpy()
        np.save(d / f"attr_{attr.name}.npy", col)
        key += col.astype(np.int64) * stride
    np.save(d / "key.npy", key)
    meta = {"persons": int(data.persons.num_rows), "units": int(data.units.num_rows),
            "n_leaves": int(geography.n_units(-1)), "cells": int(E2E_1940.size),
            "units_per_level": {lv: int(geography.n_units(lv)) for lv in LEVELS},
            "synthesize_seconds": synth_seconds}
    (d / "meta.json").write_text(json.dumps(meta))
    return meta


def _load_table(path: Path):
    import pyarrow as pa

    with pa.OSFile(str(path), "rb") as source:  # read into memory (no memory map)
        return pa.ipc.open_file(source).read_all()


def phase(kind: str, directory: str, repeats: int) -> dict[str, Any]:
    """Time one way of tabulating the saved records and measure its peak (child process)."""
    import numpy as np

    from hierarchy.schema import E2E_1940
    from hierarchy.tabulation import count_cells, tabulate

    d = Path(directory)
    meta = json.loads((d / "meta.json").read_text())
    n_leaves, n_cells = meta["n_leaves"], meta["cells"]
    names = [a.name for a in E2E_1940.attributes]
    if kind == "tabulate":
        persons, units = _load_table(d / "persons.arrow"), _load_table(d / "units.arrow")
        inputs = {"persons table": persons.nbytes, "units table": units.nbytes}

        def work():
            truth = tabulate(persons, schema=E2E_1940, levels=LEVELS, units=units)
            return truth.level_counts(LEVELS[-1])
    elif kind in ("count_cells", "naive"):
        leaf = np.load(d / "leaf.npy")
        cols = [np.load(d / f"attr_{n}.npy") for n in names]
        inputs = {"leaf index": leaf.nbytes, "attribute columns": sum(c.nbytes for c in cols)}
        strides = [int(np.prod(E2E_1940.shape[i + 1:])) for i in range(len(E2E_1940.shape))]
        if kind == "count_cells":
            def work():
                return count_cells(leaf, cols, E2E_1940.shape, n_leaves)
        else:
            def work():
                key = leaf.astype(np.int64) * n_cells
                for col, stride in zip(cols, strides):
                    key += col.astype(np.int64) * stride
                return np.bincount(key, minlength=n_leaves * n_cells)
    elif kind == "floor":
        key = np.load(d / "key.npy")
        inputs = {"precomputed int64 key": key.nbytes}

        def work():
            return np.bincount(key, minlength=n_leaves * n_cells)
    else:
        raise ValueError(f"unknown phase {kind!r}; phases are {PHASES}")
    gc.collect()
    before = common.memory_status()
    reset = common.reset_peak_rss()
    peak_before = common.memory_status()["peak"]
    c0, t0 = time.process_time(), time.perf_counter()
    result = work()
    first = time.perf_counter() - t0
    first_cpu = time.process_time() - c0
    peak = common.memory_status()["peak"]
    counts = np.asarray(result).reshape(-1)
    del result
    gc.collect()
    timing = common.timed(work, repeats, warmup=0)
    key = np.load(d / "key.npy")
    matches = bool(np.array_equal(counts, np.bincount(key, minlength=n_leaves * n_cells)))
    input_bytes = sum(inputs.values())
    rise = max(0, peak - (before["rss"] if reset else peak_before))
    return {"kind": kind, "seconds": timing["seconds"], "cpu_seconds": timing["cpu_seconds"],
            "runs": timing["runs"], "first_seconds": first, "first_cpu_seconds": first_cpu,
            "inputs": inputs, "input_bytes": input_bytes, "rss_loaded_bytes": before["rss"],
            "peak_rise_bytes": rise, "peak_reset": reset,
            "memory_ratio": (input_bytes + rise) / input_bytes,
            "working_ratio": rise / input_bytes, "matches_floor": matches,
            "persons": meta["persons"]}


# -- the benchmark -----------------------------------------------------------------------------

def run_tabulation(persons: int = 132_200_000, *, repeats: int = 3, seed: int = 1,
                   workdir: str | None = None, keep: bool = False,
                   log=lambda msg: print(msg, file=sys.stderr)) -> dict[str, Any]:
    """Part (a): every tabulation phase in its own process; ratios against the floor."""
    base = Path(tempfile.mkdtemp(prefix="dapp-tabulate-", dir=workdir))
    try:
        log(f"[foundation] synthesizing {persons:,} persons into {base} ...")
        prep = common.run_python("foundation", "prepare",
                                 {"persons": persons, "seed": seed, "directory": str(base)})
        phases = {}
        for kind in PHASES:
            log(f"[foundation] phase {kind} ...")
            out = common.run_python("foundation", "phase",
                                    {"kind": kind, "directory": str(base), "repeats": repeats})
            phases[kind] = {**out["result"], "process_max_rss_bytes":
                            out["process"].get("max_rss_bytes")}
    finally:
        if not keep:
            shutil.rmtree(base, ignore_errors=True)
    floor = phases["floor"]["seconds"]
    floor_cpu = phases["floor"]["cpu_seconds"]
    for p in phases.values():
        p["ratio_to_floor"] = p["seconds"] / floor if floor > 0 else float("nan")
        p["cpu_ratio_to_floor"] = p["cpu_seconds"] / floor_cpu if floor_cpu > 0 else float("nan")
    return {"persons": persons, "repeats": repeats, "seed": seed, "data": prep["result"],
            "prepare_process": prep["process"], "phases": phases,
            "workdir": str(base) if keep else None}


def run_samplers(draws: int = 10_000_000, repeats: int = 5) -> dict[str, Any]:
    """Part (b): :func:`bench_mechanisms.run`."""
    import bench_mechanisms

    return bench_mechanisms.run(draws, repeats)


def run_generator(persons: int = 10_000_000, repeats: int = 3,
                  workdir: str | None = None) -> dict[str, Any]:
    """Part (c): :func:`bench_synth.run` (each phase in a fresh process)."""
    import bench_synth

    return bench_synth.run(persons, repeats, out=workdir)


def run(persons: int = 132_200_000, *, repeats: int = 3, seed: int = 1,
        sampler_draws: int = 10_000_000, sampler_repeats: int = 5,
        synth_persons: int = 10_000_000, synth_repeats: int = 3,
        parts: tuple[str, ...] = ("tabulation", "samplers", "generator"),
        workdir: str | None = None, keep: bool = False) -> dict[str, Any]:
    """Run the foundation benchmarks and return every figure.

    Parameters
    ----------
    persons : int
        Persons tabulated in part (a).
    repeats : int
        Timed calls per tabulation phase (median reported), after one measured first call.
    seed : int
        Seed of the synthetic data.
    sampler_draws, sampler_repeats : int
        Part (b): draws per timed run and timed runs.
    synth_persons, synth_repeats : int
        Part (c): persons per generator run and timed runs.
    parts : tuple of str
        Any of ``"tabulation"``, ``"samplers"``, ``"generator"``.
    workdir : str, optional
        Where temporary data go (default: the system temporary directory).
    keep : bool
        Keep part (a)'s saved inputs.

    Returns
    -------
    dict
        ``context`` (date, machine, commit, load at start and end) and one entry per part.
    """
    context = common.context_start()
    out: dict[str, Any] = {}
    if "tabulation" in parts:
        out["tabulation"] = run_tabulation(persons, repeats=repeats, seed=seed,
                                           workdir=workdir, keep=keep)
        out["tabulation"]["load_after"] = common.load_average()
    if "samplers" in parts:
        out["samplers"] = run_samplers(sampler_draws, sampler_repeats)
        out["samplers"]["load_after"] = common.load_average()
    if "generator" in parts:
        out["generator"] = run_generator(synth_persons, synth_repeats, workdir)
        out["generator"]["load_after"] = common.load_average()
    out["context"] = common.context_end(context)
    return out


# -- report ------------------------------------------------------------------------------------

_PHASE_LABEL = {
    "tabulate": "`tabulate` (E2E, 4 levels, with units)",
    "count_cells": "`count_cells` (pre-encoded leaf + 4 columns)",
    "naive": "naive: int64 key from the columns + `np.bincount`",
    "floor": "**floor**: `np.bincount` of the precomputed int64 key",
}


def summary_table(result: dict[str, Any]) -> str:
    """One markdown table: figures, their baseline from the same run, ratios and targets."""
    rows = []
    tab = result.get("tabulation")
    if tab:
        ph, n = tab["phases"], tab["persons"]
        fl = ph["floor"]
        for kind in ("tabulate", "count_cells"):
            p = ph[kind]
            target = TABULATE_RATIO_TARGET if kind == "tabulate" else None
            rows.append([f"{kind} time, {n:,} persons", common.fmt_seconds(p["seconds"]),
                         f"floor {common.fmt_seconds(fl['seconds'])}",
                         common.fmt_ratio(p["ratio_to_floor"]),
                         f"≤ {TABULATE_RATIO_TARGET:g}×" if target else "—",
                         common.verdict(p["ratio_to_floor"] <= target) if target else "—"])
        for kind in ("tabulate", "count_cells"):
            p = ph[kind]
            target = MEMORY_RATIO_TARGET if kind == "tabulate" else None
            rows.append([f"{kind} peak memory (inputs + rise)",
                         common.fmt_bytes(p["input_bytes"] + p["peak_rise_bytes"]),
                         f"inputs {common.fmt_bytes(p['input_bytes'])}",
                         common.fmt_ratio(p["memory_ratio"]),
                         f"≤ {MEMORY_RATIO_TARGET:g}×" if target else "—",
                         common.verdict(p["memory_ratio"] <= target) if target else "—"])
    smp = result.get("samplers")
    if smp:
        geo = smp["results"]["two_sided_geometric(z=0.25)"]
        rows.append([f"geometric draws/s (simulation), {geo['n']:,} draws",
                     f"{geo['simulation'] / 1e6:,.1f}M/s", f"target {GEOMETRIC_TARGET / 1e6:g}M/s",
                     common.fmt_ratio(geo["simulation"] / GEOMETRIC_TARGET),
                     f"≥ {GEOMETRIC_TARGET / 1e6:g}M/s",
                     common.verdict(geo["simulation"] >= GEOMETRIC_TARGET)])
    gen = result.get("generator")
    if gen:
        mem = gen["in-memory"]
        rows.append([f"generator persons/s (in memory), {gen['persons']:,} persons",
                     f"{mem['persons_per_second'] / 1e6:,.2f}M/s",
                     f"target {GENERATOR_TARGET / 1e6:g}M/s",
                     common.fmt_ratio(mem["persons_per_second"] / GENERATOR_TARGET),
                     f"≥ {GENERATOR_TARGET / 1e6:g}M/s",
                     common.verdict(mem["persons_per_second"] >= GENERATOR_TARGET)])
    return common.markdown_table(["measurement", "figure", "baseline / reference", "ratio",
                                  "target", "meets target"], rows, "lrrrrr")


def tabulation_table(tab: dict[str, Any]) -> str:
    rows = []
    for kind in PHASES:
        p = tab["phases"][kind]
        runs = ", ".join(f"{s:.2f}" for s in p["runs"])
        rows.append([_PHASE_LABEL[kind], f"{p['seconds']:.3f}", f"{p['cpu_seconds']:.3f}",
                     f"{p['first_seconds']:.3f}", runs,
                     f"{p['persons'] / p['seconds'] / 1e6:,.1f}M",
                     common.fmt_ratio(p["ratio_to_floor"]),
                     common.fmt_ratio(p["cpu_ratio_to_floor"]),
                     common.fmt_bytes(p["input_bytes"]), common.fmt_bytes(p["peak_rise_bytes"]),
                     common.fmt_ratio(p["memory_ratio"]),
                     common.fmt_bytes(p["process_max_rss_bytes"]),
                     "yes" if p["matches_floor"] else "**NO**"])
    return common.markdown_table(
        ["phase", "median s", "CPU s", "first call s", "runs (s)", "persons/s",
         "time vs floor", "CPU vs floor", "inputs", "peak rise", "(inputs+rise)/inputs",
         "process peak RSS", "counts = floor's"], rows, "lrrrrrrrrrrrr")


def sampler_table(smp: dict[str, Any]) -> str:
    def rate(value: float | None) -> str:
        return "refused" if value is None else f"{value:,.0f}"

    rows = [[name, f"{r['n']:,}", rate(r["simulation"]), rate(r["release"])]
            for name, r in smp["results"].items()]
    return common.markdown_table(["sampler", "draws", "simulation draws/s", "release draws/s"],
                                 rows)


def generator_table(gen: dict[str, Any]) -> str:
    rows = []
    for kind in ("in-memory", "parquet"):
        r = gen[kind]
        rows.append([kind, f"{r['seconds']:.2f}", f"{r['cpu_seconds']:.2f}",
                     f"{r['persons_per_second'] / 1e6:.2f}M",
                     f"{gen['persons'] / r['cpu_seconds'] / 1e6:.2f}M",
                     f"{r['peak_rss_mib']:,.0f} MiB"])
    return common.markdown_table(["phase", "median s", "CPU s", "persons/s",
                                  "persons per CPU-s", "process peak RSS"], rows)


def report(result: dict[str, Any]) -> str:
    """The whole markdown report of :func:`run`."""
    parts = ["## Foundation benchmarks (issue 2)", "", common.describe_context(result["context"]),
             "", summary_table(result), ""]
    tab = result.get("tabulation")
    if tab:
        units = ", ".join(f"{lv} {n:,}" for lv, n in tab["data"]["units_per_level"].items())
        parts += [(f"### Tabulation, {tab['persons']:,} persons ({units}; "
                   f"{tab['data']['units']:,} housing units/facilities; seed {tab['seed']})"), "",
                  f"Median of {tab['repeats']} calls after a first call, each phase in a fresh "
                  "process that loads only its inputs. *Time vs floor* divides by the floor "
                  "measured in this run: one `np.bincount` of the precomputed int64 key "
                  "`leaf × 192 + cell` of the same records (building that key is not timed); "
                  "*CPU vs floor* does the same with CPU seconds, steadier on a busy machine "
                  "but inflated by any multithreaded library call. "
                  "*Peak rise* is the process's peak resident memory during the first call "
                  "above its resident memory with the inputs loaded"
                  + ("" if all(p["peak_reset"] for p in tab["phases"].values()) else
                     " (the peak could not be reset on this kernel, so it also includes loading)")
                  + ". *Process peak RSS* (`/usr/bin/time -v`) includes the interpreter, the "
                  "libraries and the loaded inputs. The tabulate inputs are the persons and "
                  "units tables as `synthesize_1940` returns them (dictionary-encoded geocodes, "
                  f"int8 attributes). Load average after: {common.fmt_load(tab['load_after'])}.",
                  "", tabulation_table(tab), ""]
    smp = result.get("samplers")
    if smp:
        parts += [(f"### Samplers (median of {smp['repeats']} runs; load average after: "
                   f"{common.fmt_load(smp['load_after'])})"), "", sampler_table(smp), ""]
    gen = result.get("generator")
    if gen:
        parts += [(f"### Generator, {gen['persons']:,} persons (median of {gen['repeats']} "
                   "runs; each phase in a fresh process; load average after: "
                   f"{common.fmt_load(gen['load_after'])})"), "", generator_table(gen), ""]
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--persons", type=common.parse_count, default=132_200_000,
                        help="persons tabulated in part (a) (default 132.2M; e.g. 200000, 10M)")
    parser.add_argument("--repeats", type=int, default=3,
                        help="timed calls per tabulation phase (default 3)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--sampler-draws", type=common.parse_count, default=10_000_000)
    parser.add_argument("--sampler-repeats", type=int, default=5)
    parser.add_argument("--synth-persons", type=common.parse_count, default=10_000_000)
    parser.add_argument("--synth-repeats", type=int, default=3)
    parser.add_argument("--parts", default="tabulation,samplers,generator",
                        help="comma-separated subset of tabulation,samplers,generator")
    parser.add_argument("--workdir", help="directory for temporary data (default: system tmp)")
    parser.add_argument("--keep", action="store_true", help="keep part (a)'s saved inputs")
    parser.add_argument("--out", help="also write the markdown report to this file")
    parser.add_argument("--json", help="write every raw figure to this JSON file")
    args = parser.parse_args(argv)
    parts = tuple(p.strip() for p in args.parts.split(",") if p.strip())
    unknown = set(parts) - {"tabulation", "samplers", "generator"}
    if unknown:
        parser.error(f"unknown parts {sorted(unknown)}")
    result = run(args.persons, repeats=args.repeats, seed=args.seed,
                 sampler_draws=args.sampler_draws, sampler_repeats=args.sampler_repeats,
                 synth_persons=args.synth_persons, synth_repeats=args.synth_repeats,
                 parts=parts, workdir=args.workdir, keep=args.keep)
    common.emit(report(result), result, out=args.out, json_path=args.json)
    return result


if __name__ == "__main__":
    main()
