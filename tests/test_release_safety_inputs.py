"""Hostile and extreme inputs: each ends in one clear error (exit code 1) that names the key,
option or file, never in a traceback, a hang, a lost file or an allocation that cannot succeed.

1. budget totals at the float extremes; 2. non-finite numbers in an invariants spec;
3. ``postproc account`` options at 0, negative, nan, inf, 1e-300, 1e308; 4. ``account moe`` with
many levels (linear, and equal to a straightforward reference); 5. ``postproc epl`` on errors
whose EPL is undefined; 6. resource guards before large allocations; 7. named pipes, devices and
directories given as input files; 8. ``postproc synth1940`` never replaces a file it did not
write, and replaces its own only with ``--overwrite``.
"""

from __future__ import annotations

import json
import math
import os
import re
import threading
import tomllib
from fractions import Fraction
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from _configs import save_config

from hierarchy.accounting import (
    RDPCurve,
    account_moe,
    calibrate_discrete_gaussian,
    calibrate_geometric,
    compose,
    rdp_geometric,
    rdp_to_approx_dp,
    zcdp_to_approx_dp_analytic,
    zcdp_to_approx_dp_numeric,
)
from hierarchy.budget import MAX_BUDGET, MIN_BUDGET, Budget
from hierarchy.errors import HierarchyError
from hierarchy.io import read_microdata, read_table
from hierarchy.queries import e2e_workload
from hierarchy.schema import E2E_1940
from hierarchy.synth import MADE_BY, write_synthetic_1940
from invariants.errors import SpecError
from invariants.spec import Constraint, Spec
from postproc.cli import main
from postproc.errors import PostprocError
from postproc.evaluation.epl import direct_epl, improved_epl, published_epl

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "e2e1940.toml"
LEVELS = ["nation", "state", "county", "enum_dist"]


def run_cli(capsys, argv):
    """``(exit code, stdout, stderr)`` of ``postproc ARGV``; argparse usage errors give 2."""
    try:
        code = main(argv)
    except SystemExit as exc:          # argparse: a malformed option value
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def line_of(text: str, pattern: str) -> int:
    """1-based number of the first line of ``text`` matching ``pattern``."""
    return next(i for i, line in enumerate(text.splitlines(), start=1)
                if re.match(pattern, line))


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    """Synthetic data made as the brief says: ``postproc synth1940 --persons 2000 --seed 1``."""
    directory = tmp_path_factory.mktemp("e2e") / "data"
    write_synthetic_1940(directory, 2000, seed=1)
    return directory


def example_config(folder: Path, data: Path, /, **sections: Mapping[str, Any] | None) -> Path:
    """examples/e2e1940.toml beside ``data``, with its data paths pointed there, its output in
    ``folder/out`` and the keys of ``sections`` changed (see :func:`_configs.save_config`)."""
    raw = tomllib.loads(EXAMPLE.read_text())
    raw["data"].update(persons=str(data / "persons.parquet"), units=str(data / "units.parquet"))
    raw["output"]["directory"] = "out"
    return save_config(folder / "config.toml", raw, **sections)


# ---------------------------------------------------------------------------------------------
# 1. budget extremes
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("total, shown, side", [
    ("1e-300", "1e-300", "below 1e-12"), (1e-300, "1e-300", "below 1e-12"),
    (1e308, "1e+308", "above 500"), ("1e400", "about 1e400", "above 500"),
    (10 ** 400, "about 1e400", "above 500"), (Fraction(1, 10 ** 20), "1e-20", "below 1e-12"),
    (600, "600", "above 500"),
], ids=["str-1e-300", "float-1e-300", "1e308", "str-1e400", "int-10**400", "fraction-1e-20",
        "600"])
def test_budget_total_outside_the_range_is_refused(total, shown, side):
    with pytest.raises(HierarchyError) as info:
        Budget.e2e(total, LEVELS)
    message = str(info.value)
    assert f"the total budget ε = {shown} is {side}" in message
    assert "use a total between 1e-12 and 500" in message
    with pytest.raises(HierarchyError, match="total budget ρ"):
        Budget("zcdp", total, {"a": 1}, {"q": 1})


