"""The tables of a run (11; 4 under protocol v1): CSV, XLSX and a floating LaTeX table each, and one workbook.
The LaTeX is the paper's (``cctk.outputs.latex``: plain headers, counts with their intervals, set to fit),
so a session's ``tables/*.tex`` and ``cctk export``'s are one writer's.

Every file is a pure function of its DataFrame (no timestamps: the XLSX date is the session's
start), so re-rendering a session gives the same bytes.
"""

from __future__ import annotations

import math
import re
import zipfile
from collections.abc import Collection, Hashable, Mapping
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from ..core.labels import printed
from ..store.session import Layout, session_start as session_start  # re-exported: KR-Test dates its workbook so
from .latex import PLAIN, latex, manual_table, number as latex_number

if TYPE_CHECKING:
    from pandas.io.formats.style import Styler
    from pandas.io.formats.style_render import CSSDict

XLSX_EPOCH = datetime(2000, 1, 1)  # when the session name carries no start time


def write_tables(tables: dict[str, pd.DataFrame], layout: Layout) -> list[Path]:
    """Each table as CSV, XLSX and LaTeX in its folder, and all of them in the session's workbook.

    The LaTeX is what ``cctk export --latex`` writes of the table (``latex.manual_table``): its manual's caption
    and headers, its label ``tab:<label_prefix><key>`` (manual 1.0.0's prefix is ``v1-``, so that
    ``tab:v1-table01`` and ``tab:table01`` can sit in one paper)."""
    stamp = session_start(layout.session) or XLSX_EPOCH
    written = []
    for name, table in tables.items():
        written += _write(table, layout.table(name), name, manual_table(layout.manual.spec, name, table)[1], stamp)
    layout.workbook.parent.mkdir(parents=True, exist_ok=True)
    write_xlsx(tables, layout.workbook, stamp)
    return [*written, layout.workbook]


def number(value: float | None) -> str:
    """A float as a short, plain number to three significant digits: 0.912, 2.30, 12.3, 1540; a tiny one as
    report.html's data tables print it (3.20 times ten to the -7, the power raised); a whole one whole (a count
    in a column with gaps is a float); a missing one ``--``."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "--"
    return latex_number(value, PLAIN)


def _styler(table: pd.DataFrame) -> Styler:
    floats: list[Hashable] = [c for c in table.columns if pd.api.types.is_float_dtype(table[c])]
    formats = dict.fromkeys(floats, number)  # the float columns' cells: floats (NaN: na_rep)
    styler = table.style.hide(axis="index").format(formats, na_rep="--", escape="html")  # type: ignore[arg-type]  # pandas-stubs type a formatter's cell as object, whatever the column's dtype
    return styler.format_index(escape="html", axis=1)


def html(table: pd.DataFrame, name: str, left: Collection[Hashable] | None = None) -> str:
    """The table as an HTML ``<table>`` (for report.html), stable ids, text columns ``left`` aligned left;
    its labels without their key columns."""
    table = printed(table)
    if left is None:
        left = [c for c in table.columns if not pd.api.types.is_numeric_dtype(table[c])]
    # a short name (a model's, a group's) stays on one line; long ones wrap into a few lines, not a word a line
    # beside a row of numbers: the table scrolls instead
    align: list[CSSDict] = [{"selector": "td", "props": "text-align: left; white-space: nowrap"}]
    align += [{"selector": "th", "props": "text-align: left"}]
    prose: list[CSSDict] = [
        {"selector": tag, "props": f"text-align: left; min-width: {PROSE_EM}em"} for tag in ("td", "th")
    ]
    nowrap: list[CSSDict] = [{"selector": "td", "props": "white-space: nowrap"}]  # numbers stay on one line
    styles = {c: (prose if _longest(table[c]) > PROSE else align) if c in left else nowrap for c in table.columns}
    styler = _styler(table).set_uuid(name).set_table_attributes('class="data"')
    return styler.set_table_styles(styles, overwrite=False).to_html()


PROSE, PROSE_EM = 32, 14  # a text column whose longest cell passes PROSE characters wraps, at least PROSE_EM wide


def _longest(values: pd.Series) -> int:
    return max((len(str(v)) for v in values), default=0)


def write_xlsx(tables: dict[str, pd.DataFrame], path: Path, stamp: datetime) -> None:
    """One sheet per table (named after it), columns sized to their contents, dated ``stamp``."""
    with pd.ExcelWriter(path, engine="openpyxl") as writer:
        for name, table in tables.items():
            table.to_excel(writer, sheet_name=name, index=False)
            sheet = writer.sheets[name]
            for i, column in enumerate(table.columns, start=1):
                longest = max([len(str(column))] + [len(str(v)) for v in table[column]])
                sheet.column_dimensions[sheet.cell(1, i).column_letter].width = min(60, longest + 2)
            sheet.freeze_panes = "A2"
    _freeze_zip(path, stamp)


def _freeze_zip(path: Path, stamp: datetime) -> None:
    """Give every member of the XLSX archive, and its document dates, the fixed date ``stamp``."""
    when = stamp.strftime("%Y-%m-%dT%H:%M:%SZ")
    with zipfile.ZipFile(path) as archive:
        members = [(info.filename, archive.read(info)) for info in archive.infolist()]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for filename, data in members:
            if filename == "docProps/core.xml":
                data = re.sub(rb"(<dcterms:(created|modified)[^>]*>)[^<]*", rb"\g<1>" + when.encode(), data)
            info = zipfile.ZipInfo(filename, date_time=stamp.timetuple()[:6])
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)


def write_table(
    table: pd.DataFrame,
    folder: Path,
    name: str,
    caption: str,
    headers: Mapping[str, str],
    stamp: datetime = XLSX_EPOCH,
) -> list[Path]:
    """One table outside a session (``cctk compare``): ``folder/<name>.{csv,xlsx,tex}``."""
    files = {ext: folder / f"{name}.{ext}" for ext in ("csv", "xlsx", "tex")}
    return _write(table, files, name[:31], latex(table, caption, f"tab:{name}", headers), stamp)


def _write(table: pd.DataFrame, files: dict[str, Path], sheet: str, tex: str, stamp: datetime) -> list[Path]:
    """The table as ``files["csv"]``, ``["xlsx"]`` (one sheet) and ``["tex"]`` (``tex``)."""
    files["csv"].parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(files["csv"], index=False, lineterminator="\n")
    write_xlsx({sheet: table}, files["xlsx"], stamp)
    files["tex"].write_text(tex)
    return list(files.values())
