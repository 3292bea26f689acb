"""The one codec of records at their JSON edge (cctk.core.records.to_json / from_json), driven by the
dataclasses' fields and types: nested records, flat fields, tuples, optional values, defaults for what a
file lacks, unknown keys dropped; and RunInfo through it, in the file's order."""

from __future__ import annotations

import dataclasses
import json

import pytest

from cctk.core.records import Design, MlflowIds, RunInfo, TrainedModel, TrainRecord, from_json, to_json


@dataclasses.dataclass(frozen=True)
class Inner:
    pairs: tuple[tuple[int, int], ...]
    note: str | None = None


@dataclasses.dataclass(frozen=True)
class Outer:
    name: str
    inner: Inner = dataclasses.field(metadata={"flat": True})
    by_key: dict[str, Inner] = dataclasses.field(default_factory=dict)
    maybe: Inner | None = None
    count: int = 7


def test_a_record_goes_to_json_and_back_field_by_field():
    value = Outer("x", Inner(((1, 2), (3, 4))), {"k": Inner(((5, 6),), "n")}, None, 3)
    data = to_json(value)
    assert data == {
        "name": "x",
        "pairs": [[1, 2], [3, 4]],
        "note": None,
        "by_key": {"k": {"pairs": [[5, 6]], "note": "n"}},
        "maybe": None,
        "count": 3,
    }
    assert json.loads(json.dumps(data)) == data
    assert from_json(Outer, data) == value
    assert to_json(value, omit_none=True) == {
        "name": "x",
        "pairs": [[1, 2], [3, 4]],
        "by_key": {"k": {"pairs": [[5, 6]], "note": "n"}},
        "count": 3,
    }


def test_what_a_file_lacks_keeps_its_default_and_what_it_adds_is_dropped():
    back = from_json(Outer, {"name": "y", "pairs": [[9, 9]], "written_by_a_later_cctk": 1})
    assert back == Outer("y", Inner(((9, 9),)))
    with pytest.raises(TypeError, match="'name'"):  # a field without a default must be there
        from_json(Outer, {"pairs": []})


def test_a_record_with_its_own_edge_keeps_it():
    """TrainRecord writes examples_per_second beside its fields; TrainedModel spreads it beside two names."""
    record = TrainRecord(40, 6, 2.0, (1.5, 1.25), 0, 0.06, 900)
    data = to_json(TrainedModel("correct sums", "base model", record))
    assert list(data)[:4] == ["model", "parent", "examples", "steps"] and data["examples_per_second"] == 40.0
    assert from_json(TrainedModel, data) == TrainedModel("correct sums", "base model", record)


def test_a_training_record_written_before_issue_55_reads_without_a_reserved_peak():
    """#55 added the GPU allocator's reserved peak to a training record: a record written before reads as 0
    (not measured, so never logged), one from a GPU keeps it through its file."""
    from builders import BEFORE_ISSUE_21

    data = json.loads((BEFORE_ISSUE_21 / "v1_training_m_random.json").read_text())
    assert "peak_gpu_reserved_bytes" not in data
    old = TrainRecord.from_json(data)
    assert old.peak_gpu_reserved_bytes == 0 and "peak_gpu_reserved_bytes" not in old.metrics()
    assert "peak_gpu_reserved_bytes" not in old.to_json()  # written back as it was (tests/store/test_landed.py)
    on_cuda = dataclasses.replace(old, peak_gpu_memory_bytes=2**30, peak_gpu_reserved_bytes=2**30 + 2**20)
    assert TrainRecord.from_json(json.loads(json.dumps(on_cuda.to_json()))) == on_cuda


def test_run_info_is_written_in_its_fields_order_design_flat_and_absent_values_left_out(written_session):
    from cctk.store import session

    folder, _, _ = written_session
    info = session.read_run_info(folder)
    data = session.info_json(info)
    assert isinstance(info.design, Design) and type(info.design) is not Design  # its manual's own record
    design = [f.name for f in dataclasses.fields(info.design)]  # 2.0.0's: every field of its record, none None
    expected = []
    for f in dataclasses.fields(RunInfo):
        if f.name == "design":
            expected += design
        elif getattr(info, f.name) is not None:
            expected.append(f.name)
    assert list(data) == expected
    assert design == ["holdout", "curves", "parts", "heldout_additions", "warnings"]
    assert session.info_from_json(data) == info and isinstance(info.mlflow, MlflowIds)


def test_a_base_class_field_reads_as_the_record_it_stands_for():
    """``from_json(..., {Base: Record})``: a field typed by a base class (RunInfo's design) reads as the record of
    the run's manual, flat or nested."""

    @dataclasses.dataclass(frozen=True)
    class Holder:
        name: str
        design: Design = dataclasses.field(metadata={"flat": True})

    @dataclasses.dataclass(frozen=True)
    class Mine(Design):
        pairs: tuple[tuple[int, int], ...]

        def options(self) -> None:
            return None

    back = from_json(Holder, {"name": "x", "pairs": [[1, 2]]}, {Design: Mine})
    assert back == Holder("x", Mine(((1, 2),))) and to_json(back) == {"name": "x", "pairs": [[1, 2]]}
