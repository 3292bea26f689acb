"""Manual 2.0.0 in its folder: the manual itself (``manual``: ``StudyManual``, its value ``V2`` and its design record),
its configuration (``config``: profiles, parts, held-out share, options), its own facts (``facts``), the study
design, declared once (``design``: each arm's parent, target, corpus and part), Parts A-D and the synthesis
(``parts/``), its comparison across runs (``compare/``), the figure catalog (``catalog``) and the words of its
tables and reports (``labels``)."""
