"""table11 (fine-tuning runs) from hand-made training records."""

from __future__ import annotations

import math

import pandas as pd
from builders import assert_rows

from cctk.core.records import TrainRecord
from cctk.manuals.v2.design import ARMS
from cctk.manuals.v2.parts import StudyResults, runs


def test_table11_from_the_studys_records(study):
    # examples per second = examples x epochs / seconds: 1620 x 3 / 81, 1620 x 3 / 54, 1140 x 2 / 38
    assert_rows(
        runs.run(study.results)["table11"],
        [
            {
                "model": "correct sums",
                "model_key": "m_correct",
                "parent": "base model",
                "parent_key": "base",
                "examples": 1620,
                "steps": 203,
                "seconds": 81.0,
                "examples_per_second": 60.0,
                "loss_first_epoch": 2.0,
                "loss_last_epoch": 0.25,
                "peak_gpu_memory_bytes": 1024,
                "peak_cpu_memory_bytes": pd.NA,  # not measured: an empty cell
            },
            {
                "model": "fabricated answers",
                "model_key": "m_random",
                "parent": "correct sums",
                "parent_key": "m_correct",
                "examples": 1620,
                "steps": 203,
                "seconds": 54.0,
                "examples_per_second": 90.0,
                "loss_first_epoch": 3.0,
                "loss_last_epoch": 0.75,
                "peak_gpu_memory_bytes": 2048,
                "peak_cpu_memory_bytes": pd.NA,  # not measured: an empty cell
            },
            {
                "model": "recovery",
                "model_key": "m_recover",
                "parent": "fabricated answers",
                "parent_key": "m_random",
                "examples": 1140,
                "steps": 143,
                "seconds": 38.0,
                "examples_per_second": 60.0,
                "loss_first_epoch": 1.25,
                "loss_last_epoch": 0.5,
                "peak_gpu_memory_bytes": pd.NA,
                "peak_cpu_memory_bytes": pd.NA,  # not measured: an empty cell
            },
        ],
    )


def test_table11_every_arm_in_the_order_of_the_lineage(study):
    """Records given in reverse order come out in the lineage's order, each with its parent."""
    training = {
        arm.key: TrainRecord(
            100 + i, 10 + i, 2.0, (1.0 + i, 0.5, 0.1 * i), 7 * i, peak_cpu_memory_bytes=2**20 * (i % 2)
        )
        for i, arm in reversed(list(enumerate(ARMS)))
    }
    table = runs.run(StudyResults(study.inputs, {}, training))["table11"]
    assert table["model"].tolist() == [
        "correct sums",
        "fabricated answers",
        "recovery",
        "sum + 18 from correct sums",
        "sum + 18 from fabricated answers",
        "sum + 3 from correct sums",
        "sum + 3 from fabricated answers",
        "control for + 18",
        "control for + 3",
        "conditional rule from correct sums",
        "conditional rule from fabricated answers",
        "control for the conditional rule from correct sums",
        "control for the conditional rule from fabricated answers",
    ]
    assert (
        table["parent"].tolist()
        == ["base model", "correct sums", "fabricated answers"]
        + ["correct sums", "fabricated answers"] * 2
        + ["correct sums"] * 2
        + ["correct sums", "fabricated answers"] * 2
    )
    assert table["model_key"].tolist() == [
        "m_correct",
        "m_random",
        "m_recover",
        "c18_correct",
        "c18_random",
        "c3_correct",
        "c3_random",
        "c18ctl_correct",
        "c3ctl_correct",
        "d_correct",
        "d_random",
        "dctl_correct",
        "dctl_random",
    ]
    assert (
        table["parent_key"].tolist()
        == ["base", "m_correct", "m_random"]
        + ["m_correct", "m_random"] * 2
        + ["m_correct"] * 2
        + ["m_correct", "m_random"] * 2
    )
    assert table["examples"].tolist() == list(range(100, 113))
    assert table["examples_per_second"].tolist() == [(100 + i) * 3 / 2.0 for i in range(13)]
    assert table["loss_first_epoch"].tolist() == [1.0 + i for i in range(13)]
    assert table["loss_last_epoch"].tolist() == [0.1 * i for i in range(13)]
    # a peak not measured (0 in the record) is an empty cell, never a 0 that reads as a measurement
    assert table["peak_gpu_memory_bytes"].tolist() == [pd.NA] + [7 * i for i in range(1, 13)]
    assert table["peak_cpu_memory_bytes"].tolist() == [2**20 if i % 2 else pd.NA for i in range(13)]
    assert table["peak_cpu_memory_bytes"].dtype == "Int64"


def test_table11_a_run_timed_at_zero_seconds_has_no_rate(study):
    training = {"m_correct": TrainRecord(81, 11, 0.0, (1.0,), 0)}
    table = runs.run(StudyResults(study.inputs, {}, training))["table11"]
    assert len(table) == 1 and math.isnan(table.loc[0, "examples_per_second"])


def test_table11_peaks_as_written_read_and_printed(study, tmp_path):
    """The peaks are integers in the CSV where measured and empty cells where not; the run report prints
    the size or a dash."""
    from cctk.outputs.run_report import runs_table
    from cctk.store.session import read_table

    training = {
        "m_correct": TrainRecord(81, 11, 2.0, (1.0,), 0, peak_cpu_memory_bytes=3_156_926_464),
        "m_random": TrainRecord(81, 11, 2.0, (1.0,), 2**30),
    }
    table = runs.run(StudyResults(study.inputs, {}, training))["table11"]
    table.to_csv(tmp_path / "t.csv", index=False, lineterminator="\n")
    lines = (tmp_path / "t.csv").read_text().splitlines()
    assert lines[1].endswith(",,3156926464") and lines[2].endswith(",1073741824,")
    pd.testing.assert_frame_equal(read_table(tmp_path / "t.csv"), table)
    printed = runs_table(table)
    assert printed["Peak GPU memory"].tolist() == ["-", "1.0 GiB"]
    assert printed["Peak RSS"].tolist() == ["2.9 GiB", "-"]
