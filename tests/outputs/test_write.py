"""Outputs of a run, from synthetic measurements: 25 figures, 11 tables, reports, zip, rebuild."""

from __future__ import annotations

import dataclasses
import html
import json
import re
import zipfile
from itertools import pairwise
from pathlib import Path

import pandas as pd
import pytest
from builders import RUN, SEED, SESSION, figure_copier, write_session

from cctk.core.facts import CANDIDATES
from cctk.figures import spec as figure_spec
from cctk.manuals.v2 import catalog, labels as v2_labels
from cctk.manuals.v2.config import PROFILES
from cctk.manuals.v2.design import ARMS
from cctk.manuals.v2.manual import V2
from cctk.outputs import latex, model_heatmaps
from cctk.outputs.tables import write_tables
from cctk.store.session import Layout, rebuild


@pytest.fixture(scope="module")
def session(written_session):
    return written_session


@pytest.fixture
def copy_figures(monkeypatch, session):
    """Figures 'drawn' by copying the session's: for tests about everything but the drawing."""
    monkeypatch.setattr(figure_spec, "draw_and_save", figure_copier(session[0]))


def files_under(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_25_figures_each_in_its_folder(session):
    """Each as a 300 dpi PNG here (tests/integration/test_outputs_full.py: in PNG, PDF and EPS)."""
    folder, _, _ = session
    subfolders = sorted(p for p in (folder / "figures").iterdir())
    assert [p.name[:2] for p in subfolders] == [f"{i:02d}" for i in range(1, 26)]
    for sub in subfolders:
        assert sorted(p.name for p in sub.iterdir()) == [f"{sub.name[3:]}.png"]
    from PIL import Image

    with Image.open(subfolders[0] / f"{subfolders[0].name[3:]}.png") as png:
        assert [round(d) for d in png.info["dpi"]] == [300, 300]


def test_names_are_plain_language(session):
    folder, _, _ = session
    names = [p.name for p in (folder / "figures").iterdir()] + [p.name for p in (folder / "tables").iterdir()]
    names += [p.name for p in (folder / "measurements").iterdir()]
    internal = re.compile(r"(^|_)(m_correct|m_random|m_recover|d_correct|d_random)|c18|c3_|ctl|plus18")
    assert not [n for n in names if internal.search(n)]
    assert "07_heatmap_recovery" in names and "04_heatmap_fabricated_answers_on_the_correct_sum" in names
    assert "table11_fine_tuning_runs" in names and "sum_plus_18_from_correct_sums.csv" in names


def test_heatmaps_mark_heldout_only_for_models_trained_on_seen_additions(session):
    _, results, tables = session
    by_key = {spec.key: spec for spec in catalog.specs(results, tables, "m")}
    assert by_key["heatmap:m_recover"].args["heldout"] == results.inputs.heldout("m_recover")
    assert by_key["heatmap:c3_random"].args["heldout"] == results.inputs.heldout("c3_random")
    assert by_key["heatmap:m_random"].args["heldout"] is None
    assert by_key["heatmap:base"].args["fixed_scale"] is False
    assert by_key["heatmap:m_correct"].args["fixed_scale"] is True
    assert by_key["profile:cond"].args["band"] == (12, 36) and by_key["profile:fabricated"].args["band"] is None


def test_a_heatmaps_caption_names_only_the_colours_it_has(session):
    """report.html gave every heatmap the caption of green and orange held-out cells and hatched gray left-out
    ones, the base model's and the correct sums model's too, which have neither: each names what it draws."""
    folder, results, tables = session
    page = (folder / "report.html").read_text()
    shown = {}
    for spec in catalog.specs(results, tables, "m"):
        if spec.key.startswith("heatmap:"):
            found = re.search(rf'<span class="num">Figure {spec.number}\.</span> (.*?)</figcaption>', page)
            caption = html.unescape(found[1])
            held, left_out = "green and orange" in caption, "hatched gray" in caption
            assert held == bool(spec.args["heldout"]) and left_out == bool(spec.args["excluded"]), spec.key
            assert caption.endswith("Second line: target | chosen answer. " + v2_labels.READINGS["heatmap"])
            shown[spec.key] = (held, left_out)
    assert shown["heatmap:base"] == shown["heatmap:m_correct"] == (False, False)
    assert shown["heatmap:m_recover"] == (True, False) and (True, True) in shown.values()


def test_model_heatmaps(tmp_path, session):
    _, results, _ = session
    paths = model_heatmaps(results, "m_random", Layout(tmp_path, V2))
    assert sorted(p.relative_to(tmp_path / "figures").as_posix() for p in paths) == sorted(
        f"{folder}/{stem}.{ext}"
        for folder, stem in (
            ("03_heatmap_fabricated_answers", "heatmap_fabricated_answers"),
            ("04_heatmap_fabricated_answers_on_the_correct_sum", "heatmap_fabricated_answers_on_the_correct_sum"),
        )
        for ext in ("png", "pdf", "eps")
    )
    assert len(model_heatmaps(results, "base", Layout(tmp_path, V2))) == 3


def test_11_tables_in_three_formats_and_one_workbook(session):
    folder, _, tables = session
    subfolders = sorted((folder / "tables").iterdir())
    assert [p.name[:7] for p in subfolders] == [f"table{i:02d}" for i in range(1, 12)]
    for sub in subfolders:
        assert sorted(p.suffix for p in sub.iterdir()) == [".csv", ".tex", ".xlsx"]
        tex = (sub / f"{sub.name}.tex").read_text()
        how = latex.layout(latex.display(tables[sub.name[:7]], latex.LATEX, V2.spec.column_headers))
        assert tex.startswith(f"\\begin{{{how.environment}}}") and tex.rstrip().endswith(f"\\end{{{how.environment}}}")
        assert "\\caption{" in tex and f"\\label{{tab:{sub.name[:7]}}}" in tex and "\\toprule" in tex
        assert re.search(r"(?<!\\)_", tex.split("\\begin{tabular}")[1]) is None, "underscores escaped"
        assert "resizebox" not in tex and "tab:" in tex, sub.name  # set to fit, as the paper sets it
        assert tex.count("{") == tex.count("}")
    import openpyxl

    book = openpyxl.load_workbook(folder / "workbook" / f"{SESSION}.xlsx", read_only=True)
    assert book.sheetnames == [f"table{i:02d}" for i in range(1, 12)]
    back = pd.read_excel(folder / "workbook" / f"{SESSION}.xlsx", sheet_name="table04")
    assert list(back.columns) == list(tables["table04"].columns) and len(back) == len(tables["table04"])


def test_keys_in_the_machine_readable_files_labels_alone_on_the_pages(session):
    """table09's CSV and workbook sheet carry model_key, target_key and group_key beside their labels; its
    LaTeX table and report.html print the labels alone (the keys are for code that joins tables)."""
    folder, _, tables = session
    layout = Layout(folder, V2)
    csv = pd.read_csv(layout.table("table09")["csv"])
    assert list(csv.columns[:6]) == ["model", "model_key", "target", "target_key", "group", "group_key"]
    assert csv.loc[csv["group"] == "held out", "group_key"].unique().tolist() == ["heldout"]
    sheet = pd.read_excel(layout.workbook, sheet_name="table09")
    assert list(sheet.columns) == list(csv.columns)
    page = layout.report_html.read_text()
    for name in tables:
        tex = layout.table(name)["tex"].read_text()
        assert "key" not in tex.split("\\begin{tabular}")[1], name
    assert "model_key" not in page and ">m_recover<" not in page and ">heldout<" not in page
    assert ">recovery<" in page and ">held out<" in page


def test_table_files_are_the_same_bytes_when_written_again(tmp_path, session):
    folder, _, tables = session
    write_tables(tables, Layout(tmp_path / SESSION, V2))
    again, first = files_under(tmp_path / SESSION), files_under(folder)
    assert again == {name: first[name] for name in again}  # CSV, XLSX, LaTeX and the workbook


def test_run_report_is_one_page(session):
    folder, _, _ = session
    pdf = (folder / "run_report.pdf").read_bytes()
    assert len(re.findall(rb"/Type\s*/Page(?!s)", pdf)) == 1
    assert b"/FontFile2" in pdf  # text kept as text
    from PIL import Image

    with Image.open(folder / "run_report.png") as png:
        assert png.height > png.width  # one portrait page


def test_run_info_has_every_fact(session):
    folder, results, _ = session
    info = json.loads((folder / "run_info.json").read_text())
    assert {"processor", "cores_logical", "memory_bytes", "gpu", "gpu_memory_bytes"} <= set(info["hardware"])
    assert {"python", "torch", "transformers", "mlflow", "cctk", "cuda"} <= set(info["software"])
    assert info["model"]["key"] == "smollm2-135m-bundled" and "SmolLM2" in info["model"]["id"]
    assert (
        info["profile"] == "quick" and info["recipe"]["epochs"] == PROFILES["quick"].epochs and info["holdout"] == 0.3
    )
    assert info["seeds"]["values"] == [SEED] and "split" in info["seeds"]["roles"]["seeds[0]"]
    assert info["candidates"] == list(CANDIDATES) and info["end_marker"] == "\n"
    assert info["mlflow"] == {**{k: RUN[k] for k in ("tracking_uri", "experiment_id", "run_id")}, "artifact_uri": None}
    assert info["session"] == SESSION and info["seconds"] == RUN["seconds"]
    assert len(info["heldout_additions"]) == 24
    assert set(info["training"]) == {arm.key for arm in ARMS}
    for record in info["training"].values():
        assert {"examples", "steps", "train_seconds", "examples_per_second", "losses", "peak_gpu_memory_bytes"} <= set(
            record
        )
    assert info["training"]["m_recover"]["losses"] == list(results.training["m_recover"].losses)
    assert info["profile_note"] == "quick"


def test_html_report_is_self_contained(session):
    folder, _, tables = session
    page = (folder / "report.html").read_text()
    images = re.findall(r'<img src="([^"]+)"', page)
    assert len(images) == 25 and all(src.startswith("data:image/png;base64,") for src in images)
    assert not re.search(r'(src|href)\s*=\s*["\']?\s*(https?:)?//', page, re.I)
    assert "<link" not in page and "@import" not in page and "url(" not in page and "<script" not in page
    numbers = [int(n) for n in re.findall(r"Figure (\d+)\.", page)]
    assert numbers == sorted(numbers) and len(numbers) == 25
    for name in tables:
        assert f'id="{name}"' in page
    assert "What it controls" in page and str(SEED) in page
    # beside the synthesis, what one run can say, and the commands that turn seeds into findings
    synthesis = page[page.index('id="part-synthesis"') : page.index('id="part-runs"')]
    assert "One run supports within-run statements only" in synthesis
    info = json.loads((folder / "run_info.json").read_text())
    command = f"cctk sweep --models {info['model']['key']} --seeds 5 --profile {info['profile']}"
    assert command in synthesis and "cctk compare --sweep SWEEP_ID" in synthesis


def test_html_reports_warning_sits_at_the_top_before_the_contents(session):
    """A Part A model that did not absorb its corpus is said under the report's title, before its contents (it sat
    below the parameters and seeds, a screen down, where the README says the top)."""
    from builders import run_info

    from cctk.manuals.configure import make_config
    from cctk.outputs import html_report

    _, results, tables = session
    warning = "the correct sums model hits 9/81 correct sums, below 77/81: it did not absorb its corpus"
    info = run_info(make_config("smollm2-135m-bundled", "quick", (SEED,)), results)
    info = dataclasses.replace(info, design=dataclasses.replace(info.design, warnings=(warning,)))
    page = html_report.render(info, tables, [], V2.spec)
    said = page.index(f"<b>Warning:</b> {warning}.")
    assert page.index("<h1>") < said < page.index("<nav>") and page.count("<b>Warning:</b>") == 1


def test_html_tables_have_the_exports_plain_headers_and_the_figures_the_manuals_reading(session):
    """Issue 48: report.html's tables printed raw column names (hits_rule, lo_rule, p_adjusted, inf); now the
    export's headers and cells, in Unicode, with the captions in the words of those headers; every deviation
    chart's caption says what carries the information (manual 2.0.0, section 7.5)."""
    folder, _, tables = session
    page = (folder / "report.html").read_text()
    heads = {
        name: re.findall(r"<th [^>]*>(.*?)</th>", page[page.index(f'<h3 id="{name}"') :].split("</thead>")[0])
        for name in tables
    }
    assert heads["table10"] == ["Rule", "Control", "Rule hits", "Control hits", "Odds ratio", "p", "p (Holm)"]
    assert heads["table09"] == ["Model", "Target", "Group", "Hits"]
    assert heads["table08"][:4] == ["Model", "Control", "Coverage", "k (95% CI)"]
    for name, row in heads.items():
        assert not any("_" in h for h in row), (name, row)  # no raw column name left
    table10 = page[page.index('<h3 id="table10"') : page.index('<h3 id="table11"')]
    hits = tables["table10"].iloc[0]
    assert latex.count(hits.hits_rule, hits.n_rule, hits.lo_rule, hits.hi_rule, latex.PLAIN) in table10
    assert "\\%" not in table10 and "--" not in table10.split("<table")[1]  # no LaTeX left in the page
    assert "p (Holm): Holm-adjusted over the rules of this run" in table10  # the caption in the headers' words
    captions = re.findall(r'<figcaption><span class="num">Figure 2[23]\.</span> (.*?)</figcaption>', page)
    assert len(captions) == 2
    reading = (
        "so the 90% of its additions inside it is true by construction; what carries information is the "
        "half-width k and how many of the control&#39;s additions fall inside the same band."
    )
    assert all(reading in caption for caption in captions)


def test_zip_holds_the_whole_session(session):
    folder, _, _ = session
    with zipfile.ZipFile(folder / f"{SESSION}.zip") as archive:
        names = set(archive.namelist())
    expected = {f"{SESSION}/{name}" for name in files_under(folder) if name != f"{SESSION}.zip"}
    assert names == expected
    assert f"{SESSION}/run_info.json" in names and f"{SESSION}/measurements/recovery.csv" in names


def test_rebuild_gives_the_same_results_and_table_files(tmp_path, session, copy_figures):
    folder, results, tables = session
    back = rebuild(folder)
    assert set(back.tables) == set(tables)
    for name in tables:
        pd.testing.assert_frame_equal(back.tables[name], tables[name])
    assert back.results.training == results.training and back.info.config.seeds == (SEED,)
    assert back.info.mlflow.run_id == RUN["run_id"]
    copy = write_session(tmp_path, back.results, back.tables, back.info.config, RUN)
    first, second = files_under(folder), files_under(copy)
    for name, data in first.items():
        if name.startswith(("tables/", "workbook/")) or name in ("run_info.json",):
            assert second[name] == data, name


def test_cli_report_renders_again_from_the_folder(tmp_path, session, copy_figures, tracking_uri):
    from click.testing import CliRunner

    from cctk.cli.main import cli

    folder, _, _ = session
    result = CliRunner().invoke(cli, ["report", str(folder), "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    first, second = files_under(folder), files_under(tmp_path / SESSION)
    assert set(second) == set(first)
    assert all(second[n] == first[n] for n in first if n.startswith("tables/"))
    for source in (str(tmp_path / "nowhere"), "0123456789abcdef0123456789abcdef"):
        missing = CliRunner().invoke(cli, ["report", source])
        assert missing.exit_code != 0 and missing.output.strip().splitlines()[-1].startswith("Error:")


def test_cli_report_of_a_run_id_names_its_session_and_the_cache_it_rendered_in(
    tmp_path, session, copy_figures, tracking_uri, monkeypatch
):
    """`cctk report RUN_ID` re-renders the run's copy in the cache: its line named the cache's folder, the run id,
    as the session, and said nothing of where that was."""
    import mlflow
    from click.testing import CliRunner

    from cctk.cli.main import cli

    folder, _, _ = session
    monkeypatch.setenv("CCTK_CACHE", str(tmp_path / "cache"))
    client = mlflow.MlflowClient()
    experiment = client.create_experiment("runs", artifact_location=(tmp_path / "artifacts").as_uri())
    run_id = client.create_run(experiment, tags={"cctk.kind": "pipeline"}).info.run_id
    client.log_artifacts(run_id, str(folder))
    client.set_terminated(run_id)
    result = CliRunner().invoke(cli, ["report", run_id])
    assert result.exit_code == 0, result.output
    cached = tmp_path / "cache" / "cctk" / "runs" / run_id
    said = re.fullmatch(r"re-rendered 25 figures, 11 tables and the reports of (\S+) in \d+ s: (.+)\n", result.output)
    assert said is not None, result.output
    assert said[1] == SESSION and said[2] == (
        f"{cached} (the cache's copy of run {run_id}; --out DIR writes them there)"
    )
    mine = CliRunner().invoke(cli, ["report", str(folder), "--out", str(tmp_path / "mine")])
    assert f"the reports of {SESSION} in " in mine.output and mine.output.endswith(f": {tmp_path / 'mine' / SESSION}\n")


def test_cli_report_loads_no_torch(tmp_path, session):
    """`cctk report` re-renders a session with torch absent from sys.modules (figures copied, not drawn)."""
    import subprocess
    import sys

    folder, _, _ = session
    code = f"""
import sys
sys.path.insert(0, {str(Path(__file__).parents[1])!r})
from builders import figure_copier
from cctk.figures import spec as figure_spec
figure_spec.draw_and_save = figure_copier({str(folder)!r})
from cctk.cli.main import cli
try:
    cli(["report", {str(folder)!r}, "--out", {str(tmp_path)!r}], standalone_mode=False)
finally:
    print("torch loaded:", "torch" in sys.modules, "mlflow loaded:", "mlflow" in sys.modules)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "torch loaded: False mlflow loaded: False" in done.stdout
    assert (tmp_path / SESSION / "report.html").is_file()


@pytest.mark.parametrize("tiny", [False, True])
def test_no_cell_of_the_run_reports_runs_table_runs_into_the_next(session, tiny):
    """Before: 2.0.0's longest name, "control for the conditional rule from fabricated answers", ran into its
    parent's cell; and a last-epoch loss printed as 3.90x10^-4 (a seed trained to 81/81) ran its loss cell into
    the examples-per-second one ("27.50.949 -> 3.90x10^-4"). Each row's cells (and the header's), as drawn, end
    before the next one starts, the last inside the page's right margin."""
    from builders import run_info

    from cctk.manuals.configure import make_config
    from cctk.outputs import run_report

    _, results, tables = session
    info, spec = run_info(make_config("smollm2-135m-bundled", "quick", (SEED,)), results), V2.spec
    losses = {spec.model_name(key): list(record.losses) for key, record in results.training.items()}
    runs = run_report.fine_tuning_runs(info, spec, tables).copy()  # the session's table11, shared with others
    if tiny:  # as a run that absorbed prints them: 0.949 -> 3.90x10^-4; 1 234.5 examples a second, 27.9 GiB
        runs["loss_first_epoch"], runs["loss_last_epoch"] = 0.9493, 3.9012e-4
        runs["examples_per_second"], runs["peak_gpu_memory_bytes"], runs["peak_cpu_memory_bytes"] = 1234.5, 3e10, 2e9
    fig = run_report.draw(info, spec, runs, losses, [])
    rows: dict[float, list] = {}
    for text in fig.texts:
        rows.setdefault(round(text.get_position()[1], 6), []).append(text.get_window_extent())
    table = [sorted(boxes, key=lambda box: box.x0) for boxes in rows.values() if len(boxes) == 9]
    assert len(table) == 1 + len(ARMS)  # the header and a row a fine-tuning run
    assert max(box.x1 for boxes in table for box in boxes[:1]) > 0.3 * fig.bbox.width  # the longest name is there
    if tiny:
        assert any("10" in text.get_text() and "\u2192" in text.get_text() for text in fig.texts)
    for boxes in table:
        spans = [(round(box.x0), round(box.x1)) for box in boxes]
        assert all(left.x1 < right.x0 for left, right in pairwise(boxes)), spans
        assert boxes[-1].x1 <= 0.96 * fig.bbox.width


@pytest.mark.parametrize("warned", [False, True])
def test_the_run_reports_loss_chart_has_room_and_covers_no_text(session, warned):
    """Before: the chart had what the runs' table left at the page's foot, 0.085 of its height (a warning of
    three lines left 0.02: a strip). It now sits under the hardware and software blocks, left of the model's,
    at least ``CHART`` tall, and no text of the page falls inside it, its ticks and labels included."""
    from builders import run_info

    from cctk.manuals.configure import make_config
    from cctk.outputs import run_report

    _, results, tables = session
    info, spec = run_info(make_config("smollm2-135m-bundled", "quick", (SEED,)), results), V2.spec
    if warned:
        warning = "the correct sums model hits 9/81 correct sums, below 77/81: it did not absorb its corpus"
        info = dataclasses.replace(info, design=dataclasses.replace(info.design, warnings=(warning, warning)))
    losses = {spec.model_name(key): list(record.losses) for key, record in results.training.items()}
    fig = run_report.draw(info, spec, run_report.fine_tuning_runs(info, spec, tables), losses, ["correct sums"])
    fig.canvas.draw()
    (ax,) = fig.axes
    assert ax.get_position().height >= run_report.CHART
    chart = ax.get_tightbbox()  # the axes with its title, ticks, labels and legend
    assert chart is not None
    for text in fig.texts:
        box = text.get_window_extent()
        assert not chart.overlaps(box), text.get_text()
