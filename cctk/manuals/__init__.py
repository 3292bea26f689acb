"""The manuals, each in its room: ``registry`` (what a protocol is, and where each lives: resolved by
name, a manual imported only when it is asked for), ``v2/`` (manual 2.0.0: its design, Parts and
synthesis, catalog and labels) and ``v1/`` (manual 1.0.0, draw for draw)."""
