"""From a run to a paper (cctk.outputs.paper): figures in paper style with their captions, the tables, and a
paper.tex that pdflatex compiles without an error (TeX Live: .ci/run installs it where it is missing)."""

from __future__ import annotations

import math
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from builders import synthetic_results
from click.testing import CliRunner

from cctk import results as results_module
from cctk.cli.main import cli
from cctk.figures.style import paper
from cctk.manuals.v2 import catalog
from cctk.manuals.v2.labels import PAPER_FIGURE_ABOUT, PAPER_TABLE_CAPTIONS
from cctk.manuals.v2.manual import V2
from cctk.manuals.v2.parts import compute_tables
from cctk.outputs import latex, paper as paper_module
from cctk.store.session import Layout, rebuild

PDFLATEX = shutil.which("pdflatex")
needs_pdflatex = pytest.mark.skipif(
    PDFLATEX is None, reason="pdflatex is not installed (TeX Live: texlive-latex-recommended; .ci/run installs it)"
)
# A name as real runs have them: underscores, a percent sign, an ampersand.
ODD_NAME = "m_random_v2 (50% held out) & co"


def compile_tex(folder: Path) -> str:
    """pdflatex paper.tex twice (labels), halting on the first error; the log."""
    for _ in range(2):
        done = subprocess.run(
            [PDFLATEX, "-halt-on-error", "-interaction=nonstopmode", "paper.tex"],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=300,
        )
        log = (folder / "paper.log").read_text(errors="replace")
        assert done.returncode == 0, "\n".join(line for line in log.splitlines() if line.startswith("!"))[:2000]
    assert (folder / "paper.pdf").stat().st_size > 10_000
    return log


def overfull(log: str) -> list[float]:
    return [float(x) for x in re.findall(r"Overfull \\hbox \(([\d.]+)pt too wide\)", log)]


@pytest.fixture(scope="module")
def odd_tables():
    """The synthetic run's tables, with what real runs bring: an infinite odds ratio (already there), no test
    at all (NaN), a p below 0.001 and a model name with underscores and a percent sign."""
    tables = compute_tables(synthetic_results())
    table10 = tables["table10"].copy()
    table10.loc[1, ["odds_ratio", "p_value", "p_adjusted"]] = math.nan
    table10.loc[0, "rule"] = ODD_NAME
    tables["table10"] = table10
    assert (table10["odds_ratio"] == math.inf).any() and (table10["p_value"] < 0.001).any()
    return tables


@pytest.fixture(scope="module")
def two_figures(tmp_path_factory):
    """The loss chart and a heatmap drawn in paper style (column width), as export draws them."""
    results = synthetic_results()
    folder = tmp_path_factory.mktemp("paper")
    specs = {s.key: s for s in catalog.specs(results, compute_tables(results), "smollm2-135m-bundled")}
    drawn = [
        paper_module.draw(specs[k], folder / "figures", paper("column"), PAPER_FIGURE_ABOUT)
        for k in ("heatmap:m_recover", "loss")
    ]
    return folder, drawn


def test_a_paper_figure_has_its_files_and_caption(two_figures):
    folder, (heatmap, loss) = two_figures
    from PIL import Image

    with Image.open(folder / heatmap.path("png")) as image:
        assert image.size[0] == round(3.3 * 300)  # the column's width exactly, at 300 dpi
    pdf = (folder / loss.path("pdf")).read_bytes()
    assert pdf.startswith(b"%PDF") and b"/FontFile2" in pdf and b"/Type3" not in pdf  # TrueType: text stays text
    assert heatmap.label == "fig:heatmap_recovery" and heatmap.stem == "07_heatmap_recovery"
    assert heatmap.caption.startswith("Recovery: probability on the correct sum. Probability on the target in every")
    assert re.search(r"\d+ / 81 top choices on the target; seen \d+ / \d+; held out \d+ / \d+\.", heatmap.caption)
    assert loss.caption.startswith("Training loss per epoch. Training loss per epoch of every fine-tuning run")


def test_captions_tex_has_one_caption_and_label_per_figure(two_figures):
    _, drawn = two_figures
    tex = paper_module.captions_tex(drawn)
    assert tex.count("\\caption{") == 2 and tex.count("\\label{fig:") == 2
    assert "figures/07_heatmap_recovery.pdf" in tex and "0-100\\%" in tex
    md = paper_module.captions_md(drawn)
    assert md.count("**Figure ") == 2 and "`fig:training_loss`" in md