@pytest.mark.parametrize("total", [float("nan"), float("inf"), "inf", "nan", "-inf"])
def test_budget_total_not_finite_is_refused(total):
    with pytest.raises(HierarchyError, match="total budget must be a finite number"):
        Budget("pure", total, {"a": 1}, {"q": 1})


def test_budget_range_ends_are_accepted_and_shares_are_checked():
    assert Budget("pure", MIN_BUDGET, {"a": 1}, {"q": 1}).total == Fraction(1, 10 ** 12)
    assert Budget("zcdp", MAX_BUDGET, {"a": 1}, {"q": 1}).total == 500
    # the total is fine, one query's share is not: the message names it and how it arises
    with pytest.raises(HierarchyError) as info:
        Budget("pure", 1, {"a": "1/2", "b": "1/2"}, {"q": "1/10000000000000", "r":
                                                      "9999999999999/10000000000000"})
    message = str(info.value)
    assert "the share ε of query 'q' at level 'a' (total 1 × level fraction 1/2 × query fraction " \
           "1/10000000000000) = 5e-14 is below 1e-12" in message
    assert "raise the total or that query's fraction" in message


def test_noise_parameter_that_floats_cannot_use_names_the_query():
    class Vanishing:            # a mechanism whose variance underflows, as e^-z does for large z
        name, accounting, parameter_name = "vanishing", "pure", "z"

        def parameter(self, eps, sensitivity):
            return eps / sensitivity

        def variance(self, parameter):
            return 0.0

    budget = Budget.e2e(1, LEVELS)
    query = e2e_workload(E2E_1940)["hhgq"]
    with pytest.raises(HierarchyError, match="query 'hhgq' at level 'state': its share ε = "
                                             "0.05625 with sensitivity 2"):
        budget.noise_parameter("state", query, Vanishing())


@pytest.mark.parametrize("total, fragment", [
    ("1e-300", "the total budget ε = 1e-300 is below 1e-12"),
    ("1e308", "the total budget ε = 1e+308 is above 500"),
])
def test_config_budget_extremes_exit_1_naming_file_line_and_range(tmp_path, capsys, data_dir,
                                                                 total, fragment):
    config = example_config(tmp_path, data_dir, budget={"total": float(total)})
    line = line_of(config.read_text(), r"total = ")
    for argv in (["validate", str(config)],
                 ["run", str(config), "--out", str(tmp_path / "out"), "--no-progress"]):
        code, out, err = run_cli(capsys, argv)
        assert code == 1, err
        assert f"{config}, line {line}: {fragment}" in err
        assert "use a total between 1e-12 and 500" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------------------------------------
# 2. non-finite numbers in a spec
# ---------------------------------------------------------------------------------------------

LINEAR = """\
[[invariant]]
name = "tot"
levels = "all"

[[constraint]]
name = "cap"
type = "linear"
query = "marginal(hhgq)"
sense = "<="
rhs = {rhs}
levels = "all"
"""


@pytest.mark.parametrize("rhs, shown", [
    ("nan", "nan"), ("inf", "inf"), ("-inf", "-inf"), ("+nan", "nan"),
    ("[1, 2, inf, 4, 5, 6, 7, 8]", "inf"), ("[nan]", "nan"),
])
def test_spec_rhs_not_finite_names_constraint_key_and_line(rhs, shown):
    text = LINEAR.format(rhs=rhs)
    with pytest.raises(SpecError) as info:
        Spec.from_toml_string(text, source="spec.toml")
    assert str(info.value).startswith(f"spec.toml, line 10: constraint 'cap': rhs = {shown} is "
                                      "not a finite number")
    assert "write a finite bound, or drop the constraint" in str(info.value)


