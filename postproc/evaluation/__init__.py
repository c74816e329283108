"""Evaluation: error metrics, empirical privacy loss (EPL), the comparison of post-processors and
the run's error tables."""
