"""Applications built on the post-processors: configured runs (config, pipeline, report, demo),
SafeTab-style tabulation, the reference analyses."""
