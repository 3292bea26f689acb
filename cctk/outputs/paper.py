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

import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from ..core.errors import CctkError, unknown_key
from ..core.labels import file_stem
from ..figures.common import lean_fonts, paper_style
from ..figures.spec import Spec
from ..figures.style import WIDTHS, Style, notes, paper
from ..store import session
from . import latex, render
from .latex import latex_text

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
    return " ".join([f"{title}.", about.get(spec.kind, ""), *figure_notes]).strip()


def draw(spec: Spec, folder: Path, style: Style, about: dict[str, str], prefix: str = "") -> PaperFigure:
    """Draw one figure in ``style`` into ``folder`` (PDF and PNG at its exact size); its caption."""
    fig = spec.draw(**spec.args, style=style)
    stem = f"{spec.number:02d}_{spec.stem}"
    folder.mkdir(parents=True, exist_ok=True)
    with paper_style(), lean_fonts():  # TrueType fonts in the PDF: its text stays text
        for ext in FORMATS:
            fig.savefig(folder / f"{stem}.{ext}", dpi=300)  # no tight box: the width stays the journal's
            fig.set_layout_engine("none")  # laid out once, by the first save: the PNG keeps those places
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is not None:
        pyplot.close(fig)
    return PaperFigure(spec.number, stem, f"fig:{prefix}{spec.stem}", caption(spec, about, notes(fig)))


def write_figures(
    rebuilt: session.Rebuilt, out: Path, style: Style, only: tuple[Spec, ...] | None = None
) -> list[PaperFigure]:
    """Every figure of a rebuilt session in ``style`` under ``out/figures``, and ``captions.tex`` / ``.md``;
    ``only``: these figures alone, their captions put in place of their own in the caption files there."""
    manual, spec = rebuilt.manual, rebuilt.manual.spec
    specs = (
        list(only) if only is not None else manual.figures(rebuilt.results, rebuilt.tables, rebuilt.info.config.model)
    )
    about = {**spec.figure_about, **spec.paper_figure_about}
    job = partial(draw, folder=Path(out) / "figures", style=style, about=about, prefix=spec.label_prefix)
    drawn = render.run_all(job, specs, eps=False)
    if only is None:
        (Path(out) / "captions.tex").write_text(captions_tex(drawn), encoding="utf-8")
        (Path(out) / "captions.md").write_text(captions_md(drawn), encoding="utf-8")
    elif drawn:
        _replace_blocks(Path(out) / "captions.tex", TEX_BLOCK, {f.number: captions_tex([f]) for f in drawn}, "\n")
        _replace_blocks(Path(out) / "captions.md", MD_BLOCK, {f.number: captions_md([f]) for f in drawn}, "")
    return drawn


TEX_BLOCK = re.compile(r"^% Figure (\d+): ", re.M)  # the first line of a figure's block in captions.tex
MD_BLOCK = re.compile(r"^\*\*Figure (\d+)\*\* ", re.M)  # and in captions.md


def _replace_blocks(path: Path, start: re.Pattern[str], new: dict[int, str], sep: str) -> None:
    """The figure blocks of a caption file (each opened by a line ``start`` matches, numbered), those of
    ``new`` put in place of the blocks of the same number or added, in number order."""
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    marks = list(start.finditer(text))
    blocks = {
        int(m[1]): text[m.start() : marks[i + 1].start() if i + 1 < len(marks) else len(text)].rstrip("\n") + "\n"
        for i, m in enumerate(marks)
    }
    if sep == "":  # Markdown paragraphs end in a blank line
        blocks = {number: block + "\n" for number, block in blocks.items()}
    blocks.update(new)
    path.write_text(sep.join(blocks[number] for number in sorted(blocks)), encoding="utf-8")


def captions_tex(figures: list[PaperFigure]) -> str:
    """One ``\\caption{}`` and ``\\label{}`` per figure, each after a comment naming its file."""
    blocks = [
        f"% Figure {f.number}: {f.path('pdf')}\n\\caption{{{latex_text(f.caption)}}}\n\\label{{{f.label}}}\n"
        for f in figures
    ]
    return "\n".join(blocks)


def captions_md(figures: list[PaperFigure]) -> str:
    return "".join(f"**Figure {f.number}** (`{f.path('pdf')}`, label `{f.label}`). {f.caption}\n\n" for f in figures)


def write_tables(rebuilt: session.Rebuilt, out: Path, only: Sequence[str] | None = None) -> list[PaperTable]:
    """Every table (``only``: those named) as ``tables/tableNN.tex``."""
    (Path(out) / "tables").mkdir(parents=True, exist_ok=True)
    written = [
        PaperTable(name, *latex.manual_table(rebuilt.manual.spec, name, table))
        for name, table in rebuilt.tables.items()
        if only is None or name in only
    ]
    for table in written:
        (Path(out) / table.path).write_text(table.tex, encoding="utf-8")
    return written


@dataclass(frozen=True)
class Written:
    folder: Path
    figures: list[PaperFigure]
    tables: list[PaperTable]
    note: str = ""  # what an --only render left as it was


def _start(source: Path, out: Path, width: str, option: str) -> tuple[Style, session.Rebuilt]:
    """The paper style of ``width`` and the rebuilt session, once ``out`` is known to take files."""
    if width not in WIDTHS:
        raise CctkError(f"unknown figure width {width!r}; choose one of: {', '.join(WIDTHS)}")
    session.check_out(Path(out), option)
    return paper(width), session.rebuild(Path(source))


