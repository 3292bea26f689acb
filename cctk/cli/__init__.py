"""The command lines (the top floor): ``cctk`` (``main``), ``cctk krtest``, the MLproject's entry
(``python -m cctk.cli.mlproject``) and ``cctk ui`` / ``cctk server``. They parse options and call the
library; nothing below imports them."""

from .main import cli, main

__all__ = ["cli", "main"]
