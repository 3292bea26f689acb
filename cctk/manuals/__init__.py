"""The manuals, each one folder and one class: ``manual`` (what a manual is: ``Manual``, a ``ManualSpec`` and ten
methods about its science, and its optional capabilities), ``registry`` (the one list of them, cctk's own and those
other packages register by entry point, resolved by name, a manual imported only when it is asked for; the default
and the legacy one), ``configure`` and ``words`` (a run of any manual configured and announced), ``pooled`` (finished
runs pooled across seeds, for every manual's comparison), ``v2/`` (manual 2.0.0: its configuration, facts, design,
Parts and synthesis, charts, comparison across runs, catalog and labels) and ``v1/`` (manual 1.0.0, draw for
draw)."""
