"""Outputs of a run (SPEC 4): figures, tables, workbook, run_info.json, run report, HTML report, zip.

DataFrames in, files out: no model, no MLflow. ``rebuild`` goes back from a session folder.
"""
from .session import model_heatmaps, rebuild, write_all

__all__ = ["model_heatmaps", "rebuild", "write_all"]
