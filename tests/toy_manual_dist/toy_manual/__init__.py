"""A third manual, written as a newcomer would write one outside cctk, to prove the contract whole: its own facts
(``facts``: the last digit and the tens digit of every sum), two arms, one table and one figure (``manual``), and
nothing of cctk changed to run it. Its distribution registers it (``../pyproject.toml``: the entry point
``toy = "toy_manual.manual:TOY"`` in group ``cctk.manuals``)."""
