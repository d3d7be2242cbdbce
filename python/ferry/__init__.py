"""ferry: map Python functions over ferry's nodes (docs/python-api.md)."""
