"""Configured runs: the TOML run configuration, the pipeline (read, measure once, post-process,
write), run reports and the demo."""
