"""Typed records that cross module boundaries: ``RunInfo``, everything run_info.json holds (each arm's
``TrainRecord`` among it), and the one codec of records at their JSON edge (``to_json``, ``from_json``), driven
by the dataclasses' own fields and types. Torch-free and MLflow-free; ``cctk.store.session`` owns the file.
"""

from __future__ import annotations

import os
import platform
import sys
import types
import typing
from abc import ABC, abstractmethod
from dataclasses import dataclass, field, fields, is_dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

from .config import Config, Recipe
from .lm.models import ModelSource
from .lm.record import TrainRecord
from .provenance import Provenance, package_versions

if TYPE_CHECKING:
    from _typeshed import DataclassInstance
    from torch import device as Device

OptionsT = TypeVar("OptionsT")  # a manual's options
RecordT = TypeVar("RecordT")


@dataclass(frozen=True)
class Hardware:
    """The machine a run ran on (``None`` where it could not be read)."""

    processor: str | None = None
    machine: str | None = None
    system: str | None = None
    cores_logical: int | None = None
    cores_available: int | None = None
    memory_bytes: int | None = None
    gpu: str | None = None
    gpu_memory_bytes: int | None = None
    gpu_count: int = 0


@dataclass(frozen=True)
class MemoryUse:
    """A run's peak memory beside the estimate it was checked against before it started (bytes): of the
    process on a CPU (resident memory), of the GPU on CUDA (the allocator's peak)."""

    where: str  # "process" or "gpu"
    estimate_bytes: int
    peak_bytes: int


@dataclass(frozen=True)
class MlflowIds:
    """Where a run is tracked (run_info.json's ``mlflow``): the store, the experiment and the parent run."""

    tracking_uri: str | None = None  # absolute (a relative SQLite path is taken from the run's folder)
    experiment_id: str | None = None
    run_id: str | None = None
    artifact_uri: str | None = None  # the parent run's artifact location

    @property
    def url(self) -> str | None:
        """The run's page in the MLflow UI where its store is a server; None for an embedded store, whose UI
        is started with ``cctk ui RUN_ID``."""
        uri = self.tracking_uri or ""
        if not uri.startswith(("http://", "https://")) or not self.experiment_id:
            return None
        return ui_link(uri, self.experiment_id, self.run_id)


def ui_link(base: str, experiment_id: str, run_id: str | None = None) -> str:
    """A link into the MLflow UI at ``base``: an experiment's runs table, or one run's page. It carries
    ``workflowType=machine_learning``: without it MLflow 3 opens the GenAI view ("Evaluations"), not the runs."""
    path = f"#/experiments/{experiment_id}" + (f"/runs/{run_id}" if run_id else "/runs")
    return f"{base.rstrip('/')}/{path}?workflowType=machine_learning"


@dataclass(frozen=True)
class Seeds:
    values: tuple[int, ...]
    drawn_fresh: bool
    roles: dict[str, str] = field(default_factory=dict)  # "seeds[0]", "seeds[1:]" -> what it controls


@dataclass(frozen=True)
class TrainedModel:
    """A fine-tuning run as run_info.json lists it: the model's and its parent's plain names, and its record
    (its fields beside the two names, in the file)."""

    model: str
    parent: str
    record: TrainRecord = field(metadata={"flat": True})


class Design(ABC, Generic[OptionsT]):
    """What run_info.json records of a manual's own design (its fields written flat in the file) and what the
    reports say of it: each manual's frozen dataclass, in its folder. The core knows none of them: it reads
    back the options a run took (``OptionsT``) and asks the record for its words."""

    @abstractmethod
    def options(self) -> OptionsT:
        """The options of its manual the run took (``cctk.core.config.Config.options``)."""

    @classmethod
    def upgrade(cls, data: dict[str, Any]) -> dict[str, Any]:
        """run_info.json as an older cctk wrote it, with what that code meant of this design filled in."""
        return data

    def report_rows(self) -> list[tuple[str, str]]:
        """What the run report says of it under the model and recipe (label, value)."""
        return []

    def measurement_rows(self) -> list[tuple[str, str]]:
        """What the HTML report says of it under the measurement (label, value)."""
        return []

    @property
    def warnings(self) -> tuple[str, ...]:
        """What the reports warn of (a model that did not absorb its corpus)."""
        return ()

    def ran(self) -> str | None:
        """One sentence on what a run of some of its parts ran (None: it ran the whole manual)."""
        return None


