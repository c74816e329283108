"""``postproc mis`` and the CSV table layer: JSON keys and values, exact invariants, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from postproc.cli import main
from postproc.errors import PostprocError
from postproc.methods.sampling import read_count_table, release_table

DATA = Path(__file__).resolve().parents[1] / "examples" / "data" / "gong_sex_age.csv"
# voting_age is a function of age_group in the Gong table (46 of the 92 combinations exist):
# --derived says so, and the table is checked to be complete otherwise
BASE = ["mis", "--table", str(DATA), "--count-column", "count", "--derived",
        "voting_age=age_group", "--invariant", "total", "--invariant", "marginal(sex)",
        "--invariant", "marginal(voting_age)", "--epsilon", "0.5"]


def _run(capsys, argv):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("sampler", ["mis", "lattice"])
def test_cli_json_keys_and_values(capsys, sampler):
    extra = ["--proposal-epsilon", "0.6", "--draws", "30000"] if sampler == "mis" else \
        ["--draws", "300"]
    code, out, _ = _run(capsys, BASE + ["--sampler", sampler, "--seed", "5", "--json"] + extra)
    assert code == 0
    doc = json.loads(out)
    for key in ("acceptance_rate", "ess", "released", "invariants_hold", "randomness",
                "settings", "sampler"):
        assert key in doc
    assert doc["sampler"] == sampler and doc["invariants_hold"] is True
    assert 0 < doc["acceptance_rate"] < 1
    assert doc["ess"]["min"] > 0 and doc["ess"]["median"] >= doc["ess"]["min"]
    assert len(doc["ess"]["per_cell"]) == 46
    rows = doc["released"]
    assert len(rows) == 46 and set(rows[0]) == {"sex", "age_group", "voting_age", "count"}
    frame = pd.DataFrame(rows)
    truth = pd.read_csv(DATA, dtype={"voting_age": str})
    assert frame[["sex", "age_group", "voting_age"]].equals(truth[["sex", "age_group",
                                                                     "voting_age"]])
    counts = frame["count"]
    assert all(isinstance(c, int) and c >= 0 for c in counts)
    assert counts.sum() == 256
    assert counts[frame.sex == "female"].sum() == 130
    assert counts[frame.voting_age == "1"].sum() == 213
    assert doc["randomness"]["mode"] == "simulation"
    if sampler == "mis":
        assert doc["settings"]["proposal_epsilon"] == 0.6


def test_cli_is_reproducible_with_a_seed_and_release_mode_without(capsys):
    argv = BASE + ["--draws", "200", "--json"]
    a = json.loads(_run(capsys, argv + ["--seed", "3"])[1])
    b = json.loads(_run(capsys, argv + ["--seed", "3"])[1])
    assert a["released"] == b["released"]
    c = json.loads(_run(capsys, argv)[1])
    assert c["randomness"]["mode"] == "release" and c["randomness"]["safe_for_release"]


def test_cli_text_output_and_out_file(capsys, tmp_path):
    out_csv = tmp_path / "released.csv"
    code, out, _ = _run(capsys, BASE + ["--draws", "100", "--seed", "1", "--out", str(out_csv)])
    assert code == 0 and "invariants hold (exact): True" in out and "NOT SAFE" in out
    released = pd.read_csv(out_csv)
    assert released["count"].sum() == 256 and list(released.columns)[-1] == "count"


@pytest.mark.parametrize("argv, message", [
    (["--count-column", "n"], "no column 'n'"),
    (["--invariant", "marginal(age)"], r"invariant 'marginal\(age\)': .*no attribute 'age'"),
    (["--invariant", "margin(sex)"], r"invariant 'margin\(sex\)': unknown query term"),
    (["--invariant", "total=250"], "unsatisfiable: 'total' = 250 contradicts .* imply 256"),
    (["--invariant", "marginal(sex)=300,-44"], "unsatisfiable"),
    (["--invariant", "marginal(sex)=1"], "must be 2 integer"),
    (["--sampler", "lattice", "--proposal-epsilon", "0.6"], "applies to --sampler mis only"),
    (["--sampler", "mis", "--proposal-epsilon", "0.3", "--draws", "5000"], "never left its start"),
])
def test_cli_errors_are_clear(capsys, argv, message):
    base = list(BASE)
    if argv[0] == "--count-column":
        base[base.index("--count-column") + 1] = argv[1]
        argv = []
    code, _, err = _run(capsys, base + argv + ["--seed", "1"])
    assert code == 1
    import re
    assert re.search(message, err), err


@pytest.mark.parametrize("content, message", [
    ("sex,count\nf,1.5\n", "line 2: count '1.5' is not an integer"),
    ("sex,count\nf,-1\n", "line 2: count -1 is negative"),
    ("sex,count\nf,x\n", "not an integer"),
    ("sex,count\nf,1\nf,2\n", "line 3: the cell .* repeats line 2"),
    ("count\n1\n", "no key columns"),
    ("age group,count\na,1\n", "not an identifier"),
    ("sex,count\n,1\n", "column 'sex' is empty"),
])
def test_table_errors_name_the_line(tmp_path, content, message):
    path = tmp_path / "t.csv"
    path.write_text(content)
    with pytest.raises(PostprocError, match=message):
        read_count_table(path)


def test_missing_table_file(tmp_path):
    with pytest.raises(PostprocError, match="no such file"):
        read_count_table(tmp_path / "nope.csv")


def test_a_missing_cell_is_refused_unless_the_levels_complete_the_table(tmp_path):
    """A 2 x 2 table with one cell missing (as groupby().size() writes a zero cell) would
    publish which cell is zero if released as is: it is refused, and with the levels given
    it is completed with a zero row and every cell is released."""
    path = tmp_path / "t.csv"
    path.write_text("sex,adult,count\nf,0,3\nf,1,5\nm,1,4\n")
    invariants = ["total", "marginal(adult)", "marginal(sex)"]
    with pytest.raises(PostprocError, match="1 of the 4 cells .* have no row, e.g. sex=m"):
        release_table(read_count_table(path), invariants, epsilon=0.5, draws=200, rng=2)
    release = release_table(read_count_table(path), invariants, epsilon=0.5, draws=200, rng=2,
                            levels={"sex": ["f", "m"], "adult": ["0", "1"]})
    rows = release.rows()
    assert [(r["sex"], r["adult"]) for r in rows] == [("f", "0"), ("f", "1"), ("m", "0"),
                                                      ("m", "1")]
    assert release.invariants_hold and release.released.sum() == 12


def test_discrete_gaussian_and_laplace_tables(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("g,count\na,3\nb,4\nc,5\n")
    dg = release_table(path, ["total"], rho=0.5, mechanism="discrete_gaussian", draws=200, rng=1)
    assert dg.invariants_hold and dg.released.sum() == 12
    lp = release_table(path, ["total"], epsilon=1.0, mechanism="laplace", draws=200, rng=1)
    assert lp.invariants_hold and abs(lp.released.sum() - 12) < 1e-9
