"""``postproc account``: JSON keys and values, the table, and error handling."""

from __future__ import annotations

import json
import math
import re

import pytest

from hierarchy.accounting import account_moe, zcdp_to_approx_dp_analytic
from postproc.cli import main

REFERENCE = ["account", "moe", "--moe", "6", "6", "11", "11", "50", "50", "50",
             "--stability", "9", "--gamma", "0.1", "--delta", "1e-10"]


def run(capsys, argv):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_moe_json_keys_and_values(capsys):
    code, out, _ = run(capsys, REFERENCE + ["--json"])
    assert code == 0
    data = json.loads(out)
    assert set(data) == {"assumption", "levels", "total", "algorithms"}
    assert [level["moe"] for level in data["levels"]] == [6, 6, 11, 11, 50, 50, 50]
    for level in data["levels"]:
        assert set(level) == {"moe", "epsilon_step2", "epsilon_total", "rho_step2", "rho_total",
                              "coverage", "total_only"}
        assert set(level["coverage"]) == {"nominal", "geometric", "discrete_gaussian"}
        m = level["moe"]
        assert level["epsilon_step2"] == pytest.approx(math.log(20) / (m + 1), rel=1e-12)
        assert level["epsilon_total"] == pytest.approx(9 / 0.9 * math.log(20) / (m + 1),
                                                       rel=1e-12)
        assert level["rho_step2"] == pytest.approx(1.92 / m ** 2, rel=1e-12)
        assert level["rho_total"] == pytest.approx(9 / 0.9 * 1.92 / m ** 2, rel=1e-12)
    total = data["total"]
    assert set(total) == {"pure_dp_epsilon", "rdp_epsilon", "zcdp_epsilon_analytic",
                          "zcdp_epsilon_numeric"}
    rho = sum(level["rho_total"] for level in data["levels"])
    assert total["pure_dp_epsilon"] == pytest.approx(15.314318, abs=1e-6)
    assert total["zcdp_epsilon_analytic"] == pytest.approx(
        zcdp_to_approx_dp_analytic(rho, 1e-10), rel=1e-12)
    assert total["rdp_epsilon"] == pytest.approx(12.9279, abs=1e-4)
    assert total["zcdp_epsilon_analytic"] == pytest.approx(12.7911, abs=1e-4)
    assert total["zcdp_epsilon_numeric"] == pytest.approx(12.1629, abs=1e-4)
    expected = account_moe([6, 6, 11, 11, 50, 50, 50], stability=9, gamma="0.1",
                           delta=1e-10).to_dict()
    assert data == expected


def test_moe_table(capsys):
    code, out, _ = run(capsys, REFERENCE)
    assert code == 0
    assert "stability s = 9, gamma = 1/10, delta = 1e-10" in out
    assert "4.279618" in out and "0.533333" in out and "15.314318" in out
    assert "RDP -> (eps, delta) (geometric)      epsilon = 12.9279" in out
    lines = out.splitlines()
    rows = [line for line in lines if re.match(r"^\s+\d+\s+\d+\s+\d", line)]
    assert len(rows) == 7
    header = next(line for line in lines if line.startswith("level"))
    assert len({len(row) for row in rows} | {len(header)}) == 1          # aligned columns
    assert "Assumption:" in out and "nominal" in header


def test_moe_table_with_total_only_groups(capsys):
    code, out, _ = run(capsys, REFERENCE + ["--total-only-moe", "5", "5", "-", "-", "-", "-", "-",
                                            "--total-only-levels", "20"])
    assert code == 0
    lines = out.splitlines()
    rows = [line for line in lines if re.match(r"^\s+\d+\s+(\d+|-)\s+(\d|-)", line)]
    assert len(rows) == 8 + 3                 # 8 levels, then 3 with TotalOnly groups
    level8 = rows[7].split()
    assert level8[:3] == ["8", "-", "-"] and level8[-3:] == ["-", "-", "-"]
    assert "TotalOnly groups (one count each, the whole group budget):" in out
    assert "level = s * max(step2 / (1 - gamma), TotalOnly count)" in out


@pytest.mark.parametrize("extra, message", [
    (["--moe", "0", "--stability", "9"], "MOE of level 1 must be an integer >= 1"),
    (["--moe", "3", "--stability", "0"], "stability must be a positive integer"),
    (["--moe", "3", "--stability", "9", "--gamma", "1.2"], "gamma"),
    (["--moe", "3", "--stability", "9", "--delta", "0"], "delta"),
])
def test_moe_library_errors_exit_1_with_message(capsys, extra, message):
    code, out, err = run(capsys, ["account", "moe"] + extra)
    assert code == 1
    assert out == ""
    assert err.startswith("postproc account: error:") and message in err


def test_moe_usage_error_exits_2(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["account", "moe", "--moe", "6"])
    assert exc.value.code == 2


def test_convert(capsys):
    code, out, _ = run(capsys, ["account", "convert", "--rho", "0.5", "--json"])
    assert code == 0
    data = json.loads(out)
    assert data["pure_epsilon"] is None
    assert data["zcdp_epsilon_analytic"] == pytest.approx(0.5 + math.sqrt(2 * math.log(1e10)))
    assert data["zcdp_epsilon_numeric"] < data["zcdp_epsilon_analytic"]
    code, out, _ = run(capsys, ["account", "convert", "--epsilon", "1", "--delta", "1e-6"])
    assert code == 0 and "pure DP epsilon" in out and "1.000000" in out
    code, _, err = run(capsys, ["account", "convert", "--epsilon", "-1"])
    assert code == 1 and "epsilon" in err
