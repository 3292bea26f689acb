"""Outputs of a run (SPEC 4), under any manual: its tables (``tables``: CSV, XLSX and LaTeX through ``latex``, and
the workbook), figures from its manual's catalog (drawn in parallel: ``render``), run_info.json, the one-page run
report (``run_report``), the HTML report (``html_report``) and the zip, written by ``write`` (``write_all``, and
``rerender``: ``cctk report``); a paper's figures, tables and paper.tex (``paper``: ``cctk export``).

DataFrames and records in, files out: no model, no MLflow. ``cctk.store.session`` owns the folder; what differs
between the manuals comes from each one's ``Manual``.
"""

from .write import model_heatmaps, rerender, write_all

__all__ = ["model_heatmaps", "rerender", "write_all"]
