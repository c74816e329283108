"""``postproc account``: what a configuration costs in privacy.

Sub-commands:

* ``postproc account moe --moe 6 6 11 11 50 50 50 --stability 9 --gamma 0.1 --delta 1e-10
  [--total-only-moe M|full|- …] [--total-only-levels M …] [--full-algorithm] [--json]`` —
  SafeTab-style levels calibrated to target MOEs (:func:`hierarchy.accounting.account_moe`):
  which terms of the SafeTab paper's eq. 39 the totals include (without TotalOnly MOEs only the
  two-step groups'), per level the ε and ρ of one Step-2 count and of the level and the exact
  coverage of each "95 %" MOE, the total loss under pure DP, RDP → (ε, δ) and zCDP → (ε, δ)
  analytic and numeric, and — always — SafeTab's two-step-only and full algorithms (TotalOnly
  groups at the full group budget) side by side for the same MOEs, exact and by the SafeTab
  paper's Corollary 1. ``--full-algorithm`` makes the full algorithm the accounting shown.
* ``postproc account convert (--epsilon E | --rho R) [--delta D] [--sensitivity S]
  [--sample-rate Q | --sample-size M --population N] [--json]`` — one mechanism's loss in every
  notion (:meth:`hierarchy.accounting.PrivacyLoss.of`); with a sampling design, beside it the
  loss amplified by a secret sample and the assumption that takes
  (:func:`hierarchy.accounting.amplify_loss`).
"""

from __future__ import annotations

import argparse
import json
import textwrap
from typing import TYPE_CHECKING, Any

from postproc.errors import PostprocError

if TYPE_CHECKING:
    from hierarchy.accounting import AmplifiedLoss, MOEAccounting, PrivacyLoss

ORDER = 60


