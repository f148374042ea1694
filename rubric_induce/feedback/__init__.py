"""feedback."""
