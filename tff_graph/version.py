"""The package version (also in pyproject.toml); recorded in every run's config.json."""

VERSION = "0.3.0"
