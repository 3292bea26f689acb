"""cctk compare on a fixture of logged runs: two sessions written from synthetic results, logged as
the pipeline cells of a sweep; the comparison is read back from MLflow and checked by hand."""

from __future__ import annotations

import re

import mlflow
import pandas as pd
import pytest
from builders import RUN, synthetic_results, write_session
from click.testing import CliRunner

from cctk.cli.main import cli
from cctk.core.errors import CctkError
from cctk.manuals.configure import make_config
from cctk.manuals.v2.parts import compute_tables
from cctk.store import tracking


@pytest.fixture
def logged_sweep(tmp_path, tracking_uri):
    """A sweep run with two finished pipeline cells (seeds 7 and 8), their sessions as artifacts."""
    store = tracking.connect()
    experiment = store.experiment()
    sweep = store.start(experiment, "sweep", {"cctk.kind": "sweep"})
    sweep.params({"cells": 3})  # as a sweep logs its grid's size
    tables = {}
    for seed in (7, 8):
        results = synthetic_results(seed)
        tables[seed] = compute_tables(results)
        run = {**RUN, "session": f"20260102-03040{seed}_tiny"}
        folder = write_session(
            tmp_path / "sessions",
            results,
            tables[seed],
            make_config("smollm2-135m-bundled", "smoke", (seed,)),
            run,
            figures=False,
        )
        cell = store.start(
            experiment,
            folder.name,
            {"cctk.kind": "pipeline", "cctk.sweep": sweep.run_id, "cctk.cell": f"tiny|seed={seed}"},
            parent=sweep,
        )
        cell.files(folder)
        cell.end()
    store.start(
        experiment,
        "unfinished",
        {"cctk.kind": "pipeline", "cctk.sweep": sweep.run_id, "cctk.cell": "tiny|seed=9"},
        parent=sweep,
    )  # left RUNNING: not compared
    sweep.end()
    return sweep.run_id, tables


def test_compare_a_sweep(tmp_path, logged_sweep, tracking_uri, monkeypatch):
    monkeypatch.setenv("CCTK_CACHE", str(tmp_path / "cache"))
    sweep_id, tables = logged_sweep
    read = []  # the sweep's run, read once for its cells and its planned count (was twice)
    sweep_of = tracking.Store.sweep
    monkeypatch.setattr(tracking.Store, "sweep", lambda self, run_id: read.append(run_id) or sweep_of(self, run_id))
    result = CliRunner().invoke(cli, ["compare", "--sweep", sweep_id, "--out", str(tmp_path / "cmp")])
    assert result.exit_code == 0, result.output
    assert read == [sweep_id]
    # the third cell never finished: said (it said "comparing 2 pipelines ...", as of a whole grid)
    assert result.output.startswith(
        f"comparing 2 pipelines (2 of the sweep's 3 cells finished: cctk sweep --resume {sweep_id} runs the rest) ..."
    )
    cross = pd.read_csv(tmp_path / "cmp" / "tables" / "cross_seed" / "cross_seed.csv").set_index("model")
    assert len(cross) == 14 and (cross["runs"] == 2).all()
    for model in ("correct sums", "sum + 3 from fabricated answers"):
        shares = [t["table09"].set_index(["model", "group"])["share"] for t in tables.values()]
        group, column = ("all", "all_mean") if model == "correct sums" else ("held out", "heldout_mean")
        assert cross.loc[model, column] == pytest.approx(sum(s[model, group] for s in shares) / 2, abs=1e-12)
    for name in (
        "findings",
        "per_run",
        "cross_seed",
        "rule_vs_control_pooled",
        "heldout_pooled",
        "implausibility_distance",
        "implausibility_possible",
    ):
        assert {p.suffix for p in (tmp_path / "cmp" / "tables" / name).iterdir()} == {".csv", ".xlsx", ".tex"}
    for name in ("forest", "cross_model", "implausibility"):
        assert {p.suffix for p in (tmp_path / "cmp" / "figures" / name).iterdir()} == {".png", ".pdf", ".eps"}
    page = (tmp_path / "cmp" / "compare.html").read_text()
    assert page.count("data:image/png;base64,") == 3 and "cross_seed" in page
    # its tables as report.html and the LaTeX print them (before: the CSV's column names, hits and n apart)
    headers = set(re.findall(r"<th[^>]*>([^<]+)</th>", page))
    shown = {"Rule hits", "Control hits", "p (exact CMH)", "p (Holm)", "Odds ratio (MH)", "Runs for 80% power"}
    assert shown <= headers
    assert not {h for h in headers if re.fullmatch(r"[a-z0-9]+(_[a-z0-9]+)+", h)}, headers
    assert not re.search(r">\d+/\d+ \(\d+%\)</td>", page)  # every share of hits with its exact interval (SPEC 3)
    assert re.search(r">\d+/\d+ \(\d+%, [\d.]+\u2013[\d.]+%\)</td>", page)  # a count, share, interval in one cell
    # the console summary opens with the findings: one line per contrast (six rules, two seeds)
    lines = result.output.splitlines()
    start = lines.index("findings across seeds:")
    assert [
        line.split(": ")[1] in ("SUPPORTED", "INCONSISTENT", "NOT SUPPORTED") for line in lines[start + 1 : start + 7]
    ] == [True] * 6
    client = mlflow.MlflowClient(tracking_uri)
    (run,) = client.search_runs([client.get_experiment_by_name("cctk").experiment_id], "tags.`cctk.kind` = 'compare'")
    assert run.data.tags["mlflow.parentRunId"] == sweep_id and len(run.data.params["runs"].split(",")) == 2
    assert (
        lines[-2].endswith(f"; MLflow run {run.info.run_id}") and lines[-1] == f"MLflow UI: cctk ui {run.info.run_id}"
    )
    logged = {a.path for a in client.list_artifacts(run.info.run_id, "figures/forest")}
    assert logged == {f"figures/forest/forest.{ext}" for ext in ("png", "pdf", "eps")}


