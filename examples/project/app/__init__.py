"""The example project's own package: a little statistics over numbers."""