def test_spec_non_finite_elsewhere_and_from_python():
    inline = ('constraint = [{name = "c", type = "linear", query = "total()", sense = "==", '
              'rhs = inf}]\n')
    with pytest.raises(SpecError, match=r"^s.toml, line 1: constraint 'c': rhs = inf"):
        Spec.from_toml_string(inline, source="s.toml")
    answers = LINEAR.format(rhs="1").replace('sense = "<="', 'answers = [nan]\nsense = "<="')
    with pytest.raises(SpecError, match=r"line 9: constraint 'cap': answers = nan is not a "
                                        r"finite number"):
        Spec.from_toml_string(answers, source="s.toml")
    for rhs in (float("nan"), float("-inf"), (1.0, float("inf"))):
        with pytest.raises(SpecError, match="constraint 'x': rhs = .* is not a finite number"):
            Constraint("x", type="linear", query="total()", sense="<=", rhs=rhs)
    # finite numbers are still fine, including large ones
    spec = Spec.from_toml_string(LINEAR.format(rhs="1e300"), source="s.toml")
    assert spec.constraints[0].rhs == 1e300


def test_config_inline_spec_with_nan_exits_1(tmp_path, capsys, data_dir):
    cap = {"name": "cap", "type": "linear", "query": "total()", "sense": "<=",
           "rhs": float("nan"), "levels": "all"}
    config = example_config(tmp_path, data_dir, spec={"preset": None, "constraint": [cap]})
    line = line_of(config.read_text(), r"rhs = nan")
    code, _, err = run_cli(capsys, ["validate", str(config)])
    assert code == 1
    assert f"{config}, line {line}: constraint 'cap': rhs = nan is not a finite number" in err


# ---------------------------------------------------------------------------------------------
# 3. postproc account options at the extremes
# ---------------------------------------------------------------------------------------------

VALUES = ["0", "-1", "nan", "inf", "1e-300", "1e308"]
OK, BAD, USAGE = "ok", "bad", "usage"

# option → (the command around it, the outcome of each of VALUES)
ACCOUNT_OPTIONS = {
    "--epsilon": (["convert", "--epsilon", "{}"], [OK, BAD, BAD, BAD, OK, BAD]),
    "--rho": (["convert", "--rho", "{}"], [OK, BAD, BAD, BAD, OK, BAD]),
    "--delta": (["convert", "--epsilon", "1", "--delta", "{}"], [BAD, BAD, BAD, BAD, OK, BAD]),
    "--sensitivity": (["convert", "--epsilon", "1", "--sensitivity", "{}"],
                      [BAD, BAD, USAGE, USAGE, USAGE, USAGE]),
    "--moe": (["moe", "--moe", "{}", "--stability", "9"], [BAD, BAD, USAGE, USAGE, USAGE, USAGE]),
    "--stability": (["moe", "--moe", "6", "--stability", "{}"],
                    [BAD, BAD, USAGE, USAGE, USAGE, USAGE]),
    "--gamma": (["moe", "--moe", "6", "--stability", "9", "--gamma", "{}"],
                [OK, BAD, BAD, BAD, OK, BAD]),
    "--delta (moe)": (["moe", "--moe", "6", "--stability", "9", "--delta", "{}"],
                      [BAD, BAD, BAD, BAD, OK, BAD]),
}


@pytest.mark.parametrize("option", list(ACCOUNT_OPTIONS))
def test_account_options_at_the_extremes_name_the_option(capsys, option):
    template, outcomes = ACCOUNT_OPTIONS[option]
    flag = option.split()[0]
    for value, outcome in zip(VALUES, outcomes):
        argv = ["account"] + [part.format(value) for part in template]
        code, out, err = run_cli(capsys, argv)
        if outcome == OK:
            assert code == 0 and err == "", (argv, err)
        elif outcome == BAD:
            assert code == 1 and out == "", (argv, err)
            assert err.startswith(f"postproc account: error: {flag}: "), (argv, err)
            assert "Traceback" not in err
        else:
            assert code == 2 and f"argument {flag}: invalid int value: '{value}'" in err, argv


def test_account_convert_huge_epsilon_speaks_of_epsilon_and_its_range(capsys):
    code, _, err = run_cli(capsys, ["account", "convert", "--epsilon", "1e308"])
    assert code == 1
    assert err.startswith("postproc account: error: --epsilon: epsilon must be a finite number "
                          "in [0, 1e+15], not 1e+308")
    assert "rho must" not in err
    code, _, err = run_cli(capsys, ["account", "convert", "--rho", "1e308"])
    assert code == 1 and "--rho: rho must be a finite number in [0, 1e+30], not 1e+308" in err
    assert "alpha" not in err.split("(")[0]
    # the range ends themselves work
    assert run_cli(capsys, ["account", "convert", "--epsilon", "1e15"])[0] == 0
    assert run_cli(capsys, ["account", "convert", "--rho", "1e30"])[0] == 0


