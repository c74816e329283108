"""A result's provenance is a typed record (postproc.result.Provenance) that reads as the JSON
object every method writes: the typed entries as attributes, the method's own in ``details``,
mapping access in the order written, and the same JSON in a result's manifest."""

from __future__ import annotations

import json

import pytest

from postproc.errors import PostprocError
from postproc.methods import catalogue
from postproc.result import PROVENANCE_FIELDS, Provenance, Result

from conftest import build_case

METHODS = catalogue()


def run(entry, case_name="published"):
    _, noisy, spec = build_case(case_name)
    return entry(noisy, spec if entry.invariants else None, rng=1)


@pytest.mark.parametrize("entry", METHODS, ids=[e.name for e in METHODS])
def test_every_methods_provenance_is_the_record_and_its_json_is_the_manifests(entry, tmp_path):
    result = run(entry)
    provenance = result.provenance
    assert isinstance(provenance, Provenance)
    # every method records the measurements it post-processed, with their randomness label
    assert "noisy" in provenance and provenance.noisy is provenance["noisy"]
    assert provenance.noisy["randomness"]["mode"] == "simulation"
    for name in PROVENANCE_FIELDS:
        assert (name in provenance) == (name in provenance.order)
        if name in provenance:
            assert getattr(provenance, name) is provenance[name]
    assert set(provenance.details) == set(provenance) - set(PROVENANCE_FIELDS)
    # the manifest holds the JSON the method wrote, entries in its order
    written = json.loads((result.write(tmp_path / "r") / "manifest.json").read_text())
    assert list(written["provenance"]) == list(provenance)
    assert written["provenance"] == json.loads(json.dumps(provenance.to_dict()))
    back = Result.read(tmp_path / "r").provenance
    assert isinstance(back, Provenance) and back == provenance and list(back) == list(provenance)


def test_the_spec_keeping_methods_fill_the_typed_entries():
    for name in ("topdown", "sampling"):
        entry = next(e for e in METHODS if e.name == name)
        provenance = run(entry).provenance
        assert provenance.spec["invariant"] and set(provenance.timings) >= {"levels", "total"}
        assert isinstance(provenance.failsafe_reports, list)
        assert ("solver" if name == "topdown" else "sampler") in provenance.details
    hay = run(next(e for e in METHODS if e.name == "hay")).provenance
    assert hay.spec is None and hay.timings == {} and hay.failsafe_reports == ()
    assert hay["method"] == hay.details["method"] == "hay" and "spec" not in hay


def test_a_dict_is_converted_and_reads_as_before():
    truth, noisy, _ = build_case("published")
    written = {"method": "mine", "noisy": dict(noisy.provenance), "weights": [1, 2],
               "timings": {"levels": {"nation": 0.5}, "total": 0.5}}
    result = Result("mine", noisy.schema, noisy.geography, noisy.workload, truth.counts, written)
    provenance = result.provenance
    assert provenance == written and dict(provenance) == written
    assert list(provenance) == list(written)
    assert provenance["method"] == "mine" and provenance.get("nothing", 7) == 7
    assert "weights" in provenance and "spec" not in provenance
    assert {**provenance, "extra": 1} == {**written, "extra": 1}
    assert provenance.timings["levels"] == {"nation": 0.5}
    assert provenance.details["weights"] == [1, 2]
    assert result.randomness == noisy.provenance["randomness"]
    again = Result(result.method, result.schema, result.geography, result.workload,
                   result.histograms, provenance)
    assert again.provenance is provenance                       # a record is kept as it is
    with pytest.raises(KeyError):
        provenance["nothing"]  # noqa: B018
    with pytest.raises(TypeError):
        provenance["method"] = "other"                          # a record is read-only


def test_a_record_made_by_keyword_lists_the_entries_set():
    provenance = Provenance(noisy={"randomness": {"mode": "release"}}, spec={"invariant": []},
                            failsafe_reports=[], details={"solver": {"chain": ["osqp"]}})
    assert list(provenance) == ["noisy", "spec", "solver"]
    assert provenance.to_dict() == {"noisy": {"randomness": {"mode": "release"}},
                                    "spec": {"invariant": []},
                                    "solver": {"chain": ["osqp"]}}
    assert repr(provenance) == "Provenance(noisy, spec, solver)"
    assert Provenance() == {} and len(Provenance()) == 0


@pytest.mark.parametrize("entries, message", [
    ({"noisy": None}, "noisy must be a mapping, not NoneType"),
    ({"spec": "e2e"}, "spec must be a mapping or None, not str"),
    ({"timings": [1.0]}, "timings must be a mapping, not list"),
    ({"failsafe_reports": {"a": 1}}, "failsafe_reports must be a list, not dict")])
def test_an_entry_of_the_wrong_kind_is_refused(entries, message):
    with pytest.raises(PostprocError, match=message):
        Provenance.from_dict(entries)


def test_details_do_not_hold_typed_entries_and_the_order_names_each_entry_once():
    with pytest.raises(PostprocError, match=r"\['spec'\] are typed entries"):
        Provenance(details={"spec": {}})
    with pytest.raises(PostprocError, match="does not name each entry once"):
        Provenance(details={"a": 1}, order=("noisy",))
    with pytest.raises(PostprocError, match="does not name each entry once"):
        Provenance(details={"a": 1}, order=("a", "a"))
