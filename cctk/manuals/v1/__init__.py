"""Protocol v1: manual 1.0.0, draw for draw (``cctk run --protocol v1``).

Only what is 1.0.0's own: facts (candidates, answer text, the reference notebook's ``random.seed``
draws), corpus (whole-text rows), experiment (the comparison table and its readings) and catalog (the
before/after bars and the loss chart). The run itself is ``cctk.pipeline.stages``'s, its outputs
``cctk.outputs.write``'s, under ``cctk.manuals.v1.manual.V1``; measurement and fine-tuning are cctk's own.
"""