# ---------------------------------------------------------------------------------------------
# 4. account moe: linear in the number of levels, results unchanged
# ---------------------------------------------------------------------------------------------

def reference_moe(moes, stability, gamma, delta):
    """account_moe's totals computed the straightforward way: one term per level and step."""
    g = float(gamma)
    eps = [calibrate_geometric(m) for m in moes]

    def tau(alpha):
        out = 0.0
        for e in eps:
            step1, step2 = rdp_geometric(alpha, g * e / (1 - g)), rdp_geometric(alpha, e)
            out = out + stability * (step1 + step2)
        return out

    rho = sum(stability * calibrate_discrete_gaussian(m) / (1 - g) for m in moes)
    return {"pure_dp_epsilon": sum(stability * e / (1 - g) for e in eps),
            "rdp_epsilon": rdp_to_approx_dp(tau, delta),
            "zcdp_epsilon_analytic": zcdp_to_approx_dp_analytic(rho, delta),
            "zcdp_epsilon_numeric": zcdp_to_approx_dp_numeric(rho, delta)}


@pytest.mark.parametrize("moes", [
    [6, 6, 11, 11, 50, 50, 50],                                  # few distinct: one by one
    [1 + (7 * i) % 45 for i in range(90)],                        # 45 distinct: evaluated together
])
def test_account_moe_equals_the_straightforward_reference(moes):
    result = account_moe(moes, stability=9, gamma="0.1", delta=1e-10).to_dict()["total"]
    expected = reference_moe(moes, 9, 0.1, 1e-10)
    for key, value in expected.items():
        assert result[key] == pytest.approx(value, rel=1e-12), key


def test_many_distinct_geometric_terms_evaluate_like_one_by_one():
    rng = np.random.default_rng(5)
    eps = rng.uniform(1e-6, 5.0, 300)
    weights = rng.integers(1, 10, 300).astype(float)
    curve = RDPCurve(tuple(("geometric", float(e), 1, float(w)) for e, w in zip(eps, weights)))
    alpha = np.concatenate([[1 + 1e-9, 1.5, 2.0, 7.3, 1e3, 1e9, np.inf],
                            1 + np.logspace(-6, 8, 97)])
    rng.shuffle(alpha)
    one_by_one = sum(w * np.asarray(rdp_geometric(alpha, e)) for e, w in zip(eps, weights))
    assert np.allclose(curve(alpha), one_by_one, rtol=1e-12, atol=0)
    assert curve(np.inf) == pytest.approx(float(weights @ eps), rel=1e-12)
    # composing many curves is one concatenation
    parts = [RDPCurve.geometric(float(e)) for e in eps[:50]]
    assert compose(parts).terms == tuple(t for p in parts for t in p.terms)


@pytest.mark.timeout(120)   # it was quadratic (hours at this size): a regression times out here
def test_account_moe_with_100000_levels_is_not_quadratic():
    moes = [6, 6, 11, 11, 50, 50, 50] * 14_286
    result = account_moe(moes, stability=9, gamma="0.1")
    assert len(result.levels) == 100_002
    small = account_moe([6, 6, 11, 11, 50, 50, 50], stability=9, gamma="0.1")
    assert result.pure_dp_epsilon == pytest.approx(14_286 * small.pure_dp_epsilon, rel=1e-9)


# ---------------------------------------------------------------------------------------------
# 5. postproc epl with an undefined EPL
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("method, content, reason", [
    ("published", "error\n5\n5\n5\n5\n5\n",
     "all 5 errors equal 5: the error distribution is a point mass"),
    ("improved", "error\n5\n5\n5\n5\n5\n", "all 5 errors equal 5: too concentrated"),
    ("published", "3\n", "1 error(s): a density needs at least two"),
    ("improved", "3\n", "1 error(s): too few units"),
])
def test_epl_undefined_prints_the_reason_and_exits_0(tmp_path, capsys, content, reason, method):
    path = tmp_path / "errors.csv"
    path.write_text(content)
    code, out, err = run_cli(capsys, ["epl", "--errors", str(path), "--method", method])
    assert code == 0 and err == "", err
    lines = out.splitlines()
    assert lines[0] == f"EPL ({method}): undefined"
    assert lines[1] == f"undefined: {reason}" or lines[1].startswith(f"undefined: {reason}")
    assert lines[2].startswith("n = ")
    code, out, _ = run_cli(capsys, ["epl", "--errors", str(path), "--method", method, "--json"])
    data = json.loads(out)
    assert code == 0 and data["epl"] is None and data["reason"].startswith(reason)


