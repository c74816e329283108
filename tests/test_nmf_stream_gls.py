"""``postproc nmf run --stream --method gls``: the GLS of a Noisy Measurement File state by
state, each state's blocks in parts — the whole file's estimates and standard errors, with
only children bypassed across the cuts, resumable."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from hierarchy.synth.census2020 import synthesize_2020
from postproc.apps.nmf.reader import read_nmf
from postproc.apps.nmf.stream import run_nmf_streamed
from postproc.apps.nmf.synthetic import write_synthetic_nmf
from postproc.cli import main
from postproc.methods import postprocess

QUERIES = ("total", "votingage", "votingage * hispanic")


def _one_block(data, groups: int) -> list[str]:
    """``groups`` block groups of the microdata made one block each (their other blocks'
    persons and units moved into their first block): the file then has blocks that are only
    children, bypassed, their block group's measurements theirs."""
    blocks = pd.read_parquet(data / "blocks.parquet")
    sizes = blocks.groupby("block_group").size()
    chosen = [str(g) for g in sizes[sizes > 1].index[:groups]]
    tables = {n: pd.read_parquet(data / f"{n}.parquet") for n in ("persons", "units")}
    for bg in chosen:
        first = blocks.loc[blocks["block_group"] == bg, "block"].iloc[0]
        for table in tables.values():
            table["block"] = table["block"].astype(object)
            table.loc[table["block_group"] == bg, "block"] = first
        homes = blocks.loc[blocks["block_group"] == bg, "housing_units"].sum()
        blocks = blocks[(blocks["block_group"] != bg) | (blocks["block"] == first)].copy()
        blocks.loc[blocks["block"] == first, "housing_units"] = homes
    for name, table in tables.items():
        table.to_parquet(data / f"{name}.parquet", index=False)
    blocks.to_parquet(data / "blocks.parquet", index=False)
    return chosen


@pytest.fixture(scope="module")
def nmf(tmp_path_factory):
    """Arizona (in two pieces whose total is held across them), DC and Rhode Island, two
    block groups with a single block."""
    root = tmp_path_factory.mktemp("streamgls")
    synthesize_2020(12_000, seed=9, states=["04", "11", "44"], out=root / "data",
                    progress=False)
    chosen = _one_block(root / "data", 2)
    write_synthetic_nmf(root / "data", root / "nmf", seed=2)
    return root / "nmf", chosen


def _whole(root):
    noisy, spec = read_nmf(root, state_totals=str(root / "state_totals.csv"))
    return noisy, postprocess(noisy, "gls", spec)


def _interrupted_at_the_second_state(monkeypatch, cls, name: str, run) -> None:
    """``run()`` interrupted (KeyboardInterrupt) when ``cls.name`` is called for a second
    state; the first state's call goes through."""
    real, calls = getattr(cls, name), []

    def fail_second(self, fips, *args, **kw):
        calls.append(fips)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(self, fips, *args, **kw)

    with monkeypatch.context() as patch:
        patch.setattr(cls, name, fail_second)
        with pytest.raises(KeyboardInterrupt):
            run()
    assert len(calls) == 2


