"""What the tests share: model builders and reference runs (helpers), random graphs (graphs), bad-input
fixtures (robust), models fetched from PyPI wheels (pypi_models)."""
