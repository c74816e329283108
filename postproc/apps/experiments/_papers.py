"""Published numbers the reference analyses are set beside (``paper_comparison.csv``).

Petti & Flaxman (2020) ran TopDown (the Census Bureau's 2018 end-to-end code) on the full 1940
census — 132 million persons, about 3,100 counties and 135,000 enumeration districts — at
ε ∈ {0.25, 0.5, 0.75, 1, 2, 4, 6, 8} with 4 seeds each. Their public repository
``aflaxman/dp_2020_census`` holds the numbers behind the paper's text, figures and Extended Data
as JSON files. The values below are those of the **published paper** (Gates Open Research
3:1722, version 2, 6 April 2020), transcribed from the versions named in :data:`SOURCES` — the
repository's last commit, ``424dc20`` (19 March 2020), holds each file as it was last written:

* TopDown EPL: the re-run of 12 February 2020 (``4b28968``). The paper quotes it: ED total EPL
  0.033 / 0.064 / 0.116 and county 0.035 / 0.048 / 0.094 at ε = 0.5 / 1 / 2. Version 1 of the
  paper (December 2019) quoted the August 2019 file (``3e4056dc93``; ED 0.024 / 0.085 / 0.304
  at ε = 0.25 / 1 / 4, and 0.046 / 0.085 / 0.157 at ε = 0.5 / 1 / 2), computed with another
  window and bandwidth (scipy's default bandwidth, the window 1.5 × the 2.5th–97.5th
  percentiles); the re-run uses the bandwidth factor 0.1 and the 5th–95th percentile window —
  the defaults of our ``published`` estimator, so the two are now the same estimator.
* SRS EPL: the re-run of March 2020 (``abdc48b``, the same estimator; the paper quotes ED total
  EPL 0.011 / 0.050 / 0.215 for 5 % / 50 % / 95 % samples). The August 2019 file had used the
  window 1.5 × the 1st–99th percentiles.
* MAE (TopDown and SRS) and bias: the February 2020 re-run rewrote these files with the same
  numbers (the notebooks ``001_generate_results``, ``002_generate_sd_results`` and
  ``005_fig3`` at ``424dc20`` print them), so the files' last changes are from August 2019.
  The paper quotes, e.g., ED total MAE 29 / 15 / 8 at ε = 0.5 / 1 / 2.

Every value also appears in the paper's Extended Data tables (``sup_table.xlsx``,
``sup_table_2.xlsx`` at ``424dc20``). Their definitions, where ours differ:

* MAE is the median absolute error over all units and the 4 seeds, rounded to an integer.
* EPL is their residual estimator (our ``published`` one; ``epl_published`` in our tables): the
  largest |log ratio| of a Gaussian KDE (bandwidth factor 0.1) over the 5th–95th percentile
  window of the pooled errors, three decimals.
* SC (``va_hisp_race``) is compared over the cells with a person in the exact *or* the DP data —
  their tallies list only cells that hold someone — our ``va_hisp_race:authors`` rows.
* The bias is the mean error of unit totals per homogeneity index, the index as their code
  computes it (``postproc.evaluation.metrics.homogeneity_index``, ``definition="authors"``).
* SRS: one sample per fraction 5 %, 10 %, …, 95 % and seed (4 seeds), weighted ``1/f``, the
  same MAE and EPL.

The paper's Table 1 gives the SRS fraction "with most similar median-absolute-error /
empirical-privacy-loss profile" at four ε without naming the statistic or the rule; its
Figure 2 caption and its discussion state the same fractions for county SC, where
:data:`TABLE_1` keeps them. Neither Flaxman (2019)'s nor Clark & Dajani (2019)'s numbers are
available.
"""

from __future__ import annotations

__all__ = ["PAPER", "SOURCES", "EPSILONS", "TC_MAE", "TC_RMSE", "TC_P95", "SC_MAE", "TC_EPL",
           "SC_EPL", "BIAS", "COUNTS", "populated_cells", "SRS_FRACTIONS", "SRS_MAE", "SRS_EPL",
           "TABLE_1"]

#: The version of the paper the numbers are those of.
PAPER = ("Petti & Flaxman, Differential privacy in the 2020 US census: what will it do? "
         "Quantifying the accuracy/privacy tradeoff. Gates Open Research 3:1722, version 2 "
         "(6 April 2020)")
