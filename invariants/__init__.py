"""invariants package."""
