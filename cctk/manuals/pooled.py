"""Finished runs pooled across seeds, as every comparable manual's comparison reads them (``Comparable.compare``:
a list of ``PooledRun``, its answer a ``Comparison``).

Runs are pooled within a group only: one base model and one value of every recipe value that differs between the
runs compared (``grouped``); every table of a comparison names its group in its first columns. Pure: runs in,
DataFrames out. ``cctk compare`` (``cctk.compare``) gathers the runs from MLflow and writes what each manual
computes of its own.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from .manual import Comparison, PooledRun, R, RecipeValue

# A group of runs by its columns (``group_columns``): its base model, and its value of every varied recipe value
# (None where a run logged none).
Label = dict[str, RecipeValue | None]
__all__ = ["Comparison", "Label", "PooledRun", "group_columns", "grouped", "stacked", "varied"]

# --- Groups: runs are pooled only within a base model and one value of every recipe value that varies. ---


def varied(runs: list[PooledRun[Any]]) -> list[str]:
    """The recipe values that differ between ``runs`` (as each run logged them), in the recipe's order."""
    names = dict.fromkeys(name for r in runs for name in r.recipe)
    return [name for name in names if len({r.recipe.get(name) for r in runs}) > 1]


def group_columns(runs: list[PooledRun[Any]]) -> list[str]:
    """The columns that name a group in every table across runs: the base model, then the varied recipe values."""
    return ["base_model", *varied(runs)]


def grouped(runs: list[PooledRun[R]]) -> list[tuple[Label, list[PooledRun[R]]]]:
    """(label, runs) of every group, by base model (alphabetical) then recipe values (ascending).

    ``label`` maps each of ``group_columns(runs)`` to the group's value, e.g. ``{"base_model": "tiny",
    "learning_rate": 0.0003}``; runs of different labels are never pooled.
    """
    columns = group_columns(runs)
    groups: dict[tuple[Any, ...], list[PooledRun[R]]] = {}
    for r in runs:
        groups.setdefault((r.model, *(r.recipe.get(c) for c in columns[1:])), []).append(r)
    return [(dict(zip(columns, key, strict=True)), groups[key]) for key in sorted(groups)]


def stacked(runs: list[PooledRun[Any]], name: str) -> pd.DataFrame:
    """Table ``name`` of every run that has it (a part not run has none), with its run id."""
    frames = [r.tables[name].assign(run_id=r.run_id) for r in runs if name in r.tables]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
