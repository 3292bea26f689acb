"""A package, so that its conftest is imported as ``experiments.conftest`` and never shadows the root
``conftest`` (tests/krtest import ``tiny_model`` from it)."""
