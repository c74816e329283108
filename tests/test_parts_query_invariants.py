"""Query invariants in runs in parts: TopDown and ``gls`` in parts publish a spec's query
invariants where their levels are — above the split from the top's truth, below it from each
part's — and give the results of the whole run measured with the same keyed streams
(:func:`whole_measurement`), holding every declared answer exactly."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from hierarchy.synth.census2020 import synthesize_2020
from invariants.spec import Spec
from postproc.apps.runs.demo import demo_config
from postproc.apps.runs.parts import run_in_parts, whole_measurement
from postproc.apps.runs.parts_gls import gls_in_parts
from postproc.apps.runs.pipeline import load_truth, method_options
from postproc.methods.gls import gls
from postproc.methods.topdown import topdown
from postproc.result import histograms_from_table

#: votingage at a level above the split (county) and one below it (block group); one answer of
#: votingage × hispanic at the split level itself (the tracts).
QUERY_INVARIANTS = [{"query": "votingage", "levels": ["county", "block_group"]},
                    {"name": "adults_not_hispanic", "query": "votingage * hispanic",
                     "answers": [2], "levels": ["tract"]}]


@pytest.fixture(scope="module")
def setting(tmp_path_factory):
    base = tmp_path_factory.mktemp("parts_query_invariants")
    synthesize_2020(5_000, seed=11, out=base / "data")
    config = demo_config(base, preset="pl94_2020", seed=7, executor="serial")
    spec = config.spec.to_dict()
    # the total held at the nation only, so that the declared answers are what holds the others
    spec["invariant"] = ([{"name": "tot", "levels": ["nation"]}] + spec["invariant"][1:]
                         + QUERY_INVARIANTS)
    # as a run configuration's loader does: workload query names resolved
    config = dataclasses.replace(config, spec=Spec.from_dict(spec).resolve_queries(
        config.workload))
    truth = load_truth(config)
    return base, config, truth, whole_measurement(config, truth)


def _held(config, truth, histograms):
    """Each declared answer: (level, exact answers, the result's answers)."""
    out = []
    for entry in QUERY_INVARIANTS:
        q = config.workload[entry["query"]]
        answers = entry.get("answers")
        for lv in entry["levels"]:
            li = truth.geography.level_index(lv)
            want = q.answer(truth.counts[li])
            got = q.answer(np.asarray(histograms[li], dtype=np.float64))
            if answers is not None:
                want, got = want[:, answers], got[:, answers]
            out.append((lv, want, got))
    return out


def test_the_measurement_publishes_what_is_declared(setting):
    _, config, truth, noisy = setting
    for lv, want, _ in _held(config, truth, truth.counts):
        name = "votingage" if lv != "tract" else "adults_not_hispanic"
        np.testing.assert_array_equal(noisy.invariants[lv][name], want)


def test_topdown_in_parts_is_the_whole_run_and_holds_the_query_invariants(setting, tmp_path):
    base, config, truth, noisy = setting
    whole = topdown(noisy, config.spec, **method_options(config, "topdown"))
    done = run_in_parts(config, tmp_path / "out", part_blocks=40, log=lambda line: None)
    assert done.parts > 3
    geo = truth.geography
    got = [histograms_from_table(pq.read_table(tmp_path / "out" / f"{lv}.parquet"),
                                 config.schema, geo, lv) for lv in geo.levels]
    for li, lv in enumerate(geo.levels):
        np.testing.assert_array_equal(got[li], whole.histograms[li], err_msg=lv)
    for lv, want, held in _held(config, truth, got):
        np.testing.assert_array_equal(held, want, err_msg=lv)
    # the declared answers did bind: without them the same streams give other counties
    free = dataclasses.replace(config, spec=Spec.from_dict(
        {**config.spec.to_dict(), "invariant": config.spec.to_dict()["invariant"][:-2]}))
    assert not [i for i in free.spec.invariants if i.is_query]
    unheld = topdown(whole_measurement(free, truth), free.spec,
                     **method_options(free, "topdown"))
    county = geo.level_index("county")
    q = config.workload["votingage"]
    assert not np.array_equal(q.answer(unheld.histograms[county]), q.answer(truth.counts[county]))


def test_gls_in_parts_is_the_whole_gls_and_holds_the_query_invariants(setting, tmp_path):
    base, config, truth, noisy = setting
    whole = gls(noisy, config.spec)
    done = gls_in_parts(config, tmp_path / "gls", part_blocks=40, queries=("votingage",),
                        log=lambda line: None)
    assert done.parts > 3
    q = config.workload["votingage"]
    for lv in ("county", "tract", "block_group", "block"):
        li = truth.geography.level_index(lv)
        rows = pd.read_parquet(done.directory / f"{lv}.parquet")
        rows = rows[rows["query"] == "votingage"]
        order = pd.Index(truth.geography.geocodes[li].astype(str))
        units = order.get_indexer(rows[lv].astype(str))
        labels = {q.answer_label(a): a for a in range(2)}
        estimate = np.full((truth.geography.n_units(lv), 2), np.nan)
        estimate[units, rows["answer"].astype(str).map(labels).to_numpy()] = rows["estimate"]
        np.testing.assert_allclose(estimate, q.answer(whole.histograms[li]), rtol=1e-8,
                                   atol=1e-6, err_msg=lv)
        if lv in ("county", "block_group"):
            np.testing.assert_allclose(estimate, q.answer(truth.counts[li]), atol=1e-6,
                                       err_msg=lv)


def test_bluedown_in_parts_is_the_whole_bluedown_and_holds_the_query_invariants(setting,
                                                                                  tmp_path):
    from postproc.methods.gls.bluedown import bluedown
    from postproc.result import Result

    base, config, truth, noisy = setting
    options = {k: v for k, v in config.topdown_options().as_dict().items()
               if k not in ("passes", "pass_tolerance")}
    whole = bluedown(noisy, config.spec, **options)
    done = gls_in_parts(config, tmp_path / "bd", part_blocks=40, method="bluedown",
                        log=lambda line: None)
    got = Result.read(done.directory)
    for li, lv in enumerate(truth.geography.levels):
        np.testing.assert_array_equal(got.histograms[li], whole.histograms[li], err_msg=lv)
    for lv, want, held in _held(config, truth, got.histograms):
        np.testing.assert_array_equal(held, want, err_msg=lv)