def test_state_by_state_is_the_whole_files_gls(nmf, tmp_path):
    """Every level's estimates and standard errors of three queries equal the whole-file
    GLS's (to 1e-7 relative; the float rounding of two orders of the same sums), with the
    blocks in parts of at most 40 on two processes — and the fixture really has what the
    cuts must carry: a state in two pieces, and bypassed only-child blocks under the
    block groups made one block each."""
    root, chosen = nmf
    noisy, whole = _whole(root)
    geo = noisy.geography
    assert geo.n_units("state") == 4                      # 004, 104, 011, 044
    lone = geo.only_children(geo.depth - 1)
    drawn = noisy.measurements["block"]["detailed"].drawn
    unmeasured = ~drawn.any(axis=1) if drawn is not None else np.zeros(lone.size, bool)
    parents = geo.geocodes[geo.depth - 2][geo.parents[-1][lone & unmeasured]]
    assert len(parents) == len(chosen) == 2
    out = run_nmf_streamed(root, tmp_path / "gls", method="gls", queries=QUERIES,
                           state_totals=str(root / "state_totals.csv"), part_blocks=40,
                           workers=2, log=lambda line: None)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["method"] == "gls" and manifest["safe_for_release"] is False
    assert manifest["structure"]["structure"] == "split"
    for lv in geo.levels:
        got = pd.read_parquet(out / f"{lv}.parquet")
        assert set(got["query"]) == set(QUERIES)
        for q in QUERIES:
            want = whole.intervals(lv, q, interval=0.9)
            mine = got[got["query"] == q].set_index([lv, "answer"])
            keys = list(zip(want[lv].astype(str) if lv != "nation" else ["US"] * len(want),
                            want["answer"]))
            assert len(mine) == len(keys), (lv, q)
            mine = mine.loc[keys]
            scale = max(1.0, float(want["estimate"].abs().max()))
            assert np.abs(mine["estimate"].to_numpy() - want["estimate"].to_numpy()).max() \
                <= 1e-7 * scale, (lv, q)
            var_a, var_b = want["se"].to_numpy() ** 2, mine["se"].to_numpy() ** 2
            assert np.abs(var_a - var_b).max() <= 1e-9 + 1e-7 * var_a.max(), (lv, q)
            half = (mine["upper"] - mine["lower"]).to_numpy() / 2
            assert np.allclose(half, 1.6448536269514722 * mine["se"].to_numpy())
    blocks = pd.read_parquet(out / "geography.parquet")
    assert (blocks["level"] == "block").sum() == geo.n_units("block")
    assert not (out / ".states").exists()


def test_an_interrupted_run_resumes_without_solving_a_finished_state_again(nmf, tmp_path,
                                                                          monkeypatch):
    """Interrupted in its second state's downward pass, a run into the same directory takes
    every state's upward pass and the first state's downward pass as they are, and writes
    what an uninterrupted run writes."""
    import postproc.apps.nmf.stream_gls as stream_gls

    root, _ = nmf
    kwargs = dict(method="gls", state_totals=str(root / "state_totals.csv"), part_blocks=60,
                  workers=1)
    clean = run_nmf_streamed(root, tmp_path / "clean", log=lambda line: None, **kwargs)
    _interrupted_at_the_second_state(monkeypatch, stream_gls._StateRun, "downward",
                                     lambda: run_nmf_streamed(root, tmp_path / "resumed",
                                                              log=lambda line: None, **kwargs))
    lines: list[str] = []
    again = run_nmf_streamed(root, tmp_path / "resumed", log=lines.append, **kwargs)
    assert sum("upward done by an earlier run (resumed)" in line for line in lines) == 3
    assert [line.split(":")[0] for line in lines if "downward done by an earlier" in line] \
        == ["state 04"]
    for lv in ("nation", "county", "block_group", "block"):
        a, b = pd.read_parquet(clean / f"{lv}.parquet"), pd.read_parquet(again / f"{lv}.parquet")
        pd.testing.assert_frame_equal(a, b)


def test_gls_options_are_refused_where_they_mean_nothing(nmf, tmp_path, capsys):
    root, _ = nmf
    totals = str(root / "state_totals.csv")
    assert main(["nmf", "run", str(root), "--out", str(tmp_path / "a"), "--state-totals",
                 totals, "--queries", "total"]) != 0
    assert "--queries and --interval choose what gls state by state writes" \
        in capsys.readouterr().err
    assert main(["nmf", "run", str(root), "--out", str(tmp_path / "b"), "--state-totals",
                 totals, "--stream", "--method", "gls", "--queries", "nonsense"]) != 0
    assert "unknown query 'nonsense'" in capsys.readouterr().err
    assert main(["nmf", "run", str(root), "--out", str(tmp_path / "c"), "--state-totals",
                 totals, "--stream", "--method", "gls", "--interval", "1.5"]) != 0
    assert "interval must be between 0 and 1" in capsys.readouterr().err
    assert not any((tmp_path / d).exists() for d in "abc")