# ---------------------------------------------------------------------------------------------
# 6. resource guards before allocating
# ---------------------------------------------------------------------------------------------

GiB = 2 ** 30


@pytest.fixture
def two_gib(monkeypatch):
    """Pretend 2 GiB are available, so the guards fire the same way on every machine."""
    import postproc.evaluation.epl._checks as checks
    monkeypatch.setattr(checks, "_available_memory", lambda: 2 * GiB)


@pytest.fixture
def errors_file(tmp_path):
    rng = np.random.default_rng(0)
    path = tmp_path / "errors.npy"
    np.save(path, (rng.geometric(0.4, 5000) - rng.geometric(0.4, 5000)).astype(float))
    return path


def test_epl_n_boot_too_large_says_memory_why_and_what_to_lower(capsys, errors_file, two_gib):
    code, out, err = run_cli(capsys, ["epl", "--errors", str(errors_file), "--n-boot", "1e8"])
    assert code == 1 and out == ""
    assert err.startswith("postproc epl: error: the bootstrap (n_boot = 100000000 replicates, "
                          "each a resample of ")
    assert re.search(r"would need about [\d.]+ GiB of memory, but only 2 GiB is available; "
                     r"lower n_boot \(--n-boot", err), err
    assert "MemoryError" not in err and "Traceback" not in err
    # a reasonable request still runs
    assert run_cli(capsys, ["epl", "--errors", str(errors_file), "--n-boot", "50",
                            "--seed", "1"])[0] == 0


def test_epl_published_window_too_large_names_multiplier(capsys, errors_file, two_gib):
    code, _, err = run_cli(capsys, ["epl", "--errors", str(errors_file), "--method", "published",
                                    "--multiplier", "1e9"])
    assert code == 1
    assert "grid points (about" in err and "GiB of arrays" in err
    assert "lower multiplier (--multiplier, now 1e+09) or percentile (--percentile, now 95)" in err
    code, _, err = run_cli(capsys, ["epl", "--errors", str(errors_file), "--method", "published",
                                    "--multiplier", "1e308"])
    assert code == 1 and "--multiplier, now 1e+308" in err and "Warning" not in err


def test_epl_guards_in_the_library(two_gib):
    errors = np.random.default_rng(1).laplace(0, 3, 2000).round()
    with pytest.raises(PostprocError, match=r"n_boot = 10000000 replicates.*would need about "
                                            r"[\d.]+ GiB of memory"):
        improved_epl(errors, n_boot=10_000_000)
    a = np.random.default_rng(2).normal(0, 5, 1000)
    with pytest.raises(PostprocError, match=r"bins of width 1e-09 .* would need about .*; raise "
                                            r"bin_width"):
        direct_epl(a, a + 1, bin_width=1e-9)
    with pytest.raises(PostprocError, match=r"the bootstrap \(n_boot = 100000000 replicates of "
                                            r"both run sets"):
        direct_epl(a.round(), a.round() + 1, n_boot=100_000_000)
    assert math.isfinite(published_epl(errors).epl)


# ---------------------------------------------------------------------------------------------
# 7. named pipes, devices and directories as input files
# ---------------------------------------------------------------------------------------------

