"""``cctk compare``: finished pipelines side by side, across seeds and models.

``tables`` and ``figures`` are pure (runs in, DataFrames and figures out); ``gather`` pulls the
runs from MLflow; ``report`` writes the tables, figures and one HTML page.
"""
