"""From a run to a paper: its figures in paper style with their captions, its tables as booktabs LaTeX, and a
``paper.tex`` that puts them together and compiles.

    <out>/figures/NN_<stem>.pdf, .png   every figure at a journal's width (cctk.figures.style)
    <out>/captions.tex, captions.md     one caption and label per figure, from the text the report draws
    <out>/tables/tableNN.tex            every table (cctk.outputs.latex)   [export only]
    <out>/paper.tex                     article stub: every table and figure with its caption   [export only]

Results and tables in, files out: no model, no MLflow. ``figures`` is ``cctk report --style paper``,
``export`` is ``cctk export --latex``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from ..core.errors import CctkError
from ..core.labels import PAPER_FIGURE_ABOUT
from ..figures.common import paper_style
from ..figures.spec import Spec
from ..figures.style import WIDTHS, Style, notes, paper
from ..manuals import registry as protocols
from ..store import session
from . import latex, render

FORMATS = ("pdf", "png")  # PDF for the paper, PNG to look at


@dataclass(frozen=True)
class PaperFigure:
    number: int
    stem: str  # NN_<name>: its files' name
    label: str  # fig:<name>
    caption: str  # plain text

    def path(self, ext: str) -> str:
        return f"figures/{self.stem}.{ext}"


@dataclass(frozen=True)
class PaperTable:
    name: str  # tableNN
    label: str
    tex: str  # the table's LaTeX

    @property
    def path(self) -> str:
        return f"tables/{self.name}.tex"

    @property
    def long(self) -> bool:
        return "\\begin{longtable}" in self.tex


def caption(spec: Spec, about: dict[str, str], figure_notes: list[str]) -> str:
    """The figure's title, what its kind shows and its own notes: what the report style draws inside."""
    title = spec.title[0].upper() + spec.title[1:]
    return " ".join([f"{title}.", about.get(spec.key.split(":")[0], ""), *figure_notes]).strip()


def draw(spec: Spec, folder: Path, style: Style, about: dict[str, str], prefix: str = "") -> PaperFigure:
    """Draw one figure in ``style`` into ``folder`` (PDF and PNG at its exact size); its caption."""
    fig = spec.draw(**spec.args, style=style)
    stem = f"{spec.number:02d}_{spec.stem}"
    folder.mkdir(parents=True, exist_ok=True)
    with paper_style():  # TrueType fonts in the PDF: its text stays text
        for ext in FORMATS:
            fig.savefig(folder / f"{stem}.{ext}", dpi=300)  # no tight box: the width stays the journal's
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is not None:
        pyplot.close(fig)
    return PaperFigure(spec.number, stem, f"fig:{prefix}{spec.stem}", caption(spec, about, notes(fig)))


def write_figures(rebuilt: session.Rebuilt, out: Path, style: Style) -> list[PaperFigure]:
    """Every figure of a rebuilt session in ``style`` under ``out/figures``, and ``captions.tex`` / ``.md``."""
    protocol = rebuilt.protocol
    specs = protocol.figures(rebuilt.results, rebuilt.tables, rebuilt.info.config.model)
    about = {**protocol.report.about, **PAPER_FIGURE_ABOUT}
    job = partial(draw, folder=Path(out) / "figures", style=style, about=about, prefix=protocol.report.label_prefix)
    drawn = render.run_all(job, specs)
    (Path(out) / "captions.tex").write_text(captions_tex(drawn), encoding="utf-8")
    (Path(out) / "captions.md").write_text(captions_md(drawn), encoding="utf-8")
    return drawn


def captions_tex(figures: list[PaperFigure]) -> str:
    """One ``\\caption{}`` and ``\\label{}`` per figure, each after a comment naming its file."""
    blocks = [
        f"% Figure {f.number}: {f.path('pdf')}\n\\caption{{{latex.text(f.caption)}}}\n\\label{{{f.label}}}\n"
        for f in figures
    ]
    return "\n".join(blocks)


def captions_md(figures: list[PaperFigure]) -> str:
    return "".join(f"**Figure {f.number}** (`{f.path('pdf')}`, label `{f.label}`). {f.caption}\n\n" for f in figures)


def table_captions(protocol: protocols.Protocol) -> dict[str, str]:
    """The paper's captions (the protocol's ``report.paper_captions``), else its titles and report captions."""
    if protocol.report.paper_captions:
        return protocol.report.paper_captions
    return {
        name: f"{title[0].upper()}{title[1:]}. {protocol.report.captions[name]}"
        for name, title in protocol.report.tables.items()
    }


