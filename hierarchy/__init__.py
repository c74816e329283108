"""hierarchy package."""
