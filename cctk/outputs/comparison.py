"""The folder a comparison is written into (``cctk compare --out``, of pipelines or of KR-Test runs): its own
entries (``ENTRIES``), replaced whole each time, so that nothing of an earlier comparison in the same folder is
read, logged or loaded as this one's; a folder whose tables/ or figures/ no comparison wrote is refused before any
work. What else the folder holds is left alone."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..core.errors import CctkError

PAGE = "compare.html"  # every comparison writes it: the mark of a comparison's folder
ENTRIES = ("runs.csv", PAGE, "tables", "figures")


def check_folder(out: Path) -> None:
    """One line where ``out`` holds tables/ or figures/ with no compare.html beside them (a session folder, a
    paper's): writing a comparison there would replace them."""
    out = Path(out)
    theirs = [name for name in ("tables", "figures") if (out / name).exists()]
    if theirs and not (out / PAGE).is_file():
        raise CctkError(
            f"{out} holds {' and '.join(f'{n}/' for n in theirs)} that no comparison wrote (no {PAGE} beside "
            "them), which a comparison there would replace: give an empty folder or an earlier comparison's"
        )


@contextmanager
def replacing(out: Path) -> Iterator[Path]:
    """A scratch folder inside ``out`` to write a comparison into; when the block ends, its entries take the place
    of the comparison ``out`` held, every one of ``ENTRIES`` (those it did not write removed). A fault inside the
    block leaves the earlier comparison whole and the scratch folder gone."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".compare-", dir=out))
    try:
        yield scratch
        for name in ENTRIES:
            old, new = out / name, scratch / name
            if old.is_dir():
                shutil.rmtree(old)
            elif old.exists():
                old.unlink()
            if new.exists():
                os.replace(new, old)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def written(out: Path) -> list[Path]:
    """The entries of the comparison in ``out``: what its MLflow run logs (not the folder's other files)."""
    return [Path(out) / name for name in ENTRIES if (Path(out) / name).exists()]
