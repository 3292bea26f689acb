"""Outputs of a run (SPEC 4): figures, tables, workbook, run_info.json, run report, HTML report, zip.

DataFrames and records in, files out: no model, no MLflow. ``cctk.store.session`` owns the folder.
"""

from .write import model_heatmaps, rerender, write_all

__all__ = ["model_heatmaps", "rerender", "write_all"]