@needs_pdflatex
@pytest.mark.parametrize("width", ["column", "page"])
def test_paper_tex_compiles_with_every_table(tmp_path, odd_tables, two_figures, width):
    folder, drawn = two_figures
    shutil.copytree(folder / "figures", tmp_path / "figures")
    (tmp_path / "tables").mkdir()
    tables = []
    for name, table in odd_tables.items():
        tables.append(
            paper_module.PaperTable(
                name,
                f"tab:{name}",
                latex.latex(table, PAPER_TABLE_CAPTIONS[name], f"tab:{name}", V2.spec.column_headers),
            )
        )
        (tmp_path / tables[-1].path).write_text(tables[-1].tex)
    long = paper_module.PaperTable(
        "table12",
        "tab:table12",
        latex.latex(
            odd_tables["table09"].head(1).sample(81, replace=True, random_state=0),
            "81 rows: a longtable after \\onecolumn",
            "tab:table12",
            V2.spec.column_headers,
        ),
    )
    (tmp_path / long.path).write_text(long.tex)
    tex = paper_module.paper_tex(
        "smollm2_135m", "20260102-030405_smollm2-135m-bundled", [*tables, long], drawn, paper(width)
    )
    (tmp_path / "paper.tex").write_text(tex)
    assert ("twocolumn" in tex) == (width == "column") and "resizebox" not in tex
    log = compile_tex(tmp_path)
    assert overfull(log) == [], "every table fits its column or the page"
    assert "m\\_random\\_v2 (50\\% held out) \\& co" in (tmp_path / "tables" / "table10.tex").read_text()
    pages = int(re.search(r"Output written on paper.pdf \((\d+) pages", log).group(1))
    assert pages >= 4


def test_export_and_report_refuse_bad_input_before_any_work(tmp_path, written_session):
    folder = str(written_session[0])
    runner = CliRunner()
    for args, message in (
        (["export", folder], "Missing option '--latex'"),
        (["export", folder, "--latex", str(tmp_path), "--width", "wide"], "'wide' is not one of"),
        (["export", str(tmp_path / "nowhere"), "--latex", str(tmp_path)], "no session folder"),
        (["report", folder, "--style", "paper"], "needs --out DIR"),
        (["report", folder, "--width", "page"], "use it with --style paper"),
    ):
        result = runner.invoke(cli, args)
        assert result.exit_code != 0 and message in result.output, (args, result.output)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(Exception, match="unknown figure width 'wide'"):
        results_module.load(folder).to_latex(tmp_path / "out", width="wide")
    assert not (tmp_path / "out").exists()


@pytest.mark.integration
@needs_pdflatex
def test_to_latex_writes_a_paper_that_compiles(tmp_path, written_session):
    """``results.load(FOLDER).to_latex(DIR)``: 11 tables, 25 figures in paper style, captions, paper.tex."""
    paper_tex = results_module.load(written_session[0]).to_latex(tmp_path / "paper")
    out = paper_tex.parent
    assert sorted(p.name for p in (out / "tables").iterdir()) == [f"table{i:02d}.tex" for i in range(1, 12)]
    assert len(list((out / "figures").glob("*.pdf"))) == 25
    captions = (out / "captions.tex").read_text()
    assert captions.count("\\caption{") == 25 and captions.count("\\label{fig:") == 25
    text = paper_tex.read_text()
    assert text.count("\\input{tables/") == 11 and text.count("\\includegraphics{figures/") == 25
    log = compile_tex(out)
    assert overfull(log) == []


@pytest.mark.integration
@needs_pdflatex
def test_cli_export_and_report_in_paper_style(tmp_path, written_session):
    folder = str(written_session[0])
    result = CliRunner().invoke(cli, ["export", folder, "--latex", str(tmp_path / "tex"), "--width", "page"])
    assert result.exit_code == 0, result.output
    assert "11 tables, 25 figures and paper.tex" in result.output
    assert "twocolumn" not in (tmp_path / "tex" / "paper.tex").read_text()
    session = Layout(written_session[0], V2)
    for exported in sorted((tmp_path / "tex" / "tables").iterdir()):  # one writer: the session's .tex is the paper's
        assert exported.read_bytes() == session.table(exported.stem)["tex"].read_bytes()
    compile_tex(tmp_path / "tex")
    result = CliRunner().invoke(cli, ["report", folder, "--style", "paper", "--out", str(tmp_path / "figs")])
    assert result.exit_code == 0, result.output
    from PIL import Image

    with Image.open(tmp_path / "figs" / "figures" / "25_training_loss.png") as image:
        assert image.size[0] == round(3.3 * 300)
    assert (tmp_path / "figs" / "captions.md").read_text().count("**Figure ") == 25
    assert not (tmp_path / "figs" / "paper.tex").exists()