def pick(rebuilt: session.Rebuilt, only: Sequence[str], tables: bool = True) -> tuple[tuple[Spec, ...], list[str]]:
    """The figures and tables ``--only`` names, in their order: a figure by its file name (``synthesis``,
    ``24_synthesis``), a table by its name (``table09``) or its title (``synthesis shares``, ``synthesis_shares``).
    A name of neither is a one-line error naming the closest and every name there is."""
    manual = rebuilt.manual
    specs = manual.figures(rebuilt.results, rebuilt.tables, rebuilt.info.config.model)
    figures = {name: spec for spec in specs for name in (spec.stem, f"{spec.number:02d}_{spec.stem}")}
    titles = manual.spec.titles
    named = {
        alias.lower(): name
        for name in rebuilt.tables
        for alias in (name, titles[name], file_stem(titles[name]), session.table_stem(name, manual))
    }
    asked = [word.strip() for word in only if word.strip()]
    for word in asked:
        if word in figures or (word.lower() in named and tables):
            continue
        if word.lower() in named:
            raise CctkError(
                f"{word} is a table: cctk report --style paper draws the figures; cctk export writes tables"
            )
        known = [spec.stem for spec in specs] + (list(rebuilt.tables) if tables else [])
        raise unknown_key("figure or table" if tables else "figure", word, known, " in this run")
    chosen = {figures[w].number: figures[w] for w in asked if w in figures}
    return tuple(chosen[n] for n in sorted(chosen)), sorted({named[w.lower()] for w in asked if w not in figures})


def figures(source: Path, out: Path, width: str = "column", only: Sequence[str] = ()) -> Written:
    """``cctk report --style paper``: every figure of a session folder in paper style, with its captions
    (``only``: those figures, their captions replaced in the caption files)."""
    style, rebuilt = _start(source, out, width, "--out")
    chosen = pick(rebuilt, only, tables=False)[0] if only else None
    return Written(Path(out), write_figures(rebuilt, out, style, chosen), [])


def export(source: Path, out: Path, width: str = "column", only: Sequence[str] = ()) -> Written:
    """``cctk export --latex``: the figures in paper style, every table and a paper.tex that inputs them
    (``only``: those figures and tables; their captions replaced in the caption files and in paper.tex)."""
    style, rebuilt = _start(source, out, width, "--latex")
    _check_same_run(Path(out), rebuilt)
    if only:
        return _export_only(rebuilt, Path(out), style, *pick(rebuilt, only))
    drawn = write_figures(rebuilt, out, style)
    tables = write_tables(rebuilt, out)
    tex = paper_tex(rebuilt.info.config.model, rebuilt.info.session, tables, drawn, style)
    (Path(out) / "paper.tex").write_text(tex, encoding="utf-8")
    return Written(Path(out), drawn, tables)


def _check_same_run(out: Path, rebuilt: session.Rebuilt) -> None:
    """One line, before anything is written, where ``out`` holds another run's export (its paper.tex's title
    names another session): the figures and tables of that run which this one lacks would stay there beside this
    one's paper.tex, and ``--only`` would mix the two. An export of the same run is written again."""
    tex = out / "paper.tex"
    if not tex.is_file():
        return
    found = re.search(r"^\\title\{(.*)\}$", tex.read_text(encoding="utf-8"), re.M)
    mine = _title(rebuilt.info.session, rebuilt.info.config.model)
    if found is not None and found[1] != mine:
        raise CctkError(
            f"{out} holds the export of another run ({found[1].replace(chr(92), '')}, its paper.tex's title): give "
            "another folder (an export holds one run; --only updates the export of the same run)"
        )


def _title(session_name: str, model: str) -> str:
    """paper.tex's title: the run's session and model."""
    return latex_text(f"cctk run {session_name} ({model})")


def _export_only(
    rebuilt: session.Rebuilt, out: Path, style: Style, specs: tuple[Spec, ...], names: list[str]
) -> Written:
    """The figures and tables picked, into an export folder: each figure's block of paper.tex replaced (the
    tables are ``\\input`` there: their files are the whole of them)."""
    drawn = write_figures(rebuilt, out, style, specs)
    tables = write_tables(rebuilt, out, names)
    path = out / "paper.tex"
    if not path.is_file():
        return Written(out, drawn, tables, "no paper.tex there: cctk export without --only writes it")
    text = path.read_text(encoding="utf-8")
    for f in drawn:
        block = re.compile(
            r"\\begin\{figure\}\[htbp\]\n\\centering\n\\includegraphics\{"
            + re.escape(f.path("pdf"))
            + r"\}\n.*?\\end\{figure\}",
            re.S,
        )
        text = block.sub(_figure(f).replace("\\", "\\\\"), text, count=1)  # a template: its backslashes doubled
    path.write_text(text, encoding="utf-8")
    return Written(out, drawn, tables)


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
    return PREAMBLE.format(options=options, title=_title(session_name, model)) + "\n".join(body) + "\n\\end{document}\n"


def _figure(f: PaperFigure) -> str:
    return (
        f"\\begin{{figure}}[htbp]\n\\centering\n\\includegraphics{{{f.path('pdf')}}}\n"
        f"\\caption{{{latex_text(f.caption)}}}\n\\label{{{f.label}}}\n\\end{{figure}}"
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
