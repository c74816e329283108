"""postproc package."""