def test_only_re_renders_the_named_figures_and_tables_in_place(tmp_path, written_session):
    """Issue 48: ``--only`` draws the figures and writes the tables it names, and puts their captions in place
    of their own in captions.tex, captions.md and paper.tex, leaving every other block as it was."""
    out = tmp_path / "tex"
    out.mkdir()
    old = [
        paper_module.PaperFigure(7, "07_heatmap_recovery", "fig:heatmap_recovery", "An earlier caption."),
        paper_module.PaperFigure(24, "24_synthesis", "fig:synthesis", "A stale caption."),
    ]
    (out / "captions.tex").write_text(paper_module.captions_tex(old))
    (out / "captions.md").write_text(paper_module.captions_md(old))
    info = rebuild(written_session[0]).info  # an export of the same run (another's is refused)
    model, name = info.config.model, info.session
    (out / "paper.tex").write_text(paper_module.paper_tex(model, name, [], old, paper("column")))
    args = ["export", str(written_session[0]), "--latex", str(out), "--only", "synthesis, synthesis shares"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert (
        "re-rendered 24_synthesis, table09 in " in result.output
        and "(captions replaced in captions.tex, captions.md and paper.tex)" in result.output
    )
    assert sorted(p.name for p in (out / "figures").iterdir()) == ["24_synthesis.pdf", "24_synthesis.png"]
    assert [p.name for p in (out / "tables").iterdir()] == ["table09.tex"]
    md = (out / "captions.md").read_text()
    (caption,) = re.findall(r"^\*\*Figure 24\*\* \(.*?\)\. (.*)$", md, flags=re.M)
    assert caption.startswith("Synthesis: hits on each model's own target. For every model, the share")
    new = paper_module.PaperFigure(24, "24_synthesis", "fig:synthesis", caption)
    assert md == paper_module.captions_md([old[0], new])  # the other block kept, the order and format too
    assert (out / "captions.tex").read_text() == paper_module.captions_tex([old[0], new])
    assert (out / "paper.tex").read_text() == paper_module.paper_tex(model, name, [], [old[0], new], paper("column"))
    # report --style paper --only into a new folder: that figure and its caption alone
    result = CliRunner().invoke(
        cli,
        ["report", str(written_session[0]), "--style", "paper", "--out", str(tmp_path / "f"), "--only", "24_synthesis"],
    )
    assert result.exit_code == 0, result.output
    assert (tmp_path / "f" / "captions.md").read_text() == paper_module.captions_md([new])


def test_an_export_into_another_runs_export_is_refused_before_anything_is_written(tmp_path, written_session):
    """Two runs exported into one folder: the second's paper.tex named its own figures, the first's that it
    lacked stayed beside them under the names a paper includes, and --only mixed the two runs' files."""
    out = tmp_path / "tex"
    out.mkdir()
    other = paper_module.paper_tex("smollm2-135m-bundled", "20260101-000000_other", [], [], paper("column"))
    (out / "paper.tex").write_text(other)
    for args in ([], ["--only", "synthesis"]):
        result = CliRunner().invoke(cli, ["export", str(written_session[0]), "--latex", str(out), *args])
        assert result.exit_code == 1 and result.output == (
            f"Error: {out} holds the export of another run (cctk run 20260101-000000_other (smollm2-135m-bundled), "
            "its paper.tex's title): give another folder (an export holds one run; --only updates the export of the "
            "same run)\n"
        )
        assert sorted(p.name for p in out.iterdir()) == ["paper.tex"] and (out / "paper.tex").read_text() == other


def test_only_names_what_exists(tmp_path, written_session):
    folder = str(written_session[0])
    for args, message in (
        (
            ["export", folder, "--latex", str(tmp_path), "--only", "synthesys"],
            (
                "Error: no figure or table 'synthesys' in this run (did you mean 'synthesis'?); choose one of: "
                "heatmap_base_model, "
            ),
        ),
        (["export", folder, "--latex", str(tmp_path), "--only", " ,"], "Error: --only needs the names"),
        (
            ["report", folder, "--style", "paper", "--out", str(tmp_path), "--only", "table09"],
            "Error: table09 is a table",
        ),
        (["report", folder, "--only", "synthesis"], "Error: --only re-renders figures in paper style"),
    ):
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 1 and result.output.startswith(message), (args, result.output)
    assert list(tmp_path.iterdir()) == []
