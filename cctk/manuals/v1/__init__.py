"""Manual 1.0.0, draw for draw (``cctk run --protocol v1``), in its folder: the manual itself (``manual``:
``NotebookManual``, its value ``V1`` and its design record), its configuration (``config``: profiles and the
notebook's seed), facts (candidates, answer text, the reference notebook's ``random.seed`` draws), corpus
(whole-text rows), experiment (the comparison table and its readings), compare (the three numbers across runs) and
catalog (the before/after bars and the loss chart). Measurement and fine-tuning are cctk's own.
"""