def test_compare_needs_one_source(tmp_path, tracking_uri):
    for args in ([], ["--sweep", "a", "--runs", "b"]):
        result = CliRunner().invoke(cli, ["compare", *args, "--out", str(tmp_path / "c")])
        assert result.exit_code != 0 and "needs --sweep ID or --runs" in result.output


def test_compare_protocol_v1_runs(tmp_path, tracking_uri, monkeypatch):
    """Two 1.0.0 runs (seeds 42 and 43): their three numbers, averaged over the runs by hand (figures as PNG
    only: test_compare_a_sweep checks all three formats)."""
    from builders import write_v1_session

    monkeypatch.setenv("CCTK_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr("cctk.figures.common.FORMATS", ("png",))
    store = tracking.connect()
    experiment = store.experiment()
    ids, means = [], []
    for seed in (42, 43):
        layout, _, tables, _ = write_v1_session(
            tmp_path / f"s{seed}", seed, {**RUN, "session": f"2026-v1-{seed}"}, rng_seed=seed, figures=False
        )
        run = store.start(experiment, layout.session, {"cctk.kind": "pipeline", "cctk.protocol": "v1"})
        run.files(layout.folder)
        run.end()
        ids.append(run.run_id)
        means.append(tables["table02"].set_index("number")["mean"])
    result = CliRunner().invoke(cli, ["compare", "--runs", ",".join(ids), "--out", str(tmp_path / "cmp")])
    assert result.exit_code == 0, result.output
    table = pd.read_csv(tmp_path / "cmp" / "tables" / "v1_three_numbers" / "v1_three_numbers.csv").set_index("number")
    assert (table["runs"] == 2).all() and len(table) == len(means[0])
    for number in table.index:
        assert table.loc[number, "mean"] == pytest.approx((means[0][number] + means[1][number]) / 2, abs=1e-12)
    assert not (tmp_path / "cmp" / "tables" / "cross_seed").exists()  # no 2.0.0 run among them
    # the three numbers and table02's check row, which the caption names too (it named three only)
    from cctk.manuals.v1.compare import CAPTION

    assert "pre_ft_fabricated_prob" in table.index and "as a check, the base model's probability of the" in CAPTION
    # Before: lo, hi beside hits and n, so compare.html and the LaTeX printed the mean's t interval as the hits'
    # (8/162 (5%, 6-7%)): the hits are a count with their share; the mean carries its own interval
    number = table.index[0]
    mean, lo, hi, hits, n = table.loc[number, ["mean", "mean_lo", "mean_hi", "hits", "n"]]
    tex = (tmp_path / "cmp" / "tables" / "v1_three_numbers" / "v1_three_numbers.tex").read_text()
    from cctk.outputs import latex

    assert f" & {int(hits)}/{int(n)} ({latex.percent(hits / n)}\\%) " in tex and lo < mean < hi
    assert f" & {latex.number(mean)} ({latex.number(lo)}--{latex.number(hi)}) & " in tex


def test_v1_three_numbers_sum_each_runs_hits():
    """The hits of each number pooled over two 1.0.0 runs (seeds 42 and 43) are the sum of each run's hits, out of
    2 x 81 additions: pooled as the larger run's hits they went unnoticed (a mutation audit). Each run's hits are
    counted here from its measurement tables: additions whose answer (true sum or fabricated answer) has the
    largest probability."""
    from builders import v1_results

    from cctk.manuals.pooled import PooledRun
    from cctk.manuals.v1 import experiment
    from cctk.manuals.v1.compare import three_numbers
    from cctk.manuals.v1.manual import V1

    def hits(results, key, answer):
        answers = results.draws.fabricated
        if answer == "true sum":
            answers = pd.Series([a + b for a, b in answers.index], index=answers.index)
        table = results.measurements[key].merge(answers.rename("answer").reset_index(), on=["a", "b"])
        largest = table.groupby(["a", "b"])["prob"].transform("max")
        return int(((table["candidate_value"] == table["answer"]) & (table["prob"] == largest)).sum())

    runs = [PooledRun.of(f"run-{seed}", "tiny", seed, V1, v1_results(seed, rng_seed=seed)) for seed in (42, 43)]
    table = three_numbers(runs).set_index("number")
    for number, key, answer in (
        ("pre_ft_true_prob", experiment.BEFORE, "true sum"),
        ("post_ft_fabricated_prob", experiment.AFTER, "fabricated answer"),
        ("post_ft_true_prob", experiment.AFTER, "true sum"),
        ("pre_ft_fabricated_prob", experiment.BEFORE, "fabricated answer"),
    ):
        each = [hits(r.results, key, answer) for r in runs]
        assert (table.loc[number, "hits"], table.loc[number, "n"]) == (sum(each), 2 * 81), (number, each)
        assert table.loc[number, "runs"] == 2
    assert table.loc["pre_ft_true_prob", "hits"] > 81  # more than either run can have: a sum, not a maximum


def test_compare_reads_a_v1_run_from_before_issue_21(tmp_path, tracking_uri, monkeypatch):
    """A 1.0.0 run logged before its fine-tuned model had its own key, compared with one of today's (figures
    as PNG only: test_compare_a_sweep checks all three formats)."""
    from builders import v1_results, write_v1_session, write_v1_session_before_issue_21

    from cctk.manuals.v1 import experiment

    monkeypatch.setenv("CCTK_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr("cctk.figures.common.FORMATS", ("png",))
    store = tracking.connect()
    old = write_v1_session_before_issue_21(tmp_path / "old")
    new, _, tables, _ = write_v1_session(
        tmp_path / "new", 43, {**RUN, "session": "2026-v1-43"}, rng_seed=43, figures=False
    )
    ids = []
    for folder in (old, new.folder):
        run = store.start(store.experiment(), folder.name, {tracking.KIND: "pipeline", tracking.PROTOCOL: "v1"})
        run.files(folder)
        run.end()
        ids.append(run.run_id)
    result = CliRunner().invoke(cli, ["compare", "--runs", ",".join(ids), "--out", str(tmp_path / "cmp")])
    assert result.exit_code == 0, result.output
    table = pd.read_csv(tmp_path / "cmp" / "tables" / "v1_three_numbers" / "v1_three_numbers.csv").set_index("number")
    means = [
        experiment.compute_tables(v1_results())["table02"].set_index("number")["mean"],
        tables["table02"].set_index("number")["mean"],
    ]
    assert (table["runs"] == 2).all()
    for number in table.index:
        assert table.loc[number, "mean"] == pytest.approx((means[0][number] + means[1][number]) / 2, abs=1e-12)


def test_compare_refuses_a_run_given_twice(tmp_path, tracking_uri):
    """``--runs X,X`` would count X twice in every pooled number (held-out n 48 for 24): refused in one
    line naming X, before any compare run exists."""
    store = tracking.connect()
    run = store.start(store.experiment(), "a pipeline", {"cctk.kind": "pipeline"})
    run.end()
    result = CliRunner().invoke(cli, ["compare", "--runs", f"{run.run_id},{run.run_id}", "--out", str(tmp_path / "c")])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert result.output.strip() == f"Error: --runs names {run.run_id} more than once; give each run once"
    assert [r.tags.get("cctk.kind") for r in store.search([store.experiment()], "")] == ["pipeline"]


def test_a_sweep_and_its_comparison_load_in_python(tmp_path, logged_sweep, tracking_uri, monkeypatch):
    """Before: `cctk.results.load(SWEEP_ID)` said "give the parent run of a `cctk run`", and neither a sweep's
    pipelines nor a comparison's tables had a loader (a paper read compare's CSVs by their paths)."""
    import numpy as np

    import cctk.results

    monkeypatch.setenv("CCTK_CACHE", str(tmp_path / "cache"))
    sweep_id, tables = logged_sweep
    cells = cctk.results.load_sweep(sweep_id)
    assert list(cells) == ["tiny|seed=7", "tiny|seed=8"]  # the finished cells by key; the RUNNING one left out
    for seed, loaded in zip((7, 8), cells.values(), strict=True):
        assert loaded.info.config.seed == seed
        np.testing.assert_array_equal(loaded.tables["table09"]["share"], tables[seed]["table09"]["share"])
    result = CliRunner().invoke(cli, ["compare", "--sweep", sweep_id, "--out", str(tmp_path / "cmp")])
    assert result.exit_code == 0, result.output
    (compare_id,) = re.findall(r"MLflow run ([0-9a-f]{32})$", result.output, re.MULTILINE)
    by_folder = cctk.results.load_compare(tmp_path / "cmp")
    by_run = cctk.results.load_compare(compare_id)  # its artifacts, downloaded into the cache
    assert by_run.folder == tmp_path / "cache" / "cctk" / "runs" / compare_id
    written = sorted(p.name for p in (tmp_path / "cmp" / "tables").iterdir())
    assert sorted(by_folder.tables) == sorted(by_run.tables) == written and "findings" in written
    for name in written:
        pd.testing.assert_frame_equal(
            by_run.tables[name], pd.read_csv(tmp_path / "cmp" / "tables" / name / f"{name}.csv")
        )
        pd.testing.assert_frame_equal(by_folder.tables[name], by_run.tables[name])
    assert by_folder.runs is not None and by_folder.runs.seed.tolist() == [7, 8]
    assert by_folder.runs.run_id.tolist() == [r.info.run_id for r in _cells(sweep_id)]
    assert set(by_run.figures) == {"forest", "cross_model", "implausibility"}
    assert set(by_run.figure_files["forest"]) == {"png", "pdf", "eps"} and by_run.figures["forest"].is_file()
    with pytest.raises(KeyError, match=r"no table 'finding' in this comparison \(did you mean 'findings'\?\)"):
        by_run.tables["finding"]
    first, second = _cells(sweep_id)
    with pytest.raises(CctkError) as refused:  # a report, an export or a citation takes a cell's run
        cctk.results.load(sweep_id)
    assert str(refused.value) == (
        f"MLflow run {sweep_id} is a sweep (tag cctk.kind is 'sweep'), not a pipeline: give one of its cells' "
        f"pipeline runs, {first.info.run_id} (tiny|seed=7), {second.info.run_id} (tiny|seed=8); "
        f"cctk.results.load_sweep('{sweep_id}') reads them all"
    )
    with pytest.raises(CctkError, match=rf"not a pipeline: cctk.results.load_compare\('{compare_id}'\) reads its"):
        cctk.results.load(compare_id)
    with pytest.raises(CctkError, match=rf"^MLflow run {sweep_id} is not a cctk compare"):
        cctk.results.load_compare(sweep_id)
    with pytest.raises(CctkError, match="is not the folder of a cctk compare"):
        cctk.results.load_compare(tmp_path / "sessions")
    with pytest.raises(CctkError, match=r"^'cmpx' is neither a compare folder nor a run in the MLflow store \("):
        cctk.results.load_compare("cmpx")  # a folder's name mistyped: it said only "no run 'cmpx'"
    with pytest.raises(CctkError, match=r"^no cell 'tiny\|seed=9' in this sweep"):  # a bare KeyError before
        cells["tiny|seed=9"]


def _cells(sweep_id: str) -> list:
    """The sweep's finished cells, by cell key."""
    client = mlflow.MlflowClient()
    found = client.search_runs(
        [client.get_experiment_by_name("cctk").experiment_id], f"tags.`cctk.sweep` = '{sweep_id}'"
    )
    cells = [r for r in found if r.data.tags["cctk.kind"] == "pipeline" and r.info.status == "FINISHED"]
    return sorted(cells, key=lambda r: r.data.tags["cctk.cell"])


def test_a_comparison_replaces_the_one_its_folder_held(tmp_path, logged_sweep, tracking_uri, monkeypatch):
    """A second comparison into the same --out left the first one's tables and figures beside its own: read by
    cctk.results.load_compare and logged to its MLflow run as its own (a findings table of other runs). Now
    its own entries replace the earlier ones whole; the folder's other files stay and are not logged; a
    folder holding tables/ no comparison wrote is refused before any work."""
    from cctk import results

    monkeypatch.setenv("CCTK_CACHE", str(tmp_path / "cache"))
    sweep_id, _ = logged_sweep
    out = tmp_path / "cmp"
    (out / "tables" / "stale").mkdir(parents=True)
    (out / "tables" / "stale" / "stale.csv").write_text("a\n1\n")
    (out / "figures" / "stale").mkdir(parents=True)
    (out / "compare.html").write_text("an earlier comparison")
    (out / "notes.txt").write_text("mine")
    result = CliRunner().invoke(cli, ["compare", "--sweep", sweep_id, "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert not (out / "tables" / "stale").exists() and not (out / "figures" / "stale").exists()
    assert "stale" not in results.load_compare(out).tables and (out / "notes.txt").read_text() == "mine"
    assert not [p for p in out.iterdir() if p.name.startswith(".compare-")]  # the scratch folder gone
    client = mlflow.MlflowClient(tracking_uri)
    (run,) = client.search_runs([client.get_experiment_by_name("cctk").experiment_id], "tags.`cctk.kind` = 'compare'")
    assert {a.path for a in client.list_artifacts(run.info.run_id)} == {"runs.csv", "compare.html", "tables", "figures"}
    assert "tables/stale" not in {a.path for a in client.list_artifacts(run.info.run_id, "tables")}

    session = tmp_path / "session"
    (session / "tables").mkdir(parents=True)
    refused = CliRunner().invoke(cli, ["compare", "--sweep", sweep_id, "--out", str(session)])
    assert refused.exit_code == 1 and refused.output == (
        f"Error: {session} holds tables/ that no comparison wrote (no compare.html beside them), which a "
        "comparison there would replace: give an empty folder or an earlier comparison's\n"
    )
    assert [p.name for p in session.iterdir()] == ["tables"]


def test_a_fault_while_a_comparison_is_written_leaves_the_earlier_one_whole(tmp_path):
    from cctk.outputs import comparison

    (tmp_path / "tables" / "kept").mkdir(parents=True)
    (tmp_path / "compare.html").write_text("the earlier one")

    def fails() -> None:
        with comparison.replacing(tmp_path) as into:
            (into / "tables" / "new").mkdir(parents=True)
            raise RuntimeError("a figure failed")

    with pytest.raises(RuntimeError, match="a figure failed"):
        fails()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["compare.html", "tables"]
    assert [p.name for p in (tmp_path / "tables").iterdir()] == ["kept"]
    with comparison.replacing(tmp_path) as into:
        (into / "compare.html").write_text("the new one")  # no tables this time: the earlier ones go too
    assert sorted(p.name for p in tmp_path.iterdir()) == ["compare.html"]
    assert (tmp_path / "compare.html").read_text() == "the new one"
