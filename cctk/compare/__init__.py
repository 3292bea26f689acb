"""``cctk compare``: finished pipelines side by side, across seeds and models.

``gather`` pulls the runs from MLflow and rebuilds them; each run's manual computes what its runs give across
seeds (``cctk.manuals.manual.Comparable.compare``: its tables, figures and findings); ``report`` writes them, with
the runs compared, as tables, figures and one HTML page; ``job`` is the command as a function.
"""