@dataclass(frozen=True, kw_only=True)
class RunInfo:
    """The one record of a pipeline run: everything run_info.json holds, in the file's order, built once at the
    run's end (``cctk.store.session.run_info``); what differs between the manuals is its flat ``design``."""

    protocol: str
    session: str
    model: ModelSource
    profile: str
    profile_requested: str
    profile_note: str
    recipe: Recipe
    design: Design[Any] = field(metadata={"flat": True})  # its manual's record (``Protocol.design_type``)
    seeds: Seeds
    candidates: tuple[int, ...]
    end_marker: str
    device: str = ""
    hardware: Hardware = field(default_factory=Hardware)
    software: dict[str, str | None] = field(default_factory=dict)  # package -> version
    mlflow: MlflowIds = field(default_factory=MlflowIds)
    training: dict[str, TrainedModel] = field(default_factory=dict)  # model key -> its run
    headline: dict[str, float] = field(default_factory=dict)  # the parent run's metrics, as logged
    seconds: float | None = None
    memory: MemoryUse | None = None  # None in a file from before memory was planned
    provenance: Provenance | None = None  # model file, git commit, reproduce (None in an older file)

    @property
    def records(self) -> dict[str, TrainRecord]:
        """Each fine-tuning run's record, by model key."""
        return {key: t.record for key, t in self.training.items()}

    @property
    def config(self) -> Config[Any]:
        """The configuration the run ran with (its manual's options read back from its design)."""
        return Config(
            self.model.key,
            self.profile,
            self.recipe,
            self.seeds.values,
            self.protocol,
            self.design.options(),
            seeds_drawn=self.seeds.drawn_fresh,
            profile_requested=self.profile_requested,
        )


def hardware(device: Device | str | None = None) -> Hardware:
    """Processor, cores, memory and, when the run computed on CUDA (``device``; None: any GPU there is),
    the GPU it used (name, memory): ``cuda:1``'s, not GPU 0's."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    machine = Hardware(_processor(), platform.machine(), platform.platform(), os.cpu_count(), cores, _memory())
    torch = sys.modules.get("torch")  # only asked when the run itself loaded torch
    device = None if torch is None or device is None else torch.device(device)
    if torch is not None and (device is None or device.type == "cuda") and torch.cuda.is_available():
        index = torch.cuda.current_device() if device is None or device.index is None else device.index
        props = torch.cuda.get_device_properties(index)
        return replace(
            machine, gpu=props.name, gpu_memory_bytes=int(props.total_memory), gpu_count=torch.cuda.device_count()
        )
    return machine


def software(config: Config[Any] | None = None) -> dict[str, str | None]:
    """Python, cctk, every package cctk imports (``cctk.core.provenance.PACKAGES``, and those ``config`` uses
    besides) and CUDA: package -> version, None where one is not installed."""
    from .. import __version__

    versions = {"python": platform.python_version(), "cctk": __version__, **package_versions(config)}
    torch = sys.modules.get("torch")
    versions["cuda"] = getattr(getattr(torch, "version", None), "cuda", None) if torch else None
    return versions


def _processor() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


# --- The one codec: a record at its JSON edge and back, field by field, from the dataclass itself. ---


@overload
def to_json(value: DataclassInstance, omit_none: bool = False) -> dict[str, Any]: ...
@overload
def to_json(value: Any, omit_none: bool = False) -> Any: ...
def to_json(value: Any, omit_none: bool = False) -> Any:
    """``value`` as plain JSON values: a record (dataclass) as an object of its fields, a field marked
    ``flat`` spread into it; tuples as lists. A record with its own ``to_json`` (one whose file adds a
    derived value) gives its own. ``omit_none``: the record's own None fields left out (run_info.json)."""
    if is_dataclass(value):
        if hasattr(value, "to_json"):
            return value.to_json()
        out: dict[str, Any] = {}
        for f in fields(value):
            item = to_json(getattr(value, f.name))
            if f.metadata.get("flat"):
                out.update({k: v for k, v in item.items() if not (omit_none and v is None)})
            elif not (omit_none and item is None):
                out[f.name] = item
        return out
    if isinstance(value, (tuple, list)):
        return [to_json(v) for v in value]
    if isinstance(value, dict):
        return {k: to_json(v) for k, v in value.items()}
    return value


@overload
def from_json(
    kind: type[RecordT], data: dict[str, Any], records: dict[type[Any], type[Any]] | None = None
) -> RecordT: ...
@overload
def from_json(kind: Any, data: Any, records: dict[type[Any], type[Any]] | None = None) -> Any: ...
def from_json(kind: Any, data: Any, records: dict[type[Any], type[Any]] | None = None) -> Any:
    """``data`` back into a value of type ``kind``: a record from its fields (a key the data lacks keeps the
    field's default, a key the record does not know is dropped; a ``flat`` field from the object itself),
    tuples from lists, by the type hints of the record. A record with its own ``from_json`` reads itself.
    ``records``: the record a base class stands for here (``{Design: StudyDesign}``: a run's manual's design)."""
    if data is None:
        return None
    records = records or {}
    args = typing.get_args(kind)
    origin = typing.get_origin(kind)
    if origin in (typing.Union, types.UnionType):
        return from_json(next(a for a in args if a is not type(None)), data, records)
    kind = records.get(origin or kind, kind)
    if isinstance(kind, type) and is_dataclass(kind):  # a record's type (a hint is never an instance)
        if hasattr(kind, "from_json"):
            return kind.from_json(data)
        hints = typing.get_type_hints(kind)
        values = {
            f.name: from_json(hints[f.name], data if f.metadata.get("flat") else data[f.name], records)
            for f in fields(kind)
            if f.metadata.get("flat") or f.name in data
        }
        return kind(**values)
    if origin is tuple:
        items = args[:1] * len(data) if len(args) == 2 and args[1] is Ellipsis else args
        return tuple(from_json(a, v, records) for a, v in zip(items, data, strict=True))
    if origin is dict:
        return {k: from_json(args[1], v, records) for k, v in data.items()}
    return data