def register(subparsers: Any) -> None:
    """Add ``account`` and its sub-commands to the ``postproc`` parser."""
    parser = subparsers.add_parser(
        "account", help="privacy accounting: MOE-calibrated budgets, (epsilon, delta) conversions",
        description="Privacy accounting: pure DP, zCDP and Renyi DP, and (epsilon, delta).")
    sub = parser.add_subparsers(dest="account_command", metavar="WHAT")
    sub.required = True

    moe = sub.add_parser(
        "moe", help="budgets and total loss of SafeTab-style levels with target MOEs",
        description="For each population-group level with a target 95%% MOE for its released "
                    "(Step 2) counts: the epsilon (geometric) and rho (discrete Gaussian) of one "
                    "count and of the level (stability s, a fraction gamma of each group's budget "
                    "for the noisy total: level = s * step2 / (1 - gamma)); then the total loss "
                    "under pure DP, RDP -> (epsilon, delta) and zCDP -> (epsilon, delta).")
    moe.add_argument("--moe", type=int, nargs="+", required=True, metavar="M",
                     help="target MOE of each level (integers >= 1)")
    moe.add_argument("--stability", type=int, required=True, metavar="S",
                     help="the most groups of one level a record can belong to")
    moe.add_argument("--gamma", default="0.1", metavar="G",
                     help="share of a group's budget for the noisy total (default 0.1; exact "
                          "decimals or ratios such as 1/10)")
    moe.add_argument("--delta", type=float, default=1e-10, metavar="D",
                     help="delta of the (epsilon, delta) conversions (default 1e-10)")
    moe.add_argument("--total-only-moe", nargs="+", metavar="M|full|-",
                     help="one per --moe level: the target MOE of the counts of its TotalOnly "
                          "groups (groups that release only their total), 'full' for TotalOnly "
                          "groups at the full group budget step2 / (1 - gamma) (as postproc "
                          "safetab releases them), '-' where it has none. Adds the TotalOnly "
                          "term of the SafeTab paper's eq. 39, which is left out by default. "
                          "Both kinds share the stability s, so such a level costs s times its "
                          "costlier kind of group (as postproc safetab accounts a level)")
    moe.add_argument("--full-algorithm", action="store_true",
                     help="SafeTab's full algorithm: every --moe level also has TotalOnly "
                          "groups at the full group budget (the same as --total-only-moe full "
                          "for every level). Its RDP total is always shown beside the "
                          "two-step-only one; this makes it the accounting shown per level")
    moe.add_argument("--total-only-levels", type=int, nargs="+", metavar="M",
                     help="further levels of TotalOnly groups only, with target MOE M each "
                          "(stability s); each adds s times one count's loss. Use these for "
                          "TotalOnly groups whose stability is counted apart from the two-step "
                          "groups'")
    moe.add_argument("--json", action="store_true", help="print one JSON object")
    moe.set_defaults(func=run)

    convert = sub.add_parser(
        "convert", help="one mechanism's loss in every notion",
        description="Pure epsilon (geometric mechanism) or zCDP rho to (epsilon, delta) via RDP "
                    "and via zCDP (analytic and numeric). With --sample-rate or --sample-size, "
                    "also the loss of the mechanism run on a secret random sample: each "
                    "(epsilon, delta) becomes (log(1 + q(e^epsilon - 1)), q delta), q the "
                    "sampling fraction (docs/accounting.md, 'Amplification by sampling').")
    budget = convert.add_mutually_exclusive_group(required=True)
    budget.add_argument("--epsilon", type=float, metavar="E",
                        help="pure-DP budget of a geometric mechanism (>= 0)")
    budget.add_argument("--rho", type=float, metavar="R", help="zCDP budget (>= 0)")
    convert.add_argument("--delta", type=float, default=1e-10, metavar="D",
                         help="delta, in (0, 1) (default 1e-10)")
    convert.add_argument("--sensitivity", type=int, default=1, metavar="S",
                         help="L1 sensitivity of the geometric mechanism's query (default 1)")
    design = convert.add_mutually_exclusive_group()
    design.add_argument("--sample-rate", type=float, metavar="Q",
                        help="the mechanism ran on a Poisson sample: each person kept "
                             "independently with probability Q, in (0, 1]; who is in the sample "
                             "is secret. Neighbours add or remove one person")
    design.add_argument("--sample-size", type=int, metavar="M",
                        help="the mechanism ran on M persons drawn uniformly without "
                             "replacement from --population N; who is in the sample is secret. "
                             "Neighbours substitute one person's record: give the epsilon and "
                             "--sensitivity for that relation (2 for a histogram)")
    convert.add_argument("--population", type=int, metavar="N",
                         help="the number of persons the --sample-size sample was drawn from "
                              "(N >= M)")
    convert.add_argument("--json", action="store_true", help="print one JSON object")
    convert.set_defaults(func=run)


def _total_only_moes(values: list[str] | None, levels: int) -> list[int | str | None] | None:
    """``--total-only-moe``: one integer MOE, ``full`` or ``-`` per ``--moe`` level (their range
    is checked by :func:`hierarchy.accounting.account_moe`)."""
    if values is None:
        return None
    if len(values) != levels:
        raise PostprocError(f"--total-only-moe: give one value per --moe level ({levels}), an "
                            f"MOE or '-' where a level has no TotalOnly groups; got "
                            f"{len(values)}")
    parsed: list[int | str | None] = []
    for level, value in enumerate(values, start=1):
        if value.strip() == "-":
            parsed.append(None)
            continue
        if value.strip().lower() == "full":
            parsed.append("full")
            continue
        try:
            parsed.append(int(value))
        except ValueError:
            raise PostprocError(f"--total-only-moe: the TotalOnly MOE of level {level} must be "
                                f"an integer >= 1, 'full' or '-', not {value!r}") from None
    return parsed


def _option(flag: str, check: Any, *values: Any, **options: Any) -> Any:
    """``check(*values)``, its error prefixed with the option that was given."""
    from hierarchy.errors import AccountingError

    try:
        return check(*values, **options)
    except AccountingError as exc:
        raise PostprocError(f"{flag}: {exc}") from None