def write_tables(rebuilt: session.Rebuilt, out: Path) -> list[PaperTable]:
    protocol = rebuilt.protocol
    captions = table_captions(protocol)
    folder = Path(out) / "tables"
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, table in rebuilt.tables.items():
        label = f"tab:{protocol.report.label_prefix}{name}"
        written.append(PaperTable(name, label, latex.latex(table, captions[name], label)))
        (folder / f"{name}.tex").write_text(written[-1].tex, encoding="utf-8")
    return written


@dataclass(frozen=True)
class Written:
    folder: Path
    figures: list[PaperFigure]
    tables: list[PaperTable]


def _start(source: Path, out: Path, width: str, option: str) -> tuple[Style, session.Rebuilt]:
    """The paper style of ``width`` and the rebuilt session, once ``out`` is known to take files."""
    if width not in WIDTHS:
        raise CctkError(f"unknown figure width {width!r}; choose one of: {', '.join(WIDTHS)}")
    session.check_out(Path(out), option)
    return paper(width), session.rebuild(Path(source))


def figures(source: Path, out: Path, width: str = "column") -> Written:
    """``cctk report --style paper``: every figure of a session folder in paper style, with its captions."""
    style, rebuilt = _start(source, out, width, "--out")
    return Written(Path(out), write_figures(rebuilt, out, style), [])


def export(source: Path, out: Path, width: str = "column") -> Written:
    """``cctk export --latex``: the figures in paper style, every table and a paper.tex that inputs them."""
    style, rebuilt = _start(source, out, width, "--latex")
    drawn = write_figures(rebuilt, out, style)
    tables = write_tables(rebuilt, out)
    name = session.read_run_info(Path(source)).session
    (Path(out) / "paper.tex").write_text(
        paper_tex(rebuilt.info.config.model, name, tables, drawn, style), encoding="utf-8"
    )
    return Written(Path(out), drawn, tables)


FLOATS_PER_PAGE = 4  # a \clearpage after so many floats: LaTeX holds at most 18 unplaced


def paper_tex(model: str, session_name: str, tables: list[PaperTable], drawn: list[PaperFigure], style: Style) -> str:
    """An article that inputs every table and includes every figure with its caption; two columns when the
    figures are a column wide (wide tables span both, as ``table*``)."""
    floats = [f"\\input{{{t.path}}}" for t in tables if not t.long]
    floats += [_figure(f) for f in drawn]
    body = [
        text
        for i, item in enumerate(floats)
        for text in ([item] + (["\\clearpage"] if (i + 1) % FLOATS_PER_PAGE == 0 else []))
    ]
    long = [f"\\input{{{t.path}}}" for t in tables if t.long]
    if long:  # a longtable breaks across pages of one column only
        body += ["\\clearpage", "\\onecolumn", *long]
    options = "10pt,twocolumn" if style.narrow else "10pt"
    return (
        PREAMBLE.format(options=options, title=latex.text(f"cctk run {session_name} ({model})"))
        + "\n".join(body)
        + "\n\\end{document}\n"
    )


def _figure(f: PaperFigure) -> str:
    return (
        f"\\begin{{figure}}[htbp]\n\\centering\n\\includegraphics{{{f.path('pdf')}}}\n"
        f"\\caption{{{latex.text(f.caption)}}}\n\\label{{{f.label}}}\n\\end{{figure}}"
    )


PREAMBLE = r"""\documentclass[{options}]{{article}}
% Written by cctk export --latex: every table (tables/) and figure (figures/) of one run, with its caption.
\usepackage[T1]{{fontenc}}
\usepackage{{lmodern}}
\usepackage[margin=0.75in,columnsep=0.25in]{{geometry}}
\usepackage{{booktabs}}
\usepackage{{array}}
\usepackage{{longtable}}
\usepackage{{graphicx}}
\title{{{title}}}
\date{{}}
\begin{{document}}
\maketitle
\noindent Every table (\texttt{{tables/}}) and figure (\texttt{{figures/}}) of the run, as \texttt{{cctk export
--latex}} wrote them; the figures' captions are also in \texttt{{captions.tex}} and \texttt{{captions.md}}.
"""