_REPO = "github.com/aflaxman/dp_2020_census"
#: Where each kind of number was transcribed from: file @ the commit that last wrote it (all
#: unchanged at the repository's last commit, 424dc20bcc, 19 March 2020).
SOURCES = {
    "mae": f"{_REPO} results_dp_error.json @ 3e4056dc93 (2019-08-12; rewritten unchanged by "
           f"the 2020-02-12 re-run, 001_generate_results.ipynb @ 424dc20bcc)",
    "epl": f"{_REPO} results_dp_epl.json @ 4b289689fd (2020-02-12 re-run, the published "
           f"paper's numbers)",
    "bias": f"{_REPO} results_dp_bias.json @ 9b79ccd6ba (2019-08-18; rewritten unchanged by "
            f"the 2020-02-13 re-run, 005_fig3.ipynb @ 424dc20bcc)",
    "srs": f"{_REPO} results_sd_error.json @ 08792d2abe (MAE; rewritten unchanged in 2020) and "
           f"results_sd_epl.json @ abdc48b875 (EPL, 2020-03-19 re-run, the published paper's)",
    "counts": f"{_REPO} results_dp_counts.json @ 424dc20bcc (the exact 1940 counts' summary, "
              f"the Extended Data's count columns; 006_sub_table1.ipynb)",
    "table_1": f"{_REPO} plugged_text.md @ abdc48b875 (the resubmitted text's Table 1; Figure "
               f"2's caption and discussion.md state ε = 1, 2 and 6 for county SC)",
}

#: The ε of the paper's TopDown runs.
EPSILONS = (0.25, 0.5, 0.75, 1.0, 2.0, 4.0, 6.0, 8.0)


def _by_epsilon(values):
    return dict(zip(EPSILONS, values))


#: Median absolute error of total counts (TC), persons, by level and ε.
TC_MAE = {"county": _by_epsilon([81, 45, 31, 24, 13, 7, 5, 4]),
          "enum_dist": _by_epsilon([56, 29, 20, 15, 8, 4, 3, 2])}
#: Root mean square error of TC, persons (the same file as :data:`TC_MAE`).
TC_RMSE = {"county": _by_epsilon([140, 77, 53, 41, 22, 12, 8, 6]),
           "enum_dist": _by_epsilon([93, 49, 34, 26, 13, 7, 5, 4])}
#: 95th percentile of the absolute TC error, persons (the same file).
TC_P95 = {"county": _by_epsilon([277, 149, 103, 81, 43, 22, 16, 12]),
          "enum_dist": _by_epsilon([190, 100, 68, 52, 27, 14, 10, 7])}
#: The real 1940 counts behind their errors: per level, the units' total persons (``tc``) and
#: the populated votingage × hispanic × race cells' persons (``sc``; their tallies list only
#: cells that hold someone): median, 95th percentile and mean.
COUNTS = {"county": {"tc": {"median": 18679, "p95": 122710, "mean": 42601.3},
                     "sc": {"median": 47, "p95": 17480, "mean": 5088.4}},
          "enum_dist": {"tc": {"median": 865, "p95": 2342, "mean": 981.8},
                        "sc": {"median": 88, "p95": 967, "mean": 245.6}},
          "state": {"tc": {"median": 1903133, "p95": 7419040, "mean": 2596171.9},
                    "sc": {"median": 229, "p95": 714208, "mean": 131093.8}}}


def populated_cells(level: str) -> float:
    """Populated votingage × hispanic × race cells per unit of the real 1940 ``level``: its mean
    persons over the mean persons of a populated cell (every person is in a populated cell).

    >>> round(populated_cells("county"), 2), round(populated_cells("enum_dist"), 2)
    (8.37, 4.0)
    """
    counts = COUNTS[level]
    return counts["tc"]["mean"] / counts["sc"]["mean"]


#: Median absolute error of stratified counts (SC, va_hisp_race over populated cells).
SC_MAE = {"state": _by_epsilon([18, 13, 9, 7, 4, 2, 1, 1]),
          "county": _by_epsilon([16, 11, 8, 6, 4, 2, 1, 1]),
          "enum_dist": _by_epsilon([17, 10, 7, 6, 4, 2, 1, 1])}
#: EPL (their residual estimator) of TC: the February 2020 re-run.
TC_EPL = {"county": _by_epsilon([0.014, 0.035, 0.038, 0.048, 0.094, 0.169, 0.225, 0.318]),
          "enum_dist": _by_epsilon([0.017, 0.033, 0.046, 0.064, 0.116, 0.219, 0.299, 0.381])}
#: EPL (their residual estimator) of SC: the February 2020 re-run.
SC_EPL = {"state": _by_epsilon([0.119, 0.104, 0.166, 0.166, 0.300, 0.453, 0.541, 0.742]),
          "county": _by_epsilon([0.126, 0.165, 0.150, 0.164, 0.253, 0.445, 0.626, 0.722]),
          "enum_dist": _by_epsilon([0.139, 0.200, 0.225, 0.241, 0.280, 0.450, 0.652, 0.743])}

_COUNTY_INDEX = (0, 4, 8, 12, 16, 18, 20, 22)
_ED_INDEX = (0, 4, 8, 12, 14, 16, 18, 20, 21, 22, 23)
_COUNTY_BIAS = [
    [-103.7, -21.1, -16.3, 1.8, 21.2, 37.1, 41.2, 23.4],
    [-59.2, -22.6, -7.7, 2.7, 12.1, 17.4, 25.3, 21.7],
    [-42.8, -16.0, -4.9, 1.6, 8.3, 17.6, 19.2, 19.1],
    [-33.9, -14.8, -2.9, 1.2, 7.0, 12.1, 14.0, 14.5],
    [-18.8, -7.1, -2.8, 0.6, 4.0, 9.5, 8.0, 11.1],
    [-10.4, -4.4, -1.9, 0.5, 2.2, 3.8, 5.0, 6.0],
    [-7.2, -3.6, -1.4, 0.4, 1.6, 2.2, 3.4, 3.3],
    [-5.3, -2.8, -1.1, 0.3, 1.3, 1.0, 2.7, 2.7]]
