"""Click parameter types shared by the ``cctk`` and ``cctk krtest`` command lines."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import click


class OutFolder(click.Path):
    """An ``--out`` folder: it can be made and take files (``session.check_out``), else one line as the
    options are read, before any store, model or run is touched. Nothing is made here."""

    def __init__(self) -> None:
        super().__init__(file_okay=False, path_type=Path)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Path:
        from ..store.session import check_out

        folder = cast(Path, super().convert(value, param, ctx))  # path_type=Path: click returns a Path
        check_out(folder)
        return folder