def test_bluedown_state_by_state_gives_the_whole_files_integers(nmf, tmp_path, monkeypatch):
    """``--stream --method bluedown``: the GLS's upward pass state by state, then TopDown's
    node problems on its subtree estimates from the nation down, each state's blocks in parts
    of at most 40 on two processes — the whole file's BlueDown integers at every level; and
    an interrupted run resumes without solving a finished state again."""
    import postproc.apps.nmf.stream_bluedown as stream_bluedown
    from postproc.apps.nmf.run import production_options
    from postproc.result import Result

    root, _ = nmf
    noisy, spec = read_nmf(root, state_totals=str(root / "state_totals.csv"))
    whole = postprocess(noisy, "bluedown", spec,
                        **production_options(list(noisy.levels), "bluedown"))
    kwargs = dict(method="bluedown", state_totals=str(root / "state_totals.csv"),
                  part_blocks=40)
    out = run_nmf_streamed(root, tmp_path / "bd", workers=2, log=lambda line: None, **kwargs)
    streamed = Result.read(out)
    assert streamed.method == "bluedown"
    for li in range(noisy.geography.depth):
        assert list(streamed.geography.geocodes[li]) == list(noisy.geography.geocodes[li])
        assert np.array_equal(streamed.histograms[li], whole.histograms[li]), li
    _interrupted_at_the_second_state(monkeypatch, stream_bluedown._BlueDownState, "solve",
                                     lambda: run_nmf_streamed(root, tmp_path / "again",
                                                              workers=1, log=lambda line: None,
                                                              **kwargs))
    lines: list[str] = []
    again = Result.read(run_nmf_streamed(root, tmp_path / "again", workers=1,
                                         log=lines.append, **kwargs))
    assert [line.split(":")[0] for line in lines if "solved by an earlier run" in line] \
        == ["state 04"]
    assert all(np.array_equal(a, b) for a, b in zip(whole.histograms, again.histograms))


def test_finished_runs_against_the_truth_at_every_level(nmf, tmp_path):
    """``postproc nmf compare ROOT --runs NAME=DIR ...``: the three methods run state by state,
    their block totals read from their directories and added up the spine, the truth counted
    from the synthetic file's persons — the same errors at every level as the whole-file
    results' against the truth tabulated whole (computed here independently)."""
    from postproc.apps.nmf.compare import nmf_truth
    from postproc.apps.nmf.run import production_options

    root, _ = nmf
    totals = str(root / "state_totals.csv")
    noisy, spec = read_nmf(root, state_totals=totals)
    truth = nmf_truth(root, noisy)
    levels = list(noisy.levels)
    whole = {"topdown": postprocess(noisy, "topdown", spec, **production_options(levels)),
             "gls": postprocess(noisy, "gls", spec),
             "bluedown": postprocess(noisy, "bluedown", spec,
                                     **production_options(levels, "bluedown"))}
    runs = []
    for m in whole:
        run_nmf_streamed(root, tmp_path / m, method=m, state_totals=totals, part_blocks=60,
                         workers=1, log=lambda line: None)
        runs.append(f"{m}={tmp_path / m}")
    out = tmp_path / "cmp"
    assert main(["nmf", "compare", str(root), "--runs", *runs, "--out", str(out)]) == 0
    table = pd.read_csv(out / "truth.csv")
    assert (out / "truth.png").stat().st_size > 0 and not (out / "published.csv").exists()
    assert table["randomness"].str.startswith("SIMULATION MODE").all()
    for method, result in whole.items():
        for li, lv in enumerate(levels):
            error = result.histograms[li].sum(axis=1) - truth.counts[li].sum(axis=1)
            row = table[(table["method"] == method) & (table["level"] == lv)].iloc[0]
            assert row["units"] == error.size and row["truth"] == int(truth.counts[0].sum())
            assert row["mean_abs"] == pytest.approx(float(np.abs(error).mean()), abs=1e-6)
            assert row["max_abs"] == pytest.approx(float(np.abs(error).max()), abs=1e-6)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["truth"] == str(root) and manifest["files"] == ["truth.csv", "truth.png"]


