"""targets.csv: the draws of a run on one page (split, every target table, exclusions), written,
read back and loaded with the results."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from builders import run_info_before_issue_21

from cctk import results
from cctk.core.config import NoOptions
from cctk.manuals.v1.manual import NotebookDesign
from cctk.manuals.v2.design import build_study_inputs, targets_table
from cctk.manuals.v2.manual import V2, StudyDesign
from cctk.store import session

HEADER = (
    "a,b,split,correct sum,fabricated answer,sum + 18,sum + 3,sum + random offset 1..18,sum + random offset 1..3,"
    "conditional rule,shuffled conditional answers,excluded"
)


@pytest.fixture(scope="module")
def inputs():
    return build_study_inputs(12345)


def test_targets_csv_line_by_line(tmp_path, inputs):
    [path] = session.write_draws(session.Layout(tmp_path / "s", V2), inputs)
    assert path == tmp_path / "s" / "targets.csv"
    lines = path.read_text().splitlines()
    assert lines[0] == HEADER and len(lines) == 82
    # 2+1: sum 3, fabricated 6 (= sum + 3: left out of that arm's held-out results), offsets 1 and 1,
    # the rule's 3 + 18 (2 >= 1), its shuffled answer 24
    assert lines[1 + 9] == "2,1,held out,3,6,21,6,4,4,21,24,sum + 3 from fabricated answers"
    assert lines[1 + 26] == "3,9,held out,12,30,30,15,26,14,21,18,sum + 18 from fabricated answers"  # 3 < 9: + 9
    assert lines[1 + 32] == "4,6,held out,10,13,28,13,18,11,19,27,sum + 3 from fabricated answers"
    assert lines[1] == "1,1,seen,2,27,20,5,9,3,20,25,"
    assert lines[-1] == "9,9,seen,18,31,36,21,35,21,36,23,"


def test_targets_csv_reads_back_as_the_draws(tmp_path, inputs):
    layout = session.Layout(tmp_path / "s", V2)
    session.write_draws(layout, inputs)
    table = session.read_targets(layout)
    pd.testing.assert_frame_equal(table, targets_table(inputs))
    assert list(zip(table["a"], table["b"], strict=True)) == [(a, b) for a in range(1, 10) for b in range(1, 10)]
    held = table[table["split"] == "held out"]
    assert list(zip(held["a"], held["b"], strict=True)) == list(inputs.split.heldout)
    assert table["split"].value_counts().to_dict() == {"seen": 57, "held out": 24}
    assert (table["sum + 18"] == table["correct sum"] + 18).all()
    assert (table["fabricated answer"] != table["correct sum"]).all()
    excluded = table[table["excluded"] != ""]
    assert excluded[["a", "b", "excluded"]].to_numpy().tolist() == [
        [2, 1, "sum + 3 from fabricated answers"],
        [3, 9, "sum + 18 from fabricated answers"],
        [4, 6, "sum + 3 from fabricated answers"],
    ]
    assert set(excluded["split"]) == {"held out"}  # only held-out additions are left out


def test_an_addition_left_out_by_two_arms_names_both(tmp_path):
    """Seed 3: 5+8's fabricated answer (22) is both the rule's answer (13 + 9) and its shuffled one."""
    layout = session.Layout(tmp_path / "s", V2)
    session.write_draws(layout, build_study_inputs(3))
    table = session.read_targets(layout).set_index(["a", "b"])
    assert table.loc[(5, 8), "excluded"] == (
        "conditional rule from fabricated answers;control for the conditional rule from fabricated answers"
    )
    assert table.loc[(5, 8), ["fabricated answer", "conditional rule", "shuffled conditional answers"]].tolist() == [
        22,
        22,
        22,
    ]


def test_results_load_gives_the_targets(tmp_path, inputs):
    folder = tmp_path / "20260102-030405_smollm2-135m-bundled"
    layout = session.Layout(folder, V2)
    session.write_draws(layout, inputs)
    (folder / "run_info.json").write_text(json.dumps(run_info_before_issue_21()))  # a file of the code before
    loaded = results.load(folder)
    pd.testing.assert_frame_equal(loaded.targets, targets_table(inputs))
    assert session.read_targets(session.Layout(tmp_path / "empty", V2)) is None


def test_sessions_started_in_the_same_second_get_their_own_folders(tmp_path):
    """Two cells of a Ray sweep started in one second once shared a folder and overwrote each other's
    checkpoints; every session now creates its folder exclusively."""
    from concurrent.futures import ThreadPoolExecutor
    from datetime import datetime

    from cctk.store.session import new_folder

    now = datetime(2026, 11, 30, 19, 0, 20)
    with ThreadPoolExecutor(4) as pool:
        folders = list(pool.map(lambda _: new_folder(tmp_path / "out", "org/model", now), range(6)))
    names = sorted(f.name for f in folders)
    assert names == ["20261130-190020_org_model"] + [f"20261130-190020_org_model-{n}" for n in range(2, 7)]
    assert all(f.is_dir() and not any(f.iterdir()) for f in folders)


def test_run_info_goes_through_one_codec_and_back(written_session):
    """run_info.json is written from a RunInfo and read back into the same record, its design its manual's own
    record (another manual's fields are none of its own, and none is in the file)."""
    folder, _, _ = written_session
    info = session.read_run_info(folder)
    assert session.info_from_json(session.info_json(info)) == info
    assert isinstance(info.design, StudyDesign) and info.design.parts == ("A", "B", "C", "D")
    assert not hasattr(info.design, "index") and "index" not in json.loads((folder / "run_info.json").read_text())
    assert info.config == session.rebuild(folder).info.config


def test_a_run_info_written_before_issue_21_reads_as_todays(written_session):
    """The file the code before issue 21 wrote for the same run (no protocol key) gives the same record,
    but for the machine it was written on and the quick recipe of its day (5 epochs, 6 since issue 19)."""
    from dataclasses import replace

    from builders import run_info_before_issue_21

    from cctk.manuals.v2.config import PROFILES

    folder, _, _ = written_session
    today, before = session.read_run_info(folder), session.info_from_json(run_info_before_issue_21("v2"))
    assert "protocol" not in run_info_before_issue_21("v2")
    assert before.recipe == replace(PROFILES["quick"], epochs=5)
    # the synthetic losses come from np.exp, whose last bit differs between CPUs (numpy picks a SIMD path by
    # CPU; the file was written on another machine, and an AMD EPYC without AVX-512 differs): to 1e-12, then exact
    for key, trained in before.training.items():
        assert trained.record.losses == pytest.approx(today.training[key].record.losses, rel=1e-12, abs=0)
    training = {
        key: replace(t, record=replace(t.record, losses=today.training[key].record.losses))
        for key, t in before.training.items()
    }
    assert (
        replace(before, hardware=today.hardware, software=today.software, recipe=today.recipe, training=training)
        == today
    )


def test_a_run_info_written_before_issue_56_reads_its_stores_uri_redacted(written_session):
    """A file whose run was given a database's URI with its password, written before cctk redacted it: read back
    (a report drawn again, a citation), the password is not there."""
    folder, _, _ = written_session
    data = json.loads((folder / "run_info.json").read_text())
    data["mlflow"] = {**data["mlflow"], "tracking_uri": "postgresql+psycopg2://cctk:S3cret@db.lab/cctk?sslmode=require"}
    info = session.info_from_json(data)
    assert info.mlflow.tracking_uri == "postgresql+psycopg2://cctk:***@db.lab/cctk?sslmode=require"


def test_a_v1_run_info_from_before_issue_21_reads_its_model_under_its_own_key():
    from builders import run_info_before_issue_21

    old = run_info_before_issue_21("v1")
    assert list(old["training"]) == ["m_random"]  # the key it shared with 2.0.0's fabricated-answers model
    info = session.info_from_json(old)
    assert list(info.training) == ["v1_random"] and info.training["v1_random"].record.losses == (1.9,)
    assert info.config.protocol == "v1" and info.config.options == NoOptions()
    assert isinstance(info.design, NotebookDesign) and not hasattr(info.design, "holdout")
    assert (info.design.answer_text, info.design.index, info.design.pairs_plotted) == (
        " {v}",
        "mean",
        ((3, 5), (5, 8), (7, 4)),
    )


def test_training_records_and_checkpoints_are_named_by_the_models_plain_name(tmp_path):
    """Written today: training/correct_sums.json and checkpoints/correct_sums.pt (SPEC: file names in plain
    language); a session written before 2026-12-07 named both by key (training/m_correct.json), and manual 1.0.0's
    before issue 21 by the key it shared with 2.0.0 (training/m_random.json): read where that file is there."""
    from cctk.core.lm.record import TrainRecord
    from cctk.manuals.v1.manual import V1

    layout = session.Layout(tmp_path / "new", V2)
    record = TrainRecord(1620, 203, 81.0, (2.0, 0.5), 0)
    assert session.write_training(layout, "m_correct", record) == tmp_path / "new/training/correct_sums.json"
    assert session.read_training(layout, "m_correct") == record
    assert layout.checkpoint("c18_correct") == tmp_path / "new/checkpoints/sum_plus_18_from_correct_sums.pt"
    old = session.Layout(tmp_path / "old", V2)
    (old.folder / "training").mkdir(parents=True)
    (old.folder / "training" / "m_correct.json").write_text(json.dumps(record.to_json()))
    assert old.training("m_correct").name == "m_correct.json" and session.read_training(old, "m_correct") == record
    assert old.training("m_random").name == "fabricated_answers.json"  # none there: today's name
    v1 = session.Layout(tmp_path / "v1", V1)
    (v1.folder / "training").mkdir(parents=True)
    (v1.folder / "training" / "m_random.json").write_text(json.dumps(record.to_json()))
    assert session.read_training(v1, "v1_random") == record
    assert [p.name for p in v1.named("training", "v1_random", ".json")] == [
        "fabricated_answers.json",
        "v1_random.json",
        "m_random.json",
    ]
