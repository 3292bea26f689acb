"""A package, so that its conftest is imported as ``experiments.conftest`` and never shadows the
``conftest`` module that tests elsewhere import names from (``from conftest import SESSION``)."""