def _census_variables(hist: np.ndarray) -> dict[str, np.ndarray]:
    """A few published variables of block histograms (blocks × 2,016), straight from the
    attributes (hhgq, votingage, hispanic, cenrace): independent of the tables' module."""
    from hierarchy.presets.pl94 import PL94_2020

    h = hist.reshape(-1, *PL94_2020.shape)
    several = np.array(["-" in str(x) for x in PL94_2020.attributes[-1].labels])
    return {"total": h.sum(axis=(1, 2, 3, 4)),
            "P1_003N": h[..., 0].sum(axis=(1, 2, 3)),                    # White alone
            "P1_009N": h[..., several].sum(axis=(1, 2, 3, 4)),           # two or more races
            "P2_002N": h[:, :, :, 1].sum(axis=(1, 2, 3)),                # Hispanic or Latino
            "P3_001N": h[:, :, 1].sum(axis=(1, 2, 3)),                   # 18 and over
            "P4_005N": h[:, :, 1, 0, 0].sum(axis=1),                     # 18+, not Hisp., White
            "P5_001N": h[:, 1:].sum(axis=(1, 2, 3, 4)),                  # group quarters
            "P5_008N": h[:, 5].sum(axis=(1, 2, 3))}                      # college housing


def test_runs_against_published_tables_variable_by_variable(nmf, tmp_path):
    """``--published`` with variables of P1–P5 (here the truth's, as the published tables
    would give them, at counties, tracts and blocks): TopDown's errors, whole-file and from a
    streamed run read a batch at a time, equal those computed here from its histograms
    attribute by attribute; the GLS run (estimates of the total) is compared on the total."""
    from postproc.apps.nmf.compare import nmf_truth
    from postproc.apps.nmf.layout import block_geoid
    from postproc.apps.nmf.run import production_options

    root, _ = nmf
    totals = str(root / "state_totals.csv")
    noisy, spec = read_nmf(root, state_totals=totals)
    truth = _census_variables(nmf_truth(root, noisy).counts[-1])
    geoids = pd.Series([block_geoid(str(b)) for b in noisy.geography.geocodes[-1]])
    frames = []
    for length in (5, 11, 15):
        unit = geoids.str[:length].values
        frames.append(pd.DataFrame({v: pd.Series(x).groupby(unit).sum()
                                    for v, x in truth.items()}).rename_axis("geoid"))
    published = tmp_path / "pl.csv"
    pd.concat(frames).reset_index().to_csv(published, index=False)
    out = tmp_path / "whole"
    assert main(["nmf", "compare", str(root), "--methods", "topdown", "--out", str(out),
                 "--state-totals", totals, "--published", str(published)]) == 0
    whole = pd.read_csv(out / "published.csv")
    topdown = postprocess(noisy, "topdown", spec, **production_options(list(noisy.levels)))
    mine = _census_variables(topdown.histograms[-1])
    for length, level in ((5, "county"), (11, "tract"), (15, "block")):
        unit = geoids.str[:length].values
        for v in truth:
            error = (pd.Series(mine[v]).groupby(unit).sum()
                     - pd.Series(truth[v]).groupby(unit).sum())
            row = whole[(whole["level"] == level) & (whole["variable"] == v)].iloc[0]
            assert row["mean_abs"] == pytest.approx(float(np.abs(error).mean())), (level, v)
            assert row["max_abs"] == pytest.approx(float(np.abs(error).max())), (level, v)
    for m in ("topdown", "gls"):
        run_nmf_streamed(root, tmp_path / m, method=m, state_totals=totals, part_blocks=60,
                         workers=1, log=lambda line: None)
    cmp = tmp_path / "runs"
    assert main(["nmf", "compare", "--runs", f"topdown={tmp_path / 'topdown'}",
                 f"gls={tmp_path / 'gls'}", "--published", str(published), "--out",
                 str(cmp)]) == 0
    runs = pd.read_csv(cmp / "published.csv")
    key = ["level", "variable"]
    a = whole.set_index(key)["mean_abs"]
    b = runs[runs["method"] == "topdown"].set_index(key)["mean_abs"]
    pd.testing.assert_series_equal(a.sort_index(), b.sort_index())
    assert set(runs.loc[runs["method"] == "gls", "variable"]) == {"total"}
    assert (cmp / "published.png").stat().st_size > 0