@pytest.fixture
def make_fifo(tmp_path):
    """Make named pipes; while the test runs, a helper thread gives any reader that opens one an
    immediate end of file. A regression that reads the pipe then fails on its content instead of
    hanging — even inside C code (pyarrow) that a timeout signal cannot interrupt."""
    if not hasattr(os, "mkfifo"):
        pytest.skip("no named pipes on this platform")
    pipes: list[Path] = []
    stop = threading.Event()

    def unblock():
        while not stop.is_set():
            for path in list(pipes):
                try:       # succeeds only while a reader is blocked in open()
                    os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
                except OSError:
                    pass
            stop.wait(0.01)

    helper = threading.Thread(target=unblock, daemon=True)
    helper.start()

    def make(name: str = "pipe.csv") -> Path:
        path = tmp_path / name
        os.mkfifo(path)
        pipes.append(path)
        return path

    yield make
    stop.set()
    helper.join()


@pytest.fixture
def fifo(make_fifo):
    return make_fifo("pipe.csv")


@pytest.mark.timeout(20)
def test_microdata_fifo_is_refused(fifo, make_fifo):
    with pytest.raises(HierarchyError, match=f"^{re.escape(str(fifo))} is not a regular file: it "
                                             f"is a named pipe \\(FIFO\\)"):
        read_table(fifo)
    with pytest.raises(HierarchyError, match="is not a regular file"):
        read_microdata(fifo, schema=E2E_1940, levels=LEVELS)
    parquet = make_fifo("pipe.parquet")
    with pytest.raises(HierarchyError, match="is not a regular file"):
        read_table(parquet)
    with pytest.raises(HierarchyError, match="is not a regular file: it is a directory"):
        read_table(fifo.parent)                      # a directory given as a CSV file
    if os.path.exists("/dev/null"):
        with pytest.raises(HierarchyError, match="it is a character device"):
            read_table("/dev/null")


@pytest.mark.timeout(20)
def test_config_with_fifo_microdata_exits_1(tmp_path, capsys, data_dir, fifo):
    config = example_config(tmp_path, data_dir, data={"persons": str(fifo)})
    for argv in (["validate", str(config)],
                 ["run", str(config), "--out", str(tmp_path / "out"), "--no-progress"]):
        code, _, err = run_cli(capsys, argv)
        assert code == 1 and f"{fifo} is not a regular file: it is a named pipe (FIFO)" in err


@pytest.mark.timeout(20)
def test_epl_input_fifo_and_directory_are_refused(tmp_path, capsys, fifo):
    code, out, err = run_cli(capsys, ["epl", "--errors", str(fifo)])
    assert code == 1 and out == ""
    assert f"{fifo} is not a regular file: it is a named pipe (FIFO)" in err
    code, _, err = run_cli(capsys, ["epl", "--errors", str(tmp_path)])
    assert code == 1 and f"{tmp_path} is not a regular file: it is a directory" in err


def test_epl_errors_saved_by_numpy_are_read_whatever_the_file_is_called(tmp_path, capsys):
    """``numpy.save`` output under another name (``errors.bin``, ``errors``) was read as text
    and refused (issue 35): numpy's header says what the file is. Other binary content is
    refused as such, naming the two formats read."""
    errors = np.arange(-50.0, 50.0)
    np.save(tmp_path / "errors.npy", errors)
    argv = ["--method", "published", "--json"]
    code, expected, _ = run_cli(capsys, ["epl", "--errors", str(tmp_path / "errors.npy"), *argv])
    assert code == 0 and json.loads(expected)["n"] == 100
    for name in ("errors.bin", "errors"):
        (tmp_path / name).write_bytes((tmp_path / "errors.npy").read_bytes())
        code, out, err = run_cli(capsys, ["epl", "--errors", str(tmp_path / name), *argv])
        assert (code, out) == (0, expected), err
    noise = tmp_path / "noise.dat"
    noise.write_bytes(bytes(range(256)) * 4)
    code, out, err = run_cli(capsys, ["epl", "--errors", str(noise)])
    assert code == 1 and out == "" and "Traceback" not in err
    assert f"{noise}: binary data that is not a .npy array" in err
    assert "numpy.save" in err and "one error per line" in err
    truncated = tmp_path / "truncated.bin"      # numpy's header, then too few bytes
    truncated.write_bytes((tmp_path / "errors.npy").read_bytes()[:200])
    code, out, err = run_cli(capsys, ["epl", "--errors", str(truncated)])
    assert code == 1 and f"{truncated}: not a readable .npy array" in err


