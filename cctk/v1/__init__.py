"""Protocol v1: manual 1.0.0's pipeline, draw for draw (``cctk run --protocol v1``).

facts (candidates, answer text, the reference notebook's ``random.seed`` draws), corpus (whole-text
rows), experiment (the comparison table and its readings), outputs (tables, figures, reports) and
pipeline (the run). Measurement and fine-tuning are cctk's own (``cctk.scoring``, ``cctk.finetune``).
"""
