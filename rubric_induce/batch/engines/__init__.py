"""batch.engines."""