@pytest.mark.timeout(20)
def test_spec_file_fifo_and_directory_are_refused(tmp_path, capsys, data_dir, make_fifo):
    spec_pipe = make_fifo("spec.toml")
    with pytest.raises(SpecError, match=f"spec file {re.escape(str(spec_pipe))} is not a regular "
                                        "file: it is a named pipe"):
        Spec.from_toml(spec_pipe)
    folder = tmp_path / "specs"
    folder.mkdir()
    with pytest.raises(SpecError, match=f"spec file {re.escape(str(folder))} is not a regular "
                                        "file: it is a directory; give the path of a .toml file"):
        Spec.from_toml(folder)
    with pytest.raises(SpecError, match="does not exist"):
        Spec.from_toml(tmp_path / "missing.toml")
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(SpecError, match="cannot be read as UTF-8 text"):
        Spec.from_toml(binary)
    for target in (spec_pipe, folder):
        config = example_config(tmp_path, data_dir, spec={"preset": None, "file": str(target)})
        line = line_of(config.read_text(), r"file = ")
        code, _, err = run_cli(capsys, ["validate", str(config)])
        assert code == 1 and f"line {line}: spec file {target} is not a regular file" in err


# ---------------------------------------------------------------------------------------------
# 8. synth1940 never replaces what it did not write
# ---------------------------------------------------------------------------------------------

def synth(capsys, out, *extra):
    return run_cli(capsys, ["synth1940", "--persons", "2000", "--seed", "4", "--out", str(out),
                            "--no-progress", *extra])


def test_synth_refuses_a_users_file_even_with_overwrite(tmp_path, capsys):
    out = tmp_path / "data"
    out.mkdir()
    mine = out / "units.parquet"
    pq.write_table(pa.table({"x": [1, 2, 3]}), mine)          # a user's own parquet file
    before = mine.read_bytes()
    for extra in ([], ["--overwrite"]):
        code, _, err = synth(capsys, out, *extra)
        assert code == 1
        assert f"{mine} already exists and was not written by this toolkit" in err
        assert "it is never replaced — choose another output directory (--out)" in err
        assert mine.read_bytes() == before and not (out / "persons.parquet").exists()
    (out / "units.parquet").unlink()
    (out / "persons.parquet").write_text("precious notes")    # not even parquet
    code, _, err = synth(capsys, out, "--overwrite")
    assert code == 1 and "persons.parquet already exists and was not written" in err
    assert (out / "persons.parquet").read_text() == "precious notes"


def test_synth_replaces_its_own_files_only_with_overwrite(tmp_path, capsys):
    out = tmp_path / "data"
    assert synth(capsys, out)[0] == 0
    for name in ("persons.parquet", "units.parquet"):
        meta = json.loads(pq.read_schema(out / name).metadata[b"dapp"])
        assert meta["made_by"] == MADE_BY == "postproc synth1940"
    first = (out / "persons.parquet").read_bytes()
    code, _, err = synth(capsys, out)
    assert code == 1
    assert f"{out / 'persons.parquet'} already exists (written by this toolkit); pass " \
           "--overwrite" in err
    assert (out / "persons.parquet").read_bytes() == first
    code, stdout, _ = run_cli(capsys, ["synth1940", "--persons", "3000", "--seed", "4", "--out",
                                       str(out), "--no-progress", "--overwrite"])
    assert code == 0 and "3,000 persons" in stdout
    assert pq.read_metadata(out / "persons.parquet").num_rows == 3000
    assert sorted(p.name for p in out.iterdir()) == ["persons.parquet", "units.parquet"]


def test_synth_library_refuses_with_overwrite_false_and_fresh_directories_work(tmp_path):
    summary = write_synthetic_1940(tmp_path / "fresh" / "data", 2000, seed=2)  # as the demo does
    assert summary["persons"] == 2000
    with pytest.raises(HierarchyError, match="pass --overwrite"):
        write_synthetic_1940(tmp_path / "fresh" / "data", 2000, seed=2, overwrite=False)
    (tmp_path / "odd").mkdir()
    (tmp_path / "odd" / "persons.parquet").mkdir()
    with pytest.raises(HierarchyError, match="exists and is not a regular file"):
        write_synthetic_1940(tmp_path / "odd", 2000, seed=2)