def _check_options(args: argparse.Namespace) -> None:
    """Check every numeric option first, so that an error names the option and its range."""
    from hierarchy import accounting as acc

    _option("--delta", acc.check_delta, args.delta)
    if args.account_command == "moe":
        for level, value in enumerate(args.moe, start=1):
            _option("--moe", acc.check_moe, value, level=level)
        if args.full_algorithm and args.total_only_moe is not None:
            raise PostprocError("--full-algorithm gives every --moe level TotalOnly groups at "
                                "the full group budget; give it or --total-only-moe, not both")
        total_only = _total_only_moes(args.total_only_moe, len(args.moe)) or []
        for level, value in enumerate(total_only, start=1):
            if value not in (None, "full"):
                _option("--total-only-moe", acc.check_moe, value, level=level,
                        what="TotalOnly MOE")
        for level, value in enumerate(args.total_only_levels or (), start=len(args.moe) + 1):
            _option("--total-only-levels", acc.check_moe, value, level=level,
                    what="TotalOnly MOE")
        _option("--stability", acc.check_stability, args.stability)
        _option("--gamma", acc.check_gamma, args.gamma)
        return
    if args.epsilon is not None:
        _option("--epsilon", acc.check_epsilon, args.epsilon)
    if args.rho is not None:
        _option("--rho", acc.check_rho, args.rho)
    _option("--sensitivity", acc.check_sensitivity, args.sensitivity)
    if (args.sample_size is None) != (args.population is None):
        raise PostprocError("--sample-size and --population go together (a sample of M of N "
                            "persons drawn without replacement); for a Poisson sample give "
                            "--sample-rate alone")
    if args.sample_rate is not None:
        _option("--sample-rate", acc.check_sample_rate, args.sample_rate)
    if args.sample_size is not None:
        _option("--sample-size", acc.check_sample_size, args.sample_size, args.population)


def run(args: argparse.Namespace) -> int:
    """Run ``postproc account moe`` or ``postproc account convert``.

    Every numeric option is checked first, so that an error names the option and its range.
    """
    from hierarchy.accounting import PrivacyLoss, account_moe, amplify_loss

    _check_options(args)
    if args.account_command == "moe":
        extra = list(args.total_only_levels or ())
        total_only = _total_only_moes(args.total_only_moe, len(args.moe))
        if args.full_algorithm:
            total_only = ["full"] * len(args.moe)
        if extra:
            total_only = (total_only or [None] * len(args.moe)) + extra
        result = account_moe(list(args.moe) + [None] * len(extra), stability=args.stability,
                             gamma=args.gamma, delta=args.delta, total_only_moes=total_only)
        print(json.dumps(result.to_dict(), indent=2) if args.json else _moe_table(result))
    else:
        loss = PrivacyLoss.of(epsilon=args.epsilon, rho=args.rho, delta=args.delta,
                              sensitivity=args.sensitivity)
        sampled = None
        if args.sample_rate is not None or args.sample_size is not None:
            sampled = amplify_loss(loss, rate=args.sample_rate, sample_size=args.sample_size,
                                   population=args.population)
        if args.json:
            data = {**loss.to_dict(), "delta": loss.delta}
            if sampled is not None:
                data["sampling"] = sampled.to_dict()
            print(json.dumps(data, indent=2))
        else:
            print(_loss_table(loss) if sampled is None else _sampled_loss_table(loss, sampled))
    return 0


def _value(value: float | None, spec: str, width: int) -> str:
    return f"{'-':>{width}}" if value is None else f"{value:>{width}{spec}}"


def _percent(value: float | None, width: int) -> str:
    return f"{'-':>{width}}" if value is None else f"{100 * value:>{width - 1}.2f}%"