_ED_BIAS = [
    [-52.6, -34.3, -17.2, -16.4, -17.7, -8.5, -10.5, 2.1, 28.0, 8.7, 41.6],
    [-31.7, -21.3, -13.0, -10.3, -11.4, -5.1, -6.5, 1.4, 12.5, 5.4, 23.5],
    [-22.1, -15.8, -10.3, -7.8, -12.5, -4.0, -4.8, 1.1, 18.8, 4.2, 16.5],
    [-18.9, -13.7, -8.0, -6.6, -8.8, -3.3, -3.7, 0.8, 5.9, 3.6, 12.3],
    [-11.6, -7.9, -5.3, -4.1, -4.6, -2.1, -2.7, 0.5, 7.8, 2.3, 6.8],
    [-6.6, -4.3, -3.2, -2.7, -3.6, -1.3, -1.7, 0.3, 2.2, 1.5, 3.7],
    [-4.3, -3.1, -2.5, -2.1, -3.1, -0.9, -1.4, 0.2, 1.8, 1.1, 2.5],
    [-2.9, -2.5, -2.0, -1.7, -2.6, -0.7, -1.1, 0.2, 0.9, 0.9, 2.0]]
#: Bias (mean DP − exact) of TC, persons: ``BIAS[level][ε][homogeneity index]`` (authors' index).
BIAS = {"county": {e: dict(zip(_COUNTY_INDEX, row)) for e, row in zip(EPSILONS, _COUNTY_BIAS)},
        "enum_dist": {e: dict(zip(_ED_INDEX, row)) for e, row in zip(EPSILONS, _ED_BIAS)}}

#: The sampling fractions of their SRS comparison.
SRS_FRACTIONS = tuple(round(0.05 * k, 2) for k in range(1, 20))


def _by_fraction(values):
    return dict(zip(SRS_FRACTIONS, values))


#: SRS median absolute error: ``SRS_MAE[query][level][fraction]`` (query ``total`` or ``sc``).
SRS_MAE = {
    "total": {
        "county": _by_fraction([388, 272, 207, 181, 155, 135, 120, 108, 97, 90, 80, 70, 62, 58,
                                50, 45, 37, 30, 20]),
        "enum_dist": _by_fraction([74, 51, 41, 34, 30, 26, 23, 21, 19, 17, 16, 14, 13, 11, 10,
                                   8, 7, 6, 4])},
    "sc": {
        "county": _by_fraction([19, 14, 11, 9, 8, 7, 6, 6, 5, 5, 4, 4, 3, 3, 3, 2, 2, 2, 1]),
        "enum_dist": _by_fraction([18, 12, 10, 8, 7, 6, 6, 5, 5, 4, 4, 3, 3, 3, 2, 2, 2, 1, 1])}}
#: SRS EPL (their residual estimator; the March 2020 re-run), keyed like :data:`SRS_MAE`.
SRS_EPL = {
    "total": {
        "county": _by_fraction([0.003, 0.005, 0.006, 0.008, 0.009, 0.010, 0.010, 0.013, 0.014,
                                0.013, 0.018, 0.022, 0.019, 0.023, 0.025, 0.031, 0.033, 0.042,
                                0.063]),
        "enum_dist": _by_fraction([0.011, 0.018, 0.021, 0.026, 0.027, 0.033, 0.036, 0.044,
                                   0.044, 0.050, 0.060, 0.064, 0.065, 0.073, 0.091, 0.098, 0.115,
                                   0.137, 0.215])},
    "sc": {
        "county": _by_fraction([0.034, 0.048, 0.062, 0.073, 0.083, 0.093, 0.108, 0.121, 0.135,
                                0.150, 0.166, 0.181, 0.200, 0.225, 0.258, 0.293, 0.339, 0.429,
                                0.611]),
        "enum_dist": _by_fraction([0.098, 0.133, 0.161, 0.185, 0.209, 0.229, 0.253, 0.274,
                                   0.295, 0.318, 0.363, 0.397, 0.454, 0.523, 0.578, 0.623, 0.812,
                                   0.970, 1.307])}}

#: The paper's Table 1 ("closest SRS sample proportion" at ε = 1, 2, 4, 6). It names neither
#: the statistic nor the rule; Figure 2's caption (ε = 1 → 50 %, 2 → 75 %) and the discussion
#: (also 6 → 95 %) state the same fractions for county SC, so the table is keyed there.
TABLE_1 = {("county", "sc"): {1.0: 0.50, 2.0: 0.75, 4.0: 0.90, 6.0: 0.95}}
