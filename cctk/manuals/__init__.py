"""The manuals, each one folder and one class: ``registry`` (what a manual is: ``Protocol``, the abstract base each
implements; the one list of them, resolved by name, a manual imported only when it is asked for; the default),
``pooled`` (finished runs pooled across seeds, for every manual's comparison), ``v2/`` (manual 2.0.0: its
configuration, facts, design, Parts and synthesis, comparison across runs, catalog and labels) and ``v1/`` (manual
1.0.0, draw for draw)."""