def _moe_table(result: MOEAccounting) -> str:
    from hierarchy.accounting import NOMINAL_COVERAGE

    total_only = result.includes_total_only
    rule = ("level = s * max(step2 / (1 - gamma), TotalOnly count)" if total_only
            else "level = s * step2 / (1 - gamma)")
    header = (f"{'level':>5}  {'MOE':>5}  {'eps step2':>10}  {'eps level':>10}  "
              f"{'rho step2':>10}  {'rho level':>10}  {'cover geom':>10}  {'cover DG':>8}  "
              f"{'nominal':>7}")
    statement = result.assumption_text(width=len(header),
                                       options="--total-only-moe, --total-only-levels")
    lines = [f"SafeTab-style levels calibrated to 95% MOEs: stability s = {result.stability}, "
             f"gamma = {result.gamma}, delta = {result.delta:g}",
             f"({rule};" + ("\n " if total_only else " ")
             + "eps: geometric noise, rho: discrete Gaussian)",
             "", statement, "", header, "-" * len(header)]
    nominal = f"{100 * NOMINAL_COVERAGE:>6.0f}%"
    for i, level in enumerate(result.levels, start=1):
        step2 = level.step2
        lines.append(f"{i:>5}  {'-' if level.moe is None else level.moe:>5}  "
                     f"{_value(level.epsilon_step2, '.6f', 10)}  "
                     f"{level.epsilon_total:>10.6f}  {_value(level.rho_step2, '.6f', 10)}  "
                     f"{level.rho_total:>10.6f}  "
                     f"{_percent(step2 and step2.coverage_geometric, 10)}  "
                     f"{_percent(step2 and step2.coverage_discrete_gaussian, 8)}  "
                     f"{nominal if step2 else '-':>7}")
    lines.append("-" * len(header))
    lines.append(f"{'total':>5}  {'':>5}  {'':>10}  {result.pure_dp_epsilon:>10.6f}  {'':>10}  "
                 f"{result.rho:>10.6f}")
    if total_only:
        head = (f"{'level':>5}  {'MOE':>5}  {'eps count':>10}  {'rho count':>10}  "
                f"{'cover geom':>10}  {'cover DG':>8}  {'nominal':>7}")
        lines += ["", "TotalOnly groups (one count each, the whole group budget):", head,
                  "-" * len(head)]
        for i, level in enumerate(result.levels, start=1):
            count = level.total_only
            if count is not None:
                moe = (count.moe if count.moe is not None
                       else f"{count.moe_geometric}/{count.moe_discrete_gaussian}")
                lines.append(f"{i:>5}  {moe:>5}  {count.epsilon:>10.6f}  "
                             f"{count.rho:>10.6f}  {_percent(count.coverage_geometric, 10)}  "
                             f"{_percent(count.coverage_discrete_gaussian, 8)}  {nominal}")
        if any(level.total_only is not None and level.total_only.moe is None
               for level in result.levels):
            lines.append(textwrap.fill("MOE g/d: a count at the full group budget step2 / "
                                       "(1 - gamma); its MOE is g with geometric noise, d with "
                                       "discrete Gaussian.", width=len(header)))
    lines += ["", textwrap.fill(
        "cover geom, cover DG: the exact P(|noise| <= MOE) of one count at its calibrated "
        "epsilon (geometric) or rho (discrete Gaussian). SafeTab's '95%' MOE is a convention, "
        "not an exact 95% interval: the geometric's covers 90.5% (MOE 0) to just under 95%.",
        width=len(header))]
    lines += ["", f"total privacy loss (delta = {result.delta:g}):",
              f"  {'pure DP (geometric)':<36} epsilon = {result.pure_dp_epsilon:.4f}",
              f"  {'RDP -> (eps, delta) (geometric)':<36} epsilon = {result.rdp_epsilon:.4f}",
              f"  {'zCDP -> (eps, delta), analytic':<36} epsilon = "
              f"{result.zcdp_epsilon_analytic:.4f}   (discrete Gaussian, rho = {result.rho:.4f})",
              f"  {'zCDP -> (eps, delta), numeric':<36} epsilon = "
              f"{result.zcdp_epsilon_numeric:.4f}"]
    lines += _algorithms_table(result, width=len(header))
    return "\n".join(lines)


