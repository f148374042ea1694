"""Bundled example data (with attribution in README.md here)."""
