"""Manual 2.0.0 in its room: the study design, declared once (``design``: each arm's parent, target,
corpus and part), Parts A-D and the synthesis (``parts/``), the figure catalog (``catalog``), the words
of its tables and reports (``labels``) and the protocol value itself (``manual``: ``V2``)."""