def _algorithms_table(result: MOEAccounting, *, width: int) -> list[str]:
    """SafeTab's two-step-only and full algorithms for the same MOEs, side by side."""
    algorithms = result.algorithms
    if algorithms is None:
        return []
    rows = (("two-step groups only", algorithms["two_step_only"]),
            ("full algorithm: + TotalOnly groups at the full group budget",
             algorithms["full_algorithm"]))
    given = algorithms["moes"]
    moes = (f"MOEs {' '.join(str(m) for m in given)}" if len(given) <= 12
            else f"MOEs of {len(given):,} levels")
    lines = ["", f"SafeTab's two algorithms for the two-step {moes} (s = {result.stability}, "
                 f"gamma = {result.gamma}),", f"RDP -> (eps, delta = {result.delta:g}) with "
                 f"geometric noise:",
             f"  {'':<60} {'exact':>8}  {'Corollary 1':>11}"]
    for label, row in rows:
        lines.append(f"  {label:<60} {row['rdp_epsilon']:>8.4f}  "
                     f"{row['rdp_epsilon_corollary_1']:>11.4f}")
    note = ("exact: the geometric mechanism's Renyi divergence summed exactly (the accounting). "
            "Corollary 1: the SafeTab paper's closed form for it, which understates it; shown "
            "only to compare with the paper. Pure DP (epsilon = "
            f"{algorithms['pure_dp_epsilon']:.4f}) and zCDP (rho = {algorithms['rho']:.4f}) are "
            "the same for both algorithms: a TotalOnly group at the full group budget costs what "
            "a two-step group costs there. docs/safetab.md says what each number counts and "
            "compares them with the paper's.")
    return lines + [textwrap.fill(note, width=width)]


def _loss_table(loss: PrivacyLoss) -> str:
    pure = "-" if loss.pure_epsilon is None else f"{loss.pure_epsilon:.6f}"
    rows = [("pure DP epsilon", pure), ("zCDP rho", f"{loss.rho:.6f}"),
            (f"RDP -> (eps, delta={loss.delta:g})", f"{loss.rdp_epsilon:.6f}"),
            (f"zCDP -> (eps, delta={loss.delta:g}), analytic", f"{loss.zcdp_epsilon_analytic:.6f}"),
            (f"zCDP -> (eps, delta={loss.delta:g}), numeric", f"{loss.zcdp_epsilon_numeric:.6f}")]
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{name:<{width}}  {value:>12}" for name, value in rows)


def _sampled_loss_table(loss: PrivacyLoss, sampled: AmplifiedLoss) -> str:
    """The loss on everyone and amplified by the sample, side by side, under the assumption."""
    def number(value: float | None) -> str:
        return "-" if value is None else f"{value:.6f}"

    rows = [("pure DP epsilon", number(loss.pure_epsilon), number(sampled.pure_epsilon)),
            ("zCDP rho", number(loss.rho), "-"),
            ("RDP -> (eps, delta)", number(loss.rdp_epsilon), number(sampled.rdp_epsilon)),
            ("zCDP -> (eps, delta), analytic", number(loss.zcdp_epsilon_analytic),
             number(sampled.zcdp_epsilon_analytic)),
            ("zCDP -> (eps, delta), numeric", number(loss.zcdp_epsilon_numeric),
             number(sampled.zcdp_epsilon_numeric)),
            ("delta", f"{loss.delta:g}", f"{sampled.delta:g}")]
    width = max(len(name) for name, _, _ in rows)
    lines = [f"The sampled column {sampled.assumption}.", "",
             f"{'':<{width}}  {'unamplified':>12}  {'sampled':>12}"]
    lines += [f"{name:<{width}}  {whole:>12}  {part:>12}" for name, whole, part in rows]
    q = f"{sampled.rate:g}" if sampled.sample_size is None else \
        f"{sampled.sample_size}/{sampled.population}"
    lines += ["", textwrap.fill(
        f"sampled: each (epsilon, delta) of the unamplified column becomes (log(1 + q(e^epsilon "
        f"- 1)), q delta) with q = {q}; zCDP rho is not amplified by these bounds.", width=78)]
    return "\n".join(lines)
